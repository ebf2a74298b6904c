// SPDX-License-Identifier: GPL-2.0
/* What netblkctl's tests share: a JSON checker, string assertions that show
 * the text they looked in, the histograms and instances the tests format. */
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "format.h"
#include "histogram.h"	// kmod/core: the reference for percentiles
#include "netblk.h"

constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;

/* A strict JSON (RFC 8259) check of one document: fails saying where. */
testing::AssertionResult valid_json(std::string_view s);

/* `part` is in `text` (starts it, ends it); a failure shows both. */
testing::AssertionResult contains(const std::string &text, const std::string &part);
testing::AssertionResult starts_with(const std::string &text, const std::string &part);
testing::AssertionResult ends_with(const std::string &text, const std::string &part);

/* The sparse histogram the kernel would send for a core histogram. */
latency_hist sparse_of(const nb::histogram &h, bool reversed = false);

/* 98 samples of 75712 ns and 2 of 225757123 ns (hand-checked in the tests). */
nb::histogram *small_histogram();

/* /dev/nvme0n1p2 on eth0 10.0.2.15:7000, up 21.8 s, with traffic. */
netblk_instance example();

/* /dev/nvme0n1p1 on eth0:7000 at mtu 1500 with the default sessions: what
 * the --exist-ok and save checks start from. */
netblk_instance p1_on_eth0();

/* The block-device client's /dev/netblk0 on 10.9.0.1:7000, with traffic. */
netblk_attached attached_example();

/*
 * A region of a file made by a function (the docs of the counters, the
 * usage, the knobs): the text between the lines that open and close it,
 * written in the file's own comments -- `open` NAME ": begin (made by
 * MAKER; NETBLK_UPDATE_DOCS=1 build/unit/netblkctl_tests)" `close`, and
 * `open` NAME ": end" `close`.
 */
struct doc_region {
	const char *path;	/* from the repository's top directory */
	const char *open;	/* "<!-- ", "; ", "\t\t\t# " */
	const char *close;	/* " -->\n", "\n"; " -->" inside a line */
	const char *name;
	const char *maker;
};

/* The region says `want`; NETBLK_UPDATE_DOCS set in the environment writes
 * it there instead of failing. */
void expect_region(const doc_region &r, const std::string &want);
