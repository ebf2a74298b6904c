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
 * and two lists of the worker's own: slots the disk answered "again"
 * (retried after a backoff) and replies the NIC had no room for (sent again).
 * receive() runs in NIC softirqs (any CPU), complete() in the disk's
 * completion context (any CPU), submit() and reply() in the worker; they
 * meet only in the rings.
 *
 * A READ answered in several datagrams takes a slot for each, chained from
 * its first, which alone travels the requests ring and is admitted; then
 * each datagram goes to the disk on its own, or, where the transport can send a
 * frame's data from a second buffer (gather_page), the first for them all,
 * one I/O into data pages: the disk sees one command where it would see
 * one a datagram.  The disk's answer brings them all to reply()
 * (scattered_).  Its slots are freed together, after its last datagram.
 *
 * Protocol v2's sessions (session.h) are the worker's: submit() admits each
 * request -- its session must still be open, and one that changes the disk
 * must be new to the session's replay window -- and reply() records what
 * became of it there.  The receive path answers HELLO's cookies itself (they
 * keep nothing) and turns away datagrams of no session before they take a
 * slot.
 */
#ifndef NETBLK_CORE_ENGINE_H
#define NETBLK_CORE_ENGINE_H

#include "core_api.h"
#include "counters.h"
#include "frame.h"
#include "histogram.h"
#include "protocol.h"
#include "ring.h"
#include "session.h"
#include "target_ops.h"

namespace nb {

/* Linux errno values the core returns to the kernel side. */
constexpr int err_nomem = 12;
constexpr int err_inval = 22;

struct slot_fields {
	header request;		/* op, session, seq, flags; offset/length of this datagram */
	reply_route route;
	void *frame;		/* a received frame it holds (WRITE, FLUSH), or null */
	u8 *reply_at;		/* where its reply frame begins */
	u8 *payload;		/* WRITE: the data inside the received frame; a gathered READ's datagram: its data */
	u32 head_payload;	/* WRITE: how much of it the frame's first buffer holds */
	u64 arrival_ns;
	u64 retry_ns;		/* the disk said "again": not submitted before this */
	u64 first_tx_ns;	/* when its reply was first handed to the NIC */
	u32 reply_len;		/* bytes of its reply frame, once built */
	u16 status;		/* the disk's answer */
	u8 tries;		/* times the disk answered it "again" */
	bool copy;		/* WRITE payload the disk cannot take in place */
	bool lent;		/* its reply is in a buffer the transport lent it */
	bool without_disk;	/* answered by the worker: a duplicate, a refusal, a session */
	bool windowed;		/* started in its session's replay window: its status goes there */
	bool frags;		/* its frame is in several buffers: never the reply */
	bool fold;		/* a WRITE of a session that takes folded answers */
	u32 folded;		/* its answer answers these too: bit i, seq + 1 + i */
	/*
	 * A READ of several datagrams: the slots of its datagrams, chained
	 * from the first through next (no_slot ends it).  Only the first goes
	 * through admission; read_len is the whole READ's bytes, in the first,
	 * until its datagrams are started one by one or, gathered, until the
	 * disk has answered the one I/O for them all.  Its slots go back to
	 * the free ring together, when the last is released (unreleased, in
	 * the first): a gathered READ's datagrams send their data from the
	 * data pages of its first slots.
	 */
	u32 next;
	u32 read_len;
	u32 first;		/* the first slot of its READ, or no_slot: a request alone */
	u32 unreleased;		/* in the first: its READ's slots not released yet */
	bool scattered;		/* its data is at payload, in a data page: a frame's second buffer */
};

struct slot : slot_fields {
	u8 pad[192 - sizeof(slot_fields)];
};
static_assert(sizeof(slot) == 192, "a slot is three cache lines");

/* A FIFO of slot numbers only the worker touches: as large as the slot table. */
struct slot_list {
	u32 *entries;
	u32 head, count, mask;

