// SPDX-License-Identifier: GPL-2.0
/* netblk wire protocol v2: codec, tags, validation and framing.  See protocol.h. */
#include "protocol.h"

namespace nb {

u32 max_io_for_mtu(u32 mtu, u32 sector_size)
{
	if (sector_size == 0 || mtu <= datagram_overhead)
		return 0;
	u32 room = mtu - datagram_overhead;
	return room / sector_size * sector_size;
}

/* A device's limit as one request's length: whole sectors, at most 1 GiB. */
static u32 request_limit(u64 device_bytes, u32 sector_size)
{
	u64 limit = min(device_bytes, (u64)1 << 30);

	return (u32)(limit / sector_size * sector_size);
}

bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 mtu, u32 slots,
		   bool read_only, bool volatile_cache, bool fua, const device_limits &limits)
{
	u32 max_io = max_io_for_mtu(mtu, sector_size);

	if (max_io == 0)
		return false;
	g->size_bytes = size_bytes;
	g->sector_size = sector_size;
	g->physical_block_size = max(limits.physical_block_size, sector_size);
	g->io_opt = limits.io_opt;
	g->max_io = max_io;
	g->max_read = max_io * read_datagrams_max;
	g->slots = slots;
	g->read_only = read_only;
	if (read_only) {
		/*
		 * Nothing a client could write with: a write cache to flush,
		 * FUA, TRIM or WRITE_ZEROES offered would invite requests
		 * refused EROFS, and a block-device client's FLUSHes.
		 */
		g->discard_granularity = 0;
		g->max_trim = 0;
		g->max_write_zeroes = 0;
		g->volatile_cache = false;
		g->fua = false;
		return true;
	}
	g->discard_granularity = limits.discard_granularity;
	g->max_trim = request_limit(limits.max_discard_bytes, sector_size);
	g->max_write_zeroes = request_limit(limits.max_write_zeroes_bytes, sector_size);
	g->volatile_cache = volatile_cache;
	g->fua = fua;
	return true;
}

bool decode_header(const u8 *p, u32 len, header *h)
{
	if (len < header_size)
		return false;
	h->magic = load_be32(p + 0);
	h->version = p[4];
	h->op = p[5];
	h->status = load_be16(p + 6);
	h->flags = load_be16(p + 8);
	h->session = load_be32(p + 10);
	h->token = load_be64(p + 14);
	h->seq = load_be64(p + 22);
	h->offset = load_be64(p + 30);
	h->length = load_be32(p + 38);
	h->reserved = load_be32(p + 42);
	h->tag = load_be64(p + tag_offset);
	return true;
}

void encode_header(u8 *p, const header &h)
{
	store_be32(p + 0, h.magic);
	p[4] = h.version;
	p[5] = h.op;
	store_be16(p + 6, h.status);
	store_be16(p + 8, h.flags);
	store_be32(p + 10, h.session);
	store_be64(p + 14, h.token);
	store_be64(p + 22, h.seq);
	store_be64(p + 30, h.offset);
	store_be32(p + 38, h.length);
	store_be32(p + 42, h.reserved);
	store_be64(p + tag_offset, h.tag);
}

void encode_info(u8 *p, const geometry &g)
{
	u32 flags = 0;

	if (g.read_only)
		flags |= info_flag_read_only;
	if (g.volatile_cache)
		flags |= info_flag_volatile_cache;
	if (g.fua)
		flags |= info_flag_fua;
	if (g.max_trim)
		flags |= info_flag_trim;
	if (g.max_write_zeroes)
		flags |= info_flag_write_zeroes;
	store_be64(p + 0, g.size_bytes);
	store_be32(p + 8, g.sector_size);
	store_be32(p + 12, g.physical_block_size);
	store_be32(p + 16, g.io_opt);
	store_be32(p + 20, g.max_io);
	store_be32(p + 24, g.max_read);
	store_be32(p + 28, flags);
	store_be32(p + 32, g.slots);
	store_be32(p + 36, g.discard_granularity);
	store_be32(p + 40, g.max_trim);
	store_be32(p + 44, g.max_write_zeroes);
	store_be64(p + 48, g.export_id);
}

u64 export_id(const u8 *id, u32 len)
{
	static const u8 name_key[16] = "netblk export";

	return siphash24(siphash_key_from_bytes(name_key), id, len);
}

static bool sector_size_valid(u32 s)
{
	return s >= 512 && s <= 65536 && (s & (s - 1)) == 0;
}

