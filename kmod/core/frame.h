/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Ethernet (802.1Q-tagged or not), IPv4 and UDP framing around netblk's
 * datagrams, which the XDP transport receives and sends: a received frame
 * parsed and checked, the route its reply goes back by, a reply's headers
 * written, the checksums.  The netblk header inside is protocol.h's, and
 * this file knows nothing of it: what a frame carries is its payload.
 *
 * The engine (receive.cpp, transmit.cpp ...) knows frames only as this
 * file's answers, each a direct call or inline -- the data path spends no
 * indirect call on them:
 *  - the instance's end, kept as frame_local (frame_local_init(), _set_mac())
 *    and read once a frame as an endpoint (frame_endpoint());
 *  - a received frame's payload, its own header in the first buffer:
 *    parse_frame()'s frame_layout, of which it reads payload_offset,
 *    payload_len, head_len and frags alone;
 *  - the way back, a reply_route it keeps as a handle (route_from_request())
 *    and the client it names for sessions and cookies (route_peer());
 *  - a reply's headers for a payload of some length, written before it
 *    (write_frame_headers(), which says where the payload begins), never
 *    longer than the request's were: a refusal is written over the request;
 *  - the room they take: frame_headroom(); what of a frame the MTU does not
 *    count: frame_link_size(); the largest payload at an MTU:
 *    frame_payload_max(), which max_io follows.
 *
 * An IPv6 frame would provide the same, and the engine would not change:
 * frame_local and endpoint with a 128-bit address (from a field of
 * netblk_core_config the uapi and the transport would fill); parse_frame()
 * walking the IPv6 header's extension headers to UDP (a Fragment header:
 * drop_fragment), checking the UDP checksum, which IPv6 makes mandatory (0
 * is malformed), over its own pseudo-header; reply_route with 128-bit
 * addresses (a slot's 192 bytes have the room; engine.h asserts its size);
 * write_frame_headers() writing a 40-byte header without extension headers
 * -- and a UDP checksum, which would have to be computed after the netblk
 * header is sealed and folded into (transmit.cpp), over the data; the
 * headroom 62, or 66 tagged (a reply's data then 4-byte aligned, not 8);
 * frame_payload_max() of mtu - 48.  What does not fit today: route_peer()
 * gives a peer as session.h keys it, an IPv4 address and a port in 64 bits;
 * session.h would key on a wider peer (or its hash).
 */
#ifndef NETBLK_CORE_FRAME_H
#define NETBLK_CORE_FRAME_H

#include "core_api.h"
#include "frame_bytes.h"

namespace nb {

constexpr u32 eth_header_size = 14;
constexpr u32 vlan_tag_size = 4;	/* an 802.1Q tag after the source MAC */
constexpr u32 ipv4_header_size = 20;	/* replies never carry options */
constexpr u32 udp_header_size = 8;
/* IPv4 + UDP: what a datagram spends of the MTU before its payload. */
constexpr u32 ip_udp_size = ipv4_header_size + udp_header_size;	/* 28 */

/* Bytes of headers before a reply's payload: 42, or 46 with a VLAN tag. */
constexpr u32 frame_headers_size(bool tagged)
{
	return eth_header_size + (tagged ? vlan_tag_size : 0) + ip_udp_size;
}

/* The largest UDP payload a datagram carries at @mtu; 0 when none. */
constexpr u32 frame_payload_max(u32 mtu)
{
	return mtu > ip_udp_size ? mtu - ip_udp_size : 0;
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
 * The instance's end as the engine keeps it: its address, port and VLAN set
 * once, the NIC's MAC as it changes under frames arriving (a netdev
 * notifier: netblk_core_set_link()), in the low 48 bits of one word stored
 * and read atomically.
 */
struct frame_local {
	u64 mac;
	u32 ip;			/* network order */
	u16 port;		/* host order */
	u16 vlan;		/* 0: untagged */
};

/* From what the instance was started with. */
void frame_local_init(frame_local *l, const netblk_core_config &config);
void frame_local_set_mac(frame_local *l, const u8 *mac);

/*
 * The endpoint a received frame is checked against and its reply comes
 * from: one reading of the MAC for both.
 */
inline endpoint frame_endpoint(const frame_local &l)
{
	u64 mac = __atomic_load_n(&l.mac, __ATOMIC_RELAXED);
	endpoint e;

	for (u32 i = 0; i < 6; i++)
		e.mac[i] = (u8)(mac >> (40 - 8 * i));
	e.vlan = l.vlan;
	e.ip = l.ip;
	e.port = l.port;
	return e;
}

/* Bytes of a reply's headers before its payload, on this instance's link. */
inline u32 frame_headroom(const frame_local &l)
{
	return frame_headers_size(l.vlan != 0);
}

/* Bytes of a frame its link's MTU does not count: the Ethernet header, and its tag. */
inline u32 frame_link_size(const frame_local &l)
{
	return frame_headroom(l) - ip_udp_size;
}

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
	u32 payload_offset;	/* the UDP payload: a netblk header, then data */
	u32 payload_len;	/* its bytes, as the UDP header says */
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
 * is the sender's choice not to have one), and its headers in its first
 * buffer -- the payload's first @payload_head bytes too (its own header), or
 * as many as there are.  Fills @out when it is; otherwise *@why says what is
 * wrong.  Verifying the UDP checksum reads the payload.
 */
bool parse_frame(const frame_bytes &f, const endpoint &local, u32 payload_head,
		 frame_layout *out, drop_reason *why);

inline bool parse_frame(const u8 *frame, u32 frame_len, const endpoint &local, u32 payload_head,
			frame_layout *out, drop_reason *why)
{
	return parse_frame(one_buffer(frame, frame_len), local, payload_head, out, why);
}

/*
 * Where a frame's UDP payload begins in its first @head_len bytes, checking
 * nothing but that the headers are there (0 when they are not): to read
 * which queue a datagram is for before parse_frame() checks it -- there, on
 * that queue.
 */
u32 frame_payload_at(const u8 *frame, u32 head_len);

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

/* The client a reply goes back to, as session.h knows it. */
struct peer_addr {
	u32 ip;			/* network order */
	u16 port;		/* host order */
};

inline peer_addr route_peer(const reply_route &route)
{
	return { route.dst_ip, route.dst_port };
}

/*
 * Write a reply's Ethernet (with the route's VLAN tag, if any), IPv4 and UDP
 * headers -- frame_headers_size() bytes -- for @payload_len bytes of UDP
 * payload after them, at @frame; returns where the payload begins.  The
 * UDP checksum is 0 ("not computed"): computing it would read the data.
 */
u32 write_frame_headers(u8 *frame, const reply_route &route, u32 payload_len);

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
