#!/usr/bin/env python3
"""An independent client for the kiln agent protocol, written from
docs/protocol.md alone (standard library only), and malformed input the
agent must survive. Prints PASS/FAIL lines.

usage: agent_raw.py vsock CID [PORT] | unix PATH | bridge PATH [PORT]
(bridge: a VMM's vsock socket, Firecracker style: "CONNECT <port>\\n",
then "OK <hostport>\\n")
"""
import os
import socket
import struct
import sys

# Message types and tags, from docs/protocol.md.
PING, EXEC, ATTACH, STAT = 0x01, 0x03, 0x04, 0x12
DATA, EOF = 0x40, 0x41
OK, ERROR, PONG, STARTED, STDOUT, STDERR, EXIT = 0x80, 0x81, 0x82, 0x84, 0x85, 0x86, 0x87
T_ID, T_PID, T_ARG, T_FLAGS, T_SIGNAL, T_CODE, T_PATH = 1, 2, 3, 9, 12, 13, 14
T_ERRNO, T_MESSAGE, T_VERSION, T_DATA = 26, 27, 33, 44
ENOENT, ESRCH, EPROTO, EMSGSIZE, EBADMSG, EOPNOTSUPP = 2, 3, 71, 90, 74, 95
RAW = {DATA, STDOUT, STDERR, 0x8b}
F_BACKGROUND = 0x04

failed = 0


def report(ok, name, detail):
    global failed
    print(('PASS' if ok else 'FAIL') + ' ' + name + ': ' + detail, flush=True)
    failed += 0 if ok else 1


def field(tag, value):
    if isinstance(value, int):
        value = struct.pack('<I', value)
    elif isinstance(value, str):
        value = value.encode()
    return struct.pack('<HI', tag, len(value)) + value


def frame(typ, payload=b'', version=1, length=None):
    n = len(payload) if length is None else length
    return struct.pack('<IBBH', n, version, typ, 0) + payload


def parse_fields(payload):
    out, pos = {}, 0
    while pos < len(payload):
        if len(payload) - pos < 6:
            raise ValueError('truncated field header')
        tag, n = struct.unpack_from('<HI', payload, pos)
        pos += 6
        if n > len(payload) - pos:
            raise ValueError('field past the payload')
        out.setdefault(tag, []).append(payload[pos:pos + n])
        pos += n
    return out


def u32(fields, tag):
    return struct.unpack('<I', fields[tag][0])[0] if tag in fields else None


class Conn:
    def __init__(self, target):
        port = int(target[2]) if len(target) > 2 else 52
        if target[0] == 'vsock':
            self.s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
            self.s.connect((int(target[1]), port))
        else:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.connect(target[1])
        self.s.settimeout(30)
        self.buf = b''
        if target[0] == 'bridge':
            self.s.sendall(b'CONNECT %d\n' % port)
            line = b''
            while not line.endswith(b'\n'):
                ch = self.s.recv(1)
                if not ch:
                    raise ConnectionError('the bridge closed before OK')
                line += ch
            if not line.startswith(b'OK '):
                raise ConnectionError('the bridge answered %r' % line)

    def send(self, data):
        self.s.sendall(data)

    def recv(self):
        """One frame as (type, payload), or None when the agent closed."""
        while True:
            if len(self.buf) >= 8:
                n, ver, typ, _ = struct.unpack_from('<IBBH', self.buf)
                if ver != 1 or n > 1 << 20:
                    raise ValueError('bad frame header from the agent')
                if len(self.buf) >= 8 + n:
                    payload, self.buf = self.buf[8:8 + n], self.buf[8 + n:]
                    return typ, payload if typ in RAW else parse_fields(payload)
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk

    def close(self):
        self.s.close()


def run(name, fn, target):
    try:
        fn(target)
    except Exception as e:  # a broken connection or timeout is a failure
        report(False, name, 'exception: %r' % (e,))


def t_ping(target):
    c = Conn(target)
    c.send(frame(PING, field(T_DATA, b'xyz')))
    typ, f = c.recv()
    report(typ == PONG and u32(f, T_VERSION) == 1 and f.get(T_DATA) == [b'xyz'], 'py_ping',
           'type 0x%02x version %s' % (typ, u32(f, T_VERSION)))
    c.close()


def t_exec(target):
    c = Conn(target)
    c.send(frame(EXEC, field(T_ARG, 'sh') + field(T_ARG, '-c') +
                 field(T_ARG, 'echo hi; echo err >&2; exit 3')))
    typ, f = c.recv()
    ok = typ == STARTED and u32(f, T_ID) and u32(f, T_PID)
    out, err = b'', b''
    while ok:
        typ, p = c.recv()
        if typ == STDOUT:
            out += p
        elif typ == STDERR:
            err += p
        else:
            break
    report(ok and typ == EXIT and u32(p, T_CODE) == 3 and out == b'hi\n' and err == b'err\n',
           'py_exec', 'stdout %r stderr %r exit %r' % (out, err, p if typ != EXIT else u32(p, T_CODE)))
    # stdin through cat on the same connection
    c.send(frame(EXEC, field(T_ARG, 'cat') + field(T_FLAGS, 1)))
    c.send(frame(DATA, b'abc') + frame(DATA, b'def') + frame(EOF))
    typ, f = c.recv()
    out = b''
    while typ != EXIT:
        typ, p = c.recv()
        if typ == STDOUT:
            out += p
    report(out == b'abcdef' and u32(p, T_CODE) == 0, 'py_exec_stdin', 'cat gave %r' % out)
    c.close()


