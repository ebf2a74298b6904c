// SPDX-License-Identifier: GPL-2.0
/* netblkctl's text and JSON (format.cpp): sizes, strings, the start and
 * list lines of an instance and of an attached device, their JSON, the
 * version.  Every JSON output also goes through the JSON checker. */
#include "helpers.h"

#include <cmath>
#include <cstring>

#include "netblk_version.h"

TEST(FormatSize, PicksTheLargestUnitAndOneDecimal)
{
	EXPECT_EQ(format_size(0), "0 B") << "0";
	EXPECT_EQ(format_size(1023), "1023 B") << "1023";
	EXPECT_EQ(format_size(KiB), "1 KiB") << "1 KiB";
	EXPECT_EQ(format_size(512 * KiB), "512 KiB") << "512 KiB";
	EXPECT_EQ(format_size(1536), "1.5 KiB") << "1.5 KiB";
	EXPECT_EQ(format_size(256 * MiB), "256 MiB") << "256 MiB";
	EXPECT_EQ(format_size(GiB + GiB / 2), "1.5 GiB") << "1.5 GiB";
	EXPECT_EQ(format_size(GiB + GiB / 100), "1 GiB") << "1.01 GiB rounds to 1";
	EXPECT_EQ(format_size(GiB + GiB / 100 * 6), "1.1 GiB") << "1.06 GiB rounds up";
	EXPECT_EQ(format_size(MiB - 1), "1 MiB") << "1023.999 KiB rounds to 1 MiB";
	EXPECT_EQ(format_size(3 * TiB), "3 TiB") << "3 TiB";
	EXPECT_EQ(format_size(2048 * TiB), "2048 TiB") << "TiB is the largest unit";
	EXPECT_EQ(format_size(UINT64_MAX), "16777216 TiB") << "u64 max";
}

// The text without its "  more: " line, which lists whatever counters of
// netblk_counters.h the curated lines do not show (CountersNotCuratedAreListed).
std::string curated(std::string t)
{
	size_t a = t.find("\n  more: ");
	if (a != std::string::npos)
		t.erase(a + 1, t.find('\n', a + 1) - a);
	return t;
}

TEST(FormatText, CountersNotCuratedAreListed)
{
	netblk_instance i;
	netblk_attached a;
	for (const auto &c : stat_infos)
		i.stats[c.attr] = 7000 + c.attr;
	for (const auto &c : host_stat_infos)
		a.stats[c.attr] = 7000 + c.attr;
	// every counter's value is somewhere in the text, curated or in "more:"
	std::string t = format_instance_text(i);
	for (const auto &c : stat_infos) {
		if (c.kind == counter_kind::count) {
			EXPECT_TRUE(contains(t, std::to_string(7000 + c.attr))) << c.name;
		}
	}
	EXPECT_TRUE(contains(t, "  more: fua writes 7013")) << t;
	t = format_attached_text(a);
	for (const auto &c : host_stat_infos) {
		if ((c.kind == counter_kind::count || c.kind == counter_kind::gauge) &&
		    c.attr != NETBLK_HS_CHANGED && c.attr != NETBLK_HS_UNREACHABLE &&
		    c.attr != NETBLK_HS_OUTAGES) {	// said in words, or only with timeout=
			EXPECT_TRUE(contains(t, std::to_string(7000 + c.attr))) << c.name;
		}
	}
}

TEST(FormatStrings, WriteAddressesAndEscapeJsonStrings)
{
	uint8_t a[4] = {10, 0, 2, 15};
	uint32_t addr;
	memcpy(&addr, a, 4);
	EXPECT_EQ(format_ipv4(addr), "10.0.2.15") << "ipv4";
	EXPECT_EQ(json_string("/dev/sda"), "\"/dev/sda\"") << "json plain";
	EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"") << "json escapes";
	EXPECT_EQ(json_string("d\xc3\xa9v"), "\"d\xc3\xa9v\"") << "json utf-8 kept";
	EXPECT_EQ(json_string("x\xff" "y\xc3"), "\"x\\ufffdy\\ufffd\"") << "json bad utf-8";
	EXPECT_STREQ(auth_name(NETBLK_AUTH_FULL), "full") << "auth name";
}

