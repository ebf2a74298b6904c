// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's request engine: the one place that takes the
 * attachment's lock, calls the core, arms the core's timer, lets go, ends
 * the requests the core finished and has what it recorded sent.  The block
 * layer's requests (blk.c), the transport's answers (its softirq) and the
 * timer all come through here.
 *
 * The core calls back through netblk_host_engine_core_ops (host_api.h),
 * and the transport is reached through att->transport alone: this file
 * names neither blk.c nor transport.c, and they hand their events up
 * through the pointers they were given (blk-mq's ops, the transport's rx).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/random.h>
#include <linux/timekeeping.h>

#include "host.h"

/* ---- the core's timer ---- */

static void netblk_host_timer_at(struct netblk_attachment *att, u64 when_ns)
{
	if (hrtimer_is_queued(&att->timer) &&
	    ktime_to_ns(hrtimer_get_expires(&att->timer)) <= when_ns)
		return;
	hrtimer_start(&att->timer, ns_to_ktime(when_ns), HRTIMER_MODE_ABS_SOFT);
}

/* Under the lock, after a call to the core. */
static void netblk_host_arm_timer(struct netblk_attachment *att)
{
	u64 when;

	if (att->dead)
		return;
	when = netblk_host_core_timer_ns(att->core, ktime_get_ns());
	if (when)
		netblk_host_timer_at(att, when);
}

/* ---- after the core: unlock, end, send ---- */

/* What must wait for the lock to go, after a call to the core. */
enum netblk_host_after {
	NETBLK_HOST_END,	/* end what the core finished; nothing to send */
	NETBLK_HOST_SEND,	/* process context: send what was recorded, then end */
	NETBLK_HOST_KICK,	/* a softirq: end, then have the transport's worker send */
};

/* End the requests nothing holds any more, outside the lock. */
static void netblk_host_end_done(struct netblk_attachment *att)
{
	struct llist_node *list = llist_del_all(&att->done);
	struct netblk_host_cmd *cmd, *next;

	llist_for_each_entry_safe(cmd, next, list, done)
		netblk_host_rq_end(blk_mq_rq_from_pdu(cmd));
}

/*
 * Let go of the lock taken for a call to the core, then end what it
 * finished -- ending may start more I/O on this disk, so never under the
 * lock -- and send what it recorded as @after says.
 */
static void netblk_host_unlock(struct netblk_attachment *att, enum netblk_host_after after)
{
	bool kick = after == NETBLK_HOST_KICK && att->transport->recorded(att);

	spin_unlock_bh(&att->lock);
	if (after == NETBLK_HOST_SEND)
		att->transport->flush(att);
	netblk_host_end_done(att);
	if (kick)
		att->transport->kick(att);
}

/* The same, with the timer armed first for what the call left waiting. */
static void netblk_host_arm_unlock(struct netblk_attachment *att, enum netblk_host_after after)
{
	netblk_host_arm_timer(att);
	netblk_host_unlock(att, after);
}

static enum hrtimer_restart netblk_host_timer_fn(struct hrtimer *timer)
{
	struct netblk_attachment *att = container_of(timer, struct netblk_attachment, timer);
	u64 next;

	spin_lock_bh(&att->lock);
	next = att->dead ? 0 : netblk_host_core_expire(att->core, ktime_get_ns());
	if (next)
		netblk_host_timer_at(att, next);
	netblk_host_unlock(att, NETBLK_HOST_KICK);
	return HRTIMER_NORESTART;
}

/* ---- the core's callbacks, under the lock ---- */

static void netblk_host_send(struct netblk_attachment *att, const uint8_t *header,
			     uint32_t tag, uint32_t at, uint32_t len)
{
	/* NULL: HELLO, INFO */
	att->transport->record(att, header, tag, netblk_host_tag_to_rq(att, tag), at, len);
}

