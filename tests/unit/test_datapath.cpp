// SPDX-License-Identifier: GPL-2.0
/*
 * The data path of one instance, frames in and replies out, on the fake
 * shim's in-memory disk and NIC: what the module does, minus the kernel.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "engine.h"
#include "fake_shim.h"
#include "frames.h"

using namespace test;

namespace {

constexpr uint64_t disk_size = 1 << 20;

struct instance_fixture : ::testing::Test {
	netblk_instance *inst = nullptr;
	std::vector<std::unique_ptr<std::vector<u8>>> frames;	/* received frames stay put */
	uint64_t now = 1000;

	void SetUp() override { inst = fake_start(disk_size); ASSERT_NE(inst, nullptr); }
	void TearDown() override { fake_stop(inst); }

	/* The receive path on @cpu; returns the verdict, *frame_out the frame. */
	netblk_rx_verdict receive(const std::vector<u8> &frame_bytes, uint32_t cpu = 0,
				  std::vector<u8> **frame_out = nullptr)
	{
		frames.push_back(std::make_unique<std::vector<u8>>(frame_bytes));
		std::vector<u8> &f = *frames.back();
		uint32_t len = (uint32_t)f.size();
		netblk_rx_verdict v = netblk_core_receive(inst->core, cpu, f.data(), f.data(), &len, now);
		if (v == NETBLK_RX_REPLY)
			f.resize(len);
		if (frame_out)
			*frame_out = &f;
		return v;
	}

	/* One round of the worker. */
	void work()
	{
		now += 50;
		netblk_core_submit(inst->core);
		while (netblk_core_reply(inst->core, now))
			;
	}

	netblk_stats stats()
	{
		netblk_stats s{};
		netblk_core_read_stats(inst->core, &s);
		return s;
	}

	void expect_nothing_held()
	{
		netblk_held held{};
		netblk_core_held(inst->core, &held);
		EXPECT_EQ(held.slots, 0u);
		EXPECT_EQ(held.frames, 0u);
	}
};

std::vector<u8> pattern(size_t n, uint8_t seed)
{
	std::vector<u8> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)(seed + i * 7);
	return v;
}

} // namespace

TEST_F(instance_fixture, InfoDescribesTheDevice)
{
	EXPECT_EQ(receive(to_server(request(op_info, 0, 0))), NETBLK_RX_FREE);
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	header h = reply_header(inst->sent[0]);
	EXPECT_EQ(h.op, op_info | op_reply_bit);
	EXPECT_EQ(h.status, status_ok);
	std::vector<u8> info = reply_data(inst->sent[0]);
	ASSERT_EQ(info.size(), info_payload_size);
	EXPECT_EQ(load_be64(info.data()), disk_size);
	EXPECT_EQ(load_be32(info.data() + 12), 1024u);
	EXPECT_EQ(load_be32(info.data() + 24), 256u);
	expect_nothing_held();
}

TEST_F(instance_fixture, WriteGoesToDiskFromTheFrameAndIsAnsweredInIt)
{
	std::vector<u8> data = pattern(1024, 3);
	std::vector<u8> *frame = nullptr;
	ASSERT_EQ(receive(to_server(write_request(4096, data, 42)), 0, &frame), NETBLK_RX_KEPT);
	EXPECT_EQ(stats().inflight_queued, 1u);
	work();

	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin() + 4096));
	ASSERT_EQ(inst->sent.size(), 1u);
	header h = reply_header(inst->sent[0]);
	EXPECT_EQ(h.op, op_write | op_reply_bit);
	EXPECT_EQ(h.handle, 42u);
	EXPECT_EQ(h.offset, 4096u);
	EXPECT_EQ(h.length, 1024u);
	EXPECT_EQ(inst->sent[0].size(), reply_headroom) << "a write is answered by a header alone";

	netblk_stats s = stats();
	EXPECT_EQ(s.writes, 1u);
	EXPECT_EQ(s.write_bytes, 1024u);
	EXPECT_EQ(s.bytes_zerocopy, 1024u);
	EXPECT_EQ(s.bytes_copied, 0u);
	EXPECT_EQ(s.frames_tx, 1u);
	expect_nothing_held();
}

