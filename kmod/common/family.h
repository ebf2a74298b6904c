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

/*
 * One knob of netblk_options.h's lists, as the generic parse and echo
 * read it: its attribute, its type, where its value is in the struct of
 * values (struct netblk_start_options, netblk_attach_options) and its
 * default.  Each side makes its table from its list with
 * NETBLK_OPTION_ROW(its struct).
 */
enum netblk_option_type { NETBLK_OPTION_flag, NETBLK_OPTION_u16, NETBLK_OPTION_u32 };

struct netblk_option_row {
	u16 attr;
	u8 type;		/* enum netblk_option_type */
	u16 offset;
	u32 def;
};

#define NETBLK_OPTION_ROW(values, NAME, name, nr, type, lo, hi, def)	\
	{ NETBLK_A_##NAME, NETBLK_OPTION_##type, offsetof(values, name), def },

/*
 * Each knob of @rows into @values: the attribute's value (the policy
 * checked its range), or its default; the bit of its row's index set in
 * @given when it was there.
 */
void netblk_options_get(const struct netblk_option_row *rows, unsigned int n,
			struct nlattr **attrs, void *values, u64 *given);
/* Each knob of @rows from @values: a flag when set, a number always. */
int netblk_options_put(struct sk_buff *skb, const struct netblk_option_row *rows,
		       unsigned int n, const void *values);

/*
 * An instance's histogram -- its queues' cores', summed -- or an attached
 * device's (its queues' client cores', summed): one of the two is given.
 */
struct netblk_latency_source {
	const struct netblk_core *const *cores;
	u32 nr_cores;
	const struct netblk_host_core *const *hosts;
	u32 nr_hosts;
};

int netblk_put_latency(struct sk_buff *skb, const struct netblk_latency_source *src);

#endif
