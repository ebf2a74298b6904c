# netblk: serve a block device over UDP without the CPU copying the data.
#
#   make check            install what is missing, build, unit tests, end-to-end tests in QEMU
#   make demo [PORT=N]    boot the test guest and serve one partition on 127.0.0.1:PORT
#   make demo-exec CMD=.. run a command in the demo's guest
#   make                  build the module (for KDIR) and netblkctl
#   make install          install the module for the running kernel (or KVER=),
#                         netblkctl, the Python client, man pages (DESTDIR, PREFIX,
#                         INSTALL_MOD_PATH honoured)
#   make deb              Debian packages netblk-dkms and netblk-tools in build/deb

KVER_HOST := $(shell uname -r)
BENCH_KDIR = $(CURDIR)/build/kernel/root/usr/src/linux-headers-$(shell cat build/kernel/.release 2>/dev/null)
# The kernel to build for: KVER's headers, else the running kernel's, else
# (a host without headers) the test guest's.
KVER_BUILD := $(or $(KVER),$(KVER_HOST))
ifeq ($(wildcard /lib/modules/$(KVER_BUILD)/build),)
KDIR ?= $(BENCH_KDIR)
else
KDIR ?= /lib/modules/$(KVER_BUILD)/build
endif
NETBLK_RELEASE := $(shell sed -n 's/^\#define NETBLK_VERSION "\(.*\)"/\1/p' kmod/uapi/netblk_version.h)

CXX ?= g++
PYTHON := /usr/bin/python3
PORT ?= 7000

CXXFLAGS_USER := -std=c++20 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
CORE_SRCS := $(wildcard kmod/core/*.cpp)
UNIT_SRCS := $(wildcard tests/unit/*.cpp)
NETBLKCTL_SRCS := $(wildcard tools/netblkctl/*.cpp)

# netblkctl and the load generator, built natively and for arm64 alike.
# kmod/core/histogram.cpp: netblkctl reads percentiles with the core's code.
NETBLKCTL_PREREQS := $(NETBLKCTL_SRCS) $(wildcard tools/netblkctl/*.h) kmod/uapi/netblk_genl.h kmod/uapi/netblk_counters.h \
	kmod/uapi/netblk_options.h \
	kmod/uapi/netblk_version.h kmod/core/histogram.cpp kmod/core/histogram.h kmod/core/types.h \
	kmod/core/core_api.h build/bpf/netblk.skel.h
NETBLKCTL_INCLUDES := -Ikmod/uapi -Ikmod/core -Ibpf -Ibuild/bpf
NETBLKCTL_LINK := $(NETBLKCTL_SRCS) kmod/core/histogram.cpp -lmnl -lxdp -lbpf -lmicrohttpd
# It speaks the protocol with the core's own codec, paces itself with the
# core's send window, and reads key files with netblkctl's parser.
LOAD_SRCS := tools/netblk-load/netblk_load.cpp kmod/core/protocol.cpp kmod/core/frame_bytes.cpp kmod/core/siphash.cpp \
	kmod/core/rto.cpp tools/netblkctl/key_text.cpp
LOAD_PREREQS := $(LOAD_SRCS) kmod/core/protocol.h kmod/core/frame_bytes.h kmod/core/siphash.h kmod/core/types.h \
	kmod/core/rto.h tools/netblkctl/key_text.h
LOAD_FLAGS := $(CXXFLAGS_USER) -pthread -Ikmod/core -Itools/netblkctl

.PHONY: all module kmod-graph netblkctl bpf kernel kernel-6.1 module-6.1 kernel-newest module-newest \
	deps-arm64 kernel-arm64 module-arm64 netblkctl-arm64 load-arm64 e2e-arm64 deps unit e2e check demo demo-exec install clean \
	install-module install-tools install-dkms-source man release deb check-pkg \
	debug-kernel debug-module check-debug

all: module netblkctl

kernel:
	ci/fetch-kernel.sh >/dev/null

# Without the kernel's headers, build for the test guest's kernel.
module: $(if $(wildcard /lib/modules/$(KVER_BUILD)/build),,kernel)
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

# The module for the test guest's kernel, whatever this host runs.
bench-module: kernel
	$(MAKE) -C $(BENCH_KDIR) M=$(CURDIR) modules

# Which of the module's files calls which (nm on its objects), and any
# circle among them (ci/kmod_graph.py: exit 1 if there is one).
kmod-graph: bench-module
	$(PYTHON) ci/kmod_graph.py

# Other kernels (ci/fetch-kernel.sh): Debian 12's own, 6.1, which
# NETBLK_KERNEL=6.1 boots in the guest, and the newest the registry has, only
# compiled for.  Their modules are built apart (build_module_copy), in
# build/module-<kernel>.
OTHER_KERNELS := 6.1 newest

$(addprefix kernel-,$(OTHER_KERNELS)): kernel-%:
	ci/fetch-kernel.sh $* >/dev/null

$(addprefix module-,$(OTHER_KERNELS)): module-%: kernel-%
	$(call build_module_copy,$(CURDIR)/build/module-$*,$(CURDIR)/build/kernel-$*/root/usr/src/linux-headers-$$(cat build/kernel-$*/.release))

