// SPDX-License-Identifier: GPL-2.0
/* Builders of netblk requests and of the Ethernet/IPv4/UDP frames around them. */
#ifndef NETBLK_TEST_FRAMES_H
#define NETBLK_TEST_FRAMES_H

#include <arpa/inet.h>
#include <cstring>
#include <vector>

#include "frame.h"
#include "protocol.h"

namespace test {

using namespace nb;

/* The IPv4 frames the tests build and the instance answers in: */
constexpr u32 datagram_overhead = ip_udp_size + header_size;	/* 82 of the MTU before data */
constexpr u32 reply_headroom = frame_headers_size(false) + header_size;	/* 96 */

inline const u8 server_mac[6] = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
inline const u8 client_mac[6] = {0x52, 0x55, 0x0a, 0, 2, 2};
inline const u32 server_ip = htonl(0x0a00020f);	/* 10.0.2.15 */
inline const u32 client_ip = htonl(0x0a000202);	/* 10.0.2.2 */
constexpr u16 server_port = 7000;
constexpr u16 client_port = 40000;

/*
 * The session requests are sent in (fake_start() opens one), and the key
 * they are tagged with: what a client keeps.  seq 0 in request(): the next
 * number; an explicit one sends that number (again, if it was sent before).
 */
struct client_session {
	u32 id = 0;
	u64 token = 0;
	u64 next_seq = 1;
	auth_config auth = {};
};
inline client_session session;

/* A netblk request: header and @payload bytes of 0xa5, tagged if keyed. */
inline std::vector<u8> request(u8 op, u64 offset, u32 length, u16 flags = 0, u32 payload = 0,
			       u64 seq = 0)
{
	std::vector<u8> buf(header_size + payload, 0xa5);
	header h{};
	h.magic = proto_magic;
	h.version = proto_version;
	h.op = op;
	h.flags = flags;
	h.session = session.id;
	h.token = session.token;
	/* an explicit number moves the count on past it: the next is new */
	h.seq = seq ? seq : session.next_seq;
	session.next_seq = (seq > session.next_seq ? seq : session.next_seq) + 1;
	h.offset = offset;
	h.length = length;
	encode_header(buf.data(), h);
	seal(session.auth, buf.data(), buf.data() + header_size, payload);
	return buf;
}

inline std::vector<u8> write_request(u64 offset, const std::vector<u8> &data, u64 seq = 0,
				     u16 flags = 0)
{
	std::vector<u8> buf = request(op_write, offset, (u32)data.size(), flags, 0, seq);
	buf.insert(buf.end(), data.begin(), data.end());
	seal(session.auth, buf.data(), buf.data() + header_size, (u32)data.size());
	return buf;
}

/* A HELLO with @nonce, bringing back @cookie (0: the first of the two). */
inline std::vector<u8> hello_request(u64 nonce, u64 cookie = 0, u16 flags = 0)
{
	std::vector<u8> buf(header_size, 0);
	header h{};
	h.magic = proto_magic;
	h.version = proto_version;
	h.op = op_hello;
	h.flags = flags;
	h.token = cookie;
	h.seq = nonce;
	encode_header(buf.data(), h);
	seal(session.auth, buf.data(), nullptr, 0);
	return buf;
}

/* What a test frame is made of: by default from the client to the server. */
struct frame_spec {
	u32 dst_ip = server_ip;
	u16 dst_port = server_port;
	u16 frag = 0x4000;		/* DF */
	u32 ihl_words = 5;
	u16 vlan = 0;			/* 0: no 802.1Q tag */
	bool udp_checksum = false;	/* compute one (else 0: none) */
	const u8 *dst_mac = server_mac;
	const u8 *src_mac = client_mac;
	u32 src_ip = client_ip;
	u16 src_port = client_port;
};

/* An Ethernet frame carrying @payload over UDP as @spec says, with a valid IPv4 checksum. */
inline std::vector<u8> build_frame(const frame_spec &spec, const std::vector<u8> &payload)
{
	u32 ihl = spec.ihl_words * 4;
	u32 l3 = eth_header_size + (spec.vlan ? vlan_tag_size : 0);
	std::vector<u8> f(l3 + ihl + udp_header_size + payload.size());
	memcpy(&f[0], spec.dst_mac, 6);
	memcpy(&f[6], spec.src_mac, 6);
	if (spec.vlan) {
		store_be16(&f[12], 0x8100);
		store_be16(&f[14], spec.vlan);
	}
	store_be16(&f[l3 - 2], 0x0800);
	u8 *ip = &f[l3];
	ip[0] = (u8)(0x40 | spec.ihl_words);
	store_be16(ip + 2, (u16)(ihl + udp_header_size + payload.size()));
	store_be16(ip + 6, spec.frag);
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &spec.src_ip, 4);
	memcpy(ip + 16, &spec.dst_ip, 4);
	store_be16(ip + 10, ipv4_checksum(ip, ihl));
	u8 *udp = ip + ihl;
	u32 udp_len = udp_header_size + (u32)payload.size();
	store_be16(udp, spec.src_port);
	store_be16(udp + 2, spec.dst_port);
	store_be16(udp + 4, (u16)udp_len);
	memcpy(udp + 8, payload.data(), payload.size());
	if (spec.udp_checksum) {
		u64 sum = ones_sum(ip + 12, 8, 0) + 17 + udp_len;
		sum = ones_sum(udp, udp_len, sum);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		u16 c = (u16)~sum;
		store_be16(udp + 6, c ? c : 0xffff);
	}
	return f;
}

/* An Ethernet frame carrying @payload over UDP from the client to @dst_ip:@dst_port. */
inline std::vector<u8> udp_frame(u32 dst_ip, u16 dst_port, const std::vector<u8> &payload,
				 u16 frag = 0x4000, u32 ihl_words = 5)
{
	frame_spec spec;
	spec.dst_ip = dst_ip;
	spec.dst_port = dst_port;
	spec.frag = frag;
	spec.ihl_words = ihl_words;
	return build_frame(spec, payload);
}

inline std::vector<u8> to_server(const std::vector<u8> &payload)
{
	return udp_frame(server_ip, server_port, payload);
}

/* Where a reply's IPv4 header starts: behind a VLAN tag if it has one. */
inline u32 reply_l3(const std::vector<u8> &frame)
{
	return load_be16(frame.data() + 12) == 0x8100 ? eth_header_size + vlan_tag_size
						      : eth_header_size;
}

/* The netblk header of a reply frame (20-byte IPv4 header, as replies have). */
inline header reply_header(const std::vector<u8> &frame)
{
	header h{};
	decode_header(frame.data() + reply_l3(frame) + ipv4_header_size + udp_header_size,
		      header_size, &h);
	return h;
}

inline std::vector<u8> reply_data(const std::vector<u8> &frame)
{
	return std::vector<u8>(frame.begin() + reply_l3(frame) + datagram_overhead, frame.end());
}

} // namespace test

#endif
