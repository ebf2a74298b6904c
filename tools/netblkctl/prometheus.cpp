// The Prometheus text exposition of `netblkctl stats --prometheus`: see
// prometheus.h.
#include "prometheus.h"

#include <algorithm>
#include <iterator>
#include <sstream>

namespace {

struct stage_gauge {
	netblk_stat_attr attr;
	const char *stage;
};

constexpr stage_gauge stages[] = {
	{NETBLK_S_INFLIGHT_QUEUED, "queued"},
	{NETBLK_S_INFLIGHT_DISK, "disk"},
	{NETBLK_S_INFLIGHT_DONE, "done"},
};

// A family's TYPE for a counter of netblk_counters.h's kind.
const char *metric_type(counter_kind kind)
{
	return kind == counter_kind::count || kind == counter_kind::bytes ? "counter" : "gauge";
}

// A sample's value: nanoseconds as seconds (the family is *_seconds).
std::string metric_value(counter_kind kind, uint64_t v)
{
	return kind == counter_kind::ns ? json_double(v / 1e9) : std::to_string(v);
}

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

// A knob of netblk_options.h's START list marked "gen" as a label of
// netblk_instance_info, after the hand-written ones.
[[maybe_unused]] std::string knob_label(bool b)
{
	return yes_no(b);
}

[[maybe_unused]] std::string knob_label(uint32_t v)
{
	return std::to_string(v);
}

[[maybe_unused]] std::string knob_label(uint16_t v)
{
	return std::to_string(v);
}

#define KNOB_LABEL_own(fld)
#define KNOB_LABEL_gen(fld) << "\"," #fld "=\"" << knob_label(inst.fld)
#define KNOB_LABEL(NAME, fld, nr, type, lo, hi, dflt, ctl, ...) KNOB_LABEL_##ctl(fld)

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
		  NETBLK_START_OPTIONS(KNOB_LABEL)
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
		for (const auto &d : drop_reasons)
			o << "netblk_bad_total{" << labels(inst) << ",reason=\"" << d.name << "\"} "
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
	// netblk_counters.h's, each a family of its own; then those by label
	for (const auto &c : host_stat_infos) {
		if (!*c.prom)
			continue;
		family(o, c.prom, metric_type(c.kind), c.help);
		for (const auto &a : atts)
			o << c.prom << '{' << host_labels(a) << "} " << metric_value(c.kind, a.stat(c.attr))
			  << '\n';
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
}

std::string format_prometheus(const std::vector<netblk_instance> &insts,
			      const std::vector<netblk_attached> &atts)
{
	std::ostringstream o;
	// netblk_counters.h's, each a family of its own; then those by label
	for (const auto &c : stat_infos) {
		if (!*c.prom)
			continue;
		family(o, c.prom, metric_type(c.kind), c.help);
		for (const auto &inst : insts)
			o << c.prom << '{' << labels(inst) << "} "
			  << metric_value(c.kind, inst.stat(c.attr)) << '\n';
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

// The names of a sample's labels, in order: port="7000",device="x" -> port, device.
static std::vector<std::string> label_names(std::string_view labels)
{
	std::vector<std::string> names;
	while (!labels.empty()) {
		size_t eq = labels.find("=\"");
		if (eq == labels.npos)
			break;
		names.emplace_back(labels.substr(0, eq));
		size_t i = eq + 2;
		while (i < labels.size() && labels[i] != '"')
			i += labels[i] == '\\' ? 2 : 1;
		labels.remove_prefix(std::min(i + 2, labels.size()));	// '"' and ','
	}
	return names;
}

std::string format_instance_info_docs()
{
	const netblk_instance sample{};
	const std::string head = "\nnetblk_instance_info{";
	std::string out = format_prometheus({sample});
	size_t a = out.find(head) + head.size();
	std::string_view info = std::string_view(out).substr(a, out.find("} ", a) - a);
	std::vector<std::string> common = label_names(labels(sample));
	std::string doc = "`netblk_instance_info{";
	const char *sep = "";
	for (const std::string &name : label_names(info)) {
		if (std::find(common.begin(), common.end(), name) != common.end())
			continue;
		doc += sep + name;
		sep = ", ";
	}
	return doc + "}`";
}
