/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An instance's counters, grouped by the one context that writes each, so
 * that no update needs a locked instruction:
 * - rx_counters: the receive path, which runs in a NIC's softirq on whatever
 *   CPU took the interrupt, so there is one copy per CPU;
 * - worker_counters: the instance's worker thread.
 * In-flight counts by stage are differences of counters moving the same slot
 * forward, each side counting only its own moves.
 */
#ifndef NETBLK_CORE_COUNTERS_H
#define NETBLK_CORE_COUNTERS_H

#include "frame.h"
#include "protocol.h"
#include "types.h"

#include "netblk_counters.h"

/*
 * The fields netblk_counters.h's lists put in each writer's struct: the
 * counters each writes (where: rx, worker, or rx_worker for both).
 */
#define NB_RX_FIELD_rx(name) u64 name;
#define NB_RX_FIELD_rx_worker(name) u64 name;
#define NB_RX_FIELD_worker(name)
#define NB_RX_FIELD_computed(name)
#define NB_RX_FIELD(NAME, name, nr, where, ...) NB_RX_FIELD_##where(name)
#define NB_WORKER_FIELD_rx(name)
#define NB_WORKER_FIELD_rx_worker(name) u64 name;
#define NB_WORKER_FIELD_worker(name) u64 name;
#define NB_WORKER_FIELD_computed(name)
#define NB_WORKER_FIELD(NAME, name, nr, where, ...) NB_WORKER_FIELD_##where(name)

namespace nb {

struct rx_counters_fields {
	NETBLK_STATS(NB_RX_FIELD)
	/* the receive path's own, not exported as they are */
	u64 dropped[drop_reasons];	/* dropped unanswered, by reason */
	u64 refused_by[refusals];	/* answered with an error on the spot, by status */
	u64 queued;		/* slots queued to the worker */
	u64 frames_kept;	/* received frames a slot holds on to */
};

/* Whole cache lines a CPU (never a pad of 0 bytes, which C++ has no array for). */
constexpr u32 rx_counters_size = (sizeof(rx_counters_fields) / 64 + 1) * 64;

struct rx_counters : rx_counters_fields {
	u8 pad[rx_counters_size - sizeof(rx_counters_fields)];
};
static_assert(sizeof(rx_counters) % 64 == 0, "no false sharing between CPUs");

struct worker_counters {
	NETBLK_STATS(NB_WORKER_FIELD)
	/* the worker's own, not exported as they are */
	u64 submitted;		/* slots sent to the disk (or answered without it) */
	u64 reaped;		/* slots back from the disk */
	u64 replied;		/* slots whose reply went to the NIC, or was dropped */
	u64 dropped_on_stop;	/* queued slots dropped when the instance stopped */
	u64 frames_released;	/* held frames handed on or freed */
	u64 refused_by[refusals];	/* answered with an error without the disk, by status */
	/* replies by the request's op (op_code): how many, and their service times' sum */
	u64 served[op_last + 1];
	u64 served_ns[op_last + 1];
};

} /* namespace nb */

#endif
