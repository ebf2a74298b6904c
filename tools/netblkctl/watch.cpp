// `netblkctl watch`: rates and events, see watch.h.
#include "watch.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace {

constexpr uint32_t ppm_p50 = 500000, ppm_p99 = 990000;

// Counters that only go up; one of them going down means a new instance.
constexpr netblk_stat_attr monotonic[] = {
	NETBLK_S_REQUESTS, NETBLK_S_REFUSED, NETBLK_S_READS, NETBLK_S_READ_BYTES,
	NETBLK_S_WRITES, NETBLK_S_WRITE_BYTES, NETBLK_S_FRAMES_RX,
};

bool same_instance(const netblk_instance &before, const netblk_instance &now)
{
	if (before.port != now.port || before.device != now.device ||
	    now.uptime_ms < before.uptime_ms)
		return false;
	for (auto s : monotonic)
		if (now.stat(s) < before.stat(s))
			return false;
	return true;
}

// A text line stays one line whatever the kernel's strings hold.
std::string one_line(std::string_view s)
{
	std::string out(s);
	for (char &c : out)
		if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
			c = '?';
	return out;
}

// Rounded to a thousandth, as a JSON number.
std::string json_rate(double v)
{
	return json_double(std::round(v * 1000) / 1000);
}

std::string rate_int(double v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%.0f", std::round(v));	// halves up, not to even
	return buf;
}

std::string mib_per_s(double bytes)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%.1f", bytes / (1024.0 * 1024.0));
	return buf;
}

std::string json_time(double unix_time)
{
	return json_double(std::round(unix_time * 1000) / 1000);
}

const char *reason_text(uint32_t reason)
{
	switch (reason) {
	case NETBLK_REASON_ASKED:       return "asked";
	case NETBLK_REASON_RMMOD:       return "module unloaded";
	case NETBLK_REASON_NIC_GONE:    return "NIC gone";
	case NETBLK_REASON_DEVICE_GONE: return "device gone";
	case NETBLK_REASON_NIC_MTU:     return "NIC mtu lowered";
	case NETBLK_REASON_NIC_XMIT:    return "NIC cannot send";
	case NETBLK_REASON_NIC_VLAN:    return "NIC hides VLANs";
	case NETBLK_REASON_HANDOFF_DOWN: return "its device taken down";
	}
	return nullptr;
}

const char *reason_json(uint32_t reason)
{
	switch (reason) {
	case 0:                         return nullptr;
	case NETBLK_REASON_ASKED:       return "asked";
	case NETBLK_REASON_RMMOD:       return "rmmod";
	case NETBLK_REASON_NIC_GONE:    return "nic_gone";
	case NETBLK_REASON_DEVICE_GONE: return "device_gone";
	case NETBLK_REASON_NIC_MTU:     return "nic_mtu";
	case NETBLK_REASON_NIC_XMIT:    return "nic_xmit";
	case NETBLK_REASON_NIC_VLAN:    return "nic_vlan";
	case NETBLK_REASON_HANDOFF_DOWN: return "handoff_down";
	}
	return "unknown";
}

const char *event_json(uint32_t event)
{
	switch (event) {
	case NETBLK_EVENT_STARTED:  return "started";
	case NETBLK_EVENT_STOPPED:  return "stopped";
	case NETBLK_EVENT_FAILED:   return "failed";
	case NETBLK_EVENT_IO_ERROR: return "io_error";
	case NETBLK_EVENT_STOPPING: return "stopping";
	case NETBLK_EVENT_WAITING:  return "waiting";
	case NETBLK_EVENT_RESUMED:  return "resumed";
	}
	return "unknown";
}

// The kernel's message, else the errno's text, else "".
std::string detail(const netblk_event_info &ev)
{
	if (!ev.message.empty())
		return one_line(ev.message);
	if (ev.err)
		return strerror(static_cast<int>(ev.err));
	return {};
}

std::string json_or_null(bool have, const std::string &json)
{
	return have ? json : "null";
}

// "p99 812.0 us", "p99 -" (nothing answered) or "p99 n/a" (no histogram)
std::string p99_text(bool known, const latency_hist &h)
{
	if (!known)
		return "p99 n/a";
	if (latency_samples(h) == 0)
		return "p99 -";
	return "p99 " + format_us(latency_at_ppm(h, ppm_p99)) + " us";
}

} // namespace

