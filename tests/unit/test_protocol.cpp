// SPDX-License-Identifier: GPL-2.0
/* The wire codec, request validation and framing of protocol v1. */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstring>
#include <vector>

#include "frames.h"
#include "protocol.h"

using namespace nb;
using namespace test;

namespace {

geometry make_geometry(bool read_only = false)
{
	geometry g{};
	EXPECT_TRUE(geometry_init(&g, 256ull << 20, 512, 1500, 256, read_only, true, true));
	return g;
}

decision check(const std::vector<u8> &buf, const geometry &g)
{
	header h{};
	return validate_request(buf.data(), (u32)buf.size(), g, &h);
}

void expect_refused(const std::vector<u8> &buf, const geometry &g, u16 status)
{
	decision d = check(buf, g);
	EXPECT_EQ(d.what, verdict::refuse);
	EXPECT_EQ(d.status, status);
}

void expect_served(const std::vector<u8> &buf, const geometry &g)
{
	decision d = check(buf, g);
	EXPECT_EQ(d.what, verdict::serve) << "status " << d.status;
}

} // namespace

TEST(Geometry, MaxIoIsWholeSectorsBehind58Bytes)
{
	EXPECT_EQ(max_io_for_mtu(1500, 512), 1024u);
	EXPECT_EQ(max_io_for_mtu(2034, 512), 1536u);
	EXPECT_EQ(max_io_for_mtu(576, 512), 512u);
	EXPECT_EQ(max_io_for_mtu(569, 512), 0u);
	EXPECT_EQ(max_io_for_mtu(570, 512), 512u);
	EXPECT_EQ(max_io_for_mtu(1500, 4096), 0u);
	EXPECT_EQ(max_io_for_mtu(9000, 4096), 8192u);
	EXPECT_EQ(max_io_for_mtu(50, 512), 0u);
	EXPECT_EQ(max_io_for_mtu(1500, 0), 0u);

	geometry g = make_geometry();
	EXPECT_EQ(g.max_io, 1024u);
	EXPECT_EQ(g.max_read, 16384u);
	geometry big{};
	EXPECT_FALSE(geometry_init(&big, 1 << 20, 4096, 1500, 256, false, false, false));
}

TEST(Codec, HeaderRoundTripsBigEndian)
{
	u8 buf[header_size];
	header h{proto_magic, 1, op_write, 0, 0x0102030405060708ull, 0x1112131415161718ull,
		 0x21222324, flag_fua};
	encode_header(buf, h);
	const u8 expect[header_size] = {
		0x4e, 0x42, 0x4c, 0x4b, 1, 3, 0, 0,
		1, 2, 3, 4, 5, 6, 7, 8,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0, 1,
	};
	EXPECT_EQ(0, memcmp(buf, expect, header_size));

	header back{};
	ASSERT_TRUE(decode_header(buf, header_size, &back));
	EXPECT_EQ(back.magic, h.magic);
	EXPECT_EQ(back.op, h.op);
	EXPECT_EQ(back.handle, h.handle);
	EXPECT_EQ(back.offset, h.offset);
	EXPECT_EQ(back.length, h.length);
	EXPECT_EQ(back.flags, h.flags);
	EXPECT_FALSE(decode_header(buf, header_size - 1, &back));
}

TEST(Codec, InfoPayload)
{
	geometry g = make_geometry(true);
	u8 p[info_payload_size];
	memset(p, 0xff, sizeof(p));
	encode_info(p, g);
	EXPECT_EQ(load_be64(p), 256ull << 20);
	EXPECT_EQ(load_be32(p + 8), 512u);
	EXPECT_EQ(load_be32(p + 12), 1024u);
	EXPECT_EQ(load_be32(p + 16), 16384u);
	EXPECT_EQ(load_be32(p + 20), info_flag_read_only | info_flag_volatile_cache | info_flag_fua);
	EXPECT_EQ(load_be32(p + 24), 256u);
	EXPECT_EQ(load_be32(p + 28), 0u);
}

