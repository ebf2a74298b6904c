// SPDX-License-Identifier: GPL-2.0
/*
 * The receive path: each instance registers a net device of its own,
 * netblk<port>, whose only job is to be the target the NIC's XDP program
 * redirects the port's datagrams to (bpf_redirect_map into a devmap).  The
 * devmap hands it the frames themselves, in bulk, from the NIC's NAPI
 * softirq: ndo_xdp_xmit is where a request enters the instance, and the
 * frame is kept, not copied.  This is veth's and cpumap's contract: the
 * device owns the frames it accepts.
 *
 * An instance of several queues takes each frame to the queue of the
 * session it names (netblk_core_queue_of), whatever CPU it arrived on, and
 * anything else -- a HELLO opening a session -- to the queue of that CPU:
 * so a session is served by one worker for its life, and the NIC's RSS
 * spreads sessions over the queues as it spreads their flows over CPUs.
 */
#include "target.h"
#include "compat.h"

#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>
#include <net/xdp.h>

struct netblk_handoff {
	struct netblk_instance *inst;
};

/*
 * A refusal of a multi-buffer frame: its headers go out in a page of their
 * own, since the frame would take its other buffers along.  The CPU copies
 * only the headers it wrote.  NULL when no page can be had, or the NIC has
 * gone (its rxq with it: netblk_nic_detach).
 */
static struct xdp_frame *netblk_reply_alone(struct netblk_queue *q, struct xdp_frame *frame,
					    u32 len)
{
	struct netblk_instance *inst = q->inst;
	struct page *page = alloc_page(GFP_ATOMIC | __GFP_NOWARN);
	struct xdp_frame *reply = NULL;
	u8 *data;

	if (!page)
		return NULL;
	data = (u8 *)page_address(page) + XDP_PACKET_HEADROOM;
	memcpy(data, frame->data, len);
	rcu_read_lock();
	if (!netblk_nic_gone(inst))
		reply = netblk_buffer_frame(q, data, len);
	rcu_read_unlock();
	put_page(page);		/* the reply's reference is the one left, if any */
	return reply;
}

/* Refusals answered from the receive path, sent in one transmit a bulk. */
#define NETBLK_RX_REPLY_BULK 16

/*
 * Refusals go out from the NIC's own softirq: what it does not take is
 * freed, and counted -- all of them once the NIC has gone.
 */
static void netblk_handoff_reply(struct netblk_queue *q, u32 cpu, struct xdp_frame **replies,
				 u32 n)
{
	int sent = netblk_nic_xmit(q->inst, replies, n);
	u32 i;

	if (sent < 0)
		sent = 0;
	for (i = sent; i < n; i++)
		xdp_return_frame(replies[i]);
	netblk_core_rx_sent(q->core, cpu, sent, n - sent);
}

/* The queue a frame that arrived on @local's CPU is for. */
static struct netblk_queue *netblk_handoff_queue(struct netblk_queue *local, u32 cpu,
						 const struct xdp_frame *frame)
{
	struct netblk_instance *inst = local->inst;

	if (inst->nr_queues == 1)
		return local;
	return &inst->queues[netblk_core_queue_of(local->core, cpu, frame->data, frame->len)];
}

/* Wake the workers of the queues in @queued (a bit each). */
static void netblk_handoff_kick(struct netblk_instance *inst, u64 queued)
{
	u32 i;

	for (i = 0; queued; i++, queued >>= 1)
		if (queued & 1)
			netblk_worker_kick(&inst->queues[i]);
}

static int netblk_handoff_xdp_xmit(struct net_device *dev, int n,
				   struct xdp_frame **frames, u32 flags)
{
	struct netblk_instance *inst = ((struct netblk_handoff *)netdev_priv(dev))->inst;
	struct xdp_frame *replies[NETBLK_RX_REPLY_BULK];
	u32 cpu = smp_processor_id(), nr_replies = 0;
	struct netblk_queue *local = &inst->queues[inst->cpu_queue[cpu]];
	u64 now = ktime_get_ns(), queued = 0;
	int i;

	BUILD_BUG_ON(NETBLK_QUEUES_MAX > 64);	/* a bit each in queued */

	if (unlikely(flags & ~XDP_XMIT_FLAGS_MASK))
		return -EINVAL;

