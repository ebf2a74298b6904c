// SPDX-License-Identifier: GPL-2.0
/* xdp.cpp's default route, and the XDP program (bpf/netblk.bpf.c, by the
 * skeleton netblkctl embeds) through the kernel's verifier, then run
 * (BPF_PROG_TEST_RUN) on hand-built frames -- when this process may load BPF. */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <linux/if_link.h>
#include <string>
#include <utility>
#include <vector>

#include "netblk_maps.h"
#include "netblk.skel.h"
#include "xdp.h"

namespace {

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

} // namespace

TEST(DefaultRoute, IsTheLowestMetricRouteToZeroSlashZero)
{
	const char *head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask"
			   "\t\tMTU\tWindow\tIRTT\n";
	auto route = [&](const std::string &lines) {
		return default_route_ifname(head + lines).value_or("(none)");
	};
	EXPECT_EQ(route(""), "(none)") << "no routes";
	EXPECT_EQ(route("eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"), "(none)")
		<< "no default route";
	EXPECT_EQ(route("eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
		"eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"), "eth0")
			<< "default route";
	EXPECT_EQ(route("eth1\t00000000\t0201A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
		"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
		"eth2\t00000000\t0301A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"), "wlan0")
			<< "lowest metric, first of equals";
	EXPECT_EQ(route("*\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n"), "(none)")
		<< "unreachable default";
	EXPECT_EQ(route("eth0\t00000000\t0202000A\t0003\t0\t0\t0\t000000FF\t0\t0\t0\n"), "(none)")
		<< "0.0.0.0/8 is not a default route";
	auto here = default_route_ifname();
	printf("  this host's default route: %s\n", here ? here->c_str() : "(none)");
}

// The program through the kernel's verifier, then on frames: an instance's
// address, port and VLAN redirect, from an allowed source; everything else
// passes, but for the sources an allowlist keeps out, which it drops.
TEST(XdpProgram, RedirectsItsInstancesFramesPassesOthersDropsNotAllowed)
{
	xdp_quiet_libbpf();
	netblk_bpf *skel = netblk_bpf__open_and_load();
	if (!skel) {
		int err = errno;
		if (err == EPERM || err == EACCES) {
			GTEST_SKIP() << "XDP program not loaded (" << strerror(err) << ")";
		}
		FAIL() << "XDP program load: " << strerror(err);
	}
	int prog = bpf_program__fd(skel->progs.netblk_xdp);
	int steer_fd = bpf_map__fd(skel->maps.netblk_steer);
	int ports_fd = bpf_map__fd(skel->maps.netblk_ports);
	int verdicts = 0;
	auto expect = [&](const frame_spec &f, int want, const char *what) {
		EXPECT_EQ(xdp_verdict(prog, f), want) << what;
		verdicts++;
	};
	bpf_devmap_val val{};
	val.ifindex = 1;	// lo: any device will do for a test run
	for (uint32_t key : {7000u, 7001u, 7002u})
		EXPECT_EQ(bpf_map_update_elem(ports_fd, &key, &val, BPF_ANY), 0)
			<< "port map update";
	EXPECT_EQ(steer(steer_fd, 7000, 0, 0), 0) << "steer map update";

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
	EXPECT_EQ(steer(steer_fd, 7002, 5, 0), 0) << "steer map update, vlan";
	s.port = 7002;
	expect(s, XDP_REDIRECT, "the instance's VLAN redirected");
	s.vlan = 6;
	expect(s, XDP_PASS, "another VLAN passes");
	s.vlan = 0;
	expect(s, XDP_PASS, "untagged for a tagged instance passes");

	/* the allowlist: 10.0.2.0/24 and 192.168.7.7 on port 7000 */
	EXPECT_EQ(steer(steer_fd, 7000, 0, NETBLK_STEER_ALLOWLIST), 0)
		<< "steer map update, allowlist";
	int allow_fd = bpf_map__fd(skel->maps.netblk_allow);
	for (auto [addr, len] : {std::pair<uint32_t, uint32_t>{0x0a000200, 24}, {0xc0a80707, 32}}) {
		netblk_allow_key k{};
		k.prefixlen = 32 + len;
		k.port = htons(7000);
		k.src = htonl(addr);
		uint8_t one = 1;
		EXPECT_EQ(bpf_map_update_elem(allow_fd, &k, &one, BPF_ANY), 0)
			<< "allow map update";
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
	EXPECT_EQ(not_allowed(steer_fd, 7000), 2) << "the drops counted, per instance";
	netblk_bpf__destroy(skel);
	printf("  XDP program verified and run on %d frames\n", verdicts);
}