	bool init(u32 capacity);
	void destroy();
	void push(u32 index) { entries[(head + count++) & mask] = index; }
	u32 pop()
	{
		u32 index = entries[head];
		head = (head + 1) & mask;
		count--;
		return index;
	}
};

/*
 * A reply's frame headers (frame.h) and netblk header for @data_len bytes of
 * data after them, at @frame: the frame's length.
 */
inline u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			       u32 data_len)
{
	u32 at = write_frame_headers(frame, route, header_size + data_len);

	encode_header(frame + at, reply);
	return at + header_size + data_len;
}

class engine {
public:
	int init(const netblk_core_config &config);
	void destroy();

	const geometry &geo() const { return geo_; }
	u32 reply_headroom() const { return reply_headroom_; }
	u32 gather_page() const { return gather_page_; }
	void set_link(u32 mtu, const u8 *mac);

	/* receive path */
	netblk_rx_verdict receive(u32 cpu, void *frame, u8 *data, u32 *len, const piece *frags,
				  u32 nr_frags, u64 now_ns);
	void rx_sent(u32 cpu, u32 sent, u32 dropped);
	void rx_drop(u32 cpu, drop_reason why);
	u32 queue_of(u32 cpu, const u8 *data, u32 len);

	/* worker */
	u32 submit(u64 now_ns);
	u32 reply(u64 now_ns);
	u64 next_work(u64 now_ns) const;
	int tx_failure() const { return __atomic_load_n(&tx_failure_, __ATOMIC_RELAXED); }
	void tx_rearm();
	void count_sleep() { add_once(worker_.worker_sleeps, 1); }
	void count_page_replaced() { add_once(worker_.pages_replaced, 1); }
	void drop_queued();
	u32 at_disk() const { return (u32)(worker_.submitted - worker_.reaped); }
	void held(netblk_held *held) const;

	/* disk completion */
	void complete(u32 index, u16 status);

	void read_stats(netblk_stats *stats) const;
	const session_table &sessions() const { return sessions_; }
	const histogram &service_time() const { return hist_; }
	const worker_counters &counters() const { return worker_; }

	static constexpr u32 no_slot = ~0u;

	/* for tests */
	rx_counters &rx(u32 cpu) { return rx_[cpu]; }
	worker_counters &worker() { return worker_; }
	ring &free_slots() { return free_slots_; }

