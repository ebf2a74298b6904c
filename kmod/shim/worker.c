// SPDX-License-Identifier: GPL-2.0
/*
 * The instance's worker, a kernel thread pinned to one CPU (netblk/<port>):
 * it submits what the receive path queued, in a batch under one plug, and
 * answers what the disk finished, in one transmit with one flush.  Also here:
 * the slots' own frame buffers, which READ and INFO answers are built in,
 * and the transmit to the NIC.
 */
#include "netblk.h"

#include <linux/blkdev.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <net/xdp.h>

/* ---- transmit ---- */

/*
 * Hand @n frames to the NIC in one ndo_xdp_xmit with one flush; frees what
 * it does not take.  The NIC's ndo_xdp_xmit expects to run with bottom
 * halves off and under RCU, as it does from a NAPI poll (from a kernel
 * thread without that, virtio-net's locked transmit mode deadlocks).
 */
u32 netblk_nic_xmit(struct netblk_instance *inst, struct xdp_frame **frames, u32 n)
{
	struct net_device *nic = inst->nic;
	int sent;
	u32 i;

	local_bh_disable();
	rcu_read_lock();
	sent = nic->netdev_ops->ndo_xdp_xmit(nic, n, frames, XDP_XMIT_FLUSH);
	rcu_read_unlock();
	local_bh_enable();
	if (sent < 0)
		sent = 0;
	for (i = sent; i < n; i++)
		xdp_return_frame(frames[i]);
	return sent;
}

/* ---- the slots' frame buffers ---- */

/*
 * Each slot owns a page (compound when max_io needs more than one) laid out
 * as an XDP frame: headroom for the xdp_frame and the NIC's own header, 72
 * bytes of reply headers, then the data the disk reads in, dword- (or
 * dma-) aligned.  The NIC takes a reference of its own while it transmits;
 * the page is ours again once that is gone.
 */
int netblk_buffers_init(struct netblk_instance *inst)
{
	struct block_device *bdev = file_bdev(inst->bdev_file);
	u32 slots = netblk_core_slots(inst->core), i;
	u32 align = bdev_dma_alignment(bdev) + 1;
	u32 data_offset = ALIGN(XDP_PACKET_HEADROOM + NETBLK_REPLY_HEADROOM, max(align, 8u));
	size_t need;
	int err;

	inst->frame_headroom = data_offset - NETBLK_REPLY_HEADROOM;
	need = data_offset + netblk_core_max_io(inst->core) +
	       SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	inst->page_order = get_order(need);
	inst->dma_align_mask = bdev_dma_alignment(bdev);

	inst->pages = kvcalloc(slots, sizeof(*inst->pages), GFP_KERNEL);
	if (!inst->pages)
		return -ENOMEM;
	for (i = 0; i < slots; i++) {
		inst->pages[i] = alloc_pages(GFP_KERNEL | __GFP_COMP | __GFP_ZERO, inst->page_order);
		if (!inst->pages[i])
			goto nomem;
	}
	/* The memory model the NIC frees these frames by: put_page. */
	err = xdp_rxq_info_reg(&inst->rxq, inst->nic, 0, 0);
	if (err)
		goto fail;
	err = xdp_rxq_info_reg_mem_model(&inst->rxq, MEM_TYPE_PAGE_ORDER0, NULL);
	if (err) {
		xdp_rxq_info_unreg(&inst->rxq);
		goto fail;
	}
	return 0;

nomem:
	err = -ENOMEM;
fail:
	netblk_buffers_exit(inst);
	return err;
}

void netblk_buffers_exit(struct netblk_instance *inst)
{
	u32 slots, i;

	if (xdp_rxq_info_is_reg(&inst->rxq))
		xdp_rxq_info_unreg(&inst->rxq);
	if (!inst->pages)
		return;
	slots = netblk_core_slots(inst->core);
	/* Pages the NIC still transmits are freed by its put_page, later. */
	for (i = 0; i < slots; i++)
		if (inst->pages[i])
			put_page(inst->pages[i]);
	kvfree(inst->pages);
	inst->pages = NULL;
}

u8 *netblk_shim_slot_buffer(struct netblk_instance *inst, u32 slot)
{
	struct page *page = inst->pages[slot];

	if (page_ref_count(page) != 1) {
		/*
		 * The NIC has not finished sending the last frame built in
		 * it.  Leave that page to the NIC and take a fresh one.
		 */
		struct page *fresh = alloc_pages(GFP_NOWAIT | __GFP_NOWARN | __GFP_COMP,
						 inst->page_order);
		if (!fresh)
			return NULL;
		put_page(page);
		inst->pages[slot] = fresh;
		inst->pages_replaced++;
		page = fresh;
	}
	return (u8 *)page_address(page) + inst->frame_headroom;
}

/* An xdp_frame over the slot's buffer, with a reference for the NIC. */
static struct xdp_frame *netblk_slot_frame(struct netblk_instance *inst, u32 slot, u32 len)
{
	struct page *page = inst->pages[slot];
	struct xdp_frame *frame;
	struct xdp_buff xdp;

	xdp_init_buff(&xdp, PAGE_SIZE << inst->page_order, &inst->rxq);
	xdp_prepare_buff(&xdp, page_address(page), inst->frame_headroom, len, false);
	frame = xdp_convert_buff_to_frame(&xdp);
	if (frame)
		get_page(page);
	return frame;
}

