"""The Python SDK's WebSocket client and terminal (kiln/_websocket.py,
kiln/pty.py) against a scripted server on 127.0.0.1: no kilnd needed
(tests/sdk/run runs it with the installed wheel before kilnd starts; alone:
PYTHONPATH=sdk/python python3 tests/sdk/test_websocket.py).

The server side here is written apart from the client's (its own frame
parser), so that one mistake cannot hide in both: the handshake and the
API key, masking of every client frame, the three length encodings (125,
126, 65536 bytes and more), fragments both ways with a ping between them,
the closing handshake from either side, kilnd's exit and error messages,
refused upgrades as the SDK's errors, a connection cut without a close
frame, protocol errors, and a long paste while the echo comes back (the
reader thread drains the socket, or both sides would wait on each other).
Prints "PASS name: detail" / "FAIL name: why".
"""

import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
import traceback

import kiln
from kiln import ConnectionFailed, InvalidRequest, KilnError, NotFound, Pty, Timeout
from kiln._transport import Transport
from kiln._websocket import OP_BINARY, WebSocket, encode_frame

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = "kiln_websockettest"
PATH = "/v1/sandboxes/sbx_ws/pty"
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def eq(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, wanted {want!r}")


def raises(cls, fn, *args, code=None, **kw):
    try:
        fn(*args, **kw)
    except cls as e:
        if code is not None and getattr(e, "code", None) != code:
            raise AssertionError(f"{cls.__name__} with code {e.code!r}, wanted {code!r}: {e}")
        return e
    except Exception as e:
        raise AssertionError(f"raised {type(e).__name__}: {e}, wanted {cls.__name__}") from e
    raise AssertionError(f"did not raise {cls.__name__}")


# ---- the server side, written apart from the client's ------------------------------------------

def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"the client closed the connection ({len(buf)} of {n} bytes)")
        buf += chunk
    return buf


class Frame:
    def __init__(self, fin, op, masked, len7, payload):
        self.fin, self.op, self.masked, self.len7, self.payload = fin, op, masked, len7, payload


def recv_frame(conn):
    b0, b1 = read_exact(conn, 2)
    n = len7 = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", read_exact(conn, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", read_exact(conn, 8))[0]
    masked = bool(b1 & 0x80)
    key = read_exact(conn, 4) if masked else b"\0\0\0\0"
    data = read_exact(conn, n)
    payload = bytes(c ^ key[i % 4] for i, c in enumerate(data)) if n < 4096 else _unmask_big(data, key)
    return Frame(bool(b0 & 0x80), b0 & 0x0F, masked, len7, payload)


def _unmask_big(data, key):
    out = bytearray(data)
    for i in range(4):
        out[i::4] = bytes(c ^ key[i] for c in out[i::4])
    return bytes(out)


def frame(op, payload, fin=True, rsv=0):
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv | op])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def exit_msg(code):
    return frame(0x1, json.dumps({"type": "exit", "exit_code": code}).encode())


class Server:
    """Accepts one connection, checks the upgrade request, answers (101
    unless told otherwise) and runs ``scenario(conn)``; what went wrong on
    its side is raised by done()."""

    def __init__(self, scenario=None, answer=None, early=b"", bad_accept=False):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.request = {}
        self.error = None
        self._scenario, self._answer, self._early, self._bad = scenario, answer, early, bad_accept
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def transport(self):
        return Transport(f"http://127.0.0.1:{self.port}", KEY, 10.0, 0)

    def _run(self):
        try:
            conn, _ = self.sock.accept()
            with conn:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(4096)
                head = buf.split(b"\r\n\r\n", 1)[0].decode()
                lines = head.split("\r\n")
                self.request["line"] = lines[0]
                self.request["headers"] = {k.strip().lower(): v.strip()
                                           for k, v in (ln.split(":", 1) for ln in lines[1:])}
                if self._answer is not None:
                    conn.sendall(self._answer)
                    return
                key = self.request["headers"]["sec-websocket-key"]
                accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
                if self._bad:
                    accept = base64.b64encode(b"x" * 20).decode()
                conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode() + self._early)
                if self._scenario:
                    self._scenario(conn)
        except BaseException as e:  # reported by done()
            self.error = e
            traceback.print_exc(file=sys.stdout)
        finally:
            self.sock.close()

    def done(self, timeout=20.0):
        self._t.join(timeout)
        if self._t.is_alive():
            raise AssertionError("the scripted server did not finish")
        if self.error is not None:
            raise AssertionError(f"server side: {type(self.error).__name__}: {self.error}")


