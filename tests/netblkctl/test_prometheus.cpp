// SPDX-License-Identifier: GPL-2.0
/* `stats --prometheus` (prometheus.cpp): the exposition through promtool and
 * through a parser of the text format here, its samples read back. */
#include "helpers.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "prometheus.h"

namespace {

// A parser of the text exposition format that checks what
// `stats --prometheus` must hold: well-formed lines, HELP and TYPE before a
// family's samples, families contiguous, histogram buckets non-decreasing
// with le, +Inf last and equal to _count.  Collects the samples.
struct prom_sample {
	std::string name;
	std::map<std::string, std::string> labels;
	double value;
};

bool prom_name(std::string_view s, bool metric)
{
	if (s.empty())
		return false;
	for (size_t i = 0; i < s.size(); i++) {
		char c = s[i];
		bool ok = isalpha(static_cast<unsigned char>(c)) || c == '_' || (metric && c == ':') ||
			  (i > 0 && isdigit(static_cast<unsigned char>(c)));
		if (!ok)
			return false;
	}
	return true;
}

bool prom_value(const std::string &s, double &v)
{
	if (s == "+Inf" || s == "-Inf" || s == "NaN") {
		v = s == "NaN" ? NAN : s[0] == '+' ? INFINITY : -INFINITY;
		return true;
	}
	char *end;
	v = strtod(s.c_str(), &end);
	return !s.empty() && *end == 0 && !isspace(static_cast<unsigned char>(s[0]));
}

// "" when fine, else the first problem.
std::string parse_prometheus(const std::string &text, std::vector<prom_sample> &samples)
{
	if (!text.empty() && text.back() != '\n')
		return "no final newline";
	std::map<std::string, std::string> types;
	std::set<std::string> helped, done;
	std::string current;	// the family whose lines come now
	std::istringstream in(text);
	std::string line;
	auto enter = [&](const std::string &fam) -> std::string {
		if (fam == current)
			return {};
		if (done.count(fam))
			return "family " + fam + " not contiguous";
		if (!current.empty())
			done.insert(current);
		current = fam;
		return {};
	};
	while (std::getline(in, line)) {
		if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
			bool help = line[2] == 'H';
			std::string rest = line.substr(7);
			size_t sp = rest.find(' ');
			std::string name = rest.substr(0, sp);
			if (!prom_name(name, true) || sp == std::string::npos)
				return "bad line: " + line;
			if (std::string e = enter(name); !e.empty())
				return e;
			if (help) {
				if (!helped.insert(name).second)
					return "second HELP for " + name;
			} else {
				std::string t = rest.substr(sp + 1);
				if (t != "counter" && t != "gauge" && t != "histogram" && t != "summary")
					return "bad TYPE: " + line;
				if (types.count(name))
					return "second TYPE for " + name;
				types[name] = t;
			}
			continue;
		}
		if (line.empty() || line[0] == '#')
			return "unexpected line: '" + line + "'";
		prom_sample s;
		size_t i = 0;
		while (i < line.size() && line[i] != '{' && line[i] != ' ')
			i++;
		s.name = line.substr(0, i);
		if (!prom_name(s.name, true))
			return "bad metric name: " + line;
		if (i < line.size() && line[i] == '{') {
			i++;
			while (i < line.size() && line[i] != '}') {
				size_t eq = line.find('=', i);
				if (eq == std::string::npos)
					return "bad labels: " + line;
				std::string lname = line.substr(i, eq - i);
				if (!prom_name(lname, false) || eq + 1 >= line.size() || line[eq + 1] != '"')
					return "bad label name: " + line;
				std::string val;
				size_t k = eq + 2;
				for (; k < line.size() && line[k] != '"'; k++) {
					if (line[k] != '\\') {
						val += line[k];
						continue;
					}
					char e = ++k < line.size() ? line[k] : 0;
					if (e == 'n')
						val += '\n';
					else if (e == '\\' || e == '"')
						val += e;
					else
						return "bad escape: " + line;
				}
				if (k >= line.size())
					return "unterminated label value: " + line;
				if (!s.labels.emplace(lname, val).second)
					return "label twice: " + line;
				i = k + 1;
				if (i < line.size() && line[i] == ',')
					i++;
			}
			if (i >= line.size())
				return "unterminated labels: " + line;
			i++;
		}
		if (i >= line.size() || line[i] != ' ')
			return "no value: " + line;
		if (!prom_value(line.substr(i + 1), s.value))
			return "bad value: " + line;
		std::string fam = s.name;
		for (const char *suffix : {"_bucket", "_sum", "_count"})
			if (fam.ends_with(suffix) &&
			    (types[fam.substr(0, fam.size() - strlen(suffix))] == "histogram" ||
			     (types[fam.substr(0, fam.size() - strlen(suffix))] == "summary" &&
			      strcmp(suffix, "_bucket"))))
				fam = fam.substr(0, fam.size() - strlen(suffix));
		if (fam != current || !types.count(fam) || !helped.count(fam))
			return "sample before its HELP and TYPE: " + line;
		if (types[fam] == "histogram" && fam == s.name)
			return "histogram sample without a suffix: " + line;
		samples.push_back(std::move(s));
	}

