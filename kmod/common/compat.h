/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels netblk builds for, in one place: Debian
 * 12's own 6.1 and 6.12 or later.  Each helper says what 6.1 lacks; the code
 * elsewhere is written for the newer kernel.  kmod/Kbuild tests the headers
 * for what a version number cannot tell (stable kernels backport renames).
 *
 * Kernels from 6.2 to 6.11 are refused: the block layer's open and limits
 * APIs went through two intermediate forms there that no test here runs.
 */
#ifndef NETBLK_COMPAT_H
#define NETBLK_COMPAT_H

#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/version.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#define NETBLK_LINUX_6_1 (LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0))

#if !NETBLK_LINUX_6_1 && LINUX_VERSION_CODE < KERNEL_VERSION(6, 12, 0)
#error "netblk builds for Linux 6.1 and for 6.12 or later; not for 6.2 to 6.11"
#endif

/*
 * A device that cannot change namespaces: dev->netns_immutable from 6.15
 * (and 6.12.y stable), dev->netns_local in 6.12, NETIF_F_NETNS_LOCAL before.
 */
static inline void netblk_set_netns_immutable(struct net_device *dev)
{
#if defined(NETBLK_HAVE_NETNS_IMMUTABLE)
	dev->netns_immutable = true;
#elif defined(NETBLK_HAVE_NETNS_LOCAL)
	dev->netns_local = true;
#else
	dev->features |= NETIF_F_NETNS_LOCAL;
#endif
}

/* Joining a multicast group needs CAP_NET_ADMIN: a group flag from 6.7 on. */
#ifdef GENL_MCAST_CAP_NET_ADMIN
#define NETBLK_MCGRP_FLAGS	GENL_MCAST_CAP_NET_ADMIN
#else
#define NETBLK_MCGRP_FLAGS	0
#endif

/* ---- netlink ---- */

#ifndef NL_SET_ERR_MSG_FMT
/*
 * 6.1's extack has no buffer of its own for a formatted message: it only
 * points at a string, which must outlive the handler (the ack is built after
 * it returns).  The messages are formatted into a ring (compat.c): a buffer
 * is reused only after NETBLK_EXTACK_RING more refusals with a formatted
 * message, while each ack goes out microseconds after its handler returns.
 * netblk's handlers run in parallel (parallel_ops), but only callers that
 * passed the capability checks (genl.c; those refusals are fixed strings)
 * reach a formatted one: a privileged caller with as many in flight at once
 * could read another's message, never past a buffer (each keeps a NUL
 * after its 80 bytes).  80 bytes, as NETLINK_MAX_FMTMSG_LEN truncates them
 * on newer kernels.
 */
#define NETBLK_EXTACK_RING	64
#define NETBLK_EXTACK_MSG_LEN	80
char *netblk_extack_buffer(void);

#define NL_SET_ERR_MSG_FMT(extack, fmt, args...) do {			\
	struct netlink_ext_ack *__extack = (extack);			\
									\
	if (__extack) {							\
		char *__buf = netblk_extack_buffer();			\
									\
		snprintf(__buf, NETBLK_EXTACK_MSG_LEN, fmt, ##args);	\
		__extack->_msg = __buf;					\
	}								\
} while (0)
#endif

/* ---- network devices ---- */

#if NETBLK_LINUX_6_1
/* 6.1 has no netdev_get_by_name(): a plain reference, then tracked. */
static inline struct net_device *netdev_get_by_name(struct net *net, const char *name,
						    netdevice_tracker *tracker, gfp_t gfp)
{
	struct net_device *dev = dev_get_by_name(net, name);

	if (dev)
		netdev_tracker_alloc(dev, tracker, gfp);
	return dev;
}
#endif

/*
 * The handoff device receives frames by ndo_xdp_xmit, multi-buffer ones
 * too.  6.1's devmap asks only for the method: it has no xdp_features.
 */
