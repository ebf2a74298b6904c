// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's core through its C face (host_api.h), as the
 * kernel side drives it: a fake attachment records what would be sent and
 * what completes, and the tests answer as an instance would -- a session
 * opened, INFO, requests split into datagrams, silence and a restart.
 */
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "host_api.h"
#include "protocol.h"

using namespace nb;

struct sent {
	header h;
	uint32_t tag, at, len;
};

struct netblk_host_queue {
	std::vector<sent> sends;
	std::vector<std::pair<uint32_t, uint16_t>> done;
	std::vector<uint8_t> read_into;	/* request 0's buffer */
	std::vector<uint64_t> resized;
	std::vector<netblk_host_change_reason> changed;
};

static void fake_send(struct netblk_host_queue *att, const uint8_t *bytes, uint32_t tag,
		      uint32_t at, uint32_t len)
{
	sent s;

	decode_header(bytes, header_size, &s.h);
	s.tag = tag;
	s.at = at;
	s.len = len;
	att->sends.push_back(s);
}

static void fake_read(struct netblk_host_queue *att, uint32_t tag, uint32_t at, void *frame,
		      uint32_t len)
{
	if (tag == 0 && at + len <= att->read_into.size())
		memcpy(att->read_into.data() + at, frame, len);
}

static void fake_complete(struct netblk_host_queue *att, uint32_t tag, uint16_t status)
{
	att->done.push_back({tag, status});
}

static void fake_resized(struct netblk_host_queue *att, uint64_t size_bytes)
{
	att->resized.push_back(size_bytes);
}

static void fake_changed(struct netblk_host_queue *att, enum netblk_host_change_reason reason)
{
	att->changed.push_back(reason);
}

static const netblk_host_core_ops fake_ops = {
	.send = fake_send,
	.read = fake_read,
	.complete = fake_complete,
	.resized = fake_resized,
	.changed = fake_changed,
};

namespace {

constexpr uint64_t ms = 1000000;
constexpr uint32_t depth = 4;
constexpr uint32_t info_tag = depth;
constexpr uint32_t session_id = 9;
constexpr uint64_t session_token = 0x1234;

class Host : public ::testing::Test {
protected:
	void SetUp() override { create(0); }
	void TearDown() override { netblk_host_core_destroy(core); }

	/* A core again, with timeout= @deadline_ns (0: none), keyed with @key (NULL: not). */
	void create(uint64_t deadline_ns, const uint8_t *key = nullptr)
	{
		netblk_host_config cfg = {};

		netblk_host_core_destroy(core);
		core = nullptr;
		cfg.requests = depth + 1;
		cfg.datagrams = depth * 64 + 1;
		cfg.deadline_ns = deadline_ns;
		cfg.seed = 7;
		cfg.ops = &fake_ops;
		cfg.queue = &att;
		auth = {};
		if (key) {
			cfg.keyed = 1;
			memcpy(cfg.key, key, sizeof(cfg.key));
			auth.keyed = true;
			auth.key = siphash_key_from_bytes(key);
		}
		ASSERT_EQ(netblk_host_core_create(&cfg, &core), 0);
	}

	/* Fire the timer when it asks, until @until_ns. */
	void run_timer_until(uint64_t until_ns)
	{
		for (uint64_t at = netblk_host_core_timer_ns(core, now); at && at <= until_ns;) {
			now = at;
			at = netblk_host_core_expire(core, now);
		}
		now = until_ns;
	}

	/* INFO of a 1 MiB (or @size) read-write instance, 1024 bytes a datagram, device @id. */
	static std::vector<uint8_t> info_bytes(uint64_t size = 1 << 20, uint64_t id = 0xd15c,
					       bool read_only = false)
	{
		geometry g = {};
		device_limits lim = {};
		std::vector<uint8_t> info(info_payload_size);

		EXPECT_TRUE(geometry_init(&g, size, 512, 1024 + header_size, 256, read_only,
					  true, true, lim));
		g.export_id = id;
		encode_info(info.data(), g);
		return info;
	}