TEST_F(instance_fixture, ReadIsAnsweredOneDatagramPerMaxIo)
{
	std::vector<u8> data = pattern(16384, 9);
	std::copy(data.begin(), data.end(), inst->disk.begin() + 8192);

	EXPECT_EQ(receive(to_server(request(op_read, 8192, 16384, 0, 0, 77))), NETBLK_RX_FREE);
	EXPECT_EQ(stats().inflight_queued, 16u) << "a slot for each datagram of the answer";
	work();

	ASSERT_EQ(inst->sent.size(), 16u);
	std::vector<u8> got(16384);
	for (auto &f : inst->sent) {
		header h = reply_header(f);
		EXPECT_EQ(h.handle, 77u);
		EXPECT_EQ(h.status, status_ok);
		EXPECT_EQ(h.length, 1024u);
		std::vector<u8> d = reply_data(f);
		ASSERT_EQ(d.size(), h.length);
		std::copy(d.begin(), d.end(), got.begin() + (h.offset - 8192));
	}
	EXPECT_EQ(got, data);
	EXPECT_EQ(inst->transmit_sizes.size(), 1u) << "one transmit for the batch";

	netblk_stats s = stats();
	EXPECT_EQ(s.reads, 1u);
	EXPECT_EQ(s.read_bytes, 16384u);
	EXPECT_EQ(s.bytes_zerocopy, 16384u);
	EXPECT_EQ(netblk_core_max_io(inst->core), 1024u);
	expect_nothing_held();
}

TEST_F(instance_fixture, ShortLastChunk)
{
	receive(to_server(request(op_read, 0, 1536)));
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	std::map<uint64_t, uint32_t> lengths;
	for (auto &f : inst->sent)
		lengths[reply_header(f).offset] = reply_header(f).length;
	EXPECT_EQ(lengths[0], 1024u);
	EXPECT_EQ(lengths[1024], 512u);
}