def expect_close(conn, code=1000):
    """The client's close frame: masked, with this status code."""
    f = recv_frame(conn)
    eq((f.op, f.masked, f.fin), (0x8, True, True), "a masked close frame")
    eq(struct.unpack("!H", f.payload[:2])[0], code, "close code")


def _close_from_server(c):
    c.sendall(frame(0x8, struct.pack("!H", 1000)))
    expect_close(c)


# ---- the tests ---------------------------------------------------------------------------------------

@test
def rfc6455_example_frame():
    # RFC 6455 5.7: a masked text frame "Hello" with key 37 fa 21 3d.
    got = encode_frame(0x1, b"Hello", key=bytes.fromhex("37fa213d"))
    eq(got.hex(), "818537fa213d7f9f4d5158", "the RFC's bytes")
    return "the masked 'Hello' of RFC 6455 5.7, byte for byte"


@test
def handshake_key_query_and_early_frames():
    # Output and the exit come in the same packet as the 101: none is lost.
    srv = Server(_close_from_server, early=frame(0x2, b"hello ") + frame(0x2, b"world") + exit_msg(0))
    t = srv.transport()
    with Pty.open(t, PATH, cols=100, rows=30, cmd="echo hi") as p:
        eq(p.read_until("world", timeout=5), "hello world", "the early frames")
        eq(p.wait(5), 0, "exit status")
    srv.done()
    line, h = srv.request["line"], srv.request["headers"]
    eq(line, f"GET {PATH}?cols=100&rows=30&cmd=echo+hi HTTP/1.1", "request line")
    eq((h.get("authorization"), h.get("upgrade"), h.get("connection"), h.get("sec-websocket-version")),
       (f"Bearer {KEY}", "websocket", "Upgrade", "13"), "upgrade headers")
    eq(len(base64.b64decode(h["sec-websocket-key"])), 16, "a 16-byte key")
    eq(h.get("host"), f"127.0.0.1:{srv.port}", "Host")
    assert "accept" not in h, h
    return "path, query, API key, Host, key; frames sent with the 101 read; exit 0"


@test
def masking_and_length_encodings():
    sizes = [0, 1, 125, 126, 127, 65535, 65536]
    seen = []

    def scenario(c):
        for _ in sizes:
            f = recv_frame(c)
            seen.append((f.op, f.fin, f.masked, f.len7, len(f.payload)))
            c.sendall(frame(0x2, f.payload))  # echo, unmasked, with the server's own length encoding
        c.sendall(exit_msg(0) + frame(0x8, struct.pack("!H", 1000)))
        expect_close(c)

    srv = Server(scenario)
    with Pty.open(srv.transport(), PATH) as p:
        for n in sizes:
            data = bytes((i * 7 + n) % 256 for i in range(n))
            p.write(data)
            if n:
                got = b""
                while len(got) < n:
                    got += p.read(timeout=10)
                eq(got, data, f"{n} bytes echoed")
        eq(p.wait(10), 0)
    srv.done()
    want_len7 = {0: 0, 1: 1, 125: 125, 126: 126, 127: 126, 65535: 126, 65536: 127}
    for (op, fin, masked, len7, n), size in zip(seen, sizes):
        eq((op, fin, masked, len7, n), (OP_BINARY, True, True, want_len7[size], size), f"frame of {size}")
    return f"{len(sizes)} sizes, each one masked frame with its length encoding (7-bit, 16-bit, 64-bit), echoed back"


@test
def long_write_goes_in_fragments():
    frag = 64 * 1024  # the client's fragment size: well under kilnd's 1 MiB a frame
    n = frag * 2 + 100
    data = os.urandom(n)
    frames = []

    def scenario(c):
        got = b""
        while True:
            f = recv_frame(c)
            frames.append((f.op, f.fin, f.masked, len(f.payload)))
            got += f.payload
            if f.fin:
                break
        eq(got, data, "the fragments joined")
        c.sendall(exit_msg(0))
        c.sendall(frame(0x8, struct.pack("!H", 1000)))
        expect_close(c)

    srv = Server(scenario)
    with Pty.open(srv.transport(), PATH) as p:
        p.write(data)
        eq(p.wait(10), 0)
    srv.done()
    eq(frames, [(0x2, False, True, frag), (0x0, False, True, frag), (0x0, True, True, 100)],
       "binary, continuation, last continuation")
    return f"{n} bytes as 3 masked fragments (kilnd takes at most 1 MiB a frame)"