u32 netblk_shim_transmit(struct netblk_instance *inst, const struct netblk_tx *tx, u32 n)
{
	struct xdp_frame *frames[NETBLK_TX_BATCH];
	u32 nr = 0, i;

	for (i = 0; i < n && i < NETBLK_TX_BATCH; i++) {
		struct xdp_frame *frame = tx[i].frame;

		if (frame) {
			/* the received frame, rewritten in place */
			frame->len = tx[i].len;
		} else {
			frame = netblk_slot_frame(inst, tx[i].slot, tx[i].len);
			if (!frame)
				continue;
		}
		frames[nr++] = frame;
	}
	return nr ? netblk_nic_xmit(inst, frames, nr) : 0;
}

void netblk_shim_free_frame(struct netblk_instance *inst, void *frame)
{
	xdp_return_frame(frame);
}

/* ---- the thread ---- */

/*
 * Work was queued for the worker (a ring push, a release): wake it only if
 * it is going to sleep.  A running worker finds the work on its next round,
 * and a wakeup it does not need costs its pi_lock on every completion.  The
 * barrier pairs with the one in netblk_worker_sleep(): either the worker
 * sees the work, or the producer sees it idle.
 */
void netblk_worker_kick(struct netblk_instance *inst)
{
	smp_mb();	/* the push before, worker_idle after: see above */
	if (READ_ONCE(inst->worker_idle))
		wake_up_process(inst->worker);
}

static void netblk_worker_sleep(struct netblk_instance *inst)
{
	set_current_state(TASK_INTERRUPTIBLE);
	WRITE_ONCE(inst->worker_idle, true);
	smp_mb();	/* worker_idle before, the rings after: pairs with the kick */
	/* polled completions come only when polled: no sleeping on them */
	if (inst->polled && netblk_core_at_disk(inst->core)) {
		__set_current_state(TASK_RUNNING);
		WRITE_ONCE(inst->worker_idle, false);
		netblk_disk_poll(inst);
		cond_resched();
		return;
	}
	if (!netblk_core_has_work(inst->core) && !kthread_should_stop()) {
		netblk_core_count_sleep(inst->core);
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	WRITE_ONCE(inst->worker_idle, false);
}

/* One round: submit under one plug, then answer in one transmit. */
static bool netblk_worker_round(struct netblk_instance *inst)
{
	struct blk_plug plug;
	u32 submitted, answered;

	blk_start_plug(&plug);
	submitted = netblk_core_submit(inst->core);
	blk_finish_plug(&plug);
	answered = netblk_core_reply(inst->core, ktime_get_ns());
	if (unlikely(test_bit(NETBLK_IO_ERROR_PENDING, &inst->flags)))
		netblk_monitor_kick();
	return submitted || answered;
}

/*
 * Stopping: nothing new arrives (the handoff device is gone).  Drop what is
 * queued and not yet at the disk, let the disk finish what it has, answer
 * that, and leave.
 */
static void netblk_worker_drain(struct netblk_instance *inst)
{
	for (;;) {
		netblk_core_drop_queued(inst->core);
		netblk_core_reply(inst->core, ktime_get_ns());
		if (!netblk_core_at_disk(inst->core))
			break;
		if (inst->polled) {
			netblk_disk_poll(inst);
			cond_resched();
			continue;
		}
		/* a completion wakes us; the timeout only bounds a lost wakeup */
		WRITE_ONCE(inst->worker_idle, true);
		schedule_timeout_uninterruptible(msecs_to_jiffies(10));
		WRITE_ONCE(inst->worker_idle, false);
	}
	/* what the disk refused for now in the last round */
	netblk_core_drop_queued(inst->core);
}

static bool netblk_worker_keep_polling(struct netblk_instance *inst, u64 *idle_since)
{
	u64 now;

	if (!inst->poll_us)
		return false;
	now = ktime_get_ns();
	if (!*idle_since)
		*idle_since = now;
	if (now - *idle_since >= (u64)inst->poll_us * NSEC_PER_USEC)
		return false;
	if (inst->polled && netblk_core_at_disk(inst->core))
		netblk_disk_poll(inst);
	cond_resched();
	cpu_relax();
	return true;
}

static int netblk_worker_fn(void *data)
{
	struct netblk_instance *inst = data;
	u64 idle_since = 0;

	while (!kthread_should_stop()) {
		if (netblk_worker_round(inst)) {
			idle_since = 0;
			cond_resched();
			continue;
		}
		/* poll= keeps it looking for work a while before sleeping */
		if (netblk_worker_keep_polling(inst, &idle_since))
			continue;
		idle_since = 0;
		netblk_worker_sleep(inst);
	}
	netblk_worker_drain(inst);
	return 0;
}

int netblk_worker_start(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	struct task_struct *task;

	task = kthread_create_on_node(netblk_worker_fn, inst, cpu_to_node(inst->cpu),
				      "netblk/%u", inst->port);
	if (IS_ERR(task)) {
		NL_SET_ERR_MSG(extack, "cannot create the worker thread");
		return PTR_ERR(task);
	}
	kthread_bind(task, inst->cpu);
	/* held past the thread's exit: a completion may still be waking it */
	get_task_struct(task);
	inst->worker = task;
	wake_up_process(task);
	return 0;
}

void netblk_worker_stop(struct netblk_instance *inst)
{
	if (!inst->worker)
		return;
	kthread_stop(inst->worker);
	/* wait out a completion still inside netblk_io_end() */
	synchronize_rcu();
	put_task_struct(inst->worker);
	inst->worker = NULL;
}
