// SPDX-License-Identifier: GPL-2.0
/*
 * netblk XDP steering: runs on the NIC in native (driver) mode and hands
 * each IPv4 UDP datagram whose destination port is served by a netblk
 * instance to that instance's own net device (netblk<port>) through the
 * netblk_ports devmap.  Everything else goes on to the stack.
 *
 * netblkctl loads and attaches it (a BPF link the module holds) and fills
 * netblk_ports: key the UDP port in host order, value the instance's
 * ifindex.  The module checks addresses, fragments, lengths and the rest,
 * so this stays minimal.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Not in the uapi headers included above (<linux/in.h>, <net/ip.h>). */
#define NETBLK_IPPROTO_UDP	17
#define NETBLK_IP_OFFSET	0x1fff	/* fragment offset part of frag_off */

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);			/* UDP port, host order */
	__type(value, struct bpf_devmap_val);	/* .ifindex: netblk<port> */
} netblk_ports SEC(".maps");

SEC("xdp")
int netblk_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct udphdr *udp;
	__u32 ihl;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;

	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->protocol != NETBLK_IPPROTO_UDP)
		return XDP_PASS;
	/* A non-first fragment carries no UDP header. */
	if (iph->frag_off & bpf_htons(NETBLK_IP_OFFSET))
		return XDP_PASS;
	ihl = iph->ihl;
	if (ihl < 5)
		return XDP_PASS;

	udp = (void *)iph + ihl * 4;
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;

	/* A port with no entry falls through to the stack. */
	return bpf_redirect_map(&netblk_ports, bpf_ntohs(udp->dest), XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
