// An instance's service-time histogram as netblkctl sees it: the sparse
// buckets of NETBLK_A_LATENCY, read with the core's own code
// (kmod/core/histogram.cpp, compiled into netblkctl) so that a percentile
// here is exactly the one the core would compute from the same counts.
//
// Values are nanoseconds from a request's arrival at the XDP hook to its
// reply handed to the NIC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// Replies to one op and their service times' sum (NETBLK_L_OPS).
struct op_service {
	uint32_t op = 0;		// the protocol's op code (docs/protocol.md)
	uint64_t count = 0;
	uint64_t sum_ns = 0;
};

struct latency_hist {
	bool present = false;		// the kernel sent NETBLK_A_LATENCY
	uint64_t count = 0;		// NETBLK_L_COUNT
	uint64_t max_ns = 0;		// NETBLK_L_MAX_NS (exact)
	std::optional<uint64_t> sum_ns;	// NETBLK_L_SUM_NS (exact); an older module sends none
	std::vector<op_service> ops;	// an instance's: the ops with replies
	uint32_t linear_limit = 0;	// NETBLK_L_LINEAR_LIMIT
	uint32_t sub_buckets = 0;	// NETBLK_L_SUB_BUCKETS
	// (index, count) of the buckets with samples, as sent.
	std::vector<std::pair<uint32_t, uint64_t>> buckets;
};

// The core's layout: buckets in all, and the inclusive range of one.
uint32_t latency_bucket_count();
uint64_t latency_bucket_low(uint32_t index);
uint64_t latency_bucket_high(uint32_t index);

// Whether the histogram was sent and is in the core's layout (the same
// linear limit and sub-buckets, every index in range): only then can
// netblkctl read percentiles from it.
bool latency_usable(const latency_hist &h);

// The sparse buckets expanded to one count per bucket of the core's layout
// (latency_bucket_count() of them); indexes out of range are left out.
std::vector<uint64_t> latency_dense(const latency_hist &h);

// The sum of the bucket counts (NETBLK_L_COUNT may differ by the samples
// recorded while the kernel copied the buckets).
uint64_t latency_samples(const latency_hist &h);

// nb::histogram_value_at_ppm on the dense buckets and max_ns: the value at
// `ppm` parts per million (500000 = p50, 999000 = p99.9); 0 when empty.
uint64_t latency_at_ppm(const latency_hist &h, uint32_t ppm);

// The samples recorded between two dumps of the same instance: bucket
// counts `after - before`.  The maximum of the interval is not known from
// buckets: it is taken as the high end of the highest bucket with samples,
// capped at after.max_ns (0 when there are none); the sum and each op's
// count and sum are differences too.  When a bucket went down (the instance
// restarted) the result is `after` itself.
latency_hist latency_delta(const latency_hist &before, const latency_hist &after);

// The op's name as the protocol says it ("read", "write_zeroes"), or "opN".
std::string op_service_name(uint32_t op);
