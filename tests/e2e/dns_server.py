"""A tiny DNS server for the network tests (the standard library has none):
answers A queries for one name with one address, NXDOMAIN for any other,
over UDP. Usage: dns_server.py BIND_ADDR NAME ADDRESS (port 53)."""
import socket
import struct
import sys

bind, name, addr = sys.argv[1], sys.argv[2].rstrip(".").lower(), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((bind, 53))
while True:
    q, peer = s.recvfrom(512)
    if len(q) < 12:
        continue
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    question = q[12:i + 5]
    qtype = struct.unpack("!H", q[i + 1:i + 3])[0] if i + 3 <= len(q) else 0
    asked = ".".join(labels).lower()
    hit = asked == name and qtype == 1
    rcode = 0 if asked == name else 3
    head = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 1 if hit else 0, 0, 0)
    answer = (b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)) if hit else b""
    s.sendto(head + question + answer, peer)