TEST(Validate, ServesWellFormedRequests)
{
	geometry g = make_geometry();
	expect_served(request(op_info, 0, 0), g);
	expect_served(request(op_read, 0, 512), g);
	expect_served(request(op_read, (256ull << 20) - 16384, 16384), g);
	expect_served(request(op_write, 4096, 1024, 0, 1024), g);
	expect_served(request(op_write, (256ull << 20) - 512, 512, flag_fua, 512), g);
	expect_served(request(op_flush, 0, 0), g);
}

TEST(Validate, DropsWhatMustNotBeAnswered)
{
	geometry g = make_geometry();
	std::vector<u8> short_one = request(op_read, 0, 512);
	short_one.resize(header_size - 1);
	EXPECT_EQ(check(short_one, g).what, verdict::drop);

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

TEST(Validate, RefusesEachBadRequestWithItsStatus)
{
	geometry g = make_geometry();
	const u64 size = 256ull << 20;

	std::vector<u8> v2 = request(op_read, 0, 512);
	v2[4] = 2;
	expect_refused(v2, g, status_eprotonosupport);
	expect_refused(request(0, 0, 0), g, status_eopnotsupp);
	expect_refused(request(5, 0, 512), g, status_eopnotsupp);
	expect_refused(request(0x7f, 0, 512), g, status_eopnotsupp);

	/* EINVAL: zero length, misalignment, payload mismatch, unknown flags */
	expect_refused(request(op_read, 0, 0), g, status_einval);
	expect_refused(request(op_read, 1, 512), g, status_einval);
	expect_refused(request(op_read, 0, 513), g, status_einval);
	expect_refused(request(op_write, 0, 0, 0, 0), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0, 511), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0, 513), g, status_einval);
	expect_refused(request(op_write, 256, 512, 0, 512), g, status_einval);
	expect_refused(request(op_read, 0, 512, 2), g, status_einval);
	expect_refused(request(op_write, 0, 512, 0x8000, 512), g, status_einval);
	expect_refused(request(op_read, 0, 512, flag_fua), g, status_einval);
	expect_refused(request(op_flush, 512, 0), g, status_einval);
	expect_refused(request(op_flush, 0, 512), g, status_einval);

	/* ERANGE: beyond the end, including offsets that would wrap */
	expect_refused(request(op_read, size, 512), g, status_erange);
	expect_refused(request(op_read, size - 512, 1024), g, status_erange);
	expect_refused(request(op_write, size, 512, 0, 512), g, status_erange);
	expect_refused(request(op_read, ~0ull - 511, 512), g, status_erange);

	/* EMSGSIZE: longer than max_read / max_io */
	expect_refused(request(op_read, 0, 16384 + 512), g, status_emsgsize);
	expect_refused(request(op_write, 0, 1536, 0, 1536), g, status_emsgsize);
}

TEST(Validate, ReadOnlyRefusesWriteAndFlush)
{
	geometry g = make_geometry(true);
	expect_refused(request(op_write, 0, 512, 0, 512), g, status_erofs);
	expect_refused(request(op_flush, 0, 0), g, status_erofs);
	expect_served(request(op_read, 0, 512), g);
	expect_served(request(op_info, 0, 0), g);
}

/* ---- framing ---- */


TEST(Frame, ParsesOurDatagram)
{
	std::vector<u8> req = request(op_read, 0, 512);
	std::vector<u8> f = udp_frame(server_ip, 7000, req);
	frame_layout l{};
	ASSERT_EQ(parse_frame(f.data(), (u32)f.size(), server_ip, 7000, &l), frame_kind::ours);
	EXPECT_EQ(l.payload_offset, 42u);
	EXPECT_EQ(l.payload_len, header_size);
	EXPECT_EQ(l.src_port, 40000);
	EXPECT_EQ(l.src_ip, client_ip);
	EXPECT_EQ(0, memcmp(l.src_mac, client_mac, 6));

	/* IP options move the payload; the parser follows the header length. */
	std::vector<u8> opt = udp_frame(server_ip, 7000, req, 0x4000, 6);
	ASSERT_EQ(parse_frame(opt.data(), (u32)opt.size(), server_ip, 7000, &l), frame_kind::ours);
	EXPECT_EQ(l.payload_offset, 46u);
}

