// Self-check of netblkctl without the module: the formatting helpers, the
// parsing of a hand-built netblk message, the generic netlink client
// against nlctrl (present on every Linux), the default route lookup, and --
// when this process may load BPF -- the XDP program run on hand-built
// frames.  Run tools/netblkctl/tests/run.sh.
#include <algorithm>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "format.h"
#include "genl.h"
#include "histogram.h"	// kmod/core: the reference for percentiles
#include "latency.h"
#include "netblk.h"
#include "netblk.skel.h"
#include "prometheus.h"
#include "exporter.h"
#include "settings.h"
#include "config.h"
#include "watch.h"
#include "netblk_maps.h"
#include "netblk_version.h"
#include "xdp.h"

namespace {

int failures;

void check_eq(const std::string &got, const std::string &want, const char *what)
{
	if (got == want)
		return;
	failures++;
	fprintf(stderr, "FAIL %s\n  got:  %s\n  want: %s\n", what, got.c_str(), want.c_str());
}

void check(bool ok, const char *what)
{
	if (!ok) {
		failures++;
		fprintf(stderr, "FAIL %s\n", what);
	}
}

constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;

// A strict JSON (RFC 8259) validator, enough to say netblkctl's output parses.
class json_checker {
public:
	explicit json_checker(std::string_view s) : s_(s) {}

	// One value and nothing after it but whitespace.
	bool document()
	{
		return value() && (ws(), i_ == s_.size());
	}

private:
	void ws()
	{
		while (i_ < s_.size() && strchr(" \t\r\n", s_[i_]))
			i_++;
	}
	bool eat(char c)
	{
		ws();
		if (i_ < s_.size() && s_[i_] == c)
			return ++i_, true;
		return false;
	}
	bool literal(std::string_view w)
	{
		if (s_.substr(i_, w.size()) != w)
			return false;
		i_ += w.size();
		return true;
	}
	bool digits()
	{
		size_t start = i_;
		while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_])))
			i_++;
		return i_ > start;
	}
	bool number()
	{
		if (i_ < s_.size() && s_[i_] == '-')
			i_++;
		if (i_ < s_.size() && s_[i_] == '0')
			i_++;
		else if (!digits())
			return false;
		if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits()))
			return false;
		if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
			i_++;
			if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
				i_++;
			if (!digits())
				return false;
		}
		return true;
	}
	bool string()
	{
		if (!eat('"'))
			return false;
		while (i_ < s_.size()) {
			auto c = static_cast<unsigned char>(s_[i_++]);
			if (c == '"')
				return true;
			if (c < 0x20)
				return false;
			if (c != '\\')
				continue;
			if (i_ >= s_.size())
				return false;
			char e = s_[i_++];
			if (e == 'u') {
				for (int k = 0; k < 4; k++)
					if (i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_++])))
						return false;
			} else if (!strchr("\"\\/bfnrt", e)) {
				return false;
			}
		}
		return false;
	}
	bool value()
	{
		if (++depth_ > 64)
			return false;
		ws();
		bool ok;
		if (i_ >= s_.size())
			ok = false;
		else if (s_[i_] == '{')
			ok = members('}', true);
		else if (s_[i_] == '[')
			ok = members(']', false);
		else if (s_[i_] == '"')
			ok = string();
		else if (s_[i_] == 't')
			ok = literal("true");
		else if (s_[i_] == 'f')
			ok = literal("false");
		else if (s_[i_] == 'n')
			ok = literal("null");
		else
			ok = number();
		depth_--;
		return ok;
	}
	bool members(char close, bool object)
	{
		i_++;
		if (eat(close))
			return true;
		do {
			if (object && !(string() && eat(':')))
				return false;
			if (!value())
				return false;
		} while (eat(','));
		return eat(close);
	}

	std::string_view s_;
	size_t i_ = 0;
	int depth_ = 0;
};

bool valid_json(std::string_view s)
{
	return json_checker(s).document();
}

// The sparse histogram the kernel would send for a core histogram.
latency_hist sparse_of(const nb::histogram &h, bool reversed = false)
{
	latency_hist l;
	l.present = true;
	l.count = h.count();
	l.max_ns = h.max();
	l.linear_limit = nb::histogram::linear_limit;
	l.sub_buckets = nb::histogram::sub_buckets;
	for (uint32_t i = 0; i < nb::histogram::bucket_count; i++)
		if (h.bucket(i))
			l.buckets.emplace_back(i, h.bucket(i));
	if (reversed)
		std::reverse(l.buckets.begin(), l.buckets.end());
	return l;
}

// 98 samples of 75712 ns and 2 of 225757123 ns (hand-checked below).
nb::histogram *small_histogram()
{
	static nb::histogram h;
	h.reset();
	for (int i = 0; i < 98; i++)
		h.record(75712);
	h.record(225757123);
	h.record(225757123);
	return &h;
}

void check_sizes()
{
	check_eq(format_size(0), "0 B", "0");
	check_eq(format_size(1023), "1023 B", "1023");
	check_eq(format_size(KiB), "1 KiB", "1 KiB");
	check_eq(format_size(512 * KiB), "512 KiB", "512 KiB");
	check_eq(format_size(1536), "1.5 KiB", "1.5 KiB");
	check_eq(format_size(256 * MiB), "256 MiB", "256 MiB");
	check_eq(format_size(GiB + GiB / 2), "1.5 GiB", "1.5 GiB");
	check_eq(format_size(GiB + GiB / 100), "1 GiB", "1.01 GiB rounds to 1");
	check_eq(format_size(GiB + GiB / 100 * 6), "1.1 GiB", "1.06 GiB rounds up");
	check_eq(format_size(MiB - 1), "1 MiB", "1023.999 KiB rounds to 1 MiB");
	check_eq(format_size(3 * TiB), "3 TiB", "3 TiB");
	check_eq(format_size(2048 * TiB), "2048 TiB", "TiB is the largest unit");
	check_eq(format_size(UINT64_MAX), "16777216 TiB", "u64 max");
}

void check_strings()
{
	uint8_t a[4] = {10, 0, 2, 15};
	uint32_t addr;
	memcpy(&addr, a, 4);
	check_eq(format_ipv4(addr), "10.0.2.15", "ipv4");
	check_eq(json_string("/dev/sda"), "\"/dev/sda\"", "json plain");
	check_eq(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"", "json escapes");
	check_eq(json_string("d\xc3\xa9v"), "\"d\xc3\xa9v\"", "json utf-8 kept");
	check_eq(json_string("x\xff" "y\xc3"), "\"x\\ufffdy\\ufffd\"", "json bad utf-8");
}

netblk_instance example()
{
	netblk_instance i;
	i.device = "/dev/nvme0n1p2";
	i.disk_name = "nvme0n1p2";
	i.port = 7000;
	uint8_t a[4] = {10, 0, 2, 15};
	memcpy(&i.addr, a, 4);
	i.ifname = "eth0";
	i.ifindex = 2;
	i.handoff_ifindex = 9;
	i.mtu = 1500;
	i.cpu = 1;
	i.poll_us = 50;
	i.size = 256 * MiB;
	i.sector_size = 512;
	i.max_io = 1024;
	i.slots = 256;
	i.sessions = 1024;
	i.per_source = 16;
	i.auth = NETBLK_AUTH_HEADER;
	i.uptime_ms = 21800;
	i.stats[NETBLK_S_REQUESTS] = 1246965;
	i.stats[NETBLK_S_READS] = 765567;
	i.stats[NETBLK_S_READ_BYTES] = 747 * MiB;
	i.stats[NETBLK_S_WRITES] = 481394;
	i.stats[NETBLK_S_WRITE_BYTES] = 470 * MiB;
	i.stats[NETBLK_S_FLUSHES] = 3;
	i.stats[NETBLK_S_DISK_BUSY] = 369;
	i.stats[NETBLK_S_WORKER_SLEEPS] = 192176;
	i.stats[NETBLK_S_SESSIONS_OPEN] = 3;
	i.stats[NETBLK_S_SESSIONS_OPENED] = 5;
	i.stats[NETBLK_S_SESSIONS_EVICTED] = 2;
	i.stats[NETBLK_S_DUPLICATES] = 17;
	i.stats[NETBLK_S_HELLO_COOKIES] = 6;
	return i;
}

