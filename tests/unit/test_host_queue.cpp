// SPDX-License-Identifier: GPL-2.0
/*
 * The client's side of the protocol (issue 10's core): the retransmission
 * timer, the send window, and the host queue's numbering, resends, fast
 * resends, back-offs, sessions opened again and deadlines -- with a fake
 * clock, and at the end a fake network that drops, duplicates and reorders
 * between the queue and a fake instance that keeps a replay window.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "host_queue.h"
#include "session.h"

using namespace nb;

namespace {

constexpr u64 ms = 1000000ull;
constexpr u64 sec = 1000 * ms;

/* ---- rto_estimator ---- */

TEST(Rto, StartsAtTheInitialTimeoutThenFollowsTheFirstSample)
{
	rto_estimator r;
	r.init(250 * ms, 2 * ms, 5 * sec);
	EXPECT_FALSE(r.has_sample());
	EXPECT_EQ(r.timeout_ns(), 250 * ms);
	r.sample(10 * ms);
	EXPECT_EQ(r.srtt_ns(), 10 * ms);
	EXPECT_EQ(r.rttvar_ns(), 5 * ms);
	EXPECT_EQ(r.timeout_ns(), 30 * ms);	/* SRTT + 4 RTTVAR */
}

TEST(Rto, ASteadyRoundTripNarrowsTheTimeoutToItWithinTheMinimum)
{
	rto_estimator r;
	r.init(250 * ms, 2 * ms, 5 * sec);
	for (int i = 0; i < 200; i++)
		r.sample(10 * ms);
	EXPECT_EQ(r.srtt_ns(), 10 * ms);
	EXPECT_LT(r.timeout_ns(), 11 * ms);
	EXPECT_GE(r.timeout_ns(), 10 * ms);
	for (int i = 0; i < 200; i++)
		r.sample(100000);	/* 0.1 ms: below the minimum */
	EXPECT_EQ(r.timeout_ns(), 2 * ms);
}

TEST(Rto, TimeoutsDoubleItUpToTheMaximumAndASampleEndsTheBackoff)
{
	rto_estimator r;
	r.init(250 * ms, 2 * ms, 5 * sec);
	r.sample(100 * ms);
	u64 base = r.timeout_ns();
	r.timed_out();
	EXPECT_EQ(r.timeout_ns(), 2 * base);
	r.timed_out();
	EXPECT_EQ(r.timeout_ns(), 4 * base);
	for (int i = 0; i < 40; i++)
		r.timed_out();
	EXPECT_EQ(r.timeout_ns(), 5 * sec);
	r.sample(100 * ms);
	EXPECT_LT(r.timeout_ns(), base);	/* the variation shrank */
	EXPECT_EQ(r.backoffs(), 0u);
}

/* ---- send_window ---- */

TEST(SendWindow, SlowStartsThenGrowsByOneForEveryWindowAnsweredNeverAboveTheSlots)
{
	send_window w;
	w.init(64, 2);
	EXPECT_EQ(w.limit(), 2u);
	/* slow start: one more an answer, the window doubles each round trip */
	w.answered();
	w.answered();
	EXPECT_EQ(w.limit(), 4u);
	for (int i = 0; i < 4; i++)
		w.answered();
	EXPECT_EQ(w.limit(), 8u);
	/* a loss: halved, and the threshold is there; then one more a window */
	w.congested(1, 8);
	EXPECT_EQ(w.limit(), 4u);
	EXPECT_EQ(w.threshold(), 4u);
	for (int i = 0; i < 3; i++)
		w.answered();
	EXPECT_EQ(w.limit(), 4u);
	w.answered();
	EXPECT_EQ(w.limit(), 5u);
	for (int i = 0; i < 10000; i++)
		w.answered();
	EXPECT_EQ(w.limit(), 64u);
	w.init(8, 2);
	for (int i = 0; i < 100; i++)
		w.answered();
	EXPECT_EQ(w.limit(), 8u);
	w.set_cap(5);
	EXPECT_EQ(w.limit(), 5u);
	w.init(4, 100);
	EXPECT_EQ(w.limit(), 4u);
	w.init(0, 0);
	EXPECT_EQ(w.limit(), 1u);
}

TEST(SendWindow, HalvesOnceForLossesAmongTheSameSends)
{
	send_window w;
	w.init(64, 64);
	w.congested(5, 40);	/* sends 1..40 outstanding together */
	EXPECT_EQ(w.limit(), 32u);
	w.congested(7, 45);	/* another of those: no second halving */
	w.congested(40, 45);
	EXPECT_EQ(w.limit(), 32u);
	w.congested(41, 50);	/* sent after the halving: a new loss */
	EXPECT_EQ(w.limit(), 16u);
	EXPECT_EQ(w.decreases(), 2u);
	for (int i = 0; i < 10; i++)
		w.congested(100 + 10 * i, 105 + 10 * i);
	EXPECT_EQ(w.limit(), 1u);
}

