// SPDX-License-Identifier: GPL-2.0
/*
 * The "netblk" generic netlink family: START, STOP, LIST and the "events"
 * multicast group.  The contract is uapi/netblk_genl.h.
 *
 * The family's ops run in parallel (parallel_ops): genl_mutex, which every
 * family without it shares (nl80211, team, ...), is never held while an
 * attach waits for the network or a stop for a disk.  Each handler takes
 * netblk_lock itself, and only around what it changes or reads: none waits
 * for the network or a disk under it.
 */
#include "target/target.h"
#include "host/host.h"

#include <net/genetlink.h>
#include <net/netlink.h>


/* What netblk_put_instance adds to the description */
#define NETBLK_PUT_STATS	1u
#define NETBLK_PUT_LATENCY	2u

/* Not const: 6.1's nla_policy points at it without (compat.h's kernels). */
static struct netlink_range_validation netblk_sessions_range = {
	.min = 1,
	.max = NETBLK_SESSIONS_LIMIT,
};

static const struct nla_policy netblk_policy[NETBLK_A_MAX + 1] = {
	[NETBLK_A_DEVICE]	= { .type = NLA_NUL_STRING, .len = NETBLK_DEVICE_MAX - 1 },
	[NETBLK_A_PORT]		= { .type = NLA_U16 },
	[NETBLK_A_READ_ONLY]	= { .type = NLA_FLAG },
	[NETBLK_A_IFNAME]	= { .type = NLA_NUL_STRING, .len = IFNAMSIZ - 1 },
	[NETBLK_A_MTU]		= { .type = NLA_U32 },
	[NETBLK_A_CPU]		= { .type = NLA_U32 },
	[NETBLK_A_POLL_US]	= { .type = NLA_U32 },
	[NETBLK_A_ALL]		= { .type = NLA_FLAG },
	[NETBLK_A_IFINDEX]	= { .type = NLA_U32 },
	[NETBLK_A_XDP_LINK_FD]	= { .type = NLA_U32 },
	[NETBLK_A_VLAN]		= { .type = NLA_U16 },
	[NETBLK_A_ALLOW]	= { .type = NLA_NESTED },
	[NETBLK_A_ALLOW_PREFIX]	= NLA_POLICY_EXACT_LEN(sizeof(struct netblk_prefix)),
	[NETBLK_A_SESSIONS]	= NLA_POLICY_FULL_RANGE(NLA_U32, &netblk_sessions_range),
	[NETBLK_A_PER_SOURCE]	= NLA_POLICY_FULL_RANGE(NLA_U32, &netblk_sessions_range),
	[NETBLK_A_KEY]		= NLA_POLICY_EXACT_LEN(NETBLK_KEY_BYTES),
	[NETBLK_A_AUTH]		= NLA_POLICY_MAX(NLA_U32, NETBLK_AUTH_FULL),
	[NETBLK_A_ADDR]		= { .type = NLA_U32 },
	[NETBLK_A_DISK]		= { .type = NLA_NUL_STRING, .len = DISK_NAME_LEN - 1 },
	[NETBLK_A_QUEUE_DEPTH]	= NLA_POLICY_RANGE(NLA_U32, 1, NETBLK_HOST_DEPTH_LIMIT),
	[NETBLK_A_TIMEOUT_MS]	= { .type = NLA_U32 },
	[NETBLK_A_FORCE]	= { .type = NLA_FLAG },
	[NETBLK_A_NIC_LOSS]	= NLA_POLICY_MAX(NLA_U32, NETBLK_NIC_LOSS_STOP),
	[NETBLK_A_XDP_DROPPED]	= NLA_POLICY_MIN(NLA_U32, 1),
};

static struct genl_family netblk_family;

enum netblk_mcgrp { NETBLK_MCGRP_EVENTS };

static const struct genl_multicast_group netblk_mcgrps[] = {
	/* events name devices and addresses: as privileged as LIST */
	[NETBLK_MCGRP_EVENTS] = { .name = NETBLK_GENL_MCGRP_EVENTS, .flags = NETBLK_MCGRP_FLAGS },
};

/* ---- messages ---- */

/*
 * Each counter of struct netblk_stats and its attribute in NETBLK_A_STATS:
 * netblk_counters.h's lists.
 */
