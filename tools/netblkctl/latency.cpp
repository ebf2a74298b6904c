// The service-time histogram read with the core's code: see latency.h.
#include "latency.h"

#include <iterator>

#include "histogram.h"	// kmod/core

uint32_t latency_bucket_count()
{
	return nb::histogram::bucket_count;
}

uint64_t latency_bucket_low(uint32_t index)
{
	return nb::histogram::bucket_low(index);
}

uint64_t latency_bucket_high(uint32_t index)
{
	return nb::histogram::bucket_high(index);
}

bool latency_usable(const latency_hist &h)
{
	if (!h.present || h.linear_limit != nb::histogram::linear_limit ||
	    h.sub_buckets != nb::histogram::sub_buckets)
		return false;
	for (const auto &b : h.buckets)
		if (b.first >= nb::histogram::bucket_count)
			return false;
	return true;
}

std::vector<uint64_t> latency_dense(const latency_hist &h)
{
	std::vector<uint64_t> dense(nb::histogram::bucket_count, 0);
	for (const auto &[index, count] : h.buckets)
		if (index < dense.size())
			dense[index] += count;
	return dense;
}

uint64_t latency_samples(const latency_hist &h)
{
	uint64_t total = 0;
	for (const auto &b : h.buckets)
		total += b.second;
	return total;
}

uint64_t latency_at_ppm(const latency_hist &h, uint32_t ppm)
{
	std::vector<uint64_t> dense = latency_dense(h);
	return nb::histogram_value_at_ppm(dense.data(), static_cast<uint32_t>(dense.size()),
					  h.max_ns, ppm);
}

latency_hist latency_delta(const latency_hist &before, const latency_hist &after)
{
	std::vector<uint64_t> a = latency_dense(after), b = latency_dense(before);
	latency_hist d = after;
	d.buckets.clear();
	d.max_ns = 0;
	for (uint32_t i = 0; i < a.size(); i++) {
		if (a[i] < b[i])
			return after;	// counts never go down: a new instance
		if (a[i] == b[i])
			continue;
		d.buckets.emplace_back(i, a[i] - b[i]);
		d.max_ns = nb::histogram::bucket_high(i);
	}
	if (d.max_ns > after.max_ns)
		d.max_ns = after.max_ns;
	d.count = latency_samples(d);
	d.sum_ns.reset();
	if (after.sum_ns && before.sum_ns && *after.sum_ns >= *before.sum_ns)
		d.sum_ns = *after.sum_ns - *before.sum_ns;
	for (op_service &op : d.ops)
		for (const op_service &was : before.ops)
			if (was.op == op.op && was.count <= op.count && was.sum_ns <= op.sum_ns) {
				op.count -= was.count;
				op.sum_ns -= was.sum_ns;
			}
	return d;
}

std::string op_service_name(uint32_t op)
{
	static const char *const names[] = {nullptr, "info", "read", "write", "flush", "trim",
					    "write_zeroes", "hello"};
	if (op < std::size(names) && names[op])
		return names[op];
	return "op" + std::to_string(op);
}