	/* how the worker paces what it retries (the unit tests check them) */
	static constexpr u8 again_nowait_tries = 3;	/* then without REQ_NOWAIT, to disk-tries= */
	static constexpr u64 again_backoff_ns = 50000;	/* doubles each time */
	static constexpr u64 tx_backoff_min_ns = 20000;
	static constexpr u64 tx_backoff_max_ns = 1000000;
	static constexpr u64 tx_give_up_ns = 100000000;	/* a reply not sent in 100 ms is dropped */
	static constexpr u64 tx_failure_ns = 1000000000;	/* errors this long: the NIC cannot send */
	static constexpr u32 tx_failure_tries = 8;

private:
	/* What a HELLO's answer says of the instance's tags (and an EKEYREJECTED's). */
	u16 auth_flags() const
	{
		return (u16)((auth_.keyed ? flag_auth_key : 0) | (auth_.data ? flag_auth_data : 0));
	}
	void count_drop(rx_counters &c, drop_reason why) { add_once(c.dropped[why], 1); }
	static void count_refusal(u64 *refused_by, u16 status);
	void record_service_time(u8 op, u64 ns);
	netblk_rx_verdict refuse_in_place(rx_counters &c, u8 *data, u32 *len,
					  const reply_route &route, const header &h, u16 status);
	netblk_rx_verdict refuse_v1(rx_counters &c, u8 *data, u32 *len,
				    const frame_layout &layout, const reply_route &route);
	netblk_rx_verdict hello(rx_counters &c, void *frame, u8 *data, u32 *len,
				const frame_layout &layout, const reply_route &route,
				const header &h, u64 now_ns);
	netblk_rx_verdict serve_session(rx_counters &c, void *frame, u8 *data, u32 *len,
					const frame_layout &layout, const reply_route &route,
					const header &h, u64 now_ns);
	bool take_slots(u32 *indices, u32 count);
	void fill_slot(slot &s, const header &h, const reply_route &route, u64 now_ns);
	netblk_rx_verdict queue_read(rx_counters &c, u8 *data, u32 *len,
				     const reply_route &route, const header &h, u64 now_ns);
	u32 slots_of(const slot &s) const;
	int start_read(u32 index, slot &s, bool may_block);
	void start_datagram_reads(u32 index);
	int start_gathered_read(u32 index, slot &s, bool may_block);
	int start_op(u32 index, slot &s, bool may_block);
	void scatter(u32 index);
	bool retry_again(u32 index, u64 now_ns);
	bool next_done(u32 *index, u64 now_ns);
	netblk_rx_verdict queue_one(rx_counters &c, void *frame, u8 *data, u32 *len,
				    const frame_layout &layout, const reply_route &route,
				    const header &h, u64 now_ns);
	void start_io(u32 index);
	void open_session(u32 index, slot &s, u64 now_ns);
	void refuse(u32 index, u16 status);
	bool admit(u32 index, u64 now_ns);
	void answer_without_disk(u32 index, u16 status);
	void discard(u32 index);
	void count_read(const header &h, u32 read_len);
	void count_change(const header &h);
	void window_done(slot &s);
	int start_write(u32 index, slot &s, bool may_block);
	void copy_payload(const slot &s, u8 *to);
	void let_go_frame(slot &s);
	void answer_now(u32 index, u16 status);
	bool foldable(const slot &s) const;
	bool fold_answer(const netblk_tx *built, u32 count, u32 index);
	void seal_folding(const netblk_tx *built, u32 count);
	u32 submit_retries(u64 now_ns);
	void seal_reply(slot &s, u32 data_len);
	void retry_later(u32 index, u64 now_ns);
	bool finish_io(u32 index, u64 now_ns);
	u32 take_unsent(netblk_tx *batch);
	void transmit(netblk_tx *batch, u32 n, u64 now_ns);
	void note_transmit(u32 sent, int error, u64 now_ns);
	void tx_entry(netblk_tx &tx, u32 index);
	void drop_reply(u32 index);
	void give_back(u32 index);
	void release(u32 index);
	void release_unsent(u32 index);

	geometry geo_ = {};
	u32 nr_cpus_ = 0;
	u32 queue_ = 0, queues_ = 1;	/* this queue of the instance's */
	frame_local local_ = {};		/* the instance's end of the link (frame.h) */
	u32 reply_headroom_ = 0;	/* the frame's headers and netblk's */
	u32 link_size_ = 0;		/* bytes of a reply frame its MTU does not count */
	u32 dma_align_mask_ = 0;
	u32 gather_page_ = 0;	/* netblk_core_config.gather_page */
	u32 link_mtu_ = 0;
	/* START's knobs (netblk_options.h): a knob the core uses is read here */
	netblk_start_options options_ = {};
	/* what it reaches the kernel by (target_ops.h): one indirect call each */
	netblk_queue *owner_ = nullptr;
	const netblk_target_disk_ops *disk_ = nullptr;
	const netblk_target_transport_ops *transport_ = nullptr;
	auth_config auth_ = {};

	slot *slots_ = nullptr;
	session_table sessions_;	/* the worker's (session.h) */
	rx_counters *rx_ = nullptr;
	ring free_slots_;
	ring requests_;
	ring completions_;

	/* the worker's own */
	slot_list retry_ = {};		/* the disk said "again" */
	u64 retry_due_ = 0;		/* the earliest retry_ns among them */
	bool disk_freed_ = false;	/* the disk finished something since: retry now */
	slot_list unsent_ = {};		/* replies the NIC had no room for */
	slot_list scattered_ = {};	/* datagrams of gathered READs the disk answered */
	netblk_tx tx_batch_[NETBLK_TX_BATCH];	/* reply()'s: too large for a kernel stack */
	u64 tx_due_ = 0;		/* when to offer them again */
	u64 tx_backoff_ns_ = tx_backoff_min_ns;
	u32 tx_error_streak_ = 0;	/* transmits failed with an error in a row */
	u64 tx_error_since_ = 0;
	int tx_failure_ = 0;

	worker_counters worker_ = {};
	histogram hist_;
};

} /* namespace nb */

#endif