TEST_F(instance_fixture, RefusalsAreAnsweredOnTheSpotInTheRequestFrame)
{
	std::vector<u8> *frame = nullptr;
	ASSERT_EQ(receive(to_server(request(op_read, disk_size, 512, 0, 0, 5)), 1, &frame),
		  NETBLK_RX_REPLY);
	header h = reply_header(*frame);
	EXPECT_EQ(h.status, status_erange);
	EXPECT_EQ(h.handle, 5u);
	EXPECT_EQ(h.offset, disk_size);
	EXPECT_EQ(h.length, 512u);
	EXPECT_EQ(frame->size(), reply_headroom);
	/* addressed back to the client */
	EXPECT_EQ(0, memcmp(frame->data(), client_mac, 6));
	EXPECT_EQ(load_be16(frame->data() + 36), client_port);

	netblk_stats s = stats();
	EXPECT_EQ(s.requests, 1u);
	EXPECT_EQ(s.refused, 1u);
	EXPECT_EQ(s.busy, 0u);
	EXPECT_EQ(s.reads, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, BadDatagramsAreDroppedAndCounted)
{
	std::vector<u8> short_one = request(op_read, 0, 512);
	short_one.resize(20);
	EXPECT_EQ(receive(to_server(short_one)), NETBLK_RX_FREE);
	std::vector<u8> reply = request(op_read | op_reply_bit, 0, 512);
	EXPECT_EQ(receive(to_server(reply)), NETBLK_RX_FREE);
	EXPECT_EQ(receive(udp_frame(0xffffffffu, server_port, request(op_info, 0, 0))),
		  NETBLK_RX_FREE);
	EXPECT_EQ(receive(udp_frame(server_ip, server_port, request(op_info, 0, 0), 0x2000)),
		  NETBLK_RX_FREE);
	work();
	EXPECT_TRUE(inst->sent.empty());
	netblk_stats s = stats();
	EXPECT_EQ(s.bad, 4u);
	EXPECT_EQ(s.requests, 0u);
	EXPECT_EQ(s.frames_rx, 4u);
}

TEST_F(instance_fixture, BusyWhenSlotsRunOut)
{
	/* 16 READs of 16 datagrams take all 256 slots; the 17th is refused busy. */
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(receive(to_server(request(op_read, 0, 16384))), NETBLK_RX_FREE);
	std::vector<u8> *frame = nullptr;
	ASSERT_EQ(receive(to_server(request(op_read, 0, 512)), 0, &frame), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(*frame).status, status_eagain);
	ASSERT_EQ(receive(to_server(write_request(0, pattern(512, 1), 1))), NETBLK_RX_REPLY);

	netblk_stats s = stats();
	EXPECT_EQ(s.busy, 2u);
	EXPECT_EQ(s.refused, 2u);
	EXPECT_EQ(s.inflight_queued, 256u);

	work();
	EXPECT_EQ(inst->sent.size(), 256u);
	EXPECT_GE(inst->transmit_sizes.size(), 4u) << "batches of at most NETBLK_TX_BATCH";
	for (uint32_t n : inst->transmit_sizes)
		EXPECT_LE(n, (uint32_t)NETBLK_TX_BATCH);
	expect_nothing_held();
	/* and the slots serve again */
	EXPECT_EQ(receive(to_server(request(op_read, 0, 512))), NETBLK_RX_FREE);
}

TEST_F(instance_fixture, StagesMoveFromQueuedToDiskToDone)
{
	inst->complete_at_once = false;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	receive(to_server(request(op_read, 0, 2048)));
	netblk_stats s = stats();
	EXPECT_EQ(s.inflight_queued, 3u);

	netblk_core_submit(inst->core);
	s = stats();
	EXPECT_EQ(s.inflight_queued, 0u);
	EXPECT_EQ(s.inflight_disk, 3u);
	EXPECT_TRUE(netblk_core_has_work(inst->core) == 0);

	/* A slot counts as at the disk until the worker takes its completion. */
	inst->finish_ios();
	EXPECT_TRUE(netblk_core_has_work(inst->core) != 0);
	netblk_core_reply(inst->core, now + 100);
	s = stats();
	EXPECT_EQ(s.inflight_disk, 0u);
	EXPECT_EQ(s.inflight_done, 0u);
	EXPECT_EQ(inst->sent.size(), 3u);
	expect_nothing_held();
}

TEST_F(instance_fixture, DiskBusyIsRetriedNotFailed)
{
	inst->disk_refusals = 2;
	std::vector<u8> data = pattern(1024, 5);
	receive(to_server(write_request(0, data, 9)));
	for (int i = 0; i < 5 && inst->sent.empty(); i++)
		work();
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_ok);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	netblk_stats s = stats();
	EXPECT_EQ(s.disk_busy, 2u);
	EXPECT_EQ(s.io_errors, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, DiskBusyWaitsForTheDiskToFinishSomething)
{
	inst->complete_at_once = false;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	netblk_core_submit(inst->core);			/* A: at the disk */
	inst->disk_refusals = 1;
	receive(to_server(write_request(512, pattern(512, 2), 2)));
	netblk_core_submit(inst->core);			/* B: refused for now */
	inst->finish_newest();
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(stats().disk_busy, 1u);

	/* Trying B again before A is done would only be refused again. */
	EXPECT_FALSE(netblk_core_has_work(inst->core));
	uint64_t submissions = inst->submissions;
	netblk_core_submit(inst->core);
	EXPECT_EQ(inst->submissions, submissions);

	inst->finish_ios();				/* A done: room again */
	netblk_core_reply(inst->core, now);
	EXPECT_TRUE(netblk_core_has_work(inst->core));
	netblk_core_submit(inst->core);
	EXPECT_EQ(inst->submissions, submissions + 1);
	inst->finish_ios();
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(inst->sent.size(), 2u);
	expect_nothing_held();
}

TEST_F(instance_fixture, DiskErrorsAnswerEioPerChunk)
{
	inst->fail_io = true;
	receive(to_server(request(op_read, 0, 2048)));
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_eio);
		EXPECT_EQ(f.size(), reply_headroom) << "an failed chunk carries no data";
	}
	EXPECT_EQ(stats().io_errors, 2u);
}

