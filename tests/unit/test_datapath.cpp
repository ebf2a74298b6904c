// SPDX-License-Identifier: GPL-2.0
/*
 * The data path of one instance, frames in and replies out, on the fake
 * fake target's in-memory disk and NIC: what the module does, minus the kernel.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "engine.h"
#include "fake_target.h"
#include "frames.h"

using namespace test;

namespace {

constexpr uint64_t disk_size = 1 << 20;

struct instance_fixture : ::testing::Test {
	netblk_queue *inst = nullptr;
	fake_frames frames;	/* received frames stay put */
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
		netblk_rx_verdict v = netblk_core_receive(inst->core, cpu, f.data(), f.data(), &len,
							  nullptr, 0, now);
		if (v == NETBLK_RX_REPLY)
			f.resize(len);
		if (frame_out)
			*frame_out = &f;
		return v;
	}

	/*
	 * The worker, until it has nothing left to do: each round a
	 * millisecond later, past the backoffs the core sets.
	 */
	void work()
	{
		for (int round = 0; round < 1000; round++) {
			now += 1000000;
			netblk_core_submit(inst->core, now);
			while (netblk_core_reply(inst->core, now))
				;
			if (netblk_core_next_work(inst->core, now) == NETBLK_NO_WORK)
				return;
		}
	}

	/* A multi-buffer frame: fake_receive_frags(). */
	netblk_rx_verdict receive_frags(const std::vector<u8> &frame, uint32_t head,
					const std::vector<uint32_t> &frag_sizes)
	{
		return fake_receive_frags(inst, frames, frame, head, frag_sizes, now);
	}

	netblk_stats stats()
	{
		return fake_stats(inst);
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

/* Every 8 bytes their own offset: no two places on the disk hold the same bytes. */
std::vector<u8> offset_pattern(size_t n)
{
	std::vector<u8> v(n);
	for (size_t i = 0; i + 8 <= n; i += 8)
		store_be64(v.data() + i, i);
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
	EXPECT_EQ(load_be32(info.data() + 20), 1024u);
	EXPECT_EQ(load_be32(info.data() + 32), 256u);
	EXPECT_EQ(load_be64(info.data() + 48), netblk_core_export_id("8a5e0c1e", 8));
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
	EXPECT_EQ(h.seq, 42u);
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

/* Where a WRITE's data begins in its frame (untagged, no IP options). */
constexpr uint32_t write_data_at = eth_header_size + datagram_overhead;

std::vector<u8> checksummed(const std::vector<u8> &payload)
{
	frame_spec spec;
	spec.udp_checksum = true;
	return build_frame(spec, payload);
}

TEST_F(instance_fixture, WriteInSeveralBuffersIsCopiedOnceAndAnsweredFromTheSlotsBuffer)
{
	std::vector<u8> data = pattern(1024, 5);
	std::vector<u8> frame = checksummed(write_request(8192, data, 43));

	/* odd cuts: the checksum's words straddle buffers */
	ASSERT_EQ(receive_frags(frame, write_data_at + 301, { 333, 0 }), NETBLK_RX_KEPT);
	void *handle = frames[frames.size() - 3]->data();
	work();

	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin() + 8192));
	ASSERT_EQ(inst->sent.size(), 1u);
	header h = reply_header(inst->sent[0]);
	EXPECT_EQ(h.op, op_write | op_reply_bit);
	EXPECT_EQ(h.status, status_ok);
	EXPECT_EQ(h.seq, 43u);
	EXPECT_EQ(inst->sent[0].size(), reply_headroom) << "headers alone, not the frame's buffers";
	EXPECT_EQ(inst->sent_frames[0], nullptr) << "built in a buffer of the fake target's";
	EXPECT_EQ(std::count(inst->freed_frames.begin(), inst->freed_frames.end(), handle), 1)
		<< "the frame goes back once its data is copied";

	netblk_stats s = stats();
	EXPECT_EQ(s.bad, 0u);
	EXPECT_EQ(s.bytes_copied, 1024u);
	EXPECT_EQ(s.writes_misaligned, 0u) << "copied for its buffers, not its alignment";
	EXPECT_EQ(s.bytes_zerocopy, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, MultiBufferWriteRetriedByTheDiskIsCopiedOnce)
{
	std::vector<u8> data = pattern(1024, 6);
	inst->disk_refusals = 2;
	ASSERT_EQ(receive_frags(checksummed(write_request(0, data, 44)), write_data_at + 100, { 0 }),
		  NETBLK_RX_KEPT);
	work();

	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_ok);
	EXPECT_EQ(stats().bytes_copied, 1024u) << "the data stays in the slot's buffer across tries";
	expect_nothing_held();
}

