// SPDX-License-Identifier: GPL-2.0
/*
 * What the server's and the client's netlink handlers (target/ctl.c,
 * host/ctl.c) share: the "netblk" family they answer in, the capability
 * check, the reply with counts, and the service-time histogram.  The
 * family's policy and ops table, which name the handlers, are genl.c's, set
 * when it registers the family: this file names no handler, so that the
 * handlers can put messages of the family without calling back up into
 * genl.c.
 */
#include "family.h"

#include "core_api.h"
#include "host_api.h"

static const struct genl_multicast_group netblk_mcgrps[] = {
	/* events name devices and addresses: as privileged as LIST */
	[NETBLK_MCGRP_EVENTS] = { .name = NETBLK_GENL_MCGRP_EVENTS, .flags = NETBLK_MCGRP_FLAGS },
};

struct genl_family netblk_family __ro_after_init = {
	.name = NETBLK_GENL_NAME,
	.version = NETBLK_GENL_VERSION,
	.maxattr = NETBLK_A_MAX,
	.netnsok = false,
	.parallel_ops = true,	/* every handler takes netblk_lock itself */
	.module = THIS_MODULE,
	.resv_start_op = NETBLK_CMD_LIST + 1,
	.mcgrps = netblk_mcgrps,
	.n_mcgrps = ARRAY_SIZE(netblk_mcgrps),
};

/* ---- messages ---- */

/* The service-time histogram: its buckets with samples, and how to read them. */
/* Queue @q's histogram of @src, server's or client's, into @buckets. */
static u32 netblk_read_queue_latency(const struct netblk_latency_source *src, u32 q,
				     u64 *buckets, u32 n, u64 *max, u64 *count, u64 *sum)
{
	if (src->hosts)
		return netblk_host_core_read_latency(src->hosts[q], buckets, n, max, count, sum);
	return netblk_core_read_latency(src->cores[q], buckets, n, max, count, sum);
}

/*
 * Into @buckets (@scratch as large, for the queues after the first): the
 * counts summed, the largest sample of all.
 */
static u32 netblk_read_latency(const struct netblk_latency_source *src, u64 *buckets,
			       u64 *scratch, u32 n, u64 *max, u64 *count, u64 *sum)
{
	u32 nr = src->hosts ? src->nr_hosts : src->nr_cores;
	u64 q_max, q_count, q_sum;
	u32 got, q, i;

	got = netblk_read_queue_latency(src, 0, buckets, n, max, count, sum);
	for (q = 1; q < nr; q++) {
		netblk_read_queue_latency(src, q, scratch, n, &q_max, &q_count, &q_sum);
		for (i = 0; i < min(n, got); i++)
			buckets[i] += scratch[i];
		*max = max(*max, q_max);
		*count += q_count;
		*sum += q_sum;
	}
	return got;
}

/* An instance's service time by op, its queues' summed: a handful of entries, on the stack. */
static int netblk_put_op_service(struct sk_buff *skb, const struct netblk_latency_source *src)
{
	struct netblk_op_service ops[NETBLK_OP_CODES], by_op[NETBLK_OP_CODES] = {};
	struct netblk_op_service_time *out;
	struct nlattr *attr;
	u32 n = 0, q, i;

	for (q = 0; q < src->nr_cores; q++) {
		u32 got = min_t(u32, netblk_core_read_op_service(src->cores[q], ops, ARRAY_SIZE(ops)),
				ARRAY_SIZE(ops));

		for (i = 0; i < got; i++) {
			if (ops[i].op >= NETBLK_OP_CODES)
				continue;
			by_op[ops[i].op].op = ops[i].op;
			by_op[ops[i].op].count += ops[i].count;
			by_op[ops[i].op].sum_ns += ops[i].sum_ns;
		}
	}
	for (i = 0; i < NETBLK_OP_CODES; i++)
		if (by_op[i].count)
			ops[n++] = by_op[i];
	attr = nla_reserve(skb, NETBLK_L_OPS, n * sizeof(*out));
	if (!attr)
		return -EMSGSIZE;
	out = nla_data(attr);
	for (i = 0; i < n; i++) {
		out[i].op = ops[i].op;
		out[i].reserved = 0;
		out[i].count = ops[i].count;
		out[i].sum_ns = ops[i].sum_ns;
	}
	return 0;
}

