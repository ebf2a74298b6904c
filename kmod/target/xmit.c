// SPDX-License-Identifier: GPL-2.0
/*
 * The XDP transport's sending side: the slots' own frame buffers, which READ
 * and INFO answers are built in, the spares for answers of headers alone,
 * and the transmit to the NIC (ndo_xdp_xmit), for the worker's answers and
 * the receive path's refusals alike.
 */
#include "target.h"

#include <linux/blkdev.h>
#include <linux/mm.h>
#include <net/xdp.h>

/* ---- transmit ---- */

/*
 * A frame the NIC did not take may come back changed.  virtio-net moves
 * data back over its own header and grows len before it finds its ring
 * full, and leaves them so (__virtnet_xdp_xmit_one: "Caller handle
 * free/refcnt"; 6.12 moves headroom with them, 6.1 does not).  Sent again
 * as it was left, the worker's reply would go out shifted by that header;
 * moved back again on every try, a 6.1 frame walks out of its buffer and is
 * freed against the page before it -- "Bad page state ... refcount:-1" at
 * virtio-net's next receive refill.  So each frame not taken is put back as
 * it was: its data is where its headroom says (the xdp_frame sits at the
 * start of its buffer, as xdp_convert_frame_to_buff() relies on).
 */
static void netblk_frame_restore(struct xdp_frame *frame, u16 headroom, u32 len)
{
	frame->headroom = headroom;
	frame->data = (u8 *)frame + sizeof(*frame) + headroom;
	frame->len = len;
}

/*
 * Hand @n frames to the NIC in one ndo_xdp_xmit with one flush: how many it
 * took (the first ones), or its error -- -ENODEV once the NIC is gone
 * (netblk_nic_detach).  The NIC's ndo_xdp_xmit expects to run with bottom
 * halves off and under RCU, as it does from a NAPI poll (from a kernel
 * thread without that, virtio-net's locked transmit mode deadlocks); the
 * same RCU section keeps the NIC while it has not gone.
 */
int netblk_nic_xmit(struct netblk_instance *inst, struct xdp_frame **frames, u32 n)
{
	u16 headroom[NETBLK_TX_BATCH];
	u32 len[NETBLK_TX_BATCH], i;
	struct net_device *nic;
	int sent;

	n = min_t(u32, n, NETBLK_TX_BATCH);
	for (i = 0; i < n; i++) {
		headroom[i] = frames[i]->headroom;
		len[i] = frames[i]->len;
	}
	local_bh_disable();
	rcu_read_lock();
	nic = netblk_nic_gone(inst) ? NULL : READ_ONCE(inst->nic);
	sent = nic ? nic->netdev_ops->ndo_xdp_xmit(nic, n, frames, XDP_XMIT_FLUSH) : -ENODEV;
	rcu_read_unlock();
	local_bh_enable();
	for (i = sent > 0 ? sent : 0; i < n; i++)
		netblk_frame_restore(frames[i], headroom[i], len[i]);
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
static int netblk_buffers_init_queue(struct netblk_queue *q)
{
	struct netblk_instance *inst = q->inst;
	u32 slots = netblk_core_slots(q->core), i;
	int err;

	q->pages = kvcalloc(slots, sizeof(*q->pages), GFP_KERNEL);
	if (!q->pages)
		return -ENOMEM;
	for (i = 0; i < slots; i++) {
		q->pages[i] = alloc_pages_node(cpu_to_node(q->cpu),
					       GFP_KERNEL | __GFP_COMP | __GFP_ZERO, inst->page_order);
		if (!q->pages[i])
			return -ENOMEM;
	}
	if (netblk_core_gather_page(q->core)) {
		q->data_pages = kvcalloc(slots, sizeof(*q->data_pages), GFP_KERNEL);
		if (!q->data_pages)
			return -ENOMEM;
		for (i = 0; i < slots; i++) {
			q->data_pages[i] = alloc_pages_node(cpu_to_node(q->cpu),
							    GFP_KERNEL | __GFP_ZERO, 0);
			if (!q->data_pages[i])
				return -ENOMEM;
		}
	}
	BUILD_BUG_ON(NETBLK_SPARE_PAGES > BITS_PER_LONG);
	q->spare_of = kvmalloc_array(slots, sizeof(*q->spare_of), GFP_KERNEL);
	if (!q->spare_of)
		return -ENOMEM;
	memset(q->spare_of, -1, slots * sizeof(*q->spare_of));
	for (i = 0; i < NETBLK_SPARE_PAGES; i++) {
		q->spare[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!q->spare[i])
			return -ENOMEM;
	}
	/* The memory model the NIC frees these frames by: put_page. */
	err = xdp_rxq_info_reg(&q->rxq, inst->nic, q->index, 0);
	if (err)
		return err;
	err = xdp_rxq_info_reg_mem_model(&q->rxq, MEM_TYPE_PAGE_ORDER0, NULL);
	if (err)
		xdp_rxq_info_unreg(&q->rxq);
	return err;
}

/* Every queue's; netblk_buffers_exit() frees what a failure left. */
int netblk_buffers_init(struct netblk_instance *inst)
{
	struct block_device *bdev = inst->disk.bdev;
	struct netblk_core *core = inst->queues[0].core;
	u32 align = bdev_dma_alignment(bdev) + 1;
	u32 headers = netblk_core_reply_headroom(core);
	u32 data_offset = ALIGN(XDP_PACKET_HEADROOM + headers, max(align, 8u));
	struct netblk_queue *q;
	size_t need;
	int err;

	inst->frame_headroom = data_offset - headers;
	need = data_offset + netblk_core_max_io(core) +
	       SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	inst->page_order = get_order(need);
	inst->dma_align_mask = bdev_dma_alignment(bdev);

	netblk_for_each_queue(q, inst) {
		err = netblk_buffers_init_queue(q);
		if (err) {
			netblk_buffers_exit(inst);
			return err;
		}
	}
	return 0;
}

/* Pages the NIC still transmits from are freed by its put_page, later. */
static void netblk_pages_free(struct page ***pages, u32 nr)
{
	u32 i;

	if (!*pages)
		return;
	for (i = 0; i < nr; i++)
		if ((*pages)[i])
			put_page((*pages)[i]);
	kvfree(*pages);
	*pages = NULL;
}

/*
 * Before the NIC it names goes: the frames built on it need nothing of it
 * once built (their memory model, MEM_TYPE_PAGE_ORDER0, is put_page), and
 * none is built after it (netblk_nic_detach).
 */
void netblk_buffers_unreg_rxq(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst)
		if (xdp_rxq_info_is_reg(&q->rxq))
			xdp_rxq_info_unreg(&q->rxq);
}