instance_rates compute_rates(const netblk_instance *before, const netblk_instance &now,
			     double elapsed_s)
{
	static const netblk_instance zero;
	instance_rates r;
	r.port = now.port;
	r.device = now.device;
	r.ifname = now.ifname;
	r.fresh = !before || !same_instance(*before, now);
	const netblk_instance &b = r.fresh ? zero : *before;
	r.seconds = elapsed_s;
	if (r.fresh && now.uptime_ms / 1000.0 < elapsed_s)
		r.seconds = now.uptime_ms / 1000.0;
	double secs = r.seconds > 0 ? r.seconds : 0;
	auto rate = [&](netblk_stat_attr s) {
		uint64_t d = now.stat(s) - b.stat(s);
		return secs > 0 ? static_cast<double>(d) / secs : 0.0;
	};
	r.requests = rate(NETBLK_S_REQUESTS);
	r.reads = rate(NETBLK_S_READS);
	r.read_bytes = rate(NETBLK_S_READ_BYTES);
	r.writes = rate(NETBLK_S_WRITES);
	r.write_bytes = rate(NETBLK_S_WRITE_BYTES);
	r.refused = rate(NETBLK_S_REFUSED);
	r.inflight = now.stat(NETBLK_S_INFLIGHT_QUEUED) + now.stat(NETBLK_S_INFLIGHT_DISK) +
		     now.stat(NETBLK_S_INFLIGHT_DONE);
	if (r.fresh) {
		r.latency_known = latency_usable(now.latency);
		r.latency = now.latency;
	} else {
		r.latency_known = latency_usable(b.latency) && latency_usable(now.latency);
		if (r.latency_known)
			r.latency = latency_delta(b.latency, now.latency);
	}
	return r;
}

std::vector<instance_rates> compute_all_rates(const std::vector<netblk_instance> &before,
					      const std::vector<netblk_instance> &now,
					      double elapsed_s)
{
	std::vector<instance_rates> out;
	for (const auto &n : now) {
		const netblk_instance *b = nullptr;
		for (const auto &x : before)
			if (x.port == n.port)
				b = &x;
		out.push_back(compute_rates(b, n, elapsed_s));
	}
	return out;
}

uint64_t rates_percentile(const instance_rates &r, uint32_t ppm)
{
	return latency_at_ppm(r.latency, ppm);
}

std::string format_rates_text(const instance_rates &r)
{
	std::string p99 = p99_text(r.latency_known, r.latency);
	return "port " + std::to_string(r.port) + ": requests " + rate_int(r.requests) +
	       "/s, reads " + rate_int(r.reads) + "/s (" + mib_per_s(r.read_bytes) +
	       " MiB/s), writes " + rate_int(r.writes) + "/s (" + mib_per_s(r.write_bytes) +
	       " MiB/s), refused " + rate_int(r.refused) + "/s, " + p99;
}

std::string format_rates_json(const instance_rates &r, double unix_time)
{
	bool samples = r.latency_known && latency_samples(r.latency) > 0;
	std::ostringstream o;
	o << "{\"type\": \"rates\", \"time\": " << json_time(unix_time)
	  << ", \"port\": " << r.port
	  << ", \"device\": " << json_string(r.device)
	  << ", \"ifname\": " << json_string(r.ifname)
	  << ", \"interval_s\": " << json_rate(r.seconds)
	  << ", \"fresh\": " << (r.fresh ? "true" : "false")
	  << ", \"requests_per_s\": " << json_rate(r.requests)
	  << ", \"reads_per_s\": " << json_rate(r.reads)
	  << ", \"read_bytes_per_s\": " << json_rate(r.read_bytes)
	  << ", \"writes_per_s\": " << json_rate(r.writes)
	  << ", \"write_bytes_per_s\": " << json_rate(r.write_bytes)
	  << ", \"refused_per_s\": " << json_rate(r.refused)
	  << ", \"inflight\": " << r.inflight
	  << ", \"samples\": "
	  << json_or_null(r.latency_known, std::to_string(latency_samples(r.latency)))
	  << ", \"p50_us\": "
	  << json_or_null(samples, samples ? format_us_exact(rates_percentile(r, ppm_p50)) : "")
	  << ", \"p99_us\": "
	  << json_or_null(samples, samples ? format_us_exact(rates_percentile(r, ppm_p99)) : "")
	  << "}";
	return o.str();
}

