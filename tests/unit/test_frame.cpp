// SPDX-License-Identifier: GPL-2.0
/* The Ethernet/IPv4/UDP framing around protocol v2's datagrams (frame.h). */
#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>
#include <vector>

#include "engine.h"	/* write_reply_headers() */
#include "frame.h"
#include "frames.h"

using namespace nb;
using namespace test;

namespace {

endpoint server(u16 vlan = 0)
{
	endpoint e{};
	memcpy(e.mac, server_mac, 6);
	e.vlan = vlan;
	e.ip = server_ip;
	e.port = server_port;
	return e;
}

/* What parse_frame makes of @f for the server: true, or the reason it drops it. */
::testing::AssertionResult ours(const std::vector<u8> &f, const endpoint &local = server())
{
	frame_layout l{};
	drop_reason why = drop_reasons;
	if (parse_frame(f.data(), (u32)f.size(), local, header_size, &l, &why))
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure() << "dropped, reason " << (int)why;
}

void expect_dropped(const std::vector<u8> &f, drop_reason reason, const endpoint &local = server())
{
	frame_layout l{};
	drop_reason why = drop_reasons;
	EXPECT_FALSE(parse_frame(f.data(), (u32)f.size(), local, header_size, &l, &why));
	EXPECT_EQ(why, reason);
}

const std::vector<u8> req = request(op_read, 0, 512);

} // namespace

TEST(Frame, ParsesOurDatagram)
{
	std::vector<u8> f = udp_frame(server_ip, 7000, req);
	frame_layout l{};
	drop_reason why;
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), server(), header_size, &l, &why));
	EXPECT_EQ(l.payload_offset, 42u);
	EXPECT_EQ(l.payload_len, header_size);
	EXPECT_EQ(l.src_port, 40000);
	EXPECT_EQ(l.src_ip, client_ip);
	EXPECT_EQ(l.vlan, 0);
	EXPECT_EQ(0, memcmp(l.src_mac, client_mac, 6));

	/* IP options move the payload; the parser follows the header length. */
	std::vector<u8> opt = udp_frame(server_ip, 7000, req, 0x4000, 6);
	ASSERT_TRUE(parse_frame(opt.data(), (u32)opt.size(), server(), header_size, &l, &why));
	EXPECT_EQ(l.payload_offset, 46u);
}

TEST(Frame, DropsWhatIsNotAddressedToTheInstance)
{
	expect_dropped(udp_frame(server_ip, 7001, req), drop_misaddressed);
	expect_dropped(udp_frame(htonl(0x0a000210), 7000, req), drop_misaddressed);
	expect_dropped(udp_frame(0xffffffffu, 7000, req), drop_misaddressed);
	expect_dropped(udp_frame(htonl(0xe0000001), 7000, req), drop_misaddressed);
	/* to our address, but another MAC: transit traffic in promiscuous mode */
	frame_spec other_mac;
	const u8 broadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	other_mac.dst_mac = broadcast;
	expect_dropped(build_frame(other_mac, req), drop_misaddressed);
}

TEST(Frame, DropsFragmentsAndMalformedFrames)
{
	expect_dropped(udp_frame(server_ip, 7000, req, 0x2000), drop_fragment);
	expect_dropped(udp_frame(server_ip, 7000, req, 0x0010), drop_fragment);

	std::vector<u8> truncated = udp_frame(server_ip, 7000, req);
	/* not resize(): GCC 12 sees a memset of -5 bytes there (-Wstringop-overflow) */
	truncated.erase(truncated.end() - 4, truncated.end());
	expect_dropped(truncated, drop_malformed);

	std::vector<u8> arp = udp_frame(server_ip, 7000, req);
	store_be16(&arp[12], 0x0806);
	expect_dropped(arp, drop_malformed);

	std::vector<u8> bad_ip_sum = udp_frame(server_ip, 7000, req);
	bad_ip_sum[14 + 10] ^= 0x40;
	expect_dropped(bad_ip_sum, drop_malformed);

	std::vector<u8> long_udp = udp_frame(server_ip, 7000, req);
	store_be16(&long_udp[14 + 20 + 4], 8 + header_size + 1);
	expect_dropped(long_udp, drop_malformed);
}