	for (i = 0; i < n; i++) {
		struct netblk_piece frags[NETBLK_FRAGS_MAX];
		struct xdp_frame *frame = frames[i];
		u32 len = frame->len, nr_frags = 0;
		struct netblk_queue *q;

		/* a jumbo datagram in several buffers (xdp.frags) */
		if (unlikely(xdp_frame_has_frags(frame))) {
			nr_frags = netblk_xdp_frame_frags(local, frame, frags, NETBLK_FRAGS_MAX);
			if (nr_frags > NETBLK_FRAGS_MAX) {
				netblk_core_rx_drop(local->core, cpu, NETBLK_DROP_MULTIBUFFER);
				xdp_return_frame(frame);
				continue;
			}
		}
		q = netblk_handoff_queue(local, cpu, frame);
		switch (netblk_core_receive(q->core, cpu, frame, frame->data, &len,
					    frags, nr_frags, now)) {
		case NETBLK_RX_KEPT:
			queued |= BIT_ULL(q->index);
			break;
		case NETBLK_RX_FREE:
			/* dropped, or a READ/INFO whose slots hold all it said */
			queued |= BIT_ULL(q->index);
			xdp_return_frame(frame);
			break;
		case NETBLK_RX_REPLY:
			frame->len = len;
			if (unlikely(nr_frags)) {
				struct xdp_frame *alone = netblk_reply_alone(q, frame, len);

				xdp_return_frame(frame);
				if (!alone) {
					netblk_core_rx_sent(q->core, cpu, 0, 1);
					break;
				}
				frame = alone;
			}
			replies[nr_replies++] = frame;
			if (nr_replies == NETBLK_RX_REPLY_BULK) {
				netblk_handoff_reply(local, cpu, replies, nr_replies);
				nr_replies = 0;
			}
			break;
		}
	}
	if (nr_replies)
		netblk_handoff_reply(local, cpu, replies, nr_replies);
	netblk_handoff_kick(inst, queued);
	/* Every frame is ours now: kept, freed or sent. */
	return n;
}

/* Nothing is meant to be sent through it; what the stack tries is dropped. */
static netdev_tx_t netblk_handoff_start_xmit(struct sk_buff *skb, struct net_device *dev)
{
	dev_core_stats_tx_dropped_inc(dev);
	kfree_skb(skb);
	return NETDEV_TX_OK;
}

static const struct net_device_ops netblk_handoff_ops = {
	.ndo_start_xmit	= netblk_handoff_start_xmit,
	.ndo_xdp_xmit	= netblk_handoff_xdp_xmit,
};

static void netblk_handoff_setup(struct net_device *dev)
{
	dev->netdev_ops = &netblk_handoff_ops;
	dev->type = ARPHRD_NONE;
	dev->flags = IFF_NOARP;
	dev->priv_flags |= IFF_NO_QUEUE;
	dev->hard_header_len = 0;
	dev->addr_len = 0;
	/* Admit any frame: what does not fit the instance is the core's to drop and count. */
	dev->min_mtu = 0;
	dev->max_mtu = ETH_MAX_MTU;
	dev->mtu = ETH_MAX_MTU;
	/* Must be set before registration: the devmap sets up its bulk queue then. */
	netblk_set_xdp_xmit_features(dev);
	/*
	 * The instance's own: it stays in the initial namespace with its NIC,
	 * and `ip link del` has no rtnl_link_ops to delete it by.  Taken down
	 * by hand, the instance stops and says why (monitor.c).
	 */
	netblk_set_netns_immutable(dev);
}

int netblk_handoff_create(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	char name[IFNAMSIZ];
	struct net_device *dev;
	int err;

	snprintf(name, sizeof(name), "netblk%u", inst->port);
	dev = alloc_netdev(sizeof(struct netblk_handoff), name, NET_NAME_PREDICTABLE,
			   netblk_handoff_setup);
	if (!dev)
		return -ENOMEM;
	((struct netblk_handoff *)netdev_priv(dev))->inst = inst;

	rtnl_lock();
	err = register_netdevice(dev);
	if (err)
		goto free;
	err = dev_open(dev, extack);
	if (err)
		goto unregister;
	rtnl_unlock();
	inst->handoff = dev;
	return 0;

unregister:
	unregister_netdevice(dev);
	rtnl_unlock();
	free_netdev(dev);
	NL_SET_ERR_MSG_FMT(extack, "cannot bring up %s", name);
	return err;
free:
	rtnl_unlock();
	free_netdev(dev);
	NL_SET_ERR_MSG_FMT(extack, "cannot register the instance's device %s", name);
	return err;
}

/*
 * Unregistering takes the device out of the NIC program's devmap (the devmap
 * drops entries of a device that goes) and waits out any ndo_xdp_xmit still
 * running: afterwards no request can arrive.
 */
void netblk_handoff_destroy(struct netblk_instance *inst)
{
	if (!inst->handoff)
		return;
	unregister_netdev(inst->handoff);
	free_netdev(inst->handoff);
	inst->handoff = NULL;
}
