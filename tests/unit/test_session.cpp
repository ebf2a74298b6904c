// SPDX-License-Identifier: GPL-2.0
/*
 * Protocol v2's sessions: the replay window (reorder, duplicates, wrap,
 * far-ahead and stale numbers), cookies and their rotation, the session
 * table's eviction under a flood of HELLOs.
 */
#include <gtest/gtest.h>
#include <mutex>

#include "session.h"

using nb::replay_window;
using nb::session;
using nb::session_table;
using nb::u16;
using nb::u32;
using nb::u64;

using st = replay_window::state;

constexpr u64 sec = 1000000000ull;

class Window : public ::testing::Test {
protected:
	void SetUp() override { w.reset(); }
	st look(u64 seq)
	{
		status = 0xffff;
		return w.look(seq, check, &status);
	}
	replay_window w;
	static constexpr u32 check = 0x5eed;	/* what every request here asks */
	u16 status = 0;
};

TEST_F(Window, AnsweredOnceThenItsDuplicatesGetTheSameStatus)
{
	EXPECT_EQ(look(1), st::fresh);
	w.start(1, check);
	EXPECT_EQ(look(1), st::in_flight);
	w.finish(1, 5);
	EXPECT_EQ(look(1), st::done);
	EXPECT_EQ(status, 5) << "the duplicate is answered as the original was (EIO)";
	w.start(2, check);
	w.finish(2, 0);
	EXPECT_EQ(look(2), st::done);
	EXPECT_EQ(status, 0);
}

TEST_F(Window, ZeroIsNeverASequenceNumber)
{
	EXPECT_EQ(look(0), st::stale);
}

TEST_F(Window, ReorderedWithinTheWindowIsExecutedOnce)
{
	w.start(10, check);
	EXPECT_EQ(look(3), st::fresh) << "below the top, never seen";
	w.start(3, check);
	w.finish(3, 0);
	EXPECT_EQ(look(3), st::done);
	EXPECT_EQ(look(9), st::fresh);
	EXPECT_EQ(w.top(), 10u) << "an older number does not move the window";
}

TEST_F(Window, OlderThanTheWindowIsStale)
{
	w.start(1, check);
	w.finish(1, 0);
	w.start(1 + replay_window::size - 1, check);
	EXPECT_EQ(look(1), st::done) << "the oldest still inside";
	w.start(1 + replay_window::size, check);
	EXPECT_EQ(look(1), st::stale) << "one more, and it is out: refused, never run again";
	EXPECT_EQ(look(2), st::fresh);
}

TEST_F(Window, MovingUpForgetsWhatItPasses)
{
	/* every entry used once around the ring, then the window moves on */
	for (u64 s = 1; s <= replay_window::size; s++) {
		w.start(s, check);
		w.finish(s, 0);
	}
	w.start(replay_window::size + 500, check);
	for (u64 s = replay_window::size + 1; s < replay_window::size + 500; s++)
		ASSERT_EQ(look(s), st::fresh) << s << " was never seen: its entry was an old one";
	for (u64 s = 501; s <= replay_window::size; s++)
		ASSERT_EQ(look(s), st::done) << s;
	EXPECT_EQ(look(500), st::stale);
}

TEST_F(Window, FarAheadIsRefusedAndMovesNothing)
{
	w.start(5, check);
	EXPECT_EQ(look(5 + replay_window::size), st::fresh) << "as far as the window reaches";
	EXPECT_EQ(look(6 + replay_window::size), st::too_far);
	EXPECT_EQ(look(~0ull), st::too_far);
	EXPECT_EQ(w.top(), 5u);
	EXPECT_EQ(look(5), st::in_flight);
}

TEST_F(Window, AJumpOfAWholeWindowClearsEverything)
{
	for (u64 s = 1; s <= 100; s++) {
		w.start(s, check);
		w.finish(s, 0);
	}
	w.start(100 + replay_window::size, check);
	for (u64 s = 101; s < 100 + replay_window::size; s++)
		ASSERT_EQ(look(s), st::fresh) << s;
	EXPECT_EQ(look(100), st::stale);
}

TEST_F(Window, ACompletionThatFellOutOfTheWindowTouchesNoNewEntry)
{
	w.start(1, check);	/* at the disk while the window moves a whole size on */
	w.start(1 + replay_window::size, check);
	w.finish(1, 5);
	EXPECT_EQ(look(1 + replay_window::size), st::in_flight)
		<< "the old request's status must not land on the new one's entry";
	EXPECT_EQ(look(1), st::stale);
}

