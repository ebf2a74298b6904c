// Text and JSON output of netblkctl: see format.h.
#include "format.h"
#include "netblk_version.h"

#include <arpa/inet.h>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

// The statuses of refusals (format.h).
const refusal_status refusal_statuses[refusal_status_count] = {
	{NETBLK_S_REFUSED_EAGAIN, "EAGAIN"},
	{NETBLK_S_REFUSED_EINVAL, "EINVAL"},
	{NETBLK_S_REFUSED_EROFS, "EROFS"},
	{NETBLK_S_REFUSED_ERANGE, "ERANGE"},
	{NETBLK_S_REFUSED_EMSGSIZE, "EMSGSIZE"},
	{NETBLK_S_REFUSED_EOPNOTSUPP, "EOPNOTSUPP"},
	{NETBLK_S_REFUSED_ENOTCONN, "ENOTCONN"},
	{NETBLK_S_REFUSED_EKEYREJECTED, "EKEYREJECTED"},
	{NETBLK_S_REFUSED_EPROTONOSUPPORT, "EPROTONOSUPPORT"},
	{NETBLK_S_REFUSED_ESTALE, "ESTALE"},
	{NETBLK_S_REFUSED_EOVERFLOW, "EOVERFLOW"},
	{NETBLK_S_REFUSED_EUSERS, "EUSERS"},
	{NETBLK_S_REFUSED_EALREADY, "EALREADY"},
	{NETBLK_S_REFUSED_EEXIST, "EEXIST"},
};