TEST_F(instance_fixture, MultiBufferWriteWithoutABufferIsAnsweredEagainAndGivenBack)
{
	inst->no_buffers = true;
	ASSERT_EQ(receive_frags(checksummed(write_request(0, pattern(1024, 9), 48)),
				write_data_at + 700, { 0 }),
		  NETBLK_RX_KEPT);
	void *handle = frames[frames.size() - 2]->data();
	work();

	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_eagain);
	EXPECT_EQ(inst->sent_frames[0], nullptr) << "in a spare buffer, not the frame";
	EXPECT_EQ(std::count(inst->freed_frames.begin(), inst->freed_frames.end(), handle), 1);
	EXPECT_TRUE(std::all_of(inst->disk.begin(), inst->disk.begin() + 1024,
				[](u8 b) { return b == 0; })) << "nothing written";
	EXPECT_EQ(stats().bytes_copied, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, MultiBufferFrameIsCheckedAcrossItsBuffers)
{
	std::vector<u8> frame = checksummed(write_request(0, pattern(1024, 7), 45));
	frame[write_data_at + 700] ^= 0x10;	/* in the second buffer */
	EXPECT_EQ(receive_frags(frame, write_data_at + 512, { 0 }), NETBLK_RX_FREE);

	/* a netblk header that does not fit the first buffer */
	EXPECT_EQ(receive_frags(checksummed(write_request(0, pattern(1024, 7), 46)),
				write_data_at - 10, { 0 }),
		  NETBLK_RX_FREE);
	work();
	EXPECT_TRUE(inst->sent.empty());
	netblk_stats s = stats();
	EXPECT_EQ(s.dropped[NETBLK_DROP_CHECKSUM], 1u);
	EXPECT_EQ(s.dropped[NETBLK_DROP_MALFORMED], 1u);
	EXPECT_EQ(s.writes, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, MultiBufferRefusalIsTheFirstBuffersHeadersAlone)
{
	/* beyond the device's end: refused on the spot */
	std::vector<u8> frame = checksummed(write_request(disk_size, pattern(1024, 8), 47));
	ASSERT_EQ(receive_frags(frame, write_data_at + 256, { 0 }), NETBLK_RX_REPLY);
	std::vector<u8> &reply = *frames[frames.size() - 2];
	EXPECT_EQ(reply.size(), reply_headroom);
	EXPECT_EQ(reply_header(reply).status, status_erange);
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
		EXPECT_EQ(h.seq, 77u);
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

namespace {

/* An instance whose NIC sends frames in two buffers: READs gathered into 4 KiB data pages. */
struct gathering : instance_fixture {
	void SetUp() override
	{
		fake_options o;
		o.gather_page = 4096;
		inst = fake_start(disk_size, o);
		ASSERT_NE(inst, nullptr);
	}

	/* The data of every answer sent, by its offset; each answered once. */
	std::vector<u8> answered(uint64_t start, uint32_t len)
	{
		std::vector<u8> got(len);
		std::map<uint64_t, int> answers;
		for (auto &f : inst->sent) {
			header h = reply_header(f);
			std::vector<u8> d = reply_data(f);

			EXPECT_EQ(h.status, status_ok);
			EXPECT_EQ(d.size(), h.length);
			EXPECT_EQ(answers[h.offset]++, 0) << "answered twice: " << h.offset;
			std::copy(d.begin(), d.end(), got.begin() + (h.offset - start));
		}
		return got;
	}
};

} // namespace

TEST_F(gathering, ReadOfSeveralDatagramsIsOneDiskIoAnsweredFromItsPages)
{
	std::vector<u8> data = pattern(16384, 3);
	std::copy(data.begin(), data.end(), inst->disk.begin() + 8192);

	EXPECT_EQ(receive(to_server(request(op_read, 8192, 16384, 0, 0, 12))), NETBLK_RX_FREE);
	EXPECT_EQ(stats().inflight_queued, 16u) << "still a slot for each datagram";
	work();

	EXPECT_EQ(inst->submissions, 1u) << "one disk I/O for the READ";
	EXPECT_EQ(inst->read_pages, std::vector<uint32_t>{ 4 }) << "into four whole pages";
	ASSERT_EQ(inst->sent.size(), 16u);
	EXPECT_EQ(inst->frags_sent, 16u) << "every datagram's data a second buffer";
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).seq, 12u);
		EXPECT_EQ(reply_header(f).length, 1024u);
	}
	EXPECT_EQ(answered(8192, 16384), data);

	netblk_stats s = stats();
	EXPECT_EQ(s.reads, 1u);
	EXPECT_EQ(s.reads_gathered, 1u);
	EXPECT_EQ(s.bytes_zerocopy, 16384u);
	EXPECT_EQ(s.bytes_copied, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();
}

TEST_F(gathering, ShortLastDatagramAndOneDatagramReadsAsBefore)
{
	std::vector<u8> data = pattern(2560, 5);
	std::copy(data.begin(), data.end(), inst->disk.begin());

	receive(to_server(request(op_read, 0, 1536)));
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	EXPECT_EQ(inst->read_pages, std::vector<uint32_t>{ 1 }) << "1536 bytes: part of a page";
	EXPECT_EQ(answered(0, 1536), std::vector<u8>(data.begin(), data.begin() + 1536));

	inst->sent.clear();
	receive(to_server(request(op_read, 1536, 1024)));
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(inst->read_pages.size(), 1u) << "a READ of one datagram is read into its own buffer";
	EXPECT_EQ(inst->frags_sent, 2u);
	EXPECT_EQ(reply_data(inst->sent[0]), std::vector<u8>(data.begin() + 1536, data.end()));
	EXPECT_EQ(stats().reads_gathered, 1u);
	expect_nothing_held();
}

