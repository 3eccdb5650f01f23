#!/bin/bash
# tests/unit/seed.sh [REPO [BUILD]]: images/build-rootfs-debian --seed
# (docs/templates.md "Seeded from base") takes an image for the suite
# only when the image's own files say it is that suite's image. Small
# ext4 images made here with mke2fs -d (256 MiB, the SIZE asked of the
# builder: 4 GiB, its default and base's, takes longer), each wrong in one
# way: the wrong suite in os-release, a package of the list not
# installed, no user 1000, another label (an image with extras), another
# size. Each is refused naming that, and the builder goes on to build:
# here with no mmdebstrap on its PATH, so it stops at "mmdebstrap
# missing" instead of fetching minutes of packages. The right one is
# copied, relabelled kiln-debian, and no build follows. No VM, no network.
# Run by the unit loop as build/tests/unit_seed.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
name=seed rc=0
pass() { echo "PASS $name $1${2:+: $2}"; }
fail() { echo "FAIL $name $1${2:+: $2}"; rc=1; }
builder=$repo/images/build-rootfs-debian
dir=$(mktemp -d /tmp/kiln-seed.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
PATH=$PATH:/usr/sbin:/sbin
# The commands the builder's seed path runs, and not mmdebstrap.
mkdir "$dir/bin"
for c in numfmt stat e2label debugfs sed awk grep tr cp mv rm cat; do
	p=$(command -v "$c") || { fail tools "no $c here"; exit 1; }
	ln -s "$p" "$dir/bin/$c"
done
packages=(python3 python3-pip python3-venv git curl ca-certificates build-essential procps less iproute2 mount passwd)
# image NAME LABEL SUITE SIZE [PACKAGE-LEFT-OUT [PASSWD-LINE]]
image() {
	local r=$dir/$1.root
	mkdir -p "$r/etc" "$r/usr/lib" "$r/var/lib/dpkg"
	printf 'ID=debian\nVERSION_CODENAME=%s\n' "$3" > "$r/usr/lib/os-release"
	ln -s ../usr/lib/os-release "$r/etc/os-release"
	echo kiln > "$r/etc/hostname"
	printf 'root:x:0:0:root:/root:/bin/bash\n%s\n' "${6:-user:x:1000:1000::/home/user:/bin/bash}" > "$r/etc/passwd"
	for p in dash "${packages[@]}"; do
		[ "$p" = "${5:-}" ] || printf 'Package: %s\nStatus: install ok installed\nPriority: optional\n\n' "$p"
	done > "$r/var/lib/dpkg/status"
	mke2fs -q -F -t ext4 -L "$2" -d "$r" "$dir/$1.ext4" "$4" >/dev/null || fail "image_$1" "mke2fs"
}
image good kiln-base bookworm 256M
image trixie kiln-base trixie 256M
image nopy kiln-base bookworm 256M python3
image nouser kiln-base bookworm 256M - 'other:x:1000:1000::/home/other:/bin/bash'
image extras kiln-postgres bookworm 256M
image small kiln-base bookworm 64M
# run IMAGE SUITE: the builder's output (both streams) and status.
run() {
	rm -f "$dir/out.ext4"
	out=$(PATH=$dir/bin "$builder" --seed "$dir/$1.ext4" "$dir/out.ext4" "$2" 256M 2>&1)
	st=$?
}
refused() {	# refused CASE IMAGE SUITE WHY
	run "$2" "$3"
	if [ "$st" = 1 ] && [[ $out == *"not seeding from $dir/$2.ext4: $4"*"mmdebstrap missing"* ]] && [ ! -e "$dir/out.ext4" ]; then
		pass "$1" "$(head -1 <<<"$out" | sed "s|$dir/||")"
	else
		fail "$1" "status $st: $out"
	fi
}
refused other_suite trixie bookworm "its os-release says 'trixie', not bookworm"
refused suite_asked good trixie "its os-release says 'bookworm', not trixie"
refused package_missing nopy bookworm "package python3 is not installed in it"
refused no_user nouser bookworm "its /etc/passwd has no user of uid 1000"
refused other_label extras bookworm "its label is 'kiln-postgres', not kiln-base"
refused other_size small bookworm "its size is 67108864 bytes, not 256M"
refused no_image nothere bookworm "no such image"
run good bookworm
label=$(e2label "$dir/out.ext4" 2>/dev/null)
code=$(debugfs -R 'cat /usr/lib/os-release' "$dir/out.ext4" 2>/dev/null | sed -n 's/^VERSION_CODENAME=//p')
if [ "$st" = 0 ] && [[ $out == *"bookworm seeded from $dir/good.ext4: no mmdebstrap" ]] && [ "$label" = kiln-debian ] &&
	[ "$code" = bookworm ] && [ "$(stat -c %s "$dir/out.ext4")" = $((256 << 20)) ] && [ "$(e2label "$dir/good.ext4")" = kiln-base ]; then
	pass seeded "$(tail -1 <<<"$out" | sed "s|$dir/||"); the copy labelled $label, its os-release $code, the seed still kiln-base"
else
	fail seeded "status $st, label '$label', suite '$code': $out"
fi
exit $rc
