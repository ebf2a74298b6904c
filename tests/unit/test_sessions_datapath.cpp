// SPDX-License-Identifier: GPL-2.0
/*
 * Protocol v2 through an instance's data path: sessions, the replay window
 * that makes every change to the disk happen once, HELLO's cookies, keyed
 * instances, TRIM and WRITE_ZEROES, and the answer to version 1.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "engine.h"
#include "fake_target.h"
#include "frames.h"

using namespace test;

namespace {

constexpr uint64_t disk_size = 1 << 20;
const uint8_t key_bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

struct v2 : ::testing::Test {
	netblk_queue *inst = nullptr;
	fake_frames frames;
	uint64_t now = 1000;

	void start(const fake_options &o = fake_options())
	{
		inst = fake_start(disk_size, o);
		ASSERT_NE(inst, nullptr);
	}
	void TearDown() override
	{
		if (inst)
			fake_stop(inst);
		test::session = client_session{};
	}

	/* The receive path: the verdict, and the in-place reply when there is one. */
	netblk_rx_verdict receive(const std::vector<u8> &payload, std::vector<u8> *reply = nullptr)
	{
		frames.push_back(std::make_unique<std::vector<u8>>(to_server(payload)));
		std::vector<u8> &f = *frames.back();
		uint32_t len = (uint32_t)f.size();
		netblk_rx_verdict v = netblk_core_receive(inst->core, 0, f.data(), f.data(), &len,
							  nullptr, 0, now);
		if (v == NETBLK_RX_REPLY) {
			f.resize(len);
			if (reply)
				*reply = f;
		}
		return v;
	}

	void work()
	{
		for (int round = 0; round < 100; round++) {
			now += 1000000;
			netblk_core_submit(inst->core, now);
			while (netblk_core_reply(inst->core, now))
				;
			if (netblk_core_next_work(inst->core, now) == NETBLK_NO_WORK)
				return;
		}
	}

	header last_reply()
	{
		EXPECT_FALSE(inst->sent.empty());
		return inst->sent.empty() ? header{} : reply_header(inst->sent.back());
	}

	netblk_stats stats() { return fake_stats(inst); }

	void expect_nothing_held()
	{
		netblk_held held{};
		netblk_core_held(inst->core, &held);
		EXPECT_EQ(held.slots, 0u);
		EXPECT_EQ(held.frames, 0u);
	}
};

std::vector<u8> block(uint8_t fill) { return std::vector<u8>(512, fill); }

bool disk_holds(netblk_queue *inst, uint64_t offset, uint8_t fill)
{
	return std::all_of(inst->disk.begin() + offset, inst->disk.begin() + offset + 512,
			   [fill](uint8_t b) { return b == fill; });
}

} // namespace

TEST_F(v2, WithoutASessionNothingIsExecutedAndTheClientIsTold)
{
	start();
	test::session.id = 0;
	test::session.token = 0;
	std::vector<u8> reply;
	ASSERT_EQ(receive(write_request(0, block(7)), &reply), NETBLK_RX_REPLY);
	header h = reply_header(reply);
	EXPECT_EQ(h.status, status_enotconn);
	EXPECT_EQ(reply.size(), reply_headroom) << "one header, no data";
	EXPECT_TRUE(disk_holds(inst, 0, 0));

	/* a guessed token of a real session id */
	test::session = client_session{};
	ASSERT_TRUE(fake_open_session(inst, now, 99));
	test::session.token ^= 1;
	ASSERT_EQ(receive(request(op_read, 0, 512), &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).status, status_enotconn);
	EXPECT_EQ(stats().not_connected, 2u);
	EXPECT_EQ(stats().reads, 0u) << "nothing of the device is told";
}

