#!/bin/bash
# Fetch the Debian 6.12 cloud kernel the test bench boots and builds against:
# the image (vmlinuz and its modules) and the kbuild tree, unpacked under
# build/kernel/ with `apt-get download` + `dpkg -x` -- nothing is installed on
# the host.  Pinned to one version; falls back to the newest 6.12 cloud one the
# registry has when the pinned one is gone.
#
# Prints the kernel release (e.g. 6.12.117+deb12-cloud-amd64) on stdout.
set -euo pipefail

PIN_ABI="${NETBLK_KERNEL_ABI:-6.12.117+deb12}"
top="$(cd "$(dirname "$0")/.." && pwd)"
out="$top/build/kernel"

have_pkg() {
	apt-cache show "$1" >/dev/null 2>&1
}

newest_abi() {
	apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb[0-9]+-cloud-amd64-unsigned$' |
		sed -E 's/^linux-image-(6\.12\.[0-9]+\+deb[0-9]+)-cloud-amd64-unsigned .*/\1/' |
		sort -V | tail -n 1
}

abi="$PIN_ABI"
if [ -f "$out/.release" ]; then
	cat "$out/.release"
	exit 0
fi
if ! have_pkg "linux-image-$abi-cloud-amd64-unsigned"; then
	apt-get update -qq >&2 || true
fi
if ! have_pkg "linux-image-$abi-cloud-amd64-unsigned"; then
	abi="$(newest_abi)"
	[ -n "$abi" ] || { echo "fetch-kernel: no linux-image-6.12.*-cloud-amd64-unsigned in the registry" >&2; exit 1; }
	echo "fetch-kernel: $PIN_ABI is gone, using $abi" >&2
fi
release="$abi-cloud-amd64"
kbuild_ver="${abi%%+*}"		# 6.12.117
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/debs" "$tmp/root"
(cd "$tmp/debs" && apt-get download -q \
	"linux-image-$release-unsigned" \
	"linux-headers-$release" \
	"linux-headers-$abi-common" \
	"linux-kbuild-$kbuild_ver+${abi#*+}" >&2)
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
