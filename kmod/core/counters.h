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

#include "protocol.h"
#include "types.h"

namespace nb {

struct rx_counters_fields {
	u64 frames_rx;		/* frames handed to the instance */
	u64 requests;		/* datagrams that parsed as requests */
	u64 dropped[drop_reasons];	/* dropped unanswered, by reason */
	u64 refused_by[refusals];	/* answered with an error on the spot, by status */
	u64 busy;		/* of those, for want of a slot */
	u64 queued;		/* slots queued to the worker */
	u64 frames_kept;	/* received frames a slot holds on to */
	u64 hello_cookies;	/* HELLOs answered with a cookie */
	u64 not_connected;	/* refused ENOTCONN: no such session */
	u64 auth_failed;	/* refused EKEYREJECTED: no valid tag */
	u64 old_version;	/* refused EPROTONOSUPPORT */
	u64 frames_tx;		/* refusals sent from the receive path */
	u64 replies_dropped;	/* refusals the NIC did not take */
};

/* Whole cache lines a CPU (never a pad of 0 bytes, which C++ has no array for). */
constexpr u32 rx_counters_size = (sizeof(rx_counters_fields) / 64 + 1) * 64;

struct rx_counters : rx_counters_fields {
	u8 pad[rx_counters_size - sizeof(rx_counters_fields)];
};
static_assert(sizeof(rx_counters) % 64 == 0, "no false sharing between CPUs");

struct worker_counters {
	u64 submitted;		/* slots sent to the disk (or answered without it) */
	u64 reaped;		/* slots back from the disk */
	u64 replied;		/* slots whose reply went to the NIC, or was dropped */
	u64 dropped_on_stop;	/* queued slots dropped when the instance stopped */
	u64 frames_released;	/* held frames handed on or freed */
	u64 io_errors;		/* answered EIO: the disk (or its submission) failed */
	u64 disk_busy;		/* the disk said "again" (BLK_STS_AGAIN): retried later */
	u64 disk_blocking;	/* of those retries, submitted without REQ_NOWAIT */
	u64 disk_gave_up;	/* still "again" after every retry: answered EAGAIN */
	u64 no_buffer;		/* no page to read or copy into: answered EAGAIN */
	u64 replies_dropped;	/* replies not sent: every reason below, and no buffer to answer in */
	u64 replies_oversized;	/* larger than the NIC's MTU now: dropped */
	u64 tx_deferred;	/* replies the NIC had no room for at first: sent again */
	u64 tx_errors;		/* transmits the NIC failed with an error */
	u64 worker_sleeps;
	u64 frames_tx;
	u64 bytes_zerocopy;	/* data that reached the disk or NIC in place */
	u64 bytes_copied;	/* data the CPU had to copy (a fallback path) */
	u64 disk_batches;	/* submit rounds that sent the disk something */
	u64 tx_batches;		/* transmits, each one flush */
	u64 answers_folded;	/* WRITE answers sent as a bit of another's (not frames_tx) */
	u64 reads_gathered;	/* READs of several datagrams read in one disk I/O */
	u64 not_connected;	/* requests whose session closed before the worker got them */
	u64 refused_by[refusals];	/* answered with an error without the disk, by status */
	/*
	 * Requests that change the disk, counted once each when admitted: a
	 * resent copy the replay window turns away is a duplicate, not another
	 * write.  READs, each copy served.
	 */
	u64 reads, read_bytes;
	u64 writes, write_bytes;
	u64 flushes, fua_writes;
	u64 trims, trim_bytes;
	u64 write_zeroes, write_zeroes_bytes;
	/* replies by the request's op (op_code): how many, and their service times' sum */
	u64 served[op_last + 1];
	u64 served_ns[op_last + 1];
};

} /* namespace nb */

#endif