@test
def fragments_in_with_a_ping_between():
    pong = {}

    def scenario(c):
        c.sendall(frame(0x2, b"ab", fin=False) + frame(0x9, b"p1") + frame(0x0, b"cd", fin=False))
        f = recv_frame(c)
        pong["frame"] = (f.op, f.masked, f.payload)
        c.sendall(frame(0x0, b"ef"))
        # The exit message, a text message in two fragments.
        m = json.dumps({"type": "exit", "exit_code": 7}).encode()
        c.sendall(frame(0x1, m[:5], fin=False) + frame(0x0, m[5:]))
        c.sendall(frame(0x8, struct.pack("!H", 1000) + b"exited"))
        expect_close(c)

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    eq(p.read(timeout=10), b"abcdef", "one message from three fragments")
    eq(p.wait(10), 7, "the exit status from a fragmented text message")
    eq(p.read(timeout=1), b"", "nothing more")
    srv.done()
    eq(pong["frame"], (0xA, True, b"p1"), "a masked pong with the ping's payload")
    return "a binary message in 3 fragments with a ping inside; pong; exit 7 in 2 fragments; close answered with 1000"


@test
def resize_is_a_text_message():
    got = {}

    def scenario(c):
        f = recv_frame(c)
        got["resize"] = (f.op, f.masked, json.loads(f.payload))
        c.sendall(exit_msg(0) + frame(0x8, struct.pack("!H", 1000)))
        expect_close(c)

    srv = Server(scenario)
    with Pty.open(srv.transport(), PATH) as p:
        raises(ValueError, p.resize, 0, 5)
        raises(ValueError, p.resize, 80, 1001)
        p.resize(120, 40)
        eq(p.wait(10), 0)
    srv.done()
    eq(got["resize"], (0x1, True, {"type": "resize", "cols": 120, "rows": 40}), "the resize")
    return "{type: resize, cols: 120, rows: 40} as a masked text frame; sizes out of 1..1000 refused here"


@test
def client_close_handshake():
    def scenario(c):
        c.sendall(frame(0x2, b"$ "))
        expect_close(c)
        c.sendall(frame(0x8, struct.pack("!H", 1000)))

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    eq(p.read(timeout=10), b"$ ")
    t0 = time.monotonic()
    p.close()
    took = time.monotonic() - t0
    assert took < 3, f"close took {took:.1f} s"
    e = raises(ConnectionFailed, p.wait, 5, code="pty_closed")
    eq(p.exit_code, None)
    raises(ConnectionFailed, p.write, "more")
    srv.done()
    return f"close frame 1000 sent, the server's answer ends the session in {took:.2f} s; wait(): {e.code}"


@test
def server_error_message():
    def scenario(c):
        c.sendall(frame(0x1, json.dumps({"type": "error", "message": "sandbox not found"}).encode()))
        c.sendall(frame(0x8, struct.pack("!H", 1011) + b"error"))
        expect_close(c, 1011)

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    e = raises(KilnError, p.wait, 10, code="pty_error")
    assert "sandbox not found" in str(e), e
    srv.done()
    return f"an error message and close 1011: wait() raises {e}"


