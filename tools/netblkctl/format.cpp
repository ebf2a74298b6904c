// Text and JSON output of netblkctl: see format.h.
#include "format.h"

#include <arpa/inet.h>
#include <cstdio>
#include <iterator>
#include <sstream>

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
	{NETBLK_S_REPLIES_DROPPED, "replies_dropped"},
	{NETBLK_S_WORKER_SLEEPS, "worker_sleeps"},
	{NETBLK_S_FRAMES_RX, "frames_rx"},
	{NETBLK_S_FRAMES_TX, "frames_tx"},
	{NETBLK_S_BYTES_ZEROCOPY, "bytes_zerocopy"},
	{NETBLK_S_BYTES_COPIED, "bytes_copied"},
};
static_assert(std::size(stat_names) == NETBLK_S_PAD - 1,
	      "a new counter in enum netblk_stat_attr needs a JSON name here");

// "eth0 10.0.2.15", or the address alone when the kernel sent no NIC name.
std::string endpoint(const netblk_instance &inst)
{
	std::string addr = format_ipv4(inst.addr);
	return inst.ifname.empty() ? addr : inst.ifname + " " + addr;
}

uint64_t inflight(const netblk_instance &inst)
{
	return inst.stat(NETBLK_S_INFLIGHT_QUEUED) + inst.stat(NETBLK_S_INFLIGHT_DISK) +
	       inst.stat(NETBLK_S_INFLIGHT_DONE);
}

void instance_json(std::ostream &o, const netblk_instance &inst)
{
	o << "{\"port\": " << inst.port
	  << ", \"device\": " << json_string(inst.device)
	  << ", \"read_only\": " << (inst.read_only ? "true" : "false")
	  << ", \"ifname\": " << json_string(inst.ifname)
	  << ", \"ifindex\": " << inst.ifindex
	  << ", \"handoff_ifindex\": " << inst.handoff_ifindex
	  << ", \"addr\": " << json_string(format_ipv4(inst.addr))
	  << ", \"mtu\": " << inst.mtu
	  << ", \"cpu\": " << inst.cpu
	  << ", \"poll_us\": " << inst.poll_us
	  << ", \"size_bytes\": " << inst.size
	  << ", \"sector_size\": " << inst.sector_size
	  << ", \"max_io\": " << inst.max_io
	  << ", \"slots\": " << inst.slots
	  << ", \"uptime_ms\": " << inst.uptime_ms
	  << ", \"stats\": {";
	const char *sep = "";
	for (const auto &s : stat_names) {
		o << sep << '"' << s.json << "\": " << inst.stat(s.attr);
		sep = ", ";
	}
	o << "}}";
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

std::string format_started(const netblk_instance &inst)
{
	std::ostringstream o;
	o << "netblk: serving " << inst.device << " (" << format_size(inst.size) << ", "
	  << (inst.read_only ? "read-only" : "read-write") << ") on " << endpoint(inst)
	  << ":" << inst.port << " -- " << inst.max_io << " bytes a datagram, worker on cpu "
	  << inst.cpu;
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
	o << "  requests " << st(NETBLK_S_REQUESTS) << ", bad " << st(NETBLK_S_BAD)
	  << ", refused " << st(NETBLK_S_REFUSED) << " (busy " << st(NETBLK_S_BUSY)
	  << "), in flight " << inflight(inst) << " of " << inst.slots
	  << ": queued " << st(NETBLK_S_INFLIGHT_QUEUED)
	  << ", at the disk " << st(NETBLK_S_INFLIGHT_DISK)
	  << ", done " << st(NETBLK_S_INFLIGHT_DONE) << "\n";
	o << "  reads " << st(NETBLK_S_READS) << " (" << format_size(st(NETBLK_S_READ_BYTES))
	  << "), writes " << st(NETBLK_S_WRITES) << " ("
	  << format_size(st(NETBLK_S_WRITE_BYTES)) << "), flushes " << st(NETBLK_S_FLUSHES)
	  << ", I/O errors " << st(NETBLK_S_IO_ERRORS) << "\n";
	o << "  disk busy " << st(NETBLK_S_DISK_BUSY) << " times, replies dropped "
	  << st(NETBLK_S_REPLIES_DROPPED) << ", worker slept " << st(NETBLK_S_WORKER_SLEEPS)
	  << " times\n";
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