TEST_F(v2, HelloIsAnsweredWithACookieNoLargerThanItself)
{
	start(fake_options{.open_session = false});
	std::vector<u8> hello = hello_request(0xabc);
	std::vector<u8> reply;
	ASSERT_EQ(receive(hello, &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply.size(), to_server(hello).size()) << "amplification 1";
	header h = reply_header(reply);
	EXPECT_EQ(h.op, op_hello | op_reply_bit);
	EXPECT_EQ(h.status, status_ok);
	EXPECT_EQ(h.session, 0u) << "no session yet: nothing kept";
	EXPECT_EQ(h.seq, 0xabcu);
	EXPECT_NE(h.token, 0u);
	EXPECT_EQ(stats().sessions_opened, 0u);

	/* a wrong cookie is only a first HELLO again */
	ASSERT_EQ(receive(hello_request(0xabc, h.token ^ 1), &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).token, h.token);
	EXPECT_EQ(stats().hello_cookies, 2u);

	/* the cookie back: a session */
	ASSERT_EQ(receive(hello_request(0xabc, h.token)), NETBLK_RX_KEPT);
	work();
	header opened = last_reply();
	EXPECT_EQ(opened.status, status_ok);
	EXPECT_NE(opened.session, 0u);
	EXPECT_NE(opened.token, 0u);
	EXPECT_NE(opened.token, h.token);
	EXPECT_EQ(inst->sent.back().size(), reply_headroom) << "no larger than the HELLO";

	/* that HELLO again (its answer lost): the same session */
	ASSERT_EQ(receive(hello_request(0xabc, h.token)), NETBLK_RX_KEPT);
	work();
	EXPECT_EQ(last_reply().session, opened.session);
	EXPECT_EQ(last_reply().token, opened.token);
	EXPECT_EQ(stats().sessions_opened, 1u);
	EXPECT_EQ(stats().sessions_open, 1u);
	expect_nothing_held();
}

TEST_F(v2, AClientThatAsksGetsTheWriteAnswersOfARoundFoldedIntoOne)
{
	start(fake_options{.open_session = false});
	std::vector<u8> reply;
	ASSERT_EQ(receive(hello_request(0xf01d), &reply), NETBLK_RX_REPLY);
	header cookie = reply_header(reply);
	EXPECT_TRUE(cookie.flags & flag_fold_answers) << "offered in the cookie's answer";
	ASSERT_EQ(receive(hello_request(0xf01d, cookie.token, flag_fold_answers)), NETBLK_RX_KEPT);
	work();
	header opened = last_reply();
	ASSERT_EQ(opened.status, status_ok);
	EXPECT_TRUE(opened.flags & flag_fold_answers) << "and said to be on";
	test::session.id = opened.session;
	test::session.token = opened.token;
	inst->sent.clear();
	u64 frames_before = stats().frames_tx;

	/* one round: WRITEs 1-3, a READ (4), a WRITE (5) */
	for (u64 seq = 1; seq <= 3; seq++)
		ASSERT_EQ(receive(write_request(seq * 512, block((u8)seq), seq)), NETBLK_RX_KEPT);
	ASSERT_NE(receive(request(op_read, 0, 512, 0, 0, 4)), NETBLK_RX_REPLY);
	ASSERT_EQ(receive(write_request(5 * 512, block(5), 5)), NETBLK_RX_KEPT);
	work();

	ASSERT_EQ(inst->sent.size(), 2u) << "the READ's answer and one WRITE answer for four";
	header w = reply_header(inst->sent[0]);
	EXPECT_EQ(w.op, op_write | op_reply_bit);
	EXPECT_EQ(w.seq, 1u);
	EXPECT_EQ(w.offset, 512u) << "its own offset and length";
	EXPECT_EQ(w.status, status_ok);
	EXPECT_EQ(w.reserved, 0b1011u) << "bits for 2, 3 and 5; not the READ's 4";
	EXPECT_EQ(reply_header(inst->sent[1]).seq, 4u);
	EXPECT_EQ(stats().answers_folded, 3u);
	EXPECT_EQ(stats().frames_tx, frames_before + 2);
	for (u64 seq = 1; seq <= 3; seq++)
		EXPECT_TRUE(disk_holds(inst, seq * 512, (u8)seq));
	EXPECT_TRUE(disk_holds(inst, 5 * 512, 5));

	/* a resent WRITE already done is answered alone, as it was */
	ASSERT_EQ(receive(write_request(2 * 512, block(2), 2)), NETBLK_RX_KEPT);
	work();
	EXPECT_EQ(last_reply().seq, 2u);
	EXPECT_EQ(last_reply().status, status_ok);
	EXPECT_EQ(last_reply().reserved, 0u);
	EXPECT_EQ(stats().duplicates, 1u);
	expect_nothing_held();
}

TEST_F(v2, FoldedAnswersOfAKeyedInstanceAreTaggedWithTheirBits)
{
	fake_options o;
	o.key = key_bytes;
	o.open_session = false;
	start(o);
	ASSERT_TRUE(fake_open_session(inst, now, 0xf01e, flag_fold_answers));
	ASSERT_EQ(receive(write_request(0, block(1))), NETBLK_RX_KEPT);
	ASSERT_EQ(receive(write_request(512, block(2))), NETBLK_RX_KEPT);
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	const u8 *hdr = inst->sent[0].data() + eth_header_size + ipv4_header_size + udp_header_size;
	EXPECT_EQ(reply_header(inst->sent[0]).reserved, 1u);
	EXPECT_EQ(load_be64(hdr + tag_offset), compute_tag(test::session.auth, hdr, nullptr, 0))
		<< "the tag covers the bits";
}

TEST_F(v2, AClientThatDidNotAskGetsAnAnswerForEveryWrite)
{
	start();
	for (u64 seq = 1; seq <= 3; seq++)
		ASSERT_EQ(receive(write_request(seq * 512, block((u8)seq))), NETBLK_RX_KEPT);
	work();
	ASSERT_EQ(inst->sent.size(), 3u);
	for (u64 i = 0; i < 3; i++) {
		EXPECT_EQ(reply_header(inst->sent[i]).seq, i + 1);
		EXPECT_EQ(reply_header(inst->sent[i]).reserved, 0u);
	}
	EXPECT_EQ(stats().answers_folded, 0u);

	/* the flag is a HELLO's: on anything else it is refused */
	std::vector<u8> reply;
	ASSERT_EQ(receive(write_request(0, block(9), 0, flag_fold_answers), &reply),
		  NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).status, status_einval);
	EXPECT_TRUE(disk_holds(inst, 0, 0));
}