TEST(FormatInstance, StartAndListLinesSayWhatIsServedAndHow)
{
	netblk_instance i = example();
	i.device = "/dev/nvme0n1p3";
	EXPECT_EQ(format_started(i),
		  "netblk: serving /dev/nvme0n1p3 (256 MiB, read-write) on eth0 10.0.2.15:7000"
		  " -- 1024 bytes a datagram, worker on cpu 1") << "start line";
	i.state = NETBLK_STATE_WAITING;
	i.waiting_for = "eth0 is down";
	EXPECT_TRUE(ends_with(format_started(i),
		  "worker on cpu 1; waiting: eth0 is down (it serves once the NIC is up)"))
		<< "start line of an instance whose NIC is down";
	netblk_instance r = example();
	r.stats[NETBLK_S_REFUSED] = 5;
	r.stats[NETBLK_S_BUSY] = r.stats[NETBLK_S_REFUSED_EAGAIN] = 1;
	r.stats[NETBLK_S_REFUSED_ERANGE] = 4;
	EXPECT_TRUE(contains(format_instance_text(r), ", refused 5 (busy 1, ERANGE 4), in flight"))
		<< "refusals by status in the list";
	EXPECT_EQ(curated(format_instance_text(example())),
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
		  " READs gathered 0\n") << "list text";
	netblk_instance l = example();
	l.latency = sparse_of(*small_histogram());
	l.stats[NETBLK_S_BYTES_ZEROCOPY] = 747 * MiB;
	l.stats[NETBLK_S_FRAMES_RX] = 1246965;
	l.stats[NETBLK_S_FRAMES_TX] = 1246965;
	l.stats[NETBLK_S_DISK_BATCHES] = 40000;
	l.stats[NETBLK_S_TX_BATCHES] = 50000;
	l.stats[NETBLK_S_ANSWERS_FOLDED] = 480000;
	l.stats[NETBLK_S_READS_GATHERED] = 9000;
	std::string t = curated(format_instance_text(l));
	EXPECT_TRUE(ends_with(t,
		  "  replies dropped 0 (over the mtu 0), waited for room in the NIC 0 times,"
		  " NIC errors 0\n"
		  "  service time us (arrival to reply): p50 75.3, p99 225076.2, p99.9"
		  " 225757.1, max 225757.1\n"
		  "  data in place 747 MiB, copied 0 B, frames in 1246965, out 1246965\n"
		  "  batches: 40000 to the disk, 50000 transmits to the NIC; WRITE answers"
		  " folded 480000, READs gathered 9000\n"))
			<< "list text with latency and zero-copy lines";
	l.latency = {};
	l.latency.present = true;
	l.latency.linear_limit = 128;
	l.latency.sub_buckets = 64;
	EXPECT_TRUE(contains(format_instance_text(l),
		  "\n  service time us (arrival to reply): no samples yet\n  data in place"))
		<< "list text without samples";
	i.read_only = true;
	EXPECT_TRUE(contains(format_started(i), "(256 MiB, read-only)")) << "ro start";
	EXPECT_TRUE(contains(format_instance_text(i), "(256 MiB, ro)")) << "ro list";
}

TEST(FormatInstance, ListShowsDropsAllowlistVlanWaitingAndStopping)
{
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
	std::string t = format_instance_text(h);
	EXPECT_TRUE(contains(t, " on eth0 vlan 5 10.0.2.15, ")) << "list vlan";
	EXPECT_TRUE(contains(t,
		  "\n  virtio_net, sources: 10.1.0.0/16, 10.2.3.4 (12 others dropped)\n"))
		<< "list allowlist";
	EXPECT_TRUE(contains(t, ", bad 5 (bad source 3, checksum 2), refused"))
		<< "list drop reasons";
	EXPECT_FALSE(contains(t, "STOPPING")) << "serving: no stopping line";
	h.state = NETBLK_STATE_STOPPING;
	h.stopping_ms = 7300;
	h.stats[NETBLK_S_INFLIGHT_DISK] = 3;
	netblk_instance w = example();
	w.state = NETBLK_STATE_WAITING;
	w.waiting_ms = 4200;
	w.waiting_for = "eth0 is down";
	EXPECT_TRUE(contains(format_instance_text(w),
		  "\n  WAITING for 4 s: eth0 is down; holds its disk and "
		  "port and serves again when the NIC is back\n")) << "list waiting line";
	EXPECT_TRUE(contains(format_instances_json({w}),
		  "\"state\": \"waiting\", \"stopping_ms\": 0, "
		  "\"waiting_ms\": 4200, \"waiting_for\": "
		  "\"eth0 is down\"")) << "json waiting";
	EXPECT_TRUE(contains(format_instance_text(h),
		  "\n  STOPPING for 7 s: no longer serves, waits for 3"
		  " requests at the disk\n")) << "list stopping";
	std::string hj = format_instances_json({h});
	EXPECT_TRUE(valid_json(hj)) << "json with allowlist parses";
	EXPECT_TRUE(hj.find("\"state\": \"stopping\", \"stopping_ms\": 7300") != std::string::npos &&
		hj.find("\"vlan\": 5") != std::string::npos &&
		hj.find("\"allow\": [\"10.1.0.0/16\", \"10.2.3.4\"]") != std::string::npos &&
		hj.find("\"dropped_source\": 3") != std::string::npos &&
		hj.find("\"not_allowed\": 12}") != std::string::npos)
			<< "json allowlist, vlan, state, drops";
}

