// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's disk: a blk-mq driver whose requests the core
 * splits into datagrams (host_api.h).  Its limits are the instance's INFO:
 * block sizes, the largest request (NETBLK_HOST_PIECES datagrams), TRIM
 * and WRITE_ZEROES, the write cache and FUA.
 *
 * Once attached, blk-mq's own timeout never fails a request: the core
 * resends until the instance answers (or, with timeout=, fails it EIO
 * itself).  While attaching -- add_disk() reading the partition table --
 * it fails them all, and the attach (host.h: NETBLK_HOST_ATTACH_IO_WAIT), as
 * nvme-tcp fails a timed-out request on a controller not yet live.
 * queue_rq may sleep (BLK_MQ_F_BLOCKING) because it sends on the socket.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/module.h>

#include "host.h"

struct request *netblk_host_tag_to_rq(struct netblk_attachment *att, u32 tag)
{
	if (tag >= att->params.queue_depth || !att->tag_set.tags)
		return NULL;
	return blk_mq_tag_to_rq(att->tag_set.tags[0], tag);
}

void netblk_host_shim_complete(struct netblk_attachment *att, uint32_t tag, uint16_t status)
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
		netblk_host_purge_pending(att, tag);
	}
	netblk_host_rq_put_locked(att, rq);	/* the core's */
}

static void netblk_host_rq_end(struct request *rq)
{
	if (likely(!blk_should_fake_timeout(rq->q)))
		blk_mq_complete_request(rq);
}

void netblk_host_rq_get(struct request *rq)
{
	refcount_inc(&((struct netblk_host_cmd *)blk_mq_rq_to_pdu(rq))->holds);
}

/*
 * Outside the lock: where datagrams were sent, and where an skb let go of
 * a request's pages (the softirq or task that freed it).
 */
void netblk_host_rq_put(struct request *rq)
{
	struct netblk_host_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (refcount_dec_and_test(&cmd->holds))
		netblk_host_rq_end(rq);
}

void netblk_host_rq_put_locked(struct netblk_attachment *att, struct request *rq)
{
	struct netblk_host_cmd *cmd = blk_mq_rq_to_pdu(rq);

	/* ended after the lock: ending it may start more I/O on this disk */
	if (refcount_dec_and_test(&cmd->holds))
		llist_add(&cmd->done, &att->done);
}

void netblk_host_end_done(struct netblk_attachment *att)
{
	struct llist_node *list = llist_del_all(&att->done);
	struct netblk_host_cmd *cmd, *next;

	llist_for_each_entry_safe(cmd, next, list, done)
		netblk_host_rq_end(blk_mq_rq_from_pdu(cmd));
}

/* ---- what a new session's INFO says (a server started again) ---- */

static void netblk_host_resize_work(struct work_struct *work)
{
	struct netblk_attachment *att = container_of(work, struct netblk_attachment, resize_work);
	u64 size = READ_ONCE(att->info.size_bytes);

	if (!att->disk)
		return;	/* attaching: the disk is made with this size */
	/* a uevent, as for any disk that grows: the partition table is read again by udev */
	set_capacity_and_notify(att->disk, size >> SECTOR_SHIFT);
	pr_info("/dev/%s: %pI4:%u grew to %llu MiB\n", att->name, &att->params.addr,
		att->params.port, size >> 20);
}

void netblk_host_shim_resized(struct netblk_attachment *att, uint64_t size_bytes)
{
	WRITE_ONCE(att->info.size_bytes, size_bytes);
	queue_work(system_wq, &att->resize_work);	/* it sleeps: not in this softirq */
}

