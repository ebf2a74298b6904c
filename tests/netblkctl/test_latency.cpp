// SPDX-License-Identifier: GPL-2.0
/* Service times (latency.cpp, format.cpp's microseconds): percentiles from
 * the module's sparse buckets against kmod/core's histogram. */
#include "helpers.h"

#include <memory>
#include <random>
#include <vector>

#include "latency.h"

// Percentiles from sparse buckets are the core's, for any order of the
// pairs; the list line rounds them to a tenth of a microsecond.
TEST(Latency, MicrosecondsRoundAndPercentilesAreTheCores)
{
	EXPECT_EQ(format_us(0), "0.0") << "us 0";
	EXPECT_EQ(format_us(75712), "75.7") << "us round down";
	EXPECT_EQ(format_us(75750), "75.8") << "us round half up";
	EXPECT_EQ(format_us(225757123), "225757.1") << "us large";
	EXPECT_EQ(format_us(99960), "100.0") << "us carry";
	EXPECT_EQ(format_us_exact(75000), "75") << "exact us whole";
	EXPECT_EQ(format_us_exact(75010), "75.01") << "exact us trimmed";
	EXPECT_EQ(format_us_exact(1), "0.001") << "exact us one ns";

	// Hand-checked: bucket 713 is [74752, 75775] (midpoint 75263), bucket
	// 1451 [224395264, 226492415], capped at the max 225757123.
	latency_hist small = sparse_of(*small_histogram());
	EXPECT_EQ(small.buckets, (std::vector<std::pair<uint32_t, uint64_t>>{{713, 98}, {1451, 2}}))
		<< "bucket numbers";
	EXPECT_EQ(format_latency_line(small),
		  "service time us (arrival to reply): p50 75.3, p99 225076.2, p99.9 225757.1, "
		  "max 225757.1") << "latency line";

	std::mt19937_64 rng(42);
	std::lognormal_distribution<double> dist(11.5, 1.2);	// ~100 us, long tail
	// percentiles of sparse buckets are the core's, for any order of the pairs
	auto h = std::make_unique<nb::histogram>();
	for (int round = 0; round < 4; round++) {
		for (int k = 0; k < 20000; k++)
			h->record(static_cast<uint64_t>(dist(rng)) + (round == 3 ? 50 : 0));
		h->record(round * 40);	// the linear buckets too
		latency_hist l = sparse_of(*h, round % 2);
		for (uint32_t ppm : {0u, 1u, 100000u, 500000u, 900000u, 990000u, 999000u, 999999u,
				     1000000u})
			EXPECT_EQ(latency_at_ppm(l, ppm), h->value_at_ppm(ppm))
				<< "round " << round << ", ppm " << ppm;
		std::vector<uint64_t> dense = latency_dense(l);
		EXPECT_EQ(nb::histogram_value_at_ppm(dense.data(), dense.size(), l.max_ns, 990000),
			  latency_at_ppm(l, 990000)) << "dense p99, round " << round;
		EXPECT_EQ(latency_samples(l), h->count()) << "samples, round " << round;
	}

	latency_hist bad = small;
	bad.sub_buckets = 32;
	EXPECT_EQ(format_latency_line(bad), "service time us (arrival to reply): n/a")
		<< "unknown layout is n/a";
	bad = small;
	bad.buckets.emplace_back(nb::histogram::bucket_count, 1);
	EXPECT_FALSE(latency_usable(bad)) << "bucket out of range is unusable";
	EXPECT_EQ(format_latency_line(latency_hist{}), "service time us (arrival to reply): n/a")
		<< "no histogram is n/a";
}
