// SPDX-License-Identifier: GPL-2.0
/* The service-time histogram's percentiles against a sorted reference. */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "histogram.h"

using nb::histogram;
using nb::u32;
using nb::u64;

namespace {

/* The sample of rank ceil(p * n), 1-based: the definition the histogram uses. */
u64 reference(std::vector<u64> sorted, u32 ppm)
{
	u64 n = sorted.size();
	u64 rank = (n * ppm + 999999) / 1000000;
	if (rank == 0)
		rank = 1;
	return sorted[rank - 1];
}

void expect_within(u64 got, u64 want, double tolerance)
{
	double err = std::fabs((double)got - (double)want) / (double)std::max<u64>(want, 1);
	EXPECT_LE(err, tolerance) << "got " << got << " want " << want;
}

} // namespace

TEST(Histogram, BucketsCoverEveryValueOnce)
{
	for (u32 i = 0; i + 1 < histogram::bucket_count; i++) {
		ASSERT_EQ(histogram::bucket_high(i) + 1, histogram::bucket_low(i + 1)) << i;
		ASSERT_EQ(histogram::index_of(histogram::bucket_low(i)), i);
		ASSERT_EQ(histogram::index_of(histogram::bucket_high(i)), i);
	}
	/* a bucket is at most 1/64 of its values wide */
	for (u32 i = histogram::linear_limit; i + 1 < histogram::bucket_count; i++) {
		u64 width = histogram::bucket_high(i) - histogram::bucket_low(i) + 1;
		ASSERT_LE(width * 64, histogram::bucket_low(i));
	}
	EXPECT_EQ(histogram::index_of(~0ull), histogram::bucket_count - 1);
}

TEST(Histogram, SmallValuesAreExact)
{
	auto h = std::make_unique<histogram>();
	for (u64 v = 1; v <= 100; v++)
		h->record(v);
	EXPECT_EQ(h->count(), 100u);
	EXPECT_EQ(h->max(), 100u);
	EXPECT_EQ(h->value_at_ppm(500000), 50u);
	EXPECT_EQ(h->value_at_ppm(990000), 99u);
	EXPECT_EQ(h->value_at_ppm(1000000), 100u);
	EXPECT_EQ(h->value_at_ppm(0), 1u);
}

TEST(Histogram, PercentilesWithin2PercentOfSortedReference)
{
	/* service times: log-normal around 80 us with a tail to tens of ms */
	std::mt19937_64 rng(12345);
	std::lognormal_distribution<double> body(std::log(80000.0), 0.6);
	std::exponential_distribution<double> tail(1.0 / 5e6);
	std::vector<u64> samples;
	auto h = std::make_unique<histogram>();

	for (int i = 0; i < 200000; i++) {
		u64 v = (u64)(i % 100 == 0 ? 500000 + tail(rng) : body(rng));
		samples.push_back(v);
		h->record(v);
	}
	std::sort(samples.begin(), samples.end());

	for (u32 ppm : {500000u, 900000u, 990000u, 999000u, 999900u}) {
		SCOPED_TRACE(ppm);
		expect_within(h->value_at_ppm(ppm), reference(samples, ppm), 0.02);
	}
	EXPECT_EQ(h->max(), samples.back()) << "the maximum is exact";
	EXPECT_EQ(h->value_at_ppm(1000000), samples.back());

	/* the same from raw buckets, as a netlink reader gets them */
	std::vector<u64> raw(histogram::bucket_count);
	for (u32 i = 0; i < histogram::bucket_count; i++)
		raw[i] = h->bucket(i);
	EXPECT_EQ(nb::histogram_value_at_ppm(raw.data(), histogram::bucket_count, h->max(), 999000),
		  h->value_at_ppm(999000));
}

TEST(Histogram, EmptyAndReset)
{
	auto h = std::make_unique<histogram>();
	EXPECT_EQ(h->value_at_ppm(990000), 0u);
	h->record(12345);
	h->reset();
	EXPECT_EQ(h->count(), 0u);
	EXPECT_EQ(h->max(), 0u);
	EXPECT_EQ(h->sum(), 0u);
	EXPECT_EQ(h->value_at_ppm(500000), 0u);
}

TEST(Histogram, SumIsExactWhereBucketsAreNot)
{
	auto h = std::make_unique<histogram>();
	/* one bucket holds 1,000,000 to 1,015,807: midpoints would be off */
	h->record(1000000);
	h->record(1000001);
	h->record(3);
	EXPECT_EQ(h->sum(), 2000004u);
	EXPECT_EQ(h->count(), 3u);
}
