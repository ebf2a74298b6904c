// SPDX-License-Identifier: GPL-2.0
/*
 * An instance's counters as the control plane reads them: each writer's
 * own, summed (engine.h, netblk_counters.h).
 */
#include "engine.h"

namespace nb {

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