	/*
	 * The instance was started again: it answers @req ENOTCONN, then the
	 * client's HELLOs (session 10, token 0x5678).  The next send is what the
	 * new session sends first.
	 */
	void restart(const header &req)
	{
		att.sends.clear();
		answer(req, status_enotconn);
		ASSERT_EQ(att.sends.size(), 1u);
		ASSERT_EQ(att.sends[0].h.op, op_hello);
		answer(att.sends[0].h, 0, nullptr, 0, 0, 0xc00c1e);
		answer(att.sends[1].h, 0, nullptr, 0, session_id + 1, 0x5678);
		att.sends.erase(att.sends.begin(), att.sends.begin() + 2);
	}

	/* The new session's answer to @req (restart()). */
	void answer_again(const header &req, const std::vector<uint8_t> &data = {})
	{
		answer(req, 0, data.data(), (uint32_t)data.size(), session_id + 1, 0x5678);
	}

	netblk_host_stats stats()
	{
		netblk_host_stats st;

		netblk_host_core_read_stats(core, &st);
		return st;
	}

	/* The instance's answer to @req, with @data after the header. */
	void answer(const header &req, uint16_t status = 0, const uint8_t *data = nullptr,
		    uint32_t len = 0, uint32_t session = session_id, uint64_t token = session_token)
	{
		header r = req;
		std::vector<uint8_t> bytes(header_size + len);

		r.op |= op_reply_bit;
		r.status = status;
		if (req.op == op_hello) {
			r.session = session;
			r.token = token;
			if (auth.keyed)
				r.flags = flag_auth_key;
		}
		encode_header(bytes.data(), r);
		if (len)
			memcpy(bytes.data() + header_size, data, len);
		if (tag_answers)
			seal(auth, bytes.data(), nullptr, 0);
		/* the kernel side hands the data's first byte as the frame to read from */
		netblk_host_core_receive(core, bytes.data(), (uint32_t)bytes.size(),
					 (uint32_t)bytes.size(), bytes.data() + header_size, now);
	}

	/* HELLO, cookie, session, INFO of a 1 MiB instance, 1024 bytes a datagram. */
	void open()
	{
		netblk_host_core_connect(core, info_tag, now);
		ASSERT_EQ(att.sends.size(), 1u);
		ASSERT_EQ(att.sends[0].h.op, op_hello);
		hello_sent = att.sends[0].h;
		answer(att.sends[0].h, 0, nullptr, 0, 0, 0xc00c1e);	/* the cookie */
		ASSERT_EQ(att.sends.size(), 2u);
		EXPECT_EQ(att.sends[1].h.token, 0xc00c1eu);
		answer(att.sends[1].h);
		ASSERT_EQ(att.sends.size(), 3u);
		const header info_req = att.sends[2].h;
		ASSERT_EQ(info_req.op, op_info);
		EXPECT_EQ(info_req.session, session_id);
		/* HELLOs are no request's: the kernel side must not drop them with request 0's datagrams */
		EXPECT_EQ(att.sends[0].tag, NETBLK_HOST_NO_TAG);
		EXPECT_EQ(att.sends[1].tag, NETBLK_HOST_NO_TAG);
		EXPECT_EQ(att.sends[2].tag, info_tag);

		std::vector<uint8_t> info = info_bytes();
		answer(info_req, 0, info.data(), (uint32_t)info.size());
		ASSERT_EQ(att.done.size(), 1u);
		EXPECT_EQ(att.done[0], std::make_pair(info_tag, (uint16_t)0));
		att.sends.clear();
		att.done.clear();
	}