TEST(SendWindow, AHalvingForNoLossIsUndoneOnce)
{
	send_window w;
	w.init(64, 64);
	w.congested(5, 40);
	EXPECT_EQ(w.limit(), 32u);
	w.undo();
	EXPECT_EQ(w.limit(), 64u);
	EXPECT_EQ(w.threshold(), 64u);
	w.undo();	/* nothing more to undo */
	EXPECT_EQ(w.limit(), 64u);
	EXPECT_EQ(w.decreases(), 1u);	/* it was cut: counted */
}

/* ---- host_queue ---- */

struct completion {
	u32 tag;
	u16 status;
};

struct chunk_copy {
	u32 tag, at, len;
};

class Queue : public ::testing::Test {
protected:
	host_config config(u32 slots = 64, u32 window = 64)
	{
		host_config c{};
		c.requests = 256;
		c.datagrams = 2048;
		c.slots = slots;
		c.max_io = 1024;
		c.initial_window = window;
		c.rto_initial_ns = 250 * ms;
		c.rto_min_ns = 2 * ms;
		c.rto_max_ns = 5 * sec;
		c.seed = 1;
		return c;
	}

	void start(const host_config &c)
	{
		host_queue_ops ops{};
		ops.read_data = [](void *ctx, u32 tag, u32 at, void *, u32 len) {
			static_cast<Queue *>(ctx)->copies.push_back({tag, at, len});
		};
		ops.complete = [](void *ctx, u32 tag, u16 status) {
			static_cast<Queue *>(ctx)->done.push_back({tag, status});
		};
		ASSERT_EQ(q.init(c, ops, this), 0);
	}

	void TearDown() override { q.destroy(); }

	std::vector<host_datagram> send(u32 max = 4096)
	{
		std::vector<u32> idx(max);
		u32 n = q.pick(now, idx.data(), max);
		std::vector<host_datagram> out;
		for (u32 k = 0; k < n; k++)
			out.push_back(q.describe(idx[k]));
		return out;
	}

	host_answer reply(const host_datagram &d, u16 status = status_ok)
	{
		header h{};
		h.op = d.op | op_reply_bit;
		h.status = status;
		h.seq = d.seq;
		h.offset = d.offset;
		h.length = d.length;
		return q.answer(h, 0, nullptr, now);
	}

	host_answer chunk(const host_datagram &d, u64 rel, u32 len, u32 data_len)
	{
		header h{};
		h.op = op_read | op_reply_bit;
		h.seq = d.seq;
		h.offset = d.offset + rel;
		h.length = len;
		return q.answer(h, data_len, nullptr, now);
	}

	void add_write(u32 tag, u64 offset, u32 at = 0)
	{
		ASSERT_TRUE(q.add(tag, op_write, offset, 1024, 0, at, now));
	}

	/* Writes of tags 0-19 answered @rtt after their sends: the estimator learns it. */
	void learn_round_trip(u64 rtt)
	{
		for (u32 i = 0; i < 20; i++) {
			add_write(i, 1024 * i);
			auto d = send();
			ASSERT_EQ(d.size(), 1u);
			now += rtt;
			ASSERT_EQ(reply(d[0]), host_answer::done);
		}
	}

	/* A write of @tag sent, then resent after the timeout: its first send. */
	host_datagram timed_out_write(u32 tag)
	{
		add_write(tag, 0);
		auto d = send();
		now += q.rto().timeout_ns();
		q.expire(now);
		EXPECT_EQ(send().size(), 1u) << "resent";
		return d.at(0);
	}

	/*
	 * Window 16 of 16 slots, writes of tags @first_tag on queued: the first
	 * one sent is answered after the 16 sent after it -- taken for lost,
	 * then answered before its resend went.  Returns the datagrams of the
	 * second window, the first of them answered.
	 */
	std::vector<host_datagram> answer_one_a_window_late(u32 first_tag)
	{
		for (u32 t = first_tag; t < first_tag + 64; t++)
			add_write(t, 1024 * t);
		auto first = send();
		EXPECT_EQ(first.size(), 16u);
		for (size_t k = 1; k < first.size(); k++)
			reply(first[k]);
		auto second = send();
		EXPECT_EQ(second.size(), 15u);
		reply(second[0]);	/* a window of later sends answered: first[0] taken for lost */
		EXPECT_EQ(q.counters().fast_resends, 1u);
		EXPECT_EQ(q.window().limit(), 8u);
		EXPECT_EQ(reply(first[0]), host_answer::done);	/* before the resend went */
		return second;
	}

	host_queue q;
	u64 now = 1 * sec;
	std::vector<completion> done;
	std::vector<chunk_copy> copies;
};

