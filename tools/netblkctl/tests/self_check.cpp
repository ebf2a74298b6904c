// Self-check of netblkctl without the module: the formatting helpers, the
// parsing of a hand-built netblk message, the generic netlink client
// against nlctrl (present on every Linux), the default route lookup, and --
// when this process may load BPF -- the XDP program run on hand-built
// frames.  Run tools/netblkctl/tests/run.sh.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <string>
#include <vector>

#include "format.h"
#include "genl.h"
#include "netblk.h"
#include "netblk.skel.h"
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
	i.uptime_ms = 21800;
	i.stats[NETBLK_S_REQUESTS] = 1246965;
	i.stats[NETBLK_S_READS] = 765567;
	i.stats[NETBLK_S_READ_BYTES] = 747 * MiB;
	i.stats[NETBLK_S_WRITES] = 481394;
	i.stats[NETBLK_S_WRITE_BYTES] = 470 * MiB;
	i.stats[NETBLK_S_FLUSHES] = 3;
	i.stats[NETBLK_S_DISK_BUSY] = 369;
	i.stats[NETBLK_S_WORKER_SLEEPS] = 192176;
	return i;
}

void check_text()
{
	netblk_instance i = example();
	i.device = "/dev/nvme0n1p3";
	check_eq(format_started(i),
		 "netblk: serving /dev/nvme0n1p3 (256 MiB, read-write) on eth0 10.0.2.15:7000"
		 " -- 1024 bytes a datagram, worker on cpu 1", "start line");
	check_eq(format_instance_text(example()),
		 "port 7000: /dev/nvme0n1p2 (256 MiB, rw) on eth0 10.0.2.15, 1024 bytes a"
		 " datagram (mtu 1500), worker on cpu 1, up 21 s\n"
		 "  requests 1246965, bad 0, refused 0 (busy 0), in flight 0 of 256: queued 0,"
		 " at the disk 0, done 0\n"
		 "  reads 765567 (747 MiB), writes 481394 (470 MiB), flushes 3, I/O errors 0\n"
		 "  disk busy 369 times, replies dropped 0, worker slept 192176 times\n",
		 "list text");
	i.read_only = true;
	check(format_started(i).find("(256 MiB, read-only)") != std::string::npos, "ro start");
	check(format_instance_text(i).find("(256 MiB, ro)") != std::string::npos, "ro list");
}

void check_json()
{
	check_eq(format_instances_json({}), "[]\n", "json empty");
	std::string j = format_instances_json({example(), example()});
	check(j.starts_with("[\n  {\"port\": 7000, \"device\": \"/dev/nvme0n1p2\", "
			    "\"read_only\": false, \"ifname\": \"eth0\", \"ifindex\": 2, "
			    "\"handoff_ifindex\": 9, "
			    "\"addr\": \"10.0.2.15\", \"mtu\": 1500, \"cpu\": 1, "
			    "\"poll_us\": 50, \"size_bytes\": 268435456, \"sector_size\": 512, "
			    "\"max_io\": 1024, \"slots\": 256, \"uptime_ms\": 21800, "
			    "\"stats\": {\"requests\": 1246965, \"bad\": 0,"), "json head");
	check(j.find("\"bytes_copied\": 0}},\n  {") != std::string::npos, "json separator");
	check(j.ends_with("\"bytes_copied\": 0}}\n]\n"), "json tail");
}

// A LIST message as the module would build it, with padding before the u64s
// and attributes this netblkctl does not know.
std::vector<char> list_message(bool malformed)
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
	mnl_attr_put_u32(nlh, 200, 42);			// from a newer module
	if (malformed)
		mnl_attr_put_u16(nlh, NETBLK_A_MTU, 1500);	// should be u32
	nlattr *stats = mnl_attr_nest_start(nlh, NETBLK_A_STATS);
	mnl_attr_put(nlh, NETBLK_S_PAD, 0, nullptr);
	mnl_attr_put_u64(nlh, NETBLK_S_REQUESTS, 5);
	mnl_attr_put_u64(nlh, NETBLK_S_BYTES_COPIED, 4096);
	mnl_attr_put_u64(nlh, 300, 1);			// a newer counter
	mnl_attr_nest_end(nlh, stats);
	buf.resize(nlh->nlmsg_len);
	return buf;
}

