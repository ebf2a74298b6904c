/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The core of one instance: geometry, slot table, rings, the receive path's
 * and the worker's logic, counters and the service-time histogram.
 * Allocated once when the instance starts; nothing on the data path
 * allocates.
 *
 * A slot is one request -- or one datagram of a READ's answer -- from the
 * moment the receive path takes it to the moment its reply is queued to the
 * NIC.  It travels the rings as its index:
 *
 *   free_slots --receive()--> requests --submit()--> the disk
 *   the disk --complete()--> completions --reply()--> NIC, free_slots
 *
 * receive() runs in NIC softirqs (any CPU), complete() in the disk's
 * completion context (any CPU), submit() and reply() in the worker; they
 * meet only in the rings.
 */
#ifndef NETBLK_CORE_ENGINE_H
#define NETBLK_CORE_ENGINE_H

#include "core_api.h"
#include "counters.h"
#include "histogram.h"
#include "protocol.h"
#include "ring.h"
#include "shim_api.h"

namespace nb {

struct slot {
	header request;		/* op, handle, flags; offset/length of this datagram */
	reply_route route;
	void *frame;		/* a received frame it holds (WRITE, FLUSH), or null */
	u8 *reply_at;		/* where its reply frame begins */
	u8 *payload;		/* WRITE: the data inside the received frame */
	u64 arrival_ns;
	u16 status;		/* the disk's answer */
	bool copy;		/* WRITE payload the disk cannot take in place */
	u8 pad[128 - sizeof(header) - sizeof(reply_route) - 3 * sizeof(void *) -
	       sizeof(u64) - sizeof(u16) - sizeof(bool)];
};
static_assert(sizeof(slot) == 128, "a slot is two cache lines");

class engine {
public:
	int init(const netblk_core_config &config);
	void destroy();

	const geometry &geo() const { return geo_; }

	/* receive path */
	netblk_rx_verdict receive(u32 cpu, void *frame, u8 *data, u32 *len, u64 now_ns);
	void rx_sent(u32 cpu, u32 sent, u32 dropped);

	/* worker */
	u32 submit();
	u32 reply(u64 now_ns);
	bool has_work() const;
	void count_sleep() { add_once(worker_.worker_sleeps, 1); }
	void drop_queued();
	u32 at_disk() const { return (u32)(worker_.submitted - worker_.reaped); }
	void held(netblk_held *held) const;

	/* disk completion */
	void complete(u32 index, u16 status);

	void read_stats(netblk_stats *stats) const;
	const histogram &service_time() const { return hist_; }

	/* for tests */
	rx_counters &rx(u32 cpu) { return rx_[cpu]; }
	worker_counters &worker() { return worker_; }
	ring &free_slots() { return free_slots_; }

private:
	netblk_rx_verdict refuse_in_place(rx_counters &c, u8 *data, u32 *len,
					  const frame_layout &layout, const header &h, u16 status);
	bool take_slots(u32 *indices, u32 count);
	void fill_slot(slot &s, const header &h, const frame_layout &layout, u64 now_ns);
	netblk_rx_verdict queue_read(rx_counters &c, u8 *data, u32 *len,
				     const frame_layout &layout, const header &h, u64 now_ns);
	netblk_rx_verdict queue_one(rx_counters &c, void *frame, u8 *data, u32 *len,
				    const frame_layout &layout, const header &h, u64 now_ns);
	void start_io(u32 index);
	int start_write(u32 index, slot &s);
	void release(u32 index);
	void retry_later(u32 index);

	geometry geo_ = {};
	u32 nr_cpus_ = 0;
	u32 local_ip_ = 0;
	u16 port_ = 0;
	u32 dma_align_mask_ = 0;
	netblk_instance *shim_ = nullptr;

	slot *slots_ = nullptr;
	rx_counters *rx_ = nullptr;
	ring free_slots_;
	ring requests_;
	ring completions_;

	/* the worker's own: slots the disk refused for now, tried again later */
	u32 *retry_ = nullptr;
	u32 retry_head_ = 0, retry_count_ = 0;
	bool retry_now_ = false;

	worker_counters worker_ = {};
	histogram hist_;
};

} /* namespace nb */

#endif