TEST_F(Queue, NumberedAtTheFirstSendAndResentUnderTheSameNumberAfterSilence)
{
	start(config());
	add_write(7, 4096);
	auto first = send();
	ASSERT_EQ(first.size(), 1u);
	EXPECT_EQ(first[0].seq, 1u);
	EXPECT_EQ(first[0].tag, 7u);
	EXPECT_EQ(first[0].offset, 4096u);
	EXPECT_TRUE(send().empty());

	now += 249 * ms;
	EXPECT_EQ(q.expire(now), 1 * sec + 250 * ms);	/* when it is due */
	EXPECT_TRUE(send().empty());
	now += 1 * ms;
	q.expire(now);
	auto again = send();
	ASSERT_EQ(again.size(), 1u);
	EXPECT_EQ(again[0].seq, 1u);
	EXPECT_EQ(q.counters().timeouts, 1u);
	EXPECT_EQ(q.rto().timeout_ns(), 500 * ms);	/* backed off */

	EXPECT_EQ(reply(again[0]), host_answer::done);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].tag, 7u);
	EXPECT_EQ(done[0].status, status_ok);
	EXPECT_FALSE(q.rto().has_sample());	/* Karn: sent twice, timed by neither */
	EXPECT_EQ(reply(again[0]), host_answer::stray);	/* the other send's answer */
	EXPECT_EQ(done.size(), 1u);
	EXPECT_EQ(q.expire(now), 0u);	/* nothing outstanding */
}

TEST_F(Queue, ATimeoutTheFirstSendsAnswerProvesSpuriousUndoesTheHalvingAndIsTimed)
{
	start(config(64, 64));
	learn_round_trip(3 * ms);	/* and the fastest one */
	u32 window = q.window().limit();

	/* one in the tail: its timeout resends it, the window halves ... */
	host_datagram d = timed_out_write(30);
	EXPECT_EQ(q.counters().timeouts, 1u);
	EXPECT_EQ(q.window().limit(), window / 2);
	/* ... and the answer comes 0.1 ms after the resend: the first send's */
	now += 100000;
	ASSERT_EQ(reply(d), host_answer::done);
	EXPECT_EQ(q.counters().spurious, 1u);
	EXPECT_EQ(q.window().limit(), window);
	EXPECT_GT(q.rto().srtt_ns(), 3 * ms);	/* its whole round trip was sampled */

	/* a real loss: the answer a round trip after the resend; nothing undone */
	d = timed_out_write(31);
	now += 3 * ms;
	ASSERT_EQ(reply(d), host_answer::done);
	EXPECT_EQ(q.counters().spurious, 1u);
	EXPECT_EQ(q.window().limit(), window / 2);
}

TEST_F(Queue, ASecondAnswerToOneDoneAfterATimeoutProvesTheTimeoutNeedless)
{
	start(config(64, 64));
	learn_round_trip(3 * ms);
	u32 window = q.window().limit();

	/* a queue in the path holds it past the timeout: resent, the window halves ... */
	host_datagram d = timed_out_write(30);
	EXPECT_EQ(q.window().limit(), window / 2);
	/* ... its first answer a round trip after the resend: either send's, for all it says */
	now += 3 * ms;
	ASSERT_EQ(reply(d), host_answer::done);
	EXPECT_EQ(q.counters().spurious, 0u);
	EXPECT_EQ(q.window().limit(), window / 2);
	/* the instance answers the other send too: both got through, nothing was lost */
	now += 1 * ms;
	EXPECT_EQ(reply(d), host_answer::stray);
	EXPECT_EQ(q.counters().spurious, 1u);
	EXPECT_EQ(q.window().limit(), window);
	EXPECT_GT(q.rto().srtt_ns(), 3 * ms) << "the stretched round trip is learnt";
	/* a third answer (the network duplicated one) proves nothing more */
	EXPECT_EQ(reply(d), host_answer::stray);
	EXPECT_EQ(q.counters().spurious, 1u);
	EXPECT_EQ(q.counters().stray, 2u);
}

TEST_F(Queue, WhileAnswersKeepComingTheLastOfAWindowIsNotTakenForLost)
{
	start(config(64, 64));
	learn_round_trip(3 * ms);
	u64 step = q.rto().timeout_ns() - 1 * ms;

	/* a slow receiver drains a window: each answer comes a little under the
	 * timeout after the one before, the last ones long after their sends */
	for (u32 i = 0; i < 8; i++)
		add_write(20 + i, 1024 * i);
	auto d = send();
	ASSERT_EQ(d.size(), 8u);
	for (const host_datagram &x : d) {
		now += step;
		q.expire(now);
		EXPECT_TRUE(send().empty()) << "nothing resent while answers keep coming";
		reply(x);
	}
	EXPECT_EQ(q.counters().timeouts, 0u);
	EXPECT_EQ(done.size(), 28u);

	/* silence: the timeout runs from the later of the send and the last answer */
	add_write(40, 0);
	ASSERT_EQ(send().size(), 1u);
	now += q.rto().timeout_ns() - 1;
	q.expire(now);
	EXPECT_EQ(q.counters().timeouts, 0u);
	now += 1;
	q.expire(now);
	EXPECT_EQ(q.counters().timeouts, 1u);
	EXPECT_EQ(send().size(), 1u);
}

TEST_F(Queue, AnswersToDatagramsSentOnceTimeTheRoundTrip)
{
	start(config());
	for (int i = 0; i < 20; i++) {
		add_write(i, 1024 * i);
		auto d = send();
		ASSERT_EQ(d.size(), 1u);
		now += 3 * ms;
		ASSERT_EQ(reply(d[0]), host_answer::done);
	}
	EXPECT_EQ(q.rto().srtt_ns(), 3 * ms);
	EXPECT_LT(q.rto().timeout_ns(), 10 * ms);
}