TEST_F(v2, ADuplicateOfAnAnsweredWriteGetsTheSameAnswerAndIsNotExecutedAgain)
{
	start();
	std::vector<u8> first = write_request(0, block(1));	/* seq 1 */
	receive(first);
	work();
	ASSERT_EQ(last_reply().status, status_ok);
	receive(write_request(0, block(2)));			/* seq 2: newer data */
	work();
	ASSERT_TRUE(disk_holds(inst, 0, 2));

	/* the network delivers the first WRITE again, late */
	receive(first);
	work();
	header h = last_reply();
	EXPECT_EQ(h.op, op_write | op_reply_bit);
	EXPECT_EQ(h.seq, 1u);
	EXPECT_EQ(h.status, status_ok) << "as the original was answered";
	EXPECT_TRUE(disk_holds(inst, 0, 2)) << "the old data did not land over the new";
	EXPECT_EQ(inst->submissions, 2u);
	EXPECT_EQ(stats().duplicates, 1u);
	EXPECT_EQ(stats().writes, 2u) << "a resent copy is no write of its own";
	EXPECT_EQ(stats().write_bytes, 2u * block(1).size());
	expect_nothing_held();
}

TEST_F(v2, ADuplicateOfAFailedWriteGetsItsErrorAgain)
{
	start();
	inst->fail_io = true;
	std::vector<u8> w = write_request(0, block(1));
	receive(w);
	work();
	ASSERT_EQ(last_reply().status, status_eio);
	inst->fail_io = false;
	receive(w);
	work();
	EXPECT_EQ(last_reply().status, status_eio) << "answered as it was, not tried again";
	EXPECT_EQ(inst->submissions, 1u);
}

