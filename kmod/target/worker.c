// SPDX-License-Identifier: GPL-2.0
/*
 * A queue's worker, a kernel thread pinned to one CPU (netblk/<port>, or
 * netblk/<port>-<queue> when the instance has several):
 * it submits what the receive path queued, in a batch under one plug, and
 * answers what the disk finished, in one transmit with one flush (xmit.c).
 */
#include "target.h"

#include <linux/blkdev.h>
#include <linux/kthread.h>
#include <linux/sched.h>

/* ---- the thread ---- */

/*
 * Sleep until kicked, or until the core's next retry is due.  The kick's
 * barrier pairs with the one here: either the worker sees the work, or the
 * producer sees it idle.
 */
static void netblk_worker_sleep(struct netblk_queue *q)
{
	u64 now, due;

	set_current_state(TASK_INTERRUPTIBLE);
	WRITE_ONCE(q->worker_idle, true);
	smp_mb();	/* worker_idle before, the rings after: pairs with the kick */
	now = ktime_get_ns();
	due = netblk_core_next_work(q->core, now);
	/* polled completions come only when polled: no sleeping on them */
	if (q->inst->polled && netblk_core_at_disk(q->core))
		due = 0;
	if (due && !READ_ONCE(q->worker_stop) && !kthread_should_stop()) {
		netblk_core_count_sleep(q->core);
		if (due == NETBLK_NO_WORK) {
			schedule();
		} else {
			ktime_t expires = ns_to_ktime(due - now);

			schedule_hrtimeout_range(&expires, 10 * NSEC_PER_USEC, HRTIMER_MODE_REL);
		}
	}
	__set_current_state(TASK_RUNNING);
	WRITE_ONCE(q->worker_idle, false);
	if (q->inst->polled && netblk_core_at_disk(q->core)) {
		netblk_disk_poll(q);
		cond_resched();
	}
}

static void netblk_worker_check_nic(struct netblk_queue *q)
{
	/* serving again after waiting for the NIC: its failures are forgotten */
	if (unlikely(READ_ONCE(q->tx_rearm))) {
		netblk_core_tx_rearm(q->core);
		clear_bit(NETBLK_TX_FAILED, &q->inst->flags);
		smp_mb__after_atomic();	/* the reaper sees the bit clear once tx_rearm is */
		WRITE_ONCE(q->tx_rearm, false);
	}
	/* the NIC fails every reply: the reaper stops the instance and says why */
	if (unlikely(netblk_core_tx_failure(q->core)) &&
	    !test_and_set_bit(NETBLK_TX_FAILED, &q->inst->flags))
		netblk_reaper_kick(q->inst);
	if (unlikely(test_bit(NETBLK_IO_ERROR_PENDING, &q->inst->flags)))
		netblk_reaper_kick(q->inst);
}

/* One round: submit under one plug, then answer in one transmit. */
static bool netblk_worker_round(struct netblk_queue *q)
{
	struct blk_plug plug;
	u32 submitted, answered;

	netblk_nic_refresh_link(q);
	blk_start_plug(&plug);
	submitted = netblk_core_submit(q->core, ktime_get_ns());
	blk_finish_plug(&plug);
	answered = netblk_core_reply(q->core, ktime_get_ns());
	netblk_worker_check_nic(q);
	return submitted || answered;
}

/*
 * Stopping: nothing new arrives (the handoff device is gone).  Drop what is
 * queued and not yet at the disk, let the disk finish what it has, answer
 * that, and say the instance has drained.  Waits as long as the disk takes:
 * the one who asked to stop waits for it only so long (instance.c).
 */
static void netblk_worker_finish(struct netblk_queue *q)
{
	for (;;) {
		netblk_core_drop_queued(q->core);
		netblk_core_reply(q->core, ktime_get_ns());
		if (!netblk_core_at_disk(q->core))
			break;
		if (q->inst->polled) {
			netblk_disk_poll(q);
			cond_resched();
			continue;
		}
		/* a completion wakes us (see netblk_worker_sleep) */
		set_current_state(TASK_INTERRUPTIBLE);
		WRITE_ONCE(q->worker_idle, true);
		smp_mb();	/* pairs with the kick */
		if (netblk_core_next_work(q->core, ktime_get_ns()))
			schedule_timeout(msecs_to_jiffies(100));
		__set_current_state(TASK_RUNNING);
		WRITE_ONCE(q->worker_idle, false);
	}
	/* what the disk said "again" to in the last round */
	netblk_core_drop_queued(q->core);
	/* complete_all: every waiter, and completion_done() after them, sees it */
	complete_all(&q->drained);
	netblk_reaper_kick(q->inst);	/* the reaper releases it if no one waits */
}

static bool netblk_worker_keep_polling(struct netblk_queue *q, u64 *idle_since)
{
	u64 now;

	if (!q->inst->opt.poll_us)
		return false;
	now = ktime_get_ns();
	if (!*idle_since)
		*idle_since = now;
	if (now - *idle_since >= (u64)q->inst->opt.poll_us * NSEC_PER_USEC)
		return false;
	if (q->inst->polled && netblk_core_at_disk(q->core))
		netblk_disk_poll(q);
	cond_resched();
	cpu_relax();
	return true;
}

static int netblk_worker_fn(void *data)
{
	struct netblk_queue *q = data;
	u64 idle_since = 0;

	while (!READ_ONCE(q->worker_stop) && !kthread_should_stop()) {
		if (netblk_worker_round(q)) {
			idle_since = 0;
			cond_resched();
			continue;
		}
		/* poll= keeps it looking for work a while before sleeping */
		if (netblk_worker_keep_polling(q, &idle_since))
			continue;
		idle_since = 0;
		netblk_worker_sleep(q);
	}
	netblk_worker_finish(q);
	return 0;
}

int netblk_worker_start(struct netblk_queue *q, struct netlink_ext_ack *extack)
{
	struct task_struct *task;

	/* netblk/<port>, or netblk/<port>-<queue> for an instance of several */
	if (q->inst->opt.queues == 1)
		task = kthread_create_on_node(netblk_worker_fn, q, cpu_to_node(q->cpu),
					      "netblk/%u", q->inst->port);
	else
		task = kthread_create_on_node(netblk_worker_fn, q, cpu_to_node(q->cpu),
					      "netblk/%u-%u", q->inst->port, q->index);
	if (IS_ERR(task)) {
		NL_SET_ERR_MSG(extack, "cannot create the worker thread");
		return PTR_ERR(task);
	}
	kthread_bind(task, q->cpu);
	/* held past the thread's exit: a completion may still be waking it */
	get_task_struct(task);
	q->worker = task;
	wake_up_process(task);
	return 0;
}

/* Tell the worker to drain and leave; q->drained completes when it has. */
void netblk_worker_drain(struct netblk_queue *q)
{
	WRITE_ONCE(q->worker_stop, true);
	wake_up_process(q->worker);
}

/* After the drain: the thread is gone, or going. */
void netblk_worker_stop(struct netblk_queue *q)
{
	if (!q->worker)
		return;
	kthread_stop(q->worker);
	/* wait out a completion still inside netblk_io_end() */
	synchronize_rcu();
	put_task_struct(q->worker);
	q->worker = NULL;
}