TEST_F(gathering, ReadsOfMoreDatagramsThanOneTransmitTakesAreAllAnswered)
{
	std::vector<u8> data = pattern(8 * 16384, 11);
	std::copy(data.begin(), data.end(), inst->disk.begin());

	for (uint32_t i = 0; i < 8; i++)
		receive(to_server(request(op_read, i * 16384, 16384, 0, 0, 100 + i)));
	work();
	EXPECT_EQ(inst->submissions, 8u);
	ASSERT_EQ(inst->sent.size(), 128u);
	EXPECT_GE(inst->transmit_sizes.size(), 2u) << "more than NETBLK_TX_BATCH";
	EXPECT_EQ(answered(0, 8 * 16384), data);
	expect_nothing_held();
}

TEST_F(gathering, DiskAgainRetriesTheWholeReadOnce)
{
	std::vector<u8> data = pattern(4096, 1);
	std::copy(data.begin(), data.end(), inst->disk.begin());
	inst->disk_refusals = 1;

	receive(to_server(request(op_read, 0, 4096)));
	work();
	EXPECT_EQ(inst->submissions, 2u) << "the one I/O, tried again";
	ASSERT_EQ(inst->sent.size(), 4u);
	EXPECT_EQ(answered(0, 4096), data);
	netblk_stats s = stats();
	EXPECT_EQ(s.reads_gathered, 1u) << "one READ, however often tried";
	EXPECT_EQ(s.disk_busy, 4u) << "its four slots waited";
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();
}

/*
 * A gathered READ's datagrams send their data from the data pages of its
 * first slots (datagram i from slot i / 4's).  The NIC takes three of its
 * 16 answers, the rest wait for room; meanwhile every other slot is at the
 * disk, so new READs could only have the three slots just sent, of which
 * the second owns the page answers 4 to 7 still send from.  A READ of one
 * datagram and one of two, gathered into its first slot's page, must not
 * get them (they are answered EAGAIN), and every answer of the first READ
 * must carry the disk's bytes at its own offset.
 */
TEST_F(gathering, SlotsSentFromStayTakenUntilTheLastDatagramOfTheirReadIsSent)
{
	std::vector<u8> data = offset_pattern(disk_size);
	std::copy(data.begin(), data.end(), inst->disk.begin());
	inst->complete_at_once = false;

	receive(to_server(request(op_read, 0, 16384)));
	netblk_core_submit(inst->core, now);
	for (uint32_t i = 1; i < 16; i++)	/* every other slot at the disk */
		receive(to_server(request(op_read, i * 16384, 16384)));
	netblk_core_submit(inst->core, now);
	ASSERT_EQ(inst->pending.size(), 16u);
	ASSERT_EQ(inst->free_slots_left(), 0u);

	fake_io first = inst->pending.front();	/* the first READ's one I/O */
	inst->pending.pop_front();
	netblk_core_complete(inst->core, first.slot, first.status);
	inst->nic_takes = 3;
	netblk_core_reply(inst->core, now);
	ASSERT_EQ(inst->sent.size(), 3u) << "the NIC had room for three";

	/* READs of other bytes, into whatever slots are free */
	std::vector<u8> *one = nullptr, *two = nullptr;
	netblk_rx_verdict v1 = receive(to_server(request(op_read, 512 * 1024, 1024)), 0, &one);
	netblk_rx_verdict v2 = receive(to_server(request(op_read, 513 * 1024, 2048)), 0, &two);
	netblk_core_submit(inst->core, now);
	inst->nic_takes = ~0u;
	work();
	inst->finish_ios();
	work();

	EXPECT_EQ(v1, NETBLK_RX_REPLY) << "the sent slots still hold a page answers send from";
	EXPECT_EQ(v2, NETBLK_RX_REPLY);
	if (v1 == NETBLK_RX_REPLY && v2 == NETBLK_RX_REPLY) {
		EXPECT_EQ(reply_header(*one).status, status_eagain);
		EXPECT_EQ(reply_header(*two).status, status_eagain);
	}
	std::map<uint64_t, int> answers;
	for (auto &f : inst->sent) {
		header h = reply_header(f);
		std::vector<u8> d = reply_data(f);

		ASSERT_EQ(h.status, status_ok);
		ASSERT_EQ(d.size(), h.length);
		EXPECT_TRUE(std::equal(d.begin(), d.end(), data.begin() + h.offset))
			<< "the answer for offset " << h.offset << " carries other bytes";
		answers[h.offset]++;
	}
	EXPECT_EQ(answers.size(), 256u + (v1 == NETBLK_RX_REPLY ? 0 : 3));
	expect_nothing_held();
}

/* The disk says "again" to every try: every datagram is answered EAGAIN, and every slot is free. */
TEST_F(gathering, ReadTheDiskNeverTakesIsAnsweredEagainFromEverySlot)
{
	inst->disk_refusals = 1000;
	receive(to_server(request(op_read, 0, 4096)));
	work();
	ASSERT_EQ(inst->sent.size(), 4u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_eagain);
		EXPECT_EQ(f.size(), reply_headroom);
	}
	netblk_stats s = stats();
	EXPECT_EQ(s.disk_gave_up, 1u);
	EXPECT_EQ(s.io_errors, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();

	/* 64 more such READs would have taken every slot: the instance still serves */
	for (int i = 0; i < 64; i++)
		receive(to_server(request(op_read, 0, 4096)));
	work();
	EXPECT_EQ(inst->free_slots_left(), (uint32_t)NETBLK_SLOTS);
	inst->disk_refusals = 0;
	inst->sent.clear();
	receive(to_server(request(op_read, 0, 4096)));
	work();
	ASSERT_EQ(inst->sent.size(), 4u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_ok);
}

