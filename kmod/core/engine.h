/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The core of one instance: geometry, slot table, rings, counters and the
 * service-time histogram.  Allocated once when the instance starts; nothing
 * on the data path allocates.
 *
 * A slot is one request (or one datagram of a READ's answer) from the moment
 * the receive path takes it to the moment its reply is queued to the NIC.  It
 * travels the rings as its index:
 *   free_slots --(receive path)--> requests --(worker: to the disk)-->
 *   completions (disk done) --(worker: reply to the NIC)--> free_slots
 */
#ifndef NETBLK_CORE_ENGINE_H
#define NETBLK_CORE_ENGINE_H

#include "core_api.h"
#include "counters.h"
#include "histogram.h"
#include "protocol.h"
#include "ring.h"

namespace nb {

struct slot {
	header request;		/* as received; offset/length of this datagram */
	reply_route route;
	void *frame;		/* the shim's frame: the request's, or a read page */
	u32 data_offset;	/* where the data lies in the frame */
	u16 status;		/* the reply's */
	u16 ip_id;
	u64 arrival_ns;
	u8 pad[128 - sizeof(header) - sizeof(reply_route) - sizeof(void *) -
	       2 * sizeof(u32) - sizeof(u64)];
};
static_assert(sizeof(slot) == 128, "a slot is two cache lines");

class engine {
public:
	int init(const netblk_core_config &config);
	void destroy();

	const geometry &geo() const { return geo_; }

	rx_counters &rx(u32 cpu) { return rx_[cpu]; }
	worker_counters &worker() { return worker_; }
	histogram &service_time() { return hist_; }
	void read_stats(netblk_stats *stats) const;

	slot *slot_at(u32 index) { return &slots_[index]; }
	ring &free_slots() { return free_slots_; }
	ring &requests() { return requests_; }
	ring &completions() { return completions_; }

private:
	geometry geo_ = {};
	u32 nr_cpus_ = 0;
	slot *slots_ = nullptr;
	rx_counters *rx_ = nullptr;
	worker_counters worker_ = {};
	ring free_slots_;
	ring requests_;
	ring completions_;
	histogram hist_;
};

} /* namespace nb */

#endif