TEST_F(Window, ForgottenIsFreshAgain)
{
	w.start(7, check);
	w.forget(7);
	EXPECT_EQ(look(7), st::fresh);
}

TEST_F(Window, WrapsAroundTheRingManyTimes)
{
	for (u64 s = 1; s < 20 * replay_window::size; s++) {
		ASSERT_EQ(look(s), st::fresh) << s;
		w.start(s, check);
		w.finish(s, (u16)(s & 1));
		ASSERT_EQ(look(s), st::done);
		ASSERT_EQ(status, s & 1);
	}
}

/* ---- cookies ---- */

static nb::siphash_key secret(u64 k)
{
	return nb::siphash_key{k, ~k};
}

class Table : public ::testing::Test {
protected:
	void TearDown() override { t.destroy(); }
	void init(u32 capacity, u32 per_source = 0)
	{
		ASSERT_EQ(t.init(capacity, per_source, secret(42)), 0);
	}
	session_table t;
};

constexpr u32 ip_a = 0x0a000002, ip_b = 0x0a000003;
constexpr u64 epoch_ns = 1ull << session_table::cookie_epoch_shift;

TEST_F(Table, CookieIsBoundToAddressPortAndNonce)
{
	init(4);
	u64 now = 1000 * sec;
	u64 c = t.cookie(ip_a, 7000, 99, now);

	EXPECT_TRUE(t.cookie_valid(ip_a, 7000, 99, c, now));
	EXPECT_FALSE(t.cookie_valid(ip_b, 7000, 99, c, now)) << "another address";
	EXPECT_FALSE(t.cookie_valid(ip_a, 7001, 99, c, now)) << "another port";
	EXPECT_FALSE(t.cookie_valid(ip_a, 7000, 98, c, now)) << "another nonce";
	EXPECT_FALSE(t.cookie_valid(ip_a, 7000, 99, c ^ 1, now));

	session_table other;
	ASSERT_EQ(other.init(4, 0, secret(43)), 0);
	EXPECT_FALSE(other.cookie_valid(ip_a, 7000, 99, c, now))
		<< "an instance started again has a new secret: old cookies are void";
	other.destroy();
}

TEST_F(Table, CookiesRotate)
{
	init(4);
	u64 start = 10 * epoch_ns;	/* the beginning of an epoch */
	u64 c = t.cookie(ip_a, 7000, 1, start);

	EXPECT_TRUE(t.cookie_valid(ip_a, 7000, 1, c, start + epoch_ns - 1));
	EXPECT_TRUE(t.cookie_valid(ip_a, 7000, 1, c, start + 2 * epoch_ns - 1))
		<< "still good in the next epoch";
	EXPECT_FALSE(t.cookie_valid(ip_a, 7000, 1, c, start + 2 * epoch_ns))
		<< "two epochs on, gone";
	EXPECT_NE(t.cookie(ip_a, 7000, 1, start + epoch_ns), c) << "each epoch its own";
}

/* ---- the table ---- */

TEST_F(Table, OpenFindAndTheSameHelloAgain)
{
	init(4);
	u32 id;
	u64 token;

	ASSERT_EQ(t.open(ip_a, 7000, 5, sec, &id, &token), session_table::open_result::opened);
	EXPECT_NE(id, 0u);
	EXPECT_NE(token, 0u);
	EXPECT_TRUE(t.matches(id, token, ip_a, 7000));
	EXPECT_NE(t.find(id, token, ip_a, 7000), nullptr);
	EXPECT_EQ(t.find(id, token ^ 1, ip_a, 7000), nullptr) << "a guessed token";
	EXPECT_EQ(t.find(id, token, ip_b, 7000), nullptr) << "another address";
	EXPECT_EQ(t.find(id, token, ip_a, 7001), nullptr) << "another port";
	EXPECT_FALSE(t.matches(0, token, ip_a, 7000));
	EXPECT_FALSE(t.matches(5, token, ip_a, 7000)) << "beyond the table";

	u32 id2;
	u64 token2;
	EXPECT_EQ(t.open(ip_a, 7000, 5, 2 * sec, &id2, &token2), session_table::open_result::again);
	EXPECT_EQ(id2, id);
	EXPECT_EQ(token2, token);
	EXPECT_EQ(t.open_count(), 1u);

	EXPECT_EQ(t.open(ip_a, 7000, 6, 2 * sec, &id2, &token2), session_table::open_result::opened)
		<< "a client that started again (new nonce) gets a new session";
	EXPECT_NE(token2, token);
	EXPECT_EQ(t.open_count(), 2u);
}