static void netblk_buffers_exit_queue(struct netblk_queue *q)
{
	u32 slots, i;

	/* Pages the NIC still transmits are freed by its put_page, later. */
	for (i = 0; i < NETBLK_SPARE_PAGES; i++) {
		if (q->spare[i])
			put_page(q->spare[i]);
		q->spare[i] = NULL;
	}
	kvfree(q->spare_of);
	q->spare_of = NULL;
	if (!q->pages)
		return;	/* none allocated: data_pages come after pages */
	slots = netblk_core_slots(q->core);
	netblk_pages_free(&q->data_pages, slots);
	netblk_pages_free(&q->pages, slots);
}

void netblk_buffers_exit(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_buffers_unreg_rxq(inst);
	netblk_for_each_queue(q, inst)
		netblk_buffers_exit_queue(q);
}

/*
 * The page *@page, ours alone: if the NIC has not finished sending a frame
 * from it, it is left to the NIC and a fresh one takes its place (NULL when
 * none can be had now).
 */
static struct page *netblk_page_to_write(struct netblk_queue *q, struct page **page,
					 unsigned int order)
{
	struct page *fresh;

	if (page_ref_count(*page) == 1)
		return *page;
	fresh = alloc_pages(GFP_NOWAIT | __GFP_NOWARN | (order ? __GFP_COMP : 0), order);
	if (!fresh)
		return NULL;
	put_page(*page);
	*page = fresh;
	netblk_core_count_page_replaced(q->core);
	return fresh;
}

u8 *netblk_xdp_slot_buffer(struct netblk_queue *q, u32 slot)
{
	struct page *page = netblk_page_to_write(q, &q->pages[slot], q->inst->page_order);

	return page ? (u8 *)page_address(page) + q->inst->frame_headroom : NULL;
}

u8 *netblk_xdp_data_page(struct netblk_queue *q, u32 slot)
{
	struct page *page = netblk_page_to_write(q, &q->data_pages[slot], 0);

	return page ? page_address(page) : NULL;
}

/*
 * A spare page for a reply of headers alone when a slot's own page cannot be
 * had: one no slot's reply is in (spare_lent) and the NIC is done with (its
 * reference gone), lent to the slot until the core says its reply went.
 */