TEST_F(Queue, NoMoreOutstandingThanTheWindowAndTheWindowNoMoreThanTheSlots)
{
	start(config(8, 4));
	for (u32 t = 0; t < 40; t++)
		add_write(t, 1024 * t);
	auto d = send();
	EXPECT_EQ(d.size(), 4u);
	u32 most = 0;
	while (!d.empty()) {
		for (auto &x : d)
			reply(x);
		d = send();
		most = std::max(most, q.outstanding());
	}
	EXPECT_EQ(done.size(), 40u);
	EXPECT_EQ(most, 8u);
	EXPECT_EQ(q.window().limit(), 8u);
}

TEST_F(Queue, AReadCountsInTheWindowAsTheSlotsItsAnswerTakes)
{
	/* 16 KiB READs at 1024 bytes a datagram: 16 of the instance's slots each */
	start(config(64, 64));
	for (u32 t = 0; t < 10; t++)
		ASSERT_TRUE(q.add(t, op_read, 16384 * t, 16384, 0, 0, now));
	auto d = send();
	ASSERT_EQ(d.size(), 4u);	/* 4 x 16 = the 64 slots */
	EXPECT_TRUE(send().empty());
	for (u32 c = 0; c < 16; c++)
		chunk(d[0], 1024 * c, 1024, 1024);
	EXPECT_EQ(send().size(), 1u);	/* its 16 slots are free again */
	EXPECT_TRUE(send().empty());

	/* a window smaller than one READ still sends it, alone */
	q.destroy();
	start(config(8, 8));
	ASSERT_TRUE(q.add(0, op_read, 0, 16384, 0, 0, now));
	ASSERT_TRUE(q.add(1, op_write, 0, 1024, 0, 0, now));
	EXPECT_EQ(send().size(), 1u);
	EXPECT_TRUE(send().empty());
}

TEST_F(Queue, ASingleRequestOfManyDatagramsCompletesWhenTheLastIsAnswered)
{
	start(config());
	for (u32 k = 0; k < 3; k++)
		add_write(5, 1024 * k, 1024 * k);
	auto d = send();
	ASSERT_EQ(d.size(), 3u);
	EXPECT_EQ(d[2].at, 2048u);
	EXPECT_EQ(reply(d[2]), host_answer::partial);
	EXPECT_EQ(reply(d[0]), host_answer::partial);
	EXPECT_TRUE(done.empty());
	EXPECT_EQ(reply(d[1]), host_answer::done);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].tag, 5u);
}

TEST_F(Queue, AReadIsPutTogetherFromItsChunksInAnyOrder)
{
	start(config());
	ASSERT_TRUE(q.add(3, op_read, 8192, 3584, 0, 512, now));	/* 3.5 KiB: 4 chunks */
	auto d = send();
	ASSERT_EQ(d.size(), 1u);
	EXPECT_EQ(chunk(d[0], 3072, 512, 512), host_answer::partial);
	EXPECT_EQ(chunk(d[0], 1024, 1024, 1024), host_answer::partial);
	EXPECT_EQ(chunk(d[0], 1024, 1024, 1024), host_answer::duplicate);
	EXPECT_EQ(chunk(d[0], 512, 1024, 1024), host_answer::stray);	/* not on max_io */
	EXPECT_EQ(chunk(d[0], 0, 1024, 100), host_answer::stray);	/* data short */
	EXPECT_EQ(chunk(d[0], 2048, 512, 512), host_answer::stray);	/* not the whole chunk */
	EXPECT_EQ(chunk(d[0], 0, 1024, 1024), host_answer::partial);
	EXPECT_TRUE(done.empty());
	EXPECT_EQ(chunk(d[0], 2048, 1024, 1024), host_answer::done);
	ASSERT_EQ(copies.size(), 4u);
	EXPECT_EQ(copies[0].at, 512u + 3072);
	EXPECT_EQ(copies[0].len, 512u);
	EXPECT_EQ(copies[1].at, 512u + 1024);
	EXPECT_EQ(copies[3].at, 512u + 2048);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(q.counters().duplicates, 1u);
	EXPECT_EQ(q.counters().stray, 3u);
	EXPECT_TRUE(q.add(4, op_read, 0, 16 * 1024, 0, 0, now));
	EXPECT_FALSE(q.add(5, op_read, 0, 16 * 1024 + 512, 0, 0, now));	/* beyond max_read */
}