void check_parse()
{
	std::vector<char> msg = list_message(false);
	netblk_instance i;
	nl_status st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	check(st.ok(), "parse ok");
	check_eq(i.device, "/dev/vdb", "parse device");
	check(i.port == 7001 && i.read_only && i.ifname == "lo", "parse port, ro, ifname");
	check(i.handoff_ifindex == 12, "parse handoff ifindex");
	check_eq(format_ipv4(i.addr), "127.0.0.1", "parse addr");
	check(i.size == GiB + GiB / 2, "parse size");
	check(i.stat(NETBLK_S_REQUESTS) == 5 && i.stat(NETBLK_S_BYTES_COPIED) == 4096,
	      "parse stats");
	check(i.stat(NETBLK_S_BAD) == 0, "missing stat is 0");

	msg = list_message(true);
	st = netblk_parse_instance(reinterpret_cast<nlmsghdr *>(msg.data()), i);
	check(st.err == EBADMSG, "malformed attribute refused");
	check(st.msg.find("attribute 5 ") != std::string::npos, "malformed attribute named");
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

// An Ethernet + IPv4 + UDP frame to `port`, 16 bytes of payload.
struct frame_spec {
	uint16_t port = 7000;
	uint16_t ethertype = 0x0800;
	uint8_t proto = 17;
	uint8_t ihl = 5;
	uint16_t frag_off = 0;	// host order: flags and offset
	size_t cut = 0;		// bytes to drop from the end
};

std::vector<uint8_t> frame(const frame_spec &s)
{
	std::vector<uint8_t> f(14 + s.ihl * 4 + 8 + 16, 0);
	f[12] = s.ethertype >> 8;
	f[13] = s.ethertype & 0xff;
	uint8_t *ip = &f[14];
	ip[0] = 0x40 | s.ihl;
	ip[6] = s.frag_off >> 8;
	ip[7] = s.frag_off & 0xff;
	ip[8] = 64;
	ip[9] = s.proto;
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

// The program through the kernel's verifier, then on frames: served ports
// redirect, everything else passes.
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
	uint32_t key = 7000;
	bpf_devmap_val val{};
	val.ifindex = 1;	// lo: any device will do for a test run
	check(bpf_map_update_elem(bpf_map__fd(skel->maps.netblk_ports), &key, &val, BPF_ANY) == 0,
	      "port map update");

	frame_spec s;
	check(xdp_verdict(prog, s) == XDP_REDIRECT, "served port redirected");
	s.port = 7001;
	check(xdp_verdict(prog, s) == XDP_PASS, "other port passes");
	s = {};
	s.ihl = 7;
	check(xdp_verdict(prog, s) == XDP_REDIRECT, "IP options skipped");
	s = {};
	s.frag_off = 0x2000;	// MF, offset 0: the first fragment has the UDP header
	check(xdp_verdict(prog, s) == XDP_REDIRECT, "first fragment redirected");
	s.frag_off = 0x0010;
	check(xdp_verdict(prog, s) == XDP_PASS, "later fragment passes");
	s = {};
	s.proto = 6;
	check(xdp_verdict(prog, s) == XDP_PASS, "TCP passes");
	s = {};
	s.ethertype = 0x86dd;
	check(xdp_verdict(prog, s) == XDP_PASS, "not IPv4 passes");
	s = {};
	s.ihl = 4;
	check(xdp_verdict(prog, s) == XDP_PASS, "ihl < 5 passes");
	s = {};
	s.cut = 16 + 5;		// 3 bytes of the UDP header
	check(xdp_verdict(prog, s) == XDP_PASS, "truncated UDP header passes");
	s.cut = 16;		// exactly the UDP header
	check(xdp_verdict(prog, s) == XDP_REDIRECT, "bare UDP header redirected");
	netblk_bpf__destroy(skel);
	printf("  XDP program verified and run on 10 frames\n");
}

} // namespace

int main()
{
	check_sizes();
	check_strings();
	check_text();
	check_json();
	check_parse();
	check_genl();
	check_default_route();
	check_xdp_program();
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