bool decode_info(const u8 *p, u32 len, geometry *g)
{
	if (len < info_payload_size)
		return false;

	u32 flags = load_be32(p + 28);

	g->size_bytes = load_be64(p + 0);
	g->sector_size = load_be32(p + 8);
	g->physical_block_size = load_be32(p + 12);
	g->io_opt = load_be32(p + 16);
	g->max_io = load_be32(p + 20);
	g->max_read = load_be32(p + 24);
	g->slots = load_be32(p + 32);
	g->discard_granularity = load_be32(p + 36);
	g->max_trim = flags & info_flag_trim ? load_be32(p + 40) : 0;
	g->max_write_zeroes = flags & info_flag_write_zeroes ? load_be32(p + 44) : 0;
	g->read_only = flags & info_flag_read_only;
	g->volatile_cache = flags & info_flag_volatile_cache;
	g->fua = flags & info_flag_fua;
	g->export_id = load_be64(p + 48);

	u32 s = g->sector_size;

	if (!sector_size_valid(s) || g->size_bytes % s || !g->max_io || g->max_io % s)
		return false;
	if (!g->max_read || g->max_read % g->max_io ||
	    g->max_read / g->max_io > read_datagrams_max)
		return false;
	if (!g->slots || g->max_trim % s || g->max_write_zeroes % s)
		return false;
	return true;
}

/* ---- tags ---- */

u64 compute_tag(const auth_config &a, const u8 *header_bytes, const u8 *data, u32 data_len)
{
	return compute_tag(a, header_bytes, one_buffer(data, data_len), 0, data_len);
}

u64 compute_tag(const auth_config &a, const u8 *header_bytes, const frame_bytes &f,
		u32 data_offset, u32 data_len)
{
	siphash h(a.key);
	frame_runs runs(f, data_offset, data_len);
	const u8 *p;
	u32 n;

	h.update(header_bytes, tag_offset);
	if (a.data)
		while (runs.next(&p, &n))
			h.update(p, n);
	return h.final();
}

void seal(const auth_config &a, u8 *header_bytes, const u8 *data, u32 data_len)
{
	store_be64(header_bytes + tag_offset,
		   a.keyed ? compute_tag(a, header_bytes, data, data_len) : 0);
}

/* ---- validation ---- */

refusal refusal_of(u16 status)
{
	switch (status) {
	case status_eagain: return refused_eagain;
	case status_einval: return refused_einval;
	case status_erofs: return refused_erofs;
	case status_erange: return refused_erange;
	case status_emsgsize: return refused_emsgsize;
	case status_eopnotsupp: return refused_eopnotsupp;
	case status_enotconn: return refused_enotconn;
	case status_ekeyrejected: return refused_ekeyrejected;
	case status_eprotonosupport: return refused_eprotonosupport;
	case status_estale: return refused_estale;
	case status_eoverflow: return refused_eoverflow;
	case status_eusers: return refused_eusers;
	case status_ealready: return refused_ealready;
	case status_eexist: return refused_eexist;
	default: return refusals;
	}
}

static decision refuse(u16 status) { return { verdict::refuse, status }; }
static constexpr decision serve = { verdict::serve, status_ok };

decision validate_header(const u8 *payload, u32 udp_payload_len, const auth_config &a,
			 header *h)
{
	return validate_header(one_buffer(payload, udp_payload_len), 0, udp_payload_len, a, h);
}

decision validate_header(const frame_bytes &f, u32 payload_offset, u32 udp_payload_len,
			 const auth_config &a, header *h)
{
	const u8 *payload = f.head + payload_offset;

	/* another version's header may be shorter: look at what they all share */
	if (udp_payload_len < v1_header_size || load_be32(payload) != proto_magic ||
	    (payload[5] & op_reply_bit))
		return { verdict::drop, status_ok };
	if (payload[4] != proto_version)
		return { verdict::refuse_v1, status_eprotonosupport };
	if (!decode_header(payload, udp_payload_len, h))
		return { verdict::drop, status_ok };
	/* before anything else: an unkeyed client learns nothing but this */
	if (a.keyed && h->tag != compute_tag(a, payload, f, payload_offset + header_size,
					      udp_payload_len - header_size))
		return refuse(status_ekeyrejected);
	if (h->op < op_info || h->op > op_last)
		return refuse(status_eopnotsupp);
	if ((h->flags & ~(h->op == op_hello ? hello_flags_known : flags_known)) || h->reserved)
		return refuse(status_einval);
	if ((h->flags & flag_fua) && h->op != op_write)
		return refuse(status_einval);
	if (h->op == op_hello) {
		if (h->session || h->seq == 0 || h->offset || h->length ||
		    udp_payload_len != header_size)
			return refuse(status_einval);
		return { verdict::hello, status_ok };
	}
	return serve;
}

