/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the server's and the client's netlink handlers share (common/family.c):
 * the family, the capability check, the reply with counts and the
 * service-time histogram.  genl.c fills in the family's policy and ops.
 */
#ifndef NETBLK_FAMILY_H
#define NETBLK_FAMILY_H

#include "netblk.h"	/* first: pr_fmt */

#include <net/genetlink.h>

#include "netblk_genl.h"

struct netblk_core;
struct netblk_host_core;

extern struct genl_family netblk_family;

enum netblk_mcgrp { NETBLK_MCGRP_EVENTS };

/* CAP_SYS_ADMIN and CAP_NET_ADMIN, or -EPERM saying which is missing. */
int netblk_genl_admin(struct sk_buff *skb, struct genl_info *info);
int netblk_reply_counts(struct sk_buff *reply, struct genl_info *info, u8 cmd,
			u32 stopped, const u32 *stopping);

/* An instance's histogram, or an attached device's (the client core's) */
struct netblk_latency_source {
	const struct netblk_core *core;
	const struct netblk_host_core *host;
};

int netblk_put_latency(struct sk_buff *skb, const struct netblk_latency_source *src);

#endif
