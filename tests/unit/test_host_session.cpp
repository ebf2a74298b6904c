// SPDX-License-Identifier: GPL-2.0
/*
 * The client's side of a session (host_session): the HELLO exchange against
 * the instance's own session table, refusals, key mismatches, EAGAIN,
 * answers that are not to this HELLO, and a session opened again.
 */
#include <gtest/gtest.h>

#include "host_session.h"
#include "session.h"

using namespace nb;

namespace {

constexpr u64 ms = 1000000ull;
constexpr u32 ip = 0x0a000005;
constexpr u16 port = 40000;

using hs = host_session;

header reply_to(const header &req, u16 status = 0, u32 session = 0, u64 token = 0,
		u16 flags = 0)
{
	header r = req;
	r.op = op_hello | op_reply_bit;
	r.status = status;
	r.session = session;
	r.token = token;
	r.flags = flags;
	return r;
}

/* What the module does with a HELLO (engine.cpp), on its session table. */
header instance_answer(session_table &t, const header &req, u64 now)
{
	if (!req.token)
		return reply_to(req, 0, 0, t.cookie(ip, port, req.seq, now));
	if (!t.cookie_valid(ip, port, req.seq, req.token, now))
		return reply_to(req, 0, 0, t.cookie(ip, port, req.seq, now));
	u32 id = 0;
	u64 token = 0;
	if (t.open(ip, port, req.seq, now, &id, &token) == session_table::open_result::full)
		return reply_to(req, status_eusers);
	return reply_to(req, 0, id, token);
}

class HostSession : public ::testing::Test {
protected:
	void SetUp() override
	{
		siphash_key secret = siphash_key_from_bytes((const u8 *)"0123456789abcdef");
		ASSERT_EQ(table.init(4, 0, secret), 0);
		s.init(false, false);
	}
	void TearDown() override { table.destroy(); }

