// SPDX-License-Identifier: GPL-2.0
/* watch (watch.cpp): the rates between two synthetic dumps, of instances and
 * of attached devices, the interval's percentiles from the difference of
 * their histograms; the events monitor prints, from hand-built messages
 * (parsed by netblk.cpp). */
#include "helpers.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <memory>
#include <random>
#include <vector>

#include "latency.h"
#include "watch.h"

namespace {

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
	EXPECT_TRUE(st.ok()) << "parse event: " << st.text();
	EXPECT_TRUE(valid_json(format_event_json(ev, 1700000000.25))) << "event JSON";
	return format_event_text(ev);
}

} // namespace

TEST(WatchEvents, TextAndJsonSayWhatHappenedAndWhy)
{
	EXPECT_EQ(event_text(NETBLK_EVENT_STARTED, 0, 0, nullptr),
		  "event: port 7000 started on eth0 10.0.2.15: /dev/nvme0n1p1 (256 MiB, rw)")
		<< "event started";
	EXPECT_EQ(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_ASKED, 0, nullptr),
		  "event: port 7000 stopped (asked)")
		<< "event stopped asked";
	EXPECT_EQ(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_RMMOD, 0, nullptr),
		  "event: port 7000 stopped (module unloaded)")
		<< "event stopped rmmod";
	EXPECT_EQ(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_NIC_GONE, 0, "eth0 went down"),
		  "event: port 7000 stopped (NIC gone: eth0 went down)")
		<< "event stopped nic";
	EXPECT_EQ(event_text(NETBLK_EVENT_STOPPED, NETBLK_REASON_DEVICE_GONE, 0,
		"/dev/nvme0n1p1 was removed"), "event: port 7000 stopped (device gone: /dev/nvme0n1p1 was removed)")
			<< "event stopped device";
	EXPECT_EQ(event_text(NETBLK_EVENT_STOPPED, 9, 0, nullptr),
		  "event: port 7000 stopped (reason 9)")
		<< "event stopped unknown reason";
	EXPECT_EQ(event_text(NETBLK_EVENT_FAILED, 0, EBUSY, "/dev/nvme0n1p1 is in use\nreally"),
		  "event: start of /dev/nvme0n1p1 on port 7000 failed: /dev/nvme0n1p1 is in use?really")
		<< "event failed";
	EXPECT_EQ(event_text(NETBLK_EVENT_FAILED, 0, EBUSY, nullptr),
		  std::string("event: start of /dev/nvme0n1p1 on port 7000 failed: ") + strerror(EBUSY))
		<< "event failed without a message";
	EXPECT_EQ(event_text(NETBLK_EVENT_IO_ERROR, 0, EIO,
		"/dev/nvme0n1p1: I/O error at offset 4096"), "event: port 7000 I/O error: /dev/nvme0n1p1: I/O error at offset 4096")
			<< "event io error";
	EXPECT_EQ(event_text(77, 0, 0, nullptr), "event: port 7000: event 77") << "unknown event";

	std::vector<char> m = event_message(NETBLK_EVENT_STOPPED, NETBLK_REASON_NIC_GONE, 0,
					    "eth0 went down");
	netblk_event_info ev;
	EXPECT_TRUE(netblk_parse_event(reinterpret_cast<nlmsghdr *>(m.data()), ev).ok())
		<< "parse event";
	EXPECT_EQ(format_event_json(ev, 1700000000.25),
		  "{\"type\": \"event\", \"time\": 1700000000.25, \"event\": \"stopped\", "
		  "\"event_code\": 2, \"port\": 7000, \"device\": \"/dev/nvme0n1p1\", "
		  "\"ifname\": \"eth0\", \"reason\": \"nic_gone\", \"reason_code\": 3, "
		  "\"errno\": null, \"message\": \"eth0 went down\"}") << "event JSON";
}

