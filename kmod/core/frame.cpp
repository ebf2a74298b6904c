// SPDX-License-Identifier: GPL-2.0
/* Ethernet/IPv4/UDP framing of netblk's datagrams.  See frame.h. */
#include "frame.h"

namespace nb {

/* ---- framing ---- */

constexpr u16 ethertype_ipv4 = 0x0800;
constexpr u16 ethertype_vlan = 0x8100;
constexpr u16 vlan_id_mask = 0x0fff;
constexpr u8 ipproto_udp = 17;
constexpr u16 ip_flag_mf = 0x2000;
constexpr u16 ip_frag_offset_mask = 0x1fff;
constexpr u16 ip_flag_df = 0x4000;

static u64 pack_mac(const u8 *mac)
{
	u64 v = 0;

	for (u32 i = 0; i < 6; i++)
		v = v << 8 | mac[i];
	return v;
}

void frame_local_init(frame_local *l, const netblk_core_config &config)
{
	l->ip = config.local_ip;
	l->port = config.port;
	l->vlan = config.vlan;
	frame_local_set_mac(l, config.local_mac);
}

void frame_local_set_mac(frame_local *l, const u8 *mac)
{
	__atomic_store_n(&l->mac, pack_mac(mac), __ATOMIC_RELAXED);
}

/* Multicast and broadcast MACs have the group bit, the first byte's lowest. */
static bool group_mac(const u8 *mac) { return mac[0] & 1; }

static bool same_mac(const u8 *a, const u8 *b)
{
	return load_be32(a) == load_be32(b) && load_be16(a + 4) == load_be16(b + 4);
}

bool martian_source(u32 src_ip, u32 local_ip)
{
	u8 first = (u8)(load_be32((const u8 *)&src_ip) >> 24);

	/*
	 * "this network" 0/8, loopback 127/8, and 224/3: multicast 224/4,
	 * reserved 240/4 and the limited broadcast 255.255.255.255 -- none is
	 * a host a reply can go to -- and the NIC's own address.
	 */
	return first == 0 || first == 127 || first >= 224 || src_ip == local_ip;
}

/* The Ethernet header, and the VLAN tag if there is one: where IPv4 begins, or 0. */
static u32 parse_ethernet(const u8 *frame, u32 frame_len, u16 *vlan)
{
	u16 type = load_be16(frame + 12);
	u32 l3 = eth_header_size;

	*vlan = 0;
	if (type == ethertype_vlan) {
		if (frame_len < eth_header_size + vlan_tag_size)
			return 0;
		*vlan = load_be16(frame + 14) & vlan_id_mask;
		type = load_be16(frame + 16);
		l3 += vlan_tag_size;
	}
	return type == ethertype_ipv4 ? l3 : 0;
}

static bool fail(drop_reason *why, drop_reason reason)
{
	*why = reason;
	return false;
}

u32 frame_payload_at(const u8 *frame, u32 head_len)
{
	u16 vlan;
	u32 l3, at;

	if (head_len < eth_header_size + ipv4_header_size + udp_header_size)
		return 0;
	l3 = parse_ethernet(frame, head_len, &vlan);
	if (!l3 || head_len < l3 + ipv4_header_size)
		return 0;
	at = l3 + (u32)(frame[l3] & 0x0f) * 4 + udp_header_size;
	return at <= head_len ? at : 0;
}

bool parse_frame(const frame_bytes &f, const endpoint &local, u32 payload_head,
		 frame_layout *out, drop_reason *why)
{
	const u8 *frame = f.head;
	/* the headers are read in the first buffer; lengths count them all */
	u32 frame_len = f.head_len;
	u32 total_len = f.head_len + f.frags_len;

	if (frame_len < eth_header_size + ipv4_header_size + udp_header_size)
		return fail(why, drop_malformed);

	u16 vlan;
	u32 l3 = parse_ethernet(frame, frame_len, &vlan);

	if (!l3 || frame_len < l3 + ipv4_header_size)
		return fail(why, drop_malformed);

	const u8 *ip = frame + l3;
	u32 ihl = (u32)(ip[0] & 0x0f) * 4;
	u32 ip_total = load_be16(ip + 2);

	if ((ip[0] >> 4) != 4 || ihl < ipv4_header_size || ip[9] != ipproto_udp ||
	    ip_total < ihl + udp_header_size || l3 + ihl + udp_header_size > frame_len ||
	    l3 + ip_total > total_len ||
	    ipv4_checksum(ip, ihl) != 0)
		return fail(why, drop_malformed);
	if (load_be16(ip + 6) & (ip_flag_mf | ip_frag_offset_mask))
		return fail(why, drop_fragment);

	const u8 *udp = ip + ihl;
	u32 udp_len = load_be16(udp + 4);
	u32 dst_ip, src_ip;

	if (udp_len < udp_header_size || udp_len > ip_total - ihl)
		return fail(why, drop_malformed);
	copy_bytes((u8 *)&src_ip, ip + 12, 4);
	copy_bytes((u8 *)&dst_ip, ip + 16, 4);
	if (!same_mac(frame, local.mac) || dst_ip != local.ip || load_be16(udp + 2) != local.port)
		return fail(why, drop_misaddressed);
	if (vlan != local.vlan)
		return fail(why, drop_vlan);
	/*
	 * A reply goes to the request's source: a group MAC would broadcast
	 * it, a martian address would send it where no host is.
	 */
	if (group_mac(frame + 6) || martian_source(src_ip, local.ip) || load_be16(udp) == 0)
		return fail(why, drop_source);
	/*
	 * The payload's header (or as much of one as there is) in the first
	 * buffer: every NIC puts more than that there.
	 */
	if (l3 + ihl + udp_header_size + min(udp_len - udp_header_size, payload_head) > frame_len)
		return fail(why, drop_malformed);
	if (!udp_checksum_ok(ip, f, l3 + ihl, udp_len))
		return fail(why, drop_checksum);

	out->l3_offset = l3;
	out->udp_offset = l3 + ihl;
	out->payload_offset = out->udp_offset + udp_header_size;
	out->payload_len = udp_len - udp_header_size;
	out->head_len = f.head_len;
	out->frags = f.nr_frags != 0;
	out->vlan = vlan;
	copy_bytes(out->src_mac, frame + 6, 6);
	out->src_ip = src_ip;
	out->dst_ip = dst_ip;
	out->src_port = load_be16(udp);
	out->dst_port = local.port;
	return true;
}

void route_from_request(const frame_layout &req, const endpoint &local, reply_route *route)
{
	copy_bytes(route->dst_mac, req.src_mac, 6);
	copy_bytes(route->src_mac, local.mac, 6);
	route->vlan = req.vlan;
	route->src_ip = req.dst_ip;
	route->dst_ip = req.src_ip;
	route->src_port = req.dst_port;
	route->dst_port = req.src_port;
}

static u16 fold(u64 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (u16)sum;
}

static inline u64 load_word(const u8 *p)
{
	u64 w;

	__builtin_memcpy(&w, p, 8);
	return w;
}

static inline u64 add_carry(u64 sum, u64 w)
{
	sum += w;
	return sum + (sum < w);
}

/*
 * The ones' complement sum of whole 8-byte words in the CPU's byte order,
 * folded to 16 bits: a 64-bit add with its carry added back in (add, adc),
 * eight bytes an addition.  The sum of little-endian words is the sum of
 * big-endian ones with its two bytes swapped (RFC 1071 2(B)).  Four words
 * a turn of the loop: its own cost is then under a tenth of the sum's.
 */
static u16 ones_sum_words(const u8 *p, u32 words)
{
	u64 sum = 0;

	for (; words >= 4; words -= 4, p += 32) {
		sum = add_carry(sum, load_word(p));
		sum = add_carry(sum, load_word(p + 8));
		sum = add_carry(sum, load_word(p + 16));
		sum = add_carry(sum, load_word(p + 24));
	}
	for (; words; words--, p += 8)
		sum = add_carry(sum, load_word(p));
	sum = (sum & 0xffffffff) + (sum >> 32);
	u16 s = fold(sum);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	s = (u16)(s << 8 | s >> 8);
#endif
	return s;
}

u64 ones_sum(const u8 *p, u32 len, u64 sum)
{
	/*
	 * The whole 8-byte words at once (an even count of bytes: the tail
	 * keeps its 16-bit words' alignment), then big-endian 32-bit words
	 * into the 64-bit accumulator: the carries collect in the upper half
	 * and fold in at the end (RFC 1071's "deferred carries").
	 */
	if (len >= 16) {
		sum += ones_sum_words(p, len / 8);
		p += len & ~7u;
		len &= 7;
	}
	while (len >= 4) {
		sum += load_be32(p);
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		sum += load_be16(p);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (u32)p[0] << 8;
	return sum;
}

u16 ipv4_checksum(const u8 *ip_header, u32 len)
{
	return (u16)~fold(ones_sum(ip_header, len, 0));
}

bool udp_checksum_ok(const u8 *ip_header, const u8 *udp, u32 udp_len)
{
	return udp_checksum_ok(ip_header, one_buffer(udp, udp_len), 0, udp_len);
}

bool udp_checksum_ok(const u8 *ip_header, const frame_bytes &f, u32 udp_offset, u32 udp_len)
{
	if (load_be16(f.head + udp_offset + 6) == 0)
		return true;	/* the sender computed none (RFC 768) */

	/* the pseudo-header: addresses, protocol, UDP length */
	u64 sum = ones_sum(ip_header + 12, 8, 0) + ipproto_udp + udp_len;
	frame_runs runs(f, udp_offset, udp_len);
	const u8 *p;
	u32 n, at = 0;

	while (runs.next(&p, &n)) {
		u16 run = fold(ones_sum(p, n, 0));

		/*
		 * A run that begins at an odd offset holds each 16-bit word's
		 * bytes the other way round: its sum, swapped (RFC 1071 2(B)).
		 */
		sum += (at & 1) ? (u16)((run << 8) | (run >> 8)) : run;
		at += n;
	}
	return fold(sum) == 0xffff;
}

u32 write_frame_headers(u8 *frame, const reply_route &route, u32 payload_len)
{
	u32 l3 = eth_header_size;

	copy_bytes(frame, route.dst_mac, 6);
	copy_bytes(frame + 6, route.src_mac, 6);
	if (route.vlan) {
		store_be16(frame + 12, ethertype_vlan);
		store_be16(frame + 14, route.vlan);
		l3 += vlan_tag_size;
	}
	store_be16(frame + l3 - 2, ethertype_ipv4);

	u8 *ip = frame + l3;
	u8 *udp = ip + ipv4_header_size;
	u32 udp_len = udp_header_size + payload_len;
	u32 ip_len = ipv4_header_size + udp_len;

	ip[0] = 0x45;			/* IPv4, 20-byte header */
	ip[1] = 0;			/* DSCP/ECN */
	store_be16(ip + 2, (u16)ip_len);
	store_be16(ip + 4, 0);		/* no ID: DF, never reassembled (RFC 6864) */
	store_be16(ip + 6, ip_flag_df);
	ip[8] = 64;			/* TTL */
	ip[9] = ipproto_udp;
	store_be16(ip + 10, 0);
	copy_bytes(ip + 12, (const u8 *)&route.src_ip, 4);
	copy_bytes(ip + 16, (const u8 *)&route.dst_ip, 4);
	store_be16(ip + 10, ipv4_checksum(ip, ipv4_header_size));

	store_be16(udp + 0, route.src_port);
	store_be16(udp + 2, route.dst_port);
	store_be16(udp + 4, (u16)udp_len);
	store_be16(udp + 6, 0);		/* not computed */
	return l3 + ipv4_header_size + udp_header_size;
}

} /* namespace nb */