namespace {

// Counters of an attachment that only go up; one gone down: attached anew.
constexpr netblk_host_stat_attr host_monotonic[] = {
	NETBLK_HS_REQUESTS, NETBLK_HS_SENDS, NETBLK_HS_RX_DATAGRAMS, NETBLK_HS_COMPLETED,
};

bool same_attachment(const netblk_attached &before, const netblk_attached &now)
{
	if (before.disk != now.disk || before.addr != now.addr || before.port != now.port ||
	    now.uptime_ms < before.uptime_ms)
		return false;
	for (auto s : host_monotonic)
		if (now.stat(s) < before.stat(s))
			return false;
	return true;
}

uint64_t write_bytes_sent(const netblk_attached &a)
{
	return a.stat(NETBLK_HS_BYTES_IN_PLACE) + a.stat(NETBLK_HS_BYTES_COPIED);
}

uint64_t resends(const netblk_attached &a)
{
	return a.stat(NETBLK_HS_TIMEOUTS) + a.stat(NETBLK_HS_FAST_RESENDS) + a.stat(NETBLK_HS_BUSY);
}

} // namespace

std::vector<attached_rates> compute_attached_rates(const std::vector<netblk_attached> &before,
						   const std::vector<netblk_attached> &now,
						   double elapsed_s)
{
	static const netblk_attached zero;
	std::vector<attached_rates> out;

	for (const auto &n : now) {
		const netblk_attached *b = nullptr;
		for (const auto &x : before)
			if (x.disk == n.disk && same_attachment(x, n))
				b = &x;
		attached_rates r;
		r.disk = n.disk;
		r.addr = n.addr;
		r.port = n.port;
		r.fresh = !b;
		const netblk_attached &p = b ? *b : zero;
		r.seconds = elapsed_s;
		if (r.fresh && n.uptime_ms / 1000.0 < elapsed_s)
			r.seconds = n.uptime_ms / 1000.0;
		double secs = r.seconds > 0 ? r.seconds : 0;
		auto rate = [&](uint64_t a, uint64_t z) {
			return secs > 0 ? static_cast<double>(a - z) / secs : 0.0;
		};
		r.requests = rate(n.stat(NETBLK_HS_REQUESTS), p.stat(NETBLK_HS_REQUESTS));
		r.errors = rate(n.stat(NETBLK_HS_ERRORS), p.stat(NETBLK_HS_ERRORS));
		r.write_bytes = rate(write_bytes_sent(n), write_bytes_sent(p));
		r.read_bytes = rate(n.stat(NETBLK_HS_READ_BYTES_COPIED),
				    p.stat(NETBLK_HS_READ_BYTES_COPIED));
		r.resends = rate(resends(n), resends(p));
		r.outstanding = n.stat(NETBLK_HS_OUTSTANDING);
		r.unreachable = n.stat(NETBLK_HS_UNREACHABLE);
		r.changed = n.stat(NETBLK_HS_CHANGED);
		if (r.fresh) {
			r.latency_known = latency_usable(n.latency);
			r.latency = n.latency;
		} else {
			r.latency_known = latency_usable(p.latency) && latency_usable(n.latency);
			if (r.latency_known)
				r.latency = latency_delta(p.latency, n.latency);
		}
		out.push_back(r);
	}
	return out;
}

std::string format_attached_rates_text(const attached_rates &r)
{
	std::string s = "/dev/" + one_line(r.disk) + ": requests " + rate_int(r.requests) +
			"/s, errors " + rate_int(r.errors) + "/s, writes " +
			mib_per_s(r.write_bytes) + " MiB/s, reads " + mib_per_s(r.read_bytes) +
			" MiB/s, resends " + rate_int(r.resends) + "/s, outstanding " +
			std::to_string(r.outstanding) + ", " + p99_text(r.latency_known, r.latency);
	if (r.changed)
		s += " STOPPED";
	else if (r.unreachable)
		s += " UNREACHABLE";
	return s;
}

