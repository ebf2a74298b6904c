// SPDX-License-Identifier: GPL-2.0
/* Builders of netblk requests and of the Ethernet/IPv4/UDP frames around them. */
#ifndef NETBLK_TEST_FRAMES_H
#define NETBLK_TEST_FRAMES_H

#include <arpa/inet.h>
#include <cstring>
#include <vector>

#include "protocol.h"

namespace test {

using namespace nb;

inline const u8 server_mac[6] = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
inline const u8 client_mac[6] = {0x52, 0x55, 0x0a, 0, 2, 2};
inline const u32 server_ip = htonl(0x0a00020f);	/* 10.0.2.15 */
inline const u32 client_ip = htonl(0x0a000202);	/* 10.0.2.2 */
constexpr u16 server_port = 7000;
constexpr u16 client_port = 40000;

/* A netblk request: header and @payload bytes of 0xa5 (or @data). */
inline std::vector<u8> request(u8 op, u64 offset, u32 length, u16 flags = 0, u32 payload = 0,
			       u64 handle = 0x1122334455667788ull)
{
	std::vector<u8> buf(header_size + payload, 0xa5);
	header h{proto_magic, proto_version, op, 0, handle, offset, length, flags};
	encode_header(buf.data(), h);
	return buf;
}

inline std::vector<u8> write_request(u64 offset, const std::vector<u8> &data, u64 handle,
				     u16 flags = 0)
{
	std::vector<u8> buf = request(op_write, offset, (u32)data.size(), flags, 0, handle);
	buf.insert(buf.end(), data.begin(), data.end());
	return buf;
}

/* An Ethernet frame carrying @payload over UDP from the client to @dst_ip:@dst_port. */
inline std::vector<u8> udp_frame(u32 dst_ip, u16 dst_port, const std::vector<u8> &payload,
				 u16 frag = 0x4000, u32 ihl_words = 5)
{
	u32 ihl = ihl_words * 4;
	std::vector<u8> f(eth_header_size + ihl + udp_header_size + payload.size());
	memcpy(&f[0], server_mac, 6);
	memcpy(&f[6], client_mac, 6);
	store_be16(&f[12], 0x0800);
	u8 *ip = &f[14];
	ip[0] = (u8)(0x40 | ihl_words);
	store_be16(ip + 2, (u16)(ihl + udp_header_size + payload.size()));
	store_be16(ip + 6, frag);
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &client_ip, 4);
	memcpy(ip + 16, &dst_ip, 4);
	u8 *udp = ip + ihl;
	store_be16(udp, client_port);
	store_be16(udp + 2, dst_port);
	store_be16(udp + 4, (u16)(udp_header_size + payload.size()));
	memcpy(udp + 8, payload.data(), payload.size());
	return f;
}

inline std::vector<u8> to_server(const std::vector<u8> &payload)
{
	return udp_frame(server_ip, server_port, payload);
}

/* The netblk header of a reply frame (20-byte IPv4 header, as replies have). */
inline header reply_header(const std::vector<u8> &frame)
{
	header h{};
	decode_header(frame.data() + eth_header_size + ipv4_header_size + udp_header_size,
		      header_size, &h);
	return h;
}

inline std::vector<u8> reply_data(const std::vector<u8> &frame)
{
	return std::vector<u8>(frame.begin() + reply_headroom, frame.end());
}

} // namespace test

#endif