	netblk_host_queue att;
	netblk_host_core *core = nullptr;
	uint64_t now = 1000 * ms;
	auth_config auth = {};		/* a keyed instance's: create() */
	header hello_sent = {};		/* the HELLO open() sent: its nonce */
	bool tag_answers = true;	/* answer() tags as a keyed instance does */
};

TEST_F(Host, OpensASessionAsksInfoAndKnowsTheInstance)
{
	open();
	netblk_host_info info;
	ASSERT_EQ(netblk_host_core_info(core, &info), 0);
	EXPECT_EQ(info.size_bytes, 1u << 20);
	EXPECT_EQ(info.max_io, 1024u);
	EXPECT_EQ(info.slots, 256u);
	EXPECT_EQ(info.queues, 1u);
	EXPECT_TRUE(info.volatile_cache);
}

/* attach queues=N takes its default from the instance's queues: INFO's byte 56 */
TEST_F(Host, InfoTellsTheInstancesQueues)
{
	netblk_host_core_connect(core, info_tag, now);
	answer(att.sends[0].h, 0, nullptr, 0, 0, 0xc00c1e);
	answer(att.sends[1].h);
	ASSERT_EQ(att.sends.size(), 3u);
	std::vector<uint8_t> info = info_bytes();
	info[56] = 0, info[57] = 0, info[58] = 0, info[59] = 3;	/* big-endian */
	answer(att.sends[2].h, 0, info.data(), (uint32_t)info.size());
	netblk_host_info got;
	ASSERT_EQ(netblk_host_core_info(core, &got), 0);
	EXPECT_EQ(got.queues, 3u);
}

TEST_F(Host, ARefusedSessionFailsInfoWithTheReason)
{
	netblk_host_core_connect(core, info_tag, now);
	ASSERT_EQ(att.sends.size(), 1u);
	header hello = att.sends[0].h;

	hello.flags = flag_auth_key;	/* what a keyed instance says to an untagged HELLO */
	answer(hello, status_ekeyrejected);
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(att.done[0], std::make_pair(info_tag, (uint16_t)status_ekeyrejected));
	netblk_host_info info;
	EXPECT_NE(netblk_host_core_info(core, &info), 0);
}

/*
 * Anyone who can forge the instance's address can send an untagged
 * EKEYREJECTED (the instance's own is untagged): in an open session it is
 * no answer -- to a request, or as a HELLO answer with the session's nonce
 * -- and the request completes with the instance's tagged answer.
 */
TEST_F(Host, AKeyedSessionTakesNoUntaggedRefusal)
{
	const uint8_t key[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

	create(0, key);
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_READ, 0, 1024, 0, now), 0);
	header rd = att.sends.at(0).h;

	tag_answers = false;
	answer(rd, status_ekeyrejected);
	answer(hello_sent, status_ekeyrejected);	/* its nonce, which the path saw */
	EXPECT_TRUE(att.done.empty()) << "no request failed, no session closed";
	EXPECT_EQ(stats().stray, 1u) << "the READ's; a HELLO answer to an open session is ignored";

	tag_answers = true;
	std::vector<uint8_t> data(1024, 0x5a);
	answer(rd, 0, data.data(), (uint32_t)data.size());
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(att.done[0], std::make_pair(1u, (uint16_t)0));
}

TEST_F(Host, AWriteGoesInDatagramsOfMaxIoAndCompletesWhenAllAreAnswered)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 8192, 4096, 1, now), 0);
	ASSERT_EQ(att.sends.size(), 4u);
	for (uint32_t i = 0; i < 4; i++) {
		EXPECT_EQ(att.sends[i].h.op, op_write);
		EXPECT_EQ(att.sends[i].h.offset, 8192u + 1024 * i);
		EXPECT_EQ(att.sends[i].h.flags, flag_fua);
		EXPECT_EQ(att.sends[i].at, 1024 * i);
		EXPECT_EQ(att.sends[i].len, 1024u);	/* the data goes from the request */
	}
	for (uint32_t i = 0; i < 3; i++)
		answer(att.sends[i].h);
	EXPECT_TRUE(att.done.empty());
	now += 3 * ms;
	answer(att.sends[3].h);
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(att.done[0], std::make_pair(1u, (uint16_t)0));

	/* its service time: queued to the last answer (INFO's is not one) */
	uint64_t buckets[1], max, count, sum;
	netblk_host_core_read_latency(core, buckets, 0, &max, &count, &sum);
	EXPECT_EQ(count, 1u);
	EXPECT_EQ(max, 3 * ms);
	EXPECT_EQ(sum, 3 * ms);
}