void check_text()
{
	netblk_instance i = example();
	i.device = "/dev/nvme0n1p3";
	check_eq(format_started(i),
		 "netblk: serving /dev/nvme0n1p3 (256 MiB, read-write) on eth0 10.0.2.15:7000"
		 " -- 1024 bytes a datagram, worker on cpu 1", "start line");
	i.state = NETBLK_STATE_WAITING;
	i.waiting_for = "eth0 is down";
	check(format_started(i).ends_with(
		      "worker on cpu 1; waiting: eth0 is down (it serves once the NIC is up)"),
	      "start line of an instance whose NIC is down");
	netblk_instance r = example();
	r.stats[NETBLK_S_REFUSED] = 5;
	r.stats[NETBLK_S_BUSY] = r.stats[NETBLK_S_REFUSED_EAGAIN] = 1;
	r.stats[NETBLK_S_REFUSED_ERANGE] = 4;
	check(format_instance_text(r).find(", refused 5 (busy 1, ERANGE 4), in flight") !=
		      std::string::npos,
	      "refusals by status in the list");
	check_eq(format_instance_text(example()),
		 "port 7000: /dev/nvme0n1p2 (256 MiB, rw) on eth0 10.0.2.15, 1024 bytes a"
		 " datagram (mtu 1500), worker on cpu 1, up 21 s\n"
		 "  sources: any\n"
		 "  requests 1246965, bad 0, refused 0 (busy 0), in flight 0 of 256: queued 0,"
		 " at the disk 0, done 0\n"
		 "  reads 765567 (747 MiB), writes 481394 (470 MiB), flushes 3, trims 0 (0 B),"
		 " zeroed 0 (0 B), I/O errors 0\n"
		 "  sessions 3 of 1024 open, 16 a source (5 opened, 2 evicted, 0 refused), auth header;"
		 " duplicates 17 answered again, 0 dropped, reads served again 0, stale 0, too far 0\n"
		 "  refused: no session 0, bad tag 0, old version 0; HELLO cookies 6\n"
		 "  disk busy 369 times (0 tried blocking, 0 answered EAGAIN), no buffer 0,"
		 " worker slept 192176 times\n"
		 "  replies dropped 0 (over the mtu 0), waited for room in the NIC 0 times,"
		 " NIC errors 0\n"
		 "  service time us (arrival to reply): n/a\n"
		 "  data in place 0 B, copied 0 B, frames in 0, out 0\n"
		 "  batches: 0 to the disk, 0 transmits to the NIC; WRITE answers folded 0,"
		 " READs gathered 0\n",
		 "list text");
	netblk_instance l = example();
	l.latency = sparse_of(*small_histogram());
	l.stats[NETBLK_S_BYTES_ZEROCOPY] = 747 * MiB;
	l.stats[NETBLK_S_FRAMES_RX] = 1246965;
	l.stats[NETBLK_S_FRAMES_TX] = 1246965;
	l.stats[NETBLK_S_DISK_BATCHES] = 40000;
	l.stats[NETBLK_S_TX_BATCHES] = 50000;
	l.stats[NETBLK_S_ANSWERS_FOLDED] = 480000;
	l.stats[NETBLK_S_READS_GATHERED] = 9000;
	std::string t = format_instance_text(l);
	check(t.ends_with("  replies dropped 0 (over the mtu 0), waited for room in the NIC 0 times,"
			  " NIC errors 0\n"
			  "  service time us (arrival to reply): p50 75.3, p99 225076.2, p99.9"
			  " 225757.1, max 225757.1\n"
			  "  data in place 747 MiB, copied 0 B, frames in 1246965, out 1246965\n"
			  "  batches: 40000 to the disk, 50000 transmits to the NIC; WRITE answers"
			  " folded 480000, READs gathered 9000\n"),
	      "list text with latency and zero-copy lines");
	l.latency = {};
	l.latency.present = true;
	l.latency.linear_limit = 128;
	l.latency.sub_buckets = 64;
	check(format_instance_text(l).find(
		      "\n  service time us (arrival to reply): no samples yet\n  data in place")
		      != std::string::npos, "list text without samples");
	i.read_only = true;
	check(format_started(i).find("(256 MiB, read-only)") != std::string::npos, "ro start");
	check(format_instance_text(i).find("(256 MiB, ro)") != std::string::npos, "ro list");

	/* drops by reason, the allowlist and its XDP counter, a VLAN, stopping */
	netblk_instance h = example();
	h.driver = "virtio_net";
	h.vlan = 5;
	h.stats[NETBLK_S_BAD] = 5;
	h.stats[NETBLK_S_DROP_SOURCE] = 3;
	h.stats[NETBLK_S_DROP_CHECKSUM] = 2;
	uint8_t net[4] = {10, 1, 0, 0}, host[4] = {10, 2, 3, 4};
	netblk_prefix p1{}, p2{};
	memcpy(&p1.addr, net, 4);
	p1.len = 16;
	memcpy(&p2.addr, host, 4);
	p2.len = 32;
	h.allow = {p1, p2};
	h.not_allowed = 12;
	t = format_instance_text(h);
	check(t.find(" on eth0 vlan 5 10.0.2.15, ") != std::string::npos, "list vlan");
	check(t.find("\n  virtio_net, sources: 10.1.0.0/16, 10.2.3.4 (12 others dropped)\n")
		      != std::string::npos, "list allowlist");
	check(t.find(", bad 5 (bad source 3, checksum 2), refused") != std::string::npos,
	      "list drop reasons");
	check(t.find("STOPPING") == std::string::npos, "serving: no stopping line");
	h.state = NETBLK_STATE_STOPPING;
	h.stopping_ms = 7300;
	h.stats[NETBLK_S_INFLIGHT_DISK] = 3;
	netblk_instance w = example();
	w.state = NETBLK_STATE_WAITING;
	w.waiting_ms = 4200;
	w.waiting_for = "eth0 is down";
	check(format_instance_text(w).find("\n  WAITING for 4 s: eth0 is down; holds its disk and "
					   "port and serves again when the NIC is back\n") !=
	      std::string::npos, "list waiting line");
	check(format_instances_json({w}).find("\"state\": \"waiting\", \"stopping_ms\": 0, "
					      "\"waiting_ms\": 4200, \"waiting_for\": "
					      "\"eth0 is down\"") != std::string::npos, "json waiting");
	check(format_instance_text(h).find("\n  STOPPING for 7 s: no longer serves, waits for 3"
					  " requests at the disk\n") != std::string::npos,
	      "list stopping");
	std::string hj = format_instances_json({h});
	check(valid_json(hj), "json with allowlist parses");
	check(hj.find("\"state\": \"stopping\", \"stopping_ms\": 7300") != std::string::npos &&
		      hj.find("\"vlan\": 5") != std::string::npos &&
		      hj.find("\"allow\": [\"10.1.0.0/16\", \"10.2.3.4\"]") != std::string::npos &&
		      hj.find("\"dropped_source\": 3") != std::string::npos &&
		      hj.find("\"not_allowed\": 12}") != std::string::npos,
	      "json allowlist, vlan, state, drops");
}

void check_key()
{
	std::array<uint8_t, NETBLK_KEY_BYTES> key{};
	check_eq(parse_key_text("000102030405060708090a0b0c0d0E0F\n", key), "", "key parses");
	check(key[0] == 0 && key[10] == 0x0a && key[15] == 0x0f, "key bytes in order");
	check_eq(parse_key_text(" 0001 0203 0405 0607\t0809 0a0b 0c0d 0e0f ", key), "",
		 "key with spaces");
	check(parse_key_text("0001", key).find("4 hexadecimal digits") == 0, "short key");
	check(parse_key_text(std::string(34, 'a'), key).find("more than 32") == 0, "long key");
	check(parse_key_text("0g" + std::string(30, '0'), key).find("not a hexadecimal digit: 'g'") == 0,
	      "bad digit");
	check_eq(auth_name(NETBLK_AUTH_FULL), "full", "auth name");
}

void check_json()
{
	check_eq(format_instances_json({}), "[]\n", "json empty");
	std::string j = format_instances_json({example(), example()});
	check(j.starts_with("[\n  {\"port\": 7000, \"device\": \"/dev/nvme0n1p2\", "
			    "\"disk_name\": \"nvme0n1p2\", \"read_only\": false, \"state\": \"serving\", \"stopping_ms\": 0, "
			    "\"waiting_ms\": 0, \"waiting_for\": \"\", \"nic_loss\": \"wait\", "
			    "\"ifname\": \"eth0\", \"ifindex\": 2, \"driver\": \"\", \"xdp_dropped\": 0, \"vlan\": 0, "
			    "\"handoff_ifindex\": 9, "
			    "\"addr\": \"10.0.2.15\", \"allow\": [], \"mtu\": 1500, \"cpu\": 1, "
			    "\"poll_us\": 50, \"size_bytes\": 268435456, \"sector_size\": 512, "
			    "\"max_io\": 1024, \"slots\": 256, \"sessions\": 1024, \"per_source\": 16, "
			    "\"auth\": \"header\", \"uptime_ms\": 21800, "
			    "\"stats\": {\"requests\": 1246965, \"bad\": 0,"), "json head");
	check(j.find("\"refused_eprotonosupport\": 0, \"refused_estale\": 0, "
		     "\"refused_eoverflow\": 0, \"refused_eusers\": 0, \"refused_ealready\": 0, "
		     "\"refused_eexist\": 0, \"served_again\": 0, "
		     "\"not_allowed\": null}, \"latency\": null},\n  {") != std::string::npos,
	      "json separator");
	check(j.ends_with("\"refused_eprotonosupport\": 0, \"refused_estale\": 0, "
			  "\"refused_eoverflow\": 0, \"refused_eusers\": 0, \"refused_ealready\": 0, "
			  "\"refused_eexist\": 0, \"served_again\": 0, "
			  "\"not_allowed\": null}, \"latency\": null}\n]\n"), "json tail");
	check(j.find("\"duplicates\": 17, ") != std::string::npos, "json duplicates");
	check(valid_json(j), "json list parses");

	netblk_instance l = example();
	l.device = "/dev/\"odd\"\n\xff";
	l.latency = sparse_of(*small_histogram());
	j = format_instances_json({l, example()});
	check(valid_json(j), "json list with latency parses");
	check(j.find("\"latency\": {\"count\": 100, \"max_ns\": 225757123, \"sum_ns\": null, "
		     "\"p50_us\": 75.263, "
		     "\"p99_us\": 225076.193, \"p999_us\": 225757.123, \"linear_limit\": 128, "
		     "\"sub_buckets\": 64, \"buckets\": [[713, 98], [1451, 2]], \"ops\": {}}}")
		      != std::string::npos, "json latency");
	l.latency.sum_ns = 458934022;
	l.latency.ops = {{2, 98, 7419776}, {4, 2, 451514246}};
	j = format_instances_json({l});
	check(j.find("\"sum_ns\": 458934022, ") != std::string::npos &&
	      j.find("\"ops\": {\"read\": {\"count\": 98, \"sum_ns\": 7419776}, "
		     "\"flush\": {\"count\": 2, \"sum_ns\": 451514246}}}") != std::string::npos,
	      "json exact sum and ops");
	l.latency = {};
	l.latency.present = true;
	j = format_instances_json({l});
	check(valid_json(j), "json empty latency parses");
	check(j.find("\"p50_us\": null, \"p99_us\": null, \"p999_us\": null") != std::string::npos,
	      "json latency without samples");

	check(valid_json("{\"a\": [1, -2.5e+3, true, null, \"\\u00e9\"]}") && !valid_json("{\"a\": 1,}") &&
	      !valid_json("[1] 2") && !valid_json("01") && !valid_json("\"\n\""),
	      "the JSON checker itself");
	check_eq(json_double(12.5), "12.5", "json double");
	check_eq(json_double(1e21), "1e+21", "json double exponent");
	check_eq(json_double(NAN), "null", "json NaN");
}