TEST_F(v2, ADuplicateOfAWriteAtTheDiskIsDropped)
{
	start();
	inst->complete_at_once = false;
	std::vector<u8> w = write_request(0, block(3));
	receive(w);
	netblk_core_submit(inst->core, now);
	ASSERT_EQ(inst->pending.size(), 1u);
	receive(w);
	netblk_core_submit(inst->core, now);
	netblk_core_reply(inst->core, now);
	EXPECT_EQ(inst->pending.size(), 1u) << "not sent to the disk twice";
	EXPECT_TRUE(inst->sent.empty()) << "and not answered: the original will be";
	EXPECT_EQ(inst->freed_frames.size(), 1u) << "its frame freed";
	inst->finish_ios();
	work();
	EXPECT_EQ(inst->sent.size(), 1u);
	EXPECT_EQ(stats().duplicates_in_flight, 1u);
	EXPECT_EQ(stats().writes, 1u);
	expect_nothing_held();
}

TEST_F(v2, OutsideTheWindowIsRefusedAndNeverExecuted)
{
	start();
	receive(write_request(0, block(1), 1));
	receive(write_request(512, block(2), 1 + nb::replay_window::size));
	work();
	ASSERT_TRUE(disk_holds(inst, 512, 2));

	/* seq 1's entry is gone: a copy of it now is stale */
	std::vector<u8> reply;
	receive(write_request(0, block(9), 1));
	work();
	EXPECT_EQ(last_reply().status, status_estale);
	EXPECT_TRUE(disk_holds(inst, 0, 1));

	receive(write_request(0, block(9), 2 + 2 * nb::replay_window::size));
	work();
	EXPECT_EQ(last_reply().status, status_eoverflow) << "too far ahead";
	EXPECT_TRUE(disk_holds(inst, 0, 1));
	EXPECT_EQ(stats().stale, 1u);
	EXPECT_EQ(stats().too_far, 1u);
	EXPECT_EQ(stats().refused_by[NETBLK_REFUSED_ESTALE], 1u);
	EXPECT_EQ(stats().refused_by[NETBLK_REFUSED_EOVERFLOW], 1u);
	EXPECT_EQ(stats().io_errors, 0u) << "refusals are no disk errors";
	expect_nothing_held();
}

TEST_F(v2, ReadsAreServedAgainAndMoveTheWindow)
{
	start();
	inst->disk.assign(disk_size, 4);
	std::vector<u8> r = request(op_read, 0, 512);
	receive(r);
	receive(r);
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	EXPECT_EQ(reply_data(inst->sent[1]), block(4));
	EXPECT_EQ(stats().duplicates, 0u);
	EXPECT_EQ(stats().served_again, 1u);
	EXPECT_EQ(stats().reads, 2u) << "each copy served";

	/* reads alone take the numbers on: a write after 2000 of them is no too-far */
	for (int i = 0; i < 2000; i++) {
		receive(request(op_read, 0, 512));
		if (i % 100 == 0)
			work();
	}
	work();
	receive(write_request(0, block(5)));
	work();
	EXPECT_EQ(last_reply().status, status_ok);
}

/*
 * A captured READ sent again and again -- by anyone who saw it: a replay
 * is untouched, so a keyed instance takes its tag -- is served serves_max
 * times, then answered EALREADY, a header alone: the disk's data goes out
 * a bounded number of times, not for as long as the replays come.
 */
TEST_F(v2, OneReadNumberIsServedABoundedNumberOfTimes)
{
	start(fake_options{.key = key_bytes});
	std::vector<u8> r = request(op_read, 0, 16384);
	for (int i = 0; i < 51; i++) {
		receive(r);
		work();
	}

	size_t data_answers = 0, already = 0;
	for (auto &f : inst->sent) {
		header h = reply_header(f);
		if (h.status == status_ok)
			data_answers++;
		else if (h.status == status_ealready && f.size() == reply_headroom)
			already++;
	}
	EXPECT_EQ(data_answers, 16u * nb::replay_window::serves_max);
	EXPECT_EQ(already, 51u - nb::replay_window::serves_max) << "one header each, no data";
	EXPECT_EQ(inst->sent.size(), data_answers + already);
	netblk_stats s = stats();
	EXPECT_EQ(s.reads, nb::replay_window::serves_max);
	EXPECT_EQ(s.served_again, nb::replay_window::serves_max - 1u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_EALREADY], 51u - nb::replay_window::serves_max);
	EXPECT_EQ(s.io_errors, 0u);
	expect_nothing_held();
}

