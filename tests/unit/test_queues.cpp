// SPDX-License-Identifier: GPL-2.0
/*
 * An instance of several queues: each queue's core has its own slots and
 * session table; a session belongs to the queue that opened it for its
 * life, its id says which, and a datagram of it that arrives on another
 * queue's CPU is taken to its own queue (netblk_core_queue_of), counted.
 */
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "engine.h"
#include "fake_target.h"
#include "frames.h"
#include "session.h"

using namespace test;

namespace {

constexpr uint64_t disk_size = 1 << 20;
const uint8_t secret[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

/* Queue @queue of 2, sharing the instance's secret, with no session open. */
netblk_queue *start_queue(uint32_t queue, netblk_session_group *group = nullptr)
{
	fake_options o;

	o.queue = queue;
	o.queues = 2;
	o.group = group;
	o.secret = secret;
	o.open_session = false;
	return fake_start(disk_size, o);
}

/* The queue @core says @frame is for, as the receive path asks on @cpu. */
uint32_t queue_of(netblk_queue *inst, uint32_t cpu, const std::vector<u8> &frame)
{
	return netblk_core_queue_of(inst->core, cpu, frame.data(), (uint32_t)frame.size());
}

/* The first of HELLO's two datagrams to @inst: the cookie it answers. */
u64 cookie_from(netblk_queue *inst, u64 nonce)
{
	std::vector<u8> f = to_server(hello_request(nonce));
	uint32_t len = (uint32_t)f.size();

	EXPECT_EQ(netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, 1000),
		  NETBLK_RX_REPLY);
	f.resize(len);
	return reply_header(f).token;
}

TEST(SessionQueues, EachQueueHandsOutIdsThatNameIt)
{
	nb::siphash_key key = nb::siphash_key_from_bytes(secret);
	nb::session_table tables[3];
	std::set<u32> ids;
	std::set<u64> tokens;

	for (u32 q = 0; q < 3; q++)
		ASSERT_EQ(tables[q].init(4, 4, key, q, 3), 0);
	for (u32 q = 0; q < 3; q++) {
		for (u32 i = 0; i < 4; i++) {
			u32 id;
			u64 token;

			/* the same client and nonce at every queue: ids and tokens still differ */
			ASSERT_EQ(tables[q].open(client_ip, (u16)(4000 + i), 7, 1000, &id, &token),
				  nb::session_table::open_result::opened);
			EXPECT_EQ(nb::session_table::queue_of(id, 3), q) << id;
			EXPECT_TRUE(ids.insert(id).second) << id;
			EXPECT_TRUE(tokens.insert(token).second) << token;
			EXPECT_NE(tables[q].find(id, token, client_ip, (u16)(4000 + i)), nullptr);
			/* no other queue's table knows it */
			for (u32 other = 0; other < 3; other++)
				if (other != q) {
					EXPECT_FALSE(tables[other].matches(id, token, client_ip,
									   (u16)(4000 + i)));
					EXPECT_EQ(tables[other].find(id, token, client_ip,
								     (u16)(4000 + i)), nullptr);
				}
		}
	}
	/* 12 sessions, ids 1..12: the queues' tables tile the id space */
	EXPECT_EQ(*ids.begin(), 1u);
	EXPECT_EQ(*ids.rbegin(), 12u);
	for (auto &t : tables)
		t.destroy();
}

TEST(SessionQueues, AQueueOutsideItsCountIsRefused)
{
	nb::session_table t;

	EXPECT_NE(t.init(4, 4, nb::siphash_key_from_bytes(secret), 2, 2), 0);
	EXPECT_NE(t.init(4, 4, nb::siphash_key_from_bytes(secret), 0, 0), 0);
}

struct queues : ::testing::Test {
	netblk_queue *q[2] = {};