TEST(Frame, DropsSourcesNoReplyMayGoTo)
{
	const u8 broadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	const u8 multicast[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
	for (const u8 *mac : {broadcast, multicast}) {
		frame_spec spec;
		spec.src_mac = mac;
		expect_dropped(build_frame(spec, req), drop_source);
	}
	for (u32 ip : {0x00000000u, 0x00010203u, 0x7f000001u, 0x7f123456u, 0xe0000001u,
		       0xefffffffu, 0xf0000001u, 0xffffffffu, 0x0a00020fu /* its own */}) {
		frame_spec spec;
		spec.src_ip = htonl(ip);
		expect_dropped(build_frame(spec, req), drop_source);
	}
	frame_spec port0;
	port0.src_port = 0;
	expect_dropped(build_frame(port0, req), drop_source);

	/* the edges of what is fine */
	for (u32 ip : {0x01000000u, 0x7effffffu, 0x80000000u, 0xdfffffffu}) {
		frame_spec spec;
		spec.src_ip = htonl(ip);
		EXPECT_TRUE(ours(build_frame(spec, req))) << std::hex << ip;
	}
	EXPECT_FALSE(martian_source(htonl(0x0a000202), server_ip));
}

TEST(Frame, VerifiesUdpChecksumsThatAreThere)
{
	frame_spec spec;
	spec.udp_checksum = true;
	std::vector<u8> payload = request(op_write, 0, 1023, 0, 1023);	/* odd length too */
	std::vector<u8> good = build_frame(spec, payload);
	EXPECT_TRUE(ours(good));

	std::vector<u8> bad_data = good;
	bad_data.back() ^= 1;
	expect_dropped(bad_data, drop_checksum);
	std::vector<u8> bad_sum = good;
	bad_sum[14 + 20 + 6] ^= 0x80;
	expect_dropped(bad_sum, drop_checksum);

	/* 0: the sender computed none, which RFC 768 allows */
	EXPECT_TRUE(ours(build_frame(frame_spec(), payload)));
}

TEST(Frame, VlanTagsMustMatchTheInstance)
{
	frame_spec tagged;
	tagged.vlan = 5;
	expect_dropped(build_frame(tagged, req), drop_vlan);		/* untagged instance */
	expect_dropped(build_frame(frame_spec(), req), drop_vlan, server(5));
	frame_spec other;
	other.vlan = 6;
	expect_dropped(build_frame(other, req), drop_vlan, server(5));

	std::vector<u8> f = build_frame(tagged, req);
	frame_layout l{};
	drop_reason why;
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), server(5), header_size, &l, &why));
	EXPECT_EQ(l.vlan, 5);
	EXPECT_EQ(l.l3_offset, 18u);
	EXPECT_EQ(l.payload_offset, 46u);
}

TEST(Frame, ReplyHeadersSwapAddressesAndChecksum)
{
	std::vector<u8> wreq = request(op_write, 512, 1024, 0, 1024);
	std::vector<u8> f = udp_frame(server_ip, 7000, wreq);
	frame_layout l{};
	drop_reason why;
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), server(), header_size, &l, &why));

	reply_route route{};
	route_from_request(l, server(), &route);
	header reply{};
	reply.magic = proto_magic;
	reply.version = proto_version;
	reply.op = op_write | op_reply_bit;
	reply.seq = 0x1122334455667788ull;
	reply.offset = 512;
	reply.length = 1024;
	std::vector<u8> out(reply_headroom + 100, 0);
	u32 len = write_reply_headers(out.data(), route, reply, 100);

	EXPECT_EQ(len, reply_headroom + 100);
	EXPECT_EQ(0, memcmp(&out[0], client_mac, 6));
	EXPECT_EQ(0, memcmp(&out[6], server_mac, 6));
	EXPECT_EQ(load_be16(&out[12]), 0x0800);
	const u8 *ip = &out[14];
	EXPECT_EQ(ip[0], 0x45);
	EXPECT_EQ(load_be16(ip + 2), 20u + 8 + 54 + 100);
	EXPECT_EQ(ipv4_checksum(ip, 20), 0) << "a valid header sums to 0xffff";
	EXPECT_EQ(0, memcmp(ip + 12, &server_ip, 4));
	EXPECT_EQ(0, memcmp(ip + 16, &client_ip, 4));
	const u8 *udp = ip + 20;
	EXPECT_EQ(load_be16(udp), 7000);
	EXPECT_EQ(load_be16(udp + 2), 40000);
	EXPECT_EQ(load_be16(udp + 4), 8u + 54 + 100);
	EXPECT_EQ(load_be16(udp + 6), 0) << "UDP checksum not computed";
	header back{};
	ASSERT_TRUE(decode_header(udp + 8, header_size, &back));
	EXPECT_EQ(back.op, op_write | op_reply_bit);
	EXPECT_EQ(back.seq, 0x1122334455667788ull);
	EXPECT_EQ(reply_headroom % 4, 0u) << "data starts dword-aligned";
}