TEST_F(gathering, DiskErrorAnswersEveryDatagramEio)
{
	inst->fail_io = true;
	receive(to_server(request(op_read, 0, 3072)));
	work();
	ASSERT_EQ(inst->sent.size(), 3u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_eio);
		EXPECT_EQ(f.size(), reply_headroom) << "no data";
	}
	EXPECT_EQ(inst->frags_sent, 0u);
	EXPECT_EQ(stats().io_errors, 3u);
	expect_nothing_held();
}

TEST_F(gathering, NoDataPageAnswersEveryDatagramEagain)
{
	inst->no_data_pages = true;
	receive(to_server(request(op_read, 0, 2048)));
	work();
	EXPECT_EQ(inst->submissions, 0u);
	ASSERT_EQ(inst->sent.size(), 2u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_eagain);
		EXPECT_EQ(f.size(), reply_headroom);
	}
	netblk_stats s = stats();
	EXPECT_EQ(s.no_buffer, 1u);
	EXPECT_EQ(s.io_errors, 0u);
	EXPECT_EQ(s.reads_gathered, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();
}

TEST_F(gathering, NoSlotBufferSendsTheHeadersFromASpareAndTheDataFromItsPage)
{
	std::vector<u8> data = pattern(2048, 8);
	std::copy(data.begin(), data.end(), inst->disk.begin());
	inst->no_buffers = true;

	receive(to_server(request(op_read, 0, 2048)));
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	EXPECT_EQ(answered(0, 2048), data);
	EXPECT_EQ(inst->spare.size(), 2u);
	EXPECT_TRUE(inst->lent.empty());
	expect_nothing_held();
}

TEST_F(gathering, StopDropsAQueuedReadWithAllItsDatagrams)
{
	inst->complete_at_once = false;
	receive(to_server(request(op_read, 0, 4096)));
	netblk_core_submit(inst->core, now);	/* at the disk */
	receive(to_server(request(op_read, 4096, 8192)));

	netblk_core_drop_queued(inst->core);
	EXPECT_EQ(netblk_core_at_disk(inst->core), 4u);
	netblk_held held{};
	netblk_core_held(inst->core, &held);
	EXPECT_EQ(held.slots, 4u) << "the 8 of the queued READ are free again";

	inst->finish_ios();
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(netblk_core_at_disk(inst->core), 0u);
	EXPECT_EQ(inst->sent.size(), 4u);
	expect_nothing_held();
	netblk_stats s = stats();
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
}

TEST(Datapath, ReadsAreGatheredOnlyWhereADatagramsDataFitsAPage)
{
	fake_options o;
	o.gather_page = 1536;	/* not a multiple of max_io (1024) */
	netblk_queue *inst = fake_start(disk_size, o);
	ASSERT_NE(inst, nullptr);
	EXPECT_EQ(netblk_core_gather_page(inst->core), 0u);
	fake_stop(inst);
	o.gather_page = 4096;
	inst = fake_start(disk_size, o);
	EXPECT_EQ(netblk_core_gather_page(inst->core), 4096u);
	fake_stop(inst);
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
	EXPECT_EQ(h.seq, 5u);
	EXPECT_EQ(h.offset, disk_size);
	EXPECT_EQ(h.length, 512u);
	EXPECT_EQ(frame->size(), reply_headroom);
	/* addressed back to the client */
	EXPECT_EQ(0, memcmp(frame->data(), client_mac, 6));
	EXPECT_EQ(load_be16(frame->data() + 36), client_port);

	netblk_stats s = stats();
	EXPECT_EQ(s.requests, 1u);
	EXPECT_EQ(s.refused, 1u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_ERANGE], 1u) << "counted by its status";
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
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_EAGAIN], 2u);
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

	netblk_core_submit(inst->core, now);
	s = stats();
	EXPECT_EQ(s.inflight_queued, 0u);
	EXPECT_EQ(s.inflight_disk, 3u);
	EXPECT_EQ(netblk_core_next_work(inst->core, now), NETBLK_NO_WORK);

	/* A slot counts as at the disk until the worker takes its completion. */
	inst->finish_ios();
	EXPECT_EQ(netblk_core_next_work(inst->core, now), 0u);
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

