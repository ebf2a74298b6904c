#!/bin/bash
# Build the debug test kernel -- KASAN, lockdep (PROVE_LOCKING), kmemleak and
# DEBUG_ATOMIC_SLEEP, the test guest's drivers built in -- from Debian's
# linux-source-6.12, and netblk.ko for it, under build/debug-kernel/:
#   bzImage, .release, root/lib/modules/<release>/ (modules.builtin & co),
#   obj/ (the build tree: make -C build/debug-kernel/obj M=... modules)
# Cached: rebuilt only when ci/debug-kernel.config or the source changes, or
# when the build tree's .config lacks a line of the fragment.
# The first build takes about half an hour on two cores (README.md).
# To use one cache from a second checkout, symlink build/debug-kernel to it;
# never copy it with hard links (cp -al): a rebuild writes into files in
# place, and the other checkout's cache would get a new bzImage beside old
# modules and an old build tree -- a kernel and modules of two configs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/debug-kernel
SRC_TAR=/usr/src/linux-source-6.12.tar.xz

ci/install-deps.sh linux-source-6.12 bc bison flex libssl-dev libelf-dev cpio kmod

# Whether every CONFIG_...=... line of the fragment is in the build tree's .config.
config_has_fragment() {
	local line
	[ -f "$OUT/obj/.config" ] || return 1
	while read -r line; do
		case "$line" in
		CONFIG_*=*) grep -qx "$line" "$OUT/obj/.config" || return 1 ;;
		esac
	done <ci/debug-kernel.config
}

stamp="$(sha256sum ci/debug-kernel.config ci/debug-kernel.sh | sha256sum | cut -c1-16) $(stat -c %s-%Y "$SRC_TAR")"
if [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$stamp" ] && [ -f "$OUT/bzImage" ] &&
   config_has_fragment; then
	echo "debug-kernel: $(cat "$OUT/.release") is built"
	exit 0
fi

mkdir -p "$OUT"
if [ ! -f "$OUT/src/Makefile" ] || [ "$(cat "$OUT/.src" 2>/dev/null)" != "$(stat -c %s-%Y "$SRC_TAR")" ]; then
	echo "debug-kernel: unpacking $SRC_TAR"
	rm -rf "$OUT/src"
	mkdir -p "$OUT/src"
	tar -xf "$SRC_TAR" -C "$OUT/src" --strip-components=1
	stat -c %s-%Y "$SRC_TAR" >"$OUT/.src"
fi

start=$(date +%s)
K=(make -C "$OUT/src" O="$OUT/obj" -j"$(nproc)")
mkdir -p "$OUT/obj"
"${K[@]}" -s x86_64_defconfig kvm_guest.config
"$OUT/src/scripts/kconfig/merge_config.sh" -m -O "$OUT/obj" "$OUT/obj/.config" \
	ci/debug-kernel.config >/dev/null
"${K[@]}" -s olddefconfig
# every line of the fragment must have stuck (a dependency may have dropped one)
while read -r line; do
	case "$line" in
	CONFIG_*=*) grep -qx "$line" "$OUT/obj/.config" ||
		{ echo "debug-kernel: $line did not stick in .config" >&2; exit 1; } ;;
	esac
done <ci/debug-kernel.config
rm -f "$OUT/.stamp"	# a build stopped half way is no cache
echo "debug-kernel: building (this takes a while)"
"${K[@]}" -s bzImage modules
rm -rf "$OUT/root"
"${K[@]}" -s INSTALL_MOD_PATH="$OUT/root" modules_install
# new files, renamed into place: never written through a link into another's
cp "$OUT/obj/arch/x86/boot/bzImage" "$OUT/bzImage.new" && mv -f "$OUT/bzImage.new" "$OUT/bzImage"
# not `make kernelrelease`: run under make (check-debug), it prints
# "make[2]: Entering directory" lines into the file too
cp "$OUT/obj/include/config/kernel.release" "$OUT/.release.new" &&
	mv -f "$OUT/.release.new" "$OUT/.release"
echo "$stamp" >"$OUT/.stamp.new" && mv -f "$OUT/.stamp.new" "$OUT/.stamp"
echo "debug-kernel: $(cat "$OUT/.release") built in $(( ($(date +%s) - start) / 60 )) min"
