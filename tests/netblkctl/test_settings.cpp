// SPDX-License-Identifier: GPL-2.0
/* start --exist-ok (settings.cpp): what is compared, what is not. */
#include "helpers.h"

#include <arpa/inet.h>

#include "settings.h"

// start --exist-ok: what is compared, what is not.
TEST(Settings, StartExistOkComparesWhatWasAskedFor)
{
	netblk_instance have = p1_on_eth0();
	have.cpu = 1;
	have.poll_us = 0;
	have.auth = NETBLK_AUTH_NONE;
	have.state = NETBLK_STATE_SERVING;
	netblk_start_args want;
	want.device = "/dev/nvme0n1p1";
	want.port = 7000;
	EXPECT_EQ(start_differs(want, "eth0", have), "") << "exist-ok: same, nothing else named";
	want.mtu = 1500;
	want.cpu = 1;
	EXPECT_EQ(start_differs(want, "eth0", have), "") << "exist-ok: mtu and cpu named, same";
	want.mtu = 9000;
	EXPECT_EQ(start_differs(want, "eth0", have), "mtu 1500, not 9000") << "exist-ok: mtu";
	want.mtu.reset();
	EXPECT_EQ(start_differs(want, "eth1", have), "NIC eth0, not eth1") << "exist-ok: nic";
	want.read_only = true;
	EXPECT_EQ(start_differs(want, "eth0", have), "read-write, not read-only (ro)")
		<< "exist-ok: ro";
	want.read_only = false;
	want.device = "/dev/nvme0n1p2";
	EXPECT_EQ(start_differs(want, "eth0", have), "device /dev/nvme0n1p1, not /dev/nvme0n1p2")
		<< "exist-ok: device";
	want.device = "/dev/nvme0n1p1";
	want.key = std::array<uint8_t, NETBLK_KEY_BYTES>{};
	EXPECT_EQ(start_differs(want, "eth0", have), "auth none, not header")
		<< "exist-ok: a key asked for, none held";
	have.auth = NETBLK_AUTH_HEADER;
	EXPECT_EQ(start_differs(want, "eth0", have), "") << "exist-ok: keyed both";
	want.allow.push_back({htonl(0x0a010000), 16, {}});
	EXPECT_EQ(start_differs(want, "eth0", have), "allow any source, not 10.1.0.0/16")
		<< "exist-ok: allow";
	have.allow = want.allow;
	EXPECT_EQ(start_differs(want, "eth0", have), "") << "exist-ok: same allow";
	have.state = NETBLK_STATE_STOPPING;
	EXPECT_EQ(start_differs(want, "eth0", have), "it is stopping") << "exist-ok: stopping";
	EXPECT_TRUE(same_block_device("/dev/null", "/dev/null")) << "same path, same device";
	EXPECT_FALSE(same_block_device("/dev/null", "/dev/zero"))
		<< "character devices are no disks";
}