namespace {

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

struct stat_name {
	netblk_stat_attr attr;
	const char *json;
};

constexpr stat_name stat_names[] = {
	{NETBLK_S_REQUESTS, "requests"},
	{NETBLK_S_BAD, "bad"},
	{NETBLK_S_DROP_MALFORMED, "dropped_malformed"},
	{NETBLK_S_DROP_FRAGMENT, "dropped_fragment"},
	{NETBLK_S_DROP_MULTIBUFFER, "dropped_multibuffer"},
	{NETBLK_S_DROP_MISADDRESSED, "dropped_misaddressed"},
	{NETBLK_S_DROP_VLAN, "dropped_vlan"},
	{NETBLK_S_DROP_SOURCE, "dropped_source"},
	{NETBLK_S_DROP_CHECKSUM, "dropped_checksum"},
	{NETBLK_S_DROP_NOT_REQUEST, "dropped_not_request"},
	{NETBLK_S_REFUSED, "refused"},
	{NETBLK_S_BUSY, "busy"},
	{NETBLK_S_INFLIGHT_QUEUED, "inflight_queued"},
	{NETBLK_S_INFLIGHT_DISK, "inflight_disk"},
	{NETBLK_S_INFLIGHT_DONE, "inflight_done"},
	{NETBLK_S_READS, "reads"},
	{NETBLK_S_READ_BYTES, "read_bytes"},
	{NETBLK_S_WRITES, "writes"},
	{NETBLK_S_WRITE_BYTES, "write_bytes"},
	{NETBLK_S_FLUSHES, "flushes"},
	{NETBLK_S_FUA_WRITES, "fua_writes"},
	{NETBLK_S_IO_ERRORS, "io_errors"},
	{NETBLK_S_DISK_BUSY, "disk_busy"},
	{NETBLK_S_DISK_BLOCKING, "disk_blocking"},
	{NETBLK_S_DISK_GAVE_UP, "disk_gave_up"},
	{NETBLK_S_NO_BUFFER, "no_buffer"},
	{NETBLK_S_REPLIES_DROPPED, "replies_dropped"},
	{NETBLK_S_REPLIES_OVERSIZED, "replies_oversized"},
	{NETBLK_S_TX_DEFERRED, "tx_deferred"},
	{NETBLK_S_TX_ERRORS, "tx_errors"},
	{NETBLK_S_WORKER_SLEEPS, "worker_sleeps"},
	{NETBLK_S_FRAMES_RX, "frames_rx"},
	{NETBLK_S_FRAMES_TX, "frames_tx"},
	{NETBLK_S_BYTES_ZEROCOPY, "bytes_zerocopy"},
	{NETBLK_S_BYTES_COPIED, "bytes_copied"},
	{NETBLK_S_DISK_BATCHES, "disk_batches"},
	{NETBLK_S_TX_BATCHES, "tx_batches"},
	{NETBLK_S_ANSWERS_FOLDED, "answers_folded"},
	{NETBLK_S_READS_GATHERED, "reads_gathered"},
	{NETBLK_S_TRIMS, "trims"},
	{NETBLK_S_TRIM_BYTES, "trim_bytes"},
	{NETBLK_S_WRITE_ZEROES, "write_zeroes"},
	{NETBLK_S_WRITE_ZEROES_BYTES, "write_zeroes_bytes"},
	{NETBLK_S_SESSIONS_OPEN, "sessions_open"},
	{NETBLK_S_SESSIONS_OPENED, "sessions_opened"},
	{NETBLK_S_SESSIONS_EVICTED, "sessions_evicted"},
	{NETBLK_S_SESSIONS_REFUSED, "sessions_refused"},
	{NETBLK_S_HELLO_COOKIES, "hello_cookies"},
	{NETBLK_S_NOT_CONNECTED, "not_connected"},
	{NETBLK_S_AUTH_FAILED, "auth_failed"},
	{NETBLK_S_OLD_VERSION, "old_version"},
	{NETBLK_S_DUPLICATES, "duplicates"},
	{NETBLK_S_DUPLICATES_IN_FLIGHT, "duplicates_in_flight"},
	{NETBLK_S_STALE, "stale"},
	{NETBLK_S_TOO_FAR, "too_far"},
	{NETBLK_S_REFUSED_EAGAIN, "refused_eagain"},
	{NETBLK_S_REFUSED_EINVAL, "refused_einval"},
	{NETBLK_S_REFUSED_EROFS, "refused_erofs"},
	{NETBLK_S_REFUSED_ERANGE, "refused_erange"},
	{NETBLK_S_REFUSED_EMSGSIZE, "refused_emsgsize"},
	{NETBLK_S_REFUSED_EOPNOTSUPP, "refused_eopnotsupp"},
	{NETBLK_S_REFUSED_ENOTCONN, "refused_enotconn"},
	{NETBLK_S_REFUSED_EKEYREJECTED, "refused_ekeyrejected"},
	{NETBLK_S_REFUSED_EPROTONOSUPPORT, "refused_eprotonosupport"},
	{NETBLK_S_REFUSED_ESTALE, "refused_estale"},
	{NETBLK_S_REFUSED_EOVERFLOW, "refused_eoverflow"},
	{NETBLK_S_REFUSED_EUSERS, "refused_eusers"},
	{NETBLK_S_REFUSED_EALREADY, "refused_ealready"},
	{NETBLK_S_REFUSED_EEXIST, "refused_eexist"},
	{NETBLK_S_SERVED_AGAIN, "served_again"},
};
static_assert(std::size(stat_names) == NETBLK_S_MAX - 1,
	      "a new counter in enum netblk_stat_attr needs a JSON name here");


// The reasons a datagram is dropped, for the list's "bad" line.
constexpr stat_name drop_names[] = {
	{NETBLK_S_DROP_MALFORMED, "malformed"},
	{NETBLK_S_DROP_FRAGMENT, "fragment"},
	{NETBLK_S_DROP_MULTIBUFFER, "multi-buffer"},
	{NETBLK_S_DROP_MISADDRESSED, "misaddressed"},
	{NETBLK_S_DROP_VLAN, "other VLAN"},
	{NETBLK_S_DROP_SOURCE, "bad source"},
	{NETBLK_S_DROP_CHECKSUM, "checksum"},
	{NETBLK_S_DROP_NOT_REQUEST, "not a request"},
};

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
	for (const auto &d : drop_names) {
		if (!inst.stat(d.attr))
			continue;
		out += sep + std::string(d.json) + " " + std::to_string(inst.stat(d.attr));
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
	  << ", \"per_source\": " << inst.per_source
	  << ", \"auth\": " << json_string(auth_name(inst.auth))
	  << ", \"uptime_ms\": " << inst.uptime_ms
	  << ", \"stats\": {";
	const char *sep = "";
	for (const auto &s : stat_names) {
		o << sep << '"' << s.json << "\": " << inst.stat(s.attr);
		sep = ", ";
	}
	o << ", \"not_allowed\": "
	  << (inst.not_allowed ? std::to_string(*inst.not_allowed) : "null");
	o << "}, \"latency\": ";
	latency_json(o, inst.latency);
	o << "}";
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

std::string format_attached_text(const netblk_attached &att)
{
	auto st = [&](netblk_host_stat_attr s) { return att.stat(s); };
	std::ostringstream o;
	o << "/dev/" << att.disk << ": " << format_ipv4(att.addr) << ":" << att.port << " ("
	  << format_size(att.size) << ", " << (att.read_only ? "ro" : "rw") << "), "
	  << att.max_io << " bytes a datagram, queue depth " << att.queue_depth << ", "
	  << (att.timeout_ms ? "I/O fails after " + std::to_string(att.timeout_ms) + " ms"
			     : std::string("I/O waits for the server"))
	  << ", key " << auth_name(att.auth) << ", up " << att.uptime_ms / 1000 << " s\n";
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
	if (att.timeout_ms)
		o << ", outages " << st(NETBLK_HS_OUTAGES);
	o << ", requests failed at once " << st(NETBLK_HS_FAILED_FAST) << "\n";
	o << "  write data sent in place " << format_size(st(NETBLK_HS_BYTES_IN_PLACE))
	  << ", copied " << format_size(st(NETBLK_HS_BYTES_COPIED)) << "; read data copied "
	  << format_size(st(NETBLK_HS_READ_BYTES_COPIED)) << "; send errors "
	  << st(NETBLK_HS_TX_ERRORS) << ", dropped " << st(NETBLK_HS_TX_DROPPED)
	  << "; datagrams sent batched " << st(NETBLK_HS_TX_BATCHED) << "\n";
	o << "  " << format_latency_line(att.latency, "queued to answered") << "\n";
	return o.str();
}

std::string format_instance_text(const netblk_instance &inst)
{
	auto st = [&](netblk_stat_attr s) { return inst.stat(s); };
	std::ostringstream o;
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
	return o.str();
}

// The block-device client's counters and their JSON names.
struct host_stat_name {
	netblk_host_stat_attr attr;
	const char *json;
};

constexpr host_stat_name host_stat_names[] = {
	{NETBLK_HS_REQUESTS, "requests"},
	{NETBLK_HS_ERRORS, "errors"},
	{NETBLK_HS_SENDS, "sends"},
	{NETBLK_HS_TIMEOUTS, "timeouts"},
	{NETBLK_HS_FAST_RESENDS, "fast_resends"},
	{NETBLK_HS_BUSY, "busy"},
	{NETBLK_HS_STRAY, "stray"},
	{NETBLK_HS_DUPLICATES, "duplicates"},
	{NETBLK_HS_SESSIONS_OPENED, "sessions_opened"},
	{NETBLK_HS_RENUMBERED, "renumbered"},
	{NETBLK_HS_REFUSED, "refused"},
	{NETBLK_HS_COMPLETED, "completed"},
	{NETBLK_HS_FAILED, "failed"},
	{NETBLK_HS_WINDOW, "window"},
	{NETBLK_HS_WINDOW_DECREASES, "window_decreases"},
	{NETBLK_HS_SRTT_NS, "srtt_ns"},
	{NETBLK_HS_RTO_NS, "rto_ns"},
	{NETBLK_HS_OUTSTANDING, "outstanding"},
	{NETBLK_HS_QUEUED, "queued"},
	{NETBLK_HS_BYTES_IN_PLACE, "bytes_in_place"},
	{NETBLK_HS_BYTES_COPIED, "bytes_copied"},
	{NETBLK_HS_READ_BYTES_COPIED, "read_bytes_copied"},
	{NETBLK_HS_TX_ERRORS, "tx_errors"},
	{NETBLK_HS_TX_DROPPED, "tx_dropped"},
	{NETBLK_HS_RX_DATAGRAMS, "rx_datagrams"},
	{NETBLK_HS_UNREACHABLE, "unreachable"},
	{NETBLK_HS_OUTAGES, "outages"},
	{NETBLK_HS_FAILED_FAST, "failed_fast"},
	{NETBLK_HS_CHANGED, "changed"},
	{NETBLK_HS_RESIZES, "resizes"},
	{NETBLK_HS_SPURIOUS, "spurious"},
	{NETBLK_HS_TX_BATCHED, "tx_batched"},
	{NETBLK_HS_FOLDED, "folded"},
	{NETBLK_HS_FAST_SPURIOUS, "fast_spurious"},
	{NETBLK_HS_REORDERING, "reordering"},
	{NETBLK_HS_HEADER_PAGES, "header_pages"},
};
static_assert(std::size(host_stat_names) == NETBLK_HS_MAX - 1,
	      "a new counter in enum netblk_host_stat_attr needs a JSON name here");

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
	  << ", \"timeout_ms\": " << a.timeout_ms
	  << ", \"auth\": " << json_string(auth_name(a.auth))
	  << ", \"uptime_ms\": " << a.uptime_ms
	  << ", \"stats\": {";
	const char *sep = "";
	for (const auto &s : host_stat_names) {
		o << sep << '"' << s.json << "\": " << a.stat(s.attr);
		sep = ", ";
	}
	o << "}, \"latency\": ";
	latency_json(o, a.latency);
	o << "}";
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
