/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How a client paces what it sends to an instance (the block-device client's
 * core, issue 10): when to resend, and how much to keep outstanding.
 *
 * rto_estimator is TCP's retransmission timer (RFC 6298): a smoothed round
 * trip and its variation, taken only from answers to datagrams sent once
 * (Karn's rule: the answer to a resent one may be to either send); the
 * timeout is SRTT + 4 RTTVAR within [min, max], doubled on each timeout until
 * an answer brings a sample again.  One timer for the whole queue, as TCP
 * has one for a connection: every datagram outstanding is due at its last
 * send plus the same timeout.
 *
 * send_window is RFC 5681's congestion control in datagrams: slow start
 * (one more for every answer: the window doubles each round trip) up to a
 * threshold, the instance's slots until the first loss; then additive
 * increase (one more for every window's worth answered); halved on a loss
 * or an EAGAIN -- once for all the datagrams that were outstanding
 * together, not once each -- with the threshold set there; never above the
 * instance's slots, so that a client alone never makes it answer EAGAIN.
 * A halving a timeout made is undone when the answer proves the timeout
 * spurious (RFC 3522's Eifel response, without timestamps: see
 * host_queue.h).
 */
#ifndef NETBLK_CORE_RTO_H
#define NETBLK_CORE_RTO_H

#include "types.h"

namespace nb {

/*
 * How long to wait before sending again what was answered EAGAIN for the
 * @busy-th time (1, 2, ...): 0.5 ms doubling to 50 ms, as the reference
 * client; callers add their own jitter.
 */
constexpr u64 busy_backoff_min_ns = 500000;
constexpr u64 busy_backoff_max_ns = 50000000;
u64 busy_backoff_ns(u32 busy);

class rto_estimator {
public:
	void init(u64 initial_ns, u64 min_ns, u64 max_ns);
	/* The answer to a datagram sent once, @rtt_ns after its send. */
	void sample(u64 rtt_ns);
	/* A datagram went unanswered for timeout_ns(): wait twice as long. */
	void timed_out();
	/* How long an outstanding datagram waits for its answer now. */
	u64 timeout_ns() const;
	bool has_sample() const { return srtt_ns_ != 0; }
	u64 srtt_ns() const { return srtt_ns_; }
	/* The fastest round trip sampled (0: none yet). */
	u64 min_rtt_ns() const { return min_rtt_ns_; }
	u64 rttvar_ns() const { return rttvar_ns_; }
	u32 backoffs() const { return backoff_shift_; }

private:
	u64 srtt_ns_;
	u64 rttvar_ns_;
	u64 min_rtt_ns_;
	u64 rto_ns_;		/* SRTT + 4 RTTVAR, clamped; before backoff */
	u64 min_ns_;
	u64 max_ns_;
	u32 backoff_shift_;	/* timeouts since the last sample */
};

class send_window {
public:
	/* @cap: the instance's slots (datagrams it holds at once). */
	void init(u32 cap, u32 initial);
	/* How many datagrams may be outstanding now: 1 to cap. */
	u32 limit() const { return size_; }
	u32 cap() const { return cap_; }
	/* The instance has this many slots now (a new INFO). */
	void set_cap(u32 cap);
	/* @n slots' worth was answered: grow (slow start, or one a window's worth). */
	void answered(u32 n = 1);
	/*
	 * The datagram sent as number @sent_no (of all sends) was lost or
	 * answered EAGAIN; @newest_sent_no is the last send so far.  Halves
	 * the window unless it was already halved for a loss among the same
	 * sends (one sent before the newest of the last halving's).
	 */
	void congested(u64 sent_no, u64 newest_sent_no);
	/* The last halving was for a loss that was not: back to before it. */
	void undo();
	u64 decreases() const { return decreases_; }
	u32 threshold() const { return ssthresh_; }

private:
	u32 size_;
	u32 cap_;
	u32 ssthresh_;		/* slow start below it */
	u32 prior_size_;	/* before the last halving; 0: nothing to undo */
	u32 prior_ssthresh_;
	u32 answered_;		/* towards the next increase */
	u64 recovery_;		/* sends up to this one are halved for already */
	u64 decreases_;
};

} /* namespace nb */

#endif
