"""A minimal WebSocket client (RFC 6455) for the PTY tests: the standard
library has none. Usage from a test:

    ws = WS(port, path, key)     # handshake; raises on a non-101 answer
    ws.send_binary(b"echo hi\\n"); ws.send_text('{"type":"resize",...}')
    op, data = ws.recv()         # (1 text | 2 binary | 8 close, bytes)
"""
import base64
import os
import socket
import struct


class WS:
    def __init__(self, port, path, key, timeout=30):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        nonce = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nAuthorization: Bearer %s\r\n\r\n"
               % (path, nonce, key))
        self.s.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(4096)
            if not chunk:
                raise IOError("closed during the handshake: %r" % self.buf)
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split()[1])
        if self.status != 101:
            raise IOError("handshake answered %d: %r" % (self.status, head + self.buf))

    def _send(self, op, data):
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | op, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | op, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | op, 0x80 | 127, n)
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        self.s.sendall(hdr + mask + body)

    def send_binary(self, data):
        self._send(2, data)

    def send_text(self, text):
        self._send(1, text.encode())

    def send_raw(self, data):
        self.s.sendall(data)

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise IOError("connection closed")
            self.buf += chunk

    def recv(self):
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n, h = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, h = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, h = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(h + n)
        data, self.buf = self.buf[h:h + n], self.buf[h + n:]
        return b0 & 0x0F, data

    def close(self):
        self.s.close()