/* A READ or INFO whose number fell below the window is refused: ESTALE, never served. */
TEST_F(v2, AReadOrInfoBelowTheWindowIsRefusedStale)
{
	start();
	std::vector<u8> r = request(op_read, 0, 16384);
	std::vector<u8> i = request(op_info, 0, 0);
	receive(r);
	receive(i);
	work();
	for (u32 n = 0; n < nb::replay_window::size + 76; n++) {
		receive(request(op_read, 512, 512));
		if (n % 64 == 0)
			work();
	}
	work();
	inst->sent.clear();
	receive(r);
	work();
	ASSERT_EQ(inst->sent.size(), 1u) << "one answer, not one a datagram";
	EXPECT_EQ(last_reply().status, status_estale);
	EXPECT_EQ(inst->sent.back().size(), reply_headroom);
	receive(i);
	work();
	EXPECT_EQ(last_reply().status, status_estale);
	EXPECT_EQ(stats().stale, 2u);
	EXPECT_EQ(stats().refused_by[NETBLK_REFUSED_ESTALE], 2u);
	expect_nothing_held();
}

/*
 * A client that sends another request under a number it used is told
 * (EEXIST) and nothing is executed: it is not answered as the original
 * was, as if its WRITE had been done.
 */
TEST_F(v2, ANumberUsedForAnotherRequestIsRefusedAndNotExecuted)
{
	start();
	receive(write_request(0, block(1), 5));
	work();
	ASSERT_EQ(last_reply().status, status_ok);
	receive(write_request(512, block(2), 5));	/* another offset */
	work();
	EXPECT_EQ(last_reply().status, status_eexist);
	EXPECT_TRUE(disk_holds(inst, 512, 0)) << "never executed";
	receive(write_request(0, block(1), 5, flag_fua));	/* other flags */
	work();
	EXPECT_EQ(last_reply().status, status_eexist);

	receive(request(op_read, 0, 512, 0, 0, 6));
	work();
	receive(write_request(0, block(3), 6));	/* another op */
	work();
	EXPECT_EQ(last_reply().status, status_eexist);
	EXPECT_TRUE(disk_holds(inst, 0, 1));

	receive(write_request(0, block(1), 5));	/* the original again: a duplicate */
	work();
	EXPECT_EQ(last_reply().status, status_ok);
	netblk_stats s = stats();
	EXPECT_EQ(s.writes, 1u);
	EXPECT_EQ(s.duplicates, 1u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_EEXIST], 3u);
	EXPECT_EQ(s.io_errors, 0u);
	expect_nothing_held();
}

/*
 * What the replay window and the session table refuse is counted as a
 * refusal, by status; io_errors counts what the disk failed, once: not a
 * duplicate answered with a failed original's EIO.
 */