TEST(FormatInstanceJson, HoldsEveryFieldAndParses)
{
	EXPECT_EQ(format_instances_json({}), "[]\n") << "json empty";
	std::string j = format_instances_json({example(), example()});
	EXPECT_TRUE(starts_with(j, "[\n  {\"port\": 7000, \"device\": \"/dev/nvme0n1p2\", "
		"\"disk_name\": \"nvme0n1p2\", \"read_only\": false, \"state\": \"serving\", \"stopping_ms\": 0, "
		"\"waiting_ms\": 0, \"waiting_for\": \"\", \"nic_loss\": \"wait\", "
		"\"ifname\": \"eth0\", \"ifindex\": 2, \"driver\": \"\", \"xdp_dropped\": 0, \"vlan\": 0, "
		"\"handoff_ifindex\": 9, "
		"\"addr\": \"10.0.2.15\", \"allow\": [], \"mtu\": 1500, \"cpu\": 1, "
		"\"poll_us\": 50, \"size_bytes\": 268435456, \"sector_size\": 512, "
		"\"max_io\": 1024, \"slots\": 256, \"sessions\": 1024, \"per_source\": 16, \"disk_tries\": 0, \"queues\": 0, "
		"\"auth\": \"header\", \"uptime_ms\": 21800, "
		"\"stats\": {\"requests\": 1246965, \"bad\": 0,")) << "json head";
	EXPECT_TRUE(contains(j, "\"refused_eprotonosupport\": 0, \"refused_estale\": 0, "
		"\"refused_eoverflow\": 0, \"refused_eusers\": 0, \"refused_ealready\": 0, "
		"\"refused_eexist\": 0, "
		"\"not_allowed\": null}, \"latency\": null, \"queue_list\": []},\n  {")) << "json separator";
	EXPECT_TRUE(ends_with(j, "\"refused_eprotonosupport\": 0, \"refused_estale\": 0, "
		"\"refused_eoverflow\": 0, \"refused_eusers\": 0, \"refused_ealready\": 0, "
		"\"refused_eexist\": 0, "
		"\"not_allowed\": null}, \"latency\": null, \"queue_list\": []}\n]\n")) << "json tail";
	EXPECT_TRUE(contains(j, "\"duplicates\": 17, ")) << "json duplicates";
	EXPECT_TRUE(valid_json(j)) << "json list parses";
}

/* An instance of two queues: each queue's CPU and own counters, in JSON and text. */
TEST(FormatInstance, SaysEachQueuesShare)
{
	netblk_instance q = example();
	netblk_queue_info a, b;

	a.cpu = 1;
	a.stats[NETBLK_S_REQUESTS] = 5;
	a.stats[NETBLK_S_STEERED] = 2;
	a.stats[NETBLK_S_SESSIONS_OPEN] = 1;
	b.cpu = 0;
	b.stats[NETBLK_S_REQUESTS] = 7;
	b.stats[NETBLK_S_FRAMES_TX] = 9;
	b.stats[NETBLK_S_SESSIONS_OPEN] = 1;
	q.queue_list = {a, b};
	std::string j = format_instances_json({q});
	EXPECT_TRUE(valid_json(j)) << j;
	EXPECT_TRUE(contains(j, "\"queue_list\": [{\"cpu\": 1, \"requests\": 5, \"inflight_disk\": 0, "
			     "\"frames_rx\": 0, \"steered\": 2, \"frames_tx\": 0, \"sessions_open\": 1}, "
			     "{\"cpu\": 0, \"requests\": 7, \"inflight_disk\": 0, \"frames_rx\": 0, "
			     "\"steered\": 0, \"frames_tx\": 9, \"sessions_open\": 1}]}")) << j;
	EXPECT_TRUE(contains(format_instance_text(q),
			     "\n  queues: 0 on cpu 1: requests 5, sessions 1, steered 2; "
			     "1 on cpu 0: requests 7, sessions 1, steered 0\n"))
		<< format_instance_text(q);
	q.queue_list = {a};
	EXPECT_FALSE(contains(format_instance_text(q), "queues:")) << "one queue: no line";
}

