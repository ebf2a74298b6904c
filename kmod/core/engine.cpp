// SPDX-License-Identifier: GPL-2.0
/* One instance's data path, minus the kernel.  See engine.h. */
#include "engine.h"

namespace nb {

/* Linux errno values the core returns to the shim. */
constexpr int err_nomem = 12;
constexpr int err_inval = 22;

int engine::init(const netblk_core_config &config)
{
	if (config.slots == 0 || (config.slots & (config.slots - 1)) || config.nr_cpus == 0)
		return -err_inval;
	if (!geometry_init(&geo_, config.size_bytes, config.sector_size, config.mtu,
			   config.slots, config.read_only, config.volatile_cache, config.fua))
		return -err_inval;
	nr_cpus_ = config.nr_cpus;
	local_ip_ = config.local_ip;
	port_ = config.port;
	dma_align_mask_ = config.dma_align_mask;
	shim_ = config.shim;

	/* value-initialised: counters and slots start at zero */
	slots_ = new slot[config.slots]();
	rx_ = new rx_counters[config.nr_cpus]();
	retry_ = new u32[config.slots]();
	if (!slots_ || !rx_ || !retry_ || !free_slots_.init(config.slots) ||
	    !requests_.init(config.slots) || !completions_.init(config.slots)) {
		destroy();
		return -err_nomem;
	}
	for (u32 i = 0; i < config.slots; i++)
		free_slots_.push(i);
	return 0;
}

void engine::destroy()
{
	completions_.destroy();
	requests_.destroy();
	free_slots_.destroy();
	delete[] retry_;
	retry_ = nullptr;
	delete[] rx_;
	rx_ = nullptr;
	delete[] slots_;
	slots_ = nullptr;
}

/* ---- the receive path ---- */

/*
 * Answer on the spot: the request's own frame becomes the reply, one header
 * carrying the request's handle, offset, length and the status.  A request
 * that got this far has a whole IPv4 header and a whole netblk header, so
 * the frame has room for the 72 bytes.
 */
netblk_rx_verdict engine::refuse_in_place(rx_counters &c, u8 *data, u32 *len,
					  const frame_layout &layout, const header &h, u16 status)
{
	reply_route route;
	header reply = h;

	route_from_request(layout, &route);
	reply.op = (u8)(h.op | op_reply_bit);
	reply.status = status;
	*len = write_reply_headers(data, route, reply, 0, 0);
	add_once(c.refused, 1);
	if (status == status_eagain)
		add_once(c.busy, 1);
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

void engine::fill_slot(slot &s, const header &h, const frame_layout &layout, u64 now_ns)
{
	s.request = h;
	route_from_request(layout, &s.route);
	s.frame = nullptr;
	s.reply_at = nullptr;
	s.payload = nullptr;
	s.arrival_ns = now_ns;
	s.status = status_ok;
	s.copy = false;
}

/*
 * A READ takes a slot for every datagram of its answer, all at once: the
 * request frame holds nothing they need afterwards, so it is freed.
 */
netblk_rx_verdict engine::queue_read(rx_counters &c, u8 *data, u32 *len,
				     const frame_layout &layout, const header &h, u64 now_ns)
{
	u32 count = (h.length + geo_.max_io - 1) / geo_.max_io;
	u32 indices[read_datagrams_max];

	if (!take_slots(indices, count))
		return refuse_in_place(c, data, len, layout, h, status_eagain);

	for (u32 i = 0; i < count; i++) {
		slot &s = slots_[indices[i]];

		fill_slot(s, h, layout, now_ns);
		s.request.offset = h.offset + (u64)i * geo_.max_io;
		s.request.length = min(geo_.max_io, h.length - i * geo_.max_io);
		requests_.push(indices[i]);
	}
	add_once(c.queued, count);
	add_once(c.reads, 1);
	add_once(c.read_bytes, h.length);
	return NETBLK_RX_FREE;
}

/* INFO, WRITE and FLUSH: one slot; WRITE and FLUSH answer in their own frame. */
netblk_rx_verdict engine::queue_one(rx_counters &c, void *frame, u8 *data, u32 *len,
				    const frame_layout &layout, const header &h, u64 now_ns)
{
	u32 index;

	if (!take_slots(&index, 1))
		return refuse_in_place(c, data, len, layout, h, status_eagain);

	slot &s = slots_[index];
	fill_slot(s, h, layout, now_ns);
	if (h.op != op_info) {
		s.frame = frame;
		s.reply_at = data;
		add_once(c.frames_kept, 1);
	}
	if (h.op == op_write) {
		s.payload = data + layout.payload_offset + header_size;
		s.copy = (((uintptr_t)s.payload | h.length) & dma_align_mask_) != 0;
		add_once(c.writes, 1);
		add_once(c.write_bytes, h.length);
		if (h.flags & flag_fua)
			add_once(c.fua_writes, 1);
	} else if (h.op == op_flush) {
		add_once(c.flushes, 1);
	}
	requests_.push(index);
	add_once(c.queued, 1);
	return h.op == op_info ? NETBLK_RX_FREE : NETBLK_RX_KEPT;
}

netblk_rx_verdict engine::receive(u32 cpu, void *frame, u8 *data, u32 *len, u64 now_ns)
{
	rx_counters &c = rx_[cpu];
	frame_layout layout;
	header h;

	add_once(c.frames_rx, 1);
	/*
	 * The XDP program steers by port alone; the destination address,
	 * fragments and lengths are checked here, and whatever fails is
	 * dropped unanswered.
	 */
	if (parse_frame(data, *len, local_ip_, port_, &layout) != frame_kind::ours) {
		add_once(c.bad, 1);
		return NETBLK_RX_FREE;
	}

	decision d = validate_request(data + layout.payload_offset, layout.payload_len, geo_, &h);
	if (d.what == verdict::drop) {
		add_once(c.bad, 1);
		return NETBLK_RX_FREE;
	}
	add_once(c.requests, 1);
	if (d.what == verdict::refuse)
		return refuse_in_place(c, data, len, layout, h, d.status);
	if (h.op == op_read)
		return queue_read(c, data, len, layout, h, now_ns);
	return queue_one(c, frame, data, len, layout, h, now_ns);
}

void engine::rx_sent(u32 cpu, u32 sent, u32 dropped)
{
	add_once(rx_[cpu].frames_tx, sent);
	add_once(rx_[cpu].replies_dropped, dropped);
}

/* ---- the worker: to the disk ---- */

int engine::start_write(u32 index, slot &s)
{
	u8 *data = s.payload;
	u32 len = s.request.length;

	if (s.copy) {
		/*
		 * The disk cannot DMA from where the NIC put the payload
		 * (misaligned for it): the one case the CPU copies, counted.
		 */
		u8 *buffer = netblk_shim_slot_buffer(shim_, index);

		if (!buffer)
			return -err_nomem;
		data = buffer + reply_headroom;
		copy_bytes(data, s.payload, len);
		add_once(worker_.bytes_copied, len);
	} else {
		add_once(worker_.bytes_zerocopy, len);
	}
	return netblk_shim_submit_io(shim_, index, NETBLK_IO_WRITE, s.request.offset, data, len,
				     s.request.flags & flag_fua);
}

void engine::start_io(u32 index)
{
	slot &s = slots_[index];
	int err = 0;

	add_once(worker_.submitted, 1);
	switch (s.request.op) {
	case op_info:
		s.reply_at = netblk_shim_slot_buffer(shim_, index);
		if (s.reply_at)
			encode_info(s.reply_at + reply_headroom, geo_);
		complete(index, s.reply_at ? status_ok : status_eio);
		return;
	case op_read:
		s.reply_at = netblk_shim_slot_buffer(shim_, index);
		if (!s.reply_at) {
			complete(index, status_eio);
			return;
		}
		err = netblk_shim_submit_io(shim_, index, NETBLK_IO_READ, s.request.offset,
					    s.reply_at + reply_headroom, s.request.length, 0);
		break;
	case op_write:
		err = start_write(index, s);
		break;
	default: /* op_flush */
		err = netblk_shim_submit_io(shim_, index, NETBLK_IO_FLUSH, 0, nullptr, 0, 0);
		break;
	}
	if (err)
		complete(index, status_eio);
}

void engine::retry_later(u32 index)
{
	u32 capacity = geo_.slots;

	retry_[(retry_head_ + retry_count_) & (capacity - 1)] = index;
	retry_count_++;
	add_once(worker_.disk_busy, 1);
}

u32 engine::submit()
{
	u32 n = 0, index;

	/*
	 * What the disk refused for now goes first, once it has finished
	 * something since (or has nothing at all): trying sooner would only
	 * be refused again, in a loop as fast as the refusals come.
	 */
	if (retry_count_ && (retry_now_ || at_disk() == 0)) {
		u32 count = retry_count_;

		retry_now_ = false;
		while (count--) {
			index = retry_[retry_head_];
			retry_head_ = (retry_head_ + 1) & (geo_.slots - 1);
			retry_count_--;
			start_io(index);
			n++;
		}
	}
	while (requests_.pop(&index)) {
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

void engine::release(u32 index)
{
	slot &s = slots_[index];

	if (s.frame) {
		s.frame = nullptr;
		add_once(worker_.frames_released, 1);
	}
	add_once(worker_.replied, 1);
	free_slots_.push(index);
}

u32 engine::reply(u64 now_ns)
{
	netblk_tx batch[NETBLK_TX_BATCH];
	u32 n = 0, reaped = 0, index;
	bool disk_freed = false;	/* the disk finished something: room again */

	while (n < NETBLK_TX_BATCH && completions_.pop(&index)) {
		slot &s = slots_[index];

		add_once(worker_.reaped, 1);
		reaped++;
		if (s.status == NETBLK_IO_AGAIN) {
			retry_later(index);
			continue;
		}
		disk_freed = true;

		u32 data_len = 0;
		if (s.status == status_ok && s.request.op == op_read)
			data_len = s.request.length;
		else if (s.status == status_ok && s.request.op == op_info)
			data_len = info_payload_size;
		if (s.status != status_ok && s.request.op != op_info)
			add_once(worker_.io_errors, 1);

		if (!s.reply_at) {
			/* no buffer to answer in: the client will ask again */
			add_once(worker_.replies_dropped, 1);
			release(index);
			continue;
		}
		header reply = s.request;
		reply.op = (u8)(s.request.op | op_reply_bit);
		reply.status = s.status;
		batch[n].frame = s.frame;
		batch[n].slot = index;
		batch[n].len = write_reply_headers(s.reply_at, s.route, reply, data_len, 0);
		if (s.request.op == op_read)
			add_once(worker_.bytes_zerocopy, data_len);
		hist_.record(now_ns > s.arrival_ns ? now_ns - s.arrival_ns : 0);
		n++;
	}
	if (disk_freed)
		retry_now_ = true;
	if (n == 0)
		return reaped;

	u32 sent = netblk_shim_transmit(shim_, batch, n);
	add_once(worker_.tx_batches, 1);
	add_once(worker_.frames_tx, sent);
	add_once(worker_.replies_dropped, n - sent);
	/* The NIC owns the frames now, sent or freed: the slots are free. */
	for (u32 i = 0; i < n; i++)
		release(batch[i].slot);
	return reaped;
}

bool engine::has_work() const
{
	return requests_.size() || completions_.size() ||
	       (retry_count_ && (retry_now_ || at_disk() == 0));
}

/*
 * Stopping: what is queued and not yet at the disk is dropped unanswered
 * (the client resends), its frames freed and its slots returned.
 */
void engine::drop_queued()
{
	u32 index;

	while (retry_count_ || requests_.pop(&index)) {
		if (retry_count_) {
			index = retry_[retry_head_];
			retry_head_ = (retry_head_ + 1) & (geo_.slots - 1);
			retry_count_--;
		}
		slot &s = slots_[index];
		if (s.frame)
			netblk_shim_free_frame(shim_, s.frame);
		add_once(worker_.dropped_on_stop, 1);
		add_once(worker_.submitted, 1);
		add_once(worker_.reaped, 1);
		release(index);
	}
}

void engine::held(netblk_held *held) const
{
	u64 kept = 0;

	for (u32 cpu = 0; cpu < nr_cpus_; cpu++)
		kept += read_once(rx_[cpu].frames_kept);
	held->slots = geo_.slots - free_slots_.size();
	held->frames = kept - read_once(worker_.frames_released);
}

void engine::read_stats(netblk_stats *s) const
{
	u64 queued = 0, rx_tx = 0, rx_dropped = 0;

	*s = {};
	for (u32 cpu = 0; cpu < nr_cpus_; cpu++) {
		const rx_counters &r = rx_[cpu];

		s->frames_rx += read_once(r.frames_rx);
		s->requests += read_once(r.requests);
		s->bad += read_once(r.bad);
		s->refused += read_once(r.refused);
		s->busy += read_once(r.busy);
		s->reads += read_once(r.reads);
		s->read_bytes += read_once(r.read_bytes);
		s->writes += read_once(r.writes);
		s->write_bytes += read_once(r.write_bytes);
		s->flushes += read_once(r.flushes);
		s->fua_writes += read_once(r.fua_writes);
		queued += read_once(r.queued);
		rx_tx += read_once(r.frames_tx);
		rx_dropped += read_once(r.replies_dropped);
	}

	const worker_counters &w = worker_;
	u64 submitted = read_once(w.submitted);
	u64 reaped = read_once(w.reaped);
	u64 replied = read_once(w.replied);

	u64 busy = read_once(w.disk_busy);

	/*
	 * A slot the disk refused for now was reaped and waits to be submitted
	 * again: it counts as queued.  Read at different moments, the
	 * differences must not go below zero.
	 */
	queued += busy;
	s->inflight_queued = queued > submitted ? queued - submitted : 0;
	s->inflight_disk = submitted > reaped ? submitted - reaped : 0;
	reaped -= min(reaped, busy);
	s->inflight_done = reaped > replied ? reaped - replied : 0;
	s->io_errors = read_once(w.io_errors);
	s->disk_busy = busy;
	s->replies_dropped = read_once(w.replies_dropped) + rx_dropped;
	s->worker_sleeps = read_once(w.worker_sleeps);
	s->frames_tx = read_once(w.frames_tx) + rx_tx;
	s->bytes_zerocopy = read_once(w.bytes_zerocopy);
	s->bytes_copied = read_once(w.bytes_copied);
	s->disk_batches = read_once(w.disk_batches);
	s->tx_batches = read_once(w.tx_batches);
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

enum netblk_rx_verdict netblk_core_receive(struct netblk_core *core, uint32_t cpu,
					   void *frame, uint8_t *data, uint32_t *len,
					   uint64_t now_ns)
{
	return core->engine.receive(cpu, frame, data, len, now_ns);
}

void netblk_core_rx_sent(struct netblk_core *core, uint32_t cpu, uint32_t sent,
			 uint32_t dropped)
{
	core->engine.rx_sent(cpu, sent, dropped);
}

uint32_t netblk_core_submit(struct netblk_core *core)
{
	return core->engine.submit();
}

uint32_t netblk_core_reply(struct netblk_core *core, uint64_t now_ns)
{
	return core->engine.reply(now_ns);
}

int netblk_core_has_work(struct netblk_core *core)
{
	return core->engine.has_work();
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

uint32_t netblk_core_read_latency(const struct netblk_core *core, uint64_t *buckets,
				  uint32_t n, uint64_t *max, uint64_t *count)
{
	const nb::histogram &h = core->engine.service_time();

	for (uint32_t i = 0; i < n && i < nb::histogram::bucket_count; i++)
		buckets[i] = h.bucket(i);
	*max = h.max();
	*count = h.count();
	return nb::histogram::bucket_count;
}

} /* extern "C" */