// Percentiles from sparse buckets are the core's, for any order of the
// pairs; the list line rounds them to a tenth of a microsecond.
void check_latency()
{
	check_eq(format_us(0), "0.0", "us 0");
	check_eq(format_us(75712), "75.7", "us round down");
	check_eq(format_us(75750), "75.8", "us round half up");
	check_eq(format_us(225757123), "225757.1", "us large");
	check_eq(format_us(99960), "100.0", "us carry");
	check_eq(format_us_exact(75000), "75", "exact us whole");
	check_eq(format_us_exact(75010), "75.01", "exact us trimmed");
	check_eq(format_us_exact(1), "0.001", "exact us one ns");

	// Hand-checked: bucket 713 is [74752, 75775] (midpoint 75263), bucket
	// 1451 [224395264, 226492415], capped at the max 225757123.
	latency_hist small = sparse_of(*small_histogram());
	check(small.buckets.size() == 2 && small.buckets[0] == std::make_pair(713u, uint64_t{98}) &&
	      small.buckets[1] == std::make_pair(1451u, uint64_t{2}), "bucket numbers");
	check_eq(format_latency_line(small),
		 "service time us (arrival to reply): p50 75.3, p99 225076.2, p99.9 225757.1, "
		 "max 225757.1", "latency line");

	std::mt19937_64 rng(42);
	std::lognormal_distribution<double> dist(11.5, 1.2);	// ~100 us, long tail
	nb::histogram *h = new nb::histogram;
	bool same = true;
	for (int round = 0; round < 4; round++) {
		for (int k = 0; k < 20000; k++)
			h->record(static_cast<uint64_t>(dist(rng)) + (round == 3 ? 50 : 0));
		h->record(round * 40);	// the linear buckets too
		latency_hist l = sparse_of(*h, round % 2);
		for (uint32_t ppm : {0u, 1u, 100000u, 500000u, 900000u, 990000u, 999000u, 999999u,
				     1000000u})
			same = same && latency_at_ppm(l, ppm) == h->value_at_ppm(ppm);
		std::vector<uint64_t> dense = latency_dense(l);
		same = same && nb::histogram_value_at_ppm(dense.data(), dense.size(), l.max_ns,
							  990000) == latency_at_ppm(l, 990000);
		same = same && latency_samples(l) == h->count();
	}
	check(same, "percentiles of sparse buckets are the core's");
	delete h;

	latency_hist bad = small;
	bad.sub_buckets = 32;
	check_eq(format_latency_line(bad), "service time us (arrival to reply): n/a",
		 "unknown layout is n/a");
	bad = small;
	bad.buckets.emplace_back(nb::histogram::bucket_count, 1);
	check(!latency_usable(bad), "bucket out of range is unusable");
	check_eq(format_latency_line(latency_hist{}), "service time us (arrival to reply): n/a",
		 "no histogram is n/a");
}

// A LIST message as the module would build it, with padding before the u64s
// and attributes this netblkctl does not know.
// malformed: 1, MTU of the wrong size; 2, NETBLK_L_BUCKETS not whole buckets.
std::vector<char> list_message(int malformed)
{
	std::vector<char> buf(4096);
	nlmsghdr *nlh = mnl_nlmsg_put_header(buf.data());
	nlh->nlmsg_type = 0x20;
	auto *genl = static_cast<genlmsghdr *>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
	genl->cmd = NETBLK_CMD_LIST;
	mnl_attr_put_strz(nlh, NETBLK_A_DEVICE, "/dev/vdb");
	mnl_attr_put_u16(nlh, NETBLK_A_PORT, 7001);
	mnl_attr_put(nlh, NETBLK_A_READ_ONLY, 0, nullptr);
	mnl_attr_put_strz(nlh, NETBLK_A_IFNAME, "lo");
	mnl_attr_put_u32(nlh, NETBLK_A_ADDR, htonl(0x7f000001));
	mnl_attr_put(nlh, NETBLK_A_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_A_SIZE, GiB + GiB / 2);
	mnl_attr_put_u32(nlh, NETBLK_A_HANDOFF_IFINDEX, 12);
	mnl_attr_put_u32(nlh, NETBLK_A_XDP_DROPPED, 3);
	mnl_attr_put_u32(nlh, 200, 42);			// from a newer module
	if (malformed == 1)
		mnl_attr_put_u16(nlh, NETBLK_A_MTU, 1500);	// should be u32
	nlattr *stats = mnl_attr_nest_start(nlh, NETBLK_A_STATS);
	mnl_attr_put(nlh, NETBLK_S_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_S_REQUESTS, 5);
	mnl_attr_put_u64(nlh, NETBLK_S_BYTES_COPIED, 4096);
	mnl_attr_put_u64(nlh, 300, 1);			// a newer counter
	mnl_attr_nest_end(nlh, stats);
	nlattr *lat = mnl_attr_nest_start(nlh, NETBLK_A_LATENCY);
	mnl_attr_put(nlh, NETBLK_L_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_L_COUNT, 100);
	mnl_attr_put_u64(nlh, NETBLK_L_MAX_NS, 225757123);
	mnl_attr_put_u32(nlh, NETBLK_L_LINEAR_LIMIT, 128);
	mnl_attr_put_u32(nlh, NETBLK_L_SUB_BUCKETS, 64);
	mnl_attr_put_u32(nlh, 99, 7);			// a newer latency attribute
	netblk_latency_bucket b[2] = {{713, 0, 98}, {1451, 0, 2}};
	mnl_attr_put(nlh, NETBLK_L_BUCKETS, malformed == 2 ? sizeof(b) - 4 : sizeof(b), b);
	mnl_attr_nest_end(nlh, lat);
	buf.resize(nlh->nlmsg_len);
	return buf;
}

void check_parse()
{
	std::vector<char> msg = list_message(0);
	netblk_instance i;
	nl_status st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	check(st.ok(), "parse ok");
	check_eq(i.device, "/dev/vdb", "parse device");
	check(i.port == 7001 && i.read_only && i.ifname == "lo", "parse port, ro, ifname");
	check(i.handoff_ifindex == 12, "parse handoff ifindex");
	check(i.xdp_dropped == 3, "parse the dropped program's reopen");
	check(format_instances_json({i}).find("\"xdp_dropped\": 3, ") != std::string::npos,
	      "json xdp_dropped");
	check_eq(format_ipv4(i.addr), "127.0.0.1", "parse addr");
	check(i.size == GiB + GiB / 2, "parse size");
	check(i.stat(NETBLK_S_REQUESTS) == 5 && i.stat(NETBLK_S_BYTES_COPIED) == 4096,
	      "parse stats");
	check(i.stat(NETBLK_S_BAD) == 0, "missing stat is 0");

	check(i.latency.present && i.latency.count == 100 && i.latency.max_ns == 225757123 &&
	      i.latency.linear_limit == 128 && i.latency.sub_buckets == 64, "parse latency");
	check(i.latency.buckets == std::vector<std::pair<uint32_t, uint64_t>>{{713, 98}, {1451, 2}},
	      "parse latency buckets");
	check(format_instance_text(i).find("p50 75.3, p99 225076.2") != std::string::npos,
	      "parsed latency reads");

	msg = list_message(1);
	st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	check(st.err == EBADMSG, "malformed attribute refused");
	check(st.msg.find("attribute 5 ") != std::string::npos, "malformed attribute named");

	msg = list_message(2);
	st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	check(st.err == EBADMSG && st.msg.find("latency attribute 5 ") != std::string::npos,
	      "malformed buckets refused");
}

