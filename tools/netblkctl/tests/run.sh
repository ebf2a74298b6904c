#!/bin/sh
# Builds and runs netblkctl's self-check (no module needed): from anywhere.
set -e
cd "$(dirname "$0")/../../.."
mkdir -p build
g++ -std=c++20 -O2 -g -Wall -Wextra -Werror -fsanitize=address,undefined \
	-Ikmod/uapi -Itools/netblkctl -o build/netblkctl_self_check \
	tools/netblkctl/tests/self_check.cpp tools/netblkctl/format.cpp \
	tools/netblkctl/genl.cpp tools/netblkctl/netblk.cpp -lmnl
build/netblkctl_self_check
