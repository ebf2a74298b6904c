/*
 * One definition per counter (kmod/uapi/netblk_counters.h): the attribute
 * numbers netlink readers of every release depend on, each used once, and
 * the documentation's table made from the same lists.
 */
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "format.h"
#include "helpers.h"

namespace {

/*
 * Two entries with one number do not compile: a switch's cases must
 * differ.  (The genl.c's BUILD_BUG_ONs check the count.)
 */
#define CASE_OF(NAME, name, nr, ...) case nr:
constexpr bool stat_number(int nr)
{
	switch (nr) {
	case NETBLK_S_PAD:
	NETBLK_STATS(CASE_OF)
	NETBLK_DROPS(CASE_OF)
	NETBLK_REFUSALS(CASE_OF)
		return true;
	default:
		return false;
	}
}
constexpr bool host_stat_number(int nr)
{
	switch (nr) {
	case NETBLK_HS_PAD:
	NETBLK_HOST_STATS(CASE_OF)
		return true;
	default:
		return false;
	}
}
#undef CASE_OF

struct pinned {
	int attr;
	int nr;
};

/* The numbers of 0.x (netblk_genl.h before netblk_counters.h): never change these. */
constexpr pinned abi[] = {
	{NETBLK_S_REQUESTS, 1},
	{NETBLK_S_BAD, 2},
	{NETBLK_S_REFUSED, 3},
	{NETBLK_S_BUSY, 4},
	{NETBLK_S_INFLIGHT_QUEUED, 5},
	{NETBLK_S_INFLIGHT_DISK, 6},
	{NETBLK_S_INFLIGHT_DONE, 7},
	{NETBLK_S_READS, 8},
	{NETBLK_S_READ_BYTES, 9},
	{NETBLK_S_WRITES, 10},
	{NETBLK_S_WRITE_BYTES, 11},
	{NETBLK_S_FLUSHES, 12},
	{NETBLK_S_FUA_WRITES, 13},
	{NETBLK_S_IO_ERRORS, 14},
	{NETBLK_S_DISK_BUSY, 15},
	{NETBLK_S_REPLIES_DROPPED, 16},
	{NETBLK_S_WORKER_SLEEPS, 17},
	{NETBLK_S_FRAMES_RX, 18},
	{NETBLK_S_FRAMES_TX, 19},
	{NETBLK_S_BYTES_ZEROCOPY, 20},
	{NETBLK_S_BYTES_COPIED, 21},
	{NETBLK_S_DISK_BATCHES, 22},
	{NETBLK_S_TX_BATCHES, 23},
	{NETBLK_S_PAD, 24},
	{NETBLK_S_DROP_MALFORMED, 25},
	{NETBLK_S_DROP_FRAGMENT, 26},
	{NETBLK_S_DROP_MULTIBUFFER, 27},
	{NETBLK_S_DROP_MISADDRESSED, 28},
	{NETBLK_S_DROP_VLAN, 29},
	{NETBLK_S_DROP_SOURCE, 30},
	{NETBLK_S_DROP_CHECKSUM, 31},
	{NETBLK_S_DROP_NOT_REQUEST, 32},
	{NETBLK_S_DISK_BLOCKING, 33},
	{NETBLK_S_DISK_GAVE_UP, 34},
	{NETBLK_S_NO_BUFFER, 35},
	{NETBLK_S_REPLIES_OVERSIZED, 36},
	{NETBLK_S_TX_DEFERRED, 37},
	{NETBLK_S_TX_ERRORS, 38},
	{NETBLK_S_TRIMS, 39},
	{NETBLK_S_TRIM_BYTES, 40},
	{NETBLK_S_WRITE_ZEROES, 41},
	{NETBLK_S_WRITE_ZEROES_BYTES, 42},
	{NETBLK_S_SESSIONS_OPEN, 43},
	{NETBLK_S_SESSIONS_OPENED, 44},
	{NETBLK_S_SESSIONS_EVICTED, 45},
	{NETBLK_S_SESSIONS_REFUSED, 46},
	{NETBLK_S_HELLO_COOKIES, 47},
	{NETBLK_S_NOT_CONNECTED, 48},
	{NETBLK_S_AUTH_FAILED, 49},
	{NETBLK_S_OLD_VERSION, 50},
	{NETBLK_S_DUPLICATES, 51},
	{NETBLK_S_DUPLICATES_IN_FLIGHT, 52},
	{NETBLK_S_STALE, 53},
	{NETBLK_S_TOO_FAR, 54},
	{NETBLK_S_REFUSED_EAGAIN, 55},
	{NETBLK_S_REFUSED_EINVAL, 56},
	{NETBLK_S_REFUSED_EROFS, 57},
	{NETBLK_S_REFUSED_ERANGE, 58},
	{NETBLK_S_REFUSED_EMSGSIZE, 59},
	{NETBLK_S_REFUSED_EOPNOTSUPP, 60},
	{NETBLK_S_REFUSED_ENOTCONN, 61},
	{NETBLK_S_REFUSED_EKEYREJECTED, 62},
	{NETBLK_S_REFUSED_EPROTONOSUPPORT, 63},
	{NETBLK_S_ANSWERS_FOLDED, 64},
	{NETBLK_S_READS_GATHERED, 65},
	{NETBLK_S_REFUSED_ESTALE, 66},
	{NETBLK_S_REFUSED_EOVERFLOW, 67},
	{NETBLK_S_REFUSED_EUSERS, 68},
	{NETBLK_S_REFUSED_EALREADY, 69},
	{NETBLK_S_REFUSED_EEXIST, 70},
	{NETBLK_S_SERVED_AGAIN, 71},
	{NETBLK_S_WRITES_MISALIGNED, 72},
	{NETBLK_S_STEERED, 73},
	{NETBLK_S_PAGES_REPLACED, 74},
	{NETBLK_HS_PAD, 1},
	{NETBLK_HS_REQUESTS, 2},
	{NETBLK_HS_ERRORS, 3},
	{NETBLK_HS_SENDS, 4},
	{NETBLK_HS_TIMEOUTS, 5},
	{NETBLK_HS_FAST_RESENDS, 6},
	{NETBLK_HS_BUSY, 7},
	{NETBLK_HS_STRAY, 8},
	{NETBLK_HS_DUPLICATES, 9},
	{NETBLK_HS_SESSIONS_OPENED, 10},
	{NETBLK_HS_RENUMBERED, 11},
	{NETBLK_HS_REFUSED, 12},
	{NETBLK_HS_COMPLETED, 13},
	{NETBLK_HS_FAILED, 14},
	{NETBLK_HS_WINDOW, 15},
	{NETBLK_HS_WINDOW_DECREASES, 16},
	{NETBLK_HS_SRTT_NS, 17},
	{NETBLK_HS_RTO_NS, 18},
	{NETBLK_HS_OUTSTANDING, 19},
	{NETBLK_HS_QUEUED, 20},
	{NETBLK_HS_BYTES_IN_PLACE, 21},
	{NETBLK_HS_BYTES_COPIED, 22},
	{NETBLK_HS_READ_BYTES_COPIED, 23},
	{NETBLK_HS_TX_ERRORS, 24},
	{NETBLK_HS_TX_DROPPED, 25},
	{NETBLK_HS_RX_DATAGRAMS, 26},
	{NETBLK_HS_UNREACHABLE, 27},
	{NETBLK_HS_OUTAGES, 28},
	{NETBLK_HS_FAILED_FAST, 29},
	{NETBLK_HS_CHANGED, 30},
	{NETBLK_HS_RESIZES, 31},
	{NETBLK_HS_SPURIOUS, 32},
	{NETBLK_HS_TX_BATCHED, 33},
	{NETBLK_HS_FOLDED, 34},
	{NETBLK_HS_FAST_SPURIOUS, 35},
	{NETBLK_HS_REORDERING, 36},
	{NETBLK_HS_HEADER_PAGES, 37},
};

TEST(Counters, AttributeNumbersAreThoseOfEveryRelease)
{
	for (const auto &p : abi)
		EXPECT_EQ(p.attr, p.nr) << "an attribute was renumbered: append, never renumber";
}

TEST(Counters, EveryNumberIsUsedOnceUpToTheLast)
{
	std::multiset<int> seen = {NETBLK_S_PAD};
	for (const auto &c : stat_infos)
		seen.insert(c.attr);
	for (const auto &d : drop_reasons)
		seen.insert(d.attr);
	for (const auto &r : refusal_statuses)
		seen.insert(r.attr);
	for (int nr = 1; nr <= NETBLK_S_MAX; nr++) {
		EXPECT_EQ(seen.count(nr), 1u) << "NETBLK_S_ number " << nr;
		EXPECT_TRUE(stat_number(nr)) << nr;
	}
	EXPECT_EQ(seen.size(), size_t(NETBLK_S_MAX)) << "NETBLK_S_NEXT: one past the highest";

	std::multiset<int> host = {NETBLK_HS_PAD};
	for (const auto &c : host_stat_infos)
		host.insert(c.attr);
	for (int nr = 1; nr <= NETBLK_HS_MAX; nr++) {
		EXPECT_EQ(host.count(nr), 1u) << "NETBLK_HS_ number " << nr;
		EXPECT_TRUE(host_stat_number(nr)) << nr;
	}
	EXPECT_EQ(host.size(), size_t(NETBLK_HS_MAX)) << "NETBLK_HS_NEXT: one past the highest";
}

TEST(Counters, NamesAndFamiliesAreDistinct)
{
	std::set<std::string> names, families;
	for (const auto &c : stat_infos) {
		EXPECT_TRUE(names.insert(c.name).second) << c.name;
		EXPECT_TRUE(!*c.prom || families.insert(c.prom).second) << c.prom;
		EXPECT_TRUE(*c.help) << c.name << " has no help";
	}
	for (const auto &d : drop_reasons)
		EXPECT_TRUE(names.insert(std::string("dropped_") + d.name).second) << d.name;
	for (const auto &r : refusal_statuses)
		EXPECT_TRUE(names.insert(std::string("refused_") + r.name).second) << r.name;
	names.clear();
	for (const auto &c : host_stat_infos) {
		EXPECT_TRUE(names.insert(c.name).second) << c.name;
		EXPECT_TRUE(!*c.prom || families.insert(c.prom).second) << c.prom;
		EXPECT_TRUE(*c.help) << c.name << " has no help";
	}
}

/*
 * tools/netblkctl/README.md's counter tables are format_counter_docs()'s,
 * between the markers.  NETBLK_UPDATE_DOCS=1 writes them there.
 */
TEST(Counters, TheReadmeListsEveryCounter)
{
	expect_region({"tools/netblkctl/README.md", "<!-- ", " -->\n", "counters",
		       "format_counter_docs()"},
		      format_counter_docs());
}

} // namespace
