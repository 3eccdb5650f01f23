"""The HTTP server that tests/e2e/69-kilnd-ports.sh runs inside a sandbox
(python3 of the base template, standard library only):

    python3 ports_server.py PORT DIR

GET serves files from DIR, and also: /headers (the request as JSON),
/chunked (a chunked answer), /slow (a chunk, 3 s of nothing, another),
/garbage (an answer that is not HTTP), /cookies (cookies for the
sandbox, for a whole Domain and under kilnd's kiln_session name, and a
header it names in its own Connection header), /upgrade with "Upgrade: echo"
(101, then every byte back until the client's end). POST echoes the
body, read with Content-Length or chunked.
"""
import functools
import http.server
import json
import sys
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send_body(self, code, body, ctype="application/octet-stream"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/headers"):
            seen = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
            return self.send_body(200, json.dumps(seen).encode(), "application/json")
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one ", b"two ", b"three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"6\r\nfirst\n\r\n")
            self.wfile.flush()
            time.sleep(3)
            self.wfile.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
            return
        if self.path == "/cookies":
            self.send_response(200)
            self.send_header("Set-Cookie", "plain=1; Path=/")
            self.send_header("Set-Cookie", "wide=1; Path=/; Domain=" + self.headers.get("X-Cookie-Domain", "x"))
            self.send_header("Set-Cookie", "kiln_session=forged; Path=/")
            self.send_header("Connection", "X-Guest-Private")
            self.send_header("X-Guest-Private", "hop")
            self.send_header("X-Guest-Public", "end")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        if self.path == "/garbage":
            self.wfile.write(b"SSH-2.0-not-http\r\n\r\n")
            self.close_connection = True
            return
        if self.path == "/upgrade" and self.headers.get("Upgrade") == "echo":
            self.send_response(101)
            self.send_header("Upgrade", "echo")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                data = self.connection.recv(65536)
                if not data:
                    break
                self.connection.sendall(data)
            self.close_connection = True
            return
        super().do_GET()

    def do_POST(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_body(200, data)

    def log_message(self, *args):
        pass


handler = functools.partial(Handler, directory=sys.argv[2])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
