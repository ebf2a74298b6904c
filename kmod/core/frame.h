/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Ethernet (802.1Q-tagged or not), IPv4 and UDP framing around netblk's
 * datagrams, which the XDP transport receives and sends: a received frame
 * parsed and checked, the route its reply goes back by, a reply's headers
 * written, the checksums.  The netblk header inside is protocol.h's.
 */
#ifndef NETBLK_CORE_FRAME_H
#define NETBLK_CORE_FRAME_H

#include "frame_bytes.h"
#include "protocol.h"

namespace nb {

constexpr u32 vlan_tag_size = 4;	/* an 802.1Q tag after the source MAC */

/* Bytes of headers before a reply's data: 96, or 100 with a VLAN tag. */
constexpr u32 reply_headers_size(bool tagged)
{
	return reply_headroom + (tagged ? vlan_tag_size : 0);
}

/*
 * The instance's own end of the link: what a request must be addressed to,
 * and what its replies come from.
 */
struct endpoint {
	u8 mac[6];		/* the NIC's own address */
	u16 vlan;		/* the 802.1Q VLAN served, 0: untagged frames only */
	u32 ip;			/* network order */
	u16 port;		/* host order */
};

/*
 * Why a frame steered to an instance is dropped unanswered.  Counted each
 * on its own (netblk_genl.h NETBLK_S_DROP_*); `bad` is their sum.
 */
enum drop_reason : u8 {
	drop_malformed,		/* not a whole IPv4/UDP datagram, or a bad IPv4 header checksum */
	drop_fragment,		/* an IPv4 fragment: there is no reassembly */
	drop_multibuffer,	/* an XDP frame in several buffers */
	drop_misaddressed,	/* not to the NIC's MAC, the instance's address and port */
	drop_vlan,		/* tagged for a VLAN the instance does not serve, or untagged for one that does */
	drop_source,		/* from where no reply may go: group MAC, martian IPv4, port 0 */
	drop_checksum,		/* a UDP checksum that does not add up */
	drop_not_request,	/* no netblk request: too short, wrong magic, or a reply */
	drop_reasons,		/* how many there are */
};

/* Where a received datagram's parts lie in its frame. */
struct frame_layout {
	u32 l3_offset;		/* IPv4 header: 14, or 18 behind a VLAN tag */
	u32 udp_offset;		/* UDP header */
	u32 payload_offset;	/* netblk header */
	u32 payload_len;	/* UDP payload, netblk header included */
	u32 head_len;		/* bytes of the frame in its first buffer */
	bool frags;		/* it goes on in other buffers */
	u16 vlan;		/* the tag's VLAN id, 0 when untagged */
	u8 src_mac[6];
	u32 src_ip, dst_ip;	/* network byte order, as on the wire */
	u16 src_port, dst_port;	/* host byte order */
};

/*
 * Whether a received Ethernet frame is a datagram for @local: IPv4 UDP to its
 * address and port on its VLAN, unfragmented, from a source a reply may go
 * to, with lengths that add up and checksums that hold (a UDP checksum of 0
 * is the sender's choice not to have one), and its headers -- netblk's too --
 * in its first buffer.  Fills @out when it is; otherwise *@why says what is
 * wrong.  Verifying the UDP checksum reads the payload.
 */
bool parse_frame(const frame_bytes &f, const endpoint &local, frame_layout *out,
		 drop_reason *why);

inline bool parse_frame(const u8 *frame, u32 frame_len, const endpoint &local,
			frame_layout *out, drop_reason *why)
{
	return parse_frame(one_buffer(frame, frame_len), local, out, why);
}

/* Whether an IPv4 source address (network order) is one no reply may go to. */
bool martian_source(u32 src_ip, u32 local_ip);

/* The addresses a reply goes back with. */
struct reply_route {
	u8 src_mac[6], dst_mac[6];
	u16 vlan;		/* 0: untagged */
	u32 src_ip, dst_ip;	/* network order */
	u16 src_port, dst_port;	/* host order */
};

/*
 * Back to where the request came from, from @local: the reply's source MAC is
 * the NIC's own, never whatever the request was sent to.
 */
void route_from_request(const frame_layout &req, const endpoint &local, reply_route *route);

/*
 * Write the reply's Ethernet (with the route's VLAN tag, if any), IPv4, UDP
 * and netblk headers -- reply_headers_size() bytes -- for @data_len bytes of
 * data after them, at @frame.  The UDP checksum is 0 ("not computed"):
 * computing it would read the data.  Returns the frame's length.
 */
u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			u32 data_len, u16 ip_id);

/*
 * The Ethernet, IPv4 and UDP headers alone, for @payload_len bytes of UDP
 * payload after them; returns where the payload begins in @frame.
 */
u32 write_frame_headers(u8 *frame, const reply_route &route, u32 payload_len, u16 ip_id);

/* The IPv4 header checksum over @len bytes (a multiple of 2). */
u16 ipv4_checksum(const u8 *ip_header, u32 len);

/*
 * The ones' complement sum (RFC 1071) of @len bytes added to @sum, not yet
 * folded to 16 bits nor complemented; @len may be odd.
 */
u64 ones_sum(const u8 *p, u32 len, u64 sum);

/* Whether a UDP datagram's checksum holds (or is 0: not computed). */
bool udp_checksum_ok(const u8 *ip_header, const u8 *udp, u32 udp_len);
/* The same for the datagram at @udp_offset of a frame of several buffers. */
bool udp_checksum_ok(const u8 *ip_header, const frame_bytes &f, u32 udp_offset, u32 udp_len);

} /* namespace nb */

#endif
