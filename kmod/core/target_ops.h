/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the server's C++ core needs of the kernel's disk and network: two
 * ops tables the instance hands it when it creates it (netblk_core_config),
 * as nvmet's core reaches its transports through nvmet_fabrics_ops.  The
 * core calls up nothing by name: in the module the disk is target/disk.c's
 * bios and the transport the XDP one (target/handoff.c receives, xmit.c
 * sends); in the unit tests both are fakes (tests/unit/fake_target.cpp).
 *
 * Each is called with the queue the config named (an instance's worker,
 * with its slots' bios and buffers), and costs one indirect call per I/O,
 * buffer or transmit batch -- none per byte.
 */
#ifndef NETBLK_TARGET_OPS_H
#define NETBLK_TARGET_OPS_H

#include "kernel_api.h"	/* enum netblk_io_op */

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

struct netblk_instance;
struct netblk_queue;
struct netblk_piece;		/* core_api.h */
struct netlink_ext_ack;

#define NETBLK_GATHER_PAGES_MAX 16	/* a gathered READ's pages at most (read_datagrams_max) */

/* The disk.  Worker context. */
struct netblk_target_disk_ops {
	/*
	 * Start slot @slot's disk I/O: READ into, or WRITE from, @len bytes
	 * at @data (a buffer inside a frame: no copy), FLUSH, or DISCARD or
	 * WRITE_ZEROES of @len bytes at @offset (@data NULL for these three).
	 * @fua: the write must reach stable media.  @may_block: submit it so
	 * that the disk may make the worker wait (no REQ_NOWAIT), for an I/O
	 * the disk keeps answering "again" otherwise.  Its end is reported by
	 * netblk_core_complete(), possibly before this returns.  A non-zero
	 * return means it was not started and no completion will come.
	 */
	int (*submit_io)(struct netblk_queue *q, uint32_t slot, enum netblk_io_op op,
			 uint64_t offset, uint8_t *data, uint32_t len, int fua, int may_block);
	/*
	 * Start slot @slot's READ of @len bytes at @offset into the @nr pages
	 * whose first bytes @pages names, in order, each
	 * netblk_core_config.gather_page bytes and filled whole but for the
	 * last: one disk I/O for a READ answered in several datagrams (a
	 * gathered READ).  As submit_io otherwise.
	 */
	int (*submit_read_pages)(struct netblk_queue *q, uint32_t slot, uint64_t offset,
				 uint8_t *const *pages, uint32_t nr, uint32_t len, int may_block);
};

/*
 * A reply ready to go: a received frame rewritten in place, or a buffer of
 * the transport's -- with, for a gathered READ's datagram, its data in a
 * second buffer, inside a data page.
 */
struct netblk_tx {
	void *frame;		/* the received frame it is, or NULL: a buffer of the transport's */
	uint8_t *data;		/* its first byte */
	uint8_t *frag;		/* its data, in a data page, or NULL: all of it is at @data */
	uint32_t slot;
	uint32_t len;		/* bytes from the first byte */
	uint32_t frag_len;	/* bytes at @frag */
};

/*
 * The transport: its buffers, its transmit, its received frames (worker
 * context but free_frame), and its life with the instance's.
 */
struct netblk_target_transport_ops {
	/*
	 * The first byte of slot @slot's own frame buffer, with room for the
	 * reply headroom's bytes of headers (96, or 100 with a VLAN tag) and
	 * max_io bytes of data after it, the disk may DMA into at the
	 * headroom; NULL when none can be had now.
	 */
	uint8_t *(*slot_buffer)(struct netblk_queue *q, uint32_t slot);
	/*
	 * The first byte of slot @slot's data page, which a gathered READ
	 * reads into and its datagrams send their data from as a second
	 * buffer of their frames: gather_page bytes no frame still in the NIC
	 * holds, or NULL when none can be had now.
	 */
	uint8_t *(*data_page)(struct netblk_queue *q, uint32_t slot);
	/*
	 * A buffer for a reply of headers alone (EAGAIN) when the slot's own
	 * buffer cannot be had: the first byte of a frame with room for its
	 * headers, lent to the slot until reply_done, or NULL when none is
	 * free either.
	 */
	uint8_t *(*reply_buffer)(struct netblk_queue *q, uint32_t slot);
	/* The reply in the slot's lent buffer went to the NIC, or was dropped. */
	void (*reply_done)(struct netblk_queue *q, uint32_t slot);
	/*
	 * Hand @n replies to the NIC in one transmit with one flush.  Returns
	 * how many it took -- always the first ones; received frames it did
	 * not take are still the caller's (to send again or free), the
	 * transport's own buffers are free again.  *@error is the NIC's error
	 * (a negative errno) when it failed the transmit, 0 when it merely
	 * had no room.
	 */
	uint32_t (*transmit)(struct netblk_queue *q, const struct netblk_tx *tx,
			     uint32_t n, int *error);
	/*
	 * The buffers after the first of a received multi-buffer frame, at
	 * most @max of them into @frags: how many there are.
	 */
	uint32_t (*frame_frags)(struct netblk_queue *q, void *frame,
				struct netblk_piece *frags, uint32_t max);
	/* Release a received frame the core no longer needs.  Any context. */
	void (*free_frame)(struct netblk_queue *q, void *frame);

	/*
	 * The instance's, not the core's (target/instance.c; the unit tests'
	 * fake has none).  init: its queues' buffers, once the cores exist; exit
	 * undoes it, whatever init left.  open: frames arrive from here on,
	 * the last step of a start; close: none arrives once it returns, the
	 * first step of a stop.  Process context, under netblk_lock.
	 */
	int (*init)(struct netblk_instance *inst);
	void (*exit)(struct netblk_instance *inst);
	int (*open)(struct netblk_instance *inst, struct netlink_ext_ack *extack);
	void (*close)(struct netblk_instance *inst);
};

#ifdef __cplusplus
}
#endif

#endif