# arm64, cross-built (the cross compilers and the :arm64 libraries: make
# deps-arm64): the module against Debian's arm64 6.12 cloud
# kernel (NETBLK_ARCH=arm64 ci/fetch-kernel.sh, build/kernel-arm64) in
# build/module-arm64, netblkctl as build/arm64/netblkctl.  The BPF object is
# the same for both: BPF's own target, little-endian.
CROSS_COMPILE_ARM64 ?= aarch64-linux-gnu-
ARM64_KDIR = $(CURDIR)/build/kernel-arm64/root/usr/src/linux-headers-$$(cat build/kernel-arm64/.release)

ARM64_PKGS := gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-system-arm \
	libmnl-dev:arm64 libbpf-dev:arm64 libxdp-dev:arm64 libmicrohttpd-dev:arm64

deps-arm64:
	ci/install-deps.sh $(ARM64_PKGS)

kernel-arm64:
	NETBLK_ARCH=arm64 ci/fetch-kernel.sh >/dev/null

module-arm64: kernel-arm64
	$(call build_module_copy,$(CURDIR)/build/module-arm64,$(ARM64_KDIR),ARCH=arm64 CROSS_COMPILE=$(CROSS_COMPILE_ARM64))

netblkctl-arm64: build/arm64/netblkctl

build/arm64/netblkctl: $(NETBLKCTL_PREREQS)
	@mkdir -p build/arm64
	$(CROSS_COMPILE_ARM64)g++ $(CXXFLAGS_USER) $(NETBLKCTL_INCLUDES) -o $@ $(NETBLKCTL_LINK)

# the load generator, for the arm64 guest's test_link
load-arm64: build/arm64/netblk-load

build/arm64/netblk-load: $(LOAD_PREREQS)
	@mkdir -p build/arm64
	$(CROSS_COMPILE_ARM64)g++ $(LOAD_FLAGS) -o $@ $(LOAD_SRCS)

netblkctl: tools/netblkctl/netblkctl

tools/netblkctl/netblkctl: $(NETBLKCTL_PREREQS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS_USER) $(CXXFLAGS) $(NETBLKCTL_INCLUDES) $(LDFLAGS) -o $@ $(NETBLKCTL_LINK)

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

