#!/bin/bash
# Fetch a Debian cloud kernel the test bench boots and builds against: the
# image (vmlinuz and its modules) and the kbuild tree, unpacked with
# `apt-get download` + `dpkg -x` -- nothing is installed on the host.
#
#   ci/fetch-kernel.sh [6.12|6.1|newest]
#   NETBLK_ARCH=arm64 ci/fetch-kernel.sh [6.12|6.1|newest]
#
#   6.12 (default)  Debian 12's 6.12 cloud kernel (bookworm-security), the test
#                   guest's: build/kernel/
#   6.1             Debian 12's own kernel, 6.1: build/kernel-6.1/
#   newest          the kbuild tree (no image) of the newest cloud kernel the
#                   registry has, whatever its series, to compile against so
#                   that upstream's changes show early: build/kernel-newest/
#
# 6.12 and 6.1 are pinned to one version (NETBLK_KERNEL_ABI overrides) and
# fall back to the newest of their series the registry has when the pinned
# one is gone; newest is looked up on every call.
#
# NETBLK_ARCH=arm64 fetches the arm64 cloud kernel of the series instead,
# into the same directory with -arm64 appended (build/kernel-arm64,
# build/kernel-6.1-arm64, ...), to cross-build against (make module-arm64) and
# boot in qemu-system-aarch64.  Its kbuild package is this host's (amd64): it
# holds the host programs (fixdep, modpost) that run here, and nothing
# arm64's own.  It needs `dpkg --add-architecture arm64` for apt to know the
# arm64 packages.
#
# Prints the kernel release (e.g. 6.12.117+deb12-cloud-amd64) on stdout.
set -euo pipefail

series="${1:-6.12}"
arch="${NETBLK_ARCH:-amd64}"
top="$(cd "$(dirname "$0")/.." && pwd)"
case "$arch" in
amd64|arm64) ;;
*)
	echo "fetch-kernel: NETBLK_ARCH=$arch: amd64 (the default) or arm64" >&2
	exit 2
	;;
esac
case "$series" in
6.12)
	pin="6.12.117+deb12"
	out="$top/build/kernel"
	# linux-image-6.12.117+deb12-cloud-amd64-unsigned
	abi_re='6\.12\.[0-9]+\+deb[0-9]+'
	;;
6.1)
	pin="6.1.0-57"
	out="$top/build/kernel-6.1"
	# linux-image-6.1.0-57-cloud-amd64-unsigned
	abi_re='6\.1\.0-[0-9]+'
	;;
newest)
	pin=""
	out="$top/build/kernel-newest"
	abi_re='[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+|\+deb[0-9]+)'
	;;
*)
	echo "fetch-kernel: no kernel series '$series': 6.12 (the default), 6.1 or newest" >&2
	exit 2
	;;
esac
[ "$arch" = amd64 ] || out="$out-$arch"
abi="${NETBLK_KERNEL_ABI:-$pin}"
headers_only=0

have_pkg() {
	apt-cache show "$1" >/dev/null 2>&1
}

# Every image has its headers package, and only those count for newest.
newest_abi() {
	apt-cache search --names-only "^linux-headers-$abi_re-cloud-$arch\$" |
		sed -E "s/^linux-headers-($abi_re)-cloud-$arch .*/\\1/" |
		sort -V | tail -n 1
}

# The kbuild package: linux-kbuild-6.12.117+deb12 names the whole version,
# linux-kbuild-6.1 only the series.
kbuild_pkg() {
	case "$1" in
	6.1.0-*) echo "linux-kbuild-6.1" ;;
	*) echo "linux-kbuild-${1%%+*}+${1#*+}" ;;
	esac
}

if [ "$series" = newest ]; then
	apt-get update -qq >&2 || true
	abi="$(newest_abi)"
	[ -n "$abi" ] || { echo "fetch-kernel: no cloud kernel headers in the registry" >&2; exit 1; }
	headers_only=1
	if [ "$(cat "$out/.release" 2>/dev/null)" = "$abi-cloud-$arch" ]; then
		cat "$out/.release"
		exit 0
	fi
	rm -f "$out/.release"
fi
if [ -f "$out/.release" ]; then
	cat "$out/.release"
	exit 0
fi
if ! have_pkg "linux-headers-$abi-cloud-$arch"; then
	apt-get update -qq >&2 || true
fi
if ! have_pkg "linux-headers-$abi-cloud-$arch"; then
	wanted="$abi"
	abi="$(newest_abi)"
	[ -n "$abi" ] || { echo "fetch-kernel: no $series cloud kernel (linux-image-*-cloud-$arch-unsigned) in the registry" >&2; exit 1; }
	echo "fetch-kernel: $wanted is gone, using $abi" >&2
fi
release="$abi-cloud-$arch"
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/debs" "$tmp/root"
image=""
[ "$headers_only" = 1 ] || image="linux-image-$release-unsigned"
(cd "$tmp/debs" && apt-get download -q $image \
	"linux-headers-$release" \
	"linux-headers-$abi-common" \
	"$(kbuild_pkg "$abi")" >&2)
for deb in "$tmp"/debs/*.deb; do
	dpkg -x "$deb" "$tmp/root"
done
# The arch headers' Makefile includes the common tree by absolute path.
sed -i "s|^include /usr/src/|include $out/root/usr/src/|" \
	"$tmp/root/usr/src/linux-headers-$release/Makefile"
rm -rf "$tmp/debs"
echo "$release" >"$tmp/.release"
rm -rf "$out"
mv "$tmp" "$out"
echo "$release"
