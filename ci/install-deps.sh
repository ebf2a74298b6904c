#!/bin/bash
# Install what building and testing netblk needs (Debian 12, as root or with
# sudo), or the packages named on the command line.  Fast when everything is
# there: one dpkg-query, no apt.
set -euo pipefail

PKGS=(
	qemu-system-x86 busybox-static cpio kmod xz-utils gdisk e2fsprogs
	python3-pytest libmnl-dev libgtest-dev g++ gcc-12 g++-12 make clang llvm libbpf-dev bpftool
	dwarves libelf-dev fio nbd-server ethtool dmsetup linux-perf mdadm iproute2 scdoc
	libmicrohttpd-dev prometheus libxdp-dev xdp-tools util-linux
)

[ $# -eq 0 ] || PKGS=("$@")
# Installed for the architecture it names (libbpf-dev:arm64), else for this
# machine's (or for all): with multiarch a -dev package may be installed for
# another one too (an arm64 cross build).
native="$(dpkg --print-architecture)"
installed() {
	local want="$native|all"

	case "$1" in *:*) want="${1##*:}" ;; esac
	dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$1" 2>/dev/null |
		grep -qE "^($want) installed\$"
}
missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all present"
	exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A package of another architecture (libbpf-dev:arm64): dpkg must know it.
for p in "${missing[@]}"; do
	case "$p" in
	*:*)
		dpkg --print-foreign-architectures | grep -qx "${p##*:}" ||
			$SUDO dpkg --add-architecture "${p##*:}"
		;;
	esac
done
$SUDO apt-get update -q </dev/null
# prometheus is here for promtool only: a policy-rc.d that says no (unless
# one is there already) keeps its postinst from starting a server.
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	guard=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$guard" >/dev/null
	$SUDO chmod 0755 "$guard"
	trap '$SUDO rm -f "$guard"' EXIT
fi
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