std::vector<char> event_message(uint32_t event, uint32_t reason, uint32_t err, const char *msg)
{
	std::vector<char> buf(4096);
	nlmsghdr *nlh = mnl_nlmsg_put_header(buf.data());
	nlh->nlmsg_type = 0x20;
	auto *genl = static_cast<genlmsghdr *>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
	genl->cmd = NETBLK_CMD_EVENT;
	mnl_attr_put_u32(nlh, NETBLK_A_EVENT, event);
	if (err)
		mnl_attr_put_u32(nlh, NETBLK_A_ERRNO, err);
	if (msg)
		mnl_attr_put_strz(nlh, NETBLK_A_MESSAGE, msg);
	if (reason)
		mnl_attr_put_u32(nlh, NETBLK_A_REASON, reason);
	mnl_attr_put_strz(nlh, NETBLK_A_DEVICE, "/dev/nvme0n1p1");
	mnl_attr_put_u16(nlh, NETBLK_A_PORT, 7000);
	mnl_attr_put_strz(nlh, NETBLK_A_IFNAME, "eth0");
	if (event == NETBLK_EVENT_STARTED) {
		mnl_attr_put_u32(nlh, NETBLK_A_ADDR, htonl(0x0a00020f));
		mnl_attr_put_u64(nlh, NETBLK_A_SIZE, 256 * MiB);
	}
	buf.resize(nlh->nlmsg_len);
	return buf;
}

// An event as text and JSON, from a hand-built message.
std::string event_text(uint32_t event, uint32_t reason, uint32_t err, const char *msg)
{
	std::vector<char> m = event_message(event, reason, err, msg);
	netblk_event_info ev;
	nl_status st = netblk_parse_event(reinterpret_cast<nlmsghdr *>(m.data()), ev);
	check(st.ok(), "parse event");
	std::string j = format_event_json(ev, 1700000000.25);
	if (!valid_json(j)) {
		failures++;
		fprintf(stderr, "FAIL event JSON: %s\n", j.c_str());
	}
	return format_event_text(ev);
}

void check_events()
{
	check_eq(event_text(NETBLK_EVENT_STARTED, 0, 0, nullptr),
		 "event: port 7000 started on eth0 10.0.2.15: /dev/nvme0n1p1 (256 MiB, rw)",
		 "event started");
	check_eq(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_ASKED, 0, nullptr),
		 "event: port 7000 stopped (asked)", "event stopped asked");
	check_eq(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_RMMOD, 0, nullptr),
		 "event: port 7000 stopped (module unloaded)", "event stopped rmmod");
	check_eq(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_NIC_GONE, 0, "eth0 went down"),
		 "event: port 7000 stopped (NIC gone: eth0 went down)", "event stopped nic");
	check_eq(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_DEVICE_GONE, 0,
			    "/dev/nvme0n1p1 was removed"),
		 "event: port 7000 stopped (device gone: /dev/nvme0n1p1 was removed)",
		 "event stopped device");
	check_eq(event_text(NETBLK_EVENT_STOPPED, 9, 0, nullptr),
		 "event: port 7000 stopped (reason 9)", "event stopped unknown reason");
	check_eq(event_text(NETBLK_EVENT_FAILED, 0, EBUSY, "/dev/nvme0n1p1 is in use\nreally"),
		 "event: start of /dev/nvme0n1p1 on port 7000 failed: /dev/nvme0n1p1 is in use?really",
		 "event failed");
	check_eq(event_text(NETBLK_EVENT_FAILED, 0, EBUSY, nullptr),
		 std::string("event: start of /dev/nvme0n1p1 on port 7000 failed: ") + strerror(EBUSY),
		 "event failed without a message");
	check_eq(event_text(NETBLK_EVENT_IO_ERROR, 0, EIO,
			    "/dev/nvme0n1p1: I/O error at offset 4096"),
		 "event: port 7000 I/O error: /dev/nvme0n1p1: I/O error at offset 4096",
		 "event io error");
	check_eq(event_text(77, 0, 0, nullptr), "event: port 7000: event 77", "unknown event");

	std::vector<char> m = event_message(NETBLK_EVENT_STOPPED, NETBLK_REASON_NIC_GONE, 0,
					    "eth0 went down");
	netblk_event_info ev;
	check(netblk_parse_event(reinterpret_cast<nlmsghdr *>(m.data()), ev).ok(), "parse event");
	check_eq(format_event_json(ev, 1700000000.25),
		 "{\"type\": \"event\", \"time\": 1700000000.25, \"event\": \"stopped\", "
		 "\"event_code\": 2, \"port\": 7000, \"device\": \"/dev/nvme0n1p1\", "
		 "\"ifname\": \"eth0\", \"reason\": \"nic_gone\", \"reason_code\": 3, "
		 "\"errno\": null, \"message\": \"eth0 went down\"}", "event JSON");
}

// watch: the rates between two synthetic dumps, and the interval's p99
// from the difference of their histograms.
void check_watch()
{
	nb::histogram *h = new nb::histogram, *delta = new nb::histogram;
	std::mt19937_64 rng(7);
	std::lognormal_distribution<double> dist(11.0, 0.8);
	for (int k = 0; k < 5000; k++)
		h->record(static_cast<uint64_t>(dist(rng)));
	h->record(50'000'000);	// an old outlier: the cumulative max
	netblk_instance a = example();
	a.latency = sparse_of(*h);
	a.uptime_ms = 10'000;
	a.stats[NETBLK_S_REFUSED] = 10;
	a.stats[NETBLK_S_INFLIGHT_DISK] = 3;

	netblk_instance b = a;
	b.uptime_ms += 2000;
	b.stats[NETBLK_S_REQUESTS] += 20000;
	b.stats[NETBLK_S_READS] += 12000;
	b.stats[NETBLK_S_READ_BYTES] += 12000 * 4096;
	b.stats[NETBLK_S_WRITES] += 8000;
	b.stats[NETBLK_S_WRITE_BYTES] += 8000 * 1024;
	b.stats[NETBLK_S_REFUSED] += 5;
	for (int k = 0; k < 20000; k++) {
		uint64_t v = static_cast<uint64_t>(dist(rng)) / 2;
		h->record(v);
		delta->record(v);
	}
	b.latency = sparse_of(*h);

	netblk_instance other = example();	// a new instance, up for 0.5 s
	other.port = 7001;
	other.uptime_ms = 500;
	other.stats = {};
	other.stats[NETBLK_S_REQUESTS] = 100;

	auto rates = compute_all_rates({a}, {b, other}, 2.0);
	check(rates.size() == 2, "rates of both instances");
	const instance_rates &r = rates[0];
	check(!r.fresh && r.seconds == 2.0 && r.requests == 10000 && r.reads == 6000 &&
	      r.read_bytes == 6000.0 * 4096 && r.writes == 4000 && r.write_bytes == 4000.0 * 1024 &&
	      r.refused == 2.5 && r.inflight == 3, "rates");
	check(r.latency_known && latency_samples(r.latency) == 20000, "interval samples");

	// The interval's max is the high end of its highest bucket, capped at
	// the cumulative max: the old 50 ms outlier is not in the interval.
	std::vector<uint64_t> dense(nb::histogram::bucket_count);
	uint64_t top = 0;
	for (uint32_t i = 0; i < dense.size(); i++)
		if ((dense[i] = delta->bucket(i)))
			top = nb::histogram::bucket_high(i);
	check(r.latency.max_ns == std::min(top, h->max()) && r.latency.max_ns < 50'000'000,
	      "interval max bound");
	bool same = true;
	for (uint32_t ppm : {500000u, 900000u, 990000u, 999000u, 1000000u})
		same = same && rates_percentile(r, ppm) ==
			       nb::histogram_value_at_ppm(dense.data(), dense.size(), r.latency.max_ns, ppm);
	check(same, "interval percentiles are the core's on the difference");
	check(rates_percentile(r, 990000) == delta->value_at_ppm(990000),
	      "interval p99 is the interval's own");
	std::string p99 = format_us(delta->value_at_ppm(990000));
	check_eq(format_rates_text(r),
		 "port 7000: requests 10000/s, reads 6000/s (23.4 MiB/s), writes 4000/s (3.9 MiB/s),"
		 " refused 3/s, p99 " + p99 + " us", "rates text");
	std::string j = format_rates_json(r, 1700000000.5);
	check(valid_json(j), "rates JSON parses");
	check(j.starts_with("{\"type\": \"rates\", \"time\": 1700000000.5, \"port\": 7000, "
			    "\"device\": \"/dev/nvme0n1p2\", \"ifname\": \"eth0\", "
			    "\"interval_s\": 2, \"fresh\": false, \"requests_per_s\": 10000, "
			    "\"reads_per_s\": 6000, \"read_bytes_per_s\": 24576000, "
			    "\"writes_per_s\": 4000, \"write_bytes_per_s\": 4096000, "
			    "\"refused_per_s\": 2.5, \"inflight\": 3, \"samples\": 20000, "
			    "\"p50_us\": "), "rates JSON fields");
	check(j.find("\"p99_us\": " + format_us_exact(delta->value_at_ppm(990000)) + "}") !=
	      std::string::npos, "rates JSON p99");

	const instance_rates &n = rates[1];
	check(n.fresh && n.seconds == 0.5 && n.requests == 200, "a new instance: since its start");
	check_eq(format_rates_text(n), "port 7001: requests 200/s, reads 0/s (0.0 MiB/s), "
		 "writes 0/s (0.0 MiB/s), refused 0/s, p99 n/a", "rates text without a histogram");
	check(valid_json(format_rates_json(n, 1)), "rates JSON without a histogram");

	// Restarted on the same port between the dumps: counted from its start.
	netblk_instance c = example();
	c.uptime_ms = 1500;
	c.latency = sparse_of(*small_histogram());
	instance_rates rr = compute_rates(&b, c, 2.0);
	check(rr.fresh && rr.seconds == 1.5 && latency_samples(rr.latency) == 100,
	      "a restarted instance: since its start");
	// No traffic in the interval.
	rr = compute_rates(&b, b, 1.0);
	check(!rr.fresh && rr.requests == 0 && latency_samples(rr.latency) == 0 &&
	      format_rates_text(rr).ends_with("refused 0/s, p99 -"), "an idle interval");
	check(valid_json(format_rates_json(rr, 1)), "idle rates JSON");
	delete h;
	delete delta;
}

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