static void netblk_host_read(struct netblk_attachment *att, uint32_t tag, uint32_t at,
			     void *frame, uint32_t len)
{
	struct request *rq = netblk_host_tag_to_rq(att, tag);

	if (rq)
		att->transport->read(att, frame, rq, at, len);
}

static void netblk_host_complete(struct netblk_attachment *att, uint32_t tag, uint16_t status)
{
	struct request *rq;
	struct netblk_host_cmd *cmd;

	if (tag == att->info_tag) {
		att->info_status = status ? -(int)status : 0;
		complete(&att->info_done);
		return;
	}
	rq = netblk_host_tag_to_rq(att, tag);
	if (WARN_ON_ONCE(!rq))
		return;
	cmd = blk_mq_rq_to_pdu(rq);
	cmd->status = status;
	if (status) {
		att->stats.errors++;
		att->transport->purge(att, tag);
	}
	netblk_host_rq_put_locked(att, rq);	/* the core's */
}

static void netblk_host_resized(struct netblk_attachment *att, uint64_t size_bytes)
{
	WRITE_ONCE(att->info.size_bytes, size_bytes);
	queue_work(system_wq, &att->resize_work);	/* blk.c's; it sleeps: not in this softirq */
}

static void netblk_host_changed(struct netblk_attachment *att,
				enum netblk_host_change_reason reason)
{
	static const char *const what[] = {
		[NETBLK_HOST_OTHER_DEVICE] = "serves another device now",
		[NETBLK_HOST_SMALLER] = "serves a smaller device now",
		[NETBLK_HOST_READ_ONLY] = "serves the device read-only now",
		[NETBLK_HOST_GEOMETRY] = "serves other sectors, or less a datagram, now",
		[NETBLK_HOST_INFO_REFUSED] = "refused INFO after it was started again",
	};

	pr_err("/dev/%s: %pI4:%u %s: its I/O fails from now on, nothing is written to it; detach it (and attach again for what it serves)\n",
	       att->name, &att->params.addr, att->params.port,
	       reason < ARRAY_SIZE(what) && what[reason] ? what[reason] : "changed");
}

static const struct netblk_host_core_ops netblk_host_engine_core_ops = {
	.send = netblk_host_send,
	.read = netblk_host_read,
	.complete = netblk_host_complete,
	.resized = netblk_host_resized,
	.changed = netblk_host_changed,
};

/* ---- what the transport hands up: an answer, in its softirq ---- */

static void netblk_host_receive(struct netblk_attachment *att, const u8 *payload, u32 linear,
				u32 payload_len, void *frame)
{
	spin_lock_bh(&att->lock);
	att->stats.rx_datagrams++;
	netblk_host_core_receive(att->core, payload, linear, payload_len, frame, ktime_get_ns());
	netblk_host_arm_unlock(att, NETBLK_HOST_KICK);
}

/* ---- what blk.c and attach.c ask ---- */

