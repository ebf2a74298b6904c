// SPDX-License-Identifier: GPL-2.0
/*
 * The receive path: a datagram from the NIC's softirq, parsed, checked,
 * refused in place or given a slot and queued to the worker (engine.h).
 */
#include "engine.h"

namespace nb {

/*
 * Answer on the spot: the request's own frame becomes the reply, one header
 * carrying the request's handle, offset, length and the status.  A request
 * that got this far has a whole netblk header behind frame headers no
 * shorter than the reply's (frame.h), so the frame has room for them.
 */
netblk_rx_verdict engine::refuse_in_place(rx_counters &c, u8 *data, u32 *len,
					  const reply_route &route, const header &h, u16 status)
{
	header reply = h;

	reply.op = (u8)(h.op | op_reply_bit);
	reply.status = status;
	reply.reserved = 0;
	reply.tag = 0;
	if (status == status_ekeyrejected)
		/* untagged (the client may not have the key): what it needs instead */
		reply.flags = auth_flags();
	*len = write_reply_headers(data, route, reply, 0);
	if (status != status_ekeyrejected)
		seal(auth_, data + *len - header_size, nullptr, 0);
	count_refusal(c.refused_by, status);
	if (status == status_eagain)
		add_once(c.busy, 1);
	return NETBLK_RX_REPLY;
}

/*
 * A datagram of another protocol version, answered in version 1's 30-byte
 * header so that an old client reads its handle and the status: version 2,
 * EPROTONOSUPPORT.  Never longer than the datagram it answers.
 */
netblk_rx_verdict engine::refuse_v1(rx_counters &c, u8 *data, u32 *len,
				    const frame_layout &layout, const reply_route &route)
{
	/*
	 * Its op and v1 bytes 8-27, before the headers overwrite them: the
	 * reply's frame headers may be shorter than the request's (frame.h).
	 */
	u8 op = data[layout.payload_offset + 5];
	u8 handle_offset_length[20];

	copy_bytes(handle_offset_length, data + layout.payload_offset + 8, 20);
	u32 at = write_frame_headers(data, route, v1_header_size);
	u8 *p = data + at;

	store_be32(p, proto_magic);
	p[4] = proto_version;
	p[5] = (u8)(op | op_reply_bit);
	store_be16(p + 6, status_eprotonosupport);
	copy_bytes(p + 8, handle_offset_length, 20);
	store_be16(p + 28, 0);
	*len = at + v1_header_size;
	count_refusal(c.refused_by, status_eprotonosupport);
	add_once(c.old_version, 1);
	return NETBLK_RX_REPLY;
}

/* All @count slots, or none. */
bool engine::take_slots(u32 *indices, u32 count)
{
	for (u32 i = 0; i < count; i++) {
		if (!free_slots_.pop(&indices[i])) {
			while (i-- > 0)
				free_slots_.push(indices[i]);
			return false;
		}
	}
	return true;
}

void engine::fill_slot(slot &s, const header &h, const reply_route &route, u64 now_ns)
{
	s.request = h;
	s.route = route;
	s.frame = nullptr;
	s.reply_at = nullptr;
	s.payload = nullptr;
	s.arrival_ns = now_ns;
	s.retry_ns = 0;
	s.first_tx_ns = 0;
	s.reply_len = 0;
	s.status = status_ok;
	s.tries = 0;
	s.copy = false;
	s.lent = false;
	s.without_disk = false;
	s.windowed = false;
	s.frags = false;
	s.fold = false;
	s.folded = 0;
	s.head_payload = 0;
	s.next = no_slot;
	s.read_len = 0;
	s.first = no_slot;
	s.unreleased = 0;
	s.scattered = false;
}

/*
 * A READ takes a slot for every datagram of its answer, all at once: the
 * request frame holds nothing they need afterwards, so it is freed.  They
 * are chained from the first, which alone is queued (engine.h).
 */
netblk_rx_verdict engine::queue_read(rx_counters &c, u8 *data, u32 *len,
				     const reply_route &route, const header &h, u64 now_ns)
{
	u32 count = (h.length + geo_.max_io - 1) / geo_.max_io;
	u32 indices[read_datagrams_max];

	if (!take_slots(indices, count))
		return refuse_in_place(c, data, len, route, h, status_eagain);

	for (u32 i = 0; i < count; i++) {
		slot &s = slots_[indices[i]];

		fill_slot(s, h, route, now_ns);
		s.request.offset = h.offset + (u64)i * geo_.max_io;
		s.request.length = min(geo_.max_io, h.length - i * geo_.max_io);
		if (i + 1 < count)
			s.next = indices[i + 1];
		if (count > 1)
			s.first = indices[0];
	}
	if (count > 1) {
		slots_[indices[0]].read_len = h.length;
		slots_[indices[0]].unreleased = count;
	}
	requests_.push(indices[0]);
	add_once(c.queued, count);
	return NETBLK_RX_FREE;
}

/* The others: one slot; all but INFO answer in their own frame. */
netblk_rx_verdict engine::queue_one(rx_counters &c, void *frame, u8 *data, u32 *len,
				    const frame_layout &layout, const reply_route &route,
				    const header &h, u64 now_ns)
{
	u32 index;

	if (!take_slots(&index, 1))
		return refuse_in_place(c, data, len, route, h, status_eagain);

	slot &s = slots_[index];
	fill_slot(s, h, route, now_ns);
	/*
	 * A frame in several buffers cannot be the reply (the NIC would send
	 * them all): the slot's own buffer is, and only a WRITE keeps its
	 * frame, for the data.
	 */
	s.frags = layout.frags;
	if (h.op != op_info && (!layout.frags || h.op == op_write)) {
		s.frame = frame;
		s.reply_at = layout.frags ? nullptr : data;
		add_once(c.frames_kept, 1);
	}
	if (h.op == op_write) {
		s.payload = data + layout.payload_offset + header_size;
		s.head_payload = min(h.length, layout.head_len - layout.payload_offset - header_size);
		/*
		 * The disk takes the data where it lies only in one piece it can
		 * DMA from; a multi-buffer frame's is copied (docs/jumbo.md).
		 */
		s.copy = layout.frags || (((uintptr_t)s.payload | h.length) & dma_align_mask_) != 0;
		add_once(c.writes_misaligned, s.copy && !layout.frags);
	}
	requests_.push(index);
	add_once(c.queued, 1);
	return s.frame ? NETBLK_RX_KEPT : NETBLK_RX_FREE;
}

netblk_rx_verdict engine::receive(u32 cpu, void *frame, u8 *data, u32 *len, const piece *frags,
				  u32 nr_frags, u64 now_ns)
{
	rx_counters &c = rx_[cpu];
	endpoint me = frame_endpoint(local_);
	frame_bytes bytes = { data, *len, frags, nr_frags, 0 };
	frame_layout layout;
	reply_route route;
	drop_reason why;
	header h;

	add_once(c.frames_rx, 1);
	for (u32 i = 0; i < nr_frags; i++)
		bytes.frags_len += frags[i].len;
	/* What cannot or must not be answered is dropped, and counted by reason. */
	if (!parse_frame(bytes, me, header_size, &layout, &why)) {
		count_drop(c, why);
		return NETBLK_RX_FREE;
	}
	decision d = validate_header(bytes, layout.payload_offset, layout.payload_len, auth_, &h);
	if (d.what == verdict::drop) {
		count_drop(c, drop_not_request);
		return NETBLK_RX_FREE;
	}
	add_once(c.requests, 1);
	route_from_request(layout, me, &route);
	switch (d.what) {
	case verdict::refuse_v1:
		return refuse_v1(c, data, len, layout, route);
	case verdict::refuse:
		if (d.status == status_ekeyrejected)
			add_once(c.auth_failed, 1);
		return refuse_in_place(c, data, len, route, h, d.status);
	case verdict::hello:
		return hello(c, frame, data, len, layout, route, h, now_ns);
	default:
		return serve_session(c, frame, data, len, layout, route, h, now_ns);
	}
}

/*
 * A HELLO without a valid cookie is answered with one, made from its source
 * address, port and nonce, in a datagram no larger than itself: nothing is
 * kept, and a forged source gets 54 bytes for 54.  One that brings its
 * cookie back proved it receives at that address: the worker opens a
 * session for it.
 */
netblk_rx_verdict engine::hello(rx_counters &c, void *frame, u8 *data, u32 *len,
				const frame_layout &layout, const reply_route &route,
				const header &h, u64 now_ns)
{
	peer_addr from = route_peer(route);

	if (h.token && sessions_.cookie_valid(from.ip, from.port, h.seq, h.token, now_ns))
		return queue_one(c, frame, data, len, layout, route, h, now_ns);

	header reply = h;
	reply.op = (u8)(h.op | op_reply_bit);
	reply.status = status_ok;
	reply.flags = auth_flags() | flag_fold_answers;	/* offered: see open_session() */
	reply.token = sessions_.cookie(from.ip, from.port, h.seq, now_ns);
	*len = write_reply_headers(data, route, reply, 0);
	seal(auth_, data + *len - header_size, nullptr, 0);
	add_once(c.hello_cookies, 1);
	return NETBLK_RX_REPLY;
}

/*
 * Everything but HELLO needs an open session: without one, the client is
 * told (ENOTCONN, one header) and learns nothing of the device.  The
 * worker checks the session again and keeps its replay window.
 */
netblk_rx_verdict engine::serve_session(rx_counters &c, void *frame, u8 *data, u32 *len,
					const frame_layout &layout, const reply_route &route,
					const header &h, u64 now_ns)
{
	peer_addr from = route_peer(route);

	if (!sessions_.matches(h.session, h.token, from.ip, from.port)) {
		add_once(c.not_connected, 1);
		return refuse_in_place(c, data, len, route, h, status_enotconn);
	}
	decision d = validate_op(h, layout.payload_len, geo_);
	if (d.what == verdict::refuse)
		return refuse_in_place(c, data, len, route, h, d.status);
	if (h.op == op_read)
		return queue_read(c, data, len, route, h, now_ns);
	return queue_one(c, frame, data, len, layout, route, h, now_ns);
}

u32 engine::queue_of(u32 cpu, const u8 *data, u32 len)
{
	u32 at = queues_ > 1 ? frame_payload_at(data, len) : 0;
	u32 id = at ? peek_session(data + at, len - at) : 0;
	u32 queue = id ? session_table::queue_of(id, queues_) : queue_;

	if (queue != queue_)
		add_once(rx_[cpu].steered, 1);
	return queue;
}

void engine::rx_sent(u32 cpu, u32 sent, u32 dropped)
{
	add_once(rx_[cpu].frames_tx, sent);
	add_once(rx_[cpu].replies_dropped, dropped);
}

void engine::rx_drop(u32 cpu, drop_reason why)
{
	add_once(rx_[cpu].frames_rx, 1);
	count_drop(rx_[cpu], why);
}

} /* namespace nb */