/* An attached device of several hardware queues: each one's share, in JSON and a text line. */
TEST(FormatAttached, SaysEachHardwareQueuesShare)
{
	netblk_attached a = attached_example();
	std::array<uint64_t, NETBLK_HS_MAX + 1> q0{}, q1{};

	EXPECT_TRUE(contains(format_attached_json({a}), "\"queue_list\": []}")) << "one queue: []";
	q0[NETBLK_HS_REQUESTS] = 3;
	q0[NETBLK_HS_SENDS] = 12;
	q0[NETBLK_HS_SESSIONS_OPENED] = 1;
	q1[NETBLK_HS_REQUESTS] = 4;
	q1[NETBLK_HS_SENDS] = 16;
	q1[NETBLK_HS_TIMEOUTS] = 2;
	q1[NETBLK_HS_OUTSTANDING] = 5;
	a.queue_list = {q0, q1};
	std::string j = format_attached_json({a});
	EXPECT_TRUE(valid_json(j)) << j;
	EXPECT_TRUE(contains(j, "\"queue_list\": [{\"requests\": 3, "));
	EXPECT_TRUE(contains(j, "\"sends\": 16, ") && contains(j, "\"timeouts\": 2")) << j;
	EXPECT_TRUE(contains(j, "\"outstanding\": 5")) << j;
	EXPECT_FALSE(contains(j.substr(j.find("queue_list")), "\"errors\"")) << "a few a queue";
	EXPECT_TRUE(contains(format_attached_text(a),
			     "\n  queues: 0: requests 3, sends 12, timeouts 0; "
			     "1: requests 4, sends 16, timeouts 2\n"))
		<< format_attached_text(a);
	a.queue_list = {q0};
	EXPECT_FALSE(contains(format_attached_text(a), "queues:")) << "one queue: no line";
}

TEST(FormatInstanceJson, LatencyIsExactWhereKnownAndNullWithoutSamples)
{
	netblk_instance l = example();
	l.device = "/dev/\"odd\"\n\xff";
	std::string j;
	l.latency = sparse_of(*small_histogram());
	j = format_instances_json({l, example()});
	EXPECT_TRUE(valid_json(j)) << "json list with latency parses";
	EXPECT_TRUE(contains(j,
		  "\"latency\": {\"count\": 100, \"max_ns\": 225757123, \"sum_ns\": null, "
		  "\"p50_us\": 75.263, "
		  "\"p99_us\": 225076.193, \"p999_us\": 225757.123, \"linear_limit\": 128, "
		  "\"sub_buckets\": 64, \"buckets\": [[713, 98], [1451, 2]], \"ops\": {}}, \"queue_list\": []}"))
			<< "json latency";
	l.latency.sum_ns = 458934022;
	l.latency.ops = {{2, 98, 7419776}, {4, 2, 451514246}};
	j = format_instances_json({l});
	EXPECT_TRUE(j.find("\"sum_ns\": 458934022, ") != std::string::npos &&
		j.find("\"ops\": {\"read\": {\"count\": 98, \"sum_ns\": 7419776}, "
		"\"flush\": {\"count\": 2, \"sum_ns\": 451514246}}}") != std::string::npos)
			<< "json exact sum and ops";
	l.latency = {};
	l.latency.present = true;
	j = format_instances_json({l});
	EXPECT_TRUE(valid_json(j)) << "json empty latency parses";
	EXPECT_TRUE(contains(j, "\"p50_us\": null, \"p99_us\": null, \"p999_us\": null"))
		<< "json latency without samples";
}

TEST(FormatJson, CheckerRefusesWhatIsNotJsonAndDoublesAreJson)
{
	EXPECT_TRUE(valid_json("{\"a\": [1, -2.5e+3, true, null, \"\\u00e9\"]}") && !valid_json("{\"a\": 1,}") &&
		!valid_json("[1] 2") && !valid_json("01") && !valid_json("\"\n\""))
			<< "the JSON checker itself";
	EXPECT_EQ(json_double(12.5), "12.5") << "json double";
	EXPECT_EQ(json_double(1e21), "1e+21") << "json double exponent";
	EXPECT_EQ(json_double(NAN), "null") << "json NaN";
}

