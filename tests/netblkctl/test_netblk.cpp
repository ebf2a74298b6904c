// SPDX-License-Identifier: GPL-2.0
/* The netblk family's messages (netblk.cpp): a LIST message as the module
 * builds it, parsed; malformed ones refused. */
#include "helpers.h"

#include <arpa/inet.h>
#include <cerrno>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <vector>

namespace {

// A LIST message as the module would build it, with padding before the u64s
// and attributes this netblkctl does not know.
// malformed: 1, MTU of the wrong size; 2, NETBLK_L_BUCKETS not whole buckets.
std::vector<char> list_message(int malformed)
{
	std::vector<char> buf(4096);
	nlmsghdr *nlh = mnl_nlmsg_put_header(buf.data());
	nlh->nlmsg_type = 0x20;
	auto *genl = static_cast<genlmsghdr *>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
	genl->cmd = NETBLK_CMD_LIST;
	mnl_attr_put_strz(nlh, NETBLK_A_DEVICE, "/dev/vdb");
	mnl_attr_put_u16(nlh, NETBLK_A_PORT, 7001);
	mnl_attr_put(nlh, NETBLK_A_READ_ONLY, 0, nullptr);
	mnl_attr_put_strz(nlh, NETBLK_A_IFNAME, "lo");
	mnl_attr_put_u32(nlh, NETBLK_A_ADDR, htonl(0x7f000001));
	mnl_attr_put(nlh, NETBLK_A_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_A_SIZE, GiB + GiB / 2);
	mnl_attr_put_u32(nlh, NETBLK_A_HANDOFF_IFINDEX, 12);
	mnl_attr_put_u32(nlh, NETBLK_A_XDP_DROPPED, 3);
	mnl_attr_put_u32(nlh, 200, 42);			// from a newer module
	if (malformed == 1)
		mnl_attr_put_u16(nlh, NETBLK_A_MTU, 1500);	// should be u32
	nlattr *stats = mnl_attr_nest_start(nlh, NETBLK_A_STATS);
	mnl_attr_put(nlh, NETBLK_S_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_S_REQUESTS, 5);
	mnl_attr_put_u64(nlh, NETBLK_S_BYTES_COPIED, 4096);
	mnl_attr_put_u64(nlh, 300, 1);			// a newer counter
	mnl_attr_nest_end(nlh, stats);
	nlattr *lat = mnl_attr_nest_start(nlh, NETBLK_A_LATENCY);
	mnl_attr_put(nlh, NETBLK_L_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_L_COUNT, 100);
	mnl_attr_put_u64(nlh, NETBLK_L_MAX_NS, 225757123);
	mnl_attr_put_u32(nlh, NETBLK_L_LINEAR_LIMIT, 128);
	mnl_attr_put_u32(nlh, NETBLK_L_SUB_BUCKETS, 64);
	mnl_attr_put_u32(nlh, 99, 7);			// a newer latency attribute
	netblk_latency_bucket b[2] = {{713, 0, 98}, {1451, 0, 2}};
	mnl_attr_put(nlh, NETBLK_L_BUCKETS, malformed == 2 ? sizeof(b) - 4 : sizeof(b), b);
	mnl_attr_nest_end(nlh, lat);
	buf.resize(nlh->nlmsg_len);
	return buf;
}

} // namespace