u8 *netblk_xdp_reply_buffer(struct netblk_queue *q, u32 slot)
{
	unsigned int i;

	for (i = 0; i < NETBLK_SPARE_PAGES; i++) {
		if ((q->spare_lent & BIT(i)) || page_ref_count(q->spare[i]) != 1)
			continue;
		q->spare_lent |= BIT(i);
		q->spare_of[slot] = i;
		return (u8 *)page_address(q->spare[i]) + XDP_PACKET_HEADROOM;
	}
	return NULL;
}

void netblk_xdp_reply_done(struct netblk_queue *q, u32 slot)
{
	if (q->spare_of[slot] < 0)
		return;
	q->spare_lent &= ~BIT(q->spare_of[slot]);
	q->spare_of[slot] = -1;
}

/*
 * An xdp_frame over a buffer of ours (a slot's, a spare), with a reference
 * for the NIC.  Under RCU, the NIC not gone: the rxq is still registered.
 */
struct xdp_frame *netblk_buffer_frame(struct netblk_queue *q, u8 *data, u32 len)
{
	struct page *page = virt_to_head_page(data);
	u8 *start = page_address(page);
	struct xdp_frame *frame;
	struct xdp_buff xdp;

	xdp_init_buff(&xdp, page_size(page), &q->rxq);
	xdp_prepare_buff(&xdp, start, data - start, len, false);
	frame = xdp_convert_buff_to_frame(&xdp);
	if (frame)
		get_page(page);
	return frame;
}

/*
 * A gathered READ's datagram: its data, in a data page, as the frame's
 * second buffer, with a reference for the NIC (xdp_return_frame() puts it).
 */
static void netblk_frame_add_frag(struct xdp_frame *frame, u8 *data, u32 len)
{
	struct skb_shared_info *sinfo = xdp_get_shared_info_from_frame(frame);
	struct page *page = virt_to_page(data);

	get_page(page);
	skb_frag_fill_page_desc(&sinfo->frags[0], page, offset_in_page(data), len);
	sinfo->nr_frags = 1;
	sinfo->xdp_frags_size = len;
	frame->flags |= XDP_FLAGS_HAS_FRAGS;
}

u32 netblk_xdp_transmit(struct netblk_queue *q, const struct netblk_tx *tx, u32 n,
			int *error)
{
	struct netblk_instance *inst = q->inst;
	struct xdp_frame *frames[NETBLK_TX_BATCH];
	u32 nr, i;
	int sent;

	*error = 0;
	rcu_read_lock();	/* the rxq, and the NIC, while it has not gone */
	if (unlikely(netblk_nic_gone(inst))) {
		/* the NIC went: the core drops the replies, counted */
		rcu_read_unlock();
		*error = -ENODEV;
		return 0;
	}
	for (nr = 0; nr < n && nr < NETBLK_TX_BATCH; nr++) {
		struct xdp_frame *frame = tx[nr].frame;

		if (frame) {
			/* the received frame, rewritten in place */
			frame->len = tx[nr].len;
		} else {
			frame = netblk_buffer_frame(q, tx[nr].data, tx[nr].len);
			if (!frame)
				break;	/* no headroom: cannot happen with our layout */
			if (tx[nr].frag)
				netblk_frame_add_frag(frame, tx[nr].frag, tx[nr].frag_len);
		}
		frames[nr] = frame;
	}
	sent = nr ? netblk_nic_xmit(inst, frames, nr) : 0;
	if (sent < 0) {
		*error = sent;
		sent = 0;
	}
	/* Received frames it did not take stay the core's; ours are undone. */
	for (i = sent; i < nr; i++)
		if (!tx[i].frame)
			xdp_return_frame(frames[i]);
	rcu_read_unlock();
	return sent;
}

void netblk_xdp_free_frame(struct netblk_queue *q, void *frame)
{
	xdp_return_frame(frame);
}

/* A received multi-buffer frame's buffers after the first (the receive path's too). */
u32 netblk_xdp_frame_frags(struct netblk_queue *q, void *frame,
			   struct netblk_piece *frags, u32 max)
{
	struct skb_shared_info *sinfo = xdp_get_shared_info_from_frame(frame);
	u32 i;

	for (i = 0; i < sinfo->nr_frags && i < max; i++) {
		frags[i].data = skb_frag_address(&sinfo->frags[i]);
		frags[i].len = skb_frag_size(&sinfo->frags[i]);
	}
	return sinfo->nr_frags;
}