TEST_F(Queue, AFoldedWriteAnswerAnswersTheWritesItsBitsName)
{
	start(config());
	for (u32 k = 0; k < 3; k++)
		add_write(1, 1024 * k, 1024 * k);	/* tag 1: seqs 1-3 */
	ASSERT_TRUE(q.add(2, op_read, 0, 1024, 0, 0, now));	/* seq 4 */
	add_write(3, 8192);				/* seq 5 */
	auto d = send();
	ASSERT_EQ(d.size(), 5u);

	header h{};
	h.op = op_write | op_reply_bit;
	h.seq = d[0].seq;
	h.offset = d[0].offset;
	h.length = d[0].length;
	/* 2, 3, the READ's 4 (not a WRITE: stray), 5, and 7 (nothing outstanding: stray) */
	h.reserved = 0b11111;
	EXPECT_EQ(q.answer(h, 0, nullptr, now), host_answer::partial) << "what became of seq 1 alone";
	ASSERT_EQ(done.size(), 2u) << "tags 1 and 3: every WRITE answered";
	EXPECT_EQ(done[0].tag, 1u);
	EXPECT_EQ(done[1].tag, 3u);
	EXPECT_EQ(q.counters().folded, 3u);
	EXPECT_EQ(q.counters().stray, 2u);
	EXPECT_EQ(q.outstanding(), 1u) << "the READ";

	/* bits on anything but a WRITE answered OK mean nothing */
	add_write(4, 0);	/* seq 6 */
	add_write(5, 1024);	/* seq 7 */
	d = send();
	ASSERT_EQ(d.size(), 2u);
	h.seq = d[0].seq;
	h.offset = d[0].offset;
	h.status = status_eio;
	h.reserved = 1;
	EXPECT_EQ(q.answer(h, 0, nullptr, now), host_answer::failed);
	EXPECT_EQ(q.counters().folded, 3u);
	EXPECT_EQ(q.outstanding(), 2u) << "the READ and seq 7";
}

TEST_F(Queue, AnAnswerOfAnotherOpOrRangeIsStray)
{
	start(config());
	add_write(1, 0);
	auto d = send();
	host_datagram other = d[0];
	other.op = op_read;
	EXPECT_EQ(reply(other), host_answer::stray);
	other = d[0];
	other.offset += 512;
	EXPECT_EQ(reply(other), host_answer::stray);
	other = d[0];
	other.seq = 99;
	EXPECT_EQ(reply(other), host_answer::stray);
	EXPECT_TRUE(done.empty());
	EXPECT_EQ(reply(d[0]), host_answer::done);
}

TEST_F(Queue, OneOvertakenByAWindowOfLaterAnswersIsResentAtOnce)
{
	start(config(64, 16));
	for (u32 t = 0; t < 100; t++)
		add_write(t, 1024 * t);
	std::vector<host_datagram> lost;
	std::vector<u64> resent_after;	/* answers before seq 1 went again */
	u32 answered = 0;
	for (int round = 0; round < 200 && done.size() < 100; round++) {
		for (auto &x : send()) {
			if (x.seq == 1 && lost.empty()) {
				lost.push_back(x);
				continue;
			}
			if (x.seq == 1)
				resent_after.push_back(answered);
			reply(x);
			answered++;
		}
	}
	EXPECT_EQ(done.size(), 100u);	/* no clock moved: no timer resent it */
	EXPECT_EQ(q.counters().timeouts, 0u);
	EXPECT_EQ(q.counters().fast_resends, 1u);
	ASSERT_EQ(resent_after.size(), 1u);
	/* not before the window it was sent in (16) of later sends was
	 * answered, though the window grew meanwhile (slow start: 31 in the
	 * second round); sent in the round after the one that answered the
	 * overtaking one: after 15 + 30 answers at the most */
	EXPECT_GE(resent_after[0], 16u);
	EXPECT_LE(resent_after[0], 45u);
	/* a loss halves it once, and slow start is over: it never reached the slots */
	EXPECT_EQ(q.window().decreases(), 1u);
	EXPECT_LT(q.window().limit(), 32u);
}

TEST_F(Queue, AWindowAnsweredNewestFirstIsNotTakenForLoss)
{
	start(config(16, 16));
	for (u32 t = 0; t < 160; t++)
		add_write(t, 1024 * t);
	for (int round = 0; round < 10; round++) {
		auto d = send();
		ASSERT_EQ(d.size(), 16u);
		std::reverse(d.begin(), d.end());
		for (auto &x : d)
			reply(x);
	}
	EXPECT_EQ(done.size(), 160u);
	EXPECT_EQ(q.counters().fast_resends, 0u);
	EXPECT_EQ(q.counters().sends, 160u);
}

TEST_F(Queue, OneAnsweredAfterItsFastResendWasDecidedTeachesTheReorderingAndUndoesTheHalving)
{
	start(config(16, 16));
	auto second = answer_one_a_window_late(0);
	/* its first send's answer came before the resend went: reordered, not lost */
	EXPECT_EQ(q.counters().fast_spurious, 1u);
	EXPECT_EQ(q.counters().reordering, 16u);
	EXPECT_EQ(q.window().limit(), 16u) << "the halving is undone";
	EXPECT_EQ(q.counters().sends, 31u) << "and nothing was sent again";

	/* the same reordering again, of datagrams sent since: not taken for lost */
	for (size_t k = 1; k < second.size(); k++)
		reply(second[k]);
	auto b = send();
	ASSERT_EQ(b.size(), 16u);
	for (size_t k = 1; k < b.size(); k++)
		reply(b[k]);
	auto c = send();
	ASSERT_FALSE(c.empty());
	reply(c[0]);		/* b[0] overtaken by 16 later sends */
	EXPECT_EQ(q.counters().fast_resends, 1u);
	EXPECT_EQ(reply(b[0]), host_answer::done);
	EXPECT_EQ(q.window().decreases(), 1u);
	EXPECT_EQ(q.counters().reordering, 16u);
}