@test
def refused_upgrades_are_sdk_errors():
    body = json.dumps({"error": {"code": "not_found", "message": "sandbox sbx_ws not found"}}).encode()
    srv = Server(answer=b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    e = raises(NotFound, Pty.open, srv.transport(), PATH, code="not_found")
    eq((e.status, e.message), (404, "sandbox sbx_ws not found"))
    srv.done()
    body = json.dumps({"error": {"code": "invalid_request",
                                 "message": "query parameter 'cols' must be from 1 to 1000"}}).encode()
    srv = Server(answer=b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    raises(InvalidRequest, Pty.open, srv.transport(), PATH, cols=0)
    srv.done()
    srv = Server(bad_accept=True)
    raises(ConnectionFailed, Pty.open, srv.transport(), PATH, code="websocket_error")
    srv.done()
    dead = socket.create_server(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    raises(ConnectionFailed, Pty.open, Transport(f"http://127.0.0.1:{port}", KEY, 5.0, 0), PATH,
           code="connection_error")
    return "404 NotFound and 400 InvalidRequest from kilnd's JSON, a bad accept key, nothing listening"


@test
def cut_without_close_frame():
    def scenario(c):
        c.sendall(frame(0x2, b"partial output"))
        # and the connection drops, no exit, no close frame

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    eq(b"".join(p), b"partial output", "the output before the cut, then the end")
    e = raises(ConnectionFailed, p.wait, 10)
    srv.done()
    return f"output kept; wait() raises {e.code}"


@test
def protocol_errors_end_the_session():
    def scenario(c):
        c.sendall(frame(0x2, b"x", rsv=0x40))  # RSV1 with no extension agreed
        try:
            c.recv(100)
        except OSError:
            pass

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    e = raises(ConnectionFailed, p.wait, 10, code="websocket_error")
    srv.done()

    def scenario2(c):
        c.sendall(frame(0x0, b"orphan"))  # a continuation of nothing
        try:
            c.recv(100)
        except OSError:
            pass

    srv = Server(scenario2)
    p = Pty.open(srv.transport(), PATH)
    raises(ConnectionFailed, p.wait, 10, code="websocket_error")
    srv.done()
    return f"reserved bits, an orphan continuation: {e.message}"


@test
def timeouts():
    def scenario(c):
        expect_close(c)
        c.sendall(frame(0x8, struct.pack("!H", 1000)))

    srv = Server(scenario)
    with Pty.open(srv.transport(), PATH) as p:
        raises(Timeout, p.read, timeout=0.2, code="pty_timeout")
        e = raises(Timeout, p.read_until, "never", timeout=0.3, code="pty_timeout")
        raises(Timeout, p.wait, 0.2, code="pty_timeout")
    srv.done()
    return f"read, read_until, wait: Timeout pty_timeout ({e.message[:50]}...)"


@test
def long_paste_while_the_echo_comes_back():
    # The server echoes each fragment as it reads it and stops reading while
    # it writes, as kilnd does: without a reader draining our socket, both
    # sides would end up waiting on each other.
    total = 8 << 20
    data = os.urandom(total)

    def scenario(c):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        n = 0
        while n < total:
            f = recv_frame(c)
            n += len(f.payload)
            c.sendall(frame(0x2, f.payload))
        c.sendall(exit_msg(0) + frame(0x8, struct.pack("!H", 1000)))
        expect_close(c)

    srv = Server(scenario)
    p = Pty.open(srv.transport(), PATH)
    t0 = time.monotonic()
    w = threading.Thread(target=p.write, args=(data,), daemon=True)
    w.start()
    w.join(60)
    assert not w.is_alive(), "write() did not return: the client stopped reading while it wrote"
    got = b"".join(p)
    eq(len(got), total, "bytes echoed")
    assert got == data, "the echo differs"
    eq(p.wait(10), 0)
    srv.done()
    return f"{total >> 20} MiB written in one call while echoed: {time.monotonic() - t0:.1f} s"


@test
def websocket_recv_directly():
    def scenario(c):
        c.sendall(frame(0x1, b"text") + frame(0x2, b"\x00\xff"))
        c.sendall(frame(0x8, struct.pack("!H", 4000)))
        expect_close(c, 4000)

    srv = Server(scenario)
    ws = WebSocket.connect(srv.transport(), PATH, timeout=5)
    eq(ws.recv(), (0x1, b"text"))
    eq(ws.recv(), (0x2, b"\x00\xff"))
    eq(ws.recv(), None, "closed")
    eq(ws.close_code, 4000, "the server's close code")
    srv.done()
    return "text and binary messages; the server's close code echoed back"


def main():
    failed = 0
    only = sys.argv[1:]
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        name = "py_ws_" + t.__name__
        t0 = time.monotonic()
        try:
            detail = t()
            print(f"PASS {name}: {detail} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
            traceback.print_exc(file=sys.stdout)
    print(f"(kiln from {kiln.__file__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
