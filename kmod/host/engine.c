// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's request engine: the one place that takes a
 * queue's lock, calls its core, arms its timer, lets go, ends the requests
 * the core finished and has what it recorded sent.  The block layer's
 * requests (blk.c, on the queue of their hardware queue), the transport's
 * answers (its softirq) and the timers all come through here.  Each of an
 * attachment's queues is a core of its own; what spans them (stop, fail,
 * give up, the counters) loops over them.
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

static void netblk_host_timer_at(struct netblk_host_queue *q, u64 when_ns)
{
	if (hrtimer_is_queued(&q->timer) &&
	    ktime_to_ns(hrtimer_get_expires(&q->timer)) <= when_ns)
		return;
	hrtimer_start(&q->timer, ns_to_ktime(when_ns), HRTIMER_MODE_ABS_SOFT);
}

/* Under the lock, after a call to the core. */
static void netblk_host_arm_timer(struct netblk_host_queue *q)
{
	u64 when;

	if (q->dead)
		return;
	when = netblk_host_core_timer_ns(q->core, ktime_get_ns());
	if (when)
		netblk_host_timer_at(q, when);
}

/* ---- after the core: unlock, end, send ---- */

/* What must wait for the lock to go, after a call to the core. */
enum netblk_host_after {
	NETBLK_HOST_END,	/* end what the core finished; nothing to send */
	NETBLK_HOST_SEND,	/* process context: send what was recorded, then end */
	NETBLK_HOST_KICK,	/* a softirq: end, then have the transport's worker send */
};

/* End the requests nothing holds any more, outside the lock. */
static void netblk_host_end_done(struct netblk_host_queue *q)
{
	struct llist_node *list = llist_del_all(&q->done);
	struct netblk_host_cmd *cmd, *next;

	llist_for_each_entry_safe(cmd, next, list, done)
		netblk_host_rq_end(blk_mq_rq_from_pdu(cmd));
}

/*
 * Let go of the lock taken for a call to the core, then end what it
 * finished -- ending may start more I/O on this disk, so never under the
 * lock -- and send what it recorded as @after says.
 */
static void netblk_host_unlock(struct netblk_host_queue *q, enum netblk_host_after after)
{
	const struct netblk_host_transport_ops *transport = q->att->transport;
	bool kick = after == NETBLK_HOST_KICK && transport->recorded(q);

	spin_unlock_bh(&q->lock);
	if (after == NETBLK_HOST_SEND)
		transport->flush(q);
	netblk_host_end_done(q);
	if (kick)
		transport->kick(q);
}

/* The same, with the timer armed first for what the call left waiting. */
static void netblk_host_arm_unlock(struct netblk_host_queue *q, enum netblk_host_after after)
{
	netblk_host_arm_timer(q);
	netblk_host_unlock(q, after);
}

static enum hrtimer_restart netblk_host_timer_fn(struct hrtimer *timer)
{
	struct netblk_host_queue *q = container_of(timer, struct netblk_host_queue, timer);
	u64 next;

	spin_lock_bh(&q->lock);
	next = q->dead ? 0 : netblk_host_core_expire(q->core, ktime_get_ns());
	if (next)
		netblk_host_timer_at(q, next);
	netblk_host_unlock(q, NETBLK_HOST_KICK);
	return HRTIMER_NORESTART;
}

/* ---- the core's callbacks, under the queue's lock ---- */

static void netblk_host_send(struct netblk_host_queue *q, const uint8_t *header,
			     uint32_t tag, uint32_t at, uint32_t len)
{
	/* NULL: HELLO, INFO */
	q->att->transport->record(q, header, tag, netblk_host_tag_to_rq(q, tag), at, len);
}

static void netblk_host_read(struct netblk_host_queue *q, uint32_t tag, uint32_t at,
			     void *frame, uint32_t len)
{
	struct request *rq = netblk_host_tag_to_rq(q, tag);

	if (rq)
		q->att->transport->read(q, frame, rq, at, len);
}

