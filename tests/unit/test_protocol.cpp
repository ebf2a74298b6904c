// SPDX-License-Identifier: GPL-2.0
/* The wire codec, tags and request validation of protocol v2. */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstring>
#include <vector>

#include "frame.h"
#include "frames.h"
#include "protocol.h"

using namespace nb;
using namespace test;

namespace {

/* At an MTU, as the instance has it: the frame's room, whole sectors of it behind the header. */
u32 max_io_for_mtu(u32 mtu, u32 sector_size)
{
	return max_io_for_payload(frame_payload_max(mtu), sector_size);
}

const device_limits disk_limits = {4096, 65536, 4096, 1ull << 32, 1ull << 20};

geometry make_geometry(bool read_only = false, const device_limits &limits = disk_limits)
{
	geometry g{};
	EXPECT_TRUE(geometry_init(&g, 256ull << 20, 512, frame_payload_max(1500), 256, read_only, true,
				  true, limits));
	g.export_id = 0x0123456789abcdefull;
	return g;
}

const auth_config no_key = {};

/* Both steps, as the engine takes them (the session looked up between). */
decision check(const std::vector<u8> &buf, const geometry &g, const auth_config &a = no_key)
{
	header h{};
	decision d = validate_header(buf.data(), (u32)buf.size(), a, &h);
	if (d.what != verdict::serve)
		return d;
	return validate_op(h, (u32)buf.size(), g);
}

void expect_refused(const std::vector<u8> &buf, const geometry &g, u16 status,
		    const auth_config &a = no_key)
{
	decision d = check(buf, g, a);
	EXPECT_EQ(d.what, verdict::refuse);
	EXPECT_EQ(d.status, status);
	EXPECT_NE(refusal_of(d.status), refusals) << "status " << d.status << " has no counter";
}

void expect_served(const std::vector<u8> &buf, const geometry &g, const auth_config &a = no_key)
{
	decision d = check(buf, g, a);
	EXPECT_EQ(d.what, verdict::serve) << "status " << d.status;
}

struct session_for_test {
	session_for_test()
	{
		test::session = client_session{};
		test::session.id = 3;
		test::session.token = 0xfeedull;
	}
	~session_for_test() { test::session = client_session{}; }
};

} // namespace

TEST(Geometry, MaxIoIsWholeSectorsBehind82Bytes)
{
	EXPECT_EQ(max_io_for_mtu(1500, 512), 1024u);
	EXPECT_EQ(max_io_for_mtu(2058, 512), 1536u);
	EXPECT_EQ(max_io_for_mtu(594, 512), 512u) << "target.h NETBLK_MTU_MIN";
	EXPECT_EQ(max_io_for_mtu(593, 512), 0u);
	EXPECT_EQ(max_io_for_mtu(576, 512), 0u) << "v1's 576 no longer carries a sector";
	EXPECT_EQ(max_io_for_mtu(1500, 4096), 0u);
	EXPECT_EQ(max_io_for_mtu(4178, 4096), 4096u);
	EXPECT_EQ(max_io_for_mtu(9000, 4096), 8192u);
	EXPECT_EQ(max_io_for_mtu(50, 512), 0u);
	EXPECT_EQ(max_io_for_mtu(1500, 0), 0u);

	geometry g = make_geometry();
	EXPECT_EQ(g.max_io, 1024u);
	EXPECT_EQ(g.max_read, 16384u);
	geometry big{};
	EXPECT_FALSE(geometry_init(&big, 1 << 20, 4096, frame_payload_max(1500), 256, false, false,
				   false, disk_limits));
	EXPECT_EQ(reply_headroom, 96u);
	EXPECT_EQ(reply_headroom % 8, 0u) << "data starts 8-byte aligned";
}

TEST(Geometry, TrimAndWriteZeroesLimitsAreWholeSectorsAtMostAGiB)
{
	geometry g = make_geometry();
	EXPECT_EQ(g.max_trim, 1u << 30) << "a 4 GiB device limit, capped";
	EXPECT_EQ(g.max_write_zeroes, 1u << 20);
	EXPECT_EQ(g.physical_block_size, 4096u);
	EXPECT_EQ(g.io_opt, 65536u);

	device_limits odd = {0, 0, 0, 1000, 0};
	g = make_geometry(false, odd);
	EXPECT_EQ(g.max_trim, 512u) << "rounded down to whole sectors";
	EXPECT_EQ(g.max_write_zeroes, 0u) << "the device cannot";
	EXPECT_EQ(g.physical_block_size, 512u) << "never below the logical size";
}