	void SetUp() override
	{
		for (uint32_t i = 0; i < 2; i++) {
			q[i] = start_queue(i);
			ASSERT_NE(q[i], nullptr);
		}
	}
	void TearDown() override
	{
		for (auto *inst : q)
			if (inst)
				fake_stop(inst);
		test::session = client_session{};
	}
};

/*
 * A cookie one queue made opens a session at another (the instance's secret
 * is theirs alike): the session is the opening queue's, and a request of it
 * arriving on the other queue's CPU is taken to it and counted there.
 */
TEST_F(queues, ASessionIsServedByTheQueueThatOpenedIt)
{
	u64 cookie = cookie_from(q[0], 0x5e55);

	ASSERT_NE(cookie, 0u);
	std::vector<u8> f = to_server(hello_request(0x5e55, cookie));
	uint32_t len = (uint32_t)f.size();
	/* a HELLO is the queue's it arrives at */
	EXPECT_EQ(queue_of(q[1], 1, f), 1u);
	EXPECT_EQ(queue_of(q[0], 0, f), 0u);
	ASSERT_EQ(netblk_core_receive(q[1]->core, 1, f.data(), f.data(), &len, nullptr, 0, 1000),
		  NETBLK_RX_KEPT);
	netblk_core_submit(q[1]->core, 1000);
	while (netblk_core_reply(q[1]->core, 1000))
		;
	ASSERT_EQ(q[1]->sent.size(), 1u);
	nb::header opened = reply_header(q[1]->sent.back());
	ASSERT_EQ(opened.status, nb::status_ok);
	EXPECT_EQ(nb::session_table::queue_of(opened.session, 2), 1u);
	test::session.id = opened.session;
	test::session.token = opened.token;
	test::session.next_seq = 1;

	/* its WRITE arrives on queue 0's CPU: queue 1's, counted as steered on queue 0 */
	std::vector<u8> data(512, 0x3c);
	std::vector<u8> w = to_server(write_request(4096, data));
	EXPECT_EQ(queue_of(q[0], 0, w), 1u);
	EXPECT_EQ(queue_of(q[1], 1, w), 1u);
	netblk_stats s0{}, s1{};
	netblk_core_read_stats(q[0]->core, &s0);
	netblk_core_read_stats(q[1]->core, &s1);
	EXPECT_EQ(s0.steered, 1u);
	EXPECT_EQ(s1.steered, 0u);

	/* queue 1 serves it: the disk has the bytes, the answer is OK */
	len = (uint32_t)w.size();
	ASSERT_EQ(netblk_core_receive(q[1]->core, 0, w.data(), w.data(), &len, nullptr, 0, 2000),
		  NETBLK_RX_KEPT);
	netblk_core_submit(q[1]->core, 2000);
	while (netblk_core_reply(q[1]->core, 2000))
		;
	EXPECT_EQ(reply_header(q[1]->sent.back()).status, nb::status_ok);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), q[1]->disk.begin() + 4096));

	/* the other queue does not know the session: had it been given it, ENOTCONN */
	std::vector<u8> r = to_server(request(nb::op_read, 4096, 512));
	len = (uint32_t)r.size();
	ASSERT_EQ(netblk_core_receive(q[0]->core, 0, r.data(), r.data(), &len, nullptr, 0, 3000),
		  NETBLK_RX_REPLY);
	r.resize(len);
	EXPECT_EQ(reply_header(r).status, nb::status_enotconn);
}

/* The HELLO @nonce with @cookie to @inst on @cpu: its answer. */
nb::header hello_at(netblk_queue *inst, uint32_t cpu, u64 nonce, u64 cookie, u64 now)
{
	std::vector<u8> f = to_server(hello_request(nonce, cookie));
	uint32_t len = (uint32_t)f.size();

	EXPECT_EQ(netblk_core_receive(inst->core, cpu, f.data(), f.data(), &len, nullptr, 0, now),
		  NETBLK_RX_KEPT);
	netblk_core_submit(inst->core, now);
	while (netblk_core_reply(inst->core, now))
		;
	EXPECT_FALSE(inst->sent.empty());
	return reply_header(inst->sent.back());
}