TEST_F(v2, RefusalsAreCountedByStatusAndIoErrorsAreTheDisksAlone)
{
	fake_options o;
	o.sessions = 1;
	start(o);
	receive(write_request(0, block(1), 1));
	receive(write_request(512, block(2), 1 + nb::replay_window::size));
	work();
	receive(write_request(0, block(9), 1));					/* ESTALE */
	receive(write_request(0, block(9), 2 + 2 * nb::replay_window::size));	/* EOVERFLOW */
	receive(request(op_read, 0, 512, 0, 0, 3 + 2 * nb::replay_window::size));	/* EOVERFLOW */
	work();

	inst->fail_io = true;
	std::vector<u8> failing = write_request(1024, block(3), 1000);
	receive(failing);
	work();
	ASSERT_EQ(last_reply().status, status_eio);
	inst->fail_io = false;
	receive(failing);	/* its duplicate: the same EIO, no new error */
	work();
	ASSERT_EQ(last_reply().status, status_eio);

	client_session mine = test::session;
	std::vector<u8> reply;
	ASSERT_EQ(receive(hello_request(5), &reply), NETBLK_RX_REPLY);
	receive(hello_request(5, reply_header(reply).token));	/* EUSERS: the one entry is taken */
	work();
	ASSERT_EQ(last_reply().status, status_eusers);
	test::session = mine;

	netblk_stats s = stats();
	EXPECT_EQ(s.io_errors, 1u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_ESTALE], 1u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_EOVERFLOW], 2u);
	EXPECT_EQ(s.refused_by[NETBLK_REFUSED_EUSERS], 1u);
	EXPECT_EQ(s.refused, 4u);
	EXPECT_EQ(s.stale, 1u);
	EXPECT_EQ(s.too_far, 2u);
	EXPECT_EQ(s.duplicates, 1u);
	expect_nothing_held();
}

TEST_F(v2, AWriteNotExecutedForWantOfABufferMayBeSentAgain)
{
	start(fake_options{.dma_align_mask = 511});	/* every write is copied */
	inst->no_buffers = true;
	std::vector<u8> w = write_request(0, block(6));
	receive(w);
	work();
	ASSERT_EQ(last_reply().status, status_eagain);
	inst->no_buffers = false;
	receive(w);
	work();
	EXPECT_EQ(last_reply().status, status_ok) << "EAGAIN: it was not executed, so now it is";
	EXPECT_TRUE(disk_holds(inst, 0, 6));
	EXPECT_EQ(stats().duplicates, 0u);
}

TEST_F(v2, ANewInstanceExecutesNoDatagramOfAnOldSession)
{
	start();
	client_session old = test::session;
	std::vector<u8> w = write_request(0, block(8));
	fake_stop(inst);
	inst = nullptr;

	fake_options o;
	o.open_session = false;
	inst = fake_start(disk_size, o);
	ASSERT_NE(inst, nullptr);
	/* its table starts empty (and a real one has a new secret: Table.CookieIs...) */
	test::session = old;
	std::vector<u8> reply;
	ASSERT_EQ(receive(w, &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).status, status_enotconn);
	EXPECT_TRUE(disk_holds(inst, 0, 0));
}

TEST_F(v2, KeyedInstanceAnswersOnlyTaggedDatagramsAndTagsItsReplies)
{
	fake_options o;
	o.key = key_bytes;
	start(o);
	auth_config client_auth = test::session.auth;

	/* untagged: refused, and told what the instance wants */
	test::session.auth = auth_config{};
	std::vector<u8> reply;
	ASSERT_EQ(receive(request(op_read, 0, 512), &reply), NETBLK_RX_REPLY);
	header h = reply_header(reply);
	EXPECT_EQ(h.status, status_ekeyrejected);
	EXPECT_EQ(h.flags, flag_auth_key);
	EXPECT_EQ(h.tag, 0u);
	EXPECT_EQ(stats().auth_failed, 1u);
	EXPECT_EQ(stats().refused_by[NETBLK_REFUSED_EKEYREJECTED], 1u);

	/* HELLO's answer says what the tags cover, so a client in the wrong mode is told */
	test::session.auth = client_auth;
	ASSERT_EQ(receive(hello_request(77), &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).flags, flag_auth_key | flag_fold_answers)
		<< "and offers folded WRITE answers";
	EXPECT_EQ(load_be64(reply.data() + eth_header_size + ipv4_header_size + udp_header_size +
			    tag_offset),
		  compute_tag(client_auth,
			      reply.data() + eth_header_size + ipv4_header_size + udp_header_size,
			      nullptr, 0)) << "and is tagged";

	inst->disk.assign(disk_size, 0x3c);
	receive(request(op_read, 0, 1024));
	work();
	ASSERT_EQ(inst->sent.size(), 1u);
	std::vector<u8> &f = inst->sent[0];
	const u8 *hdr = f.data() + eth_header_size + ipv4_header_size + udp_header_size;
	EXPECT_EQ(load_be64(hdr + tag_offset), compute_tag(client_auth, hdr, nullptr, 0))
		<< "the reply's tag covers its header";
	EXPECT_EQ(last_reply().status, status_ok);
}