TEST(Codec, HeaderRoundTripsBigEndian)
{
	u8 buf[header_size];
	header h{};
	h.magic = proto_magic;
	h.version = 2;
	h.op = op_write;
	h.status = 0x0a0b;
	h.flags = flag_fua;
	h.session = 0x31323334;
	h.token = 0x4142434445464748ull;
	h.seq = 0x0102030405060708ull;
	h.offset = 0x1112131415161718ull;
	h.length = 0x21222324;
	h.reserved = 0;
	h.tag = 0x5152535455565758ull;
	encode_header(buf, h);
	const u8 expect[header_size] = {
		0x4e, 0x42, 0x4c, 0x4b, 2, 3, 0x0a, 0x0b,
		0, 1, 0x31, 0x32, 0x33, 0x34,
		0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
		1, 2, 3, 4, 5, 6, 7, 8,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0, 0, 0, 0,
		0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
	};
	EXPECT_EQ(0, memcmp(buf, expect, header_size));

	header back{};
	ASSERT_TRUE(decode_header(buf, header_size, &back));
	EXPECT_EQ(back.magic, h.magic);
	EXPECT_EQ(back.op, h.op);
	EXPECT_EQ(back.status, h.status);
	EXPECT_EQ(back.flags, h.flags);
	EXPECT_EQ(back.session, h.session);
	EXPECT_EQ(back.token, h.token);
	EXPECT_EQ(back.seq, h.seq);
	EXPECT_EQ(back.offset, h.offset);
	EXPECT_EQ(back.length, h.length);
	EXPECT_EQ(back.tag, h.tag);
	EXPECT_FALSE(decode_header(buf, header_size - 1, &back));
}

TEST(Codec, InfoPayload)
{
	geometry g = make_geometry();
	u8 p[info_payload_size];
	memset(p, 0xff, sizeof(p));
	encode_info(p, g);
	EXPECT_EQ(load_be64(p), 256ull << 20);
	EXPECT_EQ(load_be32(p + 8), 512u);
	EXPECT_EQ(load_be32(p + 12), 4096u);
	EXPECT_EQ(load_be32(p + 16), 65536u);
	EXPECT_EQ(load_be32(p + 20), 1024u);
	EXPECT_EQ(load_be32(p + 24), 16384u);
	EXPECT_EQ(load_be32(p + 28), info_flag_volatile_cache | info_flag_fua | info_flag_trim |
					     info_flag_write_zeroes);
	EXPECT_EQ(load_be32(p + 32), 256u);
	EXPECT_EQ(load_be32(p + 36), 4096u);
	EXPECT_EQ(load_be32(p + 40), 1u << 30);
	EXPECT_EQ(load_be32(p + 44), 1u << 20);
	EXPECT_EQ(load_be64(p + 48), 0x0123456789abcdefull);
	EXPECT_EQ(load_be32(p + 56), 1u) << "one queue unless the engine says";
}

/*
 * INFO tells the instance's queues after the export id; an answer of 56
 * bytes (a server from before queues=) is one queue, and none is refused.
 */
TEST(Codec, InfoTellsQueues)
{
	geometry g = make_geometry(), back{};
	u8 p[info_payload_size];

	g.queues = 4;
	encode_info(p, g);
	EXPECT_EQ(load_be32(p + 56), 4u);
	ASSERT_TRUE(decode_info(p, sizeof(p), &back));
	EXPECT_EQ(back.queues, 4u);
	EXPECT_EQ(back.slots, 256u) << "a queue's slots";
	ASSERT_TRUE(decode_info(p, info_payload_min, &back));
	EXPECT_EQ(back.queues, 1u);
	EXPECT_FALSE(decode_info(p, info_payload_min - 1, &back));
	EXPECT_FALSE(decode_info(p, info_payload_min + 2, &back)) << "cut inside queues";
	store_be32(p + 56, 0);
	EXPECT_FALSE(decode_info(p, sizeof(p), &back)) << "no queue at all";
}

/*
 * A client cannot write to a read-only instance: offering it a write cache,
 * FUA, TRIM or WRITE_ZEROES would invite requests refused EROFS (and a
 * block-device client would send its FLUSHes there).
 */