TEST_F(Queue, AHalvingIsUndoneOnlyOnceEveryFastResendOfItIsProvedNeedless)
{
	start(config(16, 16));
	learn_round_trip(3 * ms);
	for (u32 t = 20; t < 64; t++)
		add_write(t, 1024 * t);
	auto first = send();
	ASSERT_EQ(first.size(), 16u);
	for (size_t k = 2; k < first.size(); k++)
		reply(first[k]);
	auto second = send();
	ASSERT_EQ(second.size(), 14u);
	reply(second[0]);	/* first[0] overtaken: the window halves */
	reply(second[1]);	/* first[1] too, among the same sends: no second halving */
	EXPECT_EQ(q.counters().fast_resends, 2u);
	EXPECT_EQ(q.window().decreases(), 1u);
	u32 halved = q.window().limit();
	EXPECT_EQ(halved, 8u);

	/* first[0] was only late; first[1] was lost: the halving stands */
	EXPECT_EQ(reply(first[0]), host_answer::done);
	EXPECT_EQ(q.counters().fast_spurious, 1u);
	EXPECT_EQ(q.window().limit(), halved);
	for (size_t k = 2; k < second.size(); k++)
		reply(second[k]);	/* room in the window for the resend */
	auto resent = send();
	ASSERT_FALSE(resent.empty());
	EXPECT_EQ(resent[0].seq, first[1].seq);
	now += 3 * ms;		/* a round trip: the resend's answer */
	reply(resent[0]);
	EXPECT_EQ(q.counters().fast_spurious, 1u);
	EXPECT_LT(q.window().limit(), 16u);
}

TEST_F(Queue, ATimeoutOfOneOvertakenByFewerThanTheReorderingLearntForgetsIt)
{
	start(config(16, 16));
	learn_round_trip(3 * ms);
	auto second = answer_one_a_window_late(20);
	ASSERT_EQ(q.counters().reordering, 16u);

	/* one sent since is lost: 16 later answers do not resend it now ... */
	for (size_t k = 1; k < second.size(); k++)
		reply(second[k]);
	auto b = send();
	for (size_t k = 1; k < b.size(); k++)
		reply(b[k]);
	auto c = send();
	reply(c[0]);
	EXPECT_EQ(q.counters().fast_resends, 1u);
	/* ... its timeout does (and c's unanswered ones'), and what was learnt is forgotten */
	now += q.rto().timeout_ns();
	q.expire(now);
	EXPECT_EQ(q.counters().timeouts, c.size());
	EXPECT_EQ(q.counters().reordering, 0u);
}

TEST_F(Queue, NothingIsOutstandingHalfAReplayWindowBehindTheNewest)
{
	host_config c = config(1024, 1024);
	start(c);
	for (u32 t = 0; t < 256; t++)
		for (u32 k = 0; k < 3; k++)
			add_write(t, 4096 * t + 1024 * k, 1024 * k);
	auto d = send();
	ASSERT_EQ(d.size(), host_queue::seq_span);	/* 512 numbers, not 768 */
	EXPECT_EQ(d.back().seq, host_queue::seq_span);
	/* everything but the first answered: only the first may go (again) */
	for (size_t k = 1; k < d.size(); k++)
		reply(d[k]);
	auto next = send();
	ASSERT_EQ(next.size(), 1u);
	EXPECT_EQ(next[0].seq, 1u);
	EXPECT_EQ(q.counters().fast_resends, 1u);
	reply(next[0]);
	next = send();
	EXPECT_EQ(next.size(), 768u - 512u);
	EXPECT_EQ(next.front().seq, 513u);
}

TEST_F(Queue, EagainIsSentAgainAfterABackOffUnderTheSameNumber)
{
	start(config(64, 64));
	add_write(2, 0);
	auto d = send();
	EXPECT_EQ(reply(d[0], status_eagain), host_answer::busy);
	EXPECT_EQ(reply(d[0], status_eagain), host_answer::duplicate);	/* one per send */
	EXPECT_EQ(q.window().limit(), 32u);
	EXPECT_TRUE(send().empty());
	u64 due = q.expire(now);
	EXPECT_GE(due, now + 250000);
	EXPECT_LE(due, now + 750000);
	now = due;
	q.expire(now);
	auto again = send();
	ASSERT_EQ(again.size(), 1u);
	EXPECT_EQ(again[0].seq, d[0].seq);
	EXPECT_EQ(reply(again[0]), host_answer::done);
	EXPECT_EQ(q.counters().busy, 1u);
	EXPECT_EQ(q.counters().timeouts, 0u);
}

/*
 * The instance served a READ's number as often as it serves one (its
 * answers were lost that often): the READ goes again at once under a new
 * number, and the chunks it had stay had.
 */