TEST_F(Table, ANewSessionInTheSameEntryNeverTakesTheOldOnesDatagrams)
{
	init(1);
	u32 id, id2;
	u64 token, token2;

	ASSERT_EQ(t.open(ip_a, 7000, 1, 0, &id, &token), session_table::open_result::opened);
	t.find(id, token, ip_a, 7000)->window.start(1, 0);
	t.find(id, token, ip_a, 7000)->window.finish(1, 0);
	/* the same client, same port, after a restart and long enough idle */
	ASSERT_EQ(t.open(ip_a, 7000, 2, 2 * session_table::idle_evict_ns, &id2, &token2),
		  session_table::open_result::opened);
	EXPECT_EQ(id2, id) << "the one entry";
	EXPECT_NE(token2, token);
	EXPECT_EQ(t.find(id, token, ip_a, 7000), nullptr) << "the old session's datagrams find nothing";
	u16 status;
	EXPECT_EQ(t.find(id2, token2, ip_a, 7000)->window.look(1, 0, &status),
		  replay_window::state::fresh) << "a new session starts with a new window";
	EXPECT_EQ(t.counters().evicted, 1u);
}

TEST_F(Table, AFloodOfHellosPushesOutNoActiveSession)
{
	init(64);
	u32 id;
	u64 token, now = 100 * sec;

	ASSERT_EQ(t.open(ip_a, 7000, 1, now, &id, &token), session_table::open_result::opened);
	session *victim = t.find(id, token, ip_a, 7000);

	/* HELLOs with valid cookies from many addresses (a flood from real hosts) */
	u32 refused = 0;
	for (u32 i = 0; i < 10000; i++) {
		u32 idx;
		u64 tok;

		now += sec / 1000;
		victim->last_used_ns = now;	/* the client keeps using its session */
		if (t.open(0x0b000000 + i, 9000, i, now, &idx, &tok) == session_table::open_result::full)
			refused++;
	}
	EXPECT_EQ(t.find(id, token, ip_a, 7000), victim) << "the active client is still served";
	EXPECT_EQ(t.open_count(), 64u) << "bounded";
	EXPECT_EQ(refused, 10000u - 63u) << "once full, nothing active is evicted";
	EXPECT_EQ(t.counters().refused, refused);
	EXPECT_EQ(t.counters().evicted, 0u);
}

TEST_F(Table, IdleSessionsMakeRoom)
{
	init(2);
	u32 id_a, id_b, id_c;
	u64 tok_a, tok_b, tok_c;

	t.open(ip_a, 1, 1, 0, &id_a, &tok_a);
	t.open(ip_b, 1, 1, 10 * sec, &id_b, &tok_b);
	EXPECT_EQ(t.open(0x0a000009, 1, 1, 30 * sec, &id_c, &tok_c), session_table::open_result::full)
		<< "nobody idle a minute yet";
	ASSERT_EQ(t.open(0x0a000009, 1, 1, session_table::idle_evict_ns + 5 * sec, &id_c, &tok_c),
		  session_table::open_result::opened);
	EXPECT_EQ(id_c, id_a) << "the idlest made room";
	EXPECT_EQ(t.find(id_a, tok_a, ip_a, 1), nullptr);
	EXPECT_NE(t.find(id_b, tok_b, ip_b, 1), nullptr);
}

TEST_F(Table, ASessionWithRequestsAtTheDiskIsNeverEvicted)
{
	init(1);
	u32 id, id2;
	u64 token, token2;

	t.open(ip_a, 1, 1, 0, &id, &token);
	t.find(id, token, ip_a, 1)->in_flight = 1;
	EXPECT_EQ(t.open(ip_b, 1, 1, 10 * session_table::idle_evict_ns, &id2, &token2),
		  session_table::open_result::full);
	EXPECT_NE(t.find(id, token, ip_a, 1), nullptr);
}

