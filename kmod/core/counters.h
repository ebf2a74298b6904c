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

#include "types.h"

namespace nb {

struct rx_counters {
	u64 frames_rx;		/* frames handed to the instance */
	u64 requests;		/* datagrams that parsed as requests */
	u64 bad;		/* dropped unanswered */
	u64 refused;		/* answered with an error on the spot */
	u64 busy;		/* of those, for want of a slot */
	u64 queued;		/* slots queued to the worker */
	u64 frames_kept;	/* received frames a slot holds on to */
	u64 reads, read_bytes;	/* requests accepted, by kind */
	u64 writes, write_bytes;
	u64 flushes, fua_writes;
	u64 frames_tx;		/* refusals sent from the receive path */
	u64 replies_dropped;	/* refusals the NIC did not take */
	u8 pad[128 - 15 * sizeof(u64)];	/* two cache lines a CPU */
};
static_assert(sizeof(rx_counters) == 128, "no false sharing between CPUs");

struct worker_counters {
	u64 submitted;		/* slots sent to the disk (or answered without it) */
	u64 reaped;		/* slots back from the disk */
	u64 replied;		/* slots whose reply went to the NIC, or was dropped */
	u64 dropped_on_stop;	/* queued slots dropped when the instance stopped */
	u64 frames_released;	/* held frames handed on or freed */
	u64 io_errors;
	u64 disk_busy;		/* the disk refused more work for now */
	u64 replies_dropped;	/* no frame to answer in, or the NIC refused one */
	u64 worker_sleeps;
	u64 frames_tx;
	u64 bytes_zerocopy;	/* data that reached the disk or NIC in place */
	u64 bytes_copied;	/* data the CPU had to copy (a fallback path) */
	u64 disk_batches;	/* submit rounds that sent the disk something */
	u64 tx_batches;		/* transmits, each one flush */
};

} /* namespace nb */

#endif