	// Histograms: per label set, le ascending, counts non-decreasing,
	// +Inf last and equal to _count.
	std::map<std::string, std::vector<std::pair<double, double>>> buckets;
	std::map<std::string, double> counts;
	for (const auto &s : samples) {
		auto labels = s.labels;
		std::string le = labels["le"];
		labels.erase("le");
		std::string key;
		for (const auto &[k, v] : labels)
			key += k + "=" + v + ",";
		if (s.name.ends_with("_bucket")) {
			double bound;
			if (!prom_value(le, bound))
				return "bad le in " + s.name;
			buckets[s.name.substr(0, s.name.size() - 7) + "|" + key].emplace_back(bound, s.value);
		} else if (s.name.ends_with("_count")) {
			counts[s.name.substr(0, s.name.size() - 6) + "|" + key] = s.value;
		}
	}
	for (const auto &[key, bs] : buckets) {
		for (size_t k = 1; k < bs.size(); k++)
			if (!(bs[k].first > bs[k - 1].first) || bs[k].second < bs[k - 1].second)
				return "buckets not increasing in " + key;
		if (bs.empty() || bs.back().first != INFINITY)
			return "no +Inf bucket in " + key;
		if (!counts.count(key) || counts[key] != bs.back().second)
			return "+Inf bucket is not _count in " + key;
	}
	return {};
}

// What `promtool check metrics` (Debian's prometheus package) says of
// `text`: "" when it passes; its complaints, or why it could not run.
std::string promtool_check(const std::string &text)
{
	char path[] = "/tmp/netblk-prom-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return std::string("mkstemp: ") + strerror(errno);
	FILE *f = fdopen(fd, "w");
	fwrite(text.data(), 1, text.size(), f);
	fclose(f);
	std::string cmd = std::string("promtool check metrics <") + path + " 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	std::string out;
	char buf[512];
	while (p && fgets(buf, sizeof(buf), p))
		out += buf;
	int status = p ? pclose(p) : -1;
	unlink(path);
	if (status == 0)
		return {};
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return "promtool not found: apt-get install prometheus (ci/install-deps.sh does)";
	return out.empty() ? "promtool failed" : out;
}

const prom_sample *find_sample(const std::vector<prom_sample> &samples, const std::string &name,
			       const std::map<std::string, std::string> &labels)
{
	for (const auto &s : samples) {
		if (s.name != name)
			continue;
		bool all = true;
		for (const auto &[k, v] : labels)
			all = all && s.labels.count(k) && s.labels.at(k) == v;
		if (all)
			return &s;
	}
	return nullptr;
}

} // namespace