TEST_F(Host, FoldedWriteAnswersCountOnlyInASessionThatTookThem)
{
	/* open() answers as an instance that offers nothing: bits mean nothing */
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 4096, 0, now), 0);
	ASSERT_EQ(att.sends.size(), 4u);
	header first = att.sends[0].h;
	first.reserved = 0b111;
	answer(first);
	EXPECT_TRUE(att.done.empty()) << "three pieces still outstanding";
	EXPECT_EQ(stats().folded, 0u);
	for (uint32_t i = 1; i < 4; i++)
		answer(att.sends[i].h);
	ASSERT_EQ(att.done.size(), 1u);
}

TEST_F(Host, AnInstanceThatOffersFoldedAnswersGetsAskedAndTheyAnswerWrites)
{
	netblk_host_core_connect(core, info_tag, now);
	header hello = att.sends[0].h;
	hello.flags = flag_fold_answers;	/* the cookie's answer offers them */
	answer(hello, 0, nullptr, 0, 0, 0xc00c1e);
	ASSERT_EQ(att.sends.size(), 2u);
	EXPECT_EQ(att.sends[1].h.flags, flag_fold_answers) << "asked for";
	answer(att.sends[1].h);	/* echoes the flag: on */
	std::vector<uint8_t> info = info_bytes();
	answer(att.sends[2].h, 0, info.data(), (uint32_t)info.size());
	att.sends.clear();
	att.done.clear();

	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 4096, 0, now), 0);
	ASSERT_EQ(att.sends.size(), 4u);
	header first = att.sends[0].h;
	first.reserved = 0b111;
	answer(first);
	ASSERT_EQ(att.done.size(), 1u) << "one answer for the four pieces";
	EXPECT_EQ(att.done[0], std::make_pair(1u, (uint16_t)0));
	EXPECT_EQ(stats().folded, 3u);
}

TEST_F(Host, AReadsAnswersLandAtTheirPlaceInTheRequest)
{
	open();
	att.read_into.assign(2048, 0);
	ASSERT_EQ(netblk_host_core_queue(core, 0, NETBLK_IO_READ, 0, 2048, 0, now), 0);
	ASSERT_EQ(att.sends.size(), 1u);	/* one READ: max_read is 16 KiB */
	header chunk = att.sends[0].h;
	uint8_t data[1024];

	for (uint32_t i = 0; i < 2; i++) {
		chunk.offset = 1024 * (1 - i);	/* the second half first */
		chunk.length = 1024;
		memset(data, 'a' + (1 - i), sizeof(data));
		answer(chunk, 0, data, sizeof(data));
	}
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(att.read_into[0], 'a');
	EXPECT_EQ(att.read_into[2047], 'b');
}

TEST_F(Host, SilenceIsResentAndTheTimerStaysArmedWhileAnythingIsOutstanding)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 2, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	ASSERT_EQ(att.sends.size(), 1u);
	uint64_t seq = att.sends[0].h.seq;

	/* the server is away: every firing resends, and asks to fire again */
	for (int i = 0; i < 8; i++) {
		uint64_t at = netblk_host_core_timer_ns(core, now);
		ASSERT_NE(at, 0u) << "firing " << i;
		now = at + 1;
		uint64_t next = netblk_host_core_expire(core, now);
		ASSERT_NE(next, 0u) << "nothing would fire again after firing " << i;
		now = next;
		netblk_host_core_expire(core, now);
	}
	ASSERT_GE(att.sends.size(), 8u);
	for (const sent &s : att.sends)
		EXPECT_EQ(s.h.seq, seq);	/* a resend keeps its number */
	answer(att.sends.back().h);
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(netblk_host_core_timer_ns(core, now), 0u);	/* nothing waits */
}

