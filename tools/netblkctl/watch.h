// `netblkctl watch`: live rates of every instance from two LIST dumps, and
// the events of the "events" group, as text or JSON lines.  No netlink
// here, so this can be tested on synthetic dumps (tests/netblkctl/test_watch.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format.h"
#include "latency.h"

// One instance over one interval of `watch`.
struct instance_rates {
	uint16_t port = 0;
	std::string device;
	std::string ifname;
	double seconds = 0;	// the interval the rates are over
	bool fresh = false;	// not in the previous dump (or restarted): since its start
	// per second
	double requests = 0, reads = 0, read_bytes = 0, writes = 0, write_bytes = 0,
	       refused = 0;
	uint64_t inflight = 0;	// at the end of the interval
	bool latency_known = false;	// both dumps had a histogram netblkctl reads
	latency_hist latency;	// the samples of the interval (latency_delta)
};

// The rates of `now` since `before`, `elapsed_s` seconds earlier.  An
// instance with no `before` (nullptr), or whose `before` is another one
// (another device, a lower uptime, counters gone down: it restarted) is
// counted from its start, over its uptime when that is shorter.
instance_rates compute_rates(const netblk_instance *before, const netblk_instance &now,
			     double elapsed_s);

// compute_rates for every instance of `now`, matched to `before` by port, in
// the order of `now`.
std::vector<instance_rates> compute_all_rates(const std::vector<netblk_instance> &before,
					      const std::vector<netblk_instance> &now,
					      double elapsed_s);

// The interval's percentile in nanoseconds (latency_at_ppm of the delta);
// meaningful only when latency_known and latency_samples(latency) > 0.
uint64_t rates_percentile(const instance_rates &r, uint32_t ppm);

// One line, no newline:
// "port 7000: requests 12345/s, reads 6000/s (5.9 MiB/s), writes 6345/s (6.2 MiB/s), refused 0/s, p99 499.7 us"
// The p99 part is "p99 -" when no request was answered in the interval and
// "p99 n/a" when the kernel sent no histogram.
std::string format_rates_text(const instance_rates &r);

// One JSON object, no newline; `unix_time` is seconds since the epoch.
//   {"type": "rates", "time", "port", "device", "ifname", "interval_s",
//    "fresh", "requests_per_s", "reads_per_s", "read_bytes_per_s",
//    "writes_per_s", "write_bytes_per_s", "refused_per_s", "inflight",
//    "samples", "p50_us", "p99_us"}   (samples/p50_us/p99_us may be null)
std::string format_rates_json(const instance_rates &r, double unix_time);

// One attached device (netblkctl attach) over one interval of `watch`.
struct attached_rates {
	std::string disk;
	uint32_t addr = 0;
	uint16_t port = 0;
	double seconds = 0;
	bool fresh = false;	// attached within the interval (or attached anew)
	// per second
	double requests = 0, errors = 0, write_bytes = 0, read_bytes = 0, resends = 0;
	uint64_t outstanding = 0;	// datagrams, at the end of the interval
	bool unreachable = false;
	uint64_t changed = 0;	// enum netblk_host_change
	bool latency_known = false;
	latency_hist latency;
};

// As compute_rates, for the attached devices of `now` matched to `before` by
// disk; one attached anew (a lower uptime, another server) counts from its
// start.  Write bytes are WRITE data sent (resends included), read bytes READ
// data received.
std::vector<attached_rates> compute_attached_rates(const std::vector<netblk_attached> &before,
						   const std::vector<netblk_attached> &now,
						   double elapsed_s);

// One line, no newline:
// "/dev/netblk0: requests 800/s, errors 0/s, writes 3.1 MiB/s, reads 0.0 MiB/s, resends 0/s, outstanding 4, p99 812.0 us"
// with " UNREACHABLE" or " STOPPED" at the end when so.
std::string format_attached_rates_text(const attached_rates &r);

// One JSON object, no newline: {"type": "attached_rates", "time", "disk",
// "server", "interval_s", "fresh", "requests_per_s", "errors_per_s",
// "write_bytes_per_s", "read_bytes_per_s", "resends_per_s", "outstanding",
// "unreachable", "changed", "samples", "p50_us", "p99_us"}
std::string format_attached_rates_json(const attached_rates &r, double unix_time);

// One line, no newline:
//   event: port 7000 started on eth0 10.0.2.15: /dev/nvme0n1p1 (256 MiB, rw)
//   event: port 7000 stopped (asked)
//   event: port 7000 stopped (NIC gone: eth0 went down)
//   event: start of /dev/x on port 7000 failed: <message>
//   event: port 7000 I/O error: <message>
std::string format_event_text(const netblk_event_info &ev);

// One JSON object, no newline:
//   {"type": "event", "time", "event" ("started", "stopped", "failed",
//    "io_error" or "unknown"), "event_code", "port", "device", "ifname",
//    "reason" (null, "asked", "rmmod", "nic_gone", "device_gone" or
//    "unknown"), "reason_code", "errno", "message"}
// (reason_code, errno, message: null when the kernel did not send them)
std::string format_event_json(const netblk_event_info &ev, double unix_time);