TEST_F(Queue, AReadAnsweredEalreadyGoesAgainUnderANewNumber)
{
	start(config());
	ASSERT_TRUE(q.add(3, op_read, 8192, 2048, 0, 0, now));
	auto d = send();
	ASSERT_EQ(d.size(), 1u);
	EXPECT_EQ(chunk(d[0], 0, 1024, 1024), host_answer::partial);
	EXPECT_EQ(reply(d[0], status_ealready), host_answer::renumbered);
	EXPECT_EQ(reply(d[0], status_ealready), host_answer::stray) << "its old number is gone";
	EXPECT_TRUE(done.empty()) << "not failed";
	auto again = send();
	ASSERT_EQ(again.size(), 1u);
	EXPECT_NE(again[0].seq, d[0].seq);
	EXPECT_EQ(again[0].offset, 8192u);
	EXPECT_EQ(again[0].length, 2048u);
	EXPECT_EQ(chunk(again[0], 1024, 1024, 1024), host_answer::done) << "the first chunk was had";
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].status, status_ok);
	EXPECT_EQ(q.counters().renumbered, 1u);
	EXPECT_EQ(q.counters().failed, 0u);
}

TEST_F(Queue, ARefusalFailsTheWholeRequestAndFreesItsDatagrams)
{
	start(config());
	for (u32 k = 0; k < 3; k++)
		add_write(9, 1024 * k, 1024 * k);
	add_write(10, 8192);
	auto d = send();
	ASSERT_EQ(d.size(), 4u);
	EXPECT_EQ(reply(d[1], status_eio), host_answer::failed);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].tag, 9u);
	EXPECT_EQ(done[0].status, status_eio);
	EXPECT_EQ(q.outstanding(), 1u);
	EXPECT_EQ(reply(d[0]), host_answer::stray);
	EXPECT_EQ(reply(d[3]), host_answer::done);
	EXPECT_EQ(done.size(), 2u);
	EXPECT_EQ(q.counters().failed, 1u);
}

TEST_F(Queue, ANewSessionGetsEverythingOutstandingAgainInTheOldOrder)
{
	start(config());
	for (u32 t = 0; t < 5; t++)
		add_write(t, 1024 * t);
	auto d = send(5);
	add_write(5, 1024 * 5);	/* never sent */
	ASSERT_EQ(d.size(), 5u);
	reply(d[2]);
	EXPECT_EQ(reply(d[0], status_enotconn), host_answer::session_lost);
	q.reopen();	/* the owner opened a new session (HELLO) first */
	auto again = send();
	ASSERT_EQ(again.size(), 5u);
	u64 want_offsets[] = {0, 1024, 3072, 4096, 5120};
	for (u32 k = 0; k < 5; k++) {
		EXPECT_EQ(again[k].seq, k + 1);
		EXPECT_EQ(again[k].offset, want_offsets[k]);
	}
	EXPECT_EQ(q.counters().renumbered, 4u);
	for (auto &x : again)
		reply(x);
	EXPECT_EQ(done.size(), 6u);
}

TEST_F(Queue, ByDefaultSilenceIsWaitedOutForeverWithTheTimeoutBackedOff)
{
	start(config());
	add_write(1, 0);
	send();
	for (int i = 0; i < 600; i++) {	/* ten minutes, a second at a time */
		now += 1 * sec;
		q.expire(now);
		send();
	}
	EXPECT_TRUE(done.empty());
	EXPECT_EQ(q.rto().timeout_ns(), 5 * sec);
	EXPECT_GT(q.counters().timeouts, 100u);
	EXPECT_LT(q.counters().timeouts, 130u);	/* 5 s apart, once backed off */
}

TEST_F(Queue, WithADeadlineARequestFailsEioThatLongAfterItWasAdded)
{
	host_config c = config();
	c.deadline_ns = 5 * sec;
	start(c);
	add_write(4, 0);
	u64 first = now;
	send();
	while (done.empty() && now < first + 60 * sec) {
		u64 next = q.expire(now);
		ASSERT_NE(next, 0u);
		send();
		now = std::max(next, now + 1);
		q.expire(now);
	}
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].status, status_eio);
	EXPECT_EQ(now, first + 5 * sec);
	EXPECT_EQ(q.outstanding() + q.queued(), 0u);
}

TEST_F(Queue, WithADeadlineARequestNeverSentFailsToo)
{
	/* no session can be opened: nothing is ever picked */
	host_config c = config();
	c.deadline_ns = 5 * sec;
	start(c);
	add_write(2, 0);
	now += 4 * sec;
	EXPECT_EQ(q.expire(now), now + sec);
	EXPECT_TRUE(done.empty());
	now += sec;
	q.expire(now);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].status, status_eio);
	EXPECT_EQ(q.queued(), 0u);
}

TEST_F(Queue, CancelFailsWhatIsQueuedAndOutstanding)
{
	start(config(2, 2));
	for (u32 t = 0; t < 4; t++)
		add_write(t, 1024 * t);
	auto d = send();
	ASSERT_EQ(d.size(), 2u);
	q.cancel(3, status_eio);	/* still queued */
	q.cancel_all(status_eio);
	EXPECT_EQ(done.size(), 4u);
	for (auto &x : done)
		EXPECT_EQ(x.status, status_eio);
	EXPECT_EQ(q.outstanding() + q.queued(), 0u);
	EXPECT_EQ(reply(d[0]), host_answer::stray);
	/* every datagram is free again */
	for (u32 t = 0; t < 256; t++)
		for (u32 k = 0; k < 8; k++)
			ASSERT_TRUE(q.add(t, op_write, 0, 1024, 0, 0, now));
	EXPECT_FALSE(q.add(0, op_write, 0, 1024, 0, 0, now));
}