// A free TCP port on 127.0.0.1 (bound, then let go: the exporter takes it next).
uint16_t free_tcp_port(int *keep_fd = nullptr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) ||
	    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len))
		return 0;
	if (keep_fd) {
		listen(fd, 1);
		*keep_fd = fd;
	} else {
		close(fd);
	}
	return ntohs(a.sin_port);
}

// One HTTP/1.0 request to 127.0.0.1:port; the whole response, "" on failure.
std::string http_get(uint16_t port, const std::string &request)
{
	for (int attempt = 0; attempt < 100; attempt++) {	// the server may not listen yet
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons(port);
		if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
			close(fd);
			usleep(50000);
			continue;
		}
		if (write(fd, request.data(), request.size()) != (ssize_t)request.size()) {
			close(fd);
			return {};
		}
		std::string out;
		char buf[4096];
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			out.append(buf, n);
		close(fd);
		return out;
	}
	return {};
}

// A child process runs the exporter with a fixed scrape; 0 if it could not start.
pid_t start_exporter(uint16_t port, bool module_loaded)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid < 0 ? 0 : pid;
	sockaddr_in a;
	parse_listen_address("127.0.0.1:" + std::to_string(port), a);
	auto scrape = [module_loaded]() -> scrape_result {
		if (!module_loaded)
			return {std::nullopt, "the netblk module is not loaded (modprobe netblk)"};
		return {format_prometheus({example()}), {}};
	};
	_exit(run_exporter(a, scrape));
}

int stop_exporter(pid_t pid)
{
	kill(pid, SIGTERM);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void check_exporter()
{
	sockaddr_in a;
	check_eq(parse_listen_address("127.0.0.1:9575", a), "", "listen address");
	check(a.sin_port == htons(9575) && a.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "listen address parsed");
	check(parse_listen_address("9575", a).find("ADDR:PORT") != std::string::npos &&
		      parse_listen_address("localhost:9575", a).find("not an IPv4") !=
			      std::string::npos &&
		      parse_listen_address("0.0.0.0:0", a).find("1..65535") != std::string::npos &&
		      parse_listen_address("0.0.0.0:70000", a).find("1..65535") != std::string::npos,
	      "bad listen addresses say what to give");

	int scrapes = 0;
	auto ok = [&]() -> scrape_result {
		scrapes++;
		return {"netblk_x 1\n", {}};
	};
	http_answer r = exporter_answer("GET", "/metrics", ok);
	check(r.status == 200 && r.body == "netblk_x 1\n" && scrapes == 1 &&
		      r.content_type == "text/plain; version=0.0.4; charset=utf-8",
	      "GET /metrics scrapes");
	check(exporter_answer("POST", "/metrics", ok).status == 405 && scrapes == 1,
	      "POST: 405, no scrape");
	check(exporter_answer("GET", "/other", ok).status == 404, "another path: 404");
	check(exporter_answer("GET", "/", ok).body.find("/metrics") != std::string::npos, "/ points on");
	r = exporter_answer("GET", "/metrics",
			    [] { return scrape_result{std::nullopt, "not loaded"}; });
	check(r.status == 503 && r.body.find("not loaded") != std::string::npos,
	      "no module: 503 saying why");

	// Over a real socket, in a child: HTTP from libmicrohttpd, SIGTERM ends it.
	uint16_t port = free_tcp_port();
	pid_t pid = start_exporter(port, true);
	std::string resp = http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
	check(resp.starts_with("HTTP/1.0 200") || resp.starts_with("HTTP/1.1 200"),
	      "exporter answers 200");
	check(resp.find("\r\n\r\n# HELP netblk_requests_total ") != std::string::npos &&
		      resp.find("netblk_requests_total{port=\"7000\",device=\"nvme0n1p2\"") !=
			      std::string::npos,
	      "exporter body is the exposition");
	resp = http_get(port, "DELETE /metrics HTTP/1.0\r\n\r\n");
	check(resp.find(" 405 ") != std::string::npos && resp.find("Allow: GET, HEAD") !=
								  std::string::npos,
	      "exporter refuses other methods");
	check(pid && stop_exporter(pid) == 0, "SIGTERM stops the exporter, status 0");

	pid = start_exporter(port = free_tcp_port(), false);
	resp = http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
	check(resp.find(" 503 ") != std::string::npos && resp.find("modprobe netblk") !=
								  std::string::npos,
	      "exporter without the module: 503");
	stop_exporter(pid);

	int busy_fd = -1;
	port = free_tcp_port(&busy_fd);
	pid = start_exporter(port, true);
	int status = 0;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 1, "a port in use: exit status 1");
	close(busy_fd);
}

void check_prometheus()
{
	check_eq(prometheus_label_value("a\\b\"c\nd\xff"), "a\\\\b\\\"c\\nd\xef\xbf\xbd",
		 "label escapes");

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
	nb::histogram *big = new nb::histogram;
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
	check_eq(promtool_check(text), "", "promtool check metrics");
	check_eq(promtool_check(format_prometheus({})), "", "promtool: the empty exposition");
	std::vector<prom_sample> samples;
	std::string err = parse_prometheus(text, samples);
	check_eq(err, "", "prometheus output parses");
	if (!err.empty())
		fprintf(stderr, "%s", text.c_str());
	std::map<std::string, std::string> ld{{"disk", "netblk0"}, {"server", "10.9.0.1:7000"}};
	auto host_value = [&](const std::string &name, std::map<std::string, std::string> l) {
		const prom_sample *s = find_sample(samples, name, l);
		return s ? s->value : -1.0;
	};
	check(host_value("netblk_host_requests_total", ld) == 1025, "attached requests counter");
	auto lf = ld;
	lf["why"] = "fast";
	check(host_value("netblk_host_resends_total", lf) == 3, "attached fast resends");
	auto lb = ld;
	lb["how"] = "in_place";
	check(host_value("netblk_host_bytes_total", lb) == 4096, "attached bytes in place");
	check(host_value("netblk_host_srtt_seconds", ld) == 0.0035725, "attached srtt gauge");
	check(host_value("netblk_host_spurious_fast_resends_total", ld) == 2,
	      "attached spurious fast resends");
	check(host_value("netblk_host_reordering", ld) == 140, "attached reordering gauge");

	std::map<std::string, std::string> la{{"port", "7000"}, {"device", "nvme0n1p2"},
					      {"nic", "eth0"}};
	auto value = [&](const std::string &name, std::map<std::string, std::string> l) {
		const prom_sample *s = find_sample(samples, name, l);
		return s ? s->value : -1.0;
	};
	check(value("netblk_requests_total", la) == 1246965, "requests counter");
	check(value("netblk_zerocopy_bytes_total", la) == 0, "zero-copy counter");
	auto lq = la;
	lq["stage"] = "queued";
	check(value("netblk_inflight", lq) == 4, "in-flight gauge");
	check(value("netblk_uptime_seconds", la) == 21.8, "uptime gauge");
	check(value("netblk_slots", la) == 256, "slots gauge");
	check(value("netblk_requests_total", {{"port", "7001"}, {"device", "we\"ird\\one\n"},
					      {"nic", ""}}) == 1246965, "device from the path's end");
	check(value("netblk_instance_info", {{"port", "7001"}, {"path", "/dev/we\"ird\\one\n"}}) == 1,
	      "escaped labels read back");
	const prom_sample *info = find_sample(samples, "netblk_instance_info", la);
	check(info && info->labels.at("path") == "/dev/nvme0n1p2" &&
		      info->labels.at("addr") == "10.0.2.15" && info->labels.at("auth") == "header" &&
		      info->labels.at("read_only") == "false" && info->labels.at("nic_loss") == "wait" &&
		      info->labels.at("slots") == "256",
	      "instance info labels");
	auto with = [&](const char *k, const char *v) {
		auto l = la;
		l[k] = v;
		return l;
	};
	check(value("netblk_refused_total", with("status", "ERANGE")) == 5 &&
		      value("netblk_refused_total", with("status", "EAGAIN")) == 0,
	      "refusals by status");
	check(value("netblk_bad_total", with("reason", "checksum")) == 2 &&
		      value("netblk_bad_total", with("reason", "vlan")) == 0,
	      "drops by reason");
	check(value("netblk_not_allowed_total", la) == 7 &&
		      !find_sample(samples, "netblk_not_allowed_total", {{"port", "7001"}}),
	      "not allowed, where read");
	check(value("netblk_waiting", la) == 1 && value("netblk_waiting", {{"port", "7002"}}) == 0,
	      "waiting gauge");
	check(value("netblk_op_service_time_seconds_count", with("op", "read")) == 98 &&
		      std::abs(value("netblk_op_service_time_seconds_sum", with("op", "flush")) -
			       0.451514246) < 1e-12 &&
		      !find_sample(samples, "netblk_op_service_time_seconds_count", with("op", "write")),
	      "service time by op");
	check(!find_sample(samples, "netblk_service_time_seconds_count", {{"port", "7001"}}),
	      "no histogram samples without a histogram");
	check(text.find("# TYPE netblk_requests_total counter\n") != std::string::npos &&
	      text.find("# TYPE netblk_inflight gauge\n") != std::string::npos &&
	      text.find("# TYPE netblk_service_time_seconds histogram\n") != std::string::npos,
	      "types");

	// Hand-checked: bucket 713 (high 75775 ns) counts from le=0.0001 on,
	// bucket 1451 (high 226492415 ns) from le=1.
	auto le = [&](const char *bound) {
		auto l = la;
		l["le"] = bound;
		return value("netblk_service_time_seconds_bucket", l);
	};
	check(le("5e-05") == 0 && le("0.0001") == 98 && le("0.1") == 98 && le("1") == 100 &&
	      le("+Inf") == 100 && value("netblk_service_time_seconds_count", la) == 100,
	      "histogram buckets");
	check(std::abs(value("netblk_service_time_seconds_sum", la) - 0.458934022) < 1e-12,
	      "histogram sum: the module's, exact");
	check(std::abs(prometheus_sum_seconds(a.latency) - 0.45752816) < 1e-12,
	      "histogram sum without the module's: from midpoints");
	check(le("0.05") == 98 && le("0.25") == 100 && le("0.5") == 100,
	      "buckets that resolve the resend timeout");

	// Against the samples: the count at a bound is every sample of a
	// bucket that ends at or below it, so between the samples <= 63/64 of
	// the bound and those <= the bound.
	auto cum = prometheus_cumulative(c.latency);
	bool bounded = cum.back() == 50000;
	for (size_t j = 0; j < prometheus_bounds.size(); j++) {
		uint64_t exact = 0, lower = 0;
		for (uint32_t i = 0; i < nb::histogram::bucket_count; i++) {
			if (nb::histogram::bucket_high(i) <= prometheus_bounds[j].ns)
				exact += big->bucket(i);
			if (nb::histogram::bucket_high(i) <= prometheus_bounds[j].ns / 64 * 63)
				lower += big->bucket(i);
		}
		bounded = bounded && cum[j] == exact && cum[j] >= lower;
	}
	check(bounded, "bucket mapping");

	samples.clear();
	check_eq(parse_prometheus(format_prometheus({}), samples), "", "empty exposition parses");
	check(samples.empty(), "no samples without instances");
	// The checker itself refuses what it should.
	check(!parse_prometheus("x 1\n", samples).empty() &&
	      !parse_prometheus("# HELP x h\n# TYPE x histogram\nx_bucket{le=\"1\"} 2\n"
				"x_bucket{le=\"+Inf\"} 1\nx_count 1\n", samples).empty() &&
	      !parse_prometheus("# HELP x h\n# TYPE x counter\nx{a=\"b} 1\n", samples).empty(),
	      "the exposition checker itself");
	delete big;
}

