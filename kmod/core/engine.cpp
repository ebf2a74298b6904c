// SPDX-License-Identifier: GPL-2.0
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

	/* value-initialised: counters and slots start at zero */
	slots_ = new slot[config.slots]();
	rx_ = new rx_counters[config.nr_cpus]();
	if (!slots_ || !rx_ || !free_slots_.init(config.slots) ||
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
	delete[] rx_;
	rx_ = nullptr;
	delete[] slots_;
	slots_ = nullptr;
}

void engine::read_stats(netblk_stats *s) const
{
	u64 queued = 0;

	*s = {};
	for (u32 cpu = 0; cpu < nr_cpus_; cpu++) {
		const rx_counters &r = rx_[cpu];

		s->frames_rx += read_once(r.frames_rx);
		s->requests += read_once(r.requests);
		s->bad += read_once(r.bad);
		s->refused += read_once(r.refused);
		s->busy += read_once(r.busy);
		queued += read_once(r.queued);
	}

	const worker_counters &w = worker_;
	u64 submitted = read_once(w.submitted);
	u64 reaped = read_once(w.reaped);
	u64 replied = read_once(w.replied);

	/* Read at different moments, the differences must not go below zero. */
	s->inflight_queued = queued > submitted ? queued - submitted : 0;
	s->inflight_disk = submitted > reaped ? submitted - reaped : 0;
	s->inflight_done = reaped > replied ? reaped - replied : 0;
	s->reads = read_once(w.reads);
	s->read_bytes = read_once(w.read_bytes);
	s->writes = read_once(w.writes);
	s->write_bytes = read_once(w.write_bytes);
	s->flushes = read_once(w.flushes);
	s->fua_writes = read_once(w.fua_writes);
	s->io_errors = read_once(w.io_errors);
	s->disk_busy = read_once(w.disk_busy);
	s->replies_dropped = read_once(w.replies_dropped);
	s->worker_sleeps = read_once(w.worker_sleeps);
	s->frames_tx = read_once(w.frames_tx);
	s->bytes_zerocopy = read_once(w.bytes_zerocopy);
	s->bytes_copied = read_once(w.bytes_copied);
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

void netblk_core_read_stats(const struct netblk_core *core, struct netblk_stats *stats)
{
	core->engine.read_stats(stats);
}

} /* extern "C" */
