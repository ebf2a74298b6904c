// SPDX-License-Identifier: GPL-2.0
/* netblk wire protocol v1: codec, validation and framing.  See protocol.h. */
#include "protocol.h"

namespace nb {

u32 max_io_for_mtu(u32 mtu, u32 sector_size)
{
	if (sector_size == 0 || mtu <= datagram_overhead)
		return 0;
	u32 room = mtu - datagram_overhead;
	return room / sector_size * sector_size;
}

bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 mtu, u32 slots,
		   bool read_only, bool volatile_cache, bool fua)
{
	u32 max_io = max_io_for_mtu(mtu, sector_size);

	if (max_io == 0)
		return false;
	g->size_bytes = size_bytes;
	g->sector_size = sector_size;
	g->max_io = max_io;
	g->max_read = max_io * read_datagrams_max;
	g->slots = slots;
	g->read_only = read_only;
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
	h->handle = load_be64(p + 8);
	h->offset = load_be64(p + 16);
	h->length = load_be32(p + 24);
	h->flags = load_be16(p + 28);
	return true;
}

void encode_header(u8 *p, const header &h)
{
	store_be32(p + 0, h.magic);
	p[4] = h.version;
	p[5] = h.op;
	store_be16(p + 6, h.status);
	store_be64(p + 8, h.handle);
	store_be64(p + 16, h.offset);
	store_be32(p + 24, h.length);
	store_be16(p + 28, h.flags);
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
	store_be64(p + 0, g.size_bytes);
	store_be32(p + 8, g.sector_size);
	store_be32(p + 12, g.max_io);
	store_be32(p + 16, g.max_read);
	store_be32(p + 20, flags);
	store_be32(p + 24, g.slots);
	store_be32(p + 28, 0);
}

static decision refuse(u16 status) { return { verdict::refuse, status }; }

/* READ and WRITE: whole sectors, not empty, not too long, inside the device. */
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
	return { verdict::serve, status_ok };
}

decision validate_request(const u8 *payload, u32 udp_payload_len, const geometry &g,
			  header *h)
{
	if (!decode_header(payload, udp_payload_len, h) || h->magic != proto_magic)
		return { verdict::drop, status_ok };
	if (h->op & op_reply_bit)
		return { verdict::drop, status_ok };
	if (h->version != proto_version)
		return refuse(status_eprotonosupport);
	if (h->op < op_info || h->op > op_flush)
		return refuse(status_eopnotsupp);
	if (h->flags & ~flags_known)
		return refuse(status_einval);
	if ((h->flags & flag_fua) && h->op != op_write)
		return refuse(status_einval);
	if (g.read_only && (h->op == op_write || h->op == op_flush))
		return refuse(status_erofs);

	switch (h->op) {
	case op_info:
		return { verdict::serve, status_ok };
	case op_flush:
		if (h->offset || h->length)
			return refuse(status_einval);
		return { verdict::serve, status_ok };
	case op_read:
		return check_extent(*h, g.max_read, g);
	default: /* op_write */
		decision d = check_extent(*h, g.max_io, g);
		if (d.what == verdict::serve && udp_payload_len != header_size + h->length)
			return refuse(status_einval);
		return d;
	}
}

/* ---- framing ---- */

constexpr u16 ethertype_ipv4 = 0x0800;
constexpr u8 ipproto_udp = 17;
constexpr u16 ip_flag_mf = 0x2000;
constexpr u16 ip_frag_offset_mask = 0x1fff;
constexpr u16 ip_flag_df = 0x4000;

frame_kind parse_frame(const u8 *frame, u32 frame_len, u32 local_ip, u16 port,
		       frame_layout *out)
{
	if (frame_len < eth_header_size + ipv4_header_size + udp_header_size)
		return frame_kind::not_ours;
	if (load_be16(frame + 12) != ethertype_ipv4)
		return frame_kind::not_ours;

	const u8 *ip = frame + eth_header_size;
	u32 ihl = (u32)(ip[0] & 0x0f) * 4;

	if ((ip[0] >> 4) != 4 || ihl < ipv4_header_size || ip[9] != ipproto_udp)
		return frame_kind::not_ours;
	if (frame_len < eth_header_size + ihl + udp_header_size)
		return frame_kind::not_ours;

	const u8 *udp = ip + ihl;
	u16 frag = load_be16(ip + 6);
	u16 dst_port = load_be16(udp + 2);
	u32 dst_ip;

	copy_bytes((u8 *)&dst_ip, ip + 16, 4);
	/* A later fragment carries no UDP header: what it holds is not a port. */
	if (frag & ip_frag_offset_mask)
		return dst_ip == local_ip ? frame_kind::misaddressed : frame_kind::not_ours;
	if (dst_port != port)
		return frame_kind::not_ours;
	if (dst_ip != local_ip || (frag & ip_flag_mf))
		return frame_kind::misaddressed;

	u32 ip_total = load_be16(ip + 2);
	u32 udp_len = load_be16(udp + 4);

	if (ip_total < ihl + udp_header_size || eth_header_size + ip_total > frame_len ||
	    udp_len < udp_header_size || udp_len > ip_total - ihl)
		return frame_kind::malformed;

	out->l3_offset = eth_header_size;
	out->udp_offset = eth_header_size + ihl;
	out->payload_offset = out->udp_offset + udp_header_size;
	out->payload_len = udp_len - udp_header_size;
	copy_bytes(out->dst_mac, frame, 6);
	copy_bytes(out->src_mac, frame + 6, 6);
	copy_bytes((u8 *)&out->src_ip, ip + 12, 4);
	out->dst_ip = dst_ip;
	out->src_port = load_be16(udp);
	out->dst_port = dst_port;
	return frame_kind::ours;
}

void route_from_request(const frame_layout &req, reply_route *route)
{
	copy_bytes(route->dst_mac, req.src_mac, 6);
	copy_bytes(route->src_mac, req.dst_mac, 6);
	route->src_ip = req.dst_ip;
	route->dst_ip = req.src_ip;
	route->src_port = req.dst_port;
	route->dst_port = req.src_port;
}

u16 ipv4_checksum(const u8 *ip_header, u32 len)
{
	u32 sum = 0;

	for (u32 i = 0; i < len; i += 2)
		sum += load_be16(ip_header + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (u16)~sum;
}

u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			u32 data_len, u16 ip_id)
{
	u8 *ip = frame + eth_header_size;
	u8 *udp = ip + ipv4_header_size;
	u32 udp_len = udp_header_size + header_size + data_len;
	u32 ip_len = ipv4_header_size + udp_len;

	copy_bytes(frame, route.dst_mac, 6);
	copy_bytes(frame + 6, route.src_mac, 6);
	store_be16(frame + 12, ethertype_ipv4);

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

	encode_header(udp + udp_header_size, reply);
	return eth_header_size + ip_len;
}

} /* namespace nb */