/*
 * Two queues of one instance, their tables in a group: the same HELLO
 * again at the other queue (the RSS table moved the flow) is answered with
 * the session the first opened -- queue 0's, which the worker of queue 1
 * does not touch -- and the session serves from there.
 */
TEST(SessionQueuesGroup, TheSameHelloAtTheOtherQueueIsAnsweredWithItsSession)
{
	std::mutex lock;
	netblk_session_group *group = nullptr;

	ASSERT_EQ(netblk_core_group_create(2, &lock, &group), 0);
	netblk_queue *q0 = start_queue(0, group), *q1 = start_queue(1, group);
	u64 cookie = cookie_from(q0, 0x4e11);
	nb::header first = hello_at(q0, 0, 0x4e11, cookie, 1000);
	nb::header again = hello_at(q1, 1, 0x4e11, cookie, 2000);

	ASSERT_EQ(first.status, nb::status_ok);
	EXPECT_EQ(nb::session_table::queue_of(first.session, 2), 0u);
	EXPECT_EQ(again.status, nb::status_ok);
	EXPECT_EQ(again.session, first.session);
	EXPECT_EQ(again.token, first.token);
	netblk_stats s0{}, s1{};
	netblk_core_read_stats(q0->core, &s0);
	netblk_core_read_stats(q1->core, &s1);
	EXPECT_EQ(s0.sessions_open + s1.sessions_open, 1u);

	test::session.id = first.session;
	test::session.token = first.token;
	test::session.next_seq = 1;
	std::vector<u8> data(512, 0x7e);
	std::vector<u8> w = to_server(write_request(8192, data));
	uint32_t len = (uint32_t)w.size();
	EXPECT_EQ(queue_of(q1, 1, w), 0u) << "its datagrams go to queue 0";
	ASSERT_EQ(netblk_core_receive(q0->core, 1, w.data(), w.data(), &len, nullptr, 0, 3000),
		  NETBLK_RX_KEPT);
	netblk_core_submit(q0->core, 3000);
	while (netblk_core_reply(q0->core, 3000))
		;
	EXPECT_EQ(reply_header(q0->sent.back()).status, nb::status_ok);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), q0->disk.begin() + 8192));
	fake_stop(q1);
	fake_stop(q0);
	netblk_core_group_destroy(group);
	test::session = client_session{};
}

/* Each queue has slots of its own: one queue full leaves the other serving. */
TEST_F(queues, EachQueueHasItsOwnSlots)
{
	ASSERT_TRUE(fake_open_session(q[0], 1000, 0x1111));
	client_session s0 = test::session;
	ASSERT_TRUE(fake_open_session(q[1], 1000, 0x2222));
	client_session s1 = test::session;

	q[0]->complete_at_once = false;
	fake_frames held;
	test::session = s0;
	for (uint32_t i = 0; i < NETBLK_SLOTS; i++) {
		held.push_back(std::make_unique<std::vector<u8>>(
			to_server(write_request(512ull * i, std::vector<u8>(512, 1)))));
		std::vector<u8> &f = *held.back();
		uint32_t len = (uint32_t)f.size();
		ASSERT_EQ(netblk_core_receive(q[0]->core, 0, f.data(), f.data(), &len, nullptr, 0,
					      2000), NETBLK_RX_KEPT) << i;
	}
	EXPECT_EQ(q[0]->free_slots_left(), 0u);
	/* queue 0 has no slot left: EAGAIN there */
	std::vector<u8> more = to_server(request(nb::op_read, 0, 512));
	uint32_t len = (uint32_t)more.size();
	ASSERT_EQ(netblk_core_receive(q[0]->core, 0, more.data(), more.data(), &len, nullptr, 0,
				      2000), NETBLK_RX_REPLY);
	more.resize(len);
	EXPECT_EQ(reply_header(more).status, nb::status_eagain);

	/* queue 1 has all of its own */
	test::session = s1;
	EXPECT_EQ(q[1]->free_slots_left(), (uint32_t)NETBLK_SLOTS);
	std::vector<u8> r = to_server(request(nb::op_read, 0, 512));
	len = (uint32_t)r.size();
	EXPECT_EQ(netblk_core_receive(q[1]->core, 1, r.data(), r.data(), &len, nullptr, 0, 2000),
		  NETBLK_RX_FREE);
	netblk_core_submit(q[1]->core, 2000);
	while (netblk_core_reply(q[1]->core, 2000))
		;
	EXPECT_EQ(reply_header(q[1]->sent.back()).status, nb::status_ok);

	/* queue 0 drains its own when its disk answers */
	netblk_core_submit(q[0]->core, 3000);
	q[0]->finish_ios();
	while (netblk_core_reply(q[0]->core, 3000))
		;
	EXPECT_EQ(q[0]->free_slots_left(), (uint32_t)NETBLK_SLOTS);
}