TEST_F(instance_fixture, DiskBusyIsRetriedAfterABackoffOrOnceTheDiskFinishesSomething)
{
	inst->complete_at_once = false;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	netblk_core_submit(inst->core, now);		/* A: at the disk */
	inst->disk_refusals = 1;
	receive(to_server(write_request(512, pattern(512, 2), 2)));
	netblk_core_submit(inst->core, now);		/* B: refused for now */
	inst->finish_newest();
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(stats().disk_busy, 1u);

	/* Trying B again at once would only be refused again: a backoff first. */
	uint64_t due = netblk_core_next_work(inst->core, now);
	EXPECT_EQ(due, now + nb::engine::again_backoff_ns);
	uint64_t submissions = inst->submissions;
	netblk_core_submit(inst->core, now + 1000);
	EXPECT_EQ(inst->submissions, submissions);

	inst->finish_ios();				/* A done: room again */
	netblk_core_reply(inst->core, now + 1000);
	EXPECT_EQ(netblk_core_next_work(inst->core, now + 1000), 0u);
	netblk_core_submit(inst->core, now + 1000);
	EXPECT_EQ(inst->submissions, submissions + 1);
	inst->finish_ios();
	netblk_core_reply(inst->core, now + 2000);
	EXPECT_EQ(inst->sent.size(), 2u);
	expect_nothing_held();
}

TEST_F(instance_fixture, DiskAgainBacksOffThenSubmitsWithoutNowait)
{
	/* A bio the disk takes only when it may block (one it must split, say). */
	inst->refuse_nowait = true;
	std::vector<u8> data = pattern(1024, 6);
	receive(to_server(write_request(0, data, 4)));
	uint64_t t = now, backoff = nb::engine::again_backoff_ns;
	for (int i = 0; i < nb::engine::again_nowait_tries; i++) {
		netblk_core_submit(inst->core, t);
		netblk_core_reply(inst->core, t);
		ASSERT_EQ(netblk_core_next_work(inst->core, t), t + backoff) << "try " << i;
		EXPECT_EQ(netblk_core_next_work(inst->core, t + backoff), 0u);
		t += backoff;
		backoff *= 2;
	}
	netblk_core_submit(inst->core, t);
	netblk_core_reply(inst->core, t);
	ASSERT_EQ(inst->blocking.size(), nb::engine::again_nowait_tries + 1u);
	EXPECT_FALSE(inst->blocking.front());
	EXPECT_TRUE(inst->blocking.back()) << "the last try may block";
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_ok);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	netblk_stats s = stats();
	EXPECT_EQ(s.disk_busy, (uint64_t)nb::engine::again_nowait_tries);
	EXPECT_EQ(s.disk_blocking, 1u);
	EXPECT_EQ(s.disk_gave_up, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, DiskAgainForeverIsAnsweredEagain)
{
	inst->disk_refusals = 1000;
	receive(to_server(request(op_read, 0, 1024, 0, 0, 8)));
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	header h = reply_header(inst->sent[0]);
	EXPECT_EQ(h.status, status_eagain);
	EXPECT_EQ(h.seq, 8u);
	EXPECT_EQ(inst->sent[0].size(), reply_headroom) << "headers alone";
	EXPECT_EQ(inst->submissions, (uint64_t)fake_default_knobs().disk_tries);
	netblk_stats s = stats();
	EXPECT_EQ(s.disk_gave_up, 1u);
	EXPECT_EQ(s.io_errors, 0u);
	EXPECT_EQ(s.inflight_queued + s.inflight_disk + s.inflight_done, 0u);
	expect_nothing_held();
}

/* disk-tries=: as many tries as it says, the last ones blocking, then EAGAIN. */
TEST_F(instance_fixture, DiskTriesSaysHowOftenARefusedRequestIsTried)
{
	for (uint32_t tries : {1u, 2u, 12u, 16u}) {
		fake_stop(inst);
		fake_options o;
		o.knobs.disk_tries = tries;
		inst = fake_start(disk_size, o);
		ASSERT_NE(inst, nullptr);
		inst->disk_refusals = 1000;
		receive(to_server(request(op_read, 0, 1024, 0, 0, 9)));
		work();
		work();		/* 16 tries wait 1.6 s, more than one work() */
		ASSERT_EQ(inst->sent.size(), 1u) << tries;
		EXPECT_EQ(reply_header(inst->sent[0]).status, status_eagain) << tries;
		EXPECT_EQ(inst->submissions, (uint64_t)tries);
		netblk_stats s = stats();
		EXPECT_EQ(s.disk_busy, (uint64_t)tries - 1) << "the last is given up";
		EXPECT_EQ(s.disk_gave_up, 1u);
		EXPECT_EQ(s.disk_blocking, tries > nb::engine::again_nowait_tries ?
					   tries - nb::engine::again_nowait_tries : 0u) << tries;
		expect_nothing_held();
	}

	/* One refusal, with one try to spare: served. */
	fake_stop(inst);
	fake_options o;
	o.knobs.disk_tries = 2;
	inst = fake_start(disk_size, o);
	ASSERT_NE(inst, nullptr);
	inst->disk_refusals = 1;
	receive(to_server(request(op_read, 0, 1024, 0, 0, 10)));
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_ok);
	EXPECT_EQ(stats().disk_gave_up, 0u);
}

