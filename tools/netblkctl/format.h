// What netblkctl prints: an instance as the kernel describes it, and the
// helpers that turn it into text or JSON.  No netlink here, so these can be
// unit-tested on their own (see tests/netblkctl/test_format.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "key_text.h"
#include "latency.h"
#include "netblk_genl.h"

static_assert(key_text_bytes == NETBLK_KEY_BYTES, "a key file holds one instance key");

// One instance: the attributes of a NETBLK_CMD_START reply or a LIST entry.
// A knob's value as netblkctl keeps what the kernel says of it
// (netblk_options.h's lists: a flag, a u16 or a u32).
#define NETBLK_CTL_HAVE_TYPE_flag bool
#define NETBLK_CTL_HAVE_TYPE_u16 uint16_t
#define NETBLK_CTL_HAVE_TYPE_u32 uint32_t
#define NETBLK_CTL_HAVE_FIELD(NAME, name, nr, type, ...) NETBLK_CTL_HAVE_TYPE_##type name{};

// One of an instance's queues (NETBLK_A_QUEUE): its worker's CPU and its
// own share of a few counters (netblk_genl.h's enum netblk_queue_attr).
struct netblk_queue_info {
	uint32_t cpu = 0;
	std::array<uint64_t, NETBLK_S_MAX + 1> stats{};	// those the kernel sends a queue
};

// Attributes the kernel did not send stay zero / empty.
struct netblk_instance {
	std::string device;
	std::string disk_name;		// as the kernel names the device (nvme0n1p1)
	uint16_t port = 0;
	std::string ifname;		// the NIC its XDP program runs on
	uint32_t ifindex = 0;
	std::string driver;		// the NIC's
	uint32_t handoff_ifindex = 0;	// the instance's netblk<port> device; 0 once stopping
	uint32_t addr = 0;		// IPv4, network order
	std::vector<netblk_prefix> allow;	// empty: any source
	uint64_t size = 0;		// bytes
	uint32_t sector_size = 0;
	uint32_t max_io = 0;		// data bytes a datagram carries
	uint32_t slots = 0;
	uint32_t auth = 0;		// enum netblk_auth
	uint64_t uptime_ms = 0;
	uint32_t state = 0;		// enum netblk_state; 0 when not sent
	uint64_t stopping_ms = 0;
	uint64_t waiting_ms = 0;	// while waiting for its NIC
	std::string waiting_for;	// what for ("eth0 is down")
	// START's knobs as it runs them (netblk_options.h; read_only, mtu,
	// cpu, poll_us, vlan -- 0: untagged --, sessions, per_source --
	// 0: not sent --, nic_loss -- enum netblk_nic_loss --, ...)
	NETBLK_START_OPTIONS(NETBLK_CTL_HAVE_FIELD)
	// Nonzero: the NIC's driver dropped netblk's XDP program when the NIC
	// reopened (the module numbers the reopens); XDP_READY names it back.
	uint32_t xdp_dropped = 0;
	std::array<uint64_t, NETBLK_S_MAX + 1> stats{};	// by enum netblk_stat_attr
	latency_hist latency;		// NETBLK_A_LATENCY (LIST only)
	std::vector<netblk_queue_info> queue_list;	// NETBLK_A_QUEUE_LIST (LIST only)
	// Datagrams the NIC's XDP program dropped for a source not on the
	// allowlist (its own counter, not the module's); nullopt: not read.
	std::optional<uint64_t> not_allowed;

	bool stopping() const { return state == NETBLK_STATE_STOPPING; }
	bool waiting() const { return state == NETBLK_STATE_WAITING; }

	uint64_t stat(netblk_stat_attr s) const { return stats[s]; }
};

// netblk_counters.h's lists, as netblkctl's text, JSON, Prometheus output
// and the documentation's table read them (one definition per counter).
enum class counter_kind { count, bytes, gauge, ns };

// An instance's counter (NETBLK_STATS) or an attached device's (NETBLK_HOST_STATS).
template <typename Attr>
struct counter_info {
	Attr attr;
	const char *attr_name;	// NETBLK_S_REQUESTS
	const char *name;	// the JSON field
	counter_kind kind;
	const char *prom;	// its Prometheus family; "": emitted by hand, or not at all
	const char *help;
};