TEST(Frame, ReplyComesFromTheNicsOwnMac)
{
	std::vector<u8> f = udp_frame(server_ip, 7000, req);
	frame_layout l{};
	drop_reason why;
	endpoint me = server();
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), me, header_size, &l, &why));
	const u8 changed[6] = {0x02, 0, 0, 0, 0, 0x42};
	memcpy(me.mac, changed, 6);
	reply_route route{};
	route_from_request(l, me, &route);
	EXPECT_EQ(0, memcmp(route.src_mac, changed, 6));
	EXPECT_EQ(0, memcmp(route.dst_mac, client_mac, 6));
}

TEST(Frame, TaggedReplyCarriesTheTag)
{
	frame_spec tagged;
	tagged.vlan = 5;
	std::vector<u8> f = build_frame(tagged, req);
	frame_layout l{};
	drop_reason why;
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), server(5), header_size, &l, &why));
	reply_route route{};
	route_from_request(l, server(5), &route);
	header reply{};
	reply.magic = proto_magic;
	reply.version = proto_version;
	reply.op = op_read | op_reply_bit;
	reply.seq = 1;
	reply.length = 512;
	std::vector<u8> out(frame_headers_size(true) + header_size + 512, 0);
	EXPECT_EQ(write_reply_headers(out.data(), route, reply, 512), 100u + 512);
	EXPECT_EQ(load_be16(&out[12]), 0x8100);
	EXPECT_EQ(load_be16(&out[14]), 5);
	EXPECT_EQ(load_be16(&out[16]), 0x0800);
	EXPECT_EQ(ipv4_checksum(&out[18], 20), 0);
	EXPECT_EQ(reply_header(out).seq, 1u);
}

TEST(Frame, OnesSumOfOddLengths)
{
	auto fold = [](u64 sum) {
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		return sum;
	};
	const u8 bytes[7] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde};
	/* 16-bit words, the odd byte padded with a zero byte (RFC 1071) */
	EXPECT_EQ(fold(ones_sum(bytes, 7, 0)), fold(0x1234u + 0x5678u + 0x9abcu + 0xde00u));
	EXPECT_EQ(fold(ones_sum(bytes, 5, 1)), fold(1u + 0x1234u + 0x5678u + 0x9a00u));
	EXPECT_EQ(fold(ones_sum(bytes, 3, 0)), fold(0x1234u + 0x5600u));
}

/* The word-at-a-time sum against RFC 1071's, byte pair by byte pair. */
TEST(Frame, OnesSumOfLongRunsAsByBytePairs)
{
	auto fold = [](u64 sum) {
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		return sum;
	};
	std::vector<u8> bytes(2100);
	u32 x = 12345;

	for (auto &b : bytes) {
		x = x * 1103515245u + 12345u;
		b = (u8)(x >> 16);
	}
	/* runs of every length around the word size, at every alignment; all 0xff too */
	for (int ff = 0; ff < 2; ff++) {
		if (ff)
			std::fill(bytes.begin(), bytes.end(), 0xff);
		for (u32 start = 0; start < 9; start++) {
			for (u32 len : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 23u, 24u, 63u, 64u, 1024u, 1031u,
					2048u, 2091u}) {
				u64 want = 7;

				for (u32 i = 0; i + 1 < len; i += 2)
					want += (u32)bytes[start + i] << 8 | bytes[start + i + 1];
				if (len & 1)
					want += (u32)bytes[start + len - 1] << 8;
				EXPECT_EQ(fold(ones_sum(&bytes[start], len, 7)), fold(want))
					<< "start " << start << " len " << len << " ff " << ff;
			}
		}
	}
}

