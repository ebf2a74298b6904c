/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * The XDP program's maps, as the program (netblk.bpf.c) and netblkctl
 * (tools/netblkctl/xdp.cpp) both see them.  bpf/README.md says who writes
 * what.
 */
#ifndef NETBLK_MAPS_H
#define NETBLK_MAPS_H

#include <linux/types.h>

#define NETBLK_MAX_INSTANCES		1024	/* ports a NIC's program steers */
#define NETBLK_ALLOW_PER_INSTANCE	64	/* NETBLK_ALLOW_MAX, netblk_genl.h */

#define NETBLK_STEER_ALLOWLIST		1u	/* sources must be in netblk_allow */

/* netblk_steer's value: one copy a CPU, the same but for the counter. */
struct netblk_steer {
	__be32 addr;		/* the instance's IPv4 address */
	__u16 vlan;		/* its 802.1Q VLAN, 0: untagged */
	__u16 flags;		/* NETBLK_STEER_* */
	__u64 not_allowed;	/* datagrams from sources not on the allowlist: dropped */
};

/*
 * netblk_allow's key (an LPM trie compares the bytes after prefixlen from the
 * first): the instance's port and VLAN, then the source prefix.
 */
struct netblk_allow_key {
	__u32 prefixlen;	/* 32 + the source prefix's length */
	__be16 port;
	__be16 vlan;
	__be32 src;
};

#define NETBLK_ALLOW_KEY_BITS	64	/* a lookup: port, VLAN and the whole source */

#endif
