"""A small RFC 6455 WebSocket client on the standard library, for the
terminal (GET .../pty). It reaches kilnd as the HTTP transport does (its
host, port, TLS and API key), since http.client cannot hand over a socket
after a 101 answer with the bytes that came with it.

Only what a client needs: the handshake, masked frames out (a long message
split into fragments, as kilnd takes at most 1 MiB a frame), frames in
(unmasked, fragmented or not, control frames between fragments), ping
answered with pong, and the closing handshake. No extensions, no
subprotocols.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import threading
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

from .errors import ConnectionFailed, KilnError, Timeout, error_for

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import Transport

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
# Outgoing data frames are at most this big: well under kilnd's 1 MiB a
# frame, and small enough that a long paste does not hold the socket.
FRAGMENT = 64 * 1024
# What we accept in: a terminal's output comes in small messages; this
# only stops a broken peer from making us buffer without end.
MESSAGE_MAX = 16 << 20
HEADERS_MAX = 64 * 1024


class ProtocolError(ConnectionFailed):
    """The peer broke RFC 6455 (or sent more than we take)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "websocket_error")


def mask(payload: bytes, key: bytes) -> bytes:
    """XOR with the 4-byte key, repeated (RFC 6455 5.3); done on whole ints
    so that a 1 MiB paste costs no Python loop over its bytes."""
    n = len(payload)
    if n == 0:
        return b""
    k = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ k).to_bytes(n, "big")


def encode_frame(opcode: int, payload: bytes, fin: bool = True, key: Optional[bytes] = None) -> bytes:
    """One client frame: masked with ``key`` (random unless given, for tests)."""
    key = os.urandom(4) if key is None else key
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + key + mask(payload, key)


def encode_message(opcode: int, payload: bytes) -> bytes:
    """A whole message as one frame or, when long, as FRAGMENT-sized
    fragments (the first carries the opcode, the rest are continuations)."""
    if len(payload) <= FRAGMENT:
        return encode_frame(opcode, payload)
    parts = [payload[i:i + FRAGMENT] for i in range(0, len(payload), FRAGMENT)]
    return b"".join(encode_frame(opcode if i == 0 else OP_CONT, p, fin=i == len(parts) - 1)
                    for i, p in enumerate(parts))


class FrameReader:
    """Frames from a byte stream, fed as it arrives. next() gives whole
    messages and control frames: (opcode, payload), with a fragmented
    message's pieces joined under its first opcode."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._parts: List[bytes] = []
        self._op = 0
        self._size = 0

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next(self) -> Optional[Tuple[int, bytes]]:
        while True:
            frame = self._frame()
            if frame is None:
                return None
            fin, op, payload = frame
            if op >= 0x8:  # control: never fragmented, may come between fragments
                if not fin or len(payload) > 125:
                    raise ProtocolError("a fragmented or oversized control frame")
                return op, payload
            if op == OP_CONT:
                if not self._op:
                    raise ProtocolError("a continuation frame with no message to continue")
            else:
                if self._op:
                    raise ProtocolError("a new message began inside a fragmented one")
                if op not in (OP_TEXT, OP_BINARY):
                    raise ProtocolError(f"unknown opcode {op:#x}")
                self._op = op
            self._size += len(payload)
            if self._size > MESSAGE_MAX:
                raise ProtocolError(f"a message over {MESSAGE_MAX} bytes")
            self._parts.append(payload)
            if fin:
                msg, self._parts, op, self._op, self._size = b"".join(self._parts), [], self._op, 0, 0
                return op, msg

    def _frame(self) -> Optional[Tuple[bool, int, bytes]]:
        b = self._buf
        if len(b) < 2:
            return None
        fin, rsv, op = bool(b[0] & 0x80), b[0] & 0x70, b[0] & 0x0F
        masked, n, off = bool(b[1] & 0x80), b[1] & 0x7F, 2
        if rsv:
            raise ProtocolError("reserved bits set (no extension was agreed)")
        if n == 126:
            if len(b) < 4:
                return None
            n, off = struct.unpack_from("!H", b, 2)[0], 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, off = struct.unpack_from("!Q", b, 2)[0], 10
        if n > MESSAGE_MAX:
            raise ProtocolError(f"a frame of {n} bytes")
        key = b""
        if masked:  # servers must not mask (RFC 6455 5.1), but unmasking costs nothing
            if len(b) < off + 4:
                return None
            key, off = bytes(b[off:off + 4]), off + 4
        if len(b) < off + n:
            return None
        payload = bytes(b[off:off + n])
        del b[:off + n]
        return fin, op, mask(payload, key) if masked else payload


def _recv_headers(sock: socket.socket) -> Tuple[int, str, Dict[str, str], bytes]:
    """The HTTP answer's status, reason and headers; the bytes after them
    (the start of the body, or the first frames) are returned too."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > HEADERS_MAX:
            raise ProtocolError("the answer's headers are too long")
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionFailed("kilnd closed the connection during the WebSocket handshake",
                                   "connection_error")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers, rest