/* INFO says how many queues the instance has, each with the slots it says. */
TEST_F(queues, InfoTellsTheQueues)
{
	ASSERT_TRUE(fake_open_session(q[1], 1000, 0x3333));
	std::vector<u8> f = to_server(request(nb::op_info, 0, 0));
	uint32_t len = (uint32_t)f.size();
	netblk_core_receive(q[1]->core, 1, f.data(), f.data(), &len, nullptr, 0, 2000);
	netblk_core_submit(q[1]->core, 2000);
	while (netblk_core_reply(q[1]->core, 2000))
		;
	ASSERT_FALSE(q[1]->sent.empty());
	std::vector<u8> info = reply_data(q[1]->sent.back());
	ASSERT_EQ(info.size(), nb::info_payload_size);
	EXPECT_EQ(nb::load_be32(info.data() + 32), (u32)NETBLK_SLOTS);
	EXPECT_EQ(nb::load_be32(info.data() + 56), 2u);
}

/* With one queue nothing is read for steering, and nothing counted. */
TEST(SessionQueuesOne, OneQueueTakesEverything)
{
	netblk_queue *inst = fake_start(disk_size);

	ASSERT_NE(inst, nullptr);
	std::vector<u8> f = to_server(request(nb::op_read, 0, 512));
	EXPECT_EQ(queue_of(inst, 1, f), 0u);
	netblk_stats s{};
	netblk_core_read_stats(inst->core, &s);
	EXPECT_EQ(s.steered, 0u);
	fake_stop(inst);
}

} // namespace

/* list's counters are the queues' added, every field and both arrays. */
TEST(SessionQueuesStats, AnInstancesCountersAreItsQueuesAdded)
{
	netblk_stats sum = {}, a = {}, b = {};
	uint64_t v = 1;

#define SET(NAME, name, ...) a.name = v++; b.name = 1000 * v++;
	NETBLK_STATS(SET)
#undef SET
	for (uint32_t i = 0; i < NETBLK_DROP_REASONS; i++)
		a.dropped[i] = i + 1, b.dropped[i] = 100 * (i + 1);
	for (uint32_t i = 0; i < NETBLK_REFUSALS; i++)
		a.refused_by[i] = i + 7, b.refused_by[i] = 100 * (i + 7);
	netblk_stats_add(&sum, &a);
	netblk_stats_add(&sum, &b);
#define CHECK(NAME, name, ...) EXPECT_EQ(sum.name, a.name + b.name) << #name;
	NETBLK_STATS(CHECK)
#undef CHECK
	for (uint32_t i = 0; i < NETBLK_DROP_REASONS; i++)
		EXPECT_EQ(sum.dropped[i], 101 * (i + 1));
	for (uint32_t i = 0; i < NETBLK_REFUSALS; i++)
		EXPECT_EQ(sum.refused_by[i], 101 * (i + 7));
}