/*
 * One address holds at most its share: a flood of HELLOs from it (or a
 * client restarting in a loop) gets EUSERS once it holds per_source()
 * sessions in use, and pushes out none of them -- those are clients behind
 * one NAT address as much as a flood -- nor any other address's.  Its own
 * sessions idle a minute make room for it.
 */
TEST_F(Table, OneAddressCannotHoldMoreThanItsShareNorPushOutItsOwnActiveOnes)
{
	init(64);
	u32 id, first_id;
	u64 token, first_token, now = 1;

	ASSERT_EQ(t.per_source(), session_table::per_source_default);
	t.open(ip_a, 1000, 0, now, &first_id, &first_token);
	u32 refused = 0;
	for (u32 i = 1; i < 100; i++) {
		now += sec / 10;
		if (t.open(ip_a, (nb::u16)(1000 + i), i, now, &id, &token) ==
		    session_table::open_result::full)
			refused++;
	}
	EXPECT_EQ(t.open_count(), session_table::per_source_default);
	EXPECT_EQ(refused, 100u - session_table::per_source_default);
	EXPECT_EQ(t.counters().evicted, 0u) << "none of its sessions in use pushed out";
	EXPECT_NE(t.find(first_id, first_token, ip_a, 1000), nullptr);
	ASSERT_EQ(t.open(ip_b, 1, 1, now, &id, &token), session_table::open_result::opened)
		<< "and every other address still finds room";

	now += session_table::idle_evict_ns;
	t.find(id, token, ip_b, 1)->last_used_ns = now;
	ASSERT_EQ(t.open(ip_a, 2000, 2000, now, &id, &token), session_table::open_result::opened)
		<< "once idle a minute, its own make room for it";
	EXPECT_EQ(t.find(first_id, first_token, ip_a, 1000), nullptr) << "its idlest";
	EXPECT_EQ(t.open_count(), session_table::per_source_default + 1);
}

/* 20 clients behind one address, with per-source=32: all served, none pushed out. */
TEST_F(Table, ClientsBehindOneAddressAllGetSessionsUpToItsSetting)
{
	init(64, 32);
	u32 id[20];
	u64 token[20], now = 1;

	for (u32 i = 0; i < 20; i++)
		ASSERT_EQ(t.open(ip_a, (nb::u16)(40000 + i), i + 1, now, &id[i], &token[i]),
			  session_table::open_result::opened);
	for (u32 round = 0; round < 10; round++) {
		now += sec;
		for (u32 i = 0; i < 20; i++) {
			session *s = t.find(id[i], token[i], ip_a, (nb::u16)(40000 + i));

			ASSERT_NE(s, nullptr) << "client " << i << " lost its session";
			s->last_used_ns = now;
		}
	}
	EXPECT_EQ(t.counters().evicted, 0u);
	EXPECT_EQ(t.per_source(), 32u);
}

/* ---- an instance's queues' tables together ---- */

/* Two queues' tables in one group, as an instance of queues=2 has them. */
class SessionGroup : public ::testing::Test {
protected:
	void init(u32 capacity, u32 per_source)
	{
		ASSERT_EQ(group.init(2, &lock), 0);
		ASSERT_EQ(q0.init(capacity, per_source, secret(42), 0, 2, &group), 0);
		ASSERT_EQ(q1.init(capacity, per_source, secret(42), 1, 2, &group), 0);
	}
	void TearDown() override
	{
		q1.destroy();
		q0.destroy();
		group.destroy();
	}
	std::mutex lock;
	nb::session_group group;
	session_table q0, q1;
};

/*
 * Two queues' tables in one group: an address's HELLOs land on both (RSS
 * spreads its ports), and it holds per-source sessions in use in all, not
 * in each -- two queues that each counted their own let it hold twice as
 * many, and an instance of 64 queues all its sessions.  Other addresses
 * still find room.
 */