void netblk_host_shim_changed(struct netblk_attachment *att,
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

void netblk_host_disk_init(struct netblk_attachment *att)
{
	INIT_WORK(&att->resize_work, netblk_host_resize_work);
}

void netblk_host_disk_quiesce(struct netblk_attachment *att)
{
	cancel_work_sync(&att->resize_work);
}

static void netblk_host_complete_rq(struct request *rq)
{
	struct netblk_host_cmd *cmd = blk_mq_rq_to_pdu(rq);

	blk_mq_end_request(rq, errno_to_blk_status(-(int)cmd->status));
}

static int netblk_host_op(struct request *rq, enum netblk_io_op *op)
{
	switch (req_op(rq)) {
	case REQ_OP_READ:
		*op = NETBLK_IO_READ;
		return 0;
	case REQ_OP_WRITE:
		*op = NETBLK_IO_WRITE;
		return 0;
	case REQ_OP_FLUSH:
		*op = NETBLK_IO_FLUSH;
		return 0;
	case REQ_OP_DISCARD:
		*op = NETBLK_IO_DISCARD;
		return 0;
	case REQ_OP_WRITE_ZEROES:
		*op = NETBLK_IO_WRITE_ZEROES;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static blk_status_t netblk_host_queue_rq(struct blk_mq_hw_ctx *hctx,
					 const struct blk_mq_queue_data *bd)
{
	struct netblk_attachment *att = hctx->queue->queuedata;
	struct request *rq = bd->rq;
	enum netblk_io_op op;
	int err;

	if (netblk_host_op(rq, &op))
		return BLK_STS_NOTSUPP;
	blk_mq_start_request(rq);
	refcount_set(&((struct netblk_host_cmd *)blk_mq_rq_to_pdu(rq))->holds, 1);	/* the core's */

	spin_lock_bh(&att->lock);
	if (att->dead) {
		spin_unlock_bh(&att->lock);
		return BLK_STS_IOERR;
	}
	err = netblk_host_core_queue(att->core, rq->tag, op, (u64)blk_rq_pos(rq) << SECTOR_SHIFT,
				     blk_rq_bytes(rq), !!(rq->cmd_flags & REQ_FUA),
				     ktime_get_ns());
	if (err != -EAGAIN)
		att->stats.requests++;
	if (err && err != -EAGAIN)
		att->stats.errors++;	/* refused at once: unreachable (-EIO), or -EINVAL */
	netblk_host_arm_timer(att);
	spin_unlock_bh(&att->lock);

	netblk_host_send_pending(att);
	netblk_host_end_done(att);
	if (err == -EAGAIN)
		return BLK_STS_DEV_RESOURCE;	/* no room for its datagrams: again once some end */
	return err ? BLK_STS_IOERR : BLK_STS_OK;
}

static enum blk_eh_timer_return netblk_host_timeout(struct request *rq)
{
	struct netblk_attachment *att = rq->q->queuedata;

	/* attaching: @rq is failed with the rest, and the attach with it */
	if (netblk_host_give_up(att, NETBLK_HOST_NO_ANSWER))
		return BLK_EH_DONE;
	return BLK_EH_RESET_TIMER;	/* attached: the core decides (see above) */
}

static const struct blk_mq_ops netblk_host_mq_ops = {
	.queue_rq = netblk_host_queue_rq,
	.complete = netblk_host_complete_rq,
	.timeout = netblk_host_timeout,
};

static const struct block_device_operations netblk_host_fops = {
	.owner = THIS_MODULE,
};

static void netblk_host_limits(const struct netblk_attachment *att, struct queue_limits *lim)
{
	const struct netblk_host_info *i = &att->info;

	lim->logical_block_size = i->sector_size;
	lim->physical_block_size = max(i->physical_block_size, i->sector_size);
	lim->io_opt = i->io_opt;
	lim->max_hw_sectors = (i->max_io * NETBLK_HOST_PIECES) >> SECTOR_SHIFT;
	lim->max_segments = NETBLK_HOST_PIECES * (NETBLK_HOST_BVECS - 1);
	if (i->max_trim && !att->params.read_only) {
		lim->max_hw_discard_sectors = i->max_trim >> SECTOR_SHIFT;
		lim->discard_granularity = max(i->discard_granularity, i->sector_size);
	}
	if (i->max_write_zeroes && !att->params.read_only)
		lim->max_write_zeroes_sectors = i->max_write_zeroes >> SECTOR_SHIFT;
}

int netblk_host_disk_create(struct netblk_attachment *att, int major)
{
	struct queue_limits lim = {};
	struct gendisk *disk;
	int err;

	att->tag_set.ops = &netblk_host_mq_ops;
	att->tag_set.nr_hw_queues = 1;
	att->tag_set.queue_depth = att->params.queue_depth;
	att->tag_set.numa_node = NUMA_NO_NODE;
	att->tag_set.cmd_size = sizeof(struct netblk_host_cmd);
	att->tag_set.flags = BLK_MQ_F_SHOULD_MERGE | BLK_MQ_F_BLOCKING;
	att->tag_set.timeout = NETBLK_HOST_ATTACH_IO_WAIT;
	att->tag_set.driver_data = att;
	err = blk_mq_alloc_tag_set(&att->tag_set);
	if (err)
		return err;

	netblk_host_limits(att, &lim);
	/* a read-only attachment writes nothing: no cache to flush, no FUA to ask */
	disk = netblk_alloc_disk(&att->tag_set, &lim,
				 att->info.volatile_cache && !att->params.read_only,
				 att->info.fua && !att->params.read_only, att);
	if (IS_ERR(disk)) {
		err = PTR_ERR(disk);
		goto free_tags;
	}
	disk->major = major;
	disk->first_minor = att->index * NETBLK_HOST_MINORS;
	disk->minors = NETBLK_HOST_MINORS;
	disk->fops = &netblk_host_fops;
	disk->private_data = att;
	strscpy(disk->disk_name, att->name, sizeof(disk->disk_name));
	set_capacity(disk, att->info.size_bytes >> SECTOR_SHIFT);
	set_disk_ro(disk, att->params.read_only);
	att->disk = disk;
	err = add_disk(disk);
	if (err)
		goto put_disk;
	return 0;

put_disk:
	att->disk = NULL;
	put_disk(disk);
free_tags:
	blk_mq_free_tag_set(&att->tag_set);
	memset(&att->tag_set, 0, sizeof(att->tag_set));
	return err;
}

bool netblk_host_disk_open(const struct netblk_attachment *att)
{
	return att->disk && disk_openers(att->disk);
}

void netblk_host_disk_remove(struct netblk_attachment *att)
{
	if (!att->disk)
		return;
	del_gendisk(att->disk);
	put_disk(att->disk);
	att->disk = NULL;
	blk_mq_free_tag_set(&att->tag_set);
	memset(&att->tag_set, 0, sizeof(att->tag_set));
}