# netblkctl's tests (tests/netblkctl): the sources they exercise (not the
# commands), built the same way.  xdp.cpp and test_xdp.cpp include the BPF
# skeleton: it is made before them (then -MMD knows it).
CTL_TEST_SRCS := $(wildcard tests/netblkctl/*.cpp)
CTL_TESTED_SRCS := $(addprefix tools/netblkctl/,format.cpp key_text.cpp genl.cpp netblk.cpp \
	xdp.cpp settings.cpp config.cpp latency.cpp prometheus.cpp watch.cpp exporter.cpp options.cpp cli.cpp \
	usage.cpp)
CTL_TEST_FLAGS := $(UNIT_FLAGS) -Itools/netblkctl -Ibpf -Ibuild/bpf
CTL_TEST_OBJS := $(patsubst %.cpp,build/unit/ctl/%.o,$(CTL_TEST_SRCS) $(CTL_TESTED_SRCS)) \
	build/unit/obj/kmod/core/histogram.o

build/unit/ctl/%.o: %.cpp | build/bpf/netblk.skel.h
	@mkdir -p $(dir $@)
	$(CXX) $(CTL_TEST_FLAGS) -MMD -MP -c -o $@ $<

-include $(CTL_TEST_OBJS:.o=.d)

build/unit/netblkctl_tests: $(CTL_TEST_OBJS)
	$(CXX) $(CTL_TEST_FLAGS) -o $@ $(CTL_TEST_OBJS) -lgtest -lgtest_main -lmnl -lxdp -lbpf -lmicrohttpd

deps:
	ci/install-deps.sh

unit: build/unit/netblk_unit_tests build/unit/netblkctl_tests
	build/unit/netblk_unit_tests
	build/unit/netblkctl_tests
	$(PYTHON) -m pytest -q tests/client

# The e2e suite once on each NIC model of the test guest (ci/guest.py):
# virtio-net (no page_pool, shared-page XDP) and vmxnet3 (a page_pool per
# receive queue, its own XDP code).  NICS=virtio runs one.  And once on each
# kernel of KERNELS: 6.12 (the default) and 6.1, Debian 12's own
# (KERNELS="6.12 6.1" runs both, as .ci/run does).  On 6.1 only virtio-net:
# vmxnet3 runs XDP from 6.6 on.
NICS ?= virtio vmxnet3
NICS_6.1 ?= virtio
KERNELS ?= 6.12
E2E_MODULES := $(foreach k,$(KERNELS),$(if $(filter 6.12,$(k)),bench-module,module-$(k)))

# What each pass runs.  6.12 on virtio-net runs the whole suite; the other
# passes run the tests that what differs there can break, so that CI's three
# passes fit in its 90 minutes (the whole suite: 23 minutes on 6.12 with
# virtio-net here under TCG).  E2E=all runs the whole suite in every pass.
#  - vmxnet3 (its page_pool pages are what bios are built on, its own XDP
#    and multi-buffer code): the data path, the lifecycle loop, the remote
#    host's zero-copy, GSO, forced-detach and jumbo tests, the NIC removed
#    under an instance, the NIC downed while a stuck disk holds its pages.
#    test_link's server keeps a virtio-net link NIC there (multi-buffer
#    XDP), so its jumbo tests pair it with a client whose NIC takes pages.
#  - 6.1 (kmod/common/compat.h: bdev open without holder ops, the extack
#    ring, no frag sends, alloc_disk, polled queues): the data path, the
#    control plane's refusals and stops, a removed disk found by the reaper,
#    polled completions, the remote host's attach, mkfs and rmmod, an attach
#    that hangs while other commands go on (parallel handlers, the extack ring).
E2E ?= subsets
ifneq ($(filter-out subsets all,$(E2E)),)
$(error E2E=$(E2E): subsets (the default: the whole suite on 6.12 with virtio-net, a share elsewhere) or all (the whole suite everywhere))
endif
E2E_TESTS_6.12_vmxnet3 := tests/e2e/test_datapath.py tests/e2e/test_lifecycle.py \
	tests/e2e/test_link.py tests/e2e/test_monitoring.py tests/e2e/test_stuck.py \
	-k "test_datapath or test_lifecycle or nic_removed or \
	disk_holds_its_frames or (test_link and (without_a_copy or gso or \
	forced_detach or jumbo))"
E2E_TESTS_6.1_virtio := tests/e2e/test_datapath.py tests/e2e/test_control_plane.py \
	tests/e2e/test_polled.py tests/e2e/test_link.py \
	-k "test_datapath or test_polled or refused or refusal_messages or \
	start_list_stop or nic_down_stops or device_removed or rmmod_with or \
	without_a_copy or attach_mkfs or rmmod_detaches or holds_up_nothing"
e2e_tests = $(if $(filter all,$(E2E)),tests/e2e,$(or $(E2E_TESTS_$(1)_$(2)),tests/e2e))

e2e: $(E2E_MODULES) netblkctl load insn-plugin
	@set -e; $(foreach k,$(KERNELS),$(foreach nic,$(or $(NICS_$(k)),$(NICS)), \
		echo "== e2e on $(k), $(nic)"; \
		NETBLK_KERNEL=$(k) NETBLK_NIC=$(nic) $(PYTHON) -m pytest -v \
			$(call e2e_tests,$(k),$(nic));))

# The e2e suite on the arm64 guest (NETBLK_ARCH=arm64, ci/guest.py): the
# cross-built module and tools, and the guest's arm64 programs from Debian's
# packages (ci/fetch-sysroot.sh, build/sysroot-arm64), virtio-net only.
ARM64_GUEST_PKGS := iproute2 bpftool xdp-tools ethtool dmsetup e2fsprogs fio mdadm util-linux

# ARM64_TESTS: what pytest runs there (the whole suite by default).  CI runs
# ARM64_SUBSET, which fits beside the x86 suites: start/stop, the data path
# (read, write, verify, refusals, drops, stop and rmmod under load, the NIC
# shared with another XDP program) and the control plane's refusals.
ARM64_TESTS ?= tests/e2e
ARM64_SUBSET := tests/e2e/test_datapath.py tests/e2e/test_control_plane.py \
	-k "test_datapath or refused or start_list_stop"

e2e-arm64: deps-arm64 module-arm64 netblkctl-arm64 load-arm64 insn-plugin
	NETBLK_ARCH=arm64 ci/fetch-sysroot.sh $(ARM64_GUEST_PKGS) >/dev/null
	NETBLK_ARCH=arm64 NETBLK_NIC=virtio $(PYTHON) -m pytest -v $(ARM64_TESTS)

# The newest kernel the registry has is only compiled for: upstream's
# changes break the build here before they reach a user.  ARM64=subset (as
# .ci/run) or ARM64=all adds the arm64 guest's run.
ARM64 ?=
ifneq ($(filter-out subset all,$(ARM64)),)
$(error ARM64=$(ARM64): subset (the CI subset on the arm64 guest) or all (its whole suite))
endif
check: deps
	$(MAKE) -j$(shell nproc) unit
	$(MAKE) module-newest
	$(MAKE) kmod-graph
	$(MAKE) e2e
	$(if $(filter subset,$(ARM64)),$(MAKE) e2e-arm64 ARM64_TESTS='$(ARM64_SUBSET)')
	$(if $(filter all,$(ARM64)),$(MAKE) e2e-arm64)
	$(MAKE) check-pkg

# make install, the Debian packages (built, linted, installed here, DKMS's
# module run in the guest, purged), the man pages and completion against the
# tools' usage, one release everywhere (tests/pkg).
PKG_PKGS := dkms dh-dkms debhelper dh-python lintian

check-pkg: deps
	ci/install-deps.sh $(PKG_PKGS)
	$(MAKE) bench-module netblkctl man
	$(PYTHON) -m pytest -v tests/pkg

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
# module: one for another kernel than the tree's is built in a copy of the
# module's sources ($(1)), against the kbuild tree $(2), with make's
# arguments $(3) (a cross build's ARCH and CROSS_COMPILE).
define build_module_copy
	@mkdir -p $(1)/kmod
	cp -p Kbuild $(1)/
	tar -C kmod -cf - --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod*' \
		--exclude='*.symvers' --exclude='*.order' . | tar -C $(1)/kmod -xpf -
	$(MAKE) -C $(2) M=$(1) $(3) modules
endef

debug-module: debug-kernel
	$(call build_module_copy,$(DEBUG_MODULE),$(DEBUG_KDIR))

check-debug: deps
	$(MAKE) debug-module netblkctl load insn-plugin
	NETBLK_KERNEL=debug NETBLK_LIFECYCLE_LOOPS=$(LIFECYCLE_LOOPS) $(PYTHON) -m pytest -v tests/e2e

demo: deps
	$(MAKE) bench-module netblkctl
	$(PYTHON) ci/demo.py --port $(PORT)

demo-exec:
	@$(PYTHON) ci/demo.py --exec "$(CMD)"

# Where make install puts things.  The module goes where the kernel's own
# modules_install puts an external one (INSTALL_MOD_PATH, INSTALL_MOD_DIR);
# DESTDIR stages everything (a package build) and skips depmod.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
# Debian's python3 looks in /usr/lib/python3/dist-packages and, for what the
# administrator installs, /usr/local/lib/python3.X/dist-packages.
PYTHON_SITE ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python3.$(shell $(PYTHON) -c 'import sys; print(sys.version_info.minor)')/dist-packages)
INSTALL_MOD_DIR ?= extra
SYSTEMD_UNIT_DIR ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)

# The tools only once the module is in place (a refused module installs nothing).
install: install-module
	$(MAKE) install-tools

# A module built for another kernel than the one it is installed for would
# not load (or worse, load and crash): say which one, or build for it.
install-module: module
	@built="$$(modinfo -F vermagic kmod/netblk.ko | cut -d' ' -f1)"; \
	want="$(KVER_BUILD)"; \
	if [ "$$built" != "$$want" ]; then \
		if [ -n "$(KVER)" ]; then \
			echo "make install: kmod/netblk.ko is built for $$built, not KVER=$$want: install $$want's headers (/lib/modules/$$want/build) so that make builds for it, or give KVER=$$built" >&2; \
		else \
			echo "make install: kmod/netblk.ko is built for $$built, not for the kernel this host runs ($$want): install its headers (apt-get install linux-headers-$$want) and run make install again, or say which kernel to install it for: make install KVER=$$built" >&2; \
		fi; \
		exit 1; \
	fi
	install -D -m 0644 kmod/netblk.ko \
		$(DESTDIR)$(INSTALL_MOD_PATH)/lib/modules/$(KVER_BUILD)/$(INSTALL_MOD_DIR)/netblk.ko
	@if [ -z "$(DESTDIR)" ]; then \
		echo "depmod $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH) )$(KVER_BUILD)"; \
		depmod $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) $(KVER_BUILD); \
	fi

# netblkctl, the Python client (the netblk command and `import netblk`), man
# pages, bash completion, netblk.service (restore at boot, stop at shutdown)
# and netblk-supervise.service (netblkctl supervise, which it starts).
install-tools: netblkctl man
	install -D -m 0755 tools/netblkctl/netblkctl $(DESTDIR)$(SBINDIR)/netblkctl
	install -d $(DESTDIR)$(PYTHON_SITE)/netblk
	install -m 0644 client/netblk/*.py $(DESTDIR)$(PYTHON_SITE)/netblk/
	install -d $(DESTDIR)$(BINDIR)
	printf '#!/usr/bin/python3\nimport sys\n\nfrom netblk import run\n\nsys.exit(run())\n' \
		>$(DESTDIR)$(BINDIR)/netblk
	chmod 0755 $(DESTDIR)$(BINDIR)/netblk
	install -D -m 0644 build/man/netblkctl.8 $(DESTDIR)$(MANDIR)/man8/netblkctl.8
	install -D -m 0644 build/man/netblk.1 $(DESTDIR)$(MANDIR)/man1/netblk.1
	install -D -m 0644 tools/netblkctl/netblkctl.bash-completion \
		$(DESTDIR)$(BASH_COMPLETION_DIR)/netblkctl
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	for unit in netblk netblk-supervise; do \
		sed 's|@SBINDIR@|$(SBINDIR)|g' tools/netblkctl/$$unit.service.in \
			>$(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$unit.service || exit 1; \
	done

# The module's sources as DKMS builds them (the netblk-dkms package).
install-dkms-source:
	install -d $(DESTDIR)/usr/src/netblk-$(NETBLK_RELEASE)
	find Kbuild kmod -type f \( -name Kbuild -o -name '*.[ch]' -o -name '*.cpp' \) -print0 | \
		tar --null -T - -cf - | tar -C $(DESTDIR)/usr/src/netblk-$(NETBLK_RELEASE) -xf -

# Man pages from their scdoc sources (man/): tests/pkg checks them against
# the tools' own usage text.
man: build/man/netblkctl.8 build/man/netblk.1

build/man/%: man/%.scd
	@mkdir -p build/man
	scdoc <$< >$@.tmp
	mv $@.tmp $@

# The release kmod/uapi/netblk_version.h names (debian/rules asks it here).
release:
	@echo $(NETBLK_RELEASE)

# Debian packages, built with Debian's tools in a copy of the tree (what git
# tracks or would track) so that nothing lands beside the checkout.
deb:
	rm -rf build/deb
	mkdir -p build/deb/netblk-$(NETBLK_RELEASE)
	git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - -cf - | tar -C build/deb/netblk-$(NETBLK_RELEASE) -xf -
	cd build/deb/netblk-$(NETBLK_RELEASE) && dpkg-buildpackage -us -uc -b
	lintian --fail-on error build/deb/netblk_$(NETBLK_RELEASE)_*.changes

clean:
	-$(MAKE) -C $(BENCH_KDIR) M=$(CURDIR) clean 2>/dev/null
	rm -rf build/unit build/guest build/bpf build/module-6.1 build/module-newest \
		tools/netblkctl/netblkctl tools/netblk-load/netblk-load

# The TCG plugin that counts each vCPU's instructions (ci/insn_count.py):
# what a request costs a guest, without the noise of CPU time under TCG.
# Its header is in no binary package: Debian's qemu source package has it.
QEMU_PLUGIN_DIR := build/qemu-plugin
.PHONY: insn-plugin
insn-plugin: $(QEMU_PLUGIN_DIR)/libinsn_count.so

$(QEMU_PLUGIN_DIR)/qemu-plugin.h:
	ci/fetch-qemu-plugin-header.sh $@

$(QEMU_PLUGIN_DIR)/libinsn_count.so: ci/qemu-plugin/insn_count.c $(QEMU_PLUGIN_DIR)/qemu-plugin.h
	$(CC) -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared \
		-I$(QEMU_PLUGIN_DIR) -o $@ $< -lpthread

# The load generator (tools/netblk-load/README.md) and the benchmark against
# nbd-server and the local disk (bench/README.md).
.PHONY: load bench bench-v1 bench-client bench-queues
BENCH_ARGS ?=

load: tools/netblk-load/netblk-load

tools/netblk-load/netblk-load: $(LOAD_PREREQS)
	$(CXX) $(LOAD_FLAGS) -o $@ $(LOAD_SRCS)

# What only the benchmarks need: the peers' servers and clients, the plot.
BENCH_PKGS := nbd-client vblade python3-matplotlib

bench: deps
	ci/install-deps.sh $(BENCH_PKGS)
	$(MAKE) bench-module netblkctl load bench-v1 insn-plugin
	$(PYTHON) ci/bench.py $(BENCH_ARGS)
	$(PYTHON) ci/bench_client.py $(BENCH_CLIENT_ARGS)

# Block devices on a second guest alone: netblk, NVMe/TCP, nbd, AoE, local (bench/README.md).
BENCH_CLIENT_ARGS ?=
bench-client: deps
	ci/install-deps.sh $(BENCH_PKGS)
	$(MAKE) bench-module netblkctl insn-plugin
	$(PYTHON) ci/bench_client.py $(BENCH_CLIENT_ARGS)

# queues=2 against queues=1 on a multi-queue link (ci/bench_client.py --queues:
# two-queue taps bridged in a network namespace of its own; bench/README.md).
BENCH_QUEUES_ARGS ?=
bench-queues: deps
	$(MAKE) bench-module netblkctl insn-plugin
	$(PYTHON) ci/bench_client.py --queues $(BENCH_QUEUES_ARGS)

# Protocol v1 as it was (main before the v2 merge), for the bench's netblk-v1.
V1_COMMIT ?= da693d5
bench-v1: kernel
	ci/build-v1.sh $(V1_COMMIT) build/v1