static void netblk_host_complete(struct netblk_host_queue *q, uint32_t tag, uint16_t status)
{
	struct request *rq;
	struct netblk_host_cmd *cmd;

	if (tag == q->info_tag) {
		q->info_status = status ? -(int)status : 0;
		complete(&q->info_done);
		return;
	}
	rq = netblk_host_tag_to_rq(q, tag);
	if (WARN_ON_ONCE(!rq))
		return;
	cmd = blk_mq_rq_to_pdu(rq);
	cmd->status = status;
	if (status) {
		q->stats.errors++;
		q->att->transport->purge(q, tag);
	}
	netblk_host_rq_put_locked(q, rq);	/* the core's */
}

/* Each queue's new session asks INFO again: any of them may see the growth first. */
static void netblk_host_resized(struct netblk_host_queue *q, uint64_t size_bytes)
{
	struct netblk_attachment *att = q->att;

	if (size_bytes <= READ_ONCE(att->info.size_bytes))
		return;	/* another queue told it already */
	WRITE_ONCE(att->info.size_bytes, size_bytes);
	queue_work(system_wq, &att->resize_work);	/* blk.c's; it sleeps: not in this softirq */
}

static void netblk_host_changed(struct netblk_host_queue *q,
				enum netblk_host_change_reason reason)
{
	static const char *const what[] = {
		[NETBLK_HOST_OTHER_DEVICE] = "serves another device now",
		[NETBLK_HOST_SMALLER] = "serves a smaller device now",
		[NETBLK_HOST_READ_ONLY] = "serves the device read-only now",
		[NETBLK_HOST_GEOMETRY] = "serves other sectors, or less a datagram, now",
		[NETBLK_HOST_INFO_REFUSED] = "refused INFO after it was started again",
	};
	struct netblk_attachment *att = q->att;

	/* each queue's session finds it: the others' I/O fails as theirs does */
	pr_err("/dev/%s: %pI4:%u %s (queue %u): its I/O fails from now on, nothing is written to it; detach it (and attach again for what it serves)\n",
	       att->name, &att->params.addr, att->params.port,
	       reason < ARRAY_SIZE(what) && what[reason] ? what[reason] : "changed", q->index);
}

static const struct netblk_host_core_ops netblk_host_engine_core_ops = {
	.send = netblk_host_send,
	.read = netblk_host_read,
	.complete = netblk_host_complete,
	.resized = netblk_host_resized,
	.changed = netblk_host_changed,
};

/* ---- what the transport hands up: an answer, in its softirq ---- */

static void netblk_host_receive(struct netblk_host_queue *q, const u8 *payload, u32 linear,
				u32 payload_len, void *frame)
{
	spin_lock_bh(&q->lock);
	q->stats.rx_datagrams++;
	netblk_host_core_receive(q->core, payload, linear, payload_len, frame, ktime_get_ns());
	netblk_host_arm_unlock(q, NETBLK_HOST_KICK);
}

/* ---- what blk.c and attach.c ask ---- */

/* No memory yet: what every later step (and netblk_host_engine_destroy) may find. */
void netblk_host_engine_init(struct netblk_attachment *att,
			     const struct netblk_host_transport_ops *transport)
{
	att->transport = transport;
	spin_lock_init(&att->abort_lock);
}

static int netblk_host_core_start(struct netblk_host_queue *q)
{
	const struct netblk_attach_params *p = &q->att->params;
	struct netblk_host_config cfg = {
		.requests = p->opt.queue_depth + 1,	/* and INFO's */
		.datagrams = p->opt.queue_depth * NETBLK_HOST_PIECES + 1,
		.deadline_ns = (u64)p->opt.timeout_ms * NSEC_PER_MSEC,
		.seed = get_random_u64(),
		.read_only = p->read_only,
		.keyed = p->has_key,
		.ops = &netblk_host_engine_core_ops,
		.queue = q,
	};

	memcpy(cfg.key, p->key, sizeof(cfg.key));
	q->info_tag = p->opt.queue_depth;
	return netblk_host_core_create(&cfg, &q->core);
}

/* Queue @q's memory, then its core; undone by netblk_host_queue_destroy(). */
static int netblk_host_queue_create(struct netblk_host_queue *q)
{
	const struct netblk_host_transport_ops *transport = q->att->transport;
	int err = transport->create(q);

	if (err)
		return err;
	err = netblk_host_core_start(q);
	if (err)
		transport->destroy(q);
	return err;
}

