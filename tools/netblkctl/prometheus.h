// `netblkctl stats --prometheus`: the instances' counters, gauges and
// service-time histogram in the Prometheus text exposition format (0.0.4),
// e.g. for node_exporter's textfile collector.  See README.md for the metric
// names and how the core's buckets map to the `le` bounds.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "latency.h"

// The fixed `le` bounds of netblk_service_time_seconds, in nanoseconds,
// and as the label says them; +Inf comes after.
struct prometheus_bound {
	uint64_t ns;
	const char *le;
};
// 0.05 to 0.5 s resolve the clients' resend timeouts (the kernel client's
// floor is 0.1 s, the Python client's default 0.25 s).
inline constexpr std::array<prometheus_bound, 16> prometheus_bounds{{
	{10'000, "1e-05"},
	{25'000, "2.5e-05"},
	{50'000, "5e-05"},
	{100'000, "0.0001"},
	{250'000, "0.00025"},
	{500'000, "0.0005"},
	{1'000'000, "0.001"},
	{2'500'000, "0.0025"},
	{5'000'000, "0.005"},
	{10'000'000, "0.01"},
	{25'000'000, "0.025"},
	{50'000'000, "0.05"},
	{100'000'000, "0.1"},
	{250'000'000, "0.25"},
	{500'000'000, "0.5"},
	{1'000'000'000, "1"},
}};

// The histogram at those bounds: cumulative counts, one a bound and the
// last for +Inf (the sum of all buckets).  A core bucket counts toward a
// bound when its high end (latency_bucket_high) is <= the bound, so each
// count is exact for "samples <= the largest bucket edge <= the bound".
std::array<uint64_t, prometheus_bounds.size() + 1> prometheus_cumulative(const latency_hist &h);

// The approximate sum of the samples in seconds: each bucket's midpoint (as
// the core reads percentiles: no more than max_ns) times its count.  Only
// for a module that sends no exact sum (NETBLK_L_SUM_NS).
double prometheus_sum_seconds(const latency_hist &h);

// A label value escaped for the format (\\, \", \n), invalid UTF-8 as U+FFFD.
std::string prometheus_label_value(std::string_view s);

// The whole exposition, newline-terminated; every metric family's HELP and
// TYPE even when there is no instance.  Devices attached by the
// block-device client are the netblk_host_* families, labelled by disk and
// the server they are of.
std::string format_prometheus(const std::vector<netblk_instance> &insts,
			      const std::vector<netblk_attached> &atts = {});

// README.md's name of the instance_info family, its labels those
// format_prometheus gives an instance besides port, device and nic:
// "`netblk_instance_info{path, addr, ...}`".
std::string format_instance_info_docs();
