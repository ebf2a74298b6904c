/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C face of the C++ core: what the shim (kernel C) calls.  An instance's
 * core holds everything of it that needs no kernel: its geometry, its slot
 * table and rings, its counters and its service-time histogram.
 */
#ifndef NETBLK_CORE_API_H
#define NETBLK_CORE_API_H

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

#define NETBLK_SLOTS 256	/* requests an instance holds at once */

struct netblk_core;

struct netblk_core_config {
	uint64_t size_bytes;
	uint32_t sector_size;
	uint32_t mtu;
	uint32_t slots;
	uint32_t nr_cpus;	/* receive-side counters are per CPU */
	uint8_t read_only;
	uint8_t volatile_cache;
	uint8_t fua;
};

/* A consistent-enough copy of an instance's counters (netblk_genl.h NETBLK_S_*). */
struct netblk_stats {
	uint64_t requests;
	uint64_t bad;
	uint64_t refused;
	uint64_t busy;
	uint64_t inflight_queued;
	uint64_t inflight_disk;
	uint64_t inflight_done;
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t writes;
	uint64_t write_bytes;
	uint64_t flushes;
	uint64_t fua_writes;
	uint64_t io_errors;
	uint64_t disk_busy;
	uint64_t replies_dropped;
	uint64_t worker_sleeps;
	uint64_t frames_rx;
	uint64_t frames_tx;
	uint64_t bytes_zerocopy;
	uint64_t bytes_copied;
};

/*
 * 0, -EINVAL when no sector fits a datagram at the mtu, or -ENOMEM.  Called
 * once per instance, in process context.
 */
int netblk_core_create(const struct netblk_core_config *config, struct netblk_core **out);
void netblk_core_destroy(struct netblk_core *core);

/* Data bytes one datagram carries (0 when no sector fits at that mtu). */
uint32_t netblk_core_max_io_for_mtu(uint32_t mtu, uint32_t sector_size);
uint32_t netblk_core_max_io(const struct netblk_core *core);
uint32_t netblk_core_slots(const struct netblk_core *core);

void netblk_core_read_stats(const struct netblk_core *core, struct netblk_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