TEST_F(Host, AnInstanceStartedAgainGetsANewSessionAndWhatWasOutstanding)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 3, NETBLK_IO_WRITE, 4096, 1024, 0, now), 0);
	header w = att.sends[0].h;

	restart(w);	/* it forgot the session */
	/* INFO goes first, alone: the WRITE waits until it is the same device */
	ASSERT_EQ(att.sends.size(), 1u);
	const header info = att.sends[0].h;
	EXPECT_EQ(info.op, op_info);
	EXPECT_EQ(info.session, session_id + 1);
	netblk_host_core_expire(core, now);
	EXPECT_EQ(att.sends.size(), 1u);
	answer_again(info, info_bytes());
	ASSERT_EQ(att.sends.size(), 2u);
	const header again = att.sends[1].h;
	EXPECT_EQ(again.op, op_write);
	EXPECT_EQ(again.session, session_id + 1);
	EXPECT_EQ(again.token, 0x5678u);
	EXPECT_EQ(again.offset, 4096u);
	EXPECT_TRUE(att.done.empty());
	answer(again, 0, nullptr, 0, session_id + 1, 0x5678);
	ASSERT_EQ(att.done.size(), 1u);
	EXPECT_EQ(att.done[0], std::make_pair(3u, (uint16_t)0));

	netblk_host_stats st;
	netblk_host_core_read_stats(core, &st);
	EXPECT_EQ(st.sessions_opened, 2u);
	EXPECT_EQ(st.renumbered, 1u);
	EXPECT_EQ(st.changed, 0u);
	EXPECT_TRUE(att.changed.empty() && att.resized.empty());
}

TEST_F(Host, AnInstanceStartedAgainOnAnotherDeviceGetsNothingAndIoFails)
{
	const struct {
		std::vector<uint8_t> info;
		netblk_host_change_reason why;
	} cases[] = {
		{info_bytes(1 << 20, 0xbad), NETBLK_HOST_OTHER_DEVICE},
		{info_bytes(1 << 19), NETBLK_HOST_SMALLER},
		{info_bytes(1 << 20, 0xd15c, true), NETBLK_HOST_READ_ONLY},
		{std::vector<uint8_t>(info_payload_size, 0), NETBLK_HOST_INFO_REFUSED},
	};

	for (const auto &k : cases) {
		SCOPED_TRACE(k.why);
		create(0);
		att = {};
		open();
		ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
		ASSERT_EQ(netblk_host_core_queue(core, 2, NETBLK_IO_WRITE, 8192, 2048, 0, now), 0);
		restart(att.sends[0].h);
		ASSERT_EQ(att.sends.size(), 1u);
		answer_again(att.sends[0].h, k.info);

		/* not a byte of the WRITEs went to it, both failed, and what comes fails at once */
		EXPECT_EQ(att.sends.size(), 1u);
		ASSERT_EQ(att.done.size(), 2u);
		EXPECT_EQ(att.done[0].second, status_eio);
		EXPECT_EQ(att.done[1].second, status_eio);
		ASSERT_EQ(att.changed.size(), 1u);
		EXPECT_EQ(att.changed[0], k.why);
		EXPECT_EQ(stats().changed, (uint64_t)k.why);
		EXPECT_EQ(netblk_host_core_queue(core, 3, NETBLK_IO_READ, 0, 1024, 0, now), -5);
		EXPECT_EQ(att.sends.size(), 1u);
		EXPECT_EQ(netblk_host_core_timer_ns(core, now), 0u);	/* nothing waits */
	}
}