/* No memory yet: what every later step (and netblk_host_engine_destroy) may find. */
void netblk_host_engine_init(struct netblk_attachment *att,
			     const struct netblk_host_transport_ops *transport)
{
	att->transport = transport;
	spin_lock_init(&att->lock);
	init_llist_head(&att->done);
	hrtimer_init(&att->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	att->timer.function = netblk_host_timer_fn;
}

static int netblk_host_core_start(struct netblk_attachment *att)
{
	struct netblk_host_config cfg = {
		.requests = att->params.opt.queue_depth + 1,	/* and INFO's */
		.datagrams = att->params.opt.queue_depth * NETBLK_HOST_PIECES + 1,
		.deadline_ns = (u64)att->params.opt.timeout_ms * NSEC_PER_MSEC,
		.seed = get_random_u64(),
		.read_only = att->params.read_only,
		.keyed = att->params.has_key,
		.ops = &netblk_host_engine_core_ops,
		.att = att,
	};

	memcpy(cfg.key, att->params.key, sizeof(cfg.key));
	att->info_tag = att->params.opt.queue_depth;
	return netblk_host_core_create(&cfg, &att->core);
}

/* The transport's memory, then the core. */
int netblk_host_engine_create(struct netblk_attachment *att)
{
	int err = att->transport->create(att);

	if (err)
		return err;
	err = netblk_host_core_start(att);
	if (err)
		att->transport->destroy(att);
	return err;
}

/* What netblk_host_engine_create() made, whatever of it there is. */
void netblk_host_engine_destroy(struct netblk_attachment *att)
{
	netblk_host_core_destroy(att->core);
	att->core = NULL;
	att->transport->destroy(att);
}

int netblk_host_engine_connect(struct netblk_attachment *att, struct net *net,
			       struct netlink_ext_ack *extack)
{
	int err = att->transport->open(att, net, netblk_host_receive, extack);

	if (err)
		return err;
	spin_lock_bh(&att->lock);
	netblk_host_core_connect(att->core, att->info_tag, ktime_get_ns());
	netblk_host_arm_unlock(att, NETBLK_HOST_SEND);
	return 0;
}

/* blk-mq's queue_rq: may sleep (BLK_MQ_F_BLOCKING), so it sends itself. */
int netblk_host_engine_queue(struct netblk_attachment *att, struct request *rq,
			     enum netblk_io_op op)
{
	int err;

	refcount_set(&((struct netblk_host_cmd *)blk_mq_rq_to_pdu(rq))->holds, 1);	/* the core's */
	spin_lock_bh(&att->lock);
	if (att->dead) {
		spin_unlock_bh(&att->lock);
		return -EIO;
	}
	err = netblk_host_core_queue(att->core, rq->tag, op, (u64)blk_rq_pos(rq) << SECTOR_SHIFT,
				     blk_rq_bytes(rq), !!(rq->cmd_flags & REQ_FUA),
				     ktime_get_ns());
	if (err != -EAGAIN)
		att->stats.requests++;
	if (err && err != -EAGAIN)
		att->stats.errors++;	/* refused at once: unreachable (-EIO), or -EINVAL */
	netblk_host_arm_unlock(att, NETBLK_HOST_SEND);
	return err;
}

void netblk_host_engine_stop(struct netblk_attachment *att)
{
	spin_lock_bh(&att->lock);
	att->dead = true;	/* the timer is not armed again, new requests fail */
	spin_unlock_bh(&att->lock);
	att->transport->stop_rx(att);
	hrtimer_cancel(&att->timer);
}

void netblk_host_engine_close(struct netblk_attachment *att)
{
	att->transport->close(att);
	att->transport->drop(att);
}

void netblk_host_engine_fail_all(struct netblk_attachment *att)
{
	spin_lock_bh(&att->lock);
	netblk_host_core_cancel_all(att->core, EIO);
	netblk_host_unlock(att, NETBLK_HOST_END);
}

/*
 * Give up attaching @att for @why: its INFO wait ends, the requests it has
 * outstanding (the partition scan's) fail EIO and new ones fail at once, so
 * that add_disk() returns; its attacher then undoes it.  Any context but a
 * softirq.  False when it is attached already.  Here, not in attach.c,
 * because blk-mq's timeout (blk.c) gives up too.
 */
bool netblk_host_give_up(struct netblk_attachment *att, enum netblk_host_abort why)
{
	bool attaching;

	spin_lock_bh(&att->lock);
	attaching = att->attaching;
	if (attaching) {
		if (!att->abort)
			att->abort = why;
		att->dead = true;
	}
	spin_unlock_bh(&att->lock);
	if (!attaching)
		return false;
	netblk_host_engine_fail_all(att);
	complete(&att->info_done);
	return true;
}

void netblk_host_read_stats(struct netblk_attachment *att, struct netblk_host_stats *core,
			    struct netblk_host_kernel_stats *kernel)
{
	spin_lock_bh(&att->lock);
	netblk_host_core_read_stats(att->core, core);
	*kernel = att->stats;
	spin_unlock_bh(&att->lock);
}