int netblk_put_latency(struct sk_buff *skb, const struct netblk_latency_source *src)
{
	struct netblk_latency_bucket *out;
	u32 n, i, used = 0;
	u64 *buckets, max, count, sum;
	struct nlattr *nest, *attr;
	int err = -EMSGSIZE;

	n = netblk_read_latency(src, NULL, NULL, 0, &max, &count, &sum);
	buckets = kvmalloc_array(2 * n, sizeof(*buckets), GFP_KERNEL);
	if (!buckets)
		return -ENOMEM;
	n = min(n, netblk_read_latency(src, buckets, buckets + n, n, &max, &count, &sum));
	for (i = 0; i < n; i++)
		used += buckets[i] != 0;

	nest = nla_nest_start(skb, NETBLK_A_LATENCY);
	if (!nest)
		goto free;
	if (nla_put_u64_64bit(skb, NETBLK_L_COUNT, count, NETBLK_L_PAD) ||
	    nla_put_u64_64bit(skb, NETBLK_L_MAX_NS, max, NETBLK_L_PAD) ||
	    nla_put_u64_64bit(skb, NETBLK_L_SUM_NS, sum, NETBLK_L_PAD) ||
	    nla_put_u32(skb, NETBLK_L_LINEAR_LIMIT, NETBLK_LATENCY_LINEAR_LIMIT) ||
	    nla_put_u32(skb, NETBLK_L_SUB_BUCKETS, NETBLK_LATENCY_SUB_BUCKETS))
		goto cancel;
	if (!src->hosts && netblk_put_op_service(skb, src))
		goto cancel;
	attr = nla_reserve(skb, NETBLK_L_BUCKETS, used * sizeof(*out));
	if (!attr)
		goto cancel;
	out = nla_data(attr);
	for (i = 0; i < n; i++) {
		if (!buckets[i])
			continue;
		out->index = i;
		out->reserved = 0;
		out->count = buckets[i];
		out++;
	}
	nla_nest_end(skb, nest);
	err = 0;
	goto free;
cancel:
	nla_nest_cancel(skb, nest);
free:
	kvfree(buckets);
	return err;
}

/* ---- commands ---- */

/*
 * START and STOP export a block device to the network or take it away,
 * ATTACH gives udev, blkid and LVM a disk whose partition table the remote
 * side wrote, DETACH takes a disk from under its users: as privileged as
 * nbd's connect, CAP_SYS_ADMIN, and CAP_NET_ADMIN as every command.
 * Checked here rather than by GENL_ADMIN_PERM so that the refusal says
 * which one the caller lacks.  Fixed strings, not formatted: on 6.1 an
 * unprivileged caller's refusals must not take compat.h's ring of buffers.
 */
#define NETBLK_NEEDS(cmd) {							\
	cmd " needs CAP_SYS_ADMIN and CAP_NET_ADMIN: the caller lacks CAP_SYS_ADMIN",	\
	cmd " needs CAP_SYS_ADMIN and CAP_NET_ADMIN: the caller lacks CAP_NET_ADMIN",	\
	cmd " needs CAP_SYS_ADMIN and CAP_NET_ADMIN: the caller lacks both",		\
}
static const char *const netblk_admin_refusals[][3] = {
	[NETBLK_CMD_START] = NETBLK_NEEDS("start"),
	[NETBLK_CMD_STOP] = NETBLK_NEEDS("stop"),
	[NETBLK_CMD_ATTACH] = NETBLK_NEEDS("attach"),
	[NETBLK_CMD_DETACH] = NETBLK_NEEDS("detach"),
};

int netblk_genl_admin(struct sk_buff *skb, struct genl_info *info)
{
	bool sys = netlink_capable(skb, CAP_SYS_ADMIN);
	bool net = netlink_capable(skb, CAP_NET_ADMIN);
	u8 cmd = info->genlhdr->cmd;

	if (sys && net)
		return 0;
	if (info->extack && cmd < ARRAY_SIZE(netblk_admin_refusals))
		info->extack->_msg = netblk_admin_refusals[cmd][!sys && !net ? 2 : !net];
	return -EPERM;
}
/*
 * Reply to a STOP or DETACH with how many went (STOPPED) and, for STOP, how
 * many still wait (STOPPING); @reply is consumed.
 */
int netblk_reply_counts(struct sk_buff *reply, struct genl_info *info, u8 cmd,
			       u32 stopped, const u32 *stopping)
{
	void *hdr = genlmsg_put_reply(reply, info, &netblk_family, 0, cmd);

	if (!hdr || nla_put_u32(reply, NETBLK_A_STOPPED, stopped) ||
	    (stopping && nla_put_u32(reply, NETBLK_A_STOPPING, *stopping))) {
		nlmsg_free(reply);
		return -EMSGSIZE;
	}
	genlmsg_end(reply, hdr);
	return genlmsg_reply(reply, info);
}

void netblk_options_get(const struct netblk_option_row *rows, unsigned int n,
			struct nlattr **attrs, void *values, u64 *given)
{
	unsigned int i;

	*given = 0;
	for (i = 0; i < n; i++) {
		const struct nlattr *a = attrs[rows[i].attr];
		void *v = values + rows[i].offset;

		if (a)
			*given |= BIT_ULL(i);
		switch (rows[i].type) {
		case NETBLK_OPTION_flag:
			*(u8 *)v = a ? 1 : rows[i].def;
			break;
		case NETBLK_OPTION_u16:
			*(u16 *)v = a ? nla_get_u16(a) : rows[i].def;
			break;
		case NETBLK_OPTION_u32:
			*(u32 *)v = a ? nla_get_u32(a) : rows[i].def;
			break;
		}
	}
}

int netblk_options_put(struct sk_buff *skb, const struct netblk_option_row *rows,
		       unsigned int n, const void *values)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		const void *v = values + rows[i].offset;
		int err = 0;

		switch (rows[i].type) {
		case NETBLK_OPTION_flag:
			if (*(const u8 *)v)
				err = nla_put_flag(skb, rows[i].attr);
			break;
		case NETBLK_OPTION_u16:
			err = nla_put_u16(skb, rows[i].attr, *(const u16 *)v);
			break;
		case NETBLK_OPTION_u32:
			err = nla_put_u32(skb, rows[i].attr, *(const u32 *)v);
			break;
		}
		if (err)
			return err;
	}
	return 0;
}
