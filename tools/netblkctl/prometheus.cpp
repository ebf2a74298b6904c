// The Prometheus text exposition of `netblkctl stats --prometheus`: see
// prometheus.h.
#include "prometheus.h"

#include <algorithm>
#include <iterator>
#include <sstream>

namespace {

struct counter_metric {
	netblk_stat_attr attr;
	const char *name;
	const char *help;
};

constexpr counter_metric counters[] = {
	{NETBLK_S_REQUESTS, "netblk_requests_total",
	 "Datagrams that parsed as requests."},
	{NETBLK_S_BUSY, "netblk_busy_total",
	 "Refusals for want of a free slot (part of netblk_refused_total)."},
	{NETBLK_S_READS, "netblk_reads_total", "Read requests accepted (a resent read is served again and counted again)."},
	{NETBLK_S_READ_BYTES, "netblk_read_bytes_total", "Bytes of the read requests accepted."},
	{NETBLK_S_WRITES, "netblk_writes_total", "Write requests accepted (a resent copy counts once)."},
	{NETBLK_S_WRITE_BYTES, "netblk_write_bytes_total",
	 "Bytes of the write requests accepted."},
	{NETBLK_S_FLUSHES, "netblk_flushes_total", "Flush requests accepted."},
	{NETBLK_S_FUA_WRITES, "netblk_fua_writes_total", "Write requests accepted with FUA."},
	{NETBLK_S_IO_ERRORS, "netblk_io_errors_total",
	 "Requests (READ: datagrams) the disk failed, answered EIO; refusals are not counted here."},
	{NETBLK_S_DISK_BUSY, "netblk_disk_busy_total",
	 "Times the disk said again (BLK_STS_AGAIN): retried after a backoff."},
	{NETBLK_S_DISK_BLOCKING, "netblk_disk_blocking_total",
	 "Retries submitted without REQ_NOWAIT, letting the disk make the worker wait."},
	{NETBLK_S_DISK_GAVE_UP, "netblk_disk_gave_up_total",
	 "Requests still refused after every retry: answered EAGAIN."},
	{NETBLK_S_NO_BUFFER, "netblk_no_buffer_total",
	 "Requests without a page to read or copy into: answered EAGAIN."},
	{NETBLK_S_REPLIES_DROPPED, "netblk_replies_dropped_total",
	 "Replies not sent: over the NIC's MTU, no buffer to answer in, or the NIC did not take them."},
	{NETBLK_S_REPLIES_OVERSIZED, "netblk_replies_oversized_total",
	 "Replies larger than the NIC's MTU at the time (part of netblk_replies_dropped_total)."},
	{NETBLK_S_TX_DEFERRED, "netblk_tx_deferred_total",
	 "Times a reply waited for room in the NIC's transmit ring."},
	{NETBLK_S_TX_ERRORS, "netblk_tx_errors_total",
	 "Transmits the NIC failed with an error."},
	{NETBLK_S_WORKER_SLEEPS, "netblk_worker_sleeps_total",
	 "Times the instance's worker went to sleep for want of work."},
	{NETBLK_S_FRAMES_RX, "netblk_frames_received_total",
	 "Frames steered to the instance."},
	{NETBLK_S_FRAMES_TX, "netblk_frames_sent_total", "Frames handed to the NIC."},
	{NETBLK_S_BYTES_ZEROCOPY, "netblk_zerocopy_bytes_total",
	 "Data bytes that reached the disk or the NIC in place, without a copy."},
	{NETBLK_S_BYTES_COPIED, "netblk_copied_bytes_total",
	 "Data bytes the CPU had to copy (a fallback path)."},
	{NETBLK_S_DISK_BATCHES, "netblk_disk_batches_total",
	 "Worker rounds that submitted bios under one plug."},
	{NETBLK_S_TX_BATCHES, "netblk_transmits_total",
	 "Transmits of replies to the NIC, each with one flush."},
	{NETBLK_S_ANSWERS_FOLDED, "netblk_answers_folded_total",
	 "WRITE answers sent as a bit of another WRITE's answer, not a frame of their own."},
	{NETBLK_S_READS_GATHERED, "netblk_reads_gathered_total",
	 "READs of several datagrams read in one disk I/O and sent from its pages."},
	{NETBLK_S_TRIMS, "netblk_trims_total", "TRIM requests accepted."},
	{NETBLK_S_TRIM_BYTES, "netblk_trim_bytes_total", "Bytes of the TRIM requests accepted."},
	{NETBLK_S_WRITE_ZEROES, "netblk_write_zeroes_total", "WRITE_ZEROES requests accepted."},
	{NETBLK_S_WRITE_ZEROES_BYTES, "netblk_write_zeroes_bytes_total",
	 "Bytes of the WRITE_ZEROES requests accepted."},
	{NETBLK_S_SESSIONS_OPENED, "netblk_sessions_opened_total", "Protocol v2 sessions opened."},
	{NETBLK_S_SESSIONS_EVICTED, "netblk_sessions_evicted_total",
	 "Idle sessions closed to make room for new ones."},
	{NETBLK_S_SESSIONS_REFUSED, "netblk_sessions_refused_total",
	 "HELLOs refused (EUSERS): the session table is full of active sessions."},
	{NETBLK_S_HELLO_COOKIES, "netblk_hello_cookies_total",
	 "HELLOs answered with a cookie (the first step of opening a session)."},
	{NETBLK_S_NOT_CONNECTED, "netblk_not_connected_total",
	 "Requests answered ENOTCONN: no such session."},
	{NETBLK_S_AUTH_FAILED, "netblk_auth_failed_total",
	 "Datagrams answered EKEYREJECTED: no valid tag on a keyed instance."},
	{NETBLK_S_OLD_VERSION, "netblk_old_version_total",
	 "Datagrams of another protocol version, answered EPROTONOSUPPORT."},
	{NETBLK_S_DUPLICATES, "netblk_duplicates_total",
	 "Duplicates of answered requests that change the disk: answered again, not executed."},
	{NETBLK_S_DUPLICATES_IN_FLIGHT, "netblk_duplicates_in_flight_total",
	 "Duplicates of requests still at the disk: dropped."},
	{NETBLK_S_STALE, "netblk_stale_total",
	 "Requests older than their session's replay window: refused ESTALE, never executed."},
	{NETBLK_S_TOO_FAR, "netblk_too_far_total",
	 "Requests too far ahead of their session's replay window: refused EOVERFLOW."},
	{NETBLK_S_SERVED_AGAIN, "netblk_served_again_total",
	 "Resends of READs and INFOs served again (at most 3 a request: then EALREADY)."},
};

struct stage_gauge {
	netblk_stat_attr attr;
	const char *stage;
};

constexpr stage_gauge stages[] = {
	{NETBLK_S_INFLIGHT_QUEUED, "queued"},
	{NETBLK_S_INFLIGHT_DISK, "disk"},
	{NETBLK_S_INFLIGHT_DONE, "done"},
};

struct drop_label {
	netblk_stat_attr attr;
	const char *reason;
};

constexpr drop_label drops[] = {
	{NETBLK_S_DROP_MALFORMED, "malformed"},
	{NETBLK_S_DROP_FRAGMENT, "fragment"},
	{NETBLK_S_DROP_MULTIBUFFER, "multibuffer"},
	{NETBLK_S_DROP_MISADDRESSED, "misaddressed"},
	{NETBLK_S_DROP_VLAN, "vlan"},
	{NETBLK_S_DROP_SOURCE, "source"},
	{NETBLK_S_DROP_CHECKSUM, "checksum"},
	{NETBLK_S_DROP_NOT_REQUEST, "not_request"},
};

/*
 * netblk_sessions_open, a gauge of its own; BAD and REFUSED, the sums of
 * the labelled netblk_bad_total and netblk_refused_total (a sum next to its
 * parts would count twice in a PromQL sum()).
 */
constexpr size_t other_stats = 3;

static_assert(std::size(counters) + std::size(stages) + std::size(drops) + refusal_status_count +
			      other_stats ==
		      NETBLK_S_MAX - 1,
	      "a new counter in enum netblk_stat_attr needs a metric here");

std::string help_text(std::string_view s)
{
	std::string out;
	for (char c : s) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

void family(std::ostream &o, const char *name, const char *type, const char *help)
{
	o << "# HELP " << name << ' ' << help_text(help) << '\n'
	  << "# TYPE " << name << ' ' << type << '\n';
}

// The device as the kernel names it, as node_exporter's disk metrics label
// it: the module's name for it, else the path's last part.
std::string device_name(const netblk_instance &inst)
{
	if (!inst.disk_name.empty())
		return inst.disk_name;
	size_t slash = inst.device.rfind('/');
	return slash == std::string::npos ? inst.device : inst.device.substr(slash + 1);
}

// port="7000",device="nvme0n1p1",nic="eth0"
std::string labels(const netblk_instance &inst)
{
	return "port=\"" + std::to_string(inst.port) + "\",device=\"" +
	       prometheus_label_value(device_name(inst)) + "\",nic=\"" +
	       prometheus_label_value(inst.ifname) + "\"";
}

// The midpoint of a bucket, as nb::histogram_value_at_ppm reads it.
uint64_t midpoint(uint32_t index, uint64_t max)
{
	uint64_t low = latency_bucket_low(index);
	uint64_t high = std::min(latency_bucket_high(index), max);
	uint64_t mid = low + (high > low ? (high - low) / 2 : 0);
	return std::min(mid, max);
}

void histogram(std::ostream &o, const std::vector<netblk_instance> &insts)
{
	const char *name = "netblk_service_time_seconds";
	family(o, name, "histogram",
	       "Service time from a request's arrival at the XDP hook to its reply handed "
	       "to the NIC. A bucket holds the samples of the core's log-linear buckets "
	       "that end at or below le (their last edge is within 1/64 of le); _sum is "
	       "exact.");
	for (const auto &inst : insts) {
		if (!latency_usable(inst.latency))
			continue;
		std::string l = labels(inst);
		auto cum = prometheus_cumulative(inst.latency);
		for (size_t i = 0; i < prometheus_bounds.size(); i++)
			o << name << "_bucket{" << l << ",le=\"" << prometheus_bounds[i].le << "\"} "
			  << cum[i] << '\n';
		o << name << "_bucket{" << l << ",le=\"+Inf\"} " << cum.back() << '\n';
		double sum = inst.latency.sum_ns ? *inst.latency.sum_ns / 1e9
						 : prometheus_sum_seconds(inst.latency);
		o << name << "_sum{" << l << "} " << json_double(sum) << '\n';
		o << name << "_count{" << l << "} " << cum.back() << '\n';
	}
}

// A summary without quantiles: per op, the replies and their service times' sum.
void op_service_times(std::ostream &o, const std::vector<netblk_instance> &insts)
{
	const char *name = "netblk_op_service_time_seconds";
	family(o, name, "summary",
	       "Service time by the request's op (read, write, flush, trim, write_zeroes, info, "
	       "hello), as netblk_service_time_seconds measures it: rate(_sum) / rate(_count) is "
	       "an op's mean.");
	for (const auto &inst : insts)
		for (const op_service &op : inst.latency.ops) {
			std::string l = labels(inst) + ",op=\"" + op_service_name(op.op) + "\"";
			o << name << "_sum{" << l << "} " << json_double(op.sum_ns / 1e9) << '\n'
			  << name << "_count{" << l << "} " << op.count << '\n';
		}
}

const char *yes_no(bool b)
{
	return b ? "true" : "false";
}

// One series a instance, always 1, its settings as labels: join on port.
void instance_info(std::ostream &o, const std::vector<netblk_instance> &insts)
{
	family(o, "netblk_instance_info", "gauge",
	       "An instance's settings as labels (the value is always 1): path is the device as "
	       "started, device as the kernel names it.");
	for (const auto &inst : insts)
		o << "netblk_instance_info{" << labels(inst)
		  << ",path=\"" << prometheus_label_value(inst.device)
		  << "\",addr=\"" << format_ipv4(inst.addr)
		  << "\",vlan=\"" << inst.vlan
		  << "\",read_only=\"" << yes_no(inst.read_only)
		  << "\",mtu=\"" << inst.mtu
		  << "\",cpu=\"" << inst.cpu
		  << "\",poll_us=\"" << inst.poll_us
		  << "\",slots=\"" << inst.slots
		  << "\",sessions=\"" << inst.sessions
		  << "\",per_source=\"" << inst.per_source
		  << "\",auth=\"" << auth_name(inst.auth)
		  << "\",nic_loss=\"" << nic_loss_name(inst.nic_loss)
		  << "\",driver=\"" << prometheus_label_value(inst.driver)
		  << "\",sector_size=\"" << inst.sector_size << "\"} 1\n";
}

// Drops and refusals, by reason and by status.
void labelled_counters(std::ostream &o, const std::vector<netblk_instance> &insts)
{
	family(o, "netblk_bad_total", "counter",
	       "Datagrams the module dropped unanswered (not a request the instance takes), by "
	       "reason.");
	for (const auto &inst : insts)
		for (const auto &d : drops)
			o << "netblk_bad_total{" << labels(inst) << ",reason=\"" << d.reason << "\"} "
			  << inst.stat(d.attr) << '\n';
	family(o, "netblk_not_allowed_total", "counter",
	       "Datagrams the NIC's XDP program dropped before the module saw them: from a source "
	       "not on the instance's allowlist.");
	for (const auto &inst : insts)
		if (inst.not_allowed)
			o << "netblk_not_allowed_total{" << labels(inst) << "} " << *inst.not_allowed
			  << '\n';
	family(o, "netblk_refused_total", "counter",
	       "Requests refused, by status (EAGAIN: no free slot): never sent to the disk.");
	for (const auto &inst : insts)
		for (const auto &r : refusal_statuses)
			o << "netblk_refused_total{" << labels(inst) << ",status=\"" << r.status
			  << "\"} " << inst.stat(r.attr) << '\n';
}

} // namespace

std::array<uint64_t, prometheus_bounds.size() + 1> prometheus_cumulative(const latency_hist &h)
{
	std::array<uint64_t, prometheus_bounds.size() + 1> cum{};
	std::vector<uint64_t> dense = latency_dense(h);
	for (uint32_t i = 0; i < dense.size(); i++) {
		if (!dense[i])
			continue;
		uint64_t high = latency_bucket_high(i);
		for (size_t j = 0; j < prometheus_bounds.size(); j++)
			if (high <= prometheus_bounds[j].ns)
				cum[j] += dense[i];
		cum.back() += dense[i];
	}
	return cum;
}

double prometheus_sum_seconds(const latency_hist &h)
{
	unsigned __int128 ns = 0;
	std::vector<uint64_t> dense = latency_dense(h);
	for (uint32_t i = 0; i < dense.size(); i++)
		if (dense[i])
			ns += static_cast<unsigned __int128>(midpoint(i, h.max_ns)) * dense[i];
	return static_cast<double>(ns) / 1e9;
}

std::string prometheus_label_value(std::string_view s)
{
	std::string out;
	for (char c : utf8_valid(s)) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

// The block-device client's counters: name, its attribute, help.
const struct {
	const char *name;
	netblk_host_stat_attr attr;
	const char *help;
} host_counters[] = {
	{"netblk_host_requests_total", NETBLK_HS_REQUESTS, "Block requests the device took."},
	{"netblk_host_errors_total", NETBLK_HS_ERRORS, "Block requests ended with an error."},
	{"netblk_host_datagrams_sent_total", NETBLK_HS_SENDS,
	 "Datagrams sent to the instance, resends and HELLOs included."},
	{"netblk_host_datagrams_received_total", NETBLK_HS_RX_DATAGRAMS,
	 "Datagrams received from the instance."},
	{"netblk_host_stray_total", NETBLK_HS_STRAY,
	 "Answers to nothing outstanding: late answers to resent datagrams, or of an old session."},
	{"netblk_host_sessions_opened_total", NETBLK_HS_SESSIONS_OPENED,
	 "Sessions opened with the instance (more than one: it was started again)."},
	{"netblk_host_renumbered_total", NETBLK_HS_RENUMBERED,
	 "Datagrams sent again in a new session."},
	{"netblk_host_window_decreases_total", NETBLK_HS_WINDOW_DECREASES,
	 "Times the window of datagrams outstanding was halved (a loss, an EAGAIN)."},
	{"netblk_host_datagrams_batched_total", NETBLK_HS_TX_BATCHED,
	 "Datagrams sent in one UDP GSO send with others (one skb down the stack for the lot)."},
	{"netblk_host_answers_folded_total", NETBLK_HS_FOLDED,
	 "WRITEs answered by a bit of another WRITE's answer (folded answers), not one of their own."},
	{"netblk_host_send_errors_total", NETBLK_HS_TX_ERRORS,
	 "Sends the socket refused (the resend timer sends them again)."},
	{"netblk_host_outages_total", NETBLK_HS_OUTAGES,
	 "Times the server was silent for the device's timeout= and taken for unreachable."},
	{"netblk_host_failed_fast_total", NETBLK_HS_FAILED_FAST,
	 "Block requests failed at once: the server taken for unreachable, or the device stopped."},
	{"netblk_host_spurious_timeouts_total", NETBLK_HS_SPURIOUS,
	 "Resends after silence (why=\"timeout\") whose first send was answered after all."},
	{"netblk_host_spurious_fast_resends_total", NETBLK_HS_FAST_SPURIOUS,
	 "Resends of overtaken datagrams (why=\"fast\") whose first send was answered after all: "
	 "reordered, not lost."},
	{"netblk_host_resizes_total", NETBLK_HS_RESIZES,
	 "Times the server said, in a new session, that the device grew."},
};

const struct {
	const char *why;
	netblk_host_stat_attr attr;
} host_resends[] = {
	{"timeout", NETBLK_HS_TIMEOUTS},
	{"fast", NETBLK_HS_FAST_RESENDS},
	{"busy", NETBLK_HS_BUSY},
};

// disk="netblk0",server="10.9.0.1:7000"
std::string host_labels(const netblk_attached &a)
{
	return "disk=\"" + prometheus_label_value(a.disk) + "\",server=\"" + format_ipv4(a.addr) +
	       ":" + std::to_string(a.port) + "\"";
}

void host_families(std::ostream &o, const std::vector<netblk_attached> &atts)
{
	for (const auto &c : host_counters) {
		family(o, c.name, "counter", c.help);
		for (const auto &a : atts)
			o << c.name << '{' << host_labels(a) << "} " << a.stat(c.attr) << '\n';
	}
	family(o, "netblk_host_resends_total", "counter",
	       "Datagrams sent again: after silence (timeout), overtaken by later answers (fast), "
	       "answered EAGAIN (busy).");
	for (const auto &a : atts)
		for (const auto &r : host_resends)
			o << "netblk_host_resends_total{" << host_labels(a) << ",why=\"" << r.why << "\"} "
			  << a.stat(r.attr) << '\n';
	family(o, "netblk_host_bytes_total", "counter",
	       "Data bytes: WRITE data sent from the request's pages (in_place) or copied by the "
	       "socket (copied), READ data copied from answers (read_copied).");
	for (const auto &a : atts) {
		o << "netblk_host_bytes_total{" << host_labels(a) << ",how=\"in_place\"} "
		  << a.stat(NETBLK_HS_BYTES_IN_PLACE) << '\n';
		o << "netblk_host_bytes_total{" << host_labels(a) << ",how=\"copied\"} "
		  << a.stat(NETBLK_HS_BYTES_COPIED) << '\n';
		o << "netblk_host_bytes_total{" << host_labels(a) << ",how=\"read_copied\"} "
		  << a.stat(NETBLK_HS_READ_BYTES_COPIED) << '\n';
	}
	family(o, "netblk_host_outstanding", "gauge", "Datagrams sent and not answered yet.");
	for (const auto &a : atts)
		o << "netblk_host_outstanding{" << host_labels(a) << "} "
		  << a.stat(NETBLK_HS_OUTSTANDING) << '\n';
	family(o, "netblk_host_window", "gauge", "Datagrams that may be outstanding now.");
	for (const auto &a : atts)
		o << "netblk_host_window{" << host_labels(a) << "} " << a.stat(NETBLK_HS_WINDOW) << '\n';
	family(o, "netblk_host_reordering", "gauge",
	       "The most later datagrams a first send's answer was seen to come after: an answer "
	       "overtaken by fewer is not taken for lost.");
	for (const auto &a : atts)
		o << "netblk_host_reordering{" << host_labels(a) << "} "
		  << a.stat(NETBLK_HS_REORDERING) << '\n';
	family(o, "netblk_host_unreachable", "gauge",
	       "1 while the server is taken for unreachable (silent for timeout=): I/O fails at once.");
	for (const auto &a : atts)
		o << "netblk_host_unreachable{" << host_labels(a) << "} "
		  << a.stat(NETBLK_HS_UNREACHABLE) << '\n';
	family(o, "netblk_host_stopped", "gauge",
	       "Why the device's I/O fails for good (the server serves another, smaller, read-only "
	       "device after a restart): enum netblk_host_change, 0 while it serves.");
	for (const auto &a : atts)
		o << "netblk_host_stopped{" << host_labels(a) << "} " << a.stat(NETBLK_HS_CHANGED)
		  << '\n';
	family(o, "netblk_host_srtt_seconds", "gauge",
	       "The smoothed round trip of a datagram, the server's disk included.");
	for (const auto &a : atts)
		o << "netblk_host_srtt_seconds{" << host_labels(a) << "} "
		  << json_double(a.stat(NETBLK_HS_SRTT_NS) / 1e9) << '\n';
}

std::string format_prometheus(const std::vector<netblk_instance> &insts,
			      const std::vector<netblk_attached> &atts)
{
	std::ostringstream o;
	for (const auto &c : counters) {
		family(o, c.name, "counter", c.help);
		for (const auto &inst : insts)
			o << c.name << '{' << labels(inst) << "} " << inst.stat(c.attr) << '\n';
	}
	labelled_counters(o, insts);
	family(o, "netblk_inflight", "gauge",
	       "Requests the instance holds, by stage: queued for the disk, at the disk, "
	       "done and waiting for their reply.");
	for (const auto &inst : insts)
		for (const auto &s : stages)
			o << "netblk_inflight{" << labels(inst) << ",stage=\"" << s.stage << "\"} "
			  << inst.stat(s.attr) << '\n';
	family(o, "netblk_slots", "gauge", "Requests the instance can hold at once.");
	for (const auto &inst : insts)
		o << "netblk_slots{" << labels(inst) << "} " << inst.slots << '\n';
	family(o, "netblk_sessions_open", "gauge", "Protocol v2 sessions open now.");
	for (const auto &inst : insts)
		o << "netblk_sessions_open{" << labels(inst) << "} "
		  << inst.stat(NETBLK_S_SESSIONS_OPEN) << '\n';
	family(o, "netblk_sessions", "gauge", "Sessions the instance can hold at once.");
	for (const auto &inst : insts)
		o << "netblk_sessions{" << labels(inst) << "} " << inst.sessions << '\n';
	family(o, "netblk_uptime_seconds", "gauge", "Seconds since the instance started.");
	for (const auto &inst : insts)
		o << "netblk_uptime_seconds{" << labels(inst) << "} "
		  << json_double(inst.uptime_ms / 1000.0) << '\n';
	family(o, "netblk_waiting", "gauge",
	       "1 while the instance waits for its NIC (down, address gone, MTU lowered): it holds "
	       "its disk and port and serves again when the NIC is back.");
	for (const auto &inst : insts)
		o << "netblk_waiting{" << labels(inst) << "} " << (inst.waiting() ? 1 : 0) << '\n';
	instance_info(o, insts);
	histogram(o, insts);
	op_service_times(o, insts);
	host_families(o, atts);
	return o.str();
}
