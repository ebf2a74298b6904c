// SPDX-License-Identifier: GPL-2.0
/* The client's retransmission timer and send window: see rto.h. */
#include "rto.h"

namespace nb {

/* RFC 6298: alpha 1/8, beta 1/4, K 4; a timeout doubles at most this often. */
constexpr u32 backoff_shift_max = 16;

u64 busy_backoff_ns(u32 busy)
{
	u64 wait = busy_backoff_min_ns;

	for (u32 k = 1; k < busy && wait < busy_backoff_max_ns; k++)
		wait *= 2;
	return min(wait, busy_backoff_max_ns);
}

void rto_estimator::init(u64 initial_ns, u64 min_ns, u64 max_ns)
{
	srtt_ns_ = 0;
	rttvar_ns_ = 0;
	min_rtt_ns_ = 0;
	min_ns_ = min_ns;
	max_ns_ = max(max_ns, min_ns);
	rto_ns_ = min(max(initial_ns, min_ns_), max_ns_);
	backoff_shift_ = 0;
}

void rto_estimator::sample(u64 rtt_ns)
{
	if (!rtt_ns)
		rtt_ns = 1;	/* 0 means "no sample yet" */
	if (!min_rtt_ns_ || rtt_ns < min_rtt_ns_)
		min_rtt_ns_ = rtt_ns;
	if (!srtt_ns_) {
		srtt_ns_ = rtt_ns;
		rttvar_ns_ = rtt_ns / 2;
	} else {
		u64 err = srtt_ns_ > rtt_ns ? srtt_ns_ - rtt_ns : rtt_ns - srtt_ns_;

		rttvar_ns_ = (3 * rttvar_ns_ + err) / 4;
		srtt_ns_ = (7 * srtt_ns_ + rtt_ns) / 8;
		if (!srtt_ns_)
			srtt_ns_ = 1;
	}
	rto_ns_ = min(max(srtt_ns_ + 4 * rttvar_ns_, min_ns_), max_ns_);
	backoff_shift_ = 0;
}

void rto_estimator::timed_out()
{
	if (backoff_shift_ < backoff_shift_max && timeout_ns() < max_ns_)
		backoff_shift_++;
}

u64 rto_estimator::timeout_ns() const
{
	u64 t = rto_ns_;

	for (u32 i = 0; i < backoff_shift_ && t < max_ns_; i++)
		t *= 2;
	return min(t, max_ns_);
}

void send_window::init(u32 cap, u32 initial)
{
	cap_ = max(cap, 1u);
	size_ = min(max(initial, 1u), cap_);
	ssthresh_ = cap_;
	prior_size_ = prior_ssthresh_ = 0;
	answered_ = 0;
	recovery_ = 0;
	decreases_ = 0;
}

void send_window::set_cap(u32 cap)
{
	cap_ = max(cap, 1u);
	size_ = min(size_, cap_);
	ssthresh_ = min(ssthresh_, cap_);
}

void send_window::answered(u32 n)
{
	for (; n && size_ < cap_; n--) {
		if (size_ < ssthresh_) {
			size_++;	/* slow start */
			continue;
		}
		if (++answered_ >= size_) {
			answered_ = 0;
			size_++;
		}
	}
}

void send_window::congested(u64 sent_no, u64 newest_sent_no)
{
	if (sent_no <= recovery_)
		return;	/* outstanding with the loss this window was halved for */
	recovery_ = newest_sent_no;
	prior_size_ = size_;
	prior_ssthresh_ = ssthresh_;
	size_ = max(size_ / 2, 1u);
	ssthresh_ = size_;
	answered_ = 0;
	add_once(decreases_, 1);
}

void send_window::undo()
{
	if (!prior_size_)
		return;
	size_ = min(max(size_, prior_size_), cap_);
	ssthresh_ = min(max(ssthresh_, prior_ssthresh_), cap_);
	prior_size_ = prior_ssthresh_ = 0;
}

} /* namespace nb */