def read_to_exit(c):
    out, typ, p = b'', None, {}
    while typ != EXIT:
        typ, p = c.recv()
        if typ == STDOUT:
            out += p
        elif typ not in (STDERR, STARTED):
            break
    return typ, p, out


def t_background(target):
    # A background process's exit read by the client that started it
    # (which may have been detaching): still there for the next ATTACH,
    # with its output; an ATTACHed client's read of it is its end.
    c = Conn(target)
    c.send(frame(EXEC, field(T_ARG, 'sh') + field(T_ARG, '-c') + field(T_ARG, 'echo quick; exit 4') +
                 field(T_FLAGS, F_BACKGROUND)))
    typ, f = c.recv()
    pid = u32(f, T_ID) if typ == STARTED else None
    typ, p, out = read_to_exit(c)
    c.close()
    c = Conn(target)
    c.send(frame(ATTACH, field(T_ID, pid or 0)))
    typ2, p2, out2 = read_to_exit(c)
    report(typ == EXIT and typ2 == EXIT and out2 == b'quick\n' and u32(p2, T_CODE) == 4, 'py_background_kept',
           'starter read %r then 0x%02x; ATTACH replayed %r, then 0x%02x' % (out, typ or 0, out2, typ2 or 0))
    c.send(frame(ATTACH, field(T_ID, pid or 0)))
    typ, f = c.recv()
    report(typ == ERROR and u32(f, T_ERRNO) == ESRCH, 'py_background_read_ends',
           'a second ATTACH: 0x%02x errno %s' % (typ, u32(f, T_ERRNO) if typ == ERROR else None))
    c.close()


def t_errors(target):
    c = Conn(target)
    c.send(frame(STAT, field(T_PATH, '/no/such/file')))
    typ, f = c.recv()
    msg = f.get(T_MESSAGE, [b''])[0].decode(errors='replace')
    report(typ == ERROR and u32(f, T_ERRNO) == ENOENT and '/no/such/file' in msg,
           'py_stat_missing', msg)
    # a field claiming more bytes than the frame has
    c.send(frame(STAT, struct.pack('<HI', T_PATH, 200) + b'abc'))
    typ, f = c.recv()
    report(typ == ERROR and u32(f, T_ERRNO) == EBADMSG, 'raw_truncated_field',
           'errno %s' % u32(f, T_ERRNO))
    c.send(frame(PING))
    typ, f = c.recv()
    report(typ == PONG, 'raw_usable_after_bad_field', 'type 0x%02x' % typ)
    c.send(frame(0x3f))
    typ, f = c.recv()
    report(typ == ERROR and u32(f, T_ERRNO) == EOPNOTSUPP, 'raw_unknown_type', 'errno %s' % u32(f, T_ERRNO))
    c.send(frame(0x13, length=(1 << 20) + 1))
    typ, f = c.recv()
    closed = c.recv() is None
    report(typ == ERROR and u32(f, T_ERRNO) == EMSGSIZE and closed, 'raw_oversized',
           'errno %s, closed %s' % (u32(f, T_ERRNO), closed))
    c.close()
    c = Conn(target)
    c.send(frame(PING, version=7))
    typ, f = c.recv()
    closed = c.recv() is None
    report(typ == ERROR and u32(f, T_ERRNO) == EPROTO and closed, 'raw_bad_version',
           'errno %s, closed %s' % (u32(f, T_ERRNO), closed))
    c.close()
    # half a frame, then gone; and a burst of garbage
    c = Conn(target)
    c.send(frame(STAT, length=100) + b'abcde')
    c.close()
    c = Conn(target)
    try:
        c.send(os.urandom(65536))
        while c.recv() is not None:
            pass
    except (OSError, ValueError):
        pass
    c.close()
    c = Conn(target)
    c.send(frame(PING))
    typ, f = c.recv()
    report(typ == PONG, 'raw_agent_survives', 'ping after truncated frames and garbage')
    c.close()


def main():
    target = sys.argv[1:]
    if not target or target[0] not in ('vsock', 'unix', 'bridge'):
        print(__doc__, file=sys.stderr)
        return 2
    for name, fn in (('py_ping', t_ping), ('py_exec', t_exec), ('py_background', t_background),
                     ('raw_errors', t_errors)):
        run(name, fn, target)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
