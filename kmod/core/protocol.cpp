// SPDX-License-Identifier: GPL-2.0
/* netblk wire protocol v2: codec, tags and validation.  See protocol.h. */
#include "protocol.h"

namespace nb {

u32 max_io_for_payload(u32 payload_max, u32 sector_size)
{
	if (sector_size == 0 || payload_max <= header_size)
		return 0;
	u32 room = payload_max - header_size;
	return room / sector_size * sector_size;
}

/* A device's limit as one request's length: whole sectors, at most 1 GiB. */
static u32 request_limit(u64 device_bytes, u32 sector_size)
{
	u64 limit = min(device_bytes, (u64)1 << 30);

	return (u32)(limit / sector_size * sector_size);
}

bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 payload_max, u32 slots,
		   bool read_only, bool volatile_cache, bool fua, const device_limits &limits)
{
	u32 max_io = max_io_for_payload(payload_max, sector_size);

	if (max_io == 0)
		return false;
	g->size_bytes = size_bytes;
	g->sector_size = sector_size;
	g->physical_block_size = max(limits.physical_block_size, sector_size);
	g->io_opt = limits.io_opt;
	g->max_io = max_io;
	g->max_read = max_io * read_datagrams_max;
	g->slots = slots;
	g->queues = 1;	/* the engine says how many the instance has */
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

u32 peek_session(const u8 *p, u32 len)
{
	if (len < header_size || load_be32(p) != proto_magic || p[4] != proto_version ||
	    p[5] == op_hello)
		return 0;
	return load_be32(p + 10);
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
	store_be32(p + 56, g.queues);
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
	/* 56 bytes (a server before queues=), or 60 and more: not cut in between */
	if (len < info_payload_min || (len > info_payload_min && len < info_payload_size))
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
	g->queues = len >= info_payload_size ? load_be32(p + 56) : 1;

	u32 s = g->sector_size;

	if (!sector_size_valid(s) || g->size_bytes % s || !g->max_io || g->max_io % s)
		return false;
	if (!g->max_read || g->max_read % g->max_io ||
	    g->max_read / g->max_io > read_datagrams_max)
		return false;
	if (!g->slots || !g->queues || g->max_trim % s || g->max_write_zeroes % s)
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

} /* namespace nb */
