#!/usr/bin/env python3
"""Write seed inputs for fuzz_proto into DIR: valid frames of the main
message types, encoded by the Python client written from docs/protocol.md
(tests/integration/agent_raw.py), not by the C codec under test. The first
byte of each seed is the fuzzer's read-size selector."""
import os
import struct
import sys

# The encoder of the independent Python client, written from the spec.
sys.dont_write_bytecode = True	# no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from agent_raw import field, frame  # noqa: E402


def u64(tag, v):
    return struct.pack('<HIQ', tag, 8, v & (2**64 - 1))


seeds = {
    'ping': frame(0x01),
    'exec': frame(0x03, field(3, 'sh') + field(3, '-c') + field(3, 'echo hi') +
                  field(5, 'A=1') + field(6, '/tmp') + field(7, 'root') + field(8, 1000) +
                  field(9, 0x07) + field(10, 24) + field(11, 80)),
    'shell': frame(0x03, field(4, 'ls -l | wc')),
    'stat': frame(0x12, field(14, '/etc/passwd') + field(9, 1)),
    'rename': frame(0x16, field(14, '/a') + field(15, '/b')),
    'data': frame(0x40, b'stdin bytes'),
    'error': frame(0x81, field(26, 2) + field(27, 'stat /x: No such file or directory')),
    'exit': frame(0x87, field(1, 7) + field(12, 9) + field(9, 1)),
    'entry': frame(0x8a, field(25, 'a/b') + field(16, 0o100644) + u64(17, 12) + u64(23, -1)),
    'info': frame(0x83, field(33, 1) + field(34, 'kiln-init') + u64(36, 10**9)),
    'stream': frame(0x84, field(1, 1) + field(2, 42)) + frame(0x85, b'out') +
              frame(0x86, b'err') + frame(0x87, field(13, 0)),
    'cmdline': b'console=ttyS0 kiln.root=/dev/vda kiln.ip=10.0.0.2/24 kiln.hostname="a b"',
}
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for i, (name, data) in enumerate(seeds.items()):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(bytes([i * 7 % 97]) + data)