// The client against nlctrl: a doit, a missing family, an error ack with an
// extended-ack message, and a dump.
void check_genl()
{
	genl_socket sock;
	nl_status st = sock.open();
	check(st.ok(), "genl open");
	if (!st.ok())
		return;
	genl_family f;
	st = sock.resolve_family("nlctrl", f);
	check(st.ok() && f.id == GENL_ID_CTRL, "resolve nlctrl");
	check(genl_mcast_group_id(f, "notify").has_value(), "nlctrl has a notify group");
	check(!genl_mcast_group_id(f, "events").has_value(), "no events group");

	st = sock.resolve_family("netblk-nope", f);
	check(st.err == ENOENT, "missing family is ENOENT");

	// GETPOLICY validates strictly: a u32 where a u16 belongs is refused
	// with an extended-ack message, when the dump starts.
	nlmsghdr *req = sock.begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_DUMP, CTRL_CMD_GETPOLICY, 1);
	mnl_attr_put_u32(req, CTRL_ATTR_FAMILY_ID, GENL_ID_CTRL);
	st = sock.transact(req, [](const nlmsghdr *) { return nl_status{}; });
	check(st.err == EINVAL && !st.msg.empty(), "bad attribute refused with a message");
	printf("  nlctrl's refusal: %s (errno %d)\n", st.text().c_str(), st.err);

	int families = 0;
	req = sock.begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_DUMP, CTRL_CMD_GETFAMILY, 1);
	st = sock.transact(req, [&](const nlmsghdr *) {
		families++;
		return nl_status{};
	});
	check(st.ok() && families >= 1, "dump of nlctrl");
	printf("  dumped %d generic netlink families\n", families);

	// A multicast group joined, read without waiting: nothing is queued.
	genl_socket mc;
	check(mc.open().ok() && mc.resolve_family("nlctrl", f).ok(), "second socket");
	auto notify = genl_mcast_group_id(f, "notify");
	check(notify && mc.join_group(*notify).ok() && mc.fd() >= 0, "join nlctrl's notify group");
	int seen = 0;
	st = mc.recv_pending([&](const nlmsghdr *) {
		seen++;
		return nl_status{};
	});
	check(st.ok() && seen == 0, "nothing pending on the group");
}

void check_default_route()
{
	const char *head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask"
			   "\t\tMTU\tWindow\tIRTT\n";
	auto route = [&](const std::string &lines) {
		return default_route_ifname(head + lines).value_or("(none)");
	};
	check_eq(route(""), "(none)", "no routes");
	check_eq(route("eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"),
		 "(none)", "no default route");
	check_eq(route("eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
		       "eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"),
		 "eth0", "default route");
	check_eq(route("eth1\t00000000\t0201A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
		       "wlan0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
		       "eth2\t00000000\t0301A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"),
		 "wlan0", "lowest metric, first of equals");
	check_eq(route("*\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n"),
		 "(none)", "unreachable default");
	check_eq(route("eth0\t00000000\t0202000A\t0003\t0\t0\t0\t000000FF\t0\t0\t0\n"),
		 "(none)", "0.0.0.0/8 is not a default route");
	auto here = default_route_ifname();
	printf("  this host's default route: %s\n", here ? here->c_str() : "(none)");
}

// An Ethernet + IPv4 + UDP frame to daddr:port from saddr, 16 bytes of payload.
struct frame_spec {
	uint16_t port = 7000;
	uint16_t ethertype = 0x0800;
	uint16_t vlan = 0;	// an 802.1Q tag when not 0
	uint8_t proto = 17;
	uint8_t ihl = 5;
	uint16_t frag_off = 0;	// host order: flags and offset
	uint32_t saddr = 0x0a000202;	// host order: 10.0.2.2
	uint32_t daddr = 0x0a00020f;	// 10.0.2.15
	size_t cut = 0;		// bytes to drop from the end
};

std::vector<uint8_t> frame(const frame_spec &s)
{
	size_t l3 = s.vlan ? 18 : 14;
	std::vector<uint8_t> f(l3 + s.ihl * 4 + 8 + 16, 0);
	if (s.vlan) {
		f[12] = 0x81;
		f[14] = s.vlan >> 8;
		f[15] = s.vlan & 0xff;
	}
	f[l3 - 2] = s.ethertype >> 8;
	f[l3 - 1] = s.ethertype & 0xff;
	uint8_t *ip = &f[l3];
	ip[0] = 0x40 | s.ihl;
	ip[6] = s.frag_off >> 8;
	ip[7] = s.frag_off & 0xff;
	ip[8] = 64;
	ip[9] = s.proto;
	uint32_t sa = htonl(s.saddr), da = htonl(s.daddr);
	memcpy(ip + 12, &sa, 4);
	memcpy(ip + 16, &da, 4);
	uint8_t *udp = ip + s.ihl * 4;
	udp[0] = 0x9c;			// source port 40000
	udp[1] = 0x40;
	udp[2] = s.port >> 8;
	udp[3] = s.port & 0xff;
	f.resize(f.size() - s.cut);
	return f;
}

// The XDP program's verdict on a frame; -1 when the run failed.
int xdp_verdict(int prog_fd, const frame_spec &s)
{
	std::vector<uint8_t> f = frame(s);
	bpf_test_run_opts o{};
	o.sz = sizeof(o);
	o.data_in = f.data();
	o.data_size_in = f.size();
	o.repeat = 1;
	if (bpf_prog_test_run_opts(prog_fd, &o))
		return -1;
	return static_cast<int>(o.retval);
}

// What netblkctl start writes for an instance on `port` of 10.0.2.15.
int steer(int steer_fd, uint16_t port, uint16_t vlan, uint16_t flags)
{
	netblk_steer st{};
	st.addr = htonl(0x0a00020f);
	st.vlan = vlan;
	st.flags = flags;
	std::vector<netblk_steer> v(static_cast<size_t>(libbpf_num_possible_cpus()), st);
	uint32_t key = port;
	return bpf_map_update_elem(steer_fd, &key, v.data(), BPF_ANY);
}

uint64_t not_allowed(int steer_fd, uint16_t port)
{
	std::vector<netblk_steer> v(static_cast<size_t>(libbpf_num_possible_cpus()));
	uint32_t key = port;
	uint64_t sum = 0;
	if (bpf_map_lookup_elem(steer_fd, &key, v.data()) == 0)
		for (const auto &e : v)
			sum += e.not_allowed;
	return sum;
}