static inline void netblk_set_xdp_xmit_features(struct net_device *dev)
{
#if !NETBLK_LINUX_6_1
	dev->xdp_features = NETDEV_XDP_ACT_NDO_XMIT | NETDEV_XDP_ACT_NDO_XMIT_SG;
#endif
}

#if NETBLK_LINUX_6_1
/* 6.1 has no skb_frag_fill_page_desc(): its skb_frag_t is a bio_vec. */
static inline void skb_frag_fill_page_desc(skb_frag_t *frag, struct page *page, int off,
					   int size)
{
	__skb_frag_set_page(frag, page);
	skb_frag_off_set(frag, off);
	skb_frag_size_set(frag, size);
}
#endif

/* ---- memory ---- */

#if NETBLK_LINUX_6_1
/* 6.1 has no bvec_set_virt(). */
static inline void bvec_set_virt(struct bio_vec *bv, void *vaddr, unsigned int len)
{
	bv->bv_page = virt_to_page(vaddr);
	bv->bv_len = len;
	bv->bv_offset = offset_in_page(vaddr);
}

/* 6.1 has no page_frag_cache_drain(): what it does, by hand. */
static inline void page_frag_cache_drain(struct page_frag_cache *nc)
{
	if (!nc->va)
		return;
	__page_frag_cache_drain(virt_to_head_page(nc->va), nc->pagecnt_bias);
	nc->va = NULL;
}
#endif

/*
 * A piece of @align bytes' alignment (a power of two) from a page_frag_cache:
 * 6.9 and later take the alignment, 6.1 a mask (its callers pass -align).
 * Given the alignment itself, 6.1 keeps only that one bit of each offset:
 * two pieces a page, then a refill (GFP_ATOMIC, up to 32 KiB) for the next.
 */
static inline void *netblk_page_frag_alloc_align(struct page_frag_cache *nc,
						 unsigned int fragsz, gfp_t gfp,
						 unsigned int align)
{
#if NETBLK_LINUX_6_1
	return page_frag_alloc_align(nc, fragsz, gfp, -align);
#else
	return page_frag_alloc_align(nc, fragsz, gfp, align);
#endif
}

/* ---- zero-copy sends ---- */

/*
 * What an skb holding a kernel sender's pages calls as it lets go of them
 * (its ubuf_info: msg_ubuf with MSG_ZEROCOPY, as io_uring's send-zc
 * attaches one): 6.12 through a table of ops, 6.1 through a callback kept
 * in the ubuf_info itself.  NETBLK_UBUF_OPS() defines the one or the other.
 */
#if NETBLK_LINUX_6_1
struct netblk_ubuf_ops {
	void (*complete)(struct sk_buff *skb, struct ubuf_info *uarg, bool zerocopy_success);
};
#define NETBLK_UBUF_OPS(name, fn) static const struct netblk_ubuf_ops name = { .complete = fn }
#else
#define netblk_ubuf_ops ubuf_info_ops
#define NETBLK_UBUF_OPS(name, fn) static const struct ubuf_info_ops name = { .complete = fn }
#endif

/* One reference (the sender's: net_zcopy_put() drops it); the skbs take theirs. */
static inline void netblk_ubuf_init(struct ubuf_info *uarg, const struct netblk_ubuf_ops *ops)
{
#if NETBLK_LINUX_6_1
	uarg->callback = ops->complete;
#else
	uarg->ops = ops;
#endif
	refcount_set(&uarg->refcnt, 1);
	/* the frags are the sender's: an skb that must not hold them (a tap) copies them */
	uarg->flags = SKBFL_ZEROCOPY_FRAG;
}

/* ---- block devices: the server's claim ---- */

/*
 * An opened block device.  6.12 opens it as a file (bdev_file_open_by_path)
 * and tells the holder through blk_holder_ops when it goes; 6.1 opens the
 * block_device itself with an fmode_t and has no holder ops: there the
 * reaper's once-a-second look (monitor.c) is what finds a removed disk.
 */