/*
 * A network that drops, duplicates and delays (so reorders) datagrams both
 * ways between the queue and an instance that executes what changes the
 * disk through a replay window, as the module does.  Every request
 * completes once, every WRITE is executed once, and no number ever falls
 * out of the instance's window.
 */
TEST_F(Queue, ThroughALossyNetworkEveryWriteIsExecutedOnceAndEveryRequestCompletes)
{
	host_config c = config(128, 32);
	start(c);
	std::mt19937_64 rng(42);
	std::uniform_real_distribution<double> u(0, 1);
	replay_window window;
	window.reset();
	std::map<u64, u32> executed;	/* device offset -> times */
	struct in_flight {
		u64 at;
		bool to_server;
		header h;
	};
	std::vector<in_flight> net;
	auto deliver_later = [&](bool to_server, const header &h) {
		if (u(rng) < 0.1)
			return;	/* dropped */
		int copies = u(rng) < 0.05 ? 2 : 1;
		for (int k = 0; k < copies; k++)
			net.push_back({now + 500000 + (u64)(u(rng) * 3 * ms), to_server, h});
	};

	u32 total = 0;
	const u32 requests = 3000;
	u64 stale = 0, too_far = 0, datagrams = 0;
	size_t seen_done = 0;
	std::vector<u32> free_tags;
	for (u32 t = 0; t < c.requests; t++)
		free_tags.push_back(t);

	while (done.size() < requests && now < 3600 * sec) {
		/* new requests of 1 to 4 datagrams while there are tags */
		while (total < requests && !free_tags.empty() && q.queued() < 256) {
			u32 tag = free_tags.back();
			free_tags.pop_back();
			u32 n = 1 + rng() % 4;
			for (u32 k = 0; k < n; k++)
				ASSERT_TRUE(q.add(tag, op_write, (u64)total * 4096 + 1024 * k, 1024, 0,
						  1024 * k, now));
			datagrams += n;
			total++;
		}
		for (auto &d : send()) {
			header h{};
			h.op = d.op;
			h.seq = d.seq;
			h.offset = d.offset;
			h.length = d.length;
			ASSERT_LE(q.outstanding(), c.slots);
			deliver_later(true, h);
		}
		/* the network moves on to the next event */
		u64 next = q.expire(now);
		for (auto &f : net)
			if (!next || f.at < next)
				next = f.at;
		ASSERT_NE(next, 0u) << "nothing to wait for with " << done.size() << " done";
		now = std::max(now, next);
		std::vector<in_flight> due, later;
		for (auto &f : net)
			(f.at <= now ? due : later).push_back(f);
		net.swap(later);
		std::shuffle(due.begin(), due.end(), rng);
		for (auto &f : due) {
			if (!f.to_server) {
				q.answer(f.h, 0, nullptr, now);
				continue;
			}
			u16 status = 0;
			header r = f.h;
			r.op |= op_reply_bit;
			u32 check = request_check(f.h.op, f.h.flags, f.h.offset, f.h.length);
			switch (window.look(f.h.seq, check, &status)) {
			case replay_window::state::fresh:
				window.start(f.h.seq, check);
				executed[f.h.offset]++;
				window.finish(f.h.seq, 0);
				r.status = 0;
				break;
			case replay_window::state::done:
				r.status = status;
				break;
			case replay_window::state::in_flight:
				continue;
			case replay_window::state::stale:
				stale++;
				continue;
			case replay_window::state::too_far:
				too_far++;
				continue;
			case replay_window::state::other:
				ADD_FAILURE() << "seq " << f.h.seq << " sent for two requests";
				continue;
			}
			deliver_later(false, r);
		}
		q.expire(now);
		/* tags of completed requests are free again */
		while (seen_done < done.size()) {
			const completion &x = done[seen_done++];
			EXPECT_EQ(x.status, status_ok);
			free_tags.push_back(x.tag);
		}
	}
	EXPECT_EQ(done.size(), requests);
	EXPECT_EQ(stale, 0u);
	EXPECT_EQ(too_far, 0u);
	for (auto &e : executed)
		EXPECT_EQ(e.second, 1u) << "offset " << e.first;
	EXPECT_EQ(executed.size(), datagrams);
	EXPECT_GT(q.counters().timeouts + q.counters().fast_resends, 100u);
	EXPECT_EQ(q.outstanding() + q.queued(), 0u);
	/* the round trip is 1 to 7 ms (two ways of 0.5 to 3.5): so is SRTT */
	EXPECT_GT(q.rto().srtt_ns(), 1 * ms);
	EXPECT_LT(q.rto().srtt_ns(), 7 * ms);
}

} /* namespace */
