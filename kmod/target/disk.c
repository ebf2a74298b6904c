// SPDX-License-Identifier: GPL-2.0
/*
 * Disk I/O: every slot has a bio and bio_vecs of its own, set up once, so a
 * request costs no allocation.  The bio points at the data where it lies:
 * inside the frame the NIC received (WRITE), inside the slot's frame buffer
 * behind the reply's headroom (READ), or across data pages (a gathered
 * READ: one bio for all its datagrams).
 */
#include "target.h"

#include <linux/bio.h>
#include <linux/blkdev.h>

struct netblk_io {
	struct bio bio;
	struct bio_vec bvecs[NETBLK_GATHER_PAGES_MAX];
	struct netblk_queue *q;
	u64 offset;
	u32 slot;
};

static int netblk_disk_init_queue(struct netblk_queue *q)
{
	u32 slots = netblk_core_slots(q->core), i;

	q->ios = kvcalloc(slots, sizeof(*q->ios), GFP_KERNEL);
	q->polling = bitmap_zalloc(slots, GFP_KERNEL);
	if (!q->ios || !q->polling)
		return -ENOMEM;
	for (i = 0; i < slots; i++) {
		q->ios[i].q = q;
		q->ios[i].slot = i;
	}
	return 0;
}

int netblk_disk_init(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst) {
		if (netblk_disk_init_queue(q)) {
			netblk_disk_exit(inst);
			return -ENOMEM;
		}
	}
	/*
	 * Without REQ_NOWAIT a full queue puts the worker to sleep in
	 * submit_bio(); with it the bio comes back BLK_STS_AGAIN and the
	 * worker goes on answering.  Only where the device supports it.
	 */
	inst->nowait = bdev_nowait(inst->disk.bdev);
	/*
	 * With poll= and a device that has polled queues (NVMe with
	 * nvme.poll_queues), the worker, which spins anyway, reaps
	 * completions itself: no interrupt, no wakeup.
	 */
	inst->polled = inst->opt.poll_us &&
		       netblk_bdev_polled(inst->disk.bdev);
	return 0;
}

void netblk_disk_exit(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst) {
		bitmap_free(q->polling);
		q->polling = NULL;
		kvfree(q->ios);
		q->ios = NULL;
	}
}

/* The reply's status: a Linux errno value, positive, as the wire carries it. */
#define NETBLK_STATUS_EIO 5

static u16 netblk_io_status(blk_status_t status)
{
	if (status == BLK_STS_OK)
		return 0;
	if (status == BLK_STS_AGAIN || status == BLK_STS_RESOURCE)
		return NETBLK_IO_AGAIN;
	return NETBLK_STATUS_EIO;
}

/*
 * Any context, hard IRQ included.  Under RCU so that stopping can wait out a
 * completion still on its way out of here (netblk_worker_stop).
 */
static void netblk_io_end(struct bio *bio)
{
	struct netblk_io *io = bio->bi_private;
	struct netblk_queue *q = io->q;
	struct netblk_instance *inst = q->inst;
	u16 status = netblk_io_status(bio->bi_status);

	rcu_read_lock();
	clear_bit(io->slot, q->polling);
	bio_uninit(bio);
	if (status && status != NETBLK_IO_AGAIN) {
		/* announced by the reaper, which the worker kicks */
		WRITE_ONCE(inst->io_error_offset, io->offset);
		set_bit(NETBLK_IO_ERROR_PENDING, &inst->flags);
	}
	netblk_core_complete(q->core, io->slot, status);
	netblk_worker_kick(q);
	rcu_read_unlock();
}

/*
 * Only plain reads and writes are polled.  A flush (or a FUA write) goes
 * through blk-flush's own request, whose completion the original bio's
 * cookie does not name: polling it would never reap it.
 */
static bool netblk_pollable(struct netblk_instance *inst, blk_opf_t opf)
{
	enum req_op op = opf & REQ_OP_MASK;

	return inst->polled && (op == REQ_OP_READ || op == REQ_OP_WRITE) &&
	       !(opf & (REQ_PREFLUSH | REQ_FUA));
}

/* @opf as the instance submits it: without waiting for a full queue, polled. */
static blk_opf_t netblk_io_flags(struct netblk_queue *q, u32 slot, blk_opf_t opf,
				 int may_block)
{
	struct netblk_instance *inst = q->inst;

	/*
	 * The core asks for a blocking submission of an I/O the disk keeps
	 * answering "again" without one (one it has to split, say).
	 */
	if (inst->nowait && !may_block)
		opf |= REQ_NOWAIT;
	if (netblk_pollable(inst, opf)) {
		opf |= REQ_POLLED;
		set_bit(slot, q->polling);
	}
	return opf;
}