TEST(Frame, ClassifiesWhatIsNotOurs)
{
	std::vector<u8> req = request(op_read, 0, 512);
	frame_layout l{};

	std::vector<u8> other_port = udp_frame(server_ip, 7001, req);
	EXPECT_EQ(parse_frame(other_port.data(), (u32)other_port.size(), server_ip, 7000, &l),
		  frame_kind::not_ours);

	std::vector<u8> arp = udp_frame(server_ip, 7000, req);
	store_be16(&arp[12], 0x0806);
	EXPECT_EQ(parse_frame(arp.data(), (u32)arp.size(), server_ip, 7000, &l), frame_kind::not_ours);

	std::vector<u8> bcast = udp_frame(0xffffffffu, 7000, req);
	EXPECT_EQ(parse_frame(bcast.data(), (u32)bcast.size(), server_ip, 7000, &l),
		  frame_kind::misaddressed);
	std::vector<u8> mcast = udp_frame(htonl(0xe0000001), 7000, req);
	EXPECT_EQ(parse_frame(mcast.data(), (u32)mcast.size(), server_ip, 7000, &l),
		  frame_kind::misaddressed);

	std::vector<u8> first_frag = udp_frame(server_ip, 7000, req, 0x2000);
	EXPECT_EQ(parse_frame(first_frag.data(), (u32)first_frag.size(), server_ip, 7000, &l),
		  frame_kind::misaddressed);
	std::vector<u8> later_frag = udp_frame(server_ip, 7000, req, 0x0010);
	EXPECT_EQ(parse_frame(later_frag.data(), (u32)later_frag.size(), server_ip, 7000, &l),
		  frame_kind::misaddressed);

	std::vector<u8> truncated = udp_frame(server_ip, 7000, req);
	truncated.resize(truncated.size() - 4);
	EXPECT_EQ(parse_frame(truncated.data(), (u32)truncated.size(), server_ip, 7000, &l),
		  frame_kind::malformed);
}

TEST(Frame, ReplyHeadersSwapAddressesAndChecksum)
{
	std::vector<u8> req = request(op_write, 512, 1024, 0, 1024);
	std::vector<u8> f = udp_frame(server_ip, 7000, req);
	frame_layout l{};
	ASSERT_EQ(parse_frame(f.data(), (u32)f.size(), server_ip, 7000, &l), frame_kind::ours);

	reply_route route{};
	route_from_request(l, &route);
	header reply{proto_magic, proto_version, op_write | op_reply_bit, status_ok,
		     0x1122334455667788ull, 512, 1024, 0};
	std::vector<u8> out(reply_headroom + 100, 0);
	u32 len = write_reply_headers(out.data(), route, reply, 100, 7);

	EXPECT_EQ(len, reply_headroom + 100);
	EXPECT_EQ(0, memcmp(&out[0], client_mac, 6));
	EXPECT_EQ(0, memcmp(&out[6], server_mac, 6));
	const u8 *ip = &out[14];
	EXPECT_EQ(ip[0], 0x45);
	EXPECT_EQ(load_be16(ip + 2), 20u + 8 + 30 + 100);
	EXPECT_EQ(ipv4_checksum(ip, 20), 0) << "a valid header sums to 0xffff";
	EXPECT_EQ(0, memcmp(ip + 12, &server_ip, 4));
	EXPECT_EQ(0, memcmp(ip + 16, &client_ip, 4));
	const u8 *udp = ip + 20;
	EXPECT_EQ(load_be16(udp), 7000);
	EXPECT_EQ(load_be16(udp + 2), 40000);
	EXPECT_EQ(load_be16(udp + 4), 8u + 30 + 100);
	EXPECT_EQ(load_be16(udp + 6), 0) << "UDP checksum not computed";
	header back{};
	ASSERT_TRUE(decode_header(udp + 8, 30, &back));
	EXPECT_EQ(back.op, op_write | op_reply_bit);
	EXPECT_EQ(back.handle, 0x1122334455667788ull);
	EXPECT_EQ(reply_headroom % 4, 0u) << "data starts dword-aligned";
}

TEST(Frame, Ipv4ChecksumKnownVector)
{
	/* The classic example header from RFC 1071 discussions (checksum b861). */
	const u8 hdr[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			    0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
	EXPECT_EQ(ipv4_checksum(hdr, 20), 0xb861);
}
