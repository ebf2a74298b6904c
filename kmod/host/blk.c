// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's disk: a blk-mq driver whose requests the core
 * splits into datagrams (host_api.h), a hardware queue for each of the
 * attachment's queues (its core, its tags: hctx->driver_data).  Its limits
 * are queue 0's INFO: block sizes, the largest request
 * (NETBLK_HOST_PIECES datagrams), TRIM and WRITE_ZEROES, the write cache
 * and FUA.
 *
 * Once attached, blk-mq's own timeout never fails a request: the core
 * resends until the instance answers (or, with timeout=, fails it EIO
 * itself).  While attaching -- add_disk() reading the partition table --
 * it fails them all, and the attach (host.h: NETBLK_HOST_ATTACH_IO_WAIT), as
 * nvme-tcp fails a timed-out request on a controller not yet live.
 * queue_rq may sleep (BLK_MQ_F_BLOCKING) because the request engine
 * (engine.c) sends on the socket there.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/module.h>

#include "host.h"

/* A new session's INFO said the device grew (the engine queues this). */
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
	struct netblk_host_queue *q = hctx->driver_data;
	struct request *rq = bd->rq;
	enum netblk_io_op op;
	int err;

	if (netblk_host_op(rq, &op))
		return BLK_STS_NOTSUPP;
	blk_mq_start_request(rq);
	err = netblk_host_engine_queue(q, rq, op);	/* detached: -EIO */
	if (err == -EAGAIN)
		return BLK_STS_DEV_RESOURCE;	/* no room for its datagrams: again once some end */
	return err ? BLK_STS_IOERR : BLK_STS_OK;
}

/* Hardware queue @index is the attachment's queue of that index: its session, its tags. */
static int netblk_host_init_hctx(struct blk_mq_hw_ctx *hctx, void *data, unsigned int index)
{
	struct netblk_attachment *att = data;

	if (WARN_ON_ONCE(index >= att->nr_queues))
		return -EINVAL;
	hctx->driver_data = att->queues[index];
	return 0;
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
	.init_hctx = netblk_host_init_hctx,
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
	/* a queue's tags are its core's request numbers: queue-depth= each */
	att->tag_set.nr_hw_queues = att->nr_queues;
	att->tag_set.queue_depth = att->params.opt.queue_depth;
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