TEST_F(v2, AuthFullRefusesDataChangedInFlight)
{
	fake_options o;
	o.key = key_bytes;
	o.auth_data = true;
	start(o);
	std::vector<u8> w = write_request(0, block(5));
	w[header_size + 17] ^= 1;
	std::vector<u8> reply;
	ASSERT_EQ(receive(w, &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).status, status_ekeyrejected);
	EXPECT_EQ(reply_header(reply).flags, flag_auth_key | flag_auth_data);
	EXPECT_TRUE(disk_holds(inst, 0, 0));

	receive(write_request(0, block(5)));
	inst->disk[600] = 0x77;
	receive(request(op_read, 0, 1024));
	work();
	EXPECT_TRUE(disk_holds(inst, 0, 5));
	std::vector<u8> &f = inst->sent.back();
	const u8 *hdr = f.data() + eth_header_size + ipv4_header_size + udp_header_size;
	EXPECT_EQ(load_be64(hdr + tag_offset),
		  compute_tag(test::session.auth, hdr, hdr + header_size, 1024))
		<< "a READ's answer is tagged over its data too";
}

TEST_F(v2, AuthFullTagsAreCheckedAcrossAMultiBufferFramesBuffers)
{
	fake_options o;
	o.key = key_bytes;
	o.auth_data = true;
	start(o);
	constexpr uint32_t data_at = eth_header_size + datagram_overhead;
	std::vector<u8> data(1024);
	for (size_t i = 0; i < data.size(); i++)
		data[i] = (u8)(i * 13 + 1);

	std::vector<u8> bad = to_server(write_request(0, data));
	bad[data_at + 900] ^= 4;	/* in the last buffer */
	ASSERT_EQ(fake_receive_frags(inst, frames, bad, data_at + 77, { 401, 0 }, now),
		  NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(*frames[frames.size() - 3]).status, status_ekeyrejected);

	ASSERT_EQ(fake_receive_frags(inst, frames, to_server(write_request(0, data)), data_at + 77,
				     { 401, 0 }, now),
		  NETBLK_RX_KEPT);
	work();
	EXPECT_EQ(last_reply().status, status_ok);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), inst->disk.begin()));
	EXPECT_EQ(stats().auth_failed, 1u);
}

TEST_F(v2, AuthFullTagsAGatheredReadsAnswersOverTheirDataInTheDataPage)
{
	fake_options o;
	o.key = key_bytes;
	o.auth_data = true;
	o.gather_page = 4096;
	start(o);
	for (size_t i = 0; i < 4096; i++)
		inst->disk[i] = (u8)(i * 5 + 3);
	receive(request(op_read, 0, 4096));
	work();
	ASSERT_EQ(inst->sent.size(), 4u);
	EXPECT_EQ(inst->frags_sent, 4u);
	for (std::vector<u8> &f : inst->sent) {
		const u8 *hdr = f.data() + eth_header_size + ipv4_header_size + udp_header_size;
		header h = reply_header(f);

		EXPECT_EQ(h.status, status_ok);
		EXPECT_EQ(load_be64(hdr + tag_offset),
			  compute_tag(test::session.auth, hdr, hdr + header_size, 1024))
			<< "the datagram at " << h.offset;
	}
}