TEST_F(instance_fixture, NoBufferToReadIntoIsAnsweredEagainNotEio)
{
	inst->no_buffers = true;
	receive(to_server(request(op_read, 0, 2048, 0, 0, 3)));
	receive(to_server(request(op_info, 0, 0, 0, 0, 4)));
	work();
	ASSERT_EQ(inst->sent.size(), 3u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_eagain);
		EXPECT_EQ(f.size(), reply_headroom);
	}
	EXPECT_EQ(inst->spare.size(), 3u) << "answered in reply buffers";
	EXPECT_TRUE(inst->lent.empty()) << "each given back once its reply went";
	EXPECT_EQ(inst->returned_unlent, 0u);
	netblk_stats s = stats();
	EXPECT_EQ(s.no_buffer, 3u);
	EXPECT_EQ(s.io_errors, 0u);
	EXPECT_EQ(s.replies_dropped, 0u);
	expect_nothing_held();
}

TEST_F(instance_fixture, LentReplyBufferWaitsWithItsReplyForRoomInTheNic)
{
	inst->no_buffers = true;
	inst->nic_takes = 0;
	receive(to_server(request(op_read, 0, 1024, 0, 0, 6)));
	netblk_core_submit(inst->core, now);
	netblk_core_reply(inst->core, now);
	ASSERT_EQ(inst->lent.size(), 1u) << "kept while the reply waits";
	inst->nic_takes = ~0u;
	netblk_core_reply(inst->core, netblk_core_next_work(inst->core, now));
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(reply_header(inst->sent[0]).status, status_eagain);
	EXPECT_TRUE(inst->lent.empty());
	expect_nothing_held();
}