struct blk_holder_ops;

struct netblk_bdev {
	struct block_device *bdev;
#if NETBLK_LINUX_6_1
	fmode_t mode;
#else
	struct file *file;
#endif
};

#if !NETBLK_LINUX_6_1
#define NETBLK_HAVE_HOLDER_OPS 1
#endif

/*
 * Opens @path for reading, and writing with @holder's exclusive claim (and
 * @ops, which only a holder has) when @holder is given.  Returns 0 or a
 * negative errno.
 */
static inline int netblk_bdev_open(struct netblk_bdev *b, const char *path, void *holder,
				   const struct blk_holder_ops *ops)
{
#if NETBLK_LINUX_6_1
	fmode_t mode = FMODE_READ | (holder ? FMODE_WRITE | FMODE_EXCL : 0);
	struct block_device *bdev = blkdev_get_by_path(path, mode, holder);

	if (IS_ERR(bdev))
		return PTR_ERR(bdev);
	b->mode = mode;
	b->bdev = bdev;
#else
	blk_mode_t mode = BLK_OPEN_READ | (holder ? BLK_OPEN_WRITE : 0);
	struct file *file = bdev_file_open_by_path(path, mode, holder, holder ? ops : NULL);

	if (IS_ERR(file))
		return PTR_ERR(file);
	b->file = file;
	b->bdev = file_bdev(file);
#endif
	return 0;
}

/* The claim is dropped now, not at the next task_work (bdev_fput). */
static inline void netblk_bdev_close(struct netblk_bdev *b)
{
	if (!b->bdev)
		return;
#if NETBLK_LINUX_6_1
	blkdev_put(b->bdev, b->mode);
#else
	bdev_fput(b->file);
	b->file = NULL;
#endif
	b->bdev = NULL;
}

/* Whether the device's queue completes I/O by polling (REQ_POLLED). */
static inline bool netblk_bdev_polled(struct block_device *bdev)
{
#if NETBLK_LINUX_6_1
	return test_bit(QUEUE_FLAG_POLL, &bdev_get_queue(bdev)->queue_flags);
#else
	return bdev_get_queue(bdev)->limits.features & BLK_FEAT_POLL;
#endif
}

/* ---- block devices: the client's disk ---- */

/*
 * A blk-mq disk with @lim and a write cache (with FUA) as asked.  6.12 takes
 * the limits and the cache as the disk is made; 6.1 makes it with default
 * limits, which are then set one by one on its queue.
 */
static inline struct gendisk *netblk_alloc_disk(struct blk_mq_tag_set *set,
						struct queue_limits *lim,
						bool write_cache, bool fua, void *queuedata)
{
#if NETBLK_LINUX_6_1
	struct request_queue *q;
	struct gendisk *disk;

	disk = blk_mq_alloc_disk(set, queuedata);
	if (IS_ERR(disk))
		return disk;
	q = disk->queue;
	blk_queue_logical_block_size(q, lim->logical_block_size);
	blk_queue_physical_block_size(q, lim->physical_block_size);
	blk_queue_io_opt(q, lim->io_opt);
	blk_queue_max_hw_sectors(q, lim->max_hw_sectors);
	blk_queue_max_segments(q, lim->max_segments);
	blk_queue_max_discard_sectors(q, lim->max_hw_discard_sectors);
	q->limits.discard_granularity = lim->discard_granularity;
	blk_queue_max_write_zeroes_sectors(q, lim->max_write_zeroes_sectors);
	blk_queue_write_cache(q, write_cache, fua);
	return disk;
#else
	if (write_cache)
		lim->features |= BLK_FEAT_WRITE_CACHE;
	if (fua)
		lim->features |= BLK_FEAT_FUA;
	return blk_mq_alloc_disk(set, lim, queuedata);
#endif
}

#endif