TEST_F(Host, AnInstanceStartedAgainOnTheDeviceGrownResizesTheDisk)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	restart(att.sends[0].h);
	answer_again(att.sends[0].h, info_bytes(4 << 20));
	ASSERT_EQ(att.resized.size(), 1u);
	EXPECT_EQ(att.resized[0], 4u << 20);
	EXPECT_EQ(stats().resizes, 1u);
	ASSERT_EQ(att.sends.size(), 2u);
	EXPECT_EQ(att.sends[1].h.op, op_write);
	answer_again(att.sends[1].h);
	EXPECT_EQ(att.done.back(), std::make_pair(1u, (uint16_t)0));
	netblk_host_info info;
	ASSERT_EQ(netblk_host_core_info(core, &info), 0);
	EXPECT_EQ(info.size_bytes, 4u << 20);
}

TEST_F(Host, AnswersOfAnotherSessionAreStray)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	header w = att.sends[0].h;

	w.op |= op_reply_bit;
	w.session = session_id + 5;
	uint8_t bytes[header_size];
	encode_header(bytes, w);
	netblk_host_core_receive(core, bytes, header_size, header_size, nullptr, now);
	EXPECT_TRUE(att.done.empty());
	netblk_host_stats st;
	netblk_host_core_read_stats(core, &st);
	EXPECT_EQ(st.stray, 1u);
}

TEST_F(Host, WhatInfoSaysTheInstanceCannotTakeIsRefusedBeforeAnythingIsSent)
{
	EXPECT_EQ(netblk_host_core_queue(core, 0, NETBLK_IO_WRITE, 0, 1024, 0, now), -22);
	open();
	/* the geometry came without TRIM */
	EXPECT_EQ(netblk_host_core_queue(core, 0, NETBLK_IO_DISCARD, 0, 1024, 0, now), -22);
	EXPECT_TRUE(att.sends.empty());
}

TEST_F(Host, NoRoomForARequestsDatagramsIsEagainAndNothingIsQueued)
{
	open();
	/* depth x 64 datagrams: fill them with 64 KiB writes, then one more */
	for (uint32_t t = 0; t < depth; t++)
		ASSERT_EQ(netblk_host_core_queue(core, t, NETBLK_IO_WRITE, 0, 65536, 0, now), 0);
	size_t sent_before = att.sends.size();
	EXPECT_EQ(netblk_host_core_queue(core, 0, NETBLK_IO_WRITE, 0, 2048, 0, now), -11);
	EXPECT_EQ(att.sends.size(), sent_before);
}

