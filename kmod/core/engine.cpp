// SPDX-License-Identifier: GPL-2.0
/* One instance's data path, minus the kernel.  See engine.h. */
#include "engine.h"

namespace nb {

/* Linux errno values the core returns to the kernel side. */
constexpr int err_nomem = 12;
constexpr int err_inval = 22;

static_assert((int)drop_reasons == NETBLK_DROP_REASONS && (int)drop_multibuffer == NETBLK_DROP_MULTIBUFFER,
	      "core_api.h's drop reasons are protocol.h's");
static_assert(sizeof(piece) == sizeof(netblk_piece) &&
		      offsetof(piece, len) == offsetof(netblk_piece, len),
	      "core_api.h's netblk_piece is protocol.h's piece");
static_assert(op_last + 1 == NETBLK_OP_CODES, "core_api.h's op codes are protocol.h's");
static_assert(session_table::per_source_default == NETBLK_PER_SOURCE_DEFAULT,
	      "core_api.h's default is session.h's");
static_assert(read_datagrams_max <= NETBLK_GATHER_PAGES_MAX, "a gathered READ needs a page a datagram at most");
static_assert((int)refusals == NETBLK_REFUSALS &&
		      (int)refused_eprotonosupport == NETBLK_REFUSED_EPROTONOSUPPORT &&
		      (int)refused_eopnotsupp == NETBLK_REFUSED_EOPNOTSUPP &&
		      (int)refused_eexist == NETBLK_REFUSED_EEXIST,
	      "core_api.h's refusals are protocol.h's");

bool slot_list::init(u32 capacity)
{
	entries = new u32[capacity]();
	head = count = 0;
	mask = capacity - 1;
	return entries != nullptr;
}

void slot_list::destroy()
{
	delete[] entries;
	entries = nullptr;
}

static u64 pack_mac(const u8 *mac)
{
	u64 v = 0;

	for (u32 i = 0; i < 6; i++)
		v = v << 8 | mac[i];
	return v;
}

int engine::init(const netblk_core_config &config)
{
	if (config.slots == 0 || (config.slots & (config.slots - 1)) || config.nr_cpus == 0)
		return -err_inval;
	device_limits limits = {
		config.physical_block_size, config.io_opt, config.discard_granularity,
		config.max_discard_bytes, config.max_write_zeroes_bytes,
	};

	if (!geometry_init(&geo_, config.size_bytes, config.sector_size, config.mtu,
			   config.slots, config.read_only, config.volatile_cache, config.fua,
			   limits))
		return -err_inval;
	geo_.export_id = config.export_id;
	nr_cpus_ = config.nr_cpus;
	local_ip_ = config.local_ip;
	port_ = config.port;
	vlan_ = config.vlan;
	reply_headroom_ = reply_headers_size(config.vlan != 0);
	dma_align_mask_ = config.dma_align_mask;
	/* a datagram's data must lie in one data page: max_io must divide it */
	if (config.gather_page && config.gather_page % geo_.max_io == 0)
		gather_page_ = config.gather_page;
	inst_ = config.inst;
	disk_ = config.disk;
	transport_ = config.transport;
	auth_.keyed = config.keyed;
	auth_.data = config.auth_data;
	auth_.key = siphash_key_from_bytes(config.key);
	set_link(config.link_mtu, config.local_mac);
	if (sessions_.init(config.sessions ? config.sessions : NETBLK_SESSIONS_DEFAULT,
			   config.sessions_per_source, siphash_key_from_bytes(config.secret)))
		return -err_nomem;

	/* value-initialised: counters and slots start at zero */
	slots_ = new slot[config.slots]();
	rx_ = new rx_counters[config.nr_cpus]();
	if (!slots_ || !rx_ || !retry_.init(config.slots) || !unsent_.init(config.slots) ||
	    !scattered_.init(config.slots) || !free_slots_.init(config.slots) || !requests_.init(config.slots) ||
	    !completions_.init(config.slots)) {
		destroy();
		return -err_nomem;
	}
	for (u32 i = 0; i < config.slots; i++)
		free_slots_.push(i);
	return 0;
}

void engine::destroy()
{
	sessions_.destroy();
	completions_.destroy();
	requests_.destroy();
	free_slots_.destroy();
	scattered_.destroy();
	unsent_.destroy();
	retry_.destroy();
	delete[] rx_;
	rx_ = nullptr;
	delete[] slots_;
	slots_ = nullptr;
}

void engine::set_link(u32 mtu, const u8 *mac)
{
	__atomic_store_n(&local_mac_, pack_mac(mac), __ATOMIC_RELAXED);
	__atomic_store_n(&link_mtu_, mtu, __ATOMIC_RELAXED);
}

endpoint engine::local() const
{
	u64 mac = __atomic_load_n(&local_mac_, __ATOMIC_RELAXED);
	endpoint e;

	for (u32 i = 0; i < 6; i++)
		e.mac[i] = (u8)(mac >> (40 - 8 * i));
	e.vlan = vlan_;
	e.ip = local_ip_;
	e.port = port_;
	return e;
}

/* ---- the receive path ---- */

/* By status; validate_header() refuses with no status refusal_of() does not know (unit tested). */
void engine::count_refusal(u64 *refused_by, u16 status)
{
	refusal r = refusal_of(status);

	if (r != refusals)
		add_once(refused_by[r], 1);
}

/*
 * Answer on the spot: the request's own frame becomes the reply, one header
 * carrying the request's handle, offset, length and the status.  A request
 * that got this far has a whole IPv4 header and a whole netblk header behind
 * the same Ethernet header as the reply's, so the frame has room for them.
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
	*len = write_reply_headers(data, route, reply, 0, 0);
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
	 * reply's (no IPv4 options) may start before the request's did.
	 */
	u8 op = data[layout.payload_offset + 5];
	u8 handle_offset_length[20];