TEST_F(instance_fixture, NoReplyBufferEitherIsCountedAsDropped)
{
	inst->no_buffers = true;
	inst->no_spare = true;
	receive(to_server(request(op_read, 0, 1024)));
	work();
	EXPECT_TRUE(inst->sent.empty());
	netblk_stats s = stats();
	EXPECT_EQ(s.no_buffer, 1u);
	EXPECT_EQ(s.replies_dropped, 1u);
	EXPECT_EQ(s.io_errors, 0u);
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

TEST_F(instance_fixture, ReplyTheNicHasNoRoomForIsSentAgain)
{
	inst->nic_takes = 1;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	receive(to_server(write_request(512, pattern(512, 2), 2)));
	netblk_core_submit(inst->core, now);
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(inst->sent.size(), 1u);
	EXPECT_TRUE(inst->freed_frames.empty()) << "the other frame is kept to be sent again";
	uint64_t due = netblk_core_next_work(inst->core, now);
	EXPECT_EQ(due, now + nb::engine::tx_backoff_min_ns);
	EXPECT_EQ(netblk_core_reply(inst->core, now + 1), 0u) << "not before its time";
	netblk_core_reply(inst->core, due);
	ASSERT_EQ(inst->sent.size(), 2u);
	EXPECT_EQ(reply_header(inst->sent[1]).seq, 2u);
	netblk_stats s = stats();
	EXPECT_EQ(s.tx_deferred, 1u);
	EXPECT_EQ(s.replies_dropped, 0u);
	EXPECT_EQ(s.frames_tx, 2u);
	EXPECT_EQ(netblk_core_tx_failure(inst->core), 0) << "a full ring is no failure";
	expect_nothing_held();
}

TEST_F(instance_fixture, ReplyTheNicCannotTakeFor100msIsDropped)
{
	inst->nic_takes = 0;
	std::vector<u8> *frame = nullptr;
	receive(to_server(write_request(0, pattern(512, 1), 1)), 0, &frame);
	uint64_t t0 = now;
	netblk_core_submit(inst->core, t0);
	netblk_core_reply(inst->core, t0);
	for (uint64_t t = t0; t < t0 + nb::engine::tx_give_up_ns + 2000000; t += 1000000)
		netblk_core_reply(inst->core, t);
	ASSERT_EQ(inst->freed_frames.size(), 1u);
	EXPECT_EQ(inst->freed_frames[0], frame->data());
	netblk_stats s = stats();
	EXPECT_EQ(s.replies_dropped, 1u);
	EXPECT_EQ(netblk_core_next_work(inst->core, now), NETBLK_NO_WORK);
	expect_nothing_held();
}

TEST_F(instance_fixture, NicFailingEveryTransmitForASecondIsAnInstanceFailure)
{
	/* mlx5 or i40e from a CPU they have no XDP transmit queue for */
	inst->nic_error = -6;	/* -ENXIO */
	uint64_t t0 = now;
	for (uint64_t t = t0; t <= t0 + 1200000000ull; t += 10000000) {
		receive(to_server(write_request(0, pattern(512, 1))));
		netblk_core_submit(inst->core, t);
		netblk_core_reply(inst->core, t);
		if (t < t0 + nb::engine::tx_failure_ns) {
			ASSERT_EQ(netblk_core_tx_failure(inst->core), 0) << "too soon, at " << t - t0;
		}
	}
	EXPECT_EQ(netblk_core_tx_failure(inst->core), -6);
	EXPECT_TRUE(inst->sent.empty());
	netblk_stats s = stats();
	EXPECT_GE(s.tx_errors, 100u);
	EXPECT_GT(s.replies_dropped, 0u) << "each reply gives up after 100 ms";
}

TEST_F(instance_fixture, RearmedAfterTheNicCameBackItTakesAnotherWholeSecondToFail)
{
	/* a NIC that was down failed every reply; it came back (monitor.c resumes) */
	inst->nic_error = -100;	/* -ENETDOWN */
	uint64_t t = now;
	for (; netblk_core_tx_failure(inst->core) == 0; t += 10000000) {
		ASSERT_LT(t, now + 2000000000ull) << "never took for a failure";
		receive(to_server(write_request(0, pattern(512, 1))));
		netblk_core_submit(inst->core, t);
		netblk_core_reply(inst->core, t);
	}
	netblk_core_tx_rearm(inst->core);
	EXPECT_EQ(netblk_core_tx_failure(inst->core), 0) << "forgotten";
	/* failing again: not at once, only after another second of it */
	uint64_t t1 = t;
	for (; t < t1 + 500000000ull; t += 10000000) {
		receive(to_server(write_request(0, pattern(512, 1))));
		netblk_core_submit(inst->core, t);
		netblk_core_reply(inst->core, t);
		ASSERT_EQ(netblk_core_tx_failure(inst->core), 0) << "failed again too soon, at " << t - t1;
	}
	/* and back for real: replies go out */
	inst->nic_error = 0;
	receive(to_server(write_request(0, pattern(512, 2))));
	netblk_core_submit(inst->core, t);
	netblk_core_reply(inst->core, t);
	for (uint64_t u = t; u < t + 200000000ull; u += 10000000)
		netblk_core_reply(inst->core, u);
	EXPECT_FALSE(inst->sent.empty());
	EXPECT_EQ(netblk_core_tx_failure(inst->core), 0);
}

TEST_F(instance_fixture, NicErrorsThatStopAreNoFailure)
{
	inst->nic_error = -6;
	uint64_t t0 = now;
	for (uint64_t t = t0; t < t0 + 900000000ull; t += 10000000) {
		receive(to_server(write_request(0, pattern(512, 1))));
		netblk_core_submit(inst->core, t);
		netblk_core_reply(inst->core, t);
	}
	inst->nic_error = 0;
	now = t0 + 900000000ull;
	work();
	EXPECT_FALSE(inst->sent.empty());
	now += 2000000000ull;
	inst->nic_error = -6;
	receive(to_server(write_request(0, pattern(512, 1))));
	work();
	EXPECT_EQ(netblk_core_tx_failure(inst->core), 0) << "a second of errors, not in all";
}

TEST_F(instance_fixture, NoReplyLargerThanTheNicsMtuNow)
{
	inst->disk.assign(disk_size, 7);
	netblk_core_set_link(inst->core, 1000, server_mac);	/* the mtu went down */
	receive(to_server(request(op_read, 0, 1024, 0, 0, 1)));	/* 1106-byte answer */
	receive(to_server(request(op_read, 0, 512, 0, 0, 2)));	/* 594 */
	receive(to_server(write_request(0, pattern(1024, 3), 3)));	/* answered by 82 */
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	for (auto &f : inst->sent) {
		EXPECT_NE(reply_header(f).seq, 1u);
		EXPECT_LE(f.size() - 14, 1000u);
	}
	netblk_stats s = stats();
	EXPECT_EQ(s.replies_oversized, 1u);
	EXPECT_EQ(s.replies_dropped, 1u);
	expect_nothing_held();
}

TEST_F(instance_fixture, RepliesComeFromTheNicsMacAsItIsNow)
{
	const u8 changed[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
	netblk_core_set_link(inst->core, 1500, changed);
	EXPECT_EQ(receive(to_server(request(op_info, 0, 0))), NETBLK_RX_FREE);
	EXPECT_EQ(stats().dropped[NETBLK_DROP_MISADDRESSED], 1u) << "sent to the old MAC";

	frame_spec spec;
	spec.dst_mac = changed;
	std::vector<u8> *frame = nullptr;
	ASSERT_EQ(receive(build_frame(spec, request(op_read, disk_size, 512)), 0, &frame),
		  NETBLK_RX_REPLY);
	EXPECT_EQ(0, memcmp(frame->data() + 6, changed, 6)) << "a refusal, in place";
	receive(build_frame(spec, request(op_read, 0, 512)));
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(0, memcmp(inst->sent[0].data() + 6, changed, 6));
	EXPECT_EQ(0, memcmp(inst->sent[0].data(), client_mac, 6));
}

TEST_F(instance_fixture, DropsAreCountedByReason)
{
	const u8 broadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	frame_spec bcast_src;
	bcast_src.src_mac = broadcast;
	EXPECT_EQ(receive(build_frame(bcast_src, request(op_read, 0, 16384))), NETBLK_RX_FREE);
	frame_spec loopback;
	loopback.src_ip = htonl(0x7f000001);
	receive(build_frame(loopback, request(op_read, 0, 512)));
	frame_spec bad_sum;
	bad_sum.udp_checksum = true;
	std::vector<u8> f = build_frame(bad_sum, write_request(0, pattern(512, 1), 1));
	f.back() ^= 0xff;
	receive(f);
	frame_spec tagged;
	tagged.vlan = 7;
	receive(build_frame(tagged, request(op_info, 0, 0)));
	receive(to_server(request(op_info | op_reply_bit, 0, 0)));
	netblk_core_rx_drop(inst->core, 1, NETBLK_DROP_MULTIBUFFER);
	work();

	EXPECT_TRUE(inst->sent.empty()) << "none of them is answered";
	netblk_stats s = stats();
	EXPECT_EQ(s.dropped[NETBLK_DROP_SOURCE], 2u);
	EXPECT_EQ(s.dropped[NETBLK_DROP_CHECKSUM], 1u);
	EXPECT_EQ(s.dropped[NETBLK_DROP_VLAN], 1u);
	EXPECT_EQ(s.dropped[NETBLK_DROP_NOT_REQUEST], 1u);
	EXPECT_EQ(s.dropped[NETBLK_DROP_MULTIBUFFER], 1u);
	EXPECT_EQ(s.bad, 6u);
	EXPECT_EQ(s.frames_rx, 6u);
	EXPECT_EQ(s.requests, 0u);
	expect_nothing_held();
}

TEST(Datapath, VlanInstanceAnswersTaggedRequestsTagged)
{
	netblk_queue *inst = fake_start(disk_size, false, 3, 5);
	ASSERT_NE(inst, nullptr);
	EXPECT_EQ(netblk_core_reply_headroom(inst->core), 100u);
	std::vector<u8> data = pattern(1024, 2);
	std::copy(data.begin(), data.end(), inst->disk.begin());
	frame_spec tagged;
	tagged.vlan = 5;
	auto frame = build_frame(tagged, request(op_read, 0, 1024, 0, 0, 9));
	uint32_t len = (uint32_t)frame.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, frame.data(), frame.data(), &len, nullptr, 0, 1),
		  NETBLK_RX_FREE);
	netblk_core_submit(inst->core, 2);
	netblk_core_reply(inst->core, 3);
	ASSERT_EQ(inst->sent.size(), 1u);
	const std::vector<u8> &r = inst->sent[0];
	EXPECT_EQ(load_be16(&r[12]), 0x8100);
	EXPECT_EQ(load_be16(&r[14]) & 0xfff, 5);
	EXPECT_EQ(reply_header(r).seq, 9u);
	EXPECT_EQ(reply_data(r), data);
	EXPECT_EQ(r.size(), 100u + 1024);

	auto untagged = to_server(request(op_info, 0, 0));
	len = (uint32_t)untagged.size();
	EXPECT_EQ(netblk_core_receive(inst->core, 0, untagged.data(), untagged.data(), &len,
				      nullptr, 0, 1),
		  NETBLK_RX_FREE);
	netblk_stats s = fake_stats(inst);
	EXPECT_EQ(s.dropped[NETBLK_DROP_VLAN], 1u);
	fake_stop(inst);
}

