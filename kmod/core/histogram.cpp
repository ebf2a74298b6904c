// SPDX-License-Identifier: GPL-2.0
#include "histogram.h"

namespace nb {

static u32 log2_floor(u64 v) { return 63 - (u32)__builtin_clzll(v); }

u32 histogram::index_of(u64 value)
{
	if (value < linear_limit)
		return (u32)value;

	u32 exponent = log2_floor(value);	/* >= 7 */

	if (exponent >= top_exponent)
		return bucket_count - 1;
	/* the six bits below the leading one pick the sub-bucket */
	u32 sub = (u32)(value >> (exponent - 6)) & (sub_buckets - 1);
	return linear_limit + (exponent - 7) * sub_buckets + sub;
}

u64 histogram::bucket_low(u32 index)
{
	if (index < linear_limit)
		return index;
	u32 exponent = 7 + (index - linear_limit) / sub_buckets;
	u64 sub = (index - linear_limit) % sub_buckets;
	return (1ull << exponent) + (sub << (exponent - 6));
}

u64 histogram::bucket_high(u32 index)
{
	if (index < linear_limit)
		return index;
	if (index == bucket_count - 1)
		return ~0ull;
	u32 exponent = 7 + (index - linear_limit) / sub_buckets;
	return bucket_low(index) + (1ull << (exponent - 6)) - 1;
}

void histogram::record(u64 value)
{
	u32 i = index_of(value);

	add_once(buckets_[i], 1);
	add_once(count_, 1);
	add_once(sum_, value);
	if (value > max_)
		__atomic_store_n(&max_, value, __ATOMIC_RELAXED);
}

void histogram::reset()
{
	for (u32 i = 0; i < bucket_count; i++)
		__atomic_store_n(&buckets_[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&count_, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&max_, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sum_, 0, __ATOMIC_RELAXED);
}

u64 histogram::value_at_ppm(u32 ppm) const
{
	return histogram_value_at_ppm(buckets_, bucket_count, max(), ppm);
}

u64 histogram_value_at_ppm(const u64 *buckets, u32 nbuckets, u64 max, u32 ppm)
{
	u64 total = 0;

	for (u32 i = 0; i < nbuckets; i++)
		total += read_once(buckets[i]);
	if (total == 0)
		return 0;

	/*
	 * Rank of the wanted sample, 1-based: ceil(ppm * total / 1e6), at least
	 * 1, computed in two parts so that ppm * total cannot overflow.
	 */
	u64 rank = total / 1000000 * ppm + ((total % 1000000) * ppm + 999999) / 1000000;
	if (rank == 0)
		rank = 1;
	if (rank >= total)
		return max;	/* the largest sample is kept exactly */

	u64 seen = 0;
	for (u32 i = 0; i < nbuckets; i++) {
		seen += read_once(buckets[i]);
		if (seen >= rank) {
			u64 low = histogram::bucket_low(i);
			u64 high = min(histogram::bucket_high(i), max);
			u64 mid = low + (high > low ? (high - low) / 2 : 0);
			return min(mid, max);
		}
	}
	return max;
}

} /* namespace nb */