	session_table table;
	host_session s;
	u64 now = 1000 * ms;
};

TEST_F(HostSession, FoldedAnswersAreAskedForOnlyWhenOfferedAndOnOnlyWhenSaid)
{
	/* offered in the cookie's answer: asked for; said to be on: on */
	s.open(0x2222, now, 250 * ms);
	header h1 = s.hello();
	EXPECT_EQ(h1.flags, 0u) << "never in the first HELLO: an instance may not know it";
	ASSERT_EQ(s.answer(reply_to(h1, 0, 0, 0xc00c1e, flag_fold_answers), now),
		  hs::result::send_cookie);
	header h2 = s.hello();
	EXPECT_EQ(h2.flags, flag_fold_answers);
	ASSERT_EQ(s.answer(reply_to(h2, 0, 3, 0x70c, flag_fold_answers), now), hs::result::opened);
	EXPECT_TRUE(s.folds());
	s.lost();
	EXPECT_FALSE(s.folds());

	/* offered, not said to be on: off */
	s.open(0x3333, now, 250 * ms);
	ASSERT_EQ(s.answer(reply_to(s.hello(), 0, 0, 0xc00c1e, flag_fold_answers), now),
		  hs::result::send_cookie);
	ASSERT_EQ(s.answer(reply_to(s.hello(), 0, 4, 0x70d), now), hs::result::opened);
	EXPECT_FALSE(s.folds());

	/* not offered: not asked for, and off whatever the session's answer says */
	s.open(0x4444, now, 250 * ms);
	ASSERT_EQ(s.answer(reply_to(s.hello(), 0, 0, 0xc00c1e), now), hs::result::send_cookie);
	EXPECT_EQ(s.hello().flags, 0u);
	ASSERT_EQ(s.answer(reply_to(s.hello(), 0, 5, 0x70e, flag_fold_answers), now),
		  hs::result::opened);
	EXPECT_FALSE(s.folds());
}

TEST_F(HostSession, TwoHellosAgainstTheInstanceOpenASession)
{
	s.open(0x1234, now, 250 * ms);
	EXPECT_EQ(s.current(), hs::state::cookie_wanted);
	header h1 = s.hello();
	EXPECT_EQ(h1.op, op_hello);
	EXPECT_EQ(h1.session, 0u);
	EXPECT_EQ(h1.token, 0u);
	EXPECT_EQ(h1.seq, 0x1234u);

	EXPECT_EQ(s.answer(instance_answer(table, h1, now), now), hs::result::send_cookie);
	header h2 = s.hello();
	EXPECT_NE(h2.token, 0u);
	EXPECT_EQ(h2.seq, h1.seq);
	header opened = instance_answer(table, h2, now);
	EXPECT_EQ(s.answer(opened, now), hs::result::opened);
	EXPECT_TRUE(s.is_open());
	EXPECT_EQ(s.id(), opened.session);
	EXPECT_EQ(s.token(), opened.token);
	EXPECT_EQ(s.due_ns(), 0u);
	EXPECT_EQ(s.opened(), 1u);

	header data{};
	data.session = opened.session;
	data.token = opened.token;
	EXPECT_TRUE(s.owns(data));
	data.token ^= 1;
	EXPECT_FALSE(s.owns(data));

	/* the same answer again (duplicated by the network) changes nothing */
	EXPECT_EQ(s.answer(opened, now), hs::result::ignored);
}

TEST_F(HostSession, AnswersToAnotherNonceOrTheCookieAgainAreIgnored)
{
	s.open(77, now, 250 * ms);
	header h = s.hello();
	header other = h;
	other.seq = 78;
	EXPECT_EQ(s.answer(instance_answer(table, other, now), now), hs::result::ignored);
	header cookie = instance_answer(table, h, now);
	EXPECT_EQ(s.answer(cookie, now), hs::result::send_cookie);
	EXPECT_EQ(s.answer(cookie, now), hs::result::ignored);
	EXPECT_EQ(s.current(), hs::state::session_wanted);
}

TEST_F(HostSession, SilenceIsDueAtTheTimeoutAndEveryResendCounts)
{
	s.open(5, now, 250 * ms);
	EXPECT_EQ(s.due_ns(), now + 250 * ms);
	now += 250 * ms;
	s.resent(now, 500 * ms);
	EXPECT_EQ(s.due_ns(), now + 500 * ms);
	EXPECT_EQ(s.hellos(), 2u);
}

TEST_F(HostSession, EagainIsTriedAgainAfterADoublingBackOff)
{
	s.open(5, now, 250 * ms);
	header h = s.hello();
	EXPECT_EQ(s.answer(reply_to(h, status_eagain), now), hs::result::busy);
	EXPECT_EQ(s.due_ns(), now + ms / 2);
	EXPECT_EQ(s.answer(reply_to(h, status_eagain), now), hs::result::busy);
	EXPECT_EQ(s.due_ns(), now + ms);
	for (int i = 0; i < 20; i++)
		s.answer(reply_to(h, status_eagain), now);
	EXPECT_EQ(s.due_ns(), now + 50 * ms);
	EXPECT_EQ(s.current(), hs::state::cookie_wanted);
}

TEST_F(HostSession, ARefusalClosesItWithTheReason)
{
	s.open(5, now, 250 * ms);
	EXPECT_EQ(s.answer(reply_to(s.hello(), status_eusers), now), hs::result::refused);
	EXPECT_EQ(s.current(), hs::state::closed);
	EXPECT_EQ(s.refusal(), status_eusers);
	EXPECT_EQ(s.due_ns(), 0u);
}

TEST_F(HostSession, AKeyedInstanceRefusesAClientWithoutTheKeyAndSaysWhatItWants)
{
	s.open(5, now, 250 * ms);
	EXPECT_EQ(s.answer(reply_to(s.hello(), status_ekeyrejected, 0, 0,
				    flag_auth_key | flag_auth_data), now),
		  hs::result::refused);
	EXPECT_EQ(s.refusal(), status_ekeyrejected);
	EXPECT_TRUE(s.instance_keyed());
	EXPECT_TRUE(s.instance_auth_data());
}

TEST_F(HostSession, AKeyThatCoversOtherThanTheInstanceWantsIsRefusedAtTheCookie)
{
	host_session keyed;
	keyed.init(true, false);	/* auth=header */
	keyed.open(5, now, 250 * ms);
	header cookie = instance_answer(table, keyed.hello(), now);
	cookie.flags = flag_auth_key | flag_auth_data;	/* the instance: auth=full */
	EXPECT_EQ(keyed.answer(cookie, now), hs::result::refused);
	EXPECT_EQ(keyed.refusal(), status_ekeyrejected);

	keyed.open(6, now, 250 * ms);	/* keyed client, unkeyed instance */
	EXPECT_EQ(keyed.answer(instance_answer(table, keyed.hello(), now), now),
		  hs::result::refused);

	keyed.open(7, now, 250 * ms);
	cookie = instance_answer(table, keyed.hello(), now);
	cookie.flags = flag_auth_key;
	EXPECT_EQ(keyed.answer(cookie, now), hs::result::send_cookie);
}

TEST_F(HostSession, LostThenOpenedAgainGetsANewSessionAndOwnsNoAnswerOfTheOld)
{
	s.open(5, now, 250 * ms);
	s.answer(instance_answer(table, s.hello(), now), now);
	header first = instance_answer(table, s.hello(), now);
	ASSERT_EQ(s.answer(first, now), hs::result::opened);

	s.lost();
	EXPECT_FALSE(s.owns(first));
	/* the instance started again: a new secret, an empty table */
	table.destroy();
	ASSERT_EQ(table.init(4, 0, siphash_key_from_bytes((const u8 *)"fedcba9876543210")), 0);
	s.open(6, now, 250 * ms);
	EXPECT_EQ(s.answer(instance_answer(table, s.hello(), now), now), hs::result::send_cookie);
	header second = instance_answer(table, s.hello(), now);
	ASSERT_EQ(s.answer(second, now), hs::result::opened);
	EXPECT_EQ(s.opened(), 2u);
	EXPECT_FALSE(s.owns(first));
	EXPECT_TRUE(s.owns(second));
}

} /* namespace */