TEST(NetblkParse, ListMessageReadsIntoAnInstanceAndSkipsWhatItDoesNotKnow)
{
	std::vector<char> msg = list_message(0);
	netblk_instance i;
	nl_status st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	ASSERT_TRUE(st.ok()) << "parse ok: " << st.text();
	EXPECT_EQ(i.device, "/dev/vdb") << "parse device";
	EXPECT_TRUE(i.port == 7001 && i.read_only && i.ifname == "lo") << "parse port, ro, ifname";
	EXPECT_EQ(i.handoff_ifindex, 12) << "parse handoff ifindex";
	EXPECT_EQ(i.xdp_dropped, 3) << "parse the dropped program's reopen";
	EXPECT_TRUE(contains(format_instances_json({i}), "\"xdp_dropped\": 3, "))
		<< "json xdp_dropped";
	EXPECT_EQ(format_ipv4(i.addr), "127.0.0.1") << "parse addr";
	EXPECT_EQ(i.size, GiB + GiB / 2) << "parse size";
	EXPECT_TRUE(i.stat(NETBLK_S_REQUESTS) == 5 && i.stat(NETBLK_S_BYTES_COPIED) == 4096)
		<< "parse stats";
	EXPECT_EQ(i.stat(NETBLK_S_BAD), 0) << "missing stat is 0";

	EXPECT_TRUE(i.latency.present && i.latency.count == 100 && i.latency.max_ns == 225757123 &&
		i.latency.linear_limit == 128 && i.latency.sub_buckets == 64) << "parse latency";
	EXPECT_EQ(i.latency.buckets,
		  (std::vector<std::pair<uint32_t, uint64_t>>{{713, 98}, {1451, 2}}))
		<< "parse latency buckets";
	EXPECT_TRUE(contains(format_instance_text(i), "p50 75.3, p99 225076.2"))
		<< "parsed latency reads";
}

TEST(NetblkParse, MalformedAttributesAreRefusedAndNamed)
{
	netblk_instance i;
	std::vector<char> msg = list_message(1);
	nl_status st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	EXPECT_EQ(st.err, EBADMSG) << "malformed attribute refused";
	EXPECT_TRUE(contains(st.msg, "attribute 5 ")) << "malformed attribute named";

	msg = list_message(2);
	st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	EXPECT_TRUE(st.err == EBADMSG && st.msg.find("latency attribute 5 ") != std::string::npos)
		<< "malformed buckets refused";
}

/* An ATTACHED message of a device of two hardware queues: each queue's counters, in order. */
TEST(NetblkParse, AttachedMessageReadsEachHardwareQueue)
{
	std::vector<char> buf(4096);
	nlmsghdr *nlh = mnl_nlmsg_put_header(buf.data());
	nlh->nlmsg_type = 0x20;
	auto *genl = static_cast<genlmsghdr *>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
	genl->cmd = NETBLK_CMD_ATTACHED;
	mnl_attr_put_strz(nlh, NETBLK_A_DISK, "netblk0");
	nlattr *stats = mnl_attr_nest_start(nlh, NETBLK_A_HOST_STATS);
	mnl_attr_put_u64(nlh, NETBLK_HS_REQUESTS, 7);
	mnl_attr_nest_end(nlh, stats);
	nlattr *list = mnl_attr_nest_start(nlh, NETBLK_A_QUEUE_LIST);
	for (uint64_t q = 0; q < 2; q++) {
		nlattr *one = mnl_attr_nest_start(nlh, NETBLK_A_QUEUE);
		mnl_attr_put_u32(nlh, 77, 1);			// a newer queue attribute
		nlattr *qs = mnl_attr_nest_start(nlh, NETBLK_Q_HOST_STATS);
		mnl_attr_put(nlh, NETBLK_HS_PAD, 0, nullptr);
		mnl_attr_put_u64(nlh, NETBLK_HS_REQUESTS, 3 + q);
		mnl_attr_put_u64(nlh, NETBLK_HS_SENDS, 10 * (q + 1));
		mnl_attr_nest_end(nlh, qs);
		mnl_attr_nest_end(nlh, one);
	}
	mnl_attr_nest_end(nlh, list);

	netblk_attached a;
	nl_status st = netblk_parse_attached(nlh, a);
	ASSERT_TRUE(st.ok()) << st.text();
	EXPECT_EQ(a.stat(NETBLK_HS_REQUESTS), 7u);
	ASSERT_EQ(a.queue_list.size(), 2u);
	EXPECT_EQ(a.queue_list[0][NETBLK_HS_REQUESTS], 3u);
	EXPECT_EQ(a.queue_list[1][NETBLK_HS_REQUESTS], 4u);
	EXPECT_EQ(a.queue_list[1][NETBLK_HS_SENDS], 20u);
}