	copy_bytes(handle_offset_length, data + layout.payload_offset + 8, 20);
	u32 at = write_frame_headers(data, route, v1_header_size, 0);
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
	endpoint me = local();
	frame_bytes bytes = { data, *len, frags, nr_frags, 0 };
	frame_layout layout;
	reply_route route;
	drop_reason why;
	header h;

	add_once(c.frames_rx, 1);
	for (u32 i = 0; i < nr_frags; i++)
		bytes.frags_len += frags[i].len;
	/* What cannot or must not be answered is dropped, and counted by reason. */
	if (!parse_frame(bytes, me, &layout, &why)) {
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
	if (h.token && sessions_.cookie_valid(layout.src_ip, layout.src_port, h.seq, h.token,
					      now_ns))
		return queue_one(c, frame, data, len, layout, route, h, now_ns);

	header reply = h;
	reply.op = (u8)(h.op | op_reply_bit);
	reply.status = status_ok;
	reply.flags = auth_flags() | flag_fold_answers;	/* offered: see open_session() */
	reply.token = sessions_.cookie(layout.src_ip, layout.src_port, h.seq, now_ns);
	*len = write_reply_headers(data, route, reply, 0, 0);
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
	if (!sessions_.matches(h.session, h.token, layout.src_ip, layout.src_port)) {
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

/* ---- the worker: to the disk ---- */

/* Done without the disk, or not started: its reply comes from reply(). */
void engine::answer_now(u32 index, u16 status)
{
	complete(index, status);
}

/* The slots a request stands for: a READ's datagrams not started apart yet, or itself. */
u32 engine::slots_of(const slot &s) const
{
	return s.read_len ? (s.read_len + geo_.max_io - 1) / geo_.max_io : 1;
}

/*
 * A request the worker answers without sending it to the disk: a READ of
 * several datagrams gets one answer, from its first slot, and its other
 * slots send nothing.
 */
void engine::answer_without_disk(u32 index, u16 status)
{
	slot &s = slots_[index];

	add_once(worker_.submitted, slots_of(s));
	s.without_disk = true;
	if (s.read_len) {
		add_once(worker_.reaped, slots_of(s) - 1);
		s.read_len = 0;
		for (u32 at = s.next, next; at != no_slot; at = next) {
			next = slots_[at].next;
			release_unsent(at);
		}
	}
	answer_now(index, status);
}

/* A duplicate of a request at the disk: it gets no answer of its own. */
void engine::discard(u32 index)
{
	add_once(worker_.submitted, 1);
	add_once(worker_.reaped, 1);
	release_unsent(index);
}

void engine::open_session(u32 index, slot &s, u64 now_ns)
{
	u32 id = 0;
	u64 token = 0;
	session_table::open_result r = sessions_.open(s.route.dst_ip, s.route.dst_port,
						      s.request.seq, now_ns, &id, &token);
	bool fold = s.request.flags & flag_fold_answers;

	if (r != session_table::open_result::full)
		sessions_.find(id, token, s.route.dst_ip, s.route.dst_port)->fold_answers = fold;
	s.request.session = id;
	s.request.token = token;
	/* the answer that opens it says whether its WRITE answers fold: as the client asked */
	s.request.flags = (u16)(auth_flags() | (fold ? flag_fold_answers : 0));
	if (r == session_table::open_result::full)
		refuse(index, status_eusers);
	else
		answer_without_disk(index, status_ok);
}

/* Refused by the worker: one header carrying @status, counted by it. */
void engine::refuse(u32 index, u16 status)
{
	count_refusal(worker_.refused_by, status);
	answer_without_disk(index, status);
}

/*
 * Whether a request the receive path queued goes to the disk: its session
 * must still be open, and its number new to the session's replay window --
 * a duplicate of a request that changes the disk answered gets the same
 * answer again, of one at the disk nothing; a READ or INFO is served again
 * up to serves_max times in all; a number outside the window, or used for
 * another request, is refused.  Everything it does not let through is
 * answered (or dropped) here.
 */
bool engine::admit(u32 index, u64 now_ns)
{
	slot &s = slots_[index];
	const header &h = s.request;
	session_counters &sc = sessions_.counters();
	u16 status = status_ok;

	if (h.op == op_hello) {
		open_session(index, s, now_ns);
		return false;
	}
	session *ss = sessions_.find(h.session, h.token, s.route.dst_ip, s.route.dst_port);
	if (!ss) {
		/* evicted or replaced between the receive path's look and now */
		add_once(worker_.not_connected, 1);
		refuse(index, status_enotconn);
		return false;
	}
	ss->last_used_ns = now_ns;

	/* a READ of several datagrams is admitted as its first: the whole READ */
	u32 check = request_check(h.op, h.flags, h.offset, s.read_len ? s.read_len : h.length);
	switch (ss->window.look(h.seq, check, &status)) {
	case replay_window::state::fresh:
		ss->window.start(h.seq, check);
		if (!op_changes_disk(h.op)) {
			ss->window.finish(h.seq, status_ok);
			count_read(h, s.read_len);
			return true;
		}
		ss->in_flight++;
		s.windowed = true;
		s.fold = ss->fold_answers && h.op == op_write;
		count_change(h);
		return true;
	case replay_window::state::in_flight:
		add_once(sc.duplicates_in_flight, 1);
		discard(index);
		return false;
	case replay_window::state::done:
		if (!op_changes_disk(h.op)) {
			if (!ss->window.serve_again(h.seq)) {
				refuse(index, status_ealready);
				return false;
			}
			add_once(sc.served_again, 1);
			count_read(h, s.read_len);
			return true;
		}
		add_once(sc.duplicates, 1);
		answer_without_disk(index, status);
		return false;
	case replay_window::state::other:
		refuse(index, status_eexist);
		return false;
	case replay_window::state::stale:
		add_once(sc.stale, 1);
		refuse(index, status_estale);
		return false;
	default: /* too_far */
		add_once(sc.too_far, 1);
		refuse(index, status_eoverflow);
		return false;
	}
}

/* A READ (each copy served) or INFO, admitted; @read_len: a READ of several datagrams' length. */
void engine::count_read(const header &h, u32 read_len)
{
	if (h.op != op_read)
		return;
	add_once(worker_.reads, 1);
	add_once(worker_.read_bytes, read_len ? read_len : h.length);
}

/* A request that changes the disk, admitted: counted by kind. */
void engine::count_change(const header &h)
{
	worker_counters &w = worker_;

	switch (h.op) {
	case op_write:
		add_once(w.writes, 1);
		add_once(w.write_bytes, h.length);
		if (h.flags & flag_fua)
			add_once(w.fua_writes, 1);
		break;
	case op_flush:
		add_once(w.flushes, 1);
		break;
	case op_trim:
		add_once(w.trims, 1);
		add_once(w.trim_bytes, h.length);
		break;
	case op_write_zeroes:
		add_once(w.write_zeroes, 1);
		add_once(w.write_zeroes_bytes, h.length);
		break;
	}
}

/* A request started in its window has its answer: its duplicates get it too. */
void engine::window_done(slot &s)
{
	session *ss = sessions_.find(s.request.session, s.request.token, s.route.dst_ip,
				     s.route.dst_port);

	s.windowed = false;
	if (!ss)
		return;		/* never: a session with requests at the disk stays */
	ss->in_flight--;
	if (s.status == status_eagain)
		ss->window.forget(s.request.seq);	/* not executed: may be sent again */
	else
		ss->window.finish(s.request.seq, s.status);
}

/* A WRITE's data to @to, from the buffers of its frame. */
void engine::copy_payload(const slot &s, u8 *to)
{
	piece frags[NETBLK_FRAGS_MAX];
	frame_bytes bytes = { s.payload, s.head_payload, frags, 0, 0 };

	if (s.frags)
		bytes.nr_frags = transport_->frame_frags(inst_, s.frame, (netblk_piece *)frags,
							 NETBLK_FRAGS_MAX);
	copy_from_frame(to, bytes, 0, s.request.length);
}

/* The slot is done with its received frame before its reply: give it back now. */
void engine::let_go_frame(slot &s)
{
	if (!s.frame)
		return;
	transport_->free_frame(inst_, s.frame);
	s.frame = nullptr;
	add_once(worker_.frames_released, 1);
}

int engine::start_write(u32 index, slot &s, bool may_block)
{
	u8 *data = s.payload;
	u32 len = s.request.length;

	/* (a multi-buffer frame's data is in the slot's buffer from its first try on) */
	if (s.copy && s.frame) {
		/*
		 * The disk cannot DMA from where the NIC put the payload
		 * (misaligned for it, or in several buffers): the cases the
		 * CPU copies, counted.
		 */
		u8 *buffer = transport_->slot_buffer(inst_, index);

		if (!buffer) {
			add_once(worker_.no_buffer, 1);
			answer_now(index, status_eagain);
			return 0;
		}
		data = buffer + reply_headroom_;
		copy_payload(s, data);
		add_once(worker_.bytes_copied, len);
		if (s.frags) {
			/* the reply goes in the same buffer, ahead of the data */
			let_go_frame(s);
			s.reply_at = buffer;
			s.payload = data;
		}
	}
	return disk_->submit_io(inst_, index, NETBLK_IO_WRITE, s.request.offset, data, len,
				     s.request.flags & flag_fua, may_block);
}

/*
 * A READ of one datagram, or INFO: answered in the slot's own buffer, the
 * data read in behind the reply's headroom.  No buffer for it: EAGAIN.
 */
int engine::start_read(u32 index, slot &s, bool may_block)
{
	s.reply_at = transport_->slot_buffer(inst_, index);
	if (!s.reply_at) {
		add_once(worker_.no_buffer, 1);
		answer_now(index, status_eagain);
		return 0;
	}
	if (s.request.op == op_info) {
		encode_info(s.reply_at + reply_headroom_, geo_);
		answer_now(index, status_ok);
		return 0;
	}
	return disk_->submit_io(inst_, index, NETBLK_IO_READ, s.request.offset,
				     s.reply_at + reply_headroom_, s.request.length, 0, may_block);
}

/* A READ of several datagrams, not gathered: each datagram goes to the disk on its own. */
void engine::start_datagram_reads(u32 index)
{
	slots_[index].read_len = 0;
	for (u32 at = index, next; at != no_slot; at = next) {
		next = slots_[at].next;
		if (start_read(at, slots_[at], false))
			answer_now(at, status_eio);
	}
}

/*
 * A gathered READ to the disk, in one I/O: its datagrams' data one after
 * another across the data pages of its first slots, datagram i's at
 * i * max_io -- never across two pages, as max_io divides a page.
 */
int engine::start_gathered_read(u32 index, slot &s, bool may_block)
{
	u8 *pages[read_datagrams_max];
	u32 nr = (s.read_len + gather_page_ - 1) / gather_page_;
	u32 per_page = gather_page_ / geo_.max_io;
	u32 count = slots_of(s), at = index;

	for (u32 p = 0; p < nr; p++, at = slots_[at].next) {
		pages[p] = transport_->data_page(inst_, at);
		if (!pages[p]) {
			add_once(worker_.no_buffer, 1);
			answer_now(index, status_eagain);
			return 0;
		}
	}
	at = index;
	for (u32 i = 0; i < count; i++, at = slots_[at].next) {
		slots_[at].payload = pages[i / per_page] + (i % per_page) * geo_.max_io;
		slots_[at].scattered = true;
	}
	return disk_->submit_read_pages(inst_, index, s.request.offset, pages, nr,
					     s.read_len, may_block);
}

/* Slot @index's I/O, its answer when it needs none; non-zero: not started. */
int engine::start_op(u32 index, slot &s, bool may_block)
{
	switch (s.request.op) {
	case op_read:
		if (s.read_len)
			return start_gathered_read(index, s, may_block);
		[[fallthrough]];
	case op_info:
		return start_read(index, s, may_block);
	case op_write:
		return start_write(index, s, may_block);
	case op_trim:
	case op_write_zeroes:
		return disk_->submit_io(inst_, index,
					     s.request.op == op_trim ? NETBLK_IO_DISCARD :
								       NETBLK_IO_WRITE_ZEROES,
					     s.request.offset, nullptr, s.request.length, 0, may_block);
	default: /* op_flush */
		return disk_->submit_io(inst_, index, NETBLK_IO_FLUSH, 0, nullptr, 0, 0,
					     may_block);
	}
}

void engine::start_io(u32 index)
{
	slot &s = slots_[index];
	/* The disk said "again" to it often enough: let it make the worker wait. */
	bool may_block = s.tries >= again_nowait_tries;

	add_once(worker_.submitted, slots_of(s));
	if (may_block)
		add_once(worker_.disk_blocking, 1);
	if (s.request.op == op_read && s.read_len && !gather_page_) {
		start_datagram_reads(index);
		return;
	}
	if (start_op(index, s, may_block))
		answer_now(index, status_eio);
}

/*
 * The disk said "again": try once more after a backoff that doubles each
 * time (a frozen queue answers every try at once: retrying at once would
 * spin), or as soon as the disk finishes something (a full queue has room
 * then).
 */
void engine::retry_later(u32 index, u64 now_ns)
{
	slot &s = slots_[index];

	s.retry_ns = now_ns + (again_backoff_ns << (s.tries - 1));
	if (!retry_.count) {
		/* what the disk finished before this one was refused made no room for it */
		disk_freed_ = false;
		retry_due_ = s.retry_ns;
	} else if (s.retry_ns < retry_due_) {
		retry_due_ = s.retry_ns;
	}
	retry_.push(index);
	add_once(worker_.disk_busy, slots_of(s));
}

u32 engine::submit_retries(u64 now_ns)
{
	u32 n = 0, count = retry_.count;
	bool all = disk_freed_;
	u64 due = NETBLK_NO_WORK;

	if (!count || (!all && now_ns < retry_due_))
		return 0;
	disk_freed_ = false;
	while (count--) {
		u32 index = retry_.pop();

		if (all || slots_[index].retry_ns <= now_ns) {
			start_io(index);
			n++;
		} else {
			retry_.push(index);
			due = min(due, slots_[index].retry_ns);
		}
	}
	retry_due_ = due;
	return n;
}

u32 engine::submit(u64 now_ns)
{
	u32 n = submit_retries(now_ns), index;

	while (requests_.pop(&index)) {
		if (admit(index, now_ns))
			start_io(index);
		n++;
	}
	if (n)
		add_once(worker_.disk_batches, 1);
	return n;
}

void engine::complete(u32 index, u16 status)
{
	slots_[index].status = status;
	completions_.push(index);
}

/* ---- the worker: to the NIC ---- */

/*
 * Slot @index is free again -- a READ's slots only all together, once the
 * last of its datagrams is released: until then, a gathered READ's later
 * datagrams send from its first slots' data pages, which a slot taken
 * again would read other data into.
 */
void engine::give_back(u32 index)
{
	u32 first = slots_[index].first;

	if (first == no_slot) {
		free_slots_.push(index);
		return;
	}
	if (--slots_[first].unreleased)
		return;
	for (u32 at = first; at != no_slot; at = slots_[at].next)
		free_slots_.push(at);
}

/* Its frame is the NIC's now, or freed: the slot is free. */
void engine::release(u32 index)
{
	slot &s = slots_[index];

	if (s.frame) {
		s.frame = nullptr;
		add_once(worker_.frames_released, 1);
	}
	if (s.lent) {
		s.lent = false;
		transport_->reply_done(inst_, index);
	}
	add_once(worker_.replied, 1);
	give_back(index);
}

/* No reply goes out from it: the frame it holds, if any, is freed; the slot is free. */
void engine::release_unsent(u32 index)
{
	slot &s = slots_[index];

	if (s.frame)
		transport_->free_frame(inst_, s.frame);
	release(index);
}

/* Its reply does not go out: the client asks again. */
void engine::drop_reply(u32 index)
{
	add_once(worker_.replies_dropped, 1);
	release_unsent(index);
}

/* A slot back from the disk: build its reply (true), or drop it (false). */
bool engine::finish_io(u32 index, u64 now_ns)
{
	slot &s = slots_[index];
	u32 data_len = 0;

	if (s.windowed)
		window_done(s);

	if (s.status == status_ok) {
		if (s.request.op == op_read)
			data_len = s.request.length;
		else if (s.request.op == op_info)
			data_len = info_payload_size;
		if (s.request.op == op_read || (s.request.op == op_write && !s.copy))
			add_once(worker_.bytes_zerocopy, s.request.length);
	} else if (s.status == status_eio && !s.without_disk) {
		add_once(worker_.io_errors, 1);
	}

	/*
	 * A multi-buffer frame still held (answered before its copy: a
	 * duplicate, ENOTCONN, no buffer) is not the reply: the slot's own
	 * buffer is, or else a spare one.
	 */
	if (s.frags) {
		let_go_frame(s);
		if (!s.reply_at)
			s.reply_at = transport_->slot_buffer(inst_, index);
	}
	/*
	 * A gathered READ's datagrams: the headers in the slot's own buffer,
	 * the data where the disk read it (or none, answered an error).
	 */
	if (s.request.op == op_read && !s.reply_at) {
		s.scattered = s.scattered && s.status == status_ok;
		s.reply_at = transport_->slot_buffer(inst_, index);
	}
	if (!s.reply_at) {
		/* no buffer of the slot's own could be had: EAGAIN, headers alone */
		s.reply_at = transport_->reply_buffer(inst_, index);
		if (!s.reply_at) {
			drop_reply(index);
			return false;
		}
		s.lent = true;
	}
	header reply = s.request;
	reply.op = (u8)(s.request.op | op_reply_bit);
	reply.status = s.status;
	reply.reserved = 0;
	s.reply_len = write_reply_headers(s.reply_at, s.route, reply, data_len, 0);
	if (!foldable(s))
		seal_reply(s, data_len);	/* else reply() does, once it knows what folds in */
	/* The NIC's MTU went down under the instance: never send more than it carries. */
	if (s.reply_len - (reply_headroom_ - datagram_overhead) >
	    __atomic_load_n(&link_mtu_, __ATOMIC_RELAXED)) {
		add_once(worker_.replies_oversized, 1);
		drop_reply(index);
		return false;
	}
	s.first_tx_ns = now_ns;
	record_service_time(s.request.op, now_ns > s.arrival_ns ? now_ns - s.arrival_ns : 0);
	return true;
}

/* Into the histogram, and the op's count and sum (validated: op <= op_last). */
void engine::record_service_time(u8 op, u64 ns)
{
	hist_.record(ns);
	if (op > op_last)
		return;
	add_once(worker_.served[op], 1);
	add_once(worker_.served_ns[op], ns);
}

/*
 * A keyed instance tags its replies as clients tag their requests (with
 * auth=full over a READ's data too, which the CPU then reads).
 */
void engine::seal_reply(slot &s, u32 data_len)
{
	u8 *hdr = s.reply_at + s.reply_len - data_len - header_size;

	seal(auth_, hdr, s.scattered ? s.payload : hdr + header_size, data_len);
}

void engine::tx_entry(netblk_tx &tx, u32 index)
{
	const slot &s = slots_[index];

	tx.frame = s.frame;
	tx.data = s.reply_at;
	tx.slot = index;
	tx.len = s.reply_len;
	tx.frag = nullptr;
	tx.frag_len = 0;
	if (s.scattered) {
		tx.frag = s.payload;
		tx.frag_len = s.request.length;
		tx.len -= tx.frag_len;
	}
}

u32 engine::take_unsent(netblk_tx *batch)
{
	u32 n = 0;

	while (n < NETBLK_TX_BATCH && unsent_.count)
		tx_entry(batch[n++], unsent_.pop());
	return n;
}

/*
 * A NIC that fails every transmit with an error for a second cannot send
 * this instance's replies at all (a CPU it has no XDP queue for, a
 * detached peer): say so once, and for good.
 */
void engine::note_transmit(u32 sent, int error, u64 now_ns)
{
	if (sent || !error) {
		tx_error_streak_ = 0;
		return;
	}
	add_once(worker_.tx_errors, 1);
	if (!tx_error_streak_++)
		tx_error_since_ = now_ns;
	if (!tx_failure_ && tx_error_streak_ >= tx_failure_tries &&
	    now_ns - tx_error_since_ >= tx_failure_ns)
		__atomic_store_n(&tx_failure_, error, __ATOMIC_RELAXED);
}

/* The NIC came back: what it failed before says nothing about it now. */
void engine::tx_rearm()
{
	tx_error_streak_ = 0;
	__atomic_store_n(&tx_failure_, 0, __ATOMIC_RELAXED);
}

/*
 * One transmit.  What the NIC had no room for is offered again a little
 * later (its ring drains as it sends), for up to tx_give_up_ns.
 */
void engine::transmit(netblk_tx *batch, u32 n, u64 now_ns)
{
	int error = 0;
	u32 sent = transport_->transmit(inst_, batch, n, &error);

	add_once(worker_.tx_batches, 1);
	add_once(worker_.frames_tx, sent);
	note_transmit(sent, error, now_ns);
	for (u32 i = 0; i < sent; i++)
		release(batch[i].slot);
	for (u32 i = sent; i < n; i++) {
		u32 index = batch[i].slot;

		if (now_ns - slots_[index].first_tx_ns >= tx_give_up_ns) {
			drop_reply(index);
			continue;
		}
		unsent_.push(index);
		add_once(worker_.tx_deferred, 1);
	}
	if (sent == n) {
		tx_backoff_ns_ = tx_backoff_min_ns;
		return;
	}
	tx_due_ = now_ns + tx_backoff_ns_;
	tx_backoff_ns_ = min(tx_backoff_ns_ * 2, tx_backoff_max_ns);
}

/* A WRITE answered OK whose answer may carry others' or go in another's. */
bool engine::foldable(const slot &s) const
{
	return s.fold && s.status == status_ok && !s.lent;
}

/*
 * Folds slot @index's answer into one of @count built before it in this
 * round, to the same session, at most fold_span numbers below its own: that
 * one's `reserved` bit answers it, and its own frame is freed unsent.  The
 * client finds the same in one datagram as in many, and the instance sends,
 * and the client receives, one where a batch of completions came back.
 */
bool engine::fold_answer(const netblk_tx *built, u32 count, u32 index)
{
	slot &s = slots_[index];

	if (!foldable(s))
		return false;
	for (u32 i = count; i-- > 0;) {
		slot &into = slots_[built[i].slot];
		u64 gap = s.request.seq - into.request.seq;

		if (!foldable(into) || into.request.session != s.request.session ||
		    into.request.token != s.request.token || s.request.seq <= into.request.seq ||
		    gap > fold_span)
			continue;
		into.folded |= 1u << (gap - 1);
		add_once(worker_.answers_folded, 1);
		release_unsent(index);
		return true;
	}
	return false;
}

/* The answers of this round that others may have folded into: their bits, then their tags. */
void engine::seal_folding(const netblk_tx *built, u32 count)
{
	for (u32 i = 0; i < count; i++) {
		slot &s = slots_[built[i].slot];

		if (!foldable(s))
			continue;
		store_be32(s.reply_at + s.reply_len - header_size + reserved_offset, s.folded);
		seal_reply(s, 0);
	}
}

/* The disk answered gathered READ @index: each of its datagrams is answered so. */
void engine::scatter(u32 index)
{
	slot &first = slots_[index];
	u32 count = slots_of(first), at = index;

	first.read_len = 0;
	if (first.scattered)
		add_once(worker_.reads_gathered, 1);	/* once, however often the disk said "again" */
	for (u32 i = 0; i < count; i++, at = slots_[at].next) {
		slots_[at].status = first.status;
		scattered_.push(at);
	}
}

/*
 * The disk said "again": tried again after a backoff (true), or, after
 * again_tries_max tries, answered EAGAIN (false).
 */
bool engine::retry_again(u32 index, u64 now_ns)
{
	slot &s = slots_[index];

	if (++s.tries < again_tries_max) {
		retry_later(index, now_ns);
		return true;
	}
	s.status = status_eagain;
	add_once(worker_.disk_gave_up, 1);
	return false;
}

/*
 * The next slot back from the disk to answer: a datagram of a gathered READ
 * the disk answered, else the next completion not to be tried again --
 * which, the first of a gathered READ, brings all its datagrams.
 */
bool engine::next_done(u32 *index, u64 now_ns)
{
	while (!scattered_.count) {
		if (!completions_.pop(index))
			return false;
		slot &s = slots_[*index];

		add_once(worker_.reaped, slots_of(s));
		if (s.status != NETBLK_IO_AGAIN)
			disk_freed_ = true;
		else if (retry_again(*index, now_ns))
			continue;
		if (!s.read_len)
			return true;
		scatter(*index);
	}
	*index = scattered_.pop();
	return true;
}

u32 engine::reply(u64 now_ns)
{
	netblk_tx *batch = tx_batch_;
	u32 n = 0, moved = 0, index, resends = 0;

	if (unsent_.count && now_ns >= tx_due_)
		moved = n = resends = take_unsent(batch);
	while (n < NETBLK_TX_BATCH && next_done(&index, now_ns)) {
		moved++;
		if (finish_io(index, now_ns) && !fold_answer(batch + resends, n - resends, index))
			tx_entry(batch[n++], index);
	}
	seal_folding(batch + resends, n - resends);
	if (n)
		transmit(batch, n, now_ns);
	return moved;
}

u64 engine::next_work(u64 now_ns) const
{
	u64 due = NETBLK_NO_WORK;

	if (requests_.size() || completions_.size() || scattered_.count)
		return 0;
	if (retry_.count)
		due = disk_freed_ ? 0 : retry_due_;
	if (unsent_.count)
		due = min(due, tx_due_);
	return due <= now_ns ? 0 : due;
}

/*
 * Stopping: what is queued and not yet at the disk (or waits to be tried
 * again) is dropped unanswered (the client resends), its frames freed and
 * its slots returned; so are replies still waiting for room in the NIC.
 */
void engine::drop_queued()
{
	u32 index;

	while (retry_.count || requests_.pop(&index)) {
		if (retry_.count)
			index = retry_.pop();
		/* a gathered READ's datagrams with it */
		for (u32 count = slots_of(slots_[index]); count--;) {
			slot &s = slots_[index];
			u32 next = s.next;

			if (s.frame)
				transport_->free_frame(inst_, s.frame);
			add_once(worker_.dropped_on_stop, 1);
			add_once(worker_.submitted, 1);
			add_once(worker_.reaped, 1);
			release(index);
			index = next;
		}
	}
	while (scattered_.count)
		drop_reply(scattered_.pop());
	while (unsent_.count)
		drop_reply(unsent_.pop());
}

void engine::held(netblk_held *held) const
{
	u64 kept = 0;

	for (u32 cpu = 0; cpu < nr_cpus_; cpu++)
		kept += read_once(rx_[cpu].frames_kept);
	held->slots = geo_.slots - free_slots_.size();
	held->frames = kept - read_once(worker_.frames_released);
}

/*
 * What read_stats() reads of each writer's counters (netblk_counters.h's
 * where): the per-CPU copies summed, the worker's added.
 */
#define NB_READ_RX_rx(name) s->name += read_once(r.name);
#define NB_READ_RX_rx_worker(name) s->name += read_once(r.name);
#define NB_READ_RX_worker(name)
#define NB_READ_RX_computed(name)
#define NB_READ_RX(NAME, name, nr, where, ...) NB_READ_RX_##where(name)
#define NB_READ_WORKER_rx(name)
#define NB_READ_WORKER_rx_worker(name) s->name += read_once(w.name);
#define NB_READ_WORKER_worker(name) s->name += read_once(w.name);
#define NB_READ_WORKER_computed(name)
#define NB_READ_WORKER(NAME, name, nr, where, ...) NB_READ_WORKER_##where(name)

void engine::read_stats(netblk_stats *s) const
{
	u64 queued = 0;

	*s = {};
	for (u32 cpu = 0; cpu < nr_cpus_; cpu++) {
		const rx_counters &r = rx_[cpu];

		NETBLK_STATS(NB_READ_RX)
		for (u32 i = 0; i < drop_reasons; i++)
			s->dropped[i] += read_once(r.dropped[i]);
		for (u32 i = 0; i < refusals; i++)
			s->refused_by[i] += read_once(r.refused_by[i]);
		queued += read_once(r.queued);
	}
	const worker_counters &w = worker_;

	NETBLK_STATS(NB_READ_WORKER)

	/* the computed ones */
	for (u32 i = 0; i < refusals; i++)
		s->refused_by[i] += read_once(w.refused_by[i]);
	for (u32 i = 0; i < drop_reasons; i++)
		s->bad += s->dropped[i];
	for (u32 i = 0; i < refusals; i++)
		s->refused += s->refused_by[i];

	u64 submitted = read_once(w.submitted);
	u64 reaped = read_once(w.reaped);
	u64 replied = read_once(w.replied);
	u64 busy = s->disk_busy;

	/*
	 * A slot the disk said "again" to was reaped and waits to be submitted
	 * again: it counts as queued.  Read at different moments, the
	 * differences must not go below zero.
	 */
	queued += busy;
	s->inflight_queued = queued > submitted ? queued - submitted : 0;
	s->inflight_disk = submitted > reaped ? submitted - reaped : 0;
	reaped -= min(reaped, busy);
	s->inflight_done = reaped > replied ? reaped - replied : 0;

	const session_counters &sc = sessions_.counters();
	s->sessions_opened = read_once(sc.opened);
	s->sessions_evicted = read_once(sc.evicted);
	s->sessions_open = sessions_.open_count();
	s->sessions_refused = read_once(sc.refused);
	s->duplicates = read_once(sc.duplicates);
	s->duplicates_in_flight = read_once(sc.duplicates_in_flight);
	s->stale = read_once(sc.stale);
	s->too_far = read_once(sc.too_far);
	s->served_again = read_once(sc.served_again);
}

} /* namespace nb */

/* ---- the C face (core_api.h) ---- */

struct netblk_core {
	nb::engine engine;
};

extern "C" {

int netblk_core_create(const struct netblk_core_config *config, struct netblk_core **out)
{
	netblk_core *core = new netblk_core;
	int err;

	if (!core)
		return -nb::err_nomem;
	err = core->engine.init(*config);
	if (err) {
		delete core;
		return err;
	}
	*out = core;
	return 0;
}

void netblk_core_destroy(struct netblk_core *core)
{
	if (!core)
		return;
	core->engine.destroy();
	delete core;
}

uint64_t netblk_core_export_id(const void *id, uint32_t len)
{
	return nb::export_id(static_cast<const nb::u8 *>(id), len);
}

uint32_t netblk_core_max_io_for_mtu(uint32_t mtu, uint32_t sector_size)
{
	return nb::max_io_for_mtu(mtu, sector_size);
}

uint32_t netblk_core_max_io(const struct netblk_core *core)
{
	return core->engine.geo().max_io;
}

uint32_t netblk_core_slots(const struct netblk_core *core)
{
	return core->engine.geo().slots;
}

uint32_t netblk_core_gather_page(const struct netblk_core *core)
{
	return core->engine.gather_page();
}

uint32_t netblk_core_reply_headroom(const struct netblk_core *core)
{
	return core->engine.reply_headroom();
}

void netblk_core_set_link(struct netblk_core *core, uint32_t mtu, const uint8_t *mac)
{
	core->engine.set_link(mtu, mac);
}

enum netblk_rx_verdict netblk_core_receive(struct netblk_core *core, uint32_t cpu,
					   void *frame, uint8_t *data, uint32_t *len,
					   const struct netblk_piece *frags, uint32_t nr_frags,
					   uint64_t now_ns)
{
	return core->engine.receive(cpu, frame, data, len, (const nb::piece *)frags, nr_frags, now_ns);
}

void netblk_core_rx_sent(struct netblk_core *core, uint32_t cpu, uint32_t sent,
			 uint32_t dropped)
{
	core->engine.rx_sent(cpu, sent, dropped);
}

void netblk_core_rx_drop(struct netblk_core *core, uint32_t cpu, enum netblk_drop_reason why)
{
	core->engine.rx_drop(cpu, (nb::drop_reason)why);
}

uint32_t netblk_core_submit(struct netblk_core *core, uint64_t now_ns)
{
	return core->engine.submit(now_ns);
}

uint32_t netblk_core_reply(struct netblk_core *core, uint64_t now_ns)
{
	return core->engine.reply(now_ns);
}

uint64_t netblk_core_next_work(struct netblk_core *core, uint64_t now_ns)
{
	return core->engine.next_work(now_ns);
}

int netblk_core_tx_failure(const struct netblk_core *core)
{
	return core->engine.tx_failure();
}

void netblk_core_tx_rearm(struct netblk_core *core)
{
	core->engine.tx_rearm();
}

void netblk_core_count_sleep(struct netblk_core *core)
{
	core->engine.count_sleep();
}

void netblk_core_drop_queued(struct netblk_core *core)
{
	core->engine.drop_queued();
}

uint32_t netblk_core_at_disk(struct netblk_core *core)
{
	return core->engine.at_disk();
}

void netblk_core_held(struct netblk_core *core, struct netblk_held *held)
{
	core->engine.held(held);
}

void netblk_core_complete(struct netblk_core *core, uint32_t slot, uint16_t status)
{
	core->engine.complete(slot, status);
}

void netblk_core_read_stats(const struct netblk_core *core, struct netblk_stats *stats)
{
	core->engine.read_stats(stats);
}

uint32_t netblk_core_read_op_service(const struct netblk_core *core,
				     struct netblk_op_service *out, uint32_t n)
{
	const nb::worker_counters &w = core->engine.counters();
	uint32_t used = 0;

	for (uint32_t op = 0; op <= nb::op_last; op++) {
		uint64_t count = nb::read_once(w.served[op]);

		if (!count)
			continue;
		if (used < n) {
			out[used].op = op;
			out[used].count = count;
			out[used].sum_ns = nb::read_once(w.served_ns[op]);
		}
		used++;
	}
	return used;
}

uint32_t netblk_core_read_latency(const struct netblk_core *core, uint64_t *buckets,
				  uint32_t n, uint64_t *max, uint64_t *count, uint64_t *sum)
{
	const nb::histogram &h = core->engine.service_time();

	for (uint32_t i = 0; i < n && i < nb::histogram::bucket_count; i++)
		buckets[i] = h.bucket(i);
	*max = h.max();
	*count = h.count();
	*sum = h.sum();
	return nb::histogram::bucket_count;
}

} /* extern "C" */
