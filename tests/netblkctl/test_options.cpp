/*
 * One definition per option (kmod/uapi/netblk_options.h): the attribute
 * numbers netlink readers of every release depend on, each used once.
 */
#include <gtest/gtest.h>

#include "netblk_genl.h"

namespace {

/*
 * Two attributes with one number do not compile: a switch's cases must
 * differ.  Every attribute of enum netblk_attr is here, the hand-written
 * and the lists'.
 */
#define CASE_OF(NAME, name, nr, ...) case nr:
constexpr bool attr_number(int nr)
{
	switch (nr) {
	case NETBLK_A_DEVICE:
	case NETBLK_A_PORT:
	case NETBLK_A_IFNAME:
	case NETBLK_A_ALL:
	case NETBLK_A_IFINDEX:
	case NETBLK_A_ADDR:
	case NETBLK_A_SIZE:
	case NETBLK_A_SECTOR_SIZE:
	case NETBLK_A_MAX_IO:
	case NETBLK_A_SLOTS:
	case NETBLK_A_UPTIME_MS:
	case NETBLK_A_STOPPED:
	case NETBLK_A_EVENT:
	case NETBLK_A_REASON:
	case NETBLK_A_ERRNO:
	case NETBLK_A_MESSAGE:
	case NETBLK_A_STATS:
	case NETBLK_A_PAD:
	case NETBLK_A_XDP_LINK_FD:
	case NETBLK_A_HANDOFF_IFINDEX:
	case NETBLK_A_LATENCY:
	case NETBLK_A_ALLOW:
	case NETBLK_A_ALLOW_PREFIX:
	case NETBLK_A_DRIVER:
	case NETBLK_A_STATE:
	case NETBLK_A_STOPPING_MS:
	case NETBLK_A_STOPPING:
	case NETBLK_A_KEY:
	case NETBLK_A_AUTH:
	case NETBLK_A_DISK:
	case NETBLK_A_FORCE:
	case NETBLK_A_HOST_STATS:
	case NETBLK_A_WAITING_MS:
	case NETBLK_A_WAITING_FOR:
	case NETBLK_A_DISK_NAME:
	case NETBLK_A_XDP_DROPPED:
	case NETBLK_A_QUEUE_LIST:
	case NETBLK_A_QUEUE:
	NETBLK_START_OPTIONS(CASE_OF)
	NETBLK_ATTACH_OPTIONS(CASE_OF)
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

/* The numbers of the releases before netblk_options.h: never change these. */
constexpr pinned abi[] = {
	{NETBLK_A_DEVICE, 1},
	{NETBLK_A_PORT, 2},
	{NETBLK_A_READ_ONLY, 3},
	{NETBLK_A_IFNAME, 4},
	{NETBLK_A_MTU, 5},
	{NETBLK_A_CPU, 6},
	{NETBLK_A_POLL_US, 7},
	{NETBLK_A_ALL, 8},
	{NETBLK_A_IFINDEX, 9},
	{NETBLK_A_ADDR, 10},
	{NETBLK_A_SIZE, 11},
	{NETBLK_A_SECTOR_SIZE, 12},
	{NETBLK_A_MAX_IO, 13},
	{NETBLK_A_SLOTS, 14},
	{NETBLK_A_UPTIME_MS, 15},
	{NETBLK_A_STOPPED, 16},
	{NETBLK_A_EVENT, 17},
	{NETBLK_A_REASON, 18},
	{NETBLK_A_ERRNO, 19},
	{NETBLK_A_MESSAGE, 20},
	{NETBLK_A_STATS, 21},
	{NETBLK_A_PAD, 22},
	{NETBLK_A_XDP_LINK_FD, 23},
	{NETBLK_A_HANDOFF_IFINDEX, 24},
	{NETBLK_A_LATENCY, 25},
	{NETBLK_A_VLAN, 26},
	{NETBLK_A_ALLOW, 27},
	{NETBLK_A_ALLOW_PREFIX, 28},
	{NETBLK_A_DRIVER, 29},
	{NETBLK_A_STATE, 30},
	{NETBLK_A_STOPPING_MS, 31},
	{NETBLK_A_STOPPING, 32},
	{NETBLK_A_SESSIONS, 33},
	{NETBLK_A_KEY, 34},
	{NETBLK_A_AUTH, 35},
	{NETBLK_A_DISK, 36},
	{NETBLK_A_QUEUE_DEPTH, 37},
	{NETBLK_A_TIMEOUT_MS, 38},
	{NETBLK_A_FORCE, 39},
	{NETBLK_A_HOST_STATS, 40},
	{NETBLK_A_NIC_LOSS, 41},
	{NETBLK_A_WAITING_MS, 42},
	{NETBLK_A_WAITING_FOR, 43},
	{NETBLK_A_DISK_NAME, 44},
	{NETBLK_A_XDP_DROPPED, 45},
	{NETBLK_A_PER_SOURCE, 46},
	{NETBLK_A_DISK_TRIES, 47},
	{NETBLK_A_QUEUES, 48},
	{NETBLK_A_QUEUE_LIST, 49},
	{NETBLK_A_QUEUE, 50},
	{NETBLK_A_HOST_QUEUES, 51},
};

TEST(Options, AttributeNumbersNeverChange)
{
	for (const pinned &p : abi)
		EXPECT_EQ(p.attr, p.nr);
}

TEST(Options, EveryNumberBelowNextIsUsedOnce)
{
	for (int nr = 1; nr < NETBLK_A_NEXT; nr++)
		EXPECT_TRUE(attr_number(nr)) << "attribute " << nr << " unused: a gap in the enum";
	EXPECT_FALSE(attr_number(NETBLK_A_NEXT)) << "NETBLK_A_NEXT is taken: move it past";
	EXPECT_EQ(NETBLK_A_MAX, NETBLK_A_NEXT - 1);
}

/* Lines' own columns: a default within its range, a range the type holds. */
#define CHECK_LINE(NAME, name, nr, type, lo, hi, def, ...)			\
	EXPECT_LE((unsigned long long)(lo), (unsigned long long)(hi)) << #name;	\
	EXPECT_LE((unsigned long long)(hi),					\
		  std::string(#type) == "flag" ? 1ull :				\
		  std::string(#type) == "u16" ? 0xffffull : 0xffffffffull) << #name; \
	EXPECT_TRUE((def) == 0 || ((unsigned long long)(def) >= (lo) &&	\
				   (unsigned long long)(def) <= (hi))) << #name;
TEST(Options, LinesAreWellFormed)
{
	NETBLK_START_OPTIONS(CHECK_LINE)
	NETBLK_ATTACH_OPTIONS(CHECK_LINE)
}
#undef CHECK_LINE

} // namespace
