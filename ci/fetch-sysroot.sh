#!/bin/bash
# The programs an arm64 test guest runs that this (amd64) host has only for
# amd64: busybox-static and the test modules' tools (iproute2, bpftool, ...)
# in their arm64 builds, with the libraries they depend on, unpacked with
# `apt-get download` + `dpkg -x` -- nothing is installed on the host (the
# :arm64 programs would replace the amd64 ones: they are not Multi-Arch: same).
#
#   NETBLK_ARCH=arm64 ci/fetch-sysroot.sh [PACKAGE...]
#
# into build/sysroot-arm64 (ci/initramfs.py looks for arm64 programs and
# their libraries there before the host's /usr/lib/aarch64-linux-gnu).  The
# libraries are the packages' Depends and Pre-Depends named lib*, and theirs;
# packages already there are not fetched again.  Needs
# `dpkg --add-architecture arm64`.
#
# Prints the sysroot's path on stdout.
set -euo pipefail

arch="${NETBLK_ARCH:-arm64}"
top="$(cd "$(dirname "$0")/.." && pwd)"
out="$top/build/sysroot-$arch"
mkdir -p "$out/.debs" "$out/.have"

deps_of() {	# the lib* packages $1 depends on, one a line
	apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "$1:$arch" 2>/dev/null |
		sed -nE 's/^ *\|?(Pre)?Depends: ([a-z0-9][a-z0-9.+-]*)(:'"$arch"')?$/\2/p' |
		grep -E '^(lib|zlib)' || true
}

# Resolving the libraries asks apt-cache once a package (minutes): not again
# for the same request.
request="$(printf '%s\n' busybox-static "$@" | sort -u)"
if [ "$(cat "$out/.request" 2>/dev/null)" = "$request" ]; then
	echo "$out"
	exit 0
fi
todo=(busybox-static "$@")
declare -A seen=()
want=()
while [ "${#todo[@]}" -gt 0 ]; do
	p="${todo[0]}"
	todo=("${todo[@]:1}")
	[ -z "${seen[$p]:-}" ] || continue
	seen[$p]=1
	want+=("$p")
	for d in $(deps_of "$p"); do todo+=("$d"); done
done
fetch=()
for p in "${want[@]}"; do
	[ -e "$out/.have/$p" ] || fetch+=("$p:$arch")
done
if [ "${#fetch[@]}" -gt 0 ]; then
	(cd "$out/.debs" && apt-get download -q "${fetch[@]}" >&2)
	for deb in "$out"/.debs/*.deb; do
		dpkg -x "$deb" "$out"
		p="$(basename "$deb")"
		touch "$out/.have/${p%%_*}"
	done
	rm -f "$out"/.debs/*.deb
	# /sbin/ip -> /bin/ip would name this host's (amd64) file: relative
	find "$out" -type l -lname '/*' | while read -r l; do
		ln -sfnr "$out$(readlink "$l")" "$l"
	done
fi
echo "$request" >"$out/.request"
echo "$out"
