// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's netlink commands: ATTACH, DETACH and ATTACHED.
 * The family's ops table is genl.c's; what both sides' handlers share,
 * common/family.c's.
 */
#include "family.h"	/* first: pr_fmt */
#include "host.h"
#include "ctl.h"

#include <net/genetlink.h>
#include <net/netlink.h>

/*
 * Each counter of an attachment and its attribute in NETBLK_A_HOST_STATS:
 * netblk_counters.h's NETBLK_HOST_STATS, in the core's struct or the kernel side's.
 */
#define NETBLK_HS_ROW_queue(NAME, name) { NETBLK_HS_##NAME, 0, offsetof(struct netblk_host_stats, name) },
#define NETBLK_HS_ROW_core(NAME, name) { NETBLK_HS_##NAME, 0, offsetof(struct netblk_host_stats, name) },
#define NETBLK_HS_ROW_kernel(NAME, name) { NETBLK_HS_##NAME, 1, offsetof(struct netblk_host_kernel_stats, name) },
#define NETBLK_HS_ROW(NAME, name, nr, where, ...) NETBLK_HS_ROW_##where(NAME, name)
struct netblk_host_stat_field {
	u16 attr;
	u16 kernel;	/* in struct netblk_host_kernel_stats, not the core's */
	u16 offset;
};

static const struct netblk_host_stat_field netblk_host_stat_fields[] = {
	NETBLK_HOST_STATS(NETBLK_HS_ROW)
};

/* What each hardware queue's NETBLK_Q_HOST_STATS holds (netblk_genl.h): how work spreads. */
static const struct netblk_host_stat_field netblk_host_queue_stat_fields[] = {
	NETBLK_HS_ROW_kernel(REQUESTS, requests)
	NETBLK_HS_ROW_queue(COMPLETED, completed)
	NETBLK_HS_ROW_core(SENDS, sends)
	NETBLK_HS_ROW_queue(TIMEOUTS, timeouts)
	NETBLK_HS_ROW_core(SESSIONS_OPENED, sessions_opened)
	NETBLK_HS_ROW_core(OUTSTANDING, outstanding)
};

/* A nest @attr of @fields' counters, read from @core or @kernel. */
static int netblk_put_host_stat_rows(struct sk_buff *skb, int attr,
				     const struct netblk_host_stats *core,
				     const struct netblk_host_kernel_stats *kernel,
				     const struct netblk_host_stat_field *fields, unsigned int n)
{
	struct nlattr *nest = nla_nest_start(skb, attr);
	unsigned int i;

	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		const void *base = fields[i].kernel ? (const void *)kernel : (const void *)core;
		const u64 *value = base + fields[i].offset;

		if (nla_put_u64_64bit(skb, fields[i].attr, *value, NETBLK_HS_PAD)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int netblk_put_host_stats(struct sk_buff *skb, struct netblk_attachment *att)
{
	struct netblk_host_kernel_stats kernel;
	struct netblk_host_stats core;

	/* every counter but the padding attribute has its row */
	BUILD_BUG_ON(ARRAY_SIZE(netblk_host_stat_fields) != NETBLK_HS_MAX - 1);
	/* the core's reasons are the uapi's */
	BUILD_BUG_ON((int)NETBLK_HOST_OTHER_DEVICE != (int)NETBLK_HOST_CHANGE_OTHER_DEVICE ||
		     (int)NETBLK_HOST_SMALLER != (int)NETBLK_HOST_CHANGE_SMALLER ||
		     (int)NETBLK_HOST_READ_ONLY != (int)NETBLK_HOST_CHANGE_READ_ONLY ||
		     (int)NETBLK_HOST_GEOMETRY != (int)NETBLK_HOST_CHANGE_GEOMETRY ||
		     (int)NETBLK_HOST_INFO_REFUSED != (int)NETBLK_HOST_CHANGE_INFO_REFUSED);
	netblk_host_read_stats(att, &core, &kernel);
	return netblk_put_host_stat_rows(skb, NETBLK_A_HOST_STATS, &core, &kernel,
					 netblk_host_stat_fields,
					 ARRAY_SIZE(netblk_host_stat_fields));
}

/* Each hardware queue's share (NETBLK_A_QUEUE_LIST), for a device of several. */
static int netblk_put_host_queues(struct sk_buff *skb, struct netblk_attachment *att)
{
	struct netblk_host_kernel_stats kernel;
	struct netblk_host_stats core;
	struct nlattr *list, *one;
	u32 i;

	if (att->nr_queues < 2)
		return 0;
	list = nla_nest_start(skb, NETBLK_A_QUEUE_LIST);
	if (!list)
		return -EMSGSIZE;
	for (i = 0; i < att->nr_queues; i++) {
		one = nla_nest_start(skb, NETBLK_A_QUEUE);
		if (!one)
			goto cancel;
		netblk_host_read_queue_stats(att->queues[i], &core, &kernel);
		if (netblk_put_host_stat_rows(skb, NETBLK_Q_HOST_STATS, &core, &kernel,
					      netblk_host_queue_stat_fields,
					      ARRAY_SIZE(netblk_host_queue_stat_fields)))
			goto cancel;
		nla_nest_end(skb, one);
	}
	nla_nest_end(skb, list);
	return 0;

cancel:
	nla_nest_cancel(skb, list);
	return -EMSGSIZE;
}

/* ATTACH's knobs (netblk_options.h) in struct netblk_attach_options. */
#define NETBLK_ATTACH_ROW(NAME, name, nr, type, lo, hi, def, ...) \
	NETBLK_OPTION_ROW(struct netblk_attach_options, NAME, name, nr, type, lo, hi, def)
static const struct netblk_option_row netblk_attach_rows[] = {
	NETBLK_ATTACH_OPTIONS(NETBLK_ATTACH_ROW)
};
#undef NETBLK_ATTACH_ROW

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
	    netblk_options_put(skb, netblk_attach_rows, ARRAY_SIZE(netblk_attach_rows), &p->opt) ||
	    nla_put_u32(skb, NETBLK_A_AUTH, p->has_key ? NETBLK_AUTH_HEADER : NETBLK_AUTH_NONE) ||
	    nla_put_u64_64bit(skb, NETBLK_A_UPTIME_MS,
			      div_u64(ktime_get_boottime_ns() - att->attached_ns, NSEC_PER_MSEC),
			      NETBLK_A_PAD) ||
	    (stats && (netblk_put_host_stats(skb, att) || netblk_put_host_queues(skb, att)))) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	if (stats) {
		const struct netblk_host_core *hosts[NETBLK_HOST_QUEUES_MAX];
		struct netblk_latency_source src = { .hosts = hosts, .nr_hosts = att->nr_queues };
		u32 i;

		for (i = 0; i < att->nr_queues; i++)
			hosts[i] = att->queues[i]->core;

		/* one that does not fit the reader's buffer: listed without it ("n/a") */
		netblk_put_latency(skb, &src);
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int netblk_parse_attach(struct genl_info *info, struct netblk_attach_params *p)
{
	struct nlattr **a = info->attrs;
	u64 given;		/* none has a default depending on another */

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
	netblk_options_get(netblk_attach_rows, ARRAY_SIZE(netblk_attach_rows), a, &p->opt, &given);
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

int netblk_cmd_attach(struct sk_buff *skb, struct genl_info *info)
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

int netblk_cmd_detach(struct sk_buff *skb, struct genl_info *info)
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
int netblk_dump_attached(struct sk_buff *skb, struct netlink_callback *cb)
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
