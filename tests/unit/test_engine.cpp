// SPDX-License-Identifier: GPL-2.0
/* An instance's core through the C face the kernel side uses. */
#include <gtest/gtest.h>

#include "core_api.h"
#include "engine.h"

TEST(Core, CreateRefusesSectorsThatDoNotFit)
{
	netblk_core_config config{};
	config.size_bytes = 1 << 20;
	config.sector_size = 4096;
	config.mtu = 1500;
	config.slots = NETBLK_SLOTS;
	config.nr_cpus = 2;
	netblk_core *core = nullptr;
	EXPECT_EQ(netblk_core_create(&config, &core), -22);
	EXPECT_EQ(core, nullptr);

	config.slots = 100;	/* not a power of two */
	config.sector_size = 512;
	EXPECT_EQ(netblk_core_create(&config, &core), -22);
}

TEST(Core, FreshInstanceHasAllSlotsFreeAndZeroCounters)
{
	netblk_core_config config{};
	config.size_bytes = 256ull << 20;
	config.sector_size = 512;
	config.mtu = 1500;
	config.slots = NETBLK_SLOTS;
	config.nr_cpus = 4;
	netblk_core *core = nullptr;
	ASSERT_EQ(netblk_core_create(&config, &core), 0);
	EXPECT_EQ(netblk_core_max_io(core), 1024u);
	EXPECT_EQ(netblk_core_slots(core), 256u);

	netblk_stats s{};
	s.requests = 99;
	netblk_core_read_stats(core, &s);
	EXPECT_EQ(s.requests, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	netblk_core_destroy(core);
}

TEST(Core, StatsSumPerCpuReceiveCountersAndDeriveStages)
{
	nb::engine e;
	netblk_core_config config{};
	config.size_bytes = 1 << 20;
	config.sector_size = 512;
	config.mtu = 1500;
	config.slots = 16;
	config.nr_cpus = 2;
	ASSERT_EQ(e.init(config), 0);

	nb::add_once(e.rx(0).requests, 3);
	nb::add_once(e.rx(1).requests, 4);
	nb::add_once(e.rx(0).queued, 3);
	nb::add_once(e.rx(1).queued, 4);
	nb::add_once(e.rx(1).busy, 2);
	nb::add_once(e.worker().submitted, 5);
	nb::add_once(e.worker().reaped, 4);
	nb::add_once(e.worker().replied, 1);

	netblk_stats s{};
	e.read_stats(&s);
	EXPECT_EQ(s.requests, 7u);
	EXPECT_EQ(s.busy, 2u);
	EXPECT_EQ(s.inflight_queued, 2u);
	EXPECT_EQ(s.inflight_disk, 1u);
	EXPECT_EQ(s.inflight_done, 3u);

	/* all 16 slots start free */
	nb::u32 v, n = 0;
	while (e.free_slots().pop(&v))
		n++;
	EXPECT_EQ(n, 16u);
	e.destroy();
}