/* The block-device client's lines: attach's, and list's for an attached device. */
TEST(FormatAttached, AttachAndListLinesAndJson)
{
	netblk_attached a = attached_example();
	EXPECT_EQ(format_attached(a),
		  "netblk: /dev/netblk0 is 10.9.0.1:7000 (256 MiB, read-write), 1024 bytes a datagram")
		<< "attach line";
	EXPECT_EQ(curated(format_attached_text(a)),
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
		  "  service time us (queued to answered): n/a\n") << "attached list text";
	a.read_only = true;
	a.timeout_ms = 5000;
	a.auth = NETBLK_AUTH_HEADER;
	std::string t = format_attached_text(a);
	EXPECT_TRUE(contains(t,
		  "(256 MiB, ro), 1024 bytes a datagram, queue depth 64, I/O fails after 5000 ms,"
		  " key header,")) << "attached ro, timeout, key";
	EXPECT_TRUE(contains(format_attached(a), "(256 MiB, read-only)")) << "attach ro line";
	a.latency = sparse_of(*small_histogram());
	EXPECT_TRUE(contains(format_attached_text(a),
		  "\n  service time us (queued to answered): p50 "))
		<< "attached service time";
	std::string j = format_attached_json({a, a});
	EXPECT_TRUE(valid_json(j)) << "attached json parses";
	EXPECT_TRUE(starts_with(j,
		  "[\n  {\"disk\": \"netblk0\", \"addr\": \"10.9.0.1\", \"port\": 7000, "
		  "\"ifname\": \"\", \"read_only\": true, ")) << "attached json fields";
	EXPECT_TRUE(contains(j, "\"requests\": 1025, \"errors\": 0, \"sends\": 4190, "))
		<< "attached json stats";
	EXPECT_TRUE(contains(j, "\"latency\": {\"count\": 100, ")) << "attached json latency";
	EXPECT_EQ(format_attached_json({}), "[]\n") << "no attached devices: []";

	/* the server silent for timeout=, then another device behind a restart */
	a.stats[NETBLK_HS_UNREACHABLE] = 1;
	a.stats[NETBLK_HS_OUTAGES] = 1;
	a.stats[NETBLK_HS_FAILED_FAST] = 7;
	t = format_attached_text(a);
	EXPECT_TRUE(contains(t,
		  "\n  UNREACHABLE: the server has not answered for the timeout; I/O fails at "
		  "once until it does\n")) << "attached unreachable";
	EXPECT_TRUE(contains(t, "\n  resized 0 times, outages 1, requests failed at once 7\n"))
		<< "attached outages";
	a.stats[NETBLK_HS_CHANGED] = NETBLK_HOST_CHANGE_OTHER_DEVICE;
	EXPECT_TRUE(contains(format_attached_text(a),
		  "\n  STOPPED: the server serves another device after a "
		  "restart; I/O fails, nothing is written to it: detach it\n")) << "attached stopped";
	EXPECT_TRUE(contains(format_attached_json({a}),
		  "\"unreachable\": 1, \"outages\": 1, \"failed_fast\": 7, "
		  "\"changed\": 1, \"resizes\": 0, \"spurious\": 0, "
		  "\"tx_batched\": 3900, \"folded\": 0, "
		  "\"fast_spurious\": 10, \"reordering\": 140, "
		  "\"header_pages\": 0}")) << "attached json: unreachable, changed";

}

TEST(FormatVersion, ComparesTheModulesReleaseWithNetblkctls)
{
	const std::string tool = "netblkctl " NETBLK_VERSION "\n";
	EXPECT_EQ(format_version(std::nullopt), tool + "netblk.ko not loaded (modprobe netblk)\n")
		<< "version, no module";
	EXPECT_EQ(format_version(NETBLK_VERSION "\n"), tool + "netblk.ko " NETBLK_VERSION "\n")
		<< "version, same module";
	EXPECT_EQ(format_version("0.1.9\n"),
		  tool + "netblk.ko 0.1.9 (not netblkctl's release: install the module and netblkctl "
		  "from one release)\n") << "version, another module";
	EXPECT_TRUE(contains(format_version(""), "a release with no version"))
		<< "version, a module without one";
}
