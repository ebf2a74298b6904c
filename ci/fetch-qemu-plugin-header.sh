#!/bin/bash
# qemu-plugin.h of the installed QEMU, from Debian's qemu source package (no
# binary package ships it), to build ci/qemu-plugin/: the header into $1.
# Adds a deb-src entry for Debian's registry when apt has none, fetches the
# source of exactly the installed version (its plugin API is the one QEMU
# loads), and takes the one file out of its upstream tarball.
set -euo pipefail

out="$1"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
version="$(dpkg-query -W -f='${source:Version}' qemu-system-common)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

have_source() {
	apt-cache showsrc qemu 2>/dev/null | grep -x "Version: $version" >/dev/null
}

if ! have_source; then
	list=/etc/apt/sources.list.d/netblk-deb-src.sources
	if [ ! -e "$list" ]; then
		$SUDO tee "$list" >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
	fi
	$SUDO apt-get update -qq
fi
if ! have_source; then
	echo "fetch-qemu-plugin-header: Debian's registry has no source of qemu $version" \
	     "(the installed one): upgrade qemu-system-x86 to a version it has" >&2
	exit 1
fi
(cd "$work" && apt-get source --download-only -qq "qemu=$version")
tarball="$(ls "$work"/qemu_*.orig.tar.*)"
tar -xf "$tarball" -C "$work" --wildcards '*/include/qemu/qemu-plugin.h'
mkdir -p "$(dirname "$out")"
cp "$work"/*/include/qemu/qemu-plugin.h "$out"
echo "fetch-qemu-plugin-header: $out from qemu $version"
