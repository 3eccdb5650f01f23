#!/usr/bin/env python3
"""tiny_pvh.py OUT: a minimal PVH kernel (ELF64 with a Xen PHYS32_ENTRY
note) that writes "K\\n" to COM1 and then executes ud2 with the empty IDT
the PVH entry state has: the #UD cannot be delivered, nor the #GP and #DF
after it, so the vCPU triple-faults at a known place. The code is loaded
at 1 MiB; the entry is there too. Prints the ud2's address."""
import struct
import sys

LOAD = 0x100000
code = bytes([
    0x66, 0xBA, 0xF8, 0x03,   # mov dx, 0x3f8
    0xB0, 0x4B,               # mov al, 'K'
    0xEE,                     # out dx, al
    0xB0, 0x0A,               # mov al, '\n'
    0xEE,                     # out dx, al
    0x0F, 0x0B,               # ud2
])
UD2 = LOAD + 10
note = struct.pack("<III", 4, 4, 18) + b"Xen\0" + struct.pack("<I", LOAD)

ehsize, phsize = 64, 56
phoff = ehsize
note_off = phoff + 2 * phsize
code_off = (note_off + len(note) + 15) & ~15
eh = struct.pack("<16sHHIQQQIHHHHHH",
                 b"\x7fELF\x02\x01\x01" + b"\0" * 9,
                 2, 62, 1, LOAD, phoff, 0, 0, ehsize, phsize, 2, 64, 0, 0)
ph_load = struct.pack("<IIQQQQQQ", 1, 5, code_off, LOAD, LOAD, len(code), len(code), 0x1000)
ph_note = struct.pack("<IIQQQQQQ", 4, 4, note_off, 0, 0, len(note), len(note), 4)
img = bytearray(eh + ph_load + ph_note + note)
img += b"\0" * (code_off - len(img)) + code
with open(sys.argv[1], "wb") as f:
    f.write(img)
print("0x%x" % UD2)