#define NETBLKCTL_KIND_count counter_kind::count
#define NETBLKCTL_KIND_bytes counter_kind::bytes
#define NETBLKCTL_KIND_gauge counter_kind::gauge
#define NETBLKCTL_KIND_ns counter_kind::ns
#define NETBLKCTL_STAT_INFO(NAME, name, nr, where, kind, prom, help) \
	{NETBLK_S_##NAME, "NETBLK_S_" #NAME, #name, NETBLKCTL_KIND_##kind, prom, help},
#define NETBLKCTL_HOST_STAT_INFO(NAME, name, nr, where, kind, prom, help) \
	{NETBLK_HS_##NAME, "NETBLK_HS_" #NAME, #name, NETBLKCTL_KIND_##kind, prom, help},

inline constexpr counter_info<netblk_stat_attr> stat_infos[] = {
	NETBLK_STATS(NETBLKCTL_STAT_INFO)
};
inline constexpr counter_info<netblk_host_stat_attr> host_stat_infos[] = {
	NETBLK_HOST_STATS(NETBLKCTL_HOST_STAT_INFO)
};

// Datagrams dropped unanswered, by reason (NETBLK_DROPS): the JSON field
// is dropped_<name>, netblk_bad_total's reason label <name>.
struct drop_reason_info {
	netblk_stat_attr attr;
	const char *attr_name;
	const char *name;
	const char *text;	// `list`'s "bad" line
	const char *help;
};
#define NETBLKCTL_DROP_INFO(NAME, name, nr, text, help) \
	{NETBLK_S_DROP_##NAME, "NETBLK_S_DROP_" #NAME, #name, text, help},
inline constexpr drop_reason_info drop_reasons[] = {
	NETBLK_DROPS(NETBLKCTL_DROP_INFO)
};

// The statuses a request is refused with on the spot, or by the worker
// without the disk (NETBLK_REFUSALS), each with its counter
// (NETBLK_S_REFUSED_*): the JSON field refused_<name>, the errno name in
// the list's "refused" text and netblk_refused_total's status label.
struct refusal_status {
	netblk_stat_attr attr;
	const char *attr_name;
	const char *name;
	const char *status;
	const char *help;
};
#define NETBLKCTL_REFUSAL_INFO(NAME, name, nr, help) \
	{NETBLK_S_REFUSED_##NAME, "NETBLK_S_REFUSED_" #NAME, #name, #NAME, help},
inline constexpr refusal_status refusal_statuses[] = {
	NETBLK_REFUSALS(NETBLKCTL_REFUSAL_INFO)
};

// One device of the block-device client: an ATTACH reply or an ATTACHED entry.
struct netblk_attached {
	std::string disk;		// netblkN
	uint32_t addr = 0;		// the instance's IPv4, network order
	uint16_t port = 0;
	std::string ifname;		// dev=, "" when the route decides
	bool read_only = false;
	uint64_t size = 0;		// bytes
	uint32_t sector_size = 0;
	uint32_t max_io = 0;
	uint32_t slots = 0;		// the instance's
	// ATTACH's knobs (netblk_options.h): queue_depth, timeout_ms (0: I/O
	// never fails on its own), ...
	NETBLK_ATTACH_OPTIONS(NETBLK_CTL_HAVE_FIELD)
	uint32_t auth = 0;		// enum netblk_auth
	uint64_t uptime_ms = 0;
	std::array<uint64_t, NETBLK_HS_MAX + 1> stats{};	// by enum netblk_host_stat_attr
	latency_hist latency;		// a request's queueing to its last answer (ATTACHED only)
	// Each hardware queue's NETBLK_Q_HOST_STATS (ATTACHED, a device of several)
	std::vector<std::array<uint64_t, NETBLK_HS_MAX + 1>> queue_list;

	uint64_t stat(netblk_host_stat_attr s) const { return stats[s]; }
};

// A NETBLK_CMD_EVENT message of the "events" group.
struct netblk_event_info {
	uint32_t event = 0;	// enum netblk_event (NETBLK_EVENT_*)
	uint32_t reason = 0;	// enum netblk_stop_reason; 0 when not sent
	uint32_t err = 0;	// positive errno; 0 when not sent
	std::string message;	// "" when not sent
	// The instance's attributes (no stats, no latency); a FAILED event has
	// only what START asked for: device, port and ifname when given.
	netblk_instance inst;
};

// Bytes in the largest of KiB/MiB/GiB/TiB that gives at least 1, with one
// decimal only when not whole: "512 KiB", "1.5 GiB".  Below 1 KiB: "512 B".
std::string format_size(uint64_t bytes);

// Dotted quad of an address in network order: "10.0.2.15".
std::string format_ipv4(uint32_t addr_be);

// "10.1.0.0/16", or "10.2.3.4" for a /32.
std::string format_prefix(const netblk_prefix &p);

// A JSON string literal, quotes included; bytes that are not UTF-8 become
// U+FFFD.
std::string json_string(std::string_view s);

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string utf8_valid(std::string_view s);

// A JSON number for a finite double: the shortest text that reads back as
// the same double ("12.5", "1e+21"); "null" for NaN or infinity.
std::string json_double(double v);

// Nanoseconds as microseconds with one decimal, rounded: 75712 -> "75.7".
std::string format_us(uint64_t ns);

// Nanoseconds as microseconds, exact, without trailing zeros: 75712 ->
// "75.712", 75000 -> "75" (for JSON).
std::string format_us_exact(uint64_t ns);

// The fifth line of `netblkctl list` without its indent or newline:
// "service time us (arrival to reply): p50 75.7, p99 499.7, p99.9 704.5, max 225757.1",
// "...: no samples yet", or "...: n/a" when the kernel sent no histogram
// (or one in a layout this netblkctl does not know).
std::string format_latency_line(const latency_hist &h,
				std::string_view what = "arrival to reply");

// "none", "header" or "full": an enum netblk_auth as start's auth= says it.
const char *auth_name(uint32_t auth);

// nic-loss= as the command line says it: "wait" or "stop".
const char *nic_loss_name(uint32_t nic_loss);

// The line `netblkctl start` prints (no newline).
std::string format_started(const netblk_instance &inst);

// The line `netblkctl attach` prints (no newline):
// "netblk: /dev/netblk0 is 10.0.0.5:7000 (256 MiB, read-write), 1024 bytes a datagram".
std::string format_attached(const netblk_attached &att);

// What NETBLK_HS_CHANGED says, after "the server ": "serves another device".
const char *host_change_text(uint64_t change);

// The lines `netblkctl list` prints for one attached device (newline-terminated).
std::string format_attached_text(const netblk_attached &att);

// `netblkctl list --attached --json`: an array of objects, one per attached
// device (newline-terminated).  Field names (stable; keep README.md in step):
//   disk, addr, port, ifname, read_only, size_bytes, sector_size, max_io,
//   slots, queue_depth, timeout_ms, auth, uptime_ms,
//   stats: { every NETBLK_HOST_STATS counter of netblk_counters.h, by name },
//   latency: as an instance's (a request's queueing to its last answer),
//   queue_list: [{requests, completed, sends, timeouts, sessions_opened,
//     outstanding}, ...] a hardware queue each, [] for a device of one
std::string format_attached_json(const std::vector<netblk_attached> &atts);

// The lines `netblkctl list` prints for one instance (newline-terminated).
// Whether each queue of an instance reports counter @s (NETBLK_Q_STATS).
bool queue_counter(netblk_stat_attr s);
// Whether each hardware queue of an attached device reports @s (NETBLK_Q_HOST_STATS).
bool host_queue_counter(netblk_host_stat_attr s);
std::string format_instance_text(const netblk_instance &inst);

// `netblkctl list --json`: an array of objects (newline-terminated), one per
// instance.  Field names (stable; keep README.md in step):
//   port, device, read_only (bool), state ("serving" | "stopping"),
//   stopping_ms, ifname, ifindex, driver, vlan (0: untagged),
//   handoff_ifindex, addr ("a.b.c.d"), allow (["10.1.0.0/16", ...], [] for
//   any source), mtu, cpu, poll_us, size_bytes, sector_size, max_io, slots,
//   sessions, per_source, then each "gen" knob of netblk_options.h's
//   START list by its field name (disk_tries, ...), auth ("none" |
//   "header" | "full"), uptime_ms,
//   stats: { every NETBLK_STATS counter of netblk_counters.h by name, in
//            its order, then dropped_<reason> (NETBLK_DROPS) and
//            refused_<status> (NETBLK_REFUSALS), then not_allowed (null when
//            the XDP program's counter was not read) },
//   latency: null, or { count, max_ns, p50_us, p99_us, p999_us,
//            linear_limit, sub_buckets, buckets: [[index, count], ...] }
std::string format_instances_json(const std::vector<netblk_instance> &insts);

// The documentation's tables of counters (tools/netblkctl/README.md, between
// its "counters" markers), made from netblk_counters.h's lists:
// tests/netblkctl/test_counters.cpp checks that the README holds them.
std::string format_counter_docs();

// netblkctl --version: this tool's release and the loaded module's.
// module_version: /sys/module/netblk/version's text ("" when the module is
// loaded but has none); nullopt when the module is not loaded.
std::string format_version(std::optional<std::string_view> module_version);