// The program through the kernel's verifier, then on frames: an instance's
// address, port and VLAN redirect, from an allowed source; everything else
// passes, but for the sources an allowlist keeps out, which it drops.
void check_xdp_program()
{
	xdp_quiet_libbpf();
	netblk_bpf *skel = netblk_bpf__open_and_load();
	if (!skel) {
		int err = errno;
		if (err == EPERM || err == EACCES) {
			printf("  XDP program not loaded (%s): skipped\n", strerror(err));
			return;
		}
		failures++;
		fprintf(stderr, "FAIL XDP program load: %s\n", strerror(err));
		return;
	}
	int prog = bpf_program__fd(skel->progs.netblk_xdp);
	int steer_fd = bpf_map__fd(skel->maps.netblk_steer);
	int ports_fd = bpf_map__fd(skel->maps.netblk_ports);
	int verdicts = 0;
	auto expect = [&](const frame_spec &f, int want, const char *what) {
		check(xdp_verdict(prog, f) == want, what);
		verdicts++;
	};
	bpf_devmap_val val{};
	val.ifindex = 1;	// lo: any device will do for a test run
	for (uint32_t key : {7000u, 7001u, 7002u})
		check(bpf_map_update_elem(ports_fd, &key, &val, BPF_ANY) == 0, "port map update");
	check(steer(steer_fd, 7000, 0, 0) == 0, "steer map update");

	frame_spec s;
	expect(s, XDP_REDIRECT, "served port redirected");
	s.daddr = 0x0a000210;
	expect(s, XDP_PASS, "the port on another local address passes");
	s = {};
	s.port = 7003;
	expect(s, XDP_PASS, "other port passes");
	s.port = 7001;
	expect(s, XDP_PASS, "a port with a devmap entry but no steer entry passes");
	s = {};
	s.ihl = 7;
	expect(s, XDP_REDIRECT, "IP options skipped");
	s = {};
	s.frag_off = 0x2000;	// MF, offset 0: the first fragment has the UDP header
	expect(s, XDP_REDIRECT, "first fragment redirected");
	s.frag_off = 0x0010;
	expect(s, XDP_PASS, "later fragment passes");
	s = {};
	s.proto = 6;
	expect(s, XDP_PASS, "TCP passes");
	s = {};
	s.ethertype = 0x86dd;
	expect(s, XDP_PASS, "not IPv4 passes");
	s = {};
	s.ihl = 4;
	expect(s, XDP_PASS, "ihl < 5 passes");
	s = {};
	s.cut = 16 + 5;		// 3 bytes of the UDP header
	expect(s, XDP_PASS, "truncated UDP header passes");
	s.cut = 16;		// exactly the UDP header
	expect(s, XDP_REDIRECT, "bare UDP header redirected");

	/* VLANs: an untagged instance takes no tagged frame, a tagged one its own only */
	s = {};
	s.vlan = 5;
	expect(s, XDP_PASS, "tagged frame for an untagged instance passes");
	check(steer(steer_fd, 7002, 5, 0) == 0, "steer map update, vlan");
	s.port = 7002;
	expect(s, XDP_REDIRECT, "the instance's VLAN redirected");
	s.vlan = 6;
	expect(s, XDP_PASS, "another VLAN passes");
	s.vlan = 0;
	expect(s, XDP_PASS, "untagged for a tagged instance passes");

	/* the allowlist: 10.0.2.0/24 and 192.168.7.7 on port 7000 */
	check(steer(steer_fd, 7000, 0, NETBLK_STEER_ALLOWLIST) == 0, "steer map update, allowlist");
	int allow_fd = bpf_map__fd(skel->maps.netblk_allow);
	for (auto [addr, len] : {std::pair<uint32_t, uint32_t>{0x0a000200, 24}, {0xc0a80707, 32}}) {
		netblk_allow_key k{};
		k.prefixlen = 32 + len;
		k.port = htons(7000);
		k.src = htonl(addr);
		uint8_t one = 1;
		check(bpf_map_update_elem(allow_fd, &k, &one, BPF_ANY) == 0, "allow map update");
	}
	s = {};
	expect(s, XDP_REDIRECT, "a source in an allowed prefix redirected");
	s.saddr = 0xc0a80707;
	expect(s, XDP_REDIRECT, "an allowed host redirected");
	s.saddr = 0xc0a80708;
	expect(s, XDP_DROP, "another source dropped");
	s.saddr = 0x0a000302;
	expect(s, XDP_DROP, "the next /24 dropped");
	s.port = 7002;
	s.vlan = 5;
	expect(s, XDP_REDIRECT, "another instance's allowlist is its own");
	check(not_allowed(steer_fd, 7000) == 2, "the drops counted, per instance");
	netblk_bpf__destroy(skel);
	printf("  XDP program verified and run on %d frames\n", verdicts);
}

} // namespace

/* The block-device client's lines: attach's, and list's for an attached device. */
void check_attached_text()
{
	netblk_attached a;
	uint8_t ip[4] = {10, 9, 0, 1};
	a.disk = "netblk0";
	memcpy(&a.addr, ip, 4);
	a.port = 7000;
	a.size = 256ull << 20;
	a.max_io = 1024;
	a.slots = 256;
	a.queue_depth = 64;
	a.uptime_ms = 21500;
	a.stats[NETBLK_HS_REQUESTS] = 1025;
	a.stats[NETBLK_HS_SENDS] = 4190;
	a.stats[NETBLK_HS_RX_DATAGRAMS] = 4170;
	a.stats[NETBLK_HS_WINDOW] = 26;
	a.stats[NETBLK_HS_TIMEOUTS] = 89;
	a.stats[NETBLK_HS_FAST_RESENDS] = 12;
	a.stats[NETBLK_HS_FAST_SPURIOUS] = 10;
	a.stats[NETBLK_HS_REORDERING] = 140;
	a.stats[NETBLK_HS_SRTT_NS] = 3572500;
	a.stats[NETBLK_HS_RTO_NS] = 20000000;
	a.stats[NETBLK_HS_SESSIONS_OPENED] = 2;
	a.stats[NETBLK_HS_RENUMBERED] = 4;
	a.stats[NETBLK_HS_BYTES_IN_PLACE] = 4300000;
	a.stats[NETBLK_HS_TX_BATCHED] = 3900;
	check_eq(format_attached(a),
		 "netblk: /dev/netblk0 is 10.9.0.1:7000 (256 MiB, read-write), 1024 bytes a datagram",
		 "attach line");
	check_eq(format_attached_text(a),
		 "/dev/netblk0: 10.9.0.1:7000 (256 MiB, rw), 1024 bytes a datagram, queue depth 64,"
		 " I/O waits for the server, key none, up 21 s\n"
		 "  requests 1025 (errors 0), datagrams sent 4190, received 4170, outstanding 0"
		 " (window 26 of 256, queued 0)\n"
		 "  resends: timeout 89 (spurious 0), fast 12 (spurious 10), busy 0; reordering 140;"
		 " window cut 0 times; srtt 3572.5 us,"
		 " rto 20000.0 us\n"
		 "  sessions opened 2 (renumbered 4, refused 0), stray 0, duplicates 0;"
		 " WRITEs answered folded 0\n"
		 "  resized 0 times, requests failed at once 0\n"
		 "  write data sent in place 4.1 MiB, copied 0 B; read data copied 0 B;"
		 " send errors 0, dropped 0; datagrams sent batched 3900\n"
		 "  service time us (queued to answered): n/a\n", "attached list text");
	a.read_only = true;
	a.timeout_ms = 5000;
	a.auth = NETBLK_AUTH_HEADER;
	std::string t = format_attached_text(a);
	check(t.find("(256 MiB, ro), 1024 bytes a datagram, queue depth 64, I/O fails after 5000 ms,"
		     " key header,") != std::string::npos, "attached ro, timeout, key");
	check(format_attached(a).find("(256 MiB, read-only)") != std::string::npos, "attach ro line");
	a.latency = sparse_of(*small_histogram());
	check(format_attached_text(a).find("\n  service time us (queued to answered): p50 ") !=
	      std::string::npos, "attached service time");
	std::string j = format_attached_json({a, a});
	check(valid_json(j), "attached json parses");
	check(j.starts_with("[\n  {\"disk\": \"netblk0\", \"addr\": \"10.9.0.1\", \"port\": 7000, "
			    "\"ifname\": \"\", \"read_only\": true, "), "attached json fields");
	check(j.find("\"requests\": 1025, \"errors\": 0, \"sends\": 4190, ") != std::string::npos,
	      "attached json stats");
	check(j.find("\"latency\": {\"count\": 100, ") != std::string::npos, "attached json latency");
	check_eq(format_attached_json({}), "[]\n", "no attached devices: []");

	/* the server silent for timeout=, then another device behind a restart */
	a.stats[NETBLK_HS_UNREACHABLE] = 1;
	a.stats[NETBLK_HS_OUTAGES] = 1;
	a.stats[NETBLK_HS_FAILED_FAST] = 7;
	t = format_attached_text(a);
	check(t.find("\n  UNREACHABLE: the server has not answered for the timeout; I/O fails at "
		     "once until it does\n") != std::string::npos, "attached unreachable");
	check(t.find("\n  resized 0 times, outages 1, requests failed at once 7\n") !=
	      std::string::npos, "attached outages");
	a.stats[NETBLK_HS_CHANGED] = NETBLK_HOST_CHANGE_OTHER_DEVICE;
	check(format_attached_text(a).find("\n  STOPPED: the server serves another device after a "
					   "restart; I/O fails, nothing is written to it: detach it\n") !=
	      std::string::npos, "attached stopped");
	check(format_attached_json({a}).find("\"unreachable\": 1, \"outages\": 1, \"failed_fast\": 7, "
					     "\"changed\": 1, \"resizes\": 0, \"spurious\": 0, "
					     "\"tx_batched\": 3900, \"folded\": 0, "
					     "\"fast_spurious\": 10, \"reordering\": 140, "
					     "\"header_pages\": 0}") !=
	      std::string::npos,
	      "attached json: unreachable, changed");

	/* watch: its rates over an interval */
	netblk_attached b = a;
	b.uptime_ms += 2000;
	b.stats[NETBLK_HS_REQUESTS] += 1600;
	b.stats[NETBLK_HS_ERRORS] += 2;
	b.stats[NETBLK_HS_BYTES_IN_PLACE] += 2 << 20;
	b.stats[NETBLK_HS_READ_BYTES_COPIED] += 6 << 20;
	b.stats[NETBLK_HS_TIMEOUTS] += 3;
	b.stats[NETBLK_HS_FAST_RESENDS] += 1;
	b.stats[NETBLK_HS_OUTSTANDING] = 4;
	b.stats[NETBLK_HS_CHANGED] = 0;
	netblk_attached fresh = b;
	fresh.disk = "netblk1";
	fresh.uptime_ms = 500;
	auto rates = compute_attached_rates({a}, {b, fresh}, 2.0);
	check(rates.size() == 2 && !rates[0].fresh && rates[0].requests == 800 &&
	      rates[0].errors == 1 && rates[0].write_bytes == 1 << 20 &&
	      rates[0].read_bytes == 3 << 20 && rates[0].resends == 2, "attached rates");
	check(rates[1].fresh && rates[1].seconds == 0.5, "an attached device new in the interval");
	check_eq(format_attached_rates_text(rates[0]),
		 "/dev/netblk0: requests 800/s, errors 1/s, writes 1.0 MiB/s, reads 3.0 MiB/s, "
		 "resends 2/s, outstanding 4, p99 - UNREACHABLE", "attached rates text");
	j = format_attached_rates_json(rates[0], 1700000000.5);
	check(valid_json(j), "attached rates JSON parses");
	check(j.starts_with("{\"type\": \"attached_rates\", \"time\": 1700000000.5, "
			    "\"disk\": \"netblk0\", \"server\": \"10.9.0.1:7000\", \"interval_s\": 2, "
			    "\"fresh\": false, \"requests_per_s\": 800, \"errors_per_s\": 1, "
			    "\"write_bytes_per_s\": 1048576, \"read_bytes_per_s\": 3145728, "
			    "\"resends_per_s\": 2, \"outstanding\": 4, \"unreachable\": true, "
			    "\"changed\": 0, \"samples\": 0, \"p50_us\": null"), "attached rates JSON");
}