static void netblk_host_queue_kill(struct netblk_host_queue *q)
{
	spin_lock_bh(&q->lock);
	q->dead = true;	/* the timer is not armed again, new requests fail */
	spin_unlock_bh(&q->lock);
}

int netblk_host_engine_create(struct netblk_attachment *att, u32 index)
{
	enum netblk_host_abort gone;
	struct netblk_host_queue *q;
	int err;

	if (WARN_ON_ONCE(index != att->nr_queues || index >= NETBLK_HOST_QUEUES_MAX))
		return -EINVAL;
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	q->att = att;
	q->index = index;
	spin_lock_init(&q->lock);
	init_llist_head(&q->done);
	init_completion(&q->info_done);
	hrtimer_init(&q->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	q->timer.function = netblk_host_timer_fn;
	err = netblk_host_queue_create(q);
	if (err) {
		kfree(q);
		return err;
	}
	/* counted under abort_lock: a give-up sees it, or it sees the give-up */
	spin_lock_bh(&att->abort_lock);
	att->queues[index] = q;
	att->nr_queues = index + 1;
	gone = att->abort;
	spin_unlock_bh(&att->abort_lock);
	if (gone) {
		netblk_host_queue_kill(q);
		complete(&q->info_done);	/* nothing to wait for */
	}
	return 0;
}

void netblk_host_engine_destroy(struct netblk_attachment *att)
{
	u32 i;

	for (i = 0; i < att->nr_queues; i++) {
		struct netblk_host_queue *q = att->queues[i];

		netblk_host_core_destroy(q->core);
		att->transport->destroy(q);
		kfree(q);
		att->queues[i] = NULL;
	}
	att->nr_queues = 0;
}

int netblk_host_engine_connect(struct netblk_host_queue *q, struct net *net,
			       struct netlink_ext_ack *extack)
{
	int err = q->att->transport->open(q, net, netblk_host_receive, extack);

	if (err)
		return err;
	spin_lock_bh(&q->lock);
	if (q->dead) {
		/* given up before it connected: nothing of it may start the timer */
		spin_unlock_bh(&q->lock);
		return 0;
	}
	netblk_host_core_connect(q->core, q->info_tag, ktime_get_ns());
	netblk_host_arm_unlock(q, NETBLK_HOST_SEND);
	return 0;
}

/* blk-mq's queue_rq: may sleep (BLK_MQ_F_BLOCKING), so it sends itself. */
int netblk_host_engine_queue(struct netblk_host_queue *q, struct request *rq,
			     enum netblk_io_op op)
{
	int err;

	refcount_set(&((struct netblk_host_cmd *)blk_mq_rq_to_pdu(rq))->holds, 1);	/* the core's */
	spin_lock_bh(&q->lock);
	if (q->dead) {
		spin_unlock_bh(&q->lock);
		return -EIO;
	}
	err = netblk_host_core_queue(q->core, rq->tag, op, (u64)blk_rq_pos(rq) << SECTOR_SHIFT,
				     blk_rq_bytes(rq), !!(rq->cmd_flags & REQ_FUA),
				     ktime_get_ns());
	if (err != -EAGAIN)
		q->stats.requests++;
	if (err && err != -EAGAIN)
		q->stats.errors++;	/* refused at once: unreachable (-EIO), or -EINVAL */
	netblk_host_arm_unlock(q, NETBLK_HOST_SEND);
	return err;
}

void netblk_host_engine_stop(struct netblk_attachment *att)
{
	u32 i;

	for (i = 0; i < att->nr_queues; i++)
		netblk_host_queue_kill(att->queues[i]);
	for (i = 0; i < att->nr_queues; i++) {
		att->transport->stop_rx(att->queues[i]);
		hrtimer_cancel(&att->queues[i]->timer);
	}
}

void netblk_host_engine_close(struct netblk_attachment *att)
{
	u32 i;

	for (i = 0; i < att->nr_queues; i++) {
		att->transport->close(att->queues[i]);
		att->transport->drop(att->queues[i]);
	}
}

/* Fail what the first @n queues hold. */
static void netblk_host_fail_queues(struct netblk_attachment *att, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++) {
		struct netblk_host_queue *q = att->queues[i];

		spin_lock_bh(&q->lock);
		netblk_host_core_cancel_all(q->core, EIO);
		netblk_host_unlock(q, NETBLK_HOST_END);
	}
}