def _error_answer(sock: socket.socket, status: int, reason: str, headers: Mapping[str, str],
                  rest: bytes) -> KilnError:
    """The KilnError for a refused upgrade, from kilnd's JSON error body."""
    want = int(headers.get("content-length", "0") or 0)
    body = rest
    try:
        while len(body) < min(want, 1 << 20):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except OSError:
        pass
    code, message = f"http_{status}", body.decode("utf-8", "replace").strip() or reason
    try:
        e = json.loads(body)["error"]
        code, message = str(e["code"]), str(e["message"])
    except (ValueError, KeyError, TypeError):
        pass
    return error_for(status, code, message)


class WebSocket:
    """A client connection. send() may be called from any thread; recv()
    from one reader at a time."""

    def __init__(self, sock: socket.socket, leftover: bytes = b"") -> None:
        self._sock = sock
        self._reader = FrameReader()
        self._reader.feed(leftover)
        self._send_lock = threading.Lock()
        self.close_sent = False
        self.close_code: Optional[int] = None  # the peer's, once it closed

    @classmethod
    def connect(cls, transport: "Transport", path: str, query: Optional[Mapping[str, object]] = None,
                timeout: Optional[float] = None) -> "WebSocket":
        """Open ``path`` of the transport's kilnd as a WebSocket, with its
        API key. A refused upgrade raises the KilnError for kilnd's answer."""
        t = transport
        try:
            raw = socket.create_connection((t.host, t.port), timeout=timeout)
        except socket.timeout as e:
            raise Timeout(f"no connection to kilnd within {timeout} s", "client_timeout") from e
        except OSError as e:
            raise ConnectionFailed(f"cannot reach kilnd at {t.scheme}://{t.host}:{t.port}: {e}",
                                   "connection_error") from e
        sock: socket.socket = raw
        try:
            if t.scheme == "https":
                # The context http.client uses: system CAs, SSL_CERT_FILE.
                sock = ssl.create_default_context().wrap_socket(raw, server_hostname=t.host)
            key = base64.b64encode(os.urandom(16)).decode()
            host = f"[{t.host}]" if ":" in t.host else t.host
            if t.port != (443 if t.scheme == "https" else 80):
                host += f":{t.port}"
            headers = t._headers({"Host": host, "Upgrade": "websocket", "Connection": "Upgrade",
                                  "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key})
            headers.pop("Accept", None)
            req = f"GET {t.url(path, query)} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            sock.sendall((req + "\r\n").encode("utf-8"))
            status, reason, got, rest = _recv_headers(sock)
            if status != 101:
                raise _error_answer(sock, status, reason, got, rest)
            want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            if got.get("sec-websocket-accept") != want or got.get("upgrade", "").lower() != "websocket":
                raise ProtocolError("the WebSocket handshake failed (bad Sec-WebSocket-Accept or Upgrade)")
            sock.settimeout(None)
            return cls(sock, rest)
        except socket.timeout as e:
            sock.close()
            raise Timeout(f"kilnd did not finish the WebSocket handshake within {timeout} s",
                          "client_timeout") from e
        except (ssl.SSLError, OSError) as e:
            sock.close()
            raise ConnectionFailed(f"the WebSocket to kilnd failed: {e}", "connection_error") from e
        except BaseException:
            sock.close()
            raise

    def send(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            if self.close_sent:
                raise ConnectionFailed("the WebSocket is closed", "websocket_closed")
            if opcode == OP_CLOSE:
                self.close_sent = True
            data = encode_message(opcode, payload) if opcode < 0x8 else encode_frame(opcode, payload)
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise ConnectionFailed(f"the WebSocket to kilnd broke: {e}", "connection_error") from e

    def close(self, code: int = 1000) -> None:
        """Start the closing handshake (the peer's close frame ends recv())."""
        try:
            self.send(OP_CLOSE, struct.pack("!H", code))
        except ConnectionFailed:
            pass

    def recv(self) -> Optional[Tuple[int, bytes]]:
        """The next message, (OP_TEXT or OP_BINARY, payload), or None when
        the connection closed cleanly (a close frame, answered). Pings are
        answered here. A connection cut without a close frame raises
        ConnectionFailed."""
        while True:
            msg = self._reader.next()
            if msg is None:
                try:
                    chunk = self._sock.recv(65536)
                except OSError as e:
                    if self.close_sent:
                        return None  # we closed it ourselves
                    raise ConnectionFailed(f"the WebSocket to kilnd broke: {e}", "connection_error") from e
                if not chunk:
                    if self.close_sent:
                        return None
                    raise ConnectionFailed("kilnd closed the WebSocket without a close frame",
                                           "connection_error")
                self._reader.feed(chunk)
                continue
            op, payload = msg
            if op == OP_PING:
                try:
                    self.send(OP_PONG, payload)
                except ConnectionFailed:
                    pass  # closing already: no pong owed
            elif op == OP_PONG:
                pass
            elif op == OP_CLOSE:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                if not self.close_sent:  # echo the code, as RFC 6455 5.5.1 asks
                    try:
                        self.send(OP_CLOSE, payload[:2])
                    except ConnectionFailed:
                        pass
                self.shutdown()
                return None
            else:
                return op, payload

    def shutdown(self) -> None:
        """Close the socket (no handshake)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
