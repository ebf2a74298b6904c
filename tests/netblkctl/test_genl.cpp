// SPDX-License-Identifier: GPL-2.0
/* The generic netlink client (genl.cpp) against nlctrl, on every Linux. */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>

#include "genl.h"

// The client against nlctrl: a doit, a missing family, an error ack with an
// extended-ack message, and a dump.
TEST(Genl, TalksToNlctrlDoitDumpErrorAckAndGroups)
{
	genl_socket sock;
	nl_status st = sock.open();
	ASSERT_TRUE(st.ok()) << "genl open: " << st.text();
	genl_family f;
	st = sock.resolve_family("nlctrl", f);
	EXPECT_TRUE(st.ok() && f.id == GENL_ID_CTRL) << "resolve nlctrl";
	EXPECT_TRUE(genl_mcast_group_id(f, "notify").has_value()) << "nlctrl has a notify group";
	EXPECT_FALSE(genl_mcast_group_id(f, "events").has_value()) << "no events group";

	st = sock.resolve_family("netblk-nope", f);
	EXPECT_EQ(st.err, ENOENT) << "missing family is ENOENT";

	// GETPOLICY validates strictly: a u32 where a u16 belongs is refused
	// with an extended-ack message, when the dump starts.
	nlmsghdr *req = sock.begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_DUMP, CTRL_CMD_GETPOLICY, 1);
	mnl_attr_put_u32(req, CTRL_ATTR_FAMILY_ID, GENL_ID_CTRL);
	st = sock.transact(req, [](const nlmsghdr *) { return nl_status{}; });
	EXPECT_TRUE(st.err == EINVAL && !st.msg.empty()) << "bad attribute refused with a message";
	printf("  nlctrl's refusal: %s (errno %d)\n", st.text().c_str(), st.err);

	int families = 0;
	req = sock.begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_DUMP, CTRL_CMD_GETFAMILY, 1);
	st = sock.transact(req, [&](const nlmsghdr *) {
		families++;
		return nl_status{};
	});
	EXPECT_TRUE(st.ok() && families >= 1) << "dump of nlctrl";
	printf("  dumped %d generic netlink families\n", families);

	// A multicast group joined, read without waiting: nothing is queued.
	genl_socket mc;
	EXPECT_TRUE(mc.open().ok() && mc.resolve_family("nlctrl", f).ok()) << "second socket";
	auto notify = genl_mcast_group_id(f, "notify");
	EXPECT_TRUE(notify && mc.join_group(*notify).ok() && mc.fd() >= 0)
		<< "join nlctrl's notify group";
	int seen = 0;
	st = mc.recv_pending([&](const nlmsghdr *) {
		seen++;
		return nl_status{};
	});
	EXPECT_TRUE(st.ok() && seen == 0) << "nothing pending on the group";
}