TEST(Codec, ReadOnlyInfoOffersNothingThatWrites)
{
	geometry g = make_geometry(true);
	u8 p[info_payload_size];
	encode_info(p, g);
	EXPECT_EQ(load_be32(p + 28), info_flag_read_only);
	EXPECT_EQ(load_be32(p + 36), 0u) << "no discard granularity without TRIM";
	EXPECT_EQ(load_be32(p + 40), 0u);
	EXPECT_EQ(load_be32(p + 44), 0u);
	EXPECT_EQ(load_be64(p), 256ull << 20) << "what it reads is as it was";
	EXPECT_EQ(load_be32(p + 12), 4096u);
	EXPECT_EQ(load_be32(p + 20), 1024u);
	EXPECT_EQ(load_be32(p + 24), 16384u);

	geometry back{};
	ASSERT_TRUE(decode_info(p, sizeof(p), &back));
	EXPECT_TRUE(back.read_only);
	EXPECT_FALSE(back.volatile_cache || back.fua || back.max_trim || back.max_write_zeroes);
}

TEST(Codec, ExportIdNamesADeviceTheSameEveryTime)
{
	const u8 uuid[] = "8a5e0c1e-0001-4d2c-9a6e-1c0d5e0a0b0c";
	const u8 other[] = "8a5e0c1e-0002-4d2c-9a6e-1c0d5e0a0b0c";

	EXPECT_EQ(export_id(uuid, sizeof(uuid) - 1), export_id(uuid, sizeof(uuid) - 1));
	EXPECT_NE(export_id(uuid, sizeof(uuid) - 1), export_id(other, sizeof(other) - 1));
	EXPECT_NE(export_id(uuid, sizeof(uuid) - 1), 0u);
}

TEST(Codec, InfoReadBackAsWritten)
{
	geometry g = make_geometry(), back{};
	u8 p[info_payload_size];
	encode_info(p, g);
	ASSERT_TRUE(decode_info(p, sizeof(p), &back));
	EXPECT_EQ(back.size_bytes, g.size_bytes);
	EXPECT_EQ(back.sector_size, g.sector_size);
	EXPECT_EQ(back.physical_block_size, g.physical_block_size);
	EXPECT_EQ(back.io_opt, g.io_opt);
	EXPECT_EQ(back.max_io, g.max_io);
	EXPECT_EQ(back.max_read, g.max_read);
	EXPECT_EQ(back.slots, g.slots);
	EXPECT_EQ(back.discard_granularity, g.discard_granularity);
	EXPECT_EQ(back.max_trim, g.max_trim);
	EXPECT_EQ(back.max_write_zeroes, g.max_write_zeroes);
	EXPECT_EQ(back.export_id, g.export_id);
	EXPECT_TRUE(!back.read_only && back.volatile_cache && back.fua);
	EXPECT_FALSE(decode_info(p, sizeof(p) - 1, &back));

	/* no TRIM flag: no TRIM, whatever the limit field holds */
	store_be32(p + 28, info_flag_volatile_cache);
	ASSERT_TRUE(decode_info(p, sizeof(p), &back));
	EXPECT_EQ(back.max_trim, 0u);
	EXPECT_EQ(back.max_write_zeroes, 0u);
	EXPECT_FALSE(back.read_only || back.fua);
}

TEST(Codec, InfoThatNoInstanceSendsIsRefused)
{
	geometry g = make_geometry();
	struct {
		u32 at;
		u32 value;
	} bad[] = {
		{8, 0}, {8, 1000}, {8, 256}, {8, 131072},	/* sector size */
		{20, 0}, {20, 1000},				/* max_io not in sectors */
		{24, 0}, {24, 1536}, {24, 17 * 1024},		/* max_read */
		{32, 0},					/* slots */
		{40, 1000},					/* max_trim */
		{44, 100},					/* max_write_zeroes */
	};
	for (auto &b : bad) {
		u8 p[info_payload_size];
		geometry back{};
		encode_info(p, g);
		store_be32(p + b.at, b.value);
		EXPECT_FALSE(decode_info(p, sizeof(p), &back)) << "field at " << b.at << " = " << b.value;
	}
	u8 p[info_payload_size];
	geometry back{};
	encode_info(p, g);
	store_be64(p, (256ull << 20) + 100);	/* size not in sectors */
	EXPECT_FALSE(decode_info(p, sizeof(p), &back));
}

