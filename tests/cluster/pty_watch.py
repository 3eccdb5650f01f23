#!/usr/bin/env python3
"""tests/cluster/pty_watch.py URL KEY SANDBOX CMD LIMIT_S: open a PTY
WebSocket (docs/api.md "Terminal") running CMD, print "upgraded" once the
101 came, then each message (text, or the terminal's bytes) and the close frame's code and reason as
they come ("closed 1011 error"), or "silent for LIMIT_S s" if the session
neither said nor ended anything by then. Plain sockets, no SDK: the
emulated host has Python but no client library installed."""
import base64
import os
import socket
import struct
import sys
import time
import urllib.parse

url, key, sbx, cmd, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
u = urllib.parse.urlsplit(url)
s = socket.create_connection((u.hostname, u.port or 80), timeout=30)
path = f"/v1/sandboxes/{sbx}/pty?cmd={urllib.parse.quote(cmd)}"
s.sendall((f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {key}\r\n"
           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    got = s.recv(4096)
    if not got:
        print("closed before the upgrade:", buf[:200])
        sys.exit(1)
    buf += got
head, buf = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    print("not upgraded:", head.split(b"\r\n")[0].decode(), buf[:300])
    sys.exit(1)
print("upgraded", flush=True)
deadline = time.monotonic() + limit


def need(n):
    global buf
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        s.settimeout(left)
        got = s.recv(65536)
        if not got:
            raise EOFError
        buf += got
    out, buf = buf[:n], buf[n:]
    return out


try:
    while True:
        b0, b1 = need(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", need(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", need(8))[0]
        data = need(n)
        op = b0 & 0x0F
        if op in (1, 2):
            print("text" if op == 1 else "bytes", data.decode("utf-8", "replace").strip(), flush=True)
        elif op == 8:
            code = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 0
            print("closed", code, data[2:].decode("utf-8", "replace"), flush=True)
            break
except TimeoutError:
    print(f"silent for {limit:.0f} s", flush=True)
    sys.exit(1)
except EOFError:
    print("ended without a close frame", flush=True)
