// Text and JSON output of netblkctl: see format.h.
#include "format.h"
#include "netblk_version.h"

#include <algorithm>
#include <arpa/inet.h>
#include <bitset>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

namespace {

// (maybe unused: while no line is "gen".)
// The knobs of netblk_options.h's lists marked "gen" (the "own" ones each
// have their place, by hand): a JSON field each, after the hand-written
// settings (per_source), and the text's "options" line with those not their default (nor
// 0: not said by an older kernel).
[[maybe_unused]] std::string knob_json(bool b)
{
	return b ? "true" : "false";
}

[[maybe_unused]] std::string knob_json(uint16_t v)
{
	return std::to_string(v);
}

[[maybe_unused]] std::string knob_json(uint32_t v)
{
	return std::to_string(v);
}

[[maybe_unused]] std::string knob_word(const char *cli, bool b, bool)
{
	return b ? std::string(" ") + cli : "";
}

[[maybe_unused]] std::string knob_word(const char *cli, uint32_t v, uint32_t def)
{
	return v == 0 || v == def ? "" : std::string(" ") + cli + "=" + std::to_string(v);
}

[[maybe_unused]] std::string knob_word(const char *cli, uint16_t v, uint32_t def)
{
	return knob_word(cli, (uint32_t)v, def);
}

#define KNOB_JSON_own(v, fld)
#define KNOB_JSON_gen(v, fld) o << ", \"" #fld "\": " << knob_json(v.fld);
#define KNOB_JSON_OF_INST(NAME, fld, nr, type, lo, hi, dflt, ctl, ...) KNOB_JSON_##ctl(inst, fld)
#define KNOB_JSON_OF_ATT(NAME, fld, nr, type, lo, hi, dflt, ctl, ...) KNOB_JSON_##ctl(a, fld)
#define KNOB_WORD_own(v, fld, cli, dflt)
#define KNOB_WORD_gen(v, fld, cli, dflt) words += knob_word(cli, v.fld, dflt);
#define KNOB_WORD_OF_INST(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, ...) \
	KNOB_WORD_##ctl(inst, fld, cli, dflt)
#define KNOB_WORD_OF_ATT(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, ...) \
	KNOB_WORD_##ctl(att, fld, cli, dflt)

// Rounded tenths of `unit` in `bytes`, without overflow.
uint64_t tenths_of(uint64_t bytes, uint64_t unit)
{
	return bytes / unit * 10 + (bytes % unit * 10 + unit / 2) / unit;
}

// Length of the valid UTF-8 sequence that starts at s[i], or 0.
size_t utf8_len(std::string_view s, size_t i)
{
	auto c = static_cast<unsigned char>(s[i]);
	size_t n;
	uint32_t cp, min;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		n = 2, cp = c & 0x1f, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		n = 3, cp = c & 0x0f, min = 0x800;
	else if ((c & 0xf8) == 0xf0)
		n = 4, cp = c & 0x07, min = 0x10000;
	else
		return 0;
	if (i + n > s.size())
		return 0;
	for (size_t k = 1; k < n; k++) {
		auto d = static_cast<unsigned char>(s[i + k]);
		if ((d & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (d & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_escape_char(std::string &out, char c)
{
	switch (c) {
	case '"': out += "\\\""; return;
	case '\\': out += "\\\\"; return;
	case '\b': out += "\\b"; return;
	case '\f': out += "\\f"; return;
	case '\n': out += "\\n"; return;
	case '\r': out += "\\r"; return;
	case '\t': out += "\\t"; return;
	}
	if (static_cast<unsigned char>(c) < 0x20) {
		char buf[8];
		snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
		out += buf;
		return;
	}
	out += c;
}

// A counter's value as `list` says it: bytes in KiB..TiB, ns as microseconds.
std::string counter_text(counter_kind kind, uint64_t v)
{
	switch (kind) {
	case counter_kind::bytes: return format_size(v);
	case counter_kind::ns: return format_us(v) + " us";
	default: return std::to_string(v);
	}
}

// The counters `list`'s curated lines do not show (a new one, until it gets
// its place there): "  more: unknown ops 3, ...\n", or "".
template <typename Info, typename Stat, size_t N, size_t M>
std::string more_text(const Info (&infos)[N], const std::bitset<M> &shown, Stat stat)
{
	std::string out;
	for (const auto &c : infos) {
		if (shown[c.attr])
			continue;
		std::string label = c.name;
		std::replace(label.begin(), label.end(), '_', ' ');
		out += (out.empty() ? "  more: " : ", ") + label + " " +
		       counter_text(c.kind, stat(c.attr));
	}
	return out.empty() ? out : out + "\n";
}

// "eth0 vlan 5 10.0.2.15", or the address alone when the kernel sent no NIC name.
std::string endpoint(const netblk_instance &inst)
{
	std::string addr = format_ipv4(inst.addr);
	if (inst.vlan)
		addr = "vlan " + std::to_string(inst.vlan) + " " + addr;
	return inst.ifname.empty() ? addr : inst.ifname + " " + addr;
}

// "bad 3 (checksum 2, bad source 1)": the reasons that have counts.
std::string bad_text(const netblk_instance &inst)
{
	std::string out = "bad " + std::to_string(inst.stat(NETBLK_S_BAD));
	const char *sep = " (";
	for (const auto &d : drop_reasons) {
		if (!inst.stat(d.attr))
			continue;
		out += sep + std::string(d.text) + " " + std::to_string(inst.stat(d.attr));
		sep = ", ";
	}
	return *sep == ',' ? out + ")" : out;
}

// "refused 5 (busy 1, ERANGE 4)": busy always, the other statuses that have counts.
std::string refused_text(const netblk_instance &inst)
{
	std::string out = "refused " + std::to_string(inst.stat(NETBLK_S_REFUSED)) + " (busy " +
			  std::to_string(inst.stat(NETBLK_S_BUSY));
	for (const auto &r : refusal_statuses)
		if (r.attr != NETBLK_S_REFUSED_EAGAIN && inst.stat(r.attr))
			out += ", " + std::string(r.status) + " " + std::to_string(inst.stat(r.attr));
	return out + ")";
}

// "sources: any", or "sources: 10.1.0.0/16, 10.2.3.4 (12 others dropped)".
std::string allow_text(const netblk_instance &inst)
{
	if (inst.allow.empty())
		return "sources: any";
	std::string out = "sources: ";
	for (size_t i = 0; i < inst.allow.size(); i++)
		out += (i ? ", " : "") + format_prefix(inst.allow[i]);
	if (inst.not_allowed)
		out += " (" + std::to_string(*inst.not_allowed) + " others dropped)";
	return out;
}

uint64_t inflight(const netblk_instance &inst)
{
	return inst.stat(NETBLK_S_INFLIGHT_QUEUED) + inst.stat(NETBLK_S_INFLIGHT_DISK) +
	       inst.stat(NETBLK_S_INFLIGHT_DONE);
}

// The percentiles of the list line and of "latency" in JSON.
constexpr uint32_t ppm_p50 = 500000, ppm_p99 = 990000, ppm_p999 = 999000;

// A percentile for JSON: exact microseconds, or null without samples.
std::string json_percentile(const latency_hist &h, bool readable, uint32_t ppm)
{
	return readable ? format_us_exact(latency_at_ppm(h, ppm)) : "null";
}

void latency_json(std::ostream &o, const latency_hist &h)
{
	if (!h.present) {
		o << "null";
		return;
	}
	bool readable = latency_usable(h) && latency_samples(h) > 0;
	o << "{\"count\": " << h.count
	  << ", \"max_ns\": " << h.max_ns
	  << ", \"sum_ns\": " << (h.sum_ns ? std::to_string(*h.sum_ns) : "null")
	  << ", \"p50_us\": " << json_percentile(h, readable, ppm_p50)
	  << ", \"p99_us\": " << json_percentile(h, readable, ppm_p99)
	  << ", \"p999_us\": " << json_percentile(h, readable, ppm_p999)
	  << ", \"linear_limit\": " << h.linear_limit
	  << ", \"sub_buckets\": " << h.sub_buckets
	  << ", \"buckets\": [";
	const char *sep = "";
	for (const auto &[index, count] : h.buckets) {
		o << sep << '[' << index << ", " << count << ']';
		sep = ", ";
	}
	o << "], \"ops\": {";
	sep = "";
	for (const op_service &op : h.ops) {
		o << sep << json_string(op_service_name(op.op)) << ": {\"count\": " << op.count
		  << ", \"sum_ns\": " << op.sum_ns << "}";
		sep = ", ";
	}
	o << "}}";
}

void instance_json(std::ostream &o, const netblk_instance &inst)
{
	o << "{\"port\": " << inst.port
	  << ", \"device\": " << json_string(inst.device)
	  << ", \"disk_name\": " << json_string(inst.disk_name)
	  << ", \"read_only\": " << (inst.read_only ? "true" : "false")
	  << ", \"state\": "
	  << (inst.stopping() ? "\"stopping\"" : inst.waiting() ? "\"waiting\"" : "\"serving\"")
	  << ", \"stopping_ms\": " << inst.stopping_ms
	  << ", \"waiting_ms\": " << inst.waiting_ms
	  << ", \"waiting_for\": " << json_string(inst.waiting_for)
	  << ", \"nic_loss\": \"" << nic_loss_name(inst.nic_loss) << "\""
	  << ", \"ifname\": " << json_string(inst.ifname)
	  << ", \"ifindex\": " << inst.ifindex
	  << ", \"driver\": " << json_string(inst.driver)
	  << ", \"xdp_dropped\": " << inst.xdp_dropped
	  << ", \"vlan\": " << inst.vlan
	  << ", \"handoff_ifindex\": " << inst.handoff_ifindex
	  << ", \"addr\": " << json_string(format_ipv4(inst.addr))
	  << ", \"allow\": [";
	for (size_t i = 0; i < inst.allow.size(); i++)
		o << (i ? ", " : "") << json_string(format_prefix(inst.allow[i]));
	o << "]"
	  << ", \"mtu\": " << inst.mtu
	  << ", \"cpu\": " << inst.cpu
	  << ", \"poll_us\": " << inst.poll_us
	  << ", \"size_bytes\": " << inst.size
	  << ", \"sector_size\": " << inst.sector_size
	  << ", \"max_io\": " << inst.max_io
	  << ", \"slots\": " << inst.slots
	  << ", \"sessions\": " << inst.sessions
	  << ", \"per_source\": " << inst.per_source;
	NETBLK_START_OPTIONS(KNOB_JSON_OF_INST)
	o << ", \"auth\": " << json_string(auth_name(inst.auth))
	  << ", \"uptime_ms\": " << inst.uptime_ms
	  << ", \"stats\": {";
	const char *sep = "";
	for (const auto &c : stat_infos) {
		o << sep << '"' << c.name << "\": " << inst.stat(c.attr);
		sep = ", ";
	}
	for (const auto &d : drop_reasons)
		o << ", \"dropped_" << d.name << "\": " << inst.stat(d.attr);
	for (const auto &r : refusal_statuses)
		o << ", \"refused_" << r.name << "\": " << inst.stat(r.attr);
	o << ", \"not_allowed\": "
	  << (inst.not_allowed ? std::to_string(*inst.not_allowed) : "null");
	o << "}, \"latency\": ";
	latency_json(o, inst.latency);
	o << ", \"queue_list\": [";
	for (size_t i = 0; i < inst.queue_list.size(); i++) {
		const netblk_queue_info &q = inst.queue_list[i];

		o << (i ? ", " : "") << "{\"cpu\": " << q.cpu;
		for (const auto &c : stat_infos)
			if (queue_counter(c.attr))
				o << ", \"" << c.name << "\": " << q.stats[c.attr];
		o << "}";
	}
	o << "]}";
}

} // namespace

std::string format_size(uint64_t bytes)
{
	static constexpr const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
	constexpr size_t last = std::size(units) - 1;
	if (bytes < 1024)
		return std::to_string(bytes) + " B";
	size_t u = 0;
	uint64_t unit = 1024;
	while (u < last && bytes / unit >= 1024)
		unit *= 1024, u++;
	uint64_t tenths = tenths_of(bytes, unit);
	if (tenths >= 10240 && u < last) {	// 1023.96 KiB rounds to 1 MiB
		unit *= 1024, u++;
		tenths = tenths_of(bytes, unit);
	}
	std::string num = std::to_string(tenths / 10);
	if (tenths % 10)
		num += "." + std::to_string(tenths % 10);
	return num + " " + units[u];
}

std::string format_ipv4(uint32_t addr_be)
{
	char buf[INET_ADDRSTRLEN];
	if (!inet_ntop(AF_INET, &addr_be, buf, sizeof(buf)))
		return "?";
	return buf;
}

std::string format_prefix(const netblk_prefix &p)
{
	std::string a = format_ipv4(p.addr);
	return p.len == 32 ? a : a + "/" + std::to_string(p.len);
}

std::string json_string(std::string_view s)
{
	std::string out = "\"";
	for (size_t i = 0; i < s.size();) {
		size_t n = utf8_len(s, i);
		if (n == 0) {
			out += "\\ufffd";
			i++;
		} else if (n == 1) {
			json_escape_char(out, s[i++]);
		} else {
			out.append(s, i, n);
			i += n;
		}
	}
	return out + "\"";
}

std::string json_double(double v)
{
	if (!std::isfinite(v))
		return "null";
	char buf[32];
	auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
	if (ec != std::errc())
		return "null";
	return std::string(buf, end);
}

std::string format_us(uint64_t ns)
{
	uint64_t tenths = ns / 100 + (ns % 100 >= 50);
	return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string format_us_exact(uint64_t ns)
{
	std::string s = std::to_string(ns / 1000);
	uint64_t frac = ns % 1000;
	if (frac == 0)
		return s;
	char buf[8];
	snprintf(buf, sizeof(buf), ".%03u", static_cast<unsigned>(frac));
	std::string f = buf;
	while (f.back() == '0')
		f.pop_back();
	return s + f;
}

std::string format_latency_line(const latency_hist &h, std::string_view what)
{
	std::string line = "service time us (" + std::string(what) + "): ";
	if (!latency_usable(h))
		return line + "n/a";
	if (latency_samples(h) == 0)
		return line + "no samples yet";
	return line + "p50 " + format_us(latency_at_ppm(h, ppm_p50)) +
	       ", p99 " + format_us(latency_at_ppm(h, ppm_p99)) +
	       ", p99.9 " + format_us(latency_at_ppm(h, ppm_p999)) +
	       ", max " + format_us(h.max_ns);
}

std::string utf8_valid(std::string_view s)
{
	std::string out;
	for (size_t i = 0; i < s.size();) {
		size_t n = utf8_len(s, i);
		if (n == 0) {
			out += "\xef\xbf\xbd";
			i++;
		} else {
			out.append(s, i, n);
			i += n;
		}
	}
	return out;
}

const char *auth_name(uint32_t auth)
{
	switch (auth) {
	case NETBLK_AUTH_NONE:   return "none";
	case NETBLK_AUTH_HEADER: return "header";
	case NETBLK_AUTH_FULL:   return "full";
	default:                 return "unknown";
	}
}

const char *nic_loss_name(uint32_t nic_loss)
{
	return nic_loss == NETBLK_NIC_LOSS_STOP ? "stop" : "wait";
}

std::string format_started(const netblk_instance &inst)
{
	std::ostringstream o;
	o << "netblk: serving " << inst.device << " (" << format_size(inst.size) << ", "
	  << (inst.read_only ? "read-only" : "read-write") << ") on " << endpoint(inst)
	  << ":" << inst.port << " -- " << inst.max_io << " bytes a datagram, worker on cpu "
	  << inst.cpu;
	if (inst.waiting())
		o << "; waiting: " << inst.waiting_for << " (it serves once the NIC is up)";
	return o.str();
}

std::string format_attached(const netblk_attached &att)
{
	std::ostringstream o;
	o << "netblk: /dev/" << att.disk << " is " << format_ipv4(att.addr) << ":" << att.port
	  << " (" << format_size(att.size) << ", " << (att.read_only ? "read-only" : "read-write")
	  << "), " << att.max_io << " bytes a datagram";
	return o.str();
}

const char *host_change_text(uint64_t change)
{
	switch (change) {
	case NETBLK_HOST_CHANGE_OTHER_DEVICE:
		return "serves another device";
	case NETBLK_HOST_CHANGE_SMALLER:
		return "serves a smaller device";
	case NETBLK_HOST_CHANGE_READ_ONLY:
		return "serves the device read-only";
	case NETBLK_HOST_CHANGE_GEOMETRY:
		return "serves other sectors, or less a datagram";
	case NETBLK_HOST_CHANGE_INFO_REFUSED:
		return "refused INFO";
	default:
		return "changed";
	}
}

// "queues: 0: requests 10, sends 40, timeouts 0; 1: ...", for a device of several.
static std::string host_queues_text(const netblk_attached &att)
{
	std::ostringstream o;

	if (att.queue_list.size() < 2)
		return "";
	o << "  queues:";
	for (size_t i = 0; i < att.queue_list.size(); i++) {
		const auto &q = att.queue_list[i];

		o << (i ? ";" : "") << " " << i << ": requests " << q[NETBLK_HS_REQUESTS]
		  << ", sends " << q[NETBLK_HS_SENDS] << ", timeouts " << q[NETBLK_HS_TIMEOUTS];
	}
	o << "\n";
	return o.str();
}

std::string format_attached_text(const netblk_attached &att)
{
	std::bitset<NETBLK_HS_MAX + 1> shown;	// the counters the lines below show
	auto st = [&](netblk_host_stat_attr s) {
		shown.set(s);
		return att.stat(s);
	};
	std::ostringstream o;
	o << "/dev/" << att.disk << ": " << format_ipv4(att.addr) << ":" << att.port << " ("
	  << format_size(att.size) << ", " << (att.read_only ? "ro" : "rw") << "), "
	  << att.max_io << " bytes a datagram, queue depth " << att.queue_depth << ", "
	  << (att.timeout_ms ? "I/O fails after " + std::to_string(att.timeout_ms) + " ms"
			     : std::string("I/O waits for the server"))
	  << ", key " << auth_name(att.auth) << ", up " << att.uptime_ms / 1000 << " s\n";
	std::string words;
	NETBLK_ATTACH_OPTIONS(KNOB_WORD_OF_ATT)
	if (!words.empty())
		o << "  options:" << words << "\n";
	if (st(NETBLK_HS_CHANGED))
		o << "  STOPPED: the server " << host_change_text(st(NETBLK_HS_CHANGED))
		  << " after a restart; I/O fails, nothing is written to it: detach it\n";
	if (st(NETBLK_HS_UNREACHABLE))
		o << "  UNREACHABLE: the server has not answered for the timeout; I/O fails at once "
		     "until it does\n";
	o << "  requests " << st(NETBLK_HS_REQUESTS) << " (errors " << st(NETBLK_HS_ERRORS)
	  << "), datagrams sent " << st(NETBLK_HS_SENDS) << ", received "
	  << st(NETBLK_HS_RX_DATAGRAMS) << ", outstanding " << st(NETBLK_HS_OUTSTANDING)
	  << " (window " << st(NETBLK_HS_WINDOW) << " of " << att.slots << ", queued "
	  << st(NETBLK_HS_QUEUED) << ")\n";
	o << "  resends: timeout " << st(NETBLK_HS_TIMEOUTS) << " (spurious "
	  << st(NETBLK_HS_SPURIOUS) << "), fast " << st(NETBLK_HS_FAST_RESENDS) << " (spurious "
	  << st(NETBLK_HS_FAST_SPURIOUS) << "), busy " << st(NETBLK_HS_BUSY)
	  << "; reordering " << st(NETBLK_HS_REORDERING) << "; window cut "
	  << st(NETBLK_HS_WINDOW_DECREASES) << " times; srtt " << format_us(st(NETBLK_HS_SRTT_NS))
	  << " us, rto " << format_us(st(NETBLK_HS_RTO_NS)) << " us\n";
	o << "  sessions opened " << st(NETBLK_HS_SESSIONS_OPENED) << " (renumbered "
	  << st(NETBLK_HS_RENUMBERED) << ", refused " << st(NETBLK_HS_REFUSED) << "), stray "
	  << st(NETBLK_HS_STRAY) << ", duplicates " << st(NETBLK_HS_DUPLICATES)
	  << "; WRITEs answered folded " << st(NETBLK_HS_FOLDED) << "\n";
	o << "  resized " << st(NETBLK_HS_RESIZES) << " times";
	shown.set(NETBLK_HS_OUTAGES);	// none without timeout=: not said then
	if (att.timeout_ms)
		o << ", outages " << st(NETBLK_HS_OUTAGES);
	o << ", requests failed at once " << st(NETBLK_HS_FAILED_FAST) << "\n";
	o << "  write data sent in place " << format_size(st(NETBLK_HS_BYTES_IN_PLACE))
	  << ", copied " << format_size(st(NETBLK_HS_BYTES_COPIED)) << "; read data copied "
	  << format_size(st(NETBLK_HS_READ_BYTES_COPIED)) << "; send errors "
	  << st(NETBLK_HS_TX_ERRORS) << ", dropped " << st(NETBLK_HS_TX_DROPPED)
	  << "; datagrams sent batched " << st(NETBLK_HS_TX_BATCHED) << "\n";
	o << more_text(host_stat_infos, shown, [&](netblk_host_stat_attr s) { return att.stat(s); });
	o << host_queues_text(att);
	o << "  " << format_latency_line(att.latency, "queued to answered") << "\n";
	return o.str();
}

// A counter each queue of an instance reports (netblk_genl.h's NETBLK_Q_STATS).
bool queue_counter(netblk_stat_attr s)
{
	switch (s) {
	case NETBLK_S_REQUESTS:
	case NETBLK_S_FRAMES_RX:
	case NETBLK_S_FRAMES_TX:
	case NETBLK_S_STEERED:
	case NETBLK_S_SESSIONS_OPEN:
	case NETBLK_S_INFLIGHT_DISK:
		return true;
	default:
		return false;
	}
}

bool host_queue_counter(netblk_host_stat_attr s)
{
	switch (s) {
	case NETBLK_HS_REQUESTS:
	case NETBLK_HS_COMPLETED:
	case NETBLK_HS_SENDS:
	case NETBLK_HS_TIMEOUTS:
	case NETBLK_HS_SESSIONS_OPENED:
	case NETBLK_HS_OUTSTANDING:
		return true;
	default:
		return false;
	}
}

// "queue 0 on cpu 1: requests 10, sessions 2, steered 0; queue 1 ...", for several.
static std::string queues_text(const netblk_instance &inst)
{
	std::ostringstream o;

	if (inst.queue_list.size() < 2)
		return "";
	o << "  queues:";
	for (size_t i = 0; i < inst.queue_list.size(); i++) {
		const netblk_queue_info &q = inst.queue_list[i];

		o << (i ? ";" : "") << " " << i << " on cpu " << q.cpu << ": requests "
		  << q.stats[NETBLK_S_REQUESTS] << ", sessions " << q.stats[NETBLK_S_SESSIONS_OPEN]
		  << ", steered " << q.stats[NETBLK_S_STEERED];
	}
	o << "\n";
	return o.str();
}

std::string format_instance_text(const netblk_instance &inst)
{
	std::bitset<NETBLK_S_MAX + 1> shown;	// the counters the lines below show
	auto st = [&](netblk_stat_attr s) {
		shown.set(s);
		return inst.stat(s);
	};
	std::ostringstream o;
	// bad_text(), refused_text() and inflight() show these
	for (netblk_stat_attr s : {NETBLK_S_BAD, NETBLK_S_REFUSED, NETBLK_S_BUSY,
				   NETBLK_S_INFLIGHT_QUEUED, NETBLK_S_INFLIGHT_DISK,
				   NETBLK_S_INFLIGHT_DONE})
		shown.set(s);
	o << "port " << inst.port << ": " << inst.device << " (" << format_size(inst.size)
	  << ", " << (inst.read_only ? "ro" : "rw") << ") on " << endpoint(inst) << ", "
	  << inst.max_io << " bytes a datagram (mtu " << inst.mtu << "), worker on cpu "
	  << inst.cpu << ", up " << inst.uptime_ms / 1000 << " s\n";
	if (inst.stopping())
		o << "  STOPPING for " << inst.stopping_ms / 1000 << " s: no longer serves, waits for "
		  << st(NETBLK_S_INFLIGHT_DISK) << " requests at the disk\n";
	if (inst.waiting())
		o << "  WAITING for " << inst.waiting_ms / 1000 << " s: " << inst.waiting_for
		  << "; holds its disk and port and serves again when the NIC is back\n";
	o << "  " << (inst.driver.empty() ? "" : inst.driver + ", ") << allow_text(inst) << "\n";
	std::string words;
	NETBLK_START_OPTIONS(KNOB_WORD_OF_INST)
	if (!words.empty())
		o << "  options:" << words << "\n";
	o << queues_text(inst);
	o << "  requests " << st(NETBLK_S_REQUESTS) << ", " << bad_text(inst) << ", "
	  << refused_text(inst) << ", in flight " << inflight(inst) << " of " << inst.slots
	  << ": queued " << st(NETBLK_S_INFLIGHT_QUEUED)
	  << ", at the disk " << st(NETBLK_S_INFLIGHT_DISK)
	  << ", done " << st(NETBLK_S_INFLIGHT_DONE) << "\n";
	o << "  reads " << st(NETBLK_S_READS) << " (" << format_size(st(NETBLK_S_READ_BYTES))
	  << "), writes " << st(NETBLK_S_WRITES) << " ("
	  << format_size(st(NETBLK_S_WRITE_BYTES)) << "), flushes " << st(NETBLK_S_FLUSHES)
	  << ", trims " << st(NETBLK_S_TRIMS) << " (" << format_size(st(NETBLK_S_TRIM_BYTES))
	  << "), zeroed " << st(NETBLK_S_WRITE_ZEROES) << " ("
	  << format_size(st(NETBLK_S_WRITE_ZEROES_BYTES)) << "), I/O errors "
	  << st(NETBLK_S_IO_ERRORS) << "\n";
	o << "  sessions " << st(NETBLK_S_SESSIONS_OPEN) << " of " << inst.sessions << " open, "
	  << inst.per_source << " a source ("
	  << st(NETBLK_S_SESSIONS_OPENED) << " opened, " << st(NETBLK_S_SESSIONS_EVICTED)
	  << " evicted, " << st(NETBLK_S_SESSIONS_REFUSED) << " refused), auth "
	  << auth_name(inst.auth) << "; duplicates " << st(NETBLK_S_DUPLICATES)
	  << " answered again, " << st(NETBLK_S_DUPLICATES_IN_FLIGHT) << " dropped, reads served again "
	  << st(NETBLK_S_SERVED_AGAIN) << ", stale " << st(NETBLK_S_STALE) << ", too far "
	  << st(NETBLK_S_TOO_FAR) << "\n";
	o << "  refused: no session " << st(NETBLK_S_NOT_CONNECTED) << ", bad tag "
	  << st(NETBLK_S_AUTH_FAILED) << ", old version " << st(NETBLK_S_OLD_VERSION)
	  << "; HELLO cookies " << st(NETBLK_S_HELLO_COOKIES) << "\n";
	o << "  disk busy " << st(NETBLK_S_DISK_BUSY) << " times (" << st(NETBLK_S_DISK_BLOCKING)
	  << " tried blocking, " << st(NETBLK_S_DISK_GAVE_UP) << " answered EAGAIN), no buffer "
	  << st(NETBLK_S_NO_BUFFER) << ", worker slept " << st(NETBLK_S_WORKER_SLEEPS)
	  << " times\n";
	o << "  replies dropped " << st(NETBLK_S_REPLIES_DROPPED) << " (over the mtu "
	  << st(NETBLK_S_REPLIES_OVERSIZED) << "), waited for room in the NIC "
	  << st(NETBLK_S_TX_DEFERRED) << " times, NIC errors " << st(NETBLK_S_TX_ERRORS) << "\n";
	o << "  " << format_latency_line(inst.latency) << "\n";
	o << "  data in place " << format_size(st(NETBLK_S_BYTES_ZEROCOPY)) << ", copied "
	  << format_size(st(NETBLK_S_BYTES_COPIED)) << ", frames in " << st(NETBLK_S_FRAMES_RX)
	  << ", out " << st(NETBLK_S_FRAMES_TX) << "\n";
	o << "  batches: " << st(NETBLK_S_DISK_BATCHES) << " to the disk, "
	  << st(NETBLK_S_TX_BATCHES) << " transmits to the NIC; WRITE answers folded "
	  << st(NETBLK_S_ANSWERS_FOLDED) << ", READs gathered " << st(NETBLK_S_READS_GATHERED)
	  << "\n";
	o << more_text(stat_infos, shown, [&](netblk_stat_attr s) { return inst.stat(s); });
	return o.str();
}

static void attached_json(std::ostream &o, const netblk_attached &a)
{
	o << "{\"disk\": " << json_string(a.disk)
	  << ", \"addr\": " << json_string(format_ipv4(a.addr))
	  << ", \"port\": " << a.port
	  << ", \"ifname\": " << json_string(a.ifname)
	  << ", \"read_only\": " << (a.read_only ? "true" : "false")
	  << ", \"size_bytes\": " << a.size
	  << ", \"sector_size\": " << a.sector_size
	  << ", \"max_io\": " << a.max_io
	  << ", \"slots\": " << a.slots
	  << ", \"queue_depth\": " << a.queue_depth
	  << ", \"timeout_ms\": " << a.timeout_ms;
	NETBLK_ATTACH_OPTIONS(KNOB_JSON_OF_ATT)
	o << ", \"auth\": " << json_string(auth_name(a.auth))
	  << ", \"uptime_ms\": " << a.uptime_ms
	  << ", \"stats\": {";
	const char *sep = "";
	for (const auto &c : host_stat_infos) {
		o << sep << '"' << c.name << "\": " << a.stat(c.attr);
		sep = ", ";
	}
	o << "}, \"latency\": ";
	latency_json(o, a.latency);
	o << ", \"queue_list\": [";
	for (size_t i = 0; i < a.queue_list.size(); i++) {
		sep = "";
		o << (i ? ", " : "") << "{";
		for (const auto &c : host_stat_infos)
			if (host_queue_counter(c.attr)) {
				o << sep << '"' << c.name << "\": " << a.queue_list[i][c.attr];
				sep = ", ";
			}
		o << "}";
	}
	o << "]}";
}

std::string format_attached_json(const std::vector<netblk_attached> &atts)
{
	if (atts.empty())
		return "[]\n";
	std::ostringstream o;
	o << "[\n";
	for (size_t i = 0; i < atts.size(); i++) {
		o << "  ";
		attached_json(o, atts[i]);
		o << (i + 1 < atts.size() ? ",\n" : "\n");
	}
	o << "]\n";
	return o.str();
}

std::string format_instances_json(const std::vector<netblk_instance> &insts)
{
	if (insts.empty())
		return "[]\n";
	std::ostringstream o;
	o << "[\n";
	for (size_t i = 0; i < insts.size(); i++) {
		o << "  ";
		instance_json(o, insts[i]);
		o << (i + 1 < insts.size() ? ",\n" : "\n");
	}
	o << "]\n";
	return o.str();
}

static const char *kind_name(counter_kind kind)
{
	switch (kind) {
	case counter_kind::bytes: return "bytes";
	case counter_kind::gauge: return "gauge";
	case counter_kind::ns: return "gauge, ns";
	default: return "count";
	}
}

static std::string doc_code(std::string_view s)
{
	return s.empty() ? "" : "`" + std::string(s) + "`";
}

template <typename Info, size_t N>
static void counter_rows(std::ostream &o, const Info (&infos)[N])
{
	for (const auto &c : infos)
		o << "| " << doc_code(c.name) << " | " << doc_code(c.attr_name) << " (" << c.attr
		  << ") | " << kind_name(c.kind) << " | " << doc_code(c.prom) << " | " << c.help
		  << " |\n";
}

std::string format_counter_docs()
{
	std::ostringstream o;
	const char *head = "| field | attribute | kind | Prometheus | counts |\n|---|---|---|---|---|\n";
	o << "An instance's `stats` (`list --json`; netlink `NETBLK_A_STATS`):\n\n" << head;
	counter_rows(o, stat_infos);
	for (const auto &d : drop_reasons)
		o << "| `dropped_" << d.name << "` | `" << d.attr_name << "` (" << d.attr
		  << ") | count | `netblk_bad_total{reason=\"" << d.name << "\"}` | Dropped: "
		  << d.help << " |\n";
	for (const auto &r : refusal_statuses)
		o << "| `refused_" << r.name << "` | `" << r.attr_name << "` (" << r.attr
		  << ") | count | `netblk_refused_total{status=\"" << r.status << "\"}` | Refused "
		  << r.status << ": " << r.help << " |\n";
	o << "\nAn attached device's `stats` (`list --attached --json`; netlink "
	     "`NETBLK_A_HOST_STATS`):\n\n"
	  << head;
	counter_rows(o, host_stat_infos);
	return o.str();
}

std::string format_version(std::optional<std::string_view> module_version)
{
	std::string t = "netblkctl " NETBLK_VERSION "\n";
	if (!module_version)
		return t + "netblk.ko not loaded (modprobe netblk)\n";
	std::string_view v = *module_version;
	while (!v.empty() && (v.back() == '\n' || v.back() == ' '))
		v.remove_suffix(1);
	if (v.empty())
		return t + "netblk.ko loaded, of a release with no version (before 0.2.0): "
			   "install the module and netblkctl from one release\n";
	t += "netblk.ko " + std::string(v);
	if (v != NETBLK_VERSION)
		t += " (not netblkctl's release: install the module and netblkctl from one release)";
	return t + "\n";
}