TEST_F(v2, TrimAndWriteZeroesGoToTheDiskAndAreExecutedOnce)
{
	start();
	inst->disk.assign(disk_size, 9);
	std::vector<u8> z = request(op_write_zeroes, 4096, 8192);
	receive(z);
	receive(request(op_trim, 65536, 65536));
	work();
	ASSERT_EQ(inst->sent.size(), 2u);
	for (auto &f : inst->sent) {
		EXPECT_EQ(reply_header(f).status, status_ok);
		EXPECT_EQ(f.size(), reply_headroom);
	}
	EXPECT_TRUE(disk_holds(inst, 4096, 0));
	EXPECT_TRUE(disk_holds(inst, 4096 + 8192 - 512, 0));
	EXPECT_TRUE(disk_holds(inst, 4096 + 8192, 9));
	EXPECT_EQ(inst->zeroings, 1u);
	EXPECT_EQ(inst->discards, 1u);
	netblk_stats s = stats();
	EXPECT_EQ(s.write_zeroes, 1u);
	EXPECT_EQ(s.write_zeroes_bytes, 8192u);
	EXPECT_EQ(s.trims, 1u);
	EXPECT_EQ(s.trim_bytes, 65536u);

	receive(z);
	work();
	EXPECT_EQ(inst->zeroings, 1u) << "a duplicate is not executed again";
	expect_nothing_held();
}

TEST_F(v2, ADeviceThatCannotTrimSaysSo)
{
	start(fake_options{.trim = false});
	std::vector<u8> reply;
	ASSERT_EQ(receive(request(op_trim, 0, 512), &reply), NETBLK_RX_REPLY);
	EXPECT_EQ(reply_header(reply).status, status_eopnotsupp);
}

TEST_F(v2, VersionOneIsAnsweredInItsOwnHeader)
{
	start();
	std::vector<u8> v1(v1_header_size + 512, 0);
	store_be32(v1.data(), proto_magic);
	v1[4] = 1;
	v1[5] = op_write;
	store_be64(&v1[8], 0x1122334455667788ull);	/* its handle */
	store_be64(&v1[16], 0);
	store_be32(&v1[24], 512);
	std::vector<u8> reply;
	ASSERT_EQ(receive(v1, &reply), NETBLK_RX_REPLY);
	const u8 *p = reply.data() + eth_header_size + ipv4_header_size;
	EXPECT_EQ(load_be16(p + 4), udp_header_size + v1_header_size);
	p += udp_header_size;
	EXPECT_EQ(load_be32(p), proto_magic);
	EXPECT_EQ(p[4], 2) << "the version it speaks";
	EXPECT_EQ(p[5], op_write | op_reply_bit);
	EXPECT_EQ(load_be16(p + 6), status_eprotonosupport);
	EXPECT_EQ(load_be64(p + 8), 0x1122334455667788ull);
	EXPECT_EQ(load_be32(p + 24), 512u);
	EXPECT_TRUE(disk_holds(inst, 0, 0));
	EXPECT_EQ(stats().old_version, 1u);
	EXPECT_EQ(stats().refused_by[NETBLK_REFUSED_EPROTONOSUPPORT], 1u);
	EXPECT_EQ(stats().refused, 1u);

	/* behind IPv4 options the reply (without them) still names the request's op */
	frames.push_back(std::make_unique<std::vector<u8>>(
		udp_frame(server_ip, server_port, v1, 0x4000, 6)));
	std::vector<u8> &f = *frames.back();
	uint32_t len = (uint32_t)f.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, now),
		  NETBLK_RX_REPLY);
	EXPECT_EQ(f[eth_header_size + ipv4_header_size + udp_header_size + 5],
		  op_write | op_reply_bit);
}

TEST_F(v2, AFullSessionTableRefusesNewSessionsAndKeepsItsOwn)
{
	fake_options o;
	o.sessions = 1;
	start(o);
	client_session mine = test::session;
	std::vector<u8> reply;
	ASSERT_EQ(receive(hello_request(5), &reply), NETBLK_RX_REPLY);
	receive(hello_request(5, reply_header(reply).token));
	work();
	EXPECT_EQ(last_reply().status, status_eusers);
	EXPECT_EQ(stats().sessions_refused, 1u);
	test::session = mine;
	receive(request(op_read, 0, 512));
	work();
	EXPECT_EQ(last_reply().status, status_ok) << "the session there is still served";
}