TEST(Frame, Ipv4ChecksumKnownVector)
{
	/* The classic example header from RFC 1071 discussions (checksum b861). */
	const u8 hdr[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			    0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
	EXPECT_EQ(ipv4_checksum(hdr, 20), 0xb861);
}

/* ---- what the engine asks of the frame ---- */

TEST(Frame, TheInstancesEndAndTheRoomItsRepliesTake)
{
	netblk_core_config c{};
	c.local_ip = server_ip;
	c.port = server_port;
	memcpy(c.local_mac, server_mac, 6);
	frame_local l;
	frame_local_init(&l, c);
	EXPECT_EQ(frame_headroom(l), 42u) << "Ethernet, IPv4, UDP";
	EXPECT_EQ(frame_link_size(l), 14u) << "what the MTU does not count";
	endpoint e = frame_endpoint(l);
	EXPECT_EQ(0, memcmp(e.mac, server_mac, 6));
	EXPECT_EQ(e.ip, server_ip);
	EXPECT_EQ(e.port, server_port);
	EXPECT_EQ(e.vlan, 0);
	EXPECT_TRUE(ours(udp_frame(server_ip, server_port, req), e));

	const u8 changed[6] = {0x02, 0, 0, 0, 0, 0x42};
	frame_local_set_mac(&l, changed);
	EXPECT_EQ(0, memcmp(frame_endpoint(l).mac, changed, 6));
	expect_dropped(udp_frame(server_ip, server_port, req), drop_misaddressed, frame_endpoint(l));

	c.vlan = 5;
	frame_local_init(&l, c);
	EXPECT_EQ(frame_headroom(l), 46u);
	EXPECT_EQ(frame_link_size(l), 18u);
	EXPECT_EQ(frame_endpoint(l).vlan, 5);
}

TEST(Frame, PayloadRoomAtAnMtu)
{
	EXPECT_EQ(frame_payload_max(1500), 1472u);
	EXPECT_EQ(frame_payload_max(29), 1u);
	EXPECT_EQ(frame_payload_max(28), 0u);
	EXPECT_EQ(frame_payload_max(0), 0u);
}

TEST(Frame, RoutePeerIsTheRequestsSource)
{
	std::vector<u8> f = udp_frame(server_ip, server_port, req);
	frame_layout l{};
	drop_reason why;
	ASSERT_TRUE(parse_frame(f.data(), (u32)f.size(), server(), header_size, &l, &why));
	reply_route route{};
	route_from_request(l, server(), &route);
	peer_addr p = route_peer(route);
	EXPECT_EQ(p.ip, client_ip);
	EXPECT_EQ(p.port, client_port);
}

TEST(Frame, ThePayloadsHeaderMustBeInTheFirstBuffer)
{
	std::vector<u8> data(512, 1);
	std::vector<u8> f = udp_frame(server_ip, server_port, write_request(0, data));
	u32 payload_at = eth_header_size + ip_udp_size;
	u32 head = payload_at + 20;	/* 20 bytes of the netblk header in the first buffer */
	piece rest = { f.data() + head, (u32)f.size() - head };
	frame_bytes bytes = { f.data(), head, &rest, 1, rest.len };
	frame_layout l{};
	drop_reason why = drop_reasons;

	EXPECT_FALSE(parse_frame(bytes, server(), header_size, &l, &why));
	EXPECT_EQ(why, drop_malformed);
	ASSERT_TRUE(parse_frame(bytes, server(), 20, &l, &why)) << "as much as the caller asks";
	EXPECT_EQ(l.payload_offset, payload_at);
	EXPECT_EQ(l.payload_len, header_size + 512);
	EXPECT_EQ(l.head_len, head);
	EXPECT_TRUE(l.frags);
}
