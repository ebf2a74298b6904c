// SPDX-License-Identifier: GPL-2.0
/*
 * The server core's C face (core_api.h): what the kernel side calls.
 */
#include "engine.h"

struct netblk_core {
	nb::engine engine;
};

extern "C" {

int netblk_core_group_create(uint32_t queues, void *lock, struct netblk_session_group **out)
{
	netblk_session_group *g = new netblk_session_group;
	int err;

	if (!g)
		return -nb::err_nomem;
	err = g->group.init(queues, lock);
	if (err) {
		delete g;
		return err;
	}
	*out = g;
	return 0;
}

void netblk_core_group_destroy(struct netblk_session_group *g)
{
	if (!g)
		return;
	g->group.destroy();
	delete g;
}

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
	return nb::max_io_for_payload(nb::frame_payload_max(mtu), sector_size);
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

uint32_t netblk_core_queue_of(struct netblk_core *core, uint32_t cpu, const uint8_t *data,
			      uint32_t len)
{
	return core->engine.queue_of(cpu, data, len);
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

void netblk_core_count_page_replaced(struct netblk_core *core)
{
	core->engine.count_page_replaced();
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

/* Every field a count or a level of the queue's own (sessions, in flight): they add up. */
#define NB_STATS_ADD(NAME, name, ...) sum->name += one->name;

void netblk_stats_add(struct netblk_stats *sum, const struct netblk_stats *one)
{
	NETBLK_STATS(NB_STATS_ADD)
	for (uint32_t i = 0; i < NETBLK_DROP_REASONS; i++)
		sum->dropped[i] += one->dropped[i];
	for (uint32_t i = 0; i < NETBLK_REFUSALS; i++)
		sum->refused_by[i] += one->refused_by[i];
}
#undef NB_STATS_ADD

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