#define NETBLK_STAT_ROW(NAME, name, ...) \
	{ NETBLK_S_##NAME, offsetof(struct netblk_stats, name) },
#define NETBLK_DROP_ROW(NAME, ...) \
	{ NETBLK_S_DROP_##NAME, offsetof(struct netblk_stats, dropped[NETBLK_DROP_##NAME]) },
#define NETBLK_REFUSAL_ROW(NAME, ...) \
	{ NETBLK_S_REFUSED_##NAME, offsetof(struct netblk_stats, refused_by[NETBLK_REFUSED_##NAME]) },
static const struct {
	u16 attr;
	u16 offset;
} netblk_stat_fields[] = {
	NETBLK_STATS(NETBLK_STAT_ROW)
	NETBLK_DROPS(NETBLK_DROP_ROW)
	NETBLK_REFUSALS(NETBLK_REFUSAL_ROW)
};

static int netblk_put_stats(struct sk_buff *skb, const struct netblk_instance *inst)
{
	struct netblk_stats s;
	struct nlattr *nest;
	unsigned int i;

	/* every counter but the padding attribute has its row */
	BUILD_BUG_ON(ARRAY_SIZE(netblk_stat_fields) != NETBLK_S_MAX - 1);
	netblk_core_read_stats(inst->core, &s);
	nest = nla_nest_start(skb, NETBLK_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ARRAY_SIZE(netblk_stat_fields); i++) {
		const u64 *value = (const void *)&s + netblk_stat_fields[i].offset;

		if (nla_put_u64_64bit(skb, netblk_stat_fields[i].attr, *value, NETBLK_S_PAD))
			goto cancel;
	}
	nla_nest_end(skb, nest);
	return 0;

cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* The service-time histogram: its buckets with samples, and how to read them. */
/* An instance's histogram, or an attached device's (the client core's) */
struct netblk_latency_source {
	const struct netblk_core *core;
	const struct netblk_host_core *host;
};

static u32 netblk_read_latency(const struct netblk_latency_source *src, u64 *buckets, u32 n,
			       u64 *max, u64 *count, u64 *sum)
{
	if (src->host)
		return netblk_host_core_read_latency(src->host, buckets, n, max, count, sum);
	return netblk_core_read_latency(src->core, buckets, n, max, count, sum);
}

/* An instance's service time by op: a handful of entries, built on the stack. */
static int netblk_put_op_service(struct sk_buff *skb, const struct netblk_core *core)
{
	struct netblk_op_service ops[NETBLK_OP_CODES];
	struct netblk_op_service_time *out;
	struct nlattr *attr;
	u32 n, i;

	n = min_t(u32, netblk_core_read_op_service(core, ops, ARRAY_SIZE(ops)), ARRAY_SIZE(ops));
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

static int netblk_put_latency(struct sk_buff *skb, const struct netblk_latency_source *src)
{
	struct netblk_latency_bucket *out;
	u32 n, i, used = 0;
	u64 *buckets, max, count, sum;
	struct nlattr *nest, *attr;
	int err = -EMSGSIZE;

	n = netblk_read_latency(src, NULL, 0, &max, &count, &sum);
	buckets = kvmalloc_array(n, sizeof(*buckets), GFP_KERNEL);
	if (!buckets)
		return -ENOMEM;
	netblk_read_latency(src, buckets, n, &max, &count, &sum);
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
	if (src->core && netblk_put_op_service(skb, src->core))
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

static int netblk_put_allow(struct sk_buff *skb, const struct netblk_instance *inst)
{
	struct nlattr *nest;
	u32 i;

	if (!inst->nr_allow)
		return 0;
	nest = nla_nest_start(skb, NETBLK_A_ALLOW);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < inst->nr_allow; i++) {
		if (nla_put(skb, NETBLK_A_ALLOW_PREFIX, sizeof(inst->allow[i]), &inst->allow[i])) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* The attributes that describe an instance, as START, LIST and events carry them. */
static int netblk_put_instance(struct sk_buff *skb, const struct netblk_instance *inst,
			       unsigned int what)
{
	/* NULL once it has gone: its name as it was, no ifindex (it may be another's now) */
	const struct net_device *nic = inst->nic;
	u32 xdp_dropped = nic ? netblk_monitor_xdp_dropped(nic) : 0;

	if (nla_put_string(skb, NETBLK_A_DEVICE, inst->device) ||
	    nla_put_string(skb, NETBLK_A_DISK_NAME, inst->disk_name) ||
	    (xdp_dropped && nla_put_u32(skb, NETBLK_A_XDP_DROPPED, xdp_dropped)) ||
	    nla_put_u16(skb, NETBLK_A_PORT, inst->port) ||
	    (inst->read_only && nla_put_flag(skb, NETBLK_A_READ_ONLY)) ||
	    nla_put_string(skb, NETBLK_A_IFNAME, netblk_nic_name(inst)) ||
	    (nic && nla_put_u32(skb, NETBLK_A_IFINDEX, nic->ifindex)) ||
	    nla_put_string(skb, NETBLK_A_DRIVER, inst->driver) ||
	    (inst->vlan && nla_put_u16(skb, NETBLK_A_VLAN, inst->vlan)) ||
	    nla_put_in_addr(skb, NETBLK_A_ADDR, inst->addr) ||
	    nla_put_u32(skb, NETBLK_A_MTU, inst->mtu) ||
	    nla_put_u32(skb, NETBLK_A_CPU, inst->cpu) ||
	    nla_put_u32(skb, NETBLK_A_POLL_US, inst->poll_us) ||
	    nla_put_u64_64bit(skb, NETBLK_A_SIZE, inst->size_bytes, NETBLK_A_PAD) ||
	    nla_put_u32(skb, NETBLK_A_SECTOR_SIZE, inst->sector_size) ||
	    nla_put_u32(skb, NETBLK_A_MAX_IO, netblk_core_max_io(inst->core)) ||
	    nla_put_u32(skb, NETBLK_A_SLOTS, netblk_core_slots(inst->core)) ||
	    nla_put_u32(skb, NETBLK_A_SESSIONS, inst->sessions) ||
	    nla_put_u32(skb, NETBLK_A_PER_SOURCE, inst->per_source) ||
	    nla_put_u32(skb, NETBLK_A_AUTH, inst->auth) ||
	    (inst->handoff && nla_put_u32(skb, NETBLK_A_HANDOFF_IFINDEX, inst->handoff->ifindex)) ||
	    nla_put_u32(skb, NETBLK_A_STATE, inst->state) ||
	    nla_put_u64_64bit(skb, NETBLK_A_UPTIME_MS, netblk_instance_uptime_ms(inst),
			      NETBLK_A_PAD) ||
	    (inst->state == NETBLK_STATE_STOPPING &&
	     nla_put_u64_64bit(skb, NETBLK_A_STOPPING_MS, netblk_instance_stopping_ms(inst),
			       NETBLK_A_PAD)) ||
	    nla_put_u32(skb, NETBLK_A_NIC_LOSS, inst->nic_loss) ||
	    (inst->state == NETBLK_STATE_WAITING &&
	     (nla_put_u64_64bit(skb, NETBLK_A_WAITING_MS, netblk_instance_waiting_ms(inst),
				NETBLK_A_PAD) ||
	      nla_put_string(skb, NETBLK_A_WAITING_FOR, inst->waiting_for))) ||
	    netblk_put_allow(skb, inst))
		return -EMSGSIZE;
	if ((what & NETBLK_PUT_STATS) && netblk_put_stats(skb, inst))
		return -EMSGSIZE;
	if (what & NETBLK_PUT_LATENCY) {
		struct netblk_latency_source src = { .core = inst->core };

		if (netblk_put_latency(skb, &src))
			return -EMSGSIZE;
	}
	return 0;
}

static int netblk_fill_instance(struct sk_buff *skb, const struct netblk_instance *inst,
				u32 portid, u32 seq, int flags, u8 cmd, unsigned int what)
{
	void *hdr = genlmsg_put(skb, portid, seq, &netblk_family, flags, cmd);

	if (!hdr)
		return -EMSGSIZE;
	if (netblk_put_instance(skb, inst, what)) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

/* ---- events ---- */

/* An event message with what every event carries; NULL when no one listens. */
static struct sk_buff *netblk_event_new(enum netblk_event event, int err, const char *msg,
					void **hdr)
{
	struct sk_buff *skb;

	if (!genl_has_listeners(&netblk_family, &init_net, NETBLK_MCGRP_EVENTS))
		return NULL;
	skb = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!skb)
		return NULL;
	*hdr = genlmsg_put(skb, 0, 0, &netblk_family, 0, NETBLK_CMD_EVENT);
	if (!*hdr || nla_put_u32(skb, NETBLK_A_EVENT, event) ||
	    (err && nla_put_u32(skb, NETBLK_A_ERRNO, -err)) ||
	    (msg && nla_put_string(skb, NETBLK_A_MESSAGE, msg))) {
		nlmsg_free(skb);
		return NULL;
	}
	return skb;
}

static void netblk_event_send(struct sk_buff *skb, void *hdr)
{
	genlmsg_end(skb, hdr);
	genlmsg_multicast(&netblk_family, skb, 0, NETBLK_MCGRP_EVENTS, GFP_KERNEL);
}

void netblk_genl_notify(const struct netblk_instance *inst, enum netblk_event event,
			enum netblk_stop_reason reason, int err, const char *msg)
{
	struct sk_buff *skb;
	void *hdr;

	skb = netblk_event_new(event, err, msg, &hdr);
	if (!skb)
		return;
	if ((reason && nla_put_u32(skb, NETBLK_A_REASON, reason)) ||
	    netblk_put_instance(skb, inst, 0)) {
		nlmsg_free(skb);
		return;
	}
	netblk_event_send(skb, hdr);
}

/* A START refused: what was asked, and the kernel's answer. */
static void netblk_genl_notify_failed(const struct netblk_start_params *p, int err,
				      const char *msg)
{
	struct sk_buff *skb;
	void *hdr;

	skb = netblk_event_new(NETBLK_EVENT_FAILED, err, msg, &hdr);
	if (!skb)
		return;
	if (nla_put_string(skb, NETBLK_A_DEVICE, p->device) ||
	    nla_put_u16(skb, NETBLK_A_PORT, p->port) ||
	    (p->ifname[0] && nla_put_string(skb, NETBLK_A_IFNAME, p->ifname))) {
		nlmsg_free(skb);
		return;
	}
	netblk_event_send(skb, hdr);
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

static int netblk_genl_admin(struct sk_buff *skb, struct genl_info *info)
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

/* ALLOW: the prefixes, checked further by the instance (instance.c). */
static int netblk_parse_allow(struct genl_info *info, struct netblk_start_params *p)
{
	struct nlattr *nest = info->attrs[NETBLK_A_ALLOW], *a;
	int rem;

	if (!nest)
		return 0;
	nla_for_each_nested(a, nest, rem) {
		if (nla_type(a) != NETBLK_A_ALLOW_PREFIX ||
		    nla_len(a) != sizeof(struct netblk_prefix)) {
			NL_SET_ERR_MSG_ATTR(info->extack, a, "ALLOW holds ALLOW_PREFIX entries only");
			return -EINVAL;
		}
		if (p->nr_allow == NETBLK_ALLOW_MAX) {
			NL_SET_ERR_MSG_FMT(info->extack, "allow= takes at most %u prefixes",
					   NETBLK_ALLOW_MAX);
			return -E2BIG;
		}
		memcpy(&p->allow[p->nr_allow++], nla_data(a), sizeof(struct netblk_prefix));
	}
	if (!p->nr_allow) {
		NL_SET_ERR_MSG(info->extack, "allow= names no prefix");
		return -EINVAL;
	}
	return 0;
}

static int netblk_parse_start(struct genl_info *info, struct netblk_start_params *p)
{
	struct nlattr **a = info->attrs;

	if (GENL_REQ_ATTR_CHECK(info, NETBLK_A_DEVICE) ||
	    GENL_REQ_ATTR_CHECK(info, NETBLK_A_PORT))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	nla_strscpy(p->device, a[NETBLK_A_DEVICE], sizeof(p->device));
	p->port = nla_get_u16(a[NETBLK_A_PORT]);
	p->read_only = nla_get_flag(a[NETBLK_A_READ_ONLY]);
	if (a[NETBLK_A_IFNAME])
		nla_strscpy(p->ifname, a[NETBLK_A_IFNAME], sizeof(p->ifname));
	if (a[NETBLK_A_MTU]) {
		p->has_mtu = true;
		p->mtu = nla_get_u32(a[NETBLK_A_MTU]);
	}
	if (a[NETBLK_A_CPU]) {
		p->has_cpu = true;
		p->cpu = nla_get_u32(a[NETBLK_A_CPU]);
	}
	if (a[NETBLK_A_POLL_US])
		p->poll_us = nla_get_u32(a[NETBLK_A_POLL_US]);
	if (a[NETBLK_A_VLAN])
		p->vlan = nla_get_u16(a[NETBLK_A_VLAN]);
	p->nic_loss = a[NETBLK_A_NIC_LOSS] ? nla_get_u32(a[NETBLK_A_NIC_LOSS]) : NETBLK_NIC_LOSS_WAIT;
	p->sessions = a[NETBLK_A_SESSIONS] ? nla_get_u32(a[NETBLK_A_SESSIONS]) :
					     NETBLK_SESSIONS_DEFAULT;
	p->per_source = a[NETBLK_A_PER_SOURCE] ? nla_get_u32(a[NETBLK_A_PER_SOURCE]) :
						 min_t(u32, NETBLK_PER_SOURCE_DEFAULT, p->sessions);
	if (p->per_source > p->sessions) {
		NL_SET_ERR_MSG_FMT(info->extack,
				   "per-source=%u is more than the instance's sessions=%u: lower it, or raise sessions=",
				   p->per_source, p->sessions);
		return -EINVAL;
	}
	if (a[NETBLK_A_KEY]) {
		p->has_key = true;
		nla_memcpy(p->key, a[NETBLK_A_KEY], sizeof(p->key));
	}
	p->auth = a[NETBLK_A_AUTH] ? nla_get_u32(a[NETBLK_A_AUTH]) :
				     p->has_key ? NETBLK_AUTH_HEADER : NETBLK_AUTH_NONE;
	if (p->has_key && p->auth == NETBLK_AUTH_NONE) {
		NL_SET_ERR_MSG_ATTR(info->extack, a[NETBLK_A_AUTH],
				    "a key with auth=none: say auth=header or auth=full, or give no key");
		return -EINVAL;
	}
	if (!p->has_key && p->auth != NETBLK_AUTH_NONE) {
		NL_SET_ERR_MSG_ATTR(info->extack, a[NETBLK_A_AUTH], "auth= needs a key: give key=FILE");
		return -EINVAL;
	}
	return netblk_parse_allow(info, p);
}

static int netblk_cmd_start(struct sk_buff *skb, struct genl_info *info)
{
	struct netblk_start_params *params;
	struct netblk_instance *inst;
	struct sk_buff *reply = NULL;
	int err;

	err = netblk_genl_admin(skb, info);
	if (err)
		return err;
	params = kzalloc(sizeof(*params), GFP_KERNEL);
	if (!params)
		return -ENOMEM;
	err = netblk_parse_start(info, params);
	if (err)
		goto out;
	err = -ENOMEM;
	reply = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!reply)
		goto out;

	mutex_lock(&netblk_lock);
	err = netblk_instance_start(params, info->extack, &inst);
	if (err) {
		mutex_unlock(&netblk_lock);
		netblk_genl_notify_failed(params, err, info->extack ? info->extack->_msg : NULL);
		goto out;
	}
	pr_info("serving %s on %s %pI4:%u, %u bytes a datagram, worker on cpu %u\n",
		inst->device, inst->addr_dev->name, &inst->addr, inst->port,
		netblk_core_max_io(inst->core), inst->cpu);
	netblk_genl_notify(inst, NETBLK_EVENT_STARTED, 0, 0, NULL);
	netblk_monitor_kick();	/* and from now on once a second */
	err = netblk_fill_instance(reply, inst, info->snd_portid, info->snd_seq, 0,
				   NETBLK_CMD_START, 0);
	mutex_unlock(&netblk_lock);
	if (!err) {
		err = genlmsg_reply(reply, info);
		reply = NULL;
	}
out:
	nlmsg_free(reply);
	kfree_sensitive(params);	/* it may hold a key */
	return err;
}

/* The instances a STOP is for (@info NULL: all), each with a reference; NULL when none. */
static struct netblk_instance **netblk_stop_targets(struct genl_info *info, u32 *n)
{
	struct netblk_instance **insts, *inst;
	u32 count = 0;

	lockdep_assert_held(&netblk_lock);
	if (info && !info->attrs[NETBLK_A_ALL]) {
		inst = netblk_instance_find(nla_get_u16(info->attrs[NETBLK_A_PORT]));
		if (!inst)
			return NULL;
		insts = kmalloc(sizeof(*insts), GFP_KERNEL);
		if (!insts)
			return ERR_PTR(-ENOMEM);
		insts[count++] = inst;
	} else {
		list_for_each_entry(inst, &netblk_instances, node)
			count++;
		insts = kmalloc_array(max(count, 1u), sizeof(*insts), GFP_KERNEL);
		if (!insts)
			return ERR_PTR(-ENOMEM);
		count = 0;
		list_for_each_entry(inst, &netblk_instances, node)
			insts[count++] = inst;
	}
	for (*n = 0; *n < count; (*n)++)
		kref_get(&insts[*n]->ref);
	return insts;
}

/*
 * The reaper may release the instance (its core with it) as soon as its
 * drain ends, which may be right after the wait gave up: look at the core
 * under netblk_lock, where release cannot run, and only if not released.
 */
static void netblk_warn_unload_wait(struct netblk_instance *inst)
{
	mutex_lock(&netblk_lock);
	if (!inst->finished)
		pr_warn("unloading waits for port %u: %u requests still at %s\n", inst->port,
			netblk_core_at_disk(inst->core), inst->device);
	mutex_unlock(&netblk_lock);
}

/*
 * Stop what a STOP names (every instance for rmmod, @info NULL): take their
 * ports away at once, then wait for their disks without netblk_lock --
 * @timeout jiffies in all, or as long as it takes for rmmod -- and release
 * those that drained.  Those that did not are left stopping, announced once.
 * 0 or an errno; *@released says how many were released, *@stopping how
 * many were left stopping.
 */
static int netblk_stop_instances(struct genl_info *info, enum netblk_stop_reason reason,
				 unsigned long timeout, u32 *released, u32 *stopping)
{
	unsigned long deadline = jiffies + timeout;
	struct netblk_instance **insts;
	u32 n, i;

	*released = *stopping = 0;
	mutex_lock(&netblk_lock);
	insts = netblk_stop_targets(info, &n);
	if (IS_ERR_OR_NULL(insts)) {
		mutex_unlock(&netblk_lock);
		return insts ? PTR_ERR(insts) : -ENOENT;
	}
	for (i = 0; i < n; i++)
		netblk_instance_stop(insts[i], reason, NULL);
	mutex_unlock(&netblk_lock);

	for (i = 0; i < n; i++) {
		if (info) {
			netblk_instance_wait(insts[i], max_t(long, deadline - jiffies, 0));
			continue;
		}
		/* rmmod: the disk may not be left with our bios; say what it waits for */
		while (!netblk_instance_wait(insts[i], 10 * HZ))
			netblk_warn_unload_wait(insts[i]);
	}

	mutex_lock(&netblk_lock);
	for (i = 0; i < n; i++) {
		if (netblk_instance_finish(insts[i])) {
			(*released)++;
			continue;
		}
		netblk_instance_linger(insts[i]);
		(*stopping)++;
	}
	mutex_unlock(&netblk_lock);
	for (i = 0; i < n; i++)
		netblk_instance_put(insts[i]);
	kfree(insts);
	return 0;
}

void netblk_stop_all(enum netblk_stop_reason reason)
{
	u32 released, stopping;

	netblk_stop_instances(NULL, reason, 0, &released, &stopping);
}

/*
 * Reply to a STOP or DETACH with how many went (STOPPED) and, for STOP, how
 * many still wait (STOPPING); @reply is consumed.
 */
static int netblk_reply_counts(struct sk_buff *reply, struct genl_info *info, u8 cmd,
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

static int netblk_cmd_stop(struct sk_buff *skb, struct genl_info *info)
{
	u32 released, stopping;
	struct sk_buff *reply;
	int err;

	err = netblk_genl_admin(skb, info);
	if (err)
		return err;
	if (!info->attrs[NETBLK_A_ALL] && !info->attrs[NETBLK_A_PORT]) {
		NL_SET_ERR_MSG(info->extack, "name the instance to stop by its port, or all");
		return -EINVAL;
	}
	reply = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!reply)
		return -ENOMEM;
	err = netblk_stop_instances(info, NETBLK_REASON_ASKED, NETBLK_STOP_WAIT, &released,
				    &stopping);
	if (err == -ENOENT) {
		nlmsg_free(reply);
		NL_SET_ERR_MSG_FMT(info->extack, "no instance serves port %u (netblkctl list shows those that do)",
				   nla_get_u16(info->attrs[NETBLK_A_PORT]));
		return err;
	}
	if (err) {
		nlmsg_free(reply);
		return err;
	}
	return netblk_reply_counts(reply, info, NETBLK_CMD_STOP, released, &stopping);
}

/*
 * One message per instance; cb->args[0] is how many instances were already
 * sent, so a dump that spans several skbs resumes where it stopped.
 */
static int netblk_dump_list(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct netblk_instance *inst;
	long index = 0, skip = cb->args[0];
	int err = 0;

	mutex_lock(&netblk_lock);
	list_for_each_entry(inst, &netblk_instances, node) {
		if (index++ < skip)
			continue;
		err = netblk_fill_instance(skb, inst, NETLINK_CB(cb->skb).portid,
					   cb->nlh->nlmsg_seq, NLM_F_MULTI, NETBLK_CMD_LIST,
					   NETBLK_PUT_STATS | NETBLK_PUT_LATENCY);
		/*
		 * An instance whose histogram does not fit even an empty skb
		 * (a reader with a small receive buffer) is listed without it.
		 */
		if (err && index - 1 == skip)
			err = netblk_fill_instance(skb, inst, NETLINK_CB(cb->skb).portid,
						   cb->nlh->nlmsg_seq, NLM_F_MULTI,
						   NETBLK_CMD_LIST, NETBLK_PUT_STATS);
		if (err) {
			index--;
			break;
		}
	}
	mutex_unlock(&netblk_lock);
	cb->args[0] = index;
	/* A full skb ends this part of the dump; the next call resumes. */
	if (err && index > skip)
		return skb->len;
	return err ? err : skb->len;
}

/* ---- the block-device client: ATTACH, DETACH, ATTACHED ---- */

/*
 * Each counter of an attachment and its attribute in NETBLK_A_HOST_STATS:
 * netblk_counters.h's NETBLK_HOST_STATS, in the core's struct or the shim's.
 */
#define NETBLK_HS_ROW_queue(NAME, name) { NETBLK_HS_##NAME, 0, offsetof(struct netblk_host_stats, name) },
#define NETBLK_HS_ROW_core(NAME, name) { NETBLK_HS_##NAME, 0, offsetof(struct netblk_host_stats, name) },
#define NETBLK_HS_ROW_shim(NAME, name) { NETBLK_HS_##NAME, 1, offsetof(struct netblk_host_shim_stats, name) },
#define NETBLK_HS_ROW(NAME, name, nr, where, ...) NETBLK_HS_ROW_##where(NAME, name)
static const struct {
	u16 attr;
	u16 shim;	/* in struct netblk_host_shim_stats, not the core's */
	u16 offset;
} netblk_host_stat_fields[] = {
	NETBLK_HOST_STATS(NETBLK_HS_ROW)
};

static int netblk_put_host_stats(struct sk_buff *skb, struct netblk_attachment *att)
{
	struct netblk_host_shim_stats shim;
	struct netblk_host_stats core;
	struct nlattr *nest;
	unsigned int i;

	/* every counter but the padding attribute has its row */
	BUILD_BUG_ON(ARRAY_SIZE(netblk_host_stat_fields) != NETBLK_HS_MAX - 1);
	/* the core's reasons are the uapi's */
	BUILD_BUG_ON((int)NETBLK_HOST_OTHER_DEVICE != (int)NETBLK_HOST_CHANGE_OTHER_DEVICE ||
		     (int)NETBLK_HOST_SMALLER != (int)NETBLK_HOST_CHANGE_SMALLER ||
		     (int)NETBLK_HOST_READ_ONLY != (int)NETBLK_HOST_CHANGE_READ_ONLY ||
		     (int)NETBLK_HOST_GEOMETRY != (int)NETBLK_HOST_CHANGE_GEOMETRY ||
		     (int)NETBLK_HOST_INFO_REFUSED != (int)NETBLK_HOST_CHANGE_INFO_REFUSED);
	netblk_host_read_stats(att, &core, &shim);
	nest = nla_nest_start(skb, NETBLK_A_HOST_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ARRAY_SIZE(netblk_host_stat_fields); i++) {
		const void *base = netblk_host_stat_fields[i].shim ? (const void *)&shim :
								      (const void *)&core;
		const u64 *value = base + netblk_host_stat_fields[i].offset;

		if (nla_put_u64_64bit(skb, netblk_host_stat_fields[i].attr, *value, NETBLK_HS_PAD))
			goto cancel;
	}
	nla_nest_end(skb, nest);
	return 0;

cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

static int netblk_fill_attachment(struct sk_buff *skb, struct netblk_attachment *att,
				  u32 portid, u32 seq, int flags, u8 cmd, bool stats)
{
	const struct netblk_attach_params *p = &att->params;
	void *hdr = genlmsg_put(skb, portid, seq, &netblk_family, flags, cmd);

	if (!hdr)
		return -EMSGSIZE;
	if (nla_put_string(skb, NETBLK_A_DISK, att->name) ||
	    nla_put_in_addr(skb, NETBLK_A_ADDR, p->addr) ||
	    nla_put_u16(skb, NETBLK_A_PORT, p->port) ||
	    (p->ifname[0] && nla_put_string(skb, NETBLK_A_IFNAME, p->ifname)) ||
	    (p->read_only && nla_put_flag(skb, NETBLK_A_READ_ONLY)) ||
	    nla_put_u64_64bit(skb, NETBLK_A_SIZE, att->info.size_bytes, NETBLK_A_PAD) ||
	    nla_put_u32(skb, NETBLK_A_SECTOR_SIZE, att->info.sector_size) ||
	    nla_put_u32(skb, NETBLK_A_MAX_IO, att->info.max_io) ||
	    nla_put_u32(skb, NETBLK_A_SLOTS, att->info.slots) ||
	    nla_put_u32(skb, NETBLK_A_QUEUE_DEPTH, p->queue_depth) ||
	    nla_put_u32(skb, NETBLK_A_TIMEOUT_MS, p->timeout_ms) ||
	    nla_put_u32(skb, NETBLK_A_AUTH, p->has_key ? NETBLK_AUTH_HEADER : NETBLK_AUTH_NONE) ||
	    nla_put_u64_64bit(skb, NETBLK_A_UPTIME_MS,
			      div_u64(ktime_get_boottime_ns() - att->attached_ns, NSEC_PER_MSEC),
			      NETBLK_A_PAD) ||
	    (stats && netblk_put_host_stats(skb, att))) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	if (stats) {
		struct netblk_latency_source src = { .host = att->core };

		/* one that does not fit the reader's buffer: listed without it ("n/a") */
		netblk_put_latency(skb, &src);
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int netblk_parse_attach(struct genl_info *info, struct netblk_attach_params *p)
{
	struct nlattr **a = info->attrs;

	if (GENL_REQ_ATTR_CHECK(info, NETBLK_A_ADDR) ||
	    GENL_REQ_ATTR_CHECK(info, NETBLK_A_PORT))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->addr = nla_get_in_addr(a[NETBLK_A_ADDR]);
	p->port = nla_get_u16(a[NETBLK_A_PORT]);
	if (!p->port) {
		NL_SET_ERR_MSG_ATTR(info->extack, a[NETBLK_A_PORT], "port 0: give the instance's port");
		return -EINVAL;
	}
	if (ipv4_is_multicast(p->addr) || ipv4_is_lbcast(p->addr) || ipv4_is_zeronet(p->addr)) {
		NL_SET_ERR_MSG_ATTR(info->extack, a[NETBLK_A_ADDR],
				    "not an address one host answers from: give the server's");
		return -EINVAL;
	}
	if (a[NETBLK_A_IFNAME])
		nla_strscpy(p->ifname, a[NETBLK_A_IFNAME], sizeof(p->ifname));
	p->read_only = nla_get_flag(a[NETBLK_A_READ_ONLY]);
	p->queue_depth = a[NETBLK_A_QUEUE_DEPTH] ? nla_get_u32(a[NETBLK_A_QUEUE_DEPTH]) :
						   NETBLK_HOST_DEPTH_DEFAULT;
	p->timeout_ms = a[NETBLK_A_TIMEOUT_MS] ? nla_get_u32(a[NETBLK_A_TIMEOUT_MS]) : 0;
	if (a[NETBLK_A_AUTH] && nla_get_u32(a[NETBLK_A_AUTH]) == NETBLK_AUTH_FULL) {
		NL_SET_ERR_MSG_ATTR(info->extack, a[NETBLK_A_AUTH],
				    "the block-device client tags headers only: serve it with auth=header");
		return -EOPNOTSUPP;
	}
	if (a[NETBLK_A_KEY]) {
		p->has_key = true;
		nla_memcpy(p->key, a[NETBLK_A_KEY], sizeof(p->key));
	}
	return 0;
}

static int netblk_cmd_attach(struct sk_buff *skb, struct genl_info *info)
{
	struct netblk_attach_params *params;
	struct netblk_attachment *att;
	struct sk_buff *reply = NULL;
	int err;

	err = netblk_genl_admin(skb, info);
	if (err)
		return err;
	params = kzalloc(sizeof(*params), GFP_KERNEL);
	if (!params)
		return -ENOMEM;
	err = netblk_parse_attach(info, params);
	if (err)
		goto out;
	err = -ENOMEM;
	reply = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!reply)
		goto out;

	/* it waits for the server: it takes netblk_lock only around the list */
	err = netblk_host_attach(params, genl_info_net(info), info->extack, &att);
	if (!err) {
		/* what it says is fixed once attached: our reference is enough */
		err = netblk_fill_attachment(reply, att, info->snd_portid, info->snd_seq, 0,
					     NETBLK_CMD_ATTACH, false);
		netblk_host_put(att);
	}
	if (!err) {
		err = genlmsg_reply(reply, info);
		reply = NULL;
	}
out:
	nlmsg_free(reply);
	kfree_sensitive(params);	/* it may hold a key */
	return err;
}

/*
 * Detach what a DETACH names, under netblk_lock, adding to *@detached.  An
 * attach in progress is given up instead (its attacher undoes it): the
 * first such one is returned in *@attaching, for the caller to wait for
 * without the lock (netblk_host_wait_undone) -- and, for all, to look again.
 */
static int netblk_detach_targets(struct genl_info *info, bool force, u32 *detached,
				 struct netblk_attachment **attaching)
{
	struct netblk_attachment *att, *next;
	char name[DISK_NAME_LEN];
	int err;

	lockdep_assert_held(&netblk_lock);
	*attaching = NULL;
	if (info->attrs[NETBLK_A_ALL]) {
		list_for_each_entry_safe(att, next, &netblk_attachments, node) {
			bool attached = att->state == NETBLK_HOST_ATTACHED;

			if (!attached && *attaching)
				continue;	/* the next round's */
			err = netblk_host_detach(att, force, info->extack, attaching);
			if (err)
				return err;
			*detached += attached;
		}
		return 0;
	}
	nla_strscpy(name, info->attrs[NETBLK_A_DISK], sizeof(name));
	att = netblk_host_find(name);
	if (!att) {
		NL_SET_ERR_MSG_FMT(info->extack, "%s is not attached (netblkctl list shows what is)",
				   name);
		return -ENOENT;
	}
	err = netblk_host_detach(att, force, info->extack, attaching);
	if (!err && !*attaching)
		(*detached)++;	/* a given-up attach is counted once undone */
	return err;
}

static int netblk_cmd_detach(struct sk_buff *skb, struct genl_info *info)
{
	bool force = nla_get_flag(info->attrs[NETBLK_A_FORCE]);
	struct netblk_attachment *attaching;
	struct sk_buff *reply;
	u32 detached = 0;
	int err;

	err = netblk_genl_admin(skb, info);
	if (err)
		return err;
	if (!info->attrs[NETBLK_A_ALL] && !info->attrs[NETBLK_A_DISK]) {
		NL_SET_ERR_MSG(info->extack, "name the device to detach (netblkN), or all");
		return -EINVAL;
	}
	reply = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!reply)
		return -ENOMEM;
	do {
		mutex_lock(&netblk_lock);
		err = netblk_detach_targets(info, force, &detached, &attaching);
		mutex_unlock(&netblk_lock);
		if (attaching) {
			netblk_host_wait_undone(attaching);
			detached++;
		}
	} while (!err && attaching && info->attrs[NETBLK_A_ALL]);
	if (err) {
		nlmsg_free(reply);
		return err;
	}
	return netblk_reply_counts(reply, info, NETBLK_CMD_DETACH, detached, NULL);
}

/* One message per attachment; cb->args[0] as in netblk_dump_list. */
static int netblk_dump_attached(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct netblk_attachment *att;
	long index = 0, skip = cb->args[0];
	int err = 0;

	mutex_lock(&netblk_lock);
	list_for_each_entry(att, &netblk_attachments, node) {
		if (att->state != NETBLK_HOST_ATTACHED)
			continue;	/* half made: listed once attached */
		if (index++ < skip)
			continue;
		err = netblk_fill_attachment(skb, att, NETLINK_CB(cb->skb).portid,
					     cb->nlh->nlmsg_seq, NLM_F_MULTI, NETBLK_CMD_ATTACHED,
					     true);
		if (err) {
			index--;
			break;
		}
	}
	mutex_unlock(&netblk_lock);
	cb->args[0] = index;
	if (err && index > skip)
		return skb->len;
	return err ? err : skb->len;
}

/*
 * netblkctl added netblk's XDP program again to a NIC whose driver dropped
 * it (monitor.c): its waiting instances serve again.
 */
static int netblk_cmd_xdp_ready(struct sk_buff *skb, struct genl_info *info)
{
	struct net_device *nic;
	int err;

	if (GENL_REQ_ATTR_CHECK(info, NETBLK_A_IFINDEX) ||
	    GENL_REQ_ATTR_CHECK(info, NETBLK_A_XDP_DROPPED))
		return -EINVAL;
	nic = dev_get_by_index(&init_net, nla_get_u32(info->attrs[NETBLK_A_IFINDEX]));
	if (!nic) {
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[NETBLK_A_IFINDEX],
				    "no network interface has that ifindex");
		return -ENODEV;
	}
	err = netblk_monitor_xdp_ready(nic, nla_get_u32(info->attrs[NETBLK_A_XDP_DROPPED]),
				       info->extack);
	dev_put(nic);
	return err;
}

/*
 * START, STOP, ATTACH and DETACH check CAP_SYS_ADMIN and CAP_NET_ADMIN
 * themselves (netblk_genl_admin), to say which is missing; the rest need
 * CAP_NET_ADMIN.
 */
static const struct genl_ops netblk_ops[] = {
	{
		.cmd = NETBLK_CMD_START,
		.doit = netblk_cmd_start,
	},
	{
		.cmd = NETBLK_CMD_STOP,
		.doit = netblk_cmd_stop,
	},
	{
		/* device paths, addresses and allowlists are not for every user */
		.cmd = NETBLK_CMD_LIST,
		.dumpit = netblk_dump_list,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = NETBLK_CMD_ATTACH,
		.doit = netblk_cmd_attach,
	},
	{
		.cmd = NETBLK_CMD_DETACH,
		.doit = netblk_cmd_detach,
	},
	{
		.cmd = NETBLK_CMD_ATTACHED,
		.dumpit = netblk_dump_attached,
		.flags = GENL_ADMIN_PERM,
	},
	{
		/*
		 * It only says that the NIC's program is there again, so that
		 * its waiting instances serve: a false one makes them serve a
		 * NIC that steers nothing to them -- what CAP_NET_ADMIN can do
		 * anyway by taking the program off.  Adding the program is what
		 * takes more (CAP_BPF), in netblkctl.
		 */
		.cmd = NETBLK_CMD_XDP_READY,
		.doit = netblk_cmd_xdp_ready,
		.flags = GENL_ADMIN_PERM,
	},
};

static struct genl_family netblk_family __ro_after_init = {
	.name = NETBLK_GENL_NAME,
	.version = NETBLK_GENL_VERSION,
	.maxattr = NETBLK_A_MAX,
	.policy = netblk_policy,
	.netnsok = false,
	.parallel_ops = true,	/* every handler takes netblk_lock itself */
	.module = THIS_MODULE,
	.ops = netblk_ops,
	.n_ops = ARRAY_SIZE(netblk_ops),
	.resv_start_op = NETBLK_CMD_LIST + 1,
	.mcgrps = netblk_mcgrps,
	.n_mcgrps = ARRAY_SIZE(netblk_mcgrps),
};

int netblk_genl_register(void)
{
	return genl_register_family(&netblk_family);
}

void netblk_genl_unregister(void)
{
	genl_unregister_family(&netblk_family);
}