TEST(Validate, ServesWellFormedRequests)
{
	session_for_test in_session;
	geometry g = make_geometry();
	expect_served(request(op_info, 0, 0), g);
	expect_served(request(op_read, 0, 512), g);
	expect_served(request(op_read, (256ull << 20) - 16384, 16384), g);
	expect_served(request(op_write, 4096, 1024, 0, 1024), g);
	expect_served(request(op_write, (256ull << 20) - 512, 512, flag_fua, 512), g);
	expect_served(request(op_flush, 0, 0), g);
	expect_served(request(op_trim, 0, 128u << 20), g);
	expect_served(request(op_write_zeroes, 4096, 1u << 20), g);
	EXPECT_EQ(check(hello_request(7), g).what, verdict::hello);
	EXPECT_EQ(check(hello_request(7, 0x1234), g).what, verdict::hello);
}

TEST(Validate, DropsWhatMustNotBeAnswered)
{
	session_for_test in_session;
	geometry g = make_geometry();
	std::vector<u8> short_one = request(op_read, 0, 512);
	short_one.resize(v1_header_size - 1);
	EXPECT_EQ(check(short_one, g).what, verdict::drop);
	std::vector<u8> short_v2 = request(op_read, 0, 512);
	short_v2.resize(header_size - 1);
	EXPECT_EQ(check(short_v2, g).what, verdict::drop) << "a v2 header cut short";

	std::vector<u8> bad_magic = request(op_read, 0, 512);
	bad_magic[0] ^= 1;
	EXPECT_EQ(check(bad_magic, g).what, verdict::drop);

	/* A reply is never answered, whatever else it says: no storm between servers. */
	EXPECT_EQ(check(request(op_read | op_reply_bit, 0, 512), g).what, verdict::drop);
	EXPECT_EQ(check(request(0xff, 0, 0), g).what, verdict::drop);
	std::vector<u8> reply_bad_version = request(op_info | op_reply_bit, 0, 0);
	reply_bad_version[4] = 9;
	EXPECT_EQ(check(reply_bad_version, g).what, verdict::drop);
}

TEST(Validate, OtherVersionsAreAnsweredInVersionOnesHeader)
{
	geometry g = make_geometry();
	std::vector<u8> v1(v1_header_size, 0);
	store_be32(v1.data(), proto_magic);
	v1[4] = 1;
	v1[5] = op_read;
	EXPECT_EQ(check(v1, g).what, verdict::refuse_v1);
	EXPECT_EQ(check(v1, g).status, status_eprotonosupport);
	v1[4] = 3;
	EXPECT_EQ(check(v1, g).what, verdict::refuse_v1);
}

TEST(Validate, RefusesEachBadRequestWithItsStatus)
{
	session_for_test in_session;
	geometry g = make_geometry();
	const u64 size = 256ull << 20;

	expect_refused(request(0, 0, 0), g, status_eopnotsupp);
	expect_refused(request(8, 0, 512), g, status_eopnotsupp);
	expect_refused(request(0x7f, 0, 512), g, status_eopnotsupp);

	/* EINVAL: zero length, misalignment, payload mismatch, unknown flags */
	expect_refused(request(op_read, 0, 0), g, status_einval);
	expect_refused(request(op_read, 1, 512), g, status_einval);
	expect_refused(request(op_read, 0, 513), g, status_einval);
	expect_refused(request(op_read, 0, 512, 0, 512), g, status_einval);	/* a READ carries no data */
	expect_refused(request(op_write, 0, 0, 0, 0), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0, 511), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0, 513), g, status_einval);
	expect_refused(request(op_write, 256, 512, 0, 512), g, status_einval);
	expect_refused(request(op_read, 0, 512, 2), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0x8000, 512), g, status_einval);
	expect_refused(request(op_read, 0, 512, flag_fua), g, status_einval);
	expect_refused(request(op_flush, 512, 0), g, status_einval);
	expect_refused(request(op_flush, 0, 512), g, status_einval);
	expect_refused(request(op_info, 0, 0, 0, 8), g, status_einval);
	expect_refused(request(op_trim, 0, 512, 0, 512), g, status_einval);	/* a TRIM carries no data */
	expect_refused(request(op_trim, 100, 512), g, status_einval);
	expect_refused(request(op_write_zeroes, 0, 0), g, status_einval);
	expect_refused(request(op_trim, 0, 512, flag_fua), g, status_einval);
	std::vector<u8> reserved = request(op_read, 0, 512);
	reserved[45] = 1;
	expect_refused(reserved, g, status_einval);

	/* HELLO: no session, a nonce, nothing else */
	std::vector<u8> hello = hello_request(0);
	expect_refused(hello, g, status_einval);
	hello = hello_request(1);
	store_be32(&hello[10], 5);
	expect_refused(hello, g, status_einval);
	hello = hello_request(1);
	store_be32(&hello[38], 512);
	expect_refused(hello, g, status_einval);
	hello = hello_request(1);
	hello.push_back(0);
	expect_refused(hello, g, status_einval);

	/* ERANGE: beyond the end, including offsets that would wrap */
	expect_refused(request(op_read, size, 512), g, status_erange);
	expect_refused(request(op_read, size - 512, 1024), g, status_erange);
	expect_refused(request(op_write, size, 512, 0, 512), g, status_erange);
	expect_refused(request(op_read, ~0ull - 511, 512), g, status_erange);
	expect_refused(request(op_trim, size - 512, 1024), g, status_erange);

	/* EMSGSIZE: longer than max_read / max_io / the TRIM and WRITE_ZEROES limits */
	expect_refused(request(op_read, 0, 16384 + 512), g, status_emsgsize);
	expect_refused(request(op_write, 0, 1536, 0, 1536), g, status_emsgsize);
	expect_refused(request(op_trim, 0, (1u << 30) + 512), g, status_emsgsize);
	expect_refused(request(op_write_zeroes, 0, (1u << 20) + 512), g, status_emsgsize);
}