// watch: the rates between two synthetic dumps, and the interval's p99
// from the difference of their histograms.
TEST(WatchRates, RatesAndTheIntervalsPercentilesFromTwoDumps)
{
	auto h = std::make_unique<nb::histogram>(), delta = std::make_unique<nb::histogram>();
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
	EXPECT_EQ(rates.size(), 2) << "rates of both instances";
	const instance_rates &r = rates[0];
	EXPECT_TRUE(!r.fresh && r.seconds == 2.0 && r.requests == 10000 && r.reads == 6000 &&
		r.read_bytes == 6000.0 * 4096 && r.writes == 4000 && r.write_bytes == 4000.0 * 1024 &&
		r.refused == 2.5 && r.inflight == 3) << "rates";
	EXPECT_TRUE(r.latency_known && latency_samples(r.latency) == 20000) << "interval samples";

	// The interval's max is the high end of its highest bucket, capped at
	// the cumulative max: the old 50 ms outlier is not in the interval.
	std::vector<uint64_t> dense(nb::histogram::bucket_count);
	uint64_t top = 0;
	for (uint32_t i = 0; i < dense.size(); i++)
		if ((dense[i] = delta->bucket(i)))
			top = nb::histogram::bucket_high(i);
	EXPECT_TRUE(r.latency.max_ns == std::min(top, h->max()) && r.latency.max_ns < 50'000'000)
		<< "interval max bound";
	// interval percentiles are the core's on the difference
	for (uint32_t ppm : {500000u, 900000u, 990000u, 999000u, 1000000u})
		EXPECT_EQ(rates_percentile(r, ppm),
			  nb::histogram_value_at_ppm(dense.data(), dense.size(), r.latency.max_ns, ppm))
			<< "ppm " << ppm;
	EXPECT_EQ(rates_percentile(r, 990000), delta->value_at_ppm(990000))
		<< "interval p99 is the interval's own";
	std::string p99 = format_us(delta->value_at_ppm(990000));
	EXPECT_EQ(format_rates_text(r),
		  "port 7000: requests 10000/s, reads 6000/s (23.4 MiB/s), writes 4000/s (3.9 MiB/s),"
		  " refused 3/s, p99 " + p99 + " us") << "rates text";
	std::string j = format_rates_json(r, 1700000000.5);
	EXPECT_TRUE(valid_json(j)) << "rates JSON parses";
	EXPECT_TRUE(starts_with(j, "{\"type\": \"rates\", \"time\": 1700000000.5, \"port\": 7000, "
		"\"device\": \"/dev/nvme0n1p2\", \"ifname\": \"eth0\", "
		"\"interval_s\": 2, \"fresh\": false, \"requests_per_s\": 10000, "
		"\"reads_per_s\": 6000, \"read_bytes_per_s\": 24576000, "
		"\"writes_per_s\": 4000, \"write_bytes_per_s\": 4096000, "
		"\"refused_per_s\": 2.5, \"inflight\": 3, \"samples\": 20000, "
		"\"p50_us\": ")) << "rates JSON fields";
	EXPECT_TRUE(contains(j,
		  "\"p99_us\": " + format_us_exact(delta->value_at_ppm(990000)) + "}"))
		<< "rates JSON p99";

	const instance_rates &n = rates[1];
	EXPECT_TRUE(n.fresh && n.seconds == 0.5 && n.requests == 200)
		<< "a new instance: since its start";
	EXPECT_EQ(format_rates_text(n), "port 7001: requests 200/s, reads 0/s (0.0 MiB/s), "
		"writes 0/s (0.0 MiB/s), refused 0/s, p99 n/a") << "rates text without a histogram";
	EXPECT_TRUE(valid_json(format_rates_json(n, 1))) << "rates JSON without a histogram";

	// Restarted on the same port between the dumps: counted from its start.
	netblk_instance c = example();
	c.uptime_ms = 1500;
	c.latency = sparse_of(*small_histogram());
	instance_rates rr = compute_rates(&b, c, 2.0);
	EXPECT_TRUE(rr.fresh && rr.seconds == 1.5 && latency_samples(rr.latency) == 100)
		<< "a restarted instance: since its start";
	// No traffic in the interval.
	rr = compute_rates(&b, b, 1.0);
	EXPECT_TRUE(!rr.fresh && rr.requests == 0 && latency_samples(rr.latency) == 0 &&
		format_rates_text(rr).ends_with("refused 0/s, p99 -")) << "an idle interval";
	EXPECT_TRUE(valid_json(format_rates_json(rr, 1))) << "idle rates JSON";
}

TEST(WatchRates, AttachedDevicesRatesOverAnInterval)
{
	// attached_example() as the list's checks leave it: read-only, a
	// timeout, keyed, with samples, the server silent, another device.
	netblk_attached a = attached_example();
	a.read_only = true;
	a.timeout_ms = 5000;
	a.auth = NETBLK_AUTH_HEADER;
	a.latency = sparse_of(*small_histogram());
	a.stats[NETBLK_HS_UNREACHABLE] = 1;
	a.stats[NETBLK_HS_OUTAGES] = 1;
	a.stats[NETBLK_HS_FAILED_FAST] = 7;
	a.stats[NETBLK_HS_CHANGED] = NETBLK_HOST_CHANGE_OTHER_DEVICE;

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
	ASSERT_EQ(rates.size(), 2u);
	EXPECT_TRUE(!rates[0].fresh && rates[0].requests == 800 &&
		rates[0].errors == 1 && rates[0].write_bytes == 1 << 20 &&
		rates[0].read_bytes == 3 << 20 && rates[0].resends == 2) << "attached rates";
	EXPECT_TRUE(rates[1].fresh && rates[1].seconds == 0.5)
		<< "an attached device new in the interval";
	EXPECT_EQ(format_attached_rates_text(rates[0]),
		  "/dev/netblk0: requests 800/s, errors 1/s, writes 1.0 MiB/s, reads 3.0 MiB/s, "
		  "resends 2/s, outstanding 4, p99 - UNREACHABLE") << "attached rates text";
	std::string j = format_attached_rates_json(rates[0], 1700000000.5);
	EXPECT_TRUE(valid_json(j)) << "attached rates JSON parses";
	EXPECT_TRUE(starts_with(j, "{\"type\": \"attached_rates\", \"time\": 1700000000.5, "
		"\"disk\": \"netblk0\", \"server\": \"10.9.0.1:7000\", \"interval_s\": 2, "
		"\"fresh\": false, \"requests_per_s\": 800, \"errors_per_s\": 1, "
		"\"write_bytes_per_s\": 1048576, \"read_bytes_per_s\": 3145728, "
		"\"resends_per_s\": 2, \"outstanding\": 4, \"unreachable\": true, "
		"\"changed\": 0, \"samples\": 0, \"p50_us\": null")) << "attached rates JSON";
}