TEST_F(instance_fixture, FlushAndFua)
{
	receive(to_server(request(op_flush, 0, 0)));
	receive(to_server(write_request(512, pattern(512, 2), 3, flag_fua)));
	work();
	EXPECT_EQ(inst->sent.size(), 2u);
	EXPECT_EQ(inst->flushes, 1u);
	EXPECT_EQ(inst->fua_writes, 1u);
	netblk_stats s = stats();
	EXPECT_EQ(s.flushes, 1u);
	EXPECT_EQ(s.fua_writes, 1u);
}

TEST_F(instance_fixture, ReplyTheNicRefusesIsCountedAndItsSlotFreed)
{
	inst->nic_takes = 1;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	receive(to_server(write_request(512, pattern(512, 2), 2)));
	work();
	EXPECT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(inst->freed_frames.size(), 1u);
	netblk_stats s = stats();
	EXPECT_EQ(s.replies_dropped, 1u);
	EXPECT_EQ(s.frames_tx, 1u);
	expect_nothing_held();
}

TEST_F(instance_fixture, StopDropsWhatIsQueuedAndFreesItsFrames)
{
	inst->complete_at_once = false;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	netblk_core_submit(inst->core);		/* this one is at the disk */
	receive(to_server(write_request(512, pattern(512, 2), 2)));
	receive(to_server(request(op_read, 0, 4096)));

	netblk_core_drop_queued(inst->core);
	EXPECT_EQ(inst->freed_frames.size(), 1u) << "the queued write's frame";
	EXPECT_EQ(netblk_core_at_disk(inst->core), 1u);
	netblk_held held{};
	netblk_core_held(inst->core, &held);
	EXPECT_EQ(held.slots, 1u);
	EXPECT_EQ(held.frames, 1u);

	inst->finish_ios();
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(netblk_core_at_disk(inst->core), 0u);
	expect_nothing_held();
	netblk_stats s = stats();
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
}

TEST_F(instance_fixture, ServiceTimeIsRecordedFromArrivalToReply)
{
	receive(to_server(request(op_read, 0, 512)));
	now = 1000 + 75000;
	netblk_core_submit(inst->core);
	netblk_core_reply(inst->core, now);
	ASSERT_EQ(inst->sent.size(), 1u);
	/* the core's histogram saw 75 us */
	std::vector<uint64_t> buckets(nb::histogram::bucket_count);
	uint64_t max = 0, count = 0;
	EXPECT_EQ(netblk_core_read_latency(inst->core, buckets.data(), (uint32_t)buckets.size(),
					   &max, &count), nb::histogram::bucket_count);
	EXPECT_EQ(count, 1u);
	EXPECT_EQ(max, 75000u);
	EXPECT_EQ(buckets[nb::histogram::index_of(75000)], 1u);
}

TEST(Datapath, MisalignedPayloadIsCopiedAndCounted)
{
	netblk_instance *inst = fake_start(disk_size, false, 511);
	std::vector<u8> data = pattern(512, 4);
	auto frame = to_server(write_request(0, data, 1));
	uint32_t len = (uint32_t)frame.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, frame.data(), frame.data(), &len, 1),
		  NETBLK_RX_KEPT);
	netblk_core_submit(inst->core);
	netblk_core_reply(inst->core, 2);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	netblk_stats s{};
	netblk_core_read_stats(inst->core, &s);
	EXPECT_EQ(s.bytes_copied, 512u);
	EXPECT_EQ(s.bytes_zerocopy, 0u);
	fake_stop(inst);
}

TEST(Datapath, ReadOnlyRefusesWrites)
{
	netblk_instance *inst = fake_start(disk_size, true);
	auto frame = to_server(write_request(0, pattern(512, 1), 1));
	uint32_t len = (uint32_t)frame.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, frame.data(), frame.data(), &len, 1),
		  NETBLK_RX_REPLY);
	frame.resize(len);
	EXPECT_EQ(reply_header(frame).status, status_erofs);
	fake_stop(inst);
}