void netblk_host_engine_fail_all(struct netblk_attachment *att)
{
	netblk_host_fail_queues(att, att->nr_queues);
}

/*
 * Give up attaching @att for @why: its INFO waits end, the requests it has
 * outstanding (the partition scan's) fail EIO and new ones fail at once, so
 * that add_disk() returns; its attacher then undoes it.  Any context but a
 * softirq.  False when it is attached already.  Here, not in attach.c,
 * because blk-mq's timeout (blk.c) gives up too.  The queues made so far
 * are under netblk_lock's or the attacher's watch: the attacher makes the
 * next one only while attaching is still true (abort_lock), and a queue
 * made after a give-up finds abort set before it connects.
 */
bool netblk_host_give_up(struct netblk_attachment *att, enum netblk_host_abort why)
{
	bool attaching;
	u32 i, n;

	spin_lock_bh(&att->abort_lock);
	attaching = att->attaching;
	if (attaching && !att->abort)
		att->abort = why;
	n = READ_ONCE(att->nr_queues);
	spin_unlock_bh(&att->abort_lock);
	if (!attaching)
		return false;
	/* the queues counted then: the attacher may be making the next (it sees abort) */
	for (i = 0; i < n; i++)
		netblk_host_queue_kill(att->queues[i]);
	netblk_host_fail_queues(att, n);
	for (i = 0; i < n; i++)
		complete(&att->queues[i]->info_done);
	return true;
}

bool netblk_host_engine_gave_up(struct netblk_attachment *att)
{
	struct netblk_host_stats stats;
	bool gave_up = false;
	u32 i;

	for (i = 0; i < att->nr_queues; i++) {
		struct netblk_host_queue *q = att->queues[i];

		spin_lock_bh(&q->lock);
		netblk_host_core_read_stats(q->core, &stats);
		spin_unlock_bh(&q->lock);
		gave_up |= stats.outages;
	}
	return gave_up;
}

#define NETBLK_HOST_KERNEL_ADD_queue(name)
#define NETBLK_HOST_KERNEL_ADD_core(name)
#define NETBLK_HOST_KERNEL_ADD_kernel(name) kernel->name += q->stats.name;
#define NETBLK_HOST_KERNEL_ADD(NAME, name, nr, where, ...) NETBLK_HOST_KERNEL_ADD_##where(name)

/* Adds hardware queue @q's kernel counters to @kernel; its core's are *@core. */
static void netblk_host_read_one(struct netblk_host_queue *q, struct netblk_host_stats *core,
				 struct netblk_host_kernel_stats *kernel)
{
	spin_lock_bh(&q->lock);
	netblk_host_core_read_stats(q->core, core);
	NETBLK_HOST_STATS(NETBLK_HOST_KERNEL_ADD)
	spin_unlock_bh(&q->lock);
}

/* One hardware queue's counters alone (ATTACHED's NETBLK_A_QUEUE_LIST). */
void netblk_host_read_queue_stats(struct netblk_host_queue *q, struct netblk_host_stats *core,
				  struct netblk_host_kernel_stats *kernel)
{
	memset(kernel, 0, sizeof(*kernel));
	netblk_host_read_one(q, core, kernel);
}

void netblk_host_read_stats(struct netblk_attachment *att, struct netblk_host_stats *core,
			    struct netblk_host_kernel_stats *kernel)
{
	struct netblk_host_stats one;
	u32 i;

	memset(core, 0, sizeof(*core));
	memset(kernel, 0, sizeof(*kernel));
	for (i = 0; i < att->nr_queues; i++) {
		netblk_host_read_one(att->queues[i], &one, kernel);
		netblk_host_stats_add(core, &one);
	}
}
