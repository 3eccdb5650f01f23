#!/bin/bash
# virtio-blk: what the guest writes to a read-write disk is on the image
# (and there after a VMM restart); a read-only disk refuses writes.
# tier: full: the quick tier covers it through kilnd (e2e 61 and 74 write and read sandboxes' disks through kilnd)
. "$(dirname "$0")/lib.sh"

mke2fs -q -F -t ext4 "$T/fs.ext4" 32M >/dev/null
guest_run w 'mount -t ext4 /dev/vda /mnt && echo kiln-was-here > /mnt/note && sync && umount /mnt && echo written' \
	--disk "$T/fs.ext4"
guest_run r 'mount -t ext4 /dev/vda /mnt && cat /mnt/note && umount /mnt' --disk "$T/fs.ext4"
out=$(guest_output r)
if [ "$out" = kiln-was-here ]; then
	pass disk_persists "file written in one boot is read in the next"
else
	fail disk_persists "read back '$out'; $(diagnose r)"
fi

# Raw blocks: the guest writes 4 MiB at an offset; the host sees the same
# bytes in the image file.
truncate -s 64M "$T/raw.img"
guest_run raw 'dd if=/dev/urandom of=/tmp/blob bs=1M count=4 2>/dev/null
dd if=/tmp/blob of=/dev/vda bs=1M seek=8 conv=fsync 2>/dev/null
md5sum /tmp/blob | cut -d" " -f1' --disk "$T/raw.img"
want=$(guest_output raw | tail -1)
got=$(dd if="$T/raw.img" bs=1M skip=8 count=4 2>/dev/null | md5sum | cut -d' ' -f1)
ok=; [ -n "$want" ] && [ "$want" = "$got" ] && ok=1
check disk_raw_write "guest md5 $want, host md5 $got" [ -n "$ok" ]

# Read-only: the kernel sees a read-only disk, writes fail, the image is untouched.
before=$(md5sum < "$T/fs.ext4")
guest_run ro 'cat /sys/block/vda/ro
if dd if=/dev/zero of=/dev/vda bs=512 count=1 conv=fsync 2>/dev/null; then echo write-succeeded; else echo write-refused; fi
mount -t ext4 -o ro,noload /dev/vda /mnt && cat /mnt/note' --disk "$T/fs.ext4,ro"
out=$(guest_output ro | tr '\n' ' ')
after=$(md5sum < "$T/fs.ext4")
if [ "$out" = "1 write-refused kiln-was-here " ] && [ "$before" = "$after" ]; then
	pass disk_read_only "$out"
else
	fail disk_read_only "got '$out', image changed: $([ "$before" = "$after" ] && echo no || echo yes); $(diagnose ro)"
fi
