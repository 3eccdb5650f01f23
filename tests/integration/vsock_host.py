#!/usr/bin/env python3
"""Host side of kiln-vmm's vsock tests, over the VMM's Unix sockets.

  vsock_host.py echo UDS PORT NBYTES    CONNECT to guest PORT, send NBYTES,
                                        check they come back unchanged
  vsock_host.py loop UDS PORT N         N sequential connections, 1 KiB each
  vsock_host.py serve PATH              accept one connection on PATH and
                                        echo it back (guest-initiated)
  vsock_host.py sh UDS PORT CMD         run CMD in the guest's vsock_sh, print
                                        its output
  vsock_host.py tapctl CTL TAP JSON     open TAP here (IFF_VNET_HDR) and send the
                                        control request JSON with it attached
  vsock_host.py late UDS PORT NBYTES S CONNECT to guest PORT (vsock_echo give),
                                        read nothing for S seconds (the guest
                                        writes NBYTES and closes meanwhile),
                                        then check all NBYTES arrived intact
  vsock_host.py ctl CTL JSON            one control request, its one-line reply
  vsock_host.py filectl CTL PATH MODE JSON  open PATH here (MODE r, rw, or dir for
                                        a directory) and send the control request
                                        JSON with it attached (MODE none: no fd)
  vsock_host.py early UDS PORT N        as soon as UDS accepts (a VM being
                                        restored), N connections at once, each
                                        running "echo ok" in vsock_sh; prints
                                        how many answered, and what went wrong
"""
import hashlib
import os
import socket
import sys
import threading


def connect(uds, port):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(uds)
    s.sendall(b"CONNECT %d\n" % port)
    line = b""
    while not line.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            raise SystemExit("vsock_host: connection closed before OK (nobody listening?)")
        line += c
    if not line.startswith(b"OK "):
        raise SystemExit("vsock_host: bad reply %r" % line)
    return s


def echo(uds, port, nbytes):
    s = connect(uds, port)
    data = os.urandom(nbytes)

    def sender():
        s.sendall(data)

    t = threading.Thread(target=sender)
    t.start()
    got = bytearray()
    while len(got) < nbytes:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    t.join()
    s.close()
    if hashlib.sha256(got).digest() != hashlib.sha256(data).digest():
        raise SystemExit("vsock_host: echo differs (%d of %d bytes back)" % (len(got), nbytes))
    print("vsock_host: ok %d" % nbytes)


def loop(uds, port, n):
    for i in range(n):
        s = connect(uds, port)
        payload = b"%08d" % i * 128
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("vsock_host: connection %d closed early" % i)
            got += chunk
        if got != payload:
            raise SystemExit("vsock_host: connection %d echoed wrong data" % i)
        s.close()
    print("vsock_host: ok %d connections" % n)


def serve(path):
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(path)
    l.listen(1)
    print("vsock_host: listening", flush=True)
    c, _ = l.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
    l.close()
    os.unlink(path)


def read_all(s):
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


def give_byte(i):
    """vsock_echo.c's byte_at."""
    x = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return ((x >> 56) ^ (x >> 17)) & 0xFF


def late(uds, port, nbytes, delay):
    import time
    s = connect(uds, port)
    time.sleep(delay)
    s.settimeout(30)
    got = read_all(s)
    want = bytes(give_byte(i) for i in range(nbytes))
    if got != want:
        same = next((i for i in range(min(len(got), nbytes)) if got[i] != want[i]), min(len(got), nbytes))
        raise SystemExit("vsock_host: %d of %d bytes after a %g s pause, first difference at %d"
                         % (len(got), nbytes, delay, same))
    print("%d bytes intact after a %g s pause" % (len(got), delay))


def sh(uds, port, command):
    s = connect(uds, port)
    s.sendall(command.encode() + b"\n")
    sys.stdout.write(read_all(s).decode(errors="replace"))


def early(uds, port, n):
    import errno
    import time
    deadline = time.monotonic() + 30
    while True:  # the first moment the VMM's socket takes connections
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(uds)
            probe.close()
            break
        except OSError as e:
            probe.close()
            if e.errno not in (errno.ENOENT, errno.ECONNREFUSED) or time.monotonic() > deadline:
                raise SystemExit("vsock_host: %s: %s" % (uds, e))
            time.sleep(0.001)
    results = [None] * n

    def one(i):
        try:
            s = connect(uds, port)
            s.sendall(b"echo ok-%d\n" % i)
            results[i] = read_all(s).decode(errors="replace").strip()
        except (OSError, SystemExit) as e:
            results[i] = "error: %s" % e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    good = sum(1 for i, r in enumerate(results) if r == "ok-%d" % i)
    bad = "; ".join("%d: %r" % (i, r) for i, r in enumerate(results) if r != "ok-%d" % i)
    print("vsock_host: early %d/%d%s" % (good, n, (" (" + bad[:300] + ")") if bad else ""))


def ctl(path, request, fds=()):
    import array
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(150)
    try:
        s.connect(path)
    except OSError as e:
        raise SystemExit("vsock_host: %s: %s" % (path, e))
    if fds:
        s.sendmsg([request.encode() + b"\n"],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        s.sendall(request.encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    sys.stdout.write(reply.decode())


def tapctl(ctl_path, tap, request):
    import array
    import fcntl
    import struct
    fd = os.open("/dev/net/tun", os.O_RDWR)
    IFF_TAP, IFF_NO_PI, IFF_VNET_HDR, TUNSETIFF = 0x2, 0x1000, 0x4000, 0x400454ca
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", tap.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
    ctl(ctl_path, request, [fd])
    os.close(fd)


def filectl(ctl_path, path, mode, request):
    flags = {"r": os.O_RDONLY, "rw": os.O_RDWR, "dir": os.O_RDONLY | os.O_DIRECTORY}
    if mode == "none":
        ctl(ctl_path, request)
        return
    fd = os.open(path, flags[mode])
    ctl(ctl_path, request, [fd])
    os.close(fd)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "echo":
        echo(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "loop":
        loop(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "serve":
        serve(sys.argv[2])
    elif cmd == "sh":
        sh(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "late":
        late(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif cmd == "ctl":
        ctl(sys.argv[2], sys.argv[3])
    elif cmd == "early":
        early(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "filectl":
        filectl(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "tapctl":
        tapctl(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