static void netblk_io_submit(struct netblk_io *io, u64 offset)
{
	io->offset = offset;
	io->bio.bi_end_io = netblk_io_end;
	io->bio.bi_private = io;
	submit_bio(&io->bio);
}

static int netblk_disk_submit_io(struct netblk_queue *q, u32 slot, enum netblk_io_op op,
				 u64 offset, u8 *data, u32 len, int fua, int may_block)
{
	struct netblk_io *io = &q->ios[slot];
	struct bio *bio = &io->bio;
	blk_opf_t opf;

	switch (op) {
	case NETBLK_IO_READ:
		opf = REQ_OP_READ;
		break;
	case NETBLK_IO_WRITE:
		/*
		 * A client's write, waited for: REQ_SYNC | REQ_IDLE, as
		 * O_DIRECT's and nvmet's, which writeback throttling (blk-wbt)
		 * leaves alone.  REQ_SYNC alone is tracked and throttled as page
		 * cache writeback is, arming wbt's timer and its latency
		 * statistics on every bio.
		 */
		opf = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE | (fua ? REQ_FUA : 0);
		break;
	case NETBLK_IO_FLUSH:
		opf = REQ_OP_WRITE | REQ_PREFLUSH;
		break;
	case NETBLK_IO_DISCARD:
		opf = REQ_OP_DISCARD;
		break;
	case NETBLK_IO_WRITE_ZEROES:
		/* the device may unmap what it zeroes: INFO promises zeros, not space */
		opf = REQ_OP_WRITE_ZEROES;
		break;
	default:
		return -EINVAL;
	}
	opf = netblk_io_flags(q, slot, opf, may_block);
	bio_init(bio, q->inst->disk.bdev, io->bvecs, 1, opf);
	if (data) {
		bio->bi_iter.bi_sector = offset >> SECTOR_SHIFT;
		/*
		 * One bvec, possibly across the 4 KiB pages of a compound page
		 * (a page_frag frame): physically contiguous, which is all a
		 * multi-page bvec needs.
		 */
		__bio_add_page(bio, virt_to_page(data), len, offset_in_page(data));
	} else if (op == NETBLK_IO_DISCARD || op == NETBLK_IO_WRITE_ZEROES) {
		/* no pages: the block layer splits it by the queue's limits */
		bio->bi_iter.bi_sector = offset >> SECTOR_SHIFT;
		bio->bi_iter.bi_size = len;
	}
	netblk_io_submit(io, offset);
	return 0;
}

/*
 * Whole pages, page-aligned: a bio the block layer passes to any disk as
 * it is (no bvec starts or ends inside a virtual boundary), split only
 * by the queue's size limits.
 */
static int netblk_disk_submit_read_pages(struct netblk_queue *q, u32 slot, u64 offset,
					 u8 *const *pages, u32 nr, u32 len, int may_block)
{
	struct netblk_io *io = &q->ios[slot];
	struct bio *bio = &io->bio;
	u32 i;

	if (nr > NETBLK_GATHER_PAGES_MAX)
		return -EINVAL;
	bio_init(bio, q->inst->disk.bdev, io->bvecs, nr,
		 netblk_io_flags(q, slot, REQ_OP_READ, may_block));
	bio->bi_iter.bi_sector = offset >> SECTOR_SHIFT;
	for (i = 0; i < nr; i++) {
		u32 piece = min_t(u32, len, PAGE_SIZE);

		__bio_add_page(bio, virt_to_page(pages[i]), piece, 0);
		len -= piece;
	}
	netblk_io_submit(io, offset);
	return 0;
}

/* What the core submits by (target_ops.h). */
const struct netblk_target_disk_ops netblk_disk_ops = {
	.submit_io = netblk_disk_submit_io,
	.submit_read_pages = netblk_disk_submit_read_pages,
};

/*
 * Reap polled completions: every polled bio in flight, since they may be on
 * different queues -- of a stacked device's members, or of the NVMe poll
 * queues of different CPUs.  One that completes meanwhile is harmless to poll:
 * its cookie still names a queue, and its memory stays the instance's.  Only
 * the worker submits, so none is reused under us.
 */
void netblk_disk_poll(struct netblk_queue *q)
{
	u32 slot, slots = netblk_core_slots(q->core);

	for_each_set_bit(slot, q->polling, slots)
		bio_poll(&q->ios[slot].bio, NULL, 0);
}
