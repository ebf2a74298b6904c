// SPDX-License-Identifier: GPL-2.0
/*
 * The server's events on the family's "events" multicast group: an instance
 * started, waits for its NIC, serves again, stops, failed to start, or its
 * disk failed a request.  The instances raise them on their notifier chain
 * (instance.c), which knows nothing of netlink; this listens on it.  Raised
 * under netblk_lock, as they always were: nothing here takes it.
 */
#include "target.h"
#include "family.h"

#include <net/genetlink.h>
#include <net/netlink.h>

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

static void netblk_event_instance(enum netblk_event event, const struct netblk_target_event *ev)
{
	struct sk_buff *skb;
	void *hdr;

	skb = netblk_event_new(event, ev->err, ev->msg, &hdr);
	if (!skb)
		return;
	if ((ev->reason && nla_put_u32(skb, NETBLK_A_REASON, ev->reason)) ||
	    netblk_put_instance(skb, ev->inst, 0)) {
		nlmsg_free(skb);
		return;
	}
	netblk_event_send(skb, hdr);
}

/* A START refused: what was asked, and the kernel's answer. */
static void netblk_event_failed(const struct netblk_target_event *ev)
{
	const struct netblk_start_params *p = ev->params;
	struct sk_buff *skb;
	void *hdr;

	skb = netblk_event_new(NETBLK_EVENT_FAILED, ev->err, ev->msg, &hdr);
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

static int netblk_event_call(struct notifier_block *nb, unsigned long event, void *data)
{
	const struct netblk_target_event *ev = data;

	if (ev->inst)
		netblk_event_instance(event, ev);
	else
		netblk_event_failed(ev);
	return NOTIFY_DONE;
}

static struct notifier_block netblk_event_notifier = {
	.notifier_call = netblk_event_call,
};

/* Once the family is registered: the events have a group to go to. */
int netblk_event_init(void)
{
	return netblk_target_register_notifier(&netblk_event_notifier);
}

void netblk_event_exit(void)
{
	netblk_target_unregister_notifier(&netblk_event_notifier);
}