std::string format_attached_rates_json(const attached_rates &r, double unix_time)
{
	bool samples = r.latency_known && latency_samples(r.latency) > 0;
	std::ostringstream o;
	o << "{\"type\": \"attached_rates\", \"time\": " << json_time(unix_time)
	  << ", \"disk\": " << json_string(r.disk)
	  << ", \"server\": " << json_string(format_ipv4(r.addr) + ":" + std::to_string(r.port))
	  << ", \"interval_s\": " << json_rate(r.seconds)
	  << ", \"fresh\": " << (r.fresh ? "true" : "false")
	  << ", \"requests_per_s\": " << json_rate(r.requests)
	  << ", \"errors_per_s\": " << json_rate(r.errors)
	  << ", \"write_bytes_per_s\": " << json_rate(r.write_bytes)
	  << ", \"read_bytes_per_s\": " << json_rate(r.read_bytes)
	  << ", \"resends_per_s\": " << json_rate(r.resends)
	  << ", \"outstanding\": " << r.outstanding
	  << ", \"unreachable\": " << (r.unreachable ? "true" : "false")
	  << ", \"changed\": " << r.changed
	  << ", \"samples\": "
	  << json_or_null(r.latency_known, std::to_string(latency_samples(r.latency)))
	  << ", \"p50_us\": "
	  << json_or_null(samples, samples ? format_us_exact(latency_at_ppm(r.latency, ppm_p50)) : "")
	  << ", \"p99_us\": "
	  << json_or_null(samples, samples ? format_us_exact(latency_at_ppm(r.latency, ppm_p99)) : "")
	  << "}";
	return o.str();
}

std::string format_event_text(const netblk_event_info &ev)
{
	const netblk_instance &i = ev.inst;
	std::string port = "port " + std::to_string(i.port);
	std::string d = detail(ev);
	std::string out = "event: ";
	switch (ev.event) {
	case NETBLK_EVENT_STARTED: {
		std::string where = i.ifname.empty() ? format_ipv4(i.addr)
						     : one_line(i.ifname) + " " + format_ipv4(i.addr);
		return out + port + " started on " + where + ": " + one_line(i.device) + " (" +
		       format_size(i.size) + ", " + (i.read_only ? "ro" : "rw") + ")";
	}
	case NETBLK_EVENT_STOPPED: {
		out += port + " stopped";
		std::string why;
		if (const char *t = reason_text(ev.reason))
			why = t;
		else if (ev.reason)
			why = "reason " + std::to_string(ev.reason);
		if (!why.empty() && !d.empty())
			why += ": " + d;
		else if (why.empty())
			why = d;
		return why.empty() ? out : out + " (" + why + ")";
	}
	case NETBLK_EVENT_FAILED:
		return out + "start of " + one_line(i.device) + " on " + port + " failed" +
		       (d.empty() ? "" : ": " + d);
	case NETBLK_EVENT_IO_ERROR:
		return out + port + " I/O error" + (d.empty() ? "" : ": " + d);
	case NETBLK_EVENT_STOPPING:
		return out + port + " still stopping" + (d.empty() ? "" : ": " + d);
	case NETBLK_EVENT_WAITING:
		return out + port + " waiting" + (d.empty() ? "" : ": " + d);
	case NETBLK_EVENT_RESUMED:
		return out + port + " serving again" + (d.empty() ? "" : ": " + d);
	}
	return out + port + ": event " + std::to_string(ev.event) + (d.empty() ? "" : ": " + d);
}

std::string format_event_json(const netblk_event_info &ev, double unix_time)
{
	const char *reason = reason_json(ev.reason);
	std::ostringstream o;
	o << "{\"type\": \"event\", \"time\": " << json_time(unix_time)
	  << ", \"event\": \"" << event_json(ev.event) << '"'
	  << ", \"event_code\": " << ev.event
	  << ", \"port\": " << ev.inst.port
	  << ", \"device\": " << json_string(ev.inst.device)
	  << ", \"ifname\": " << json_string(ev.inst.ifname)
	  << ", \"reason\": " << (reason ? "\"" + std::string(reason) + "\"" : "null")
	  << ", \"reason_code\": " << json_or_null(ev.reason, std::to_string(ev.reason))
	  << ", \"errno\": " << json_or_null(ev.err, std::to_string(ev.err))
	  << ", \"message\": "
	  << json_or_null(!ev.message.empty(), json_string(ev.message)) << "}";
	return o.str();
}