void check_version()
{
	const std::string tool = "netblkctl " NETBLK_VERSION "\n";
	check_eq(format_version(std::nullopt), tool + "netblk.ko not loaded (modprobe netblk)\n",
		 "version, no module");
	check_eq(format_version(NETBLK_VERSION "\n"), tool + "netblk.ko " NETBLK_VERSION "\n",
		 "version, same module");
	check_eq(format_version("0.1.9\n"),
		 tool + "netblk.ko 0.1.9 (not netblkctl's release: install the module and netblkctl "
			"from one release)\n", "version, another module");
	check(format_version("").find("a release with no version") != std::string::npos,
	      "version, a module without one");
}

// /dev/nvme0n1p1 on eth0:7000 at mtu 1500 with the default sessions: what
// the --exist-ok and save checks start from.
netblk_instance p1_on_eth0()
{
	netblk_instance i;
	i.device = "/dev/nvme0n1p1";
	i.port = 7000;
	i.ifname = "eth0";
	i.mtu = 1500;
	i.sessions = 1024;
	i.per_source = 16;
	return i;
}

// start --exist-ok: what is compared, what is not.
void check_start_differs()
{
	netblk_instance have = p1_on_eth0();
	have.cpu = 1;
	have.poll_us = 0;
	have.auth = NETBLK_AUTH_NONE;
	have.state = NETBLK_STATE_SERVING;
	netblk_start_args want;
	want.device = "/dev/nvme0n1p1";
	want.port = 7000;
	check_eq(start_differs(want, "eth0", have), "", "exist-ok: same, nothing else named");
	want.mtu = 1500;
	want.cpu = 1;
	check_eq(start_differs(want, "eth0", have), "", "exist-ok: mtu and cpu named, same");
	want.mtu = 9000;
	check_eq(start_differs(want, "eth0", have), "mtu 1500, not 9000", "exist-ok: mtu");
	want.mtu.reset();
	check_eq(start_differs(want, "eth1", have), "NIC eth0, not eth1", "exist-ok: nic");
	want.read_only = true;
	check_eq(start_differs(want, "eth0", have), "read-write, not read-only (ro)",
		 "exist-ok: ro");
	want.read_only = false;
	want.device = "/dev/nvme0n1p2";
	check_eq(start_differs(want, "eth0", have), "device /dev/nvme0n1p1, not /dev/nvme0n1p2",
		 "exist-ok: device");
	want.device = "/dev/nvme0n1p1";
	want.key = std::array<uint8_t, NETBLK_KEY_BYTES>{};
	check_eq(start_differs(want, "eth0", have), "auth none, not header",
		 "exist-ok: a key asked for, none held");
	have.auth = NETBLK_AUTH_HEADER;
	check_eq(start_differs(want, "eth0", have), "", "exist-ok: keyed both");
	want.allow.push_back({htonl(0x0a010000), 16, {}});
	check_eq(start_differs(want, "eth0", have), "allow any source, not 10.1.0.0/16",
		 "exist-ok: allow");
	have.allow = want.allow;
	check_eq(start_differs(want, "eth0", have), "", "exist-ok: same allow");
	have.state = NETBLK_STATE_STOPPING;
	check_eq(start_differs(want, "eth0", have), "it is stopping", "exist-ok: stopping");
	check(same_block_device("/dev/null", "/dev/null"), "same path, same device");
	check(!same_block_device("/dev/null", "/dev/zero"), "character devices are no disks");
}

// /etc/netblk/netblk.conf: its syntax, and the lines save writes.
void check_config()
{
	std::vector<config_line> lines;
	check_eq(parse_config("# a comment\n\n  start /dev/vdb 7000 ro   dev=eth0 # served\n"
			      "attach 10.0.0.1 7000\ttimeout=30\r\n",
			      "f.conf", lines), "", "config parses");
	check(lines.size() == 2, "config: two lines");
	if (lines.size() == 2) {
		check(lines[0].lineno == 3 && lines[0].command == "start", "config: start line");
		check(lines[0].args == std::vector<std::string>{"/dev/vdb", "7000", "ro", "dev=eth0"},
		      "config: start words");
		check_eq(lines[0].text, "start /dev/vdb 7000 ro   dev=eth0", "config: text kept");
		check(lines[1].args == std::vector<std::string>{"10.0.0.1", "7000", "timeout=30"},
		      "config: tab and CR");
	}
	lines.clear();
	check_eq(parse_config("start /dev/vdb 7000\nserve /dev/vdc 7001\n", "f.conf", lines),
		 "f.conf:2: unknown command 'serve' (want start or attach)", "config: bad command");
	check_eq(parse_config("attach 10.0.0.1\n", "f.conf", lines),
		 "f.conf:1: attach needs <addr> <port>", "config: short line");

	netblk_instance i = p1_on_eth0();
	check_eq(format_start_line(i, "/dev/disk/by-id/nvme-x-part1", 1500),
		 "start /dev/disk/by-id/nvme-x-part1 7000 dev=eth0", "save: defaults left out");
	i.read_only = true;
	i.vlan = 5;
	i.mtu = 1200;
	i.poll_us = 50;
	i.sessions = 16;
	i.per_source = 4;
	i.allow = {{htonl(0x0a010000), 16, {}}, {htonl(0x0a020304), 32, {}}};
	check_eq(format_start_line(i, i.device, 1500),
		 "start /dev/nvme0n1p1 7000 ro dev=eth0 vlan=5 mtu=1200 poll=50 sessions=16 "
		 "per-source=4 allow=10.1.0.0/16,10.2.3.4", "save: every setting");
	netblk_attached a;
	a.disk = "netblk0";
	a.addr = htonl(0x0a000001);
	a.port = 7000;
	a.queue_depth = 64;
	check_eq(format_attach_line(a), "attach 10.0.0.1 7000 queue-depth=64", "save: attach");
	a.read_only = true;
	a.ifname = "eth1";
	a.timeout_ms = 30000;
	check_eq(format_attach_line(a), "attach 10.0.0.1 7000 ro dev=eth1 queue-depth=64 timeout=30",
		 "save: attach, every setting");
	check(format_config({"start /dev/vdb 7000"}).ends_with("\nstart /dev/vdb 7000\n"),
	      "save: the file ends with the lines");
}

int main()
{
	check_sizes();
	check_config();
	check_start_differs();
	check_version();
	check_attached_text();
	check_strings();
	check_text();
	check_key();
	check_json();
	check_latency();
	check_parse();
	check_events();
	check_watch();
	check_prometheus();
	check_exporter();
	check_genl();
	check_default_route();
	check_xdp_program();
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