TEST_F(instance_fixture, StopDropsWhatIsQueuedAndFreesItsFrames)
{
	inst->complete_at_once = false;
	receive(to_server(write_request(0, pattern(512, 1), 1)));
	netblk_core_submit(inst->core, now);	/* this one is at the disk */
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
	std::vector<uint64_t> before(nb::histogram::bucket_count);
	uint64_t max_before = 0, count_before = 0, sum_before = 0;
	netblk_core_read_latency(inst->core, before.data(), (uint32_t)before.size(), &max_before,
				 &count_before, &sum_before);	/* the HELLO that opened the session */
	receive(to_server(request(op_read, 0, 512)));
	now = 1000 + 75000;
	netblk_core_submit(inst->core, now);
	netblk_core_reply(inst->core, now);
	ASSERT_EQ(inst->sent.size(), 1u);
	/* the core's histogram saw 75 us */
	std::vector<uint64_t> buckets(nb::histogram::bucket_count);
	uint64_t max = 0, count = 0, sum = 0;
	EXPECT_EQ(netblk_core_read_latency(inst->core, buckets.data(), (uint32_t)buckets.size(),
					   &max, &count, &sum), nb::histogram::bucket_count);
	EXPECT_EQ(count - count_before, 1u);
	EXPECT_EQ(max, 75000u);
	EXPECT_EQ(sum - sum_before, 75000u);
	EXPECT_EQ(buckets[nb::histogram::index_of(75000)] - before[nb::histogram::index_of(75000)], 1u);
}

TEST(Datapath, MisalignedPayloadIsCopiedAndCounted)
{
	netblk_queue *inst = fake_start(disk_size, false, 511);
	std::vector<u8> data = pattern(512, 4);
	auto frame = to_server(write_request(0, data, 1));
	uint32_t len = (uint32_t)frame.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, frame.data(), frame.data(), &len, nullptr, 0, 1),
		  NETBLK_RX_KEPT);
	netblk_core_submit(inst->core, 2);
	netblk_core_reply(inst->core, 2);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	netblk_stats s = fake_stats(inst);
	EXPECT_EQ(s.bytes_copied, 512u);
	EXPECT_EQ(s.writes_misaligned, 1u);
	EXPECT_EQ(s.bytes_zerocopy, 0u);
	fake_stop(inst);
}

TEST(Datapath, ReadOnlyRefusesWrites)
{
	netblk_queue *inst = fake_start(disk_size, true);
	auto frame = to_server(write_request(0, pattern(512, 1), 1));
	uint32_t len = (uint32_t)frame.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, frame.data(), frame.data(), &len, nullptr, 0, 1),
		  NETBLK_RX_REPLY);
	frame.resize(len);
	EXPECT_EQ(reply_header(frame).status, status_erofs);
	fake_stop(inst);
}
