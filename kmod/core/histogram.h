/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Log-linear latency histogram (the HdrHistogram layout): values below 128
 * have a bucket each; above, every power of two is cut into 64 equal buckets,
 * so a bucket is at most 1/64 of the values it holds wide and a percentile
 * read as a bucket's midpoint is within 0.8 % of the true sample.  The
 * maximum and the sum are kept exactly (the sum for a mean, Prometheus's
 * _sum: 2^64 ns is 584 years of service time).  One writer (the instance's
 * worker); readers on other CPUs see counts that are each consistent, taken
 * one by one.
 *
 * Integer only: the module uses no floating point.
 */
#ifndef NETBLK_CORE_HISTOGRAM_H
#define NETBLK_CORE_HISTOGRAM_H

#include "core_api.h"
#include "types.h"

namespace nb {

class histogram {
public:
	static constexpr u32 linear_limit = 128;	/* values below: exact */
	static constexpr u32 sub_buckets = 64;		/* per power of two above */
	static constexpr u32 top_exponent = 44;		/* 2^44 ns: about 4.9 hours */
	static constexpr u32 bucket_count =
		linear_limit + (top_exponent - 7) * sub_buckets;

	void record(u64 value);
	void reset();

	u64 count() const { return read_once(count_); }
	u64 max() const { return read_once(max_); }
	u64 sum() const { return read_once(sum_); }
	u64 bucket(u32 index) const { return read_once(buckets_[index]); }

	/* The value at the given parts-per-million rank (500000 = median). */
	u64 value_at_ppm(u32 ppm) const;

	static u32 index_of(u64 value);
	/* Smallest and largest value bucket @index holds. */
	static u64 bucket_low(u32 index);
	static u64 bucket_high(u32 index);

private:
	u64 count_ = 0;
	u64 max_ = 0;
	u64 sum_ = 0;
	u64 buckets_[bucket_count] = {};
};

static_assert(histogram::linear_limit == NETBLK_LATENCY_LINEAR_LIMIT &&
	      histogram::sub_buckets == NETBLK_LATENCY_SUB_BUCKETS,
	      "the layout readers are told is the one used");

/*
 * A percentile from raw bucket counts (as dumped over netlink): the midpoint
 * of the bucket holding the sample of rank ceil(ppm * total / 1e6), no larger
 * than @max; @max itself for the last rank.  0 when empty.
 */
u64 histogram_value_at_ppm(const u64 *buckets, u32 nbuckets, u64 max, u32 ppm);

} /* namespace nb */

#endif