TEST(Validate, WhatTheDeviceCannotDoIsNotSupported)
{
	session_for_test in_session;
	device_limits plain = {512, 0, 0, 0, 0};
	geometry g = make_geometry(false, plain);
	expect_refused(request(op_trim, 0, 512), g, status_eopnotsupp);
	expect_refused(request(op_write_zeroes, 0, 512), g, status_eopnotsupp);
}

TEST(Validate, ReadOnlyRefusesEverythingThatChangesTheDisk)
{
	session_for_test in_session;
	geometry g = make_geometry(true);
	expect_refused(request(op_write, 0, 512, 0, 512), g, status_erofs);
	expect_refused(request(op_flush, 0, 0), g, status_erofs);
	expect_refused(request(op_trim, 0, 512), g, status_erofs);
	expect_refused(request(op_write_zeroes, 0, 512), g, status_erofs);
	expect_served(request(op_read, 0, 512), g);
	expect_served(request(op_info, 0, 0), g);
}

/* ---- tags ---- */

TEST(Tag, KeyedInstanceTakesOnlyTaggedDatagrams)
{
	session_for_test in_session;
	geometry g = make_geometry();
	auth_config keyed = {true, false, {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}};

	expect_refused(request(op_read, 0, 512), g, status_ekeyrejected, keyed);	/* untagged */
	test::session.auth = keyed;
	expect_served(request(op_read, 0, 512), g, keyed);
	expect_served(request(op_write, 0, 512, 0, 512), g, keyed);
	EXPECT_EQ(check(hello_request(9), g, keyed).what, verdict::hello);

	std::vector<u8> changed = request(op_read, 0, 512);
	changed[33] ^= 1;	/* the offset, after tagging */
	expect_refused(changed, g, status_ekeyrejected, keyed);

	auth_config other = keyed;
	other.key.k0 ^= 1;
	expect_refused(request(op_read, 0, 512), g, status_ekeyrejected, other);	/* another key */

	/* header only: the data may change; with auth=full it may not */
	std::vector<u8> w = request(op_write, 0, 512, 0, 512);
	w[header_size + 100] ^= 0x40;
	expect_served(w, g, keyed);
	auth_config full = keyed;
	full.data = true;
	test::session.auth = full;
	w = request(op_write, 0, 512, 0, 512);
	expect_served(w, g, full);
	w[header_size + 100] ^= 0x40;
	expect_refused(w, g, status_ekeyrejected, full);	/* a byte of data flipped in flight */
}

TEST(Tag, IsSipHashOfTheHeaderBeforeItThenTheData)
{
	auth_config a = {true, true, {1, 2}};
	u8 buf[header_size + 16];
	for (u32 i = 0; i < sizeof(buf); i++)
		buf[i] = (u8)i;
	seal(a, buf, buf + header_size, 16);

	siphash h(a.key);
	h.update(buf, tag_offset);
	h.update(buf + header_size, 16);
	EXPECT_EQ(load_be64(buf + tag_offset), h.final());

	auth_config unkeyed = {};
	seal(unkeyed, buf, nullptr, 0);
	EXPECT_EQ(load_be64(buf + tag_offset), 0u);
}