TEST(Prometheus, ExpositionPassesPromtoolAndHoldsTheCounters)
{
	EXPECT_EQ(prometheus_label_value("a\\b\"c\nd\xff"), "a\\\\b\\\"c\\nd\xef\xbf\xbd")
		<< "label escapes";

	netblk_instance a = example();
	a.latency = sparse_of(*small_histogram());
	a.stats[NETBLK_S_INFLIGHT_QUEUED] = 4;
	a.latency.sum_ns = 458934022;	// 98 x 75712 + 2 x 225757123: exact
	a.latency.ops = {{2, 98, 7419776}, {4, 2, 451514246}};
	a.stats[NETBLK_S_REFUSED_ERANGE] = 5;
	a.stats[NETBLK_S_DROP_CHECKSUM] = 2;
	a.not_allowed = 7;
	a.state = NETBLK_STATE_WAITING;
	netblk_instance b = example();	// no histogram: no histogram samples
	b.port = 7001;
	b.device = "/dev/we\"ird\\one\n";
	b.disk_name = "";	// an older module: the path's last part
	b.ifname = "";
	auto big = std::make_unique<nb::histogram>();
	std::mt19937_64 rng(3);
	std::lognormal_distribution<double> dist(12.0, 2.0);
	for (int k = 0; k < 50000; k++)
		big->record(static_cast<uint64_t>(dist(rng)));
	netblk_instance c = example();
	c.port = 7002;
	c.latency = sparse_of(*big);

	netblk_attached d;
	uint8_t server[4] = {10, 9, 0, 1};
	d.disk = "netblk0";
	memcpy(&d.addr, server, 4);
	d.port = 7000;
	d.stats[NETBLK_HS_REQUESTS] = 1025;
	d.stats[NETBLK_HS_FAST_RESENDS] = 3;
	d.stats[NETBLK_HS_FAST_SPURIOUS] = 2;
	d.stats[NETBLK_HS_REORDERING] = 140;
	d.stats[NETBLK_HS_BYTES_IN_PLACE] = 4096;
	d.stats[NETBLK_HS_SRTT_NS] = 3572500;
	std::string text = format_prometheus({a, b, c}, {d});
	EXPECT_EQ(promtool_check(text), "") << "promtool check metrics";
	EXPECT_EQ(promtool_check(format_prometheus({})), "") << "promtool: the empty exposition";
	std::vector<prom_sample> samples;
	std::string err = parse_prometheus(text, samples);
	ASSERT_EQ(err, "") << "prometheus output parses:\n" << text;
	std::map<std::string, std::string> ld{{"disk", "netblk0"}, {"server", "10.9.0.1:7000"}};
	auto host_value = [&](const std::string &name, std::map<std::string, std::string> l) {
		const prom_sample *s = find_sample(samples, name, l);
		return s ? s->value : -1.0;
	};
	EXPECT_EQ(host_value("netblk_host_requests_total", ld), 1025)
		<< "attached requests counter";
	auto lf = ld;
	lf["why"] = "fast";
	EXPECT_EQ(host_value("netblk_host_resends_total", lf), 3) << "attached fast resends";
	auto lb = ld;
	lb["how"] = "in_place";
	EXPECT_EQ(host_value("netblk_host_bytes_total", lb), 4096) << "attached bytes in place";
	EXPECT_EQ(host_value("netblk_host_srtt_seconds", ld), 0.0035725) << "attached srtt gauge";
	EXPECT_EQ(host_value("netblk_host_spurious_fast_resends_total", ld), 2)
		<< "attached spurious fast resends";
	EXPECT_EQ(host_value("netblk_host_reordering", ld), 140) << "attached reordering gauge";

	std::map<std::string, std::string> la{{"port", "7000"}, {"device", "nvme0n1p2"},
					      {"nic", "eth0"}};
	auto value = [&](const std::string &name, std::map<std::string, std::string> l) {
		const prom_sample *s = find_sample(samples, name, l);
		return s ? s->value : -1.0;
	};
	EXPECT_EQ(value("netblk_requests_total", la), 1246965) << "requests counter";
	EXPECT_EQ(value("netblk_zerocopy_bytes_total", la), 0) << "zero-copy counter";
	auto lq = la;
	lq["stage"] = "queued";
	EXPECT_EQ(value("netblk_inflight", lq), 4) << "in-flight gauge";
	EXPECT_EQ(value("netblk_uptime_seconds", la), 21.8) << "uptime gauge";
	EXPECT_EQ(value("netblk_slots", la), 256) << "slots gauge";
	EXPECT_EQ(value("netblk_requests_total", {{"port", "7001"}, {"device", "we\"ird\\one\n"},
		{"nic", ""}}), 1246965) << "device from the path's end";
	EXPECT_EQ(value("netblk_instance_info", {{"port", "7001"}, {"path", "/dev/we\"ird\\one\n"}}),
		  1)
		<< "escaped labels read back";
	const prom_sample *info = find_sample(samples, "netblk_instance_info", la);
	EXPECT_TRUE(info && info->labels.at("path") == "/dev/nvme0n1p2" &&
		info->labels.at("addr") == "10.0.2.15" && info->labels.at("auth") == "header" &&
		info->labels.at("read_only") == "false" && info->labels.at("nic_loss") == "wait" &&
		info->labels.at("slots") == "256") << "instance info labels";
	auto with = [&](const char *k, const char *v) {
		auto l = la;
		l[k] = v;
		return l;
	};
	EXPECT_TRUE(value("netblk_refused_total", with("status", "ERANGE")) == 5 &&
		value("netblk_refused_total", with("status", "EAGAIN")) == 0)
			<< "refusals by status";
	EXPECT_TRUE(value("netblk_bad_total", with("reason", "checksum")) == 2 &&
		value("netblk_bad_total", with("reason", "vlan")) == 0) << "drops by reason";
	EXPECT_TRUE(value("netblk_not_allowed_total", la) == 7 &&
		!find_sample(samples, "netblk_not_allowed_total", {{"port", "7001"}}))
			<< "not allowed, where read";
	EXPECT_TRUE(value("netblk_waiting", la) == 1 && value("netblk_waiting", {{"port", "7002"}}) == 0)
		<< "waiting gauge";
	EXPECT_TRUE(value("netblk_op_service_time_seconds_count", with("op", "read")) == 98 &&
		std::abs(value("netblk_op_service_time_seconds_sum", with("op", "flush")) -
		0.451514246) < 1e-12 &&
		!find_sample(samples, "netblk_op_service_time_seconds_count", with("op", "write")))
			<< "service time by op";
	EXPECT_FALSE(find_sample(samples, "netblk_service_time_seconds_count", {{"port", "7001"}}))
		<< "no histogram samples without a histogram";
	EXPECT_TRUE(text.find("# TYPE netblk_requests_total counter\n") != std::string::npos &&
		text.find("# TYPE netblk_inflight gauge\n") != std::string::npos &&
		text.find("# TYPE netblk_service_time_seconds histogram\n") != std::string::npos)
			<< "types";

	// Hand-checked: bucket 713 (high 75775 ns) counts from le=0.0001 on,
	// bucket 1451 (high 226492415 ns) from le=1.
	auto le = [&](const char *bound) {
		auto l = la;
		l["le"] = bound;
		return value("netblk_service_time_seconds_bucket", l);
	};
	EXPECT_TRUE(le("5e-05") == 0 && le("0.0001") == 98 && le("0.1") == 98 && le("1") == 100 &&
		le("+Inf") == 100 && value("netblk_service_time_seconds_count", la) == 100)
			<< "histogram buckets";
	EXPECT_TRUE(std::abs(value("netblk_service_time_seconds_sum", la) - 0.458934022) < 1e-12)
		<< "histogram sum: the module's, exact";
	EXPECT_TRUE(std::abs(prometheus_sum_seconds(a.latency) - 0.45752816) < 1e-12)
		<< "histogram sum without the module's: from midpoints";
	EXPECT_TRUE(le("0.05") == 98 && le("0.25") == 100 && le("0.5") == 100)
		<< "buckets that resolve the resend timeout";

	// Against the samples: the count at a bound is every sample of a
	// bucket that ends at or below it, so between the samples <= 63/64 of
	// the bound and those <= the bound.
	auto cum = prometheus_cumulative(c.latency);
	EXPECT_EQ(cum.back(), 50000u) << "bucket mapping: +Inf holds every sample";
	for (size_t j = 0; j < prometheus_bounds.size(); j++) {
		uint64_t exact = 0, lower = 0;
		for (uint32_t i = 0; i < nb::histogram::bucket_count; i++) {
			if (nb::histogram::bucket_high(i) <= prometheus_bounds[j].ns)
				exact += big->bucket(i);
			if (nb::histogram::bucket_high(i) <= prometheus_bounds[j].ns / 64 * 63)
				lower += big->bucket(i);
		}
		EXPECT_EQ(cum[j],
			  exact) << "bucket mapping, bound " << prometheus_bounds[j].ns << " ns";
		EXPECT_GE(cum[j], lower) << "bucket mapping, bound " << prometheus_bounds[j].ns << " ns";
	}

}

TEST(Prometheus, EmptyExpositionParsesAndTheCheckerRefusesBadOnes)
{
	std::vector<prom_sample> samples;
	EXPECT_EQ(parse_prometheus(format_prometheus({}), samples), "")
		<< "empty exposition parses";
	EXPECT_TRUE(samples.empty()) << "no samples without instances";
	// The checker itself refuses what it should.
	EXPECT_TRUE(!parse_prometheus("x 1\n", samples).empty() &&
		!parse_prometheus("# HELP x h\n# TYPE x histogram\nx_bucket{le=\"1\"} 2\n"
		"x_bucket{le=\"+Inf\"} 1\nx_count 1\n", samples).empty() &&
		!parse_prometheus("# HELP x h\n# TYPE x counter\nx{a=\"b} 1\n", samples).empty())
			<< "the exposition checker itself";
}
