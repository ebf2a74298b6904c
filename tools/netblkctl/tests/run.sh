#!/bin/sh
# Builds and runs netblkctl's self-check (no module needed): from anywhere.
set -e
cd "$(dirname "$0")/../../.."
mkdir -p build
make --no-print-directory -s bpf	# build/bpf/netblk.skel.h
g++ -std=c++20 -O2 -g -Wall -Wextra -Werror -fsanitize=address,undefined \
	-Ikmod/uapi -Ikmod/core -Itools/netblkctl -Ibpf -Ibuild/bpf -o build/netblkctl_self_check \
	tools/netblkctl/tests/self_check.cpp tools/netblkctl/format.cpp tools/netblkctl/key_text.cpp \
	tools/netblkctl/genl.cpp tools/netblkctl/netblk.cpp tools/netblkctl/xdp.cpp tools/netblkctl/settings.cpp tools/netblkctl/config.cpp \
	tools/netblkctl/latency.cpp tools/netblkctl/prometheus.cpp tools/netblkctl/watch.cpp \
	tools/netblkctl/exporter.cpp tools/netblkctl/options.cpp tools/netblkctl/cli.cpp \
	kmod/core/histogram.cpp -lmnl -lxdp -lbpf -lmicrohttpd
build/netblkctl_self_check
