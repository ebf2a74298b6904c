/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netblk wire protocol v1 (docs/protocol.md): the 30-byte header every
 * request and reply begins with, the INFO payload, the request validation
 * that decides between dropping, refusing and serving a datagram, and the
 * Ethernet/IPv4/UDP framing around it.
 */
#ifndef NETBLK_CORE_PROTOCOL_H
#define NETBLK_CORE_PROTOCOL_H

#include "types.h"

namespace nb {

constexpr u32 proto_magic = 0x4E424C4Bu;	/* "NBLK" */
constexpr u8 proto_version = 1;

enum op_code : u8 {
	op_info = 1,
	op_read = 2,
	op_write = 3,
	op_flush = 4,
};
constexpr u8 op_reply_bit = 0x80;

constexpr u16 flag_fua = 1u << 0;
constexpr u16 flags_known = flag_fua;

/* Reply status: Linux errno values, the same on every architecture netblk runs on. */
enum status_code : u16 {
	status_ok = 0,
	status_eio = 5,
	status_eagain = 11,
	status_einval = 22,
	status_erofs = 30,
	status_erange = 34,
	status_emsgsize = 90,
	status_eprotonosupport = 93,
	status_eopnotsupp = 95,
};

constexpr u32 eth_header_size = 14;
constexpr u32 ipv4_header_size = 20;	/* replies never carry options */
constexpr u32 udp_header_size = 8;
constexpr u32 header_size = 30;
/* IPv4 + UDP + netblk: what a datagram spends before its data. */
constexpr u32 datagram_overhead = ipv4_header_size + udp_header_size + header_size;	/* 58 */
/* Ethernet + the above: a reply's data starts dword-aligned at this offset. */
constexpr u32 reply_headroom = eth_header_size + datagram_overhead;	/* 72 */
constexpr u32 info_payload_size = 32;
constexpr u32 read_datagrams_max = 16;	/* max_read = 16 x max_io */
constexpr u32 mtu_min = 576;

struct header {
	u32 magic;
	u8 version;
	u8 op;
	u16 status;
	u64 handle;
	u64 offset;
	u32 length;
	u16 flags;
};

/* What an instance serves, as INFO tells a client. */
struct geometry {
	u64 size_bytes;
	u32 sector_size;
	u32 max_io;
	u32 max_read;
	u32 slots;
	bool read_only;
	bool volatile_cache;
	bool fua;
};

constexpr u32 info_flag_read_only = 1u << 0;
constexpr u32 info_flag_volatile_cache = 1u << 1;
constexpr u32 info_flag_fua = 1u << 2;

/* Whole sectors that fit one datagram at @mtu; 0 when not even one does. */
u32 max_io_for_mtu(u32 mtu, u32 sector_size);

/* Fills max_io and max_read from the mtu; false when no sector fits. */
bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 mtu, u32 slots,
		   bool read_only, bool volatile_cache, bool fua);

/* False when @len is too short for a header.  Byte order is converted. */
bool decode_header(const u8 *p, u32 len, header *h);
void encode_header(u8 *p, const header &h);
void encode_info(u8 *p, const geometry &g);

enum class verdict : u8 {
	serve,	/* valid: take a slot and do it */
	refuse,	/* answer one header carrying the status */
	drop,	/* answer nothing: malformed, or itself a reply */
};

struct decision {
	verdict what;
	u16 status;	/* for refuse */
};

/*
 * Decide what a datagram for the instance gets.  @udp_payload_len is the
 * length of the UDP payload (netblk header included) as the UDP header says.
 */
decision validate_request(const u8 *payload, u32 udp_payload_len, const geometry &g,
			  header *h);

/* ---- Ethernet / IPv4 / UDP framing ---- */

/* Where a received datagram's parts lie in its frame. */
struct frame_layout {
	u32 l3_offset;		/* IPv4 header */
	u32 udp_offset;		/* UDP header */
	u32 payload_offset;	/* netblk header */
	u32 payload_len;	/* UDP payload, netblk header included */
	u8 src_mac[6], dst_mac[6];
	u32 src_ip, dst_ip;	/* network byte order, as on the wire */
	u16 src_port, dst_port;	/* host byte order */
};

enum class frame_kind : u8 {
	ours,		/* IPv4 UDP to our address and port, unfragmented */
	not_ours,	/* not IPv4/UDP, or another port: the stack's */
	misaddressed,	/* our port, but broadcast/multicast/another address, or a fragment: drop */
	malformed,	/* our port, but lengths that do not add up: drop */
};

/*
 * Classify a received Ethernet frame for an instance on @local_ip (network
 * order) and @port (host order), and find its parts.
 */
frame_kind parse_frame(const u8 *frame, u32 frame_len, u32 local_ip, u16 port,
		       frame_layout *out);

/* The addresses a reply goes back with: the request's, swapped. */
struct reply_route {
	u8 src_mac[6], dst_mac[6];
	u32 src_ip, dst_ip;	/* network order */
	u16 src_port, dst_port;	/* host order */
};

void route_from_request(const frame_layout &req, reply_route *route);

/*
 * Write the 72 bytes of Ethernet, IPv4, UDP and netblk headers of a reply
 * carrying @data_len bytes of data after them, at @frame.  The UDP checksum is
 * 0 ("not computed"): computing it would read the data.  Returns the frame's
 * length.
 */
u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			u32 data_len, u16 ip_id);

/* The IPv4 header checksum over @len bytes (a multiple of 2). */
u16 ipv4_checksum(const u8 *ip_header, u32 len);

} /* namespace nb */

#endif