TEST_F(Host, WithATimeoutASilentInstanceIsGivenUpAndIoFailsAtOnceUntilItAnswers)
{
	create(5000 * ms);
	open();
	const uint64_t start = now;
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	now += 1000 * ms;
	ASSERT_EQ(netblk_host_core_queue(core, 2, NETBLK_IO_WRITE, 4096, 1024, 0, now), 0);

	/* silence: the first request's deadline fails it, and the second with it */
	run_timer_until(start + 5000 * ms);
	ASSERT_EQ(att.done.size(), 2u);
	EXPECT_EQ(att.done[0], std::make_pair(1u, (uint16_t)status_eio));
	EXPECT_EQ(att.done[1], std::make_pair(2u, (uint16_t)status_eio));
	EXPECT_EQ(stats().unreachable, 1u);
	EXPECT_EQ(stats().outages, 1u);

	/* meanwhile a request fails at once, nothing of it sent */
	att.sends.clear();
	EXPECT_EQ(netblk_host_core_queue(core, 3, NETBLK_IO_READ, 0, 1024, 0, now), -5);
	EXPECT_EQ(stats().failed_fast, 1u);
	EXPECT_TRUE(att.sends.empty());

	/* a HELLO asks for the instance again and again, at least every 2 s */
	run_timer_until(now + 20000 * ms);
	size_t hellos = 0;
	for (const sent &s : att.sends) {
		EXPECT_EQ(s.h.op, op_hello);
		hellos++;
	}
	EXPECT_GE(hellos, 10u);
	EXPECT_NE(netblk_host_core_timer_ns(core, now), 0u);

	/* it answers: requests go to it again, in the session it opens, once INFO says it is the same */
	header hello = att.sends.back().h;
	att.sends.clear();
	answer(hello, 0, nullptr, 0, 0, 0xc00c1e);
	EXPECT_EQ(stats().unreachable, 0u);
	answer(att.sends.back().h, 0, nullptr, 0, session_id + 1, 0x5678);
	ASSERT_EQ(att.sends.back().h.op, op_info);
	answer_again(att.sends.back().h, info_bytes());
	att.sends.clear();
	ASSERT_EQ(netblk_host_core_queue(core, 3, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	ASSERT_EQ(att.sends.size(), 1u);
	EXPECT_EQ(att.sends[0].h.session, session_id + 1);
	answer(att.sends[0].h, 0, nullptr, 0, session_id + 1, 0x5678);
	EXPECT_EQ(att.done.back(), std::make_pair(3u, (uint16_t)0));
	EXPECT_EQ(stats().outages, 1u);
}

TEST_F(Host, WithATimeoutAnInstanceThatStillAnswersFailsOnlyTheLateRequest)
{
	create(5000 * ms);
	open();
	const uint64_t start = now;
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	ASSERT_EQ(netblk_host_core_queue(core, 2, NETBLK_IO_WRITE, 4096, 1024, 0, now), 0);
	header second = att.sends[1].h;

	/* the second is answered late, the first never: a slow disk, not a lost server */
	run_timer_until(start + 3000 * ms);
	answer(second);
	run_timer_until(start + 5000 * ms);
	ASSERT_EQ(att.done.size(), 2u);
	EXPECT_EQ(att.done[0], std::make_pair(2u, (uint16_t)0));
	EXPECT_EQ(att.done[1], std::make_pair(1u, (uint16_t)status_eio));
	EXPECT_EQ(stats().unreachable, 0u);
	EXPECT_EQ(stats().outages, 0u);
	att.sends.clear();
	ASSERT_EQ(netblk_host_core_queue(core, 3, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	EXPECT_EQ(att.sends.size(), 1u);
}

TEST_F(Host, WithoutATimeoutASilentInstanceIsWaitedForever)
{
	open();
	ASSERT_EQ(netblk_host_core_queue(core, 1, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
	run_timer_until(now + 3600 * 1000 * ms);
	EXPECT_TRUE(att.done.empty());
	EXPECT_EQ(stats().unreachable, 0u);
	EXPECT_EQ(netblk_host_core_queue(core, 2, NETBLK_IO_WRITE, 0, 1024, 0, now), 0);
}

} /* namespace */

/*
 * An attachment's counters are its hardware queues': counts and their
 * shares of the window added, the states the worst queue's.
 */
TEST(HostStats, AnAttachmentsCountersAreItsQueuesAddedItsStatesTheWorst)
{
	netblk_host_stats sum = {}, a = {}, b = {};
	uint64_t v = 1;

#define SET_queue(name) a.name = v++; b.name = 1000 * v++;
#define SET_core(name) SET_queue(name)
#define SET_kernel(name)
#define SET(NAME, name, nr, where, ...) SET_##where(name)
	NETBLK_HOST_STATS(SET)
#undef SET
	a.srtt_ns = 9000, b.srtt_ns = 300;
	a.rto_ns = 100, b.rto_ns = 200000;
	a.reordering = 3, b.reordering = 1;
	a.unreachable = 0, b.unreachable = 1;
	a.changed = 1, b.changed = 0;
	netblk_host_stats_add(&sum, &a);
	netblk_host_stats_add(&sum, &b);
	EXPECT_EQ(sum.srtt_ns, 9000u);
	EXPECT_EQ(sum.rto_ns, 200000u);
	EXPECT_EQ(sum.reordering, 3u);
	EXPECT_EQ(sum.unreachable, 1u);
	EXPECT_EQ(sum.changed, 1u);
	EXPECT_EQ(sum.window, a.window + b.window);
	EXPECT_EQ(sum.outstanding, a.outstanding + b.outstanding);
	EXPECT_EQ(sum.sends, a.sends + b.sends);
}
