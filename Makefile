# netblk: serve a block device over UDP without the CPU copying the data.
#
#   make check            install what is missing, build, unit tests, end-to-end tests in QEMU
#   make demo [PORT=N]    boot the test guest and serve one partition on 127.0.0.1:PORT
#   make demo-exec CMD=.. run a command in the demo's guest
#   make                  build the module (for KDIR) and netblkctl
#   make install          install both on this host (KDIR = the running kernel's)

KVER_HOST := $(shell uname -r)
BENCH_KDIR = $(CURDIR)/build/kernel/root/usr/src/linux-headers-$(shell cat build/kernel/.release 2>/dev/null)
ifeq ($(wildcard /lib/modules/$(KVER_HOST)/build),)
KDIR ?= $(BENCH_KDIR)
else
KDIR ?= /lib/modules/$(KVER_HOST)/build
endif

CXX ?= g++
PYTHON := /usr/bin/python3
PORT ?= 7000

CXXFLAGS_USER := -std=c++20 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
CORE_SRCS := $(wildcard kmod/core/*.cpp)
UNIT_SRCS := $(wildcard tests/unit/*.cpp)
NETBLKCTL_SRCS := $(wildcard tools/netblkctl/*.cpp)

.PHONY: all module netblkctl bpf kernel deps unit e2e check demo demo-exec install clean \
	debug-kernel debug-module check-debug

all: module netblkctl

kernel:
	ci/fetch-kernel.sh >/dev/null

# Without the running kernel's headers, build for the test guest's kernel.
module: $(if $(wildcard /lib/modules/$(KVER_HOST)/build),,kernel)
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

# The module for the test guest's kernel, whatever this host runs.
bench-module: kernel
	$(MAKE) -C $(BENCH_KDIR) M=$(CURDIR) modules

netblkctl: tools/netblkctl/netblkctl

# kmod/core/histogram.cpp: netblkctl reads percentiles with the core's code.
tools/netblkctl/netblkctl: $(NETBLKCTL_SRCS) $(wildcard tools/netblkctl/*.h) kmod/uapi/netblk_genl.h \
		kmod/core/histogram.cpp kmod/core/histogram.h kmod/core/types.h kmod/core/core_api.h \
		build/bpf/netblk.skel.h
	$(CXX) $(CXXFLAGS_USER) -Ikmod/uapi -Ikmod/core -Ibpf -Ibuild/bpf -o $@ $(NETBLKCTL_SRCS) \
		kmod/core/histogram.cpp -lmnl -lbpf

# The XDP steering program (bpf/README.md) and the skeleton netblkctl embeds
# it with.  <asm/types.h> lives in the multiarch include directory on Debian.
BPF_CLANG ?= clang
BPFTOOL ?= bpftool
BPF_CFLAGS := -O2 -g -Wall -Wextra -Werror -target bpf \
	$(addprefix -I,$(wildcard /usr/include/$(shell uname -m)-linux-gnu))

bpf: build/bpf/netblk.skel.h

build/bpf/netblk.bpf.o: bpf/netblk.bpf.c
	@mkdir -p build/bpf
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

build/bpf/netblk.skel.h: build/bpf/netblk.bpf.o
	$(BPFTOOL) gen skeleton $< name netblk_bpf > $@.tmp
	mv $@.tmp $@

# One object a source (make -j builds them side by side; a change rebuilds
# what includes it, from the compiler's own dependency lists).
UNIT_FLAGS := $(CXXFLAGS_USER) -fsanitize=address,undefined -pthread -Ikmod/core -Ikmod/uapi
UNIT_OBJS := $(patsubst %.cpp,build/unit/obj/%.o,$(CORE_SRCS) $(UNIT_SRCS))

build/unit/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(UNIT_FLAGS) -MMD -MP -c -o $@ $<

-include $(UNIT_OBJS:.o=.d)

build/unit/netblk_unit_tests: $(UNIT_OBJS)
	$(CXX) $(UNIT_FLAGS) -o $@ $(UNIT_OBJS) -lgtest -lgtest_main

deps:
	ci/install-deps.sh

# run.sh runs make itself (the BPF skeleton): '+' hands it the jobserver
unit: build/unit/netblk_unit_tests
	build/unit/netblk_unit_tests
	+tools/netblkctl/tests/run.sh
	$(PYTHON) -m pytest -q tests/client

# The e2e suite once on each NIC model of the test guest (ci/guest.py):
# virtio-net (no page_pool, shared-page XDP) and vmxnet3 (a page_pool per
# receive queue, its own XDP code).  NICS=virtio runs one.
NICS ?= virtio vmxnet3

e2e: bench-module netblkctl load
	@set -e; for nic in $(NICS); do \
		echo "== e2e on $$nic"; \
		NETBLK_NIC=$$nic $(PYTHON) -m pytest -v tests/e2e; \
	done

check: deps
	$(MAKE) -j$(shell nproc) unit
	$(MAKE) e2e

# The e2e suite on a kernel built with KASAN, lockdep, kmemleak and
# DEBUG_ATOMIC_SLEEP (ci/debug-kernel.sh, cached under build/debug-kernel;
# the first build takes about half an hour), every kernel report a failure,
# and the start/load/stop/rmmod loop 100 times with a kmemleak scan at its end.
DEBUG_KDIR = $(CURDIR)/build/debug-kernel/obj
DEBUG_MODULE = $(CURDIR)/build/debug-module
LIFECYCLE_LOOPS ?= 100

debug-kernel:
	ci/debug-kernel.sh

# Kbuild before 6.13 has no separate output directory for an external
# module: it is built in a copy of the tree's module sources.
debug-module: debug-kernel
	@mkdir -p $(DEBUG_MODULE)/kmod
	cp -p Kbuild $(DEBUG_MODULE)/
	tar -C kmod -cf - --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod*' \
		--exclude='*.symvers' --exclude='*.order' . | tar -C $(DEBUG_MODULE)/kmod -xpf -
	$(MAKE) -C $(DEBUG_KDIR) M=$(DEBUG_MODULE) modules

check-debug: deps
	$(MAKE) debug-module netblkctl load
	NETBLK_KERNEL=debug NETBLK_LIFECYCLE_LOOPS=$(LIFECYCLE_LOOPS) $(PYTHON) -m pytest -v tests/e2e

demo: deps
	$(MAKE) bench-module netblkctl
	$(PYTHON) ci/demo.py --port $(PORT)

demo-exec:
	@$(PYTHON) ci/demo.py --exec "$(CMD)"

install: module netblkctl
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
	depmod -a $(notdir $(patsubst %/build,%,$(KDIR))) 2>/dev/null || depmod -a
	install -D -m 0755 tools/netblkctl/netblkctl $(DESTDIR)/usr/local/sbin/netblkctl

clean:
	-$(MAKE) -C $(BENCH_KDIR) M=$(CURDIR) clean 2>/dev/null
	rm -rf build/unit build/guest build/bpf tools/netblkctl/netblkctl tools/netblk-load/netblk-load

# The load generator (tools/netblk-load/README.md) and the benchmark against
# nbd-server and the local disk (bench/README.md).
.PHONY: load bench bench-v1 bench-client
BENCH_ARGS ?=

load: tools/netblk-load/netblk-load

# It speaks the protocol with the core's own codec, paces itself with the
# core's send window, and reads key files with netblkctl's parser.
tools/netblk-load/netblk-load: tools/netblk-load/netblk_load.cpp kmod/core/protocol.cpp \
		kmod/core/protocol.h kmod/core/siphash.cpp kmod/core/siphash.h kmod/core/types.h \
		kmod/core/rto.cpp kmod/core/rto.h tools/netblkctl/key_text.cpp tools/netblkctl/key_text.h
	$(CXX) $(CXXFLAGS_USER) -pthread -Ikmod/core -Itools/netblkctl -o $@ \
		tools/netblk-load/netblk_load.cpp kmod/core/protocol.cpp kmod/core/siphash.cpp \
		kmod/core/rto.cpp tools/netblkctl/key_text.cpp

# What only the benchmarks need: the peers' servers and clients, the plot.
BENCH_PKGS := nbd-client vblade python3-matplotlib

bench: deps
	ci/install-deps.sh $(BENCH_PKGS)
	$(MAKE) bench-module netblkctl load bench-v1
	$(PYTHON) ci/bench.py $(BENCH_ARGS)
	$(PYTHON) ci/bench_client.py $(BENCH_CLIENT_ARGS)

# Block devices on a second guest alone: netblk, NVMe/TCP, nbd, AoE, local (bench/README.md).
BENCH_CLIENT_ARGS ?=
bench-client: deps
	ci/install-deps.sh $(BENCH_PKGS)
	$(MAKE) bench-module netblkctl
	$(PYTHON) ci/bench_client.py $(BENCH_CLIENT_ARGS)

# Protocol v1 as it was (main before the v2 merge), for the bench's netblk-v1.
V1_COMMIT ?= da693d5
bench-v1: kernel
	ci/build-v1.sh $(V1_COMMIT) build/v1