TEST_F(SessionGroup, AnAddressHoldsItsShareOverAllTheQueuesNotInEach)
{
	u32 id;
	u64 token, now = 1;

	init(16, 4);
	u32 opened = 0, refused = 0;
	for (u32 i = 0; i < 20; i++) {
		session_table &t = i % 2 ? q1 : q0;

		if (t.open(ip_a, (nb::u16)(1000 + i), i + 1, now, &id, &token) ==
		    session_table::open_result::full)
			refused++;
		else
			opened++;
	}
	EXPECT_EQ(opened, 4u);
	EXPECT_EQ(refused, 16u);
	EXPECT_EQ(q0.open_count(), 2u);
	EXPECT_EQ(q1.open_count(), 2u);
	EXPECT_EQ(group.in_use_by(ip_a, now, nullptr), 4u);
	EXPECT_EQ(group.in_use_by(ip_a, now, &q0), 2u) << "q1's alone";
	ASSERT_EQ(q1.open(ip_b, 1, 1, now, &id, &token), session_table::open_result::opened)
		<< "another address still finds room";
	EXPECT_EQ(group.in_use_by(ip_b, now, nullptr), 1u);

	q1.destroy();
	EXPECT_EQ(group.in_use_by(ip_a, now, nullptr), 2u) << "a table gone is counted no more";
}

/*
 * A client that restarted (its four sessions idle a minute, two on each
 * queue) and whose new ports all land on queue 1: its idle sessions on
 * queue 0, which only queue 0 can close, do not count against it -- it
 * gets its four again (two of them in place of its idle ones on queue 1),
 * and no fifth.  Counting them refused it after two, until a HELLO
 * happened to land on queue 0.
 */
TEST_F(SessionGroup, AnAddressesIdleSessionsOnAnotherQueueDoNotHoldItBack)
{
	u32 id;
	u64 token, now = 1;

	init(16, 4);
	for (u32 i = 0; i < 4; i++)
		ASSERT_EQ((i % 2 ? q1 : q0).open(ip_a, (nb::u16)(1000 + i), i + 1, now, &id, &token),
			  session_table::open_result::opened);

	now += session_table::idle_evict_ns + 1;
	EXPECT_EQ(group.in_use_by(ip_a, now, nullptr), 0u);
	for (u32 i = 0; i < 4; i++)
		EXPECT_EQ(q1.open(ip_a, (nb::u16)(2000 + i), 100 + i, now, &id, &token),
			  session_table::open_result::opened) << "HELLO " << i;
	EXPECT_EQ(q1.open(ip_a, 2004, 104, now, &id, &token), session_table::open_result::full)
		<< "four in use: no fifth";
	EXPECT_EQ(q1.counters().evicted, 2u) << "its two idle ones on queue 1 made room";
	EXPECT_EQ(group.in_use_by(ip_a, now, nullptr), 4u);
}

/*
 * The same HELLO again (its answer was lost) that comes to another queue
 * since -- the NIC's RSS table changed -- gets the session it opened, not a
 * second one that would stay until evicted and count against its address.
 */
TEST_F(SessionGroup, TheSameHelloOnAnotherQueueGetsTheSessionItOpened)
{
	u32 id, id2;
	u64 token, token2;

	init(8, 0);
	ASSERT_EQ(q0.open(ip_a, 5000, 77, 1, &id, &token), session_table::open_result::opened);
	ASSERT_EQ(q1.open(ip_a, 5000, 77, 2, &id2, &token2), session_table::open_result::again);
	EXPECT_EQ(id2, id);
	EXPECT_EQ(token2, token);
	EXPECT_EQ(session_table::queue_of(id2, 2), 0u) << "still queue 0's";
	EXPECT_EQ(q0.open_count() + q1.open_count(), 1u);
	EXPECT_EQ(q1.open(ip_a, 5000, 78, 2, &id2, &token2), session_table::open_result::opened)
		<< "another nonce is another HELLO";
	EXPECT_EQ(session_table::queue_of(id2, 2), 1u);
}

/* Without a group (a table of its own), the count is the table's: as before. */
TEST_F(SessionGroup, ATableAloneCountsItsOwn)
{
	session_table a, b;
	u32 id;
	u64 token;

	ASSERT_EQ(a.init(8, 2, secret(1), 0, 2), 0);
	ASSERT_EQ(b.init(8, 2, secret(1), 1, 2), 0);
	for (u32 i = 0; i < 3; i++) {
		a.open(ip_a, (nb::u16)(10 + i), i + 1, 1, &id, &token);
		b.open(ip_a, (nb::u16)(20 + i), i + 1, 1, &id, &token);
	}
	EXPECT_EQ(a.open_count(), 2u);
	EXPECT_EQ(b.open_count(), 2u);
	EXPECT_EQ(a.in_use_by(ip_a, 1), 2u);
	a.destroy();
	b.destroy();
}