/* Whole sectors, not empty, not longer than @limit, inside the device. */
static decision check_extent(const header &h, u32 limit, const geometry &g)
{
	if (h.length == 0)
		return refuse(status_einval);
	if (h.length > limit)
		return refuse(status_emsgsize);
	if (h.offset % g.sector_size || h.length % g.sector_size)
		return refuse(status_einval);
	if (h.offset > g.size_bytes || h.length > g.size_bytes - h.offset)
		return refuse(status_erange);
	return serve;
}

/* Ops that carry no data: their datagram is the header alone. */
static decision check_no_data(u32 udp_payload_len)
{
	return udp_payload_len == header_size ? serve : refuse(status_einval);
}

decision validate_op(const header &h, u32 udp_payload_len, const geometry &g)
{
	if (g.read_only && op_changes_disk(h.op))
		return refuse(status_erofs);

	switch (h.op) {
	case op_info:
		return check_no_data(udp_payload_len);
	case op_flush:
		if (h.offset || h.length)
			return refuse(status_einval);
		return check_no_data(udp_payload_len);
	case op_read:
		if (udp_payload_len != header_size)
			return refuse(status_einval);
		return check_extent(h, g.max_read, g);
	case op_trim:
	case op_write_zeroes: {
		u32 limit = h.op == op_trim ? g.max_trim : g.max_write_zeroes;

		if (!limit)
			return refuse(status_eopnotsupp);
		decision d = check_extent(h, limit, g);
		return d.what == verdict::serve ? check_no_data(udp_payload_len) : d;
	}
	default: /* op_write */ {
		decision d = check_extent(h, g.max_io, g);

		if (d.what == verdict::serve && udp_payload_len != header_size + h.length)
			return refuse(status_einval);
		return d;
	}
	}
}

/* ---- framing ---- */

constexpr u16 ethertype_ipv4 = 0x0800;
constexpr u16 ethertype_vlan = 0x8100;
constexpr u16 vlan_id_mask = 0x0fff;
constexpr u8 ipproto_udp = 17;
constexpr u16 ip_flag_mf = 0x2000;
constexpr u16 ip_frag_offset_mask = 0x1fff;
constexpr u16 ip_flag_df = 0x4000;

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

/* ---- frames in several buffers ---- */

frame_runs::frame_runs(const frame_bytes &f, u32 offset, u32 len)
	: f_(f), buffer_(0), offset_(offset), left_(len)
{
}

bool frame_runs::next(const u8 **p, u32 *n)
{
	while (left_ && buffer_ <= f_.nr_frags) {
		const u8 *base = buffer_ ? f_.frags[buffer_ - 1].data : f_.head;
		u32 size = buffer_ ? f_.frags[buffer_ - 1].len : f_.head_len;

		if (offset_ >= size) {
			/* it begins in a later buffer */
			offset_ -= size;
			buffer_++;
			continue;
		}
		*p = base + offset_;
		*n = min(size - offset_, left_);
		left_ -= *n;
		offset_ = 0;
		buffer_++;
		return true;
	}
	return false;
}

void copy_from_frame(u8 *dst, const frame_bytes &f, u32 offset, u32 len)
{
	frame_runs runs(f, offset, len);
	const u8 *p;
	u32 n;

	while (runs.next(&p, &n)) {
		copy_bytes(dst, p, n);
		dst += n;
	}
}

/* ---- framing ---- */

bool parse_frame(const frame_bytes &f, const endpoint &local, frame_layout *out,
		 drop_reason *why)
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
	 * The netblk header (or as much of one as there is) in the first
	 * buffer: every NIC puts more than that there.
	 */
	if (l3 + ihl + udp_header_size + min(udp_len - udp_header_size, header_size) > frame_len)
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

u64 ones_sum(const u8 *p, u32 len, u64 sum)
{
	/*
	 * Big-endian 32-bit words into a 64-bit accumulator: the carries
	 * collect in the upper half and fold in at the end (RFC 1071's
	 * "deferred carries"), four bytes an addition.
	 */
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

static u16 fold(u64 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (u16)sum;
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

u32 write_frame_headers(u8 *frame, const reply_route &route, u32 payload_len, u16 ip_id)
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
	store_be16(ip + 4, ip_id);
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

u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			u32 data_len, u16 ip_id)
{
	u32 at = write_frame_headers(frame, route, header_size + data_len, ip_id);

	encode_header(frame + at, reply);
	return at + header_size + data_len;
}

} /* namespace nb */
