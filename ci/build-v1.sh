#!/bin/sh
# Protocol v1's module, netblkctl and netblk-load, built from git for the
# bench guest's kernel: ci/bench.py --systems netblk-v1,netblk measures what
# protocol v2 costs against v1 in one run (issue 9's bound: at most 10 % more
# guest CPU a request without a key).  A second module rather than a build
# option: v1 is the code as it was, not a v2 engine with features switched off.
#
#   ci/build-v1.sh [COMMIT] [DIR]     (make bench-v1)
#
# COMMIT: main's last commit before the protocol v2 merge (9e1519e), by default.
# DIR (build/v1): the tree is exported to DIR/src and built there; the
# results are DIR/src/kmod/netblk.ko, DIR/src/tools/netblkctl/netblkctl and
# DIR/src/tools/netblk-load/netblk-load.  Needs `make kernel` (the guest's
# headers) and what `make netblkctl load` needs; rebuilt only when COMMIT
# changes.
set -eu

commit=${1:-da693d5}
dir=${2:-build/v1}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

full=$(git rev-parse --verify "$commit^{commit}") || {
	echo "ci/build-v1.sh: $commit is not a commit of this repository (a shallow clone? git fetch --unshallow)" >&2
	exit 2
}
kdir=$root/build/kernel/root/usr/src/linux-headers-$(cat build/kernel/.release)
if [ -f "$dir/.commit" ] && [ "$(cat "$dir/.commit")" = "$full" ] &&
   [ -f "$dir/src/kmod/netblk.ko" ]; then
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/src"
git archive "$full" | tar -x -C "$dir/src"
make -s -C "$dir/src" netblkctl load
make -s -C "$kdir" M="$root/$dir/src" modules
echo "$full" > "$dir/.commit"
echo "ci/build-v1.sh: protocol v1 ($full) in $dir/src"
