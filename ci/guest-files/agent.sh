#!/bin/sh
# netblk test-bench command agent: serves one virtio-serial port (argument).
#
# Protocol (see ci/guest.py): the host writes one header line
#   NBA1 <id> <script length in bytes> <timeout seconds>
# followed by the script.  The agent runs it with sh (cwd /, stdin /dev/null,
# stdout and stderr captured together, killed after the timeout), then writes
# the output followed by
#   \n@@NBA-END <id> <exit status>@@\n
# The port is a plain char device (no tty, no echo).  It reads EOF while no
# host is connected, so the agent reopens it in a loop.
port="$1"
work="/run/agent/${port##*/}"
mkdir -p "$work"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
cd /

serve() {
	while IFS=' ' read -r magic id len tmo; do
		[ "$magic" = NBA1 ] || continue
		case "$len$tmo" in *[!0-9]*|'') continue ;; esac
		dd bs=1 count="$len" of="$work/cmd" 2>/dev/null
		timeout -s KILL "$tmo" sh "$work/cmd" </dev/null >"$work/out" 2>&1
		rc=$?
		cat "$work/out"
		printf '\n@@NBA-END %s %s@@\n' "$id" "$rc"
	done
}

while :; do
	if [ -c "$port" ]; then
		serve <>"$port" >&0 2>/dev/null
	fi
	sleep 0.2
done
