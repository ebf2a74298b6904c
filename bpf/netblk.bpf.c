// SPDX-License-Identifier: GPL-2.0
/*
 * netblk XDP steering: runs on the NIC in native (driver) mode and hands
 * each IPv4 UDP datagram to a netblk instance's own net device (netblk<port>)
 * when its destination address, port and VLAN are the instance's and its
 * source is on the instance's allowlist.  Everything else goes on to the
 * stack untouched -- UDP to the same port for another local address (a
 * container's macvlan address, a routed pod IP), transit traffic, other VLANs.
 *
 * netblkctl adds it to the NIC's libxdp dispatcher and fills the maps
 * (bpf/README.md).  The module checks the rest -- MACs, fragments,
 * lengths, checksums, sources no reply may go to -- so this stays minimal.
 *
 * Multi-buffer aware (xdp.frags): a jumbo frame may come in several buffers
 * (docs/jumbo.md); only the first one's headers are read here, and the
 * whole frame is redirected.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "netblk_maps.h"

/* Not in the uapi headers included above (<linux/in.h>, <net/ip.h>, <linux/if_vlan.h>). */
#define NETBLK_IPPROTO_UDP	17
#define NETBLK_IP_OFFSET	0x1fff	/* fragment offset part of frag_off */
#define NETBLK_VLAN_VID_MASK	0x0fff

struct netblk_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

/* port -> netblk<port>; the kernel drops an entry when its device goes */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, NETBLK_MAX_INSTANCES);
	__type(key, __u32);			/* UDP port, host order */
	__type(value, struct bpf_devmap_val);	/* .ifindex: netblk<port> */
} netblk_ports SEC(".maps");

/* port -> what else a datagram must match, and this CPU's count of refusals */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETBLK_MAX_INSTANCES);
	__type(key, __u32);			/* UDP port, host order */
	__type(value, struct netblk_steer);
} netblk_steer SEC(".maps");

/* (port, VLAN, source prefix) the instances admit */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NETBLK_MAX_INSTANCES * NETBLK_ALLOW_PER_INSTANCE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct netblk_allow_key);
	__type(value, __u8);
} netblk_allow SEC(".maps");

/* Whether the source may reach the instance: always, without an allowlist. */
static __always_inline int netblk_allowed(__u32 port, __u16 vlan, __be32 src,
					  const struct netblk_steer *s)
{
	struct netblk_allow_key key = {
		.prefixlen = NETBLK_ALLOW_KEY_BITS,
		.port = bpf_htons(port),
		.vlan = bpf_htons(vlan),
		.src = src,
	};

	if (!(s->flags & NETBLK_STEER_ALLOWLIST))
		return 1;
	return bpf_map_lookup_elem(&netblk_allow, &key) != NULL;
}

SEC("xdp.frags")
int netblk_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct netblk_steer *steer;
	struct iphdr *iph;
	struct udphdr *udp;
	__u16 vlan = 0;
	__be16 proto;
	__u32 ihl, port;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	proto = eth->h_proto;
	iph = (void *)(eth + 1);
	/* one 802.1Q tag (a NIC that strips tags hides them: README.md) */
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct netblk_vlan_hdr *vh = (void *)(eth + 1);

		if ((void *)(vh + 1) > data_end)
			return XDP_PASS;
		vlan = bpf_ntohs(vh->tci) & NETBLK_VLAN_VID_MASK;
		proto = vh->proto;
		iph = (void *)(vh + 1);
	}
	if (proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
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

	port = bpf_ntohs(udp->dest);
	/* no instance on the port, or not this address or VLAN: the stack's */
	if (!bpf_map_lookup_elem(&netblk_ports, &port))
		return XDP_PASS;
	steer = bpf_map_lookup_elem(&netblk_steer, &port);
	if (!steer || steer->addr != iph->daddr || steer->vlan != vlan)
		return XDP_PASS;
	if (!netblk_allowed(port, vlan, iph->saddr, steer)) {
		steer->not_allowed++;	/* this CPU's copy: no atomic needed */
		return XDP_DROP;
	}
	return bpf_redirect_map(&netblk_ports, port, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
