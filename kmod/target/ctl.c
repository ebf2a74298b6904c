// SPDX-License-Identifier: GPL-2.0
/*
 * The server's netlink commands: START, STOP, LIST and XDP_READY, and the
 * attributes that describe an instance (which its events carry too).  The
 * family and its ops table are genl.c's (common/family.c).
 *
 * Each handler takes netblk_lock itself, and only around what it changes or
 * reads: none waits for the network or a disk under it.
 */
#include "target.h"
#include "family.h"

#include <net/genetlink.h>
#include <net/netlink.h>

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
struct netblk_stat_field {
	u16 attr;
	u16 offset;
};

static const struct netblk_stat_field netblk_stat_fields[] = {
	NETBLK_STATS(NETBLK_STAT_ROW)
	NETBLK_DROPS(NETBLK_DROP_ROW)
	NETBLK_REFUSALS(NETBLK_REFUSAL_ROW)
};

/* Those of @s that @rows name, in a nest of type @type. */
static int netblk_put_stat_rows(struct sk_buff *skb, int type, const struct netblk_stats *s,
				const struct netblk_stat_field *rows, unsigned int n)
{
	struct nlattr *nest;
	unsigned int i;

	nest = nla_nest_start(skb, type);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		const u64 *value = (const void *)s + rows[i].offset;

		if (nla_put_u64_64bit(skb, rows[i].attr, *value, NETBLK_S_PAD)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int netblk_put_stats(struct sk_buff *skb, const struct netblk_instance *inst)
{
	struct netblk_stats s;

	/* every counter but the padding attribute has its row */
	BUILD_BUG_ON(ARRAY_SIZE(netblk_stat_fields) != NETBLK_S_MAX - 1);
	netblk_instance_read_stats(inst, &s);
	return netblk_put_stat_rows(skb, NETBLK_A_STATS, &s, netblk_stat_fields,
				    ARRAY_SIZE(netblk_stat_fields));
}

/* What each queue's NETBLK_Q_STATS holds (netblk_genl.h): a few, so 64 queues fit a message. */
static const struct netblk_stat_field netblk_queue_stat_fields[] = {
	NETBLK_STAT_ROW(REQUESTS, requests)
	NETBLK_STAT_ROW(FRAMES_RX, frames_rx)
	NETBLK_STAT_ROW(FRAMES_TX, frames_tx)
	NETBLK_STAT_ROW(STEERED, steered)
	NETBLK_STAT_ROW(SESSIONS_OPEN, sessions_open)
	NETBLK_STAT_ROW(INFLIGHT_DISK, inflight_disk)
};

static int netblk_put_queues(struct sk_buff *skb, const struct netblk_instance *inst)
{
	const struct netblk_queue *q;
	struct nlattr *list, *one;
	struct netblk_stats s;

	list = nla_nest_start(skb, NETBLK_A_QUEUE_LIST);
	if (!list)
		return -EMSGSIZE;
	netblk_for_each_queue(q, inst) {
		one = nla_nest_start(skb, NETBLK_A_QUEUE);
		if (!one)
			goto cancel;
		netblk_core_read_stats(q->core, &s);
		if (nla_put_u32(skb, NETBLK_Q_CPU, q->cpu) ||
		    netblk_put_stat_rows(skb, NETBLK_Q_STATS, &s, netblk_queue_stat_fields,
					 ARRAY_SIZE(netblk_queue_stat_fields)))
			goto cancel;
		nla_nest_end(skb, one);
	}
	nla_nest_end(skb, list);
	return 0;

cancel:
	nla_nest_cancel(skb, list);
	return -EMSGSIZE;
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

/* START's knobs (netblk_options.h) in struct netblk_start_options. */
#define NETBLK_START_ROW(NAME, name, nr, type, lo, hi, def, ...) \
	NETBLK_OPTION_ROW(struct netblk_start_options, NAME, name, nr, type, lo, hi, def)
static const struct netblk_option_row netblk_start_rows[] = {
	NETBLK_START_OPTIONS(NETBLK_START_ROW)
};
#undef NETBLK_START_ROW

/* The attributes that describe an instance, as START, LIST and events carry them. */
int netblk_put_instance(struct sk_buff *skb, const struct netblk_instance *inst,
			       unsigned int what)
{
	/* NULL once it has gone: its name as it was, no ifindex (it may be another's now) */
	const struct net_device *nic = inst->nic;
	u32 xdp_dropped = nic ? netblk_monitor_xdp_dropped(nic) : 0;

	if (nla_put_string(skb, NETBLK_A_DEVICE, inst->device) ||
	    nla_put_string(skb, NETBLK_A_DISK_NAME, inst->disk_name) ||
	    (xdp_dropped && nla_put_u32(skb, NETBLK_A_XDP_DROPPED, xdp_dropped)) ||
	    nla_put_u16(skb, NETBLK_A_PORT, inst->port) ||
	    nla_put_string(skb, NETBLK_A_IFNAME, netblk_nic_name(inst)) ||
	    (nic && nla_put_u32(skb, NETBLK_A_IFINDEX, nic->ifindex)) ||
	    nla_put_string(skb, NETBLK_A_DRIVER, inst->driver) ||
	    nla_put_in_addr(skb, NETBLK_A_ADDR, inst->addr) ||
	    nla_put_u64_64bit(skb, NETBLK_A_SIZE, inst->size_bytes, NETBLK_A_PAD) ||
	    nla_put_u32(skb, NETBLK_A_SECTOR_SIZE, inst->sector_size) ||
	    nla_put_u32(skb, NETBLK_A_MAX_IO, netblk_core_max_io(inst->queues[0].core)) ||
	    nla_put_u32(skb, NETBLK_A_SLOTS,
			netblk_core_slots(inst->queues[0].core) * inst->nr_queues) ||
	    nla_put_u32(skb, NETBLK_A_AUTH, inst->auth) ||
	    (inst->handoff && nla_put_u32(skb, NETBLK_A_HANDOFF_IFINDEX, inst->handoff->ifindex)) ||
	    nla_put_u32(skb, NETBLK_A_STATE, inst->state) ||
	    nla_put_u64_64bit(skb, NETBLK_A_UPTIME_MS, netblk_instance_uptime_ms(inst),
			      NETBLK_A_PAD) ||
	    (inst->state == NETBLK_STATE_STOPPING &&
	     nla_put_u64_64bit(skb, NETBLK_A_STOPPING_MS, netblk_instance_stopping_ms(inst),
			       NETBLK_A_PAD)) ||
	    (inst->state == NETBLK_STATE_WAITING &&
	     (nla_put_u64_64bit(skb, NETBLK_A_WAITING_MS, netblk_instance_waiting_ms(inst),
				NETBLK_A_PAD) ||
	      nla_put_string(skb, NETBLK_A_WAITING_FOR, inst->waiting_for))) ||
	    netblk_options_put(skb, netblk_start_rows, ARRAY_SIZE(netblk_start_rows),
			       &inst->opt) ||
	    netblk_put_allow(skb, inst))
		return -EMSGSIZE;
	if ((what & NETBLK_PUT_STATS) &&
	    (netblk_put_stats(skb, inst) || netblk_put_queues(skb, inst)))
		return -EMSGSIZE;
	if (what & NETBLK_PUT_LATENCY) {
		const struct netblk_core *cores[NETBLK_QUEUES_MAX];
		struct netblk_latency_source src = { .cores = cores, .nr_cores = inst->nr_queues };
		u32 i;

		for (i = 0; i < inst->nr_queues; i++)
			cores[i] = inst->queues[i].core;
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
	if (a[NETBLK_A_IFNAME])
		nla_strscpy(p->ifname, a[NETBLK_A_IFNAME], sizeof(p->ifname));
	BUILD_BUG_ON(NETBLK_START_OPTS > 64);	/* their bits in given */
	netblk_options_get(netblk_start_rows, ARRAY_SIZE(netblk_start_rows), a, &p->opt,
			   &p->given);
	/* the defaults that depend on another knob */
	if (!netblk_start_given(p, PER_SOURCE))
		p->opt.per_source = min_t(u32, NETBLK_PER_SOURCE_DEFAULT, p->opt.sessions);
	if (p->opt.per_source > p->opt.sessions) {
		NL_SET_ERR_MSG_FMT(info->extack,
				   "per-source=%u is more than the instance's sessions=%u: lower it, or raise sessions=",
				   p->opt.per_source, p->opt.sessions);
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

int netblk_cmd_start(struct sk_buff *skb, struct genl_info *info)
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
		netblk_target_notify_failed(params, err, info->extack ? info->extack->_msg : NULL);
		goto out;
	}
	pr_info("serving %s on %s %pI4:%u, %u bytes a datagram, %u worker%s from cpu %u\n",
		inst->device, inst->addr_dev->name, &inst->addr, inst->port,
		netblk_core_max_io(inst->queues[0].core), inst->nr_queues,
		inst->nr_queues == 1 ? "" : "s", inst->opt.cpu);
	/* first: STARTED must not carry the reopens it forgets (XDP_DROPPED) */
	netblk_monitor_started(inst);	/* the reaper looks at it once a second */
	netblk_target_notify(inst, NETBLK_EVENT_STARTED, 0, 0, NULL);
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

int netblk_cmd_stop(struct sk_buff *skb, struct genl_info *info)
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
	err = netblk_instances_stop(!!info->attrs[NETBLK_A_ALL],
				    info->attrs[NETBLK_A_PORT] ? nla_get_u16(info->attrs[NETBLK_A_PORT]) : 0,
				    NETBLK_REASON_ASKED, NETBLK_STOP_WAIT, &released, &stopping);
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
int netblk_dump_list(struct sk_buff *skb, struct netlink_callback *cb)
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

/*
 * netblkctl added netblk's XDP program again to a NIC whose driver dropped
 * it (monitor.c): its waiting instances serve again.
 */
int netblk_cmd_xdp_ready(struct sk_buff *skb, struct genl_info *info)
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
