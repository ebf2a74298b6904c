/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The block-device client's shim ("host", as in drivers/nvme/host): an
 * attachment is one /dev/netblkN backed by one remote instance.  The C++
 * core (core/host_api.h) holds its session and its datagrams; this holds
 * the kernel objects around it:
 *
 *   attach.c     its life: attach, detach, the list of them (under netblk_lock;
 *                an attach waits for the network without it)
 *   blk.c        the block device: blk-mq requests in, completions out
 *   transport.c  the UDP socket: datagrams out (WRITE data from the
 *                request's pages, not copied), answers in (its softirq)
 *
 * One spinlock (lock, taken with BHs off) covers the core: the block
 * layer's requests, the socket's answers and the timer all go through it.
 * Datagrams are recorded under it and sent after it (sending may sleep).
 *
 * A request ends only once nothing of it can go out any more: each
 * datagram recorded or being sent, and each send whose skbs hold its pages
 * (until the stack lets go of them), holds it (netblk_host_cmd.holds), as
 * does the core until it is over.  A request the core fails has its
 * recorded datagrams dropped at once.
 */
#ifndef NETBLK_HOST_H
#define NETBLK_HOST_H

#include <linux/blk-mq.h>
#include <linux/hrtimer.h>
#include <linux/if.h>		/* IFNAMSIZ */
#include <linux/kref.h>
#include <linux/llist.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#include <net/netlink.h>

#include "compat.h"
#include "shim_api.h"	/* enum netblk_io_op */
#include "host_api.h"
#include "netblk_genl.h"

#define NETBLK_HOST_DEPTH_DEFAULT	64	/* requests in flight a device */
/* A request is at most this many datagrams' worth: max_io x 64 (64 KiB at 1024 bytes). */
#define NETBLK_HOST_PIECES		64
#define NETBLK_HOST_MINORS		16	/* partitions of a device */
#define NETBLK_HOST_INFO_WAIT		(5 * HZ)	/* attach gives up on a silent server */
/*
 * While attaching, a request not answered in this long -- the partition
 * scan's READs, which add_disk() waits for -- fails, and so does the
 * attach: a server that answers INFO and drops the rest (replies larger
 * than its path carries; a stuck disk behind it) is refused, not waited
 * for.  Once attached, blk-mq's timer only reminds: the core decides.
 */
#define NETBLK_HOST_ATTACH_IO_WAIT	(15 * HZ)
/* Datagrams recorded and not yet sent: a window's worth, at most the instance's slots. */
#define NETBLK_HOST_PENDING		512
/*
 * A datagram's header and the pieces of memory its data lies in, at the
 * most: as many as an skb takes as frags (MAX_SKB_FRAGS is 17 or more), the
 * header one of them, since a datagram in place is its pieces as they are.
 * A jumbo max_io (8704 bytes) spans at most 4 pages; data in more than 16
 * pieces (segments smaller than a page: 8704 bytes in 512-byte ones is 17)
 * is copied into pages of its own.
 */
#define NETBLK_HOST_BVECS		17
/*
 * Datagrams taken off the ring at once, and the most one send carries: a
 * run of them of one size goes out in one UDP GSO send (one skb down the
 * stack, segmented at the device), as QUIC stacks send theirs.
 */
#define NETBLK_HOST_TX_BATCH		64

/* What ATTACH asks for; unset optional values are 0. */
struct netblk_attach_params {
	__be32 addr;
	u16 port;
	char ifname[IFNAMSIZ];	/* empty: the route decides */
	bool read_only;
	u32 queue_depth;
	u32 timeout_ms;		/* 0: never fail I/O on its own */
	bool has_key;
	u8 key[NETBLK_KEY_BYTES];
};

/* A datagram recorded under the lock, to go out after it. */
struct netblk_host_pending {
	u8 header[NETBLK_HOST_HEADER_SIZE];
	u32 tag;		/* its request's (NETBLK_HOST_NO_TAG: HELLO) */
	struct request *rq;	/* its block request, held (NULL: HELLO, INFO) */
	bool purged;		/* its request failed: dropped, not to be sent */
	u8 *header_frag;	/* WRITE: the header again, in a page the skb may hold */
	u32 len;		/* data bytes after the header */
	u16 nr_bvecs;
	bool spliced;		/* data pages may go in the skb as they are */
	bool bounced;		/* the data was copied into pages of our own first */
	struct bio_vec bvecs[NETBLK_HOST_BVECS];	/* each page held (get_page) */
};

/* The sender's batch, under tx_mutex: what one pass takes off the ring. */
struct netblk_host_tx {
	struct netblk_host_pending batch[NETBLK_HOST_TX_BATCH];
	struct bio_vec bvecs[NETBLK_HOST_TX_BATCH * NETBLK_HOST_BVECS];	/* a run's, end to end */
	struct kvec kvecs[NETBLK_HOST_TX_BATCH];	/* a run of headers alone */
	bool gso_refused;	/* this kernel cannot segment on this route: one a send */
	bool route_sg;		/* the route's device takes pages: the batch's, looked up once */
	/* what the sends did, added to the counters at the next pass under the lock */
	u64 in_place, copied, batched, errors;
};

/*
 * The client's own counters, netblk_counters.h's NETBLK_HOST_STATS of where
 * shim; the lock's holder writes them.
 */
#define NETBLK_HOST_SHIM_FIELD_shim(name) u64 name;
#define NETBLK_HOST_SHIM_FIELD_queue(name)
#define NETBLK_HOST_SHIM_FIELD_core(name)
#define NETBLK_HOST_SHIM_FIELD(NAME, name, nr, where, ...) NETBLK_HOST_SHIM_FIELD_##where(name)
struct netblk_host_shim_stats {
	NETBLK_HOST_STATS(NETBLK_HOST_SHIM_FIELD)
};

struct netblk_host_cmd {
	struct llist_node done;	/* on the attachment's list of requests to end */
	/* the core (until it is over), datagrams recorded or being sent, sends in skbs */
	refcount_t holds;
	u16 status;		/* 0 or the errno it ended with */
};

/*
 * An attachment is on the list from the start of its attach, so that
 * detach and rmmod find it, but only ATTACHED ones are listed and detached
 * as devices: an ATTACHING one is given up (netblk_host_give_up), and its
 * attacher undoes it.
 */
enum netblk_host_state {
	NETBLK_HOST_ATTACHING,
	NETBLK_HOST_ATTACHED,
};

/* Why an attach was given up before it was done. */
enum netblk_host_abort {
	NETBLK_HOST_NOT_GIVEN_UP,
	NETBLK_HOST_DETACHED,		/* DETACH named it, or all */
	NETBLK_HOST_UNLOADING,		/* rmmod */
	NETBLK_HOST_NO_ANSWER,		/* a request went unanswered (NETBLK_HOST_ATTACH_IO_WAIT) */
};

struct netblk_attachment {
	struct list_head node;		/* on netblk_attachments, under netblk_lock */
	struct kref ref;		/* the attacher's, then the list's; and each waiter's */
	enum netblk_host_state state;	/* under netblk_lock */
	struct completion settled;	/* attaching is over: attached, or undone */
	int index;			/* N of /dev/netblkN */
	char name[DISK_NAME_LEN];
	struct netblk_attach_params params;
	struct netblk_host_info info;
	u64 attached_ns;		/* boottime */

	spinlock_t lock;		/* the core, pending, stats, dead */
	struct netblk_host_core *core;
	struct netblk_host_shim_stats stats;
	struct netblk_host_pending *pending;	/* a ring of NETBLK_HOST_PENDING */
	u32 pending_head, pending_count;
	bool dead;			/* detached: new requests fail */
	bool attaching;			/* not attached yet: blk-mq's timeout fails the attach */
	enum netblk_host_abort abort;	/* why the attach was given up */
	u32 info_tag;			/* the core's tag for INFO: the last one */
	int info_status;		/* 0, or why INFO failed (negative errno) */
	struct completion info_done;

	struct hrtimer timer;		/* the core's resends (softirq) */
	struct work_struct resize_work;	/* the disk's capacity to info.size_bytes */
	struct work_struct tx_work;	/* sends what softirqs recorded */
	struct mutex tx_mutex;		/* one sender on the socket at a time */
	struct netblk_host_tx *tx;	/* under tx_mutex */
	struct socket *sock;
	struct page_frag_cache frags;	/* WRITE headers (under lock) */
	struct page *header_page;	/* the last header's page: compared, never used */

	struct llist_head done;		/* struct netblk_host_cmd the core finished */
	struct blk_mq_tag_set tag_set;
	struct gendisk *disk;
};

/* attach.c: attach without netblk_lock (it takes it); the rest under it */
int netblk_host_attach(const struct netblk_attach_params *p, struct net *net,
		       struct netlink_ext_ack *extack, struct netblk_attachment **out);
void netblk_host_put(struct netblk_attachment *att);
int netblk_host_detach(struct netblk_attachment *att, bool force,
		       struct netlink_ext_ack *extack, struct netblk_attachment **attaching);
/* Without netblk_lock: the given-up attach @att (netblk_host_detach) is undone. */
void netblk_host_wait_undone(struct netblk_attachment *att);
bool netblk_host_give_up(struct netblk_attachment *att, enum netblk_host_abort why);
struct netblk_attachment *netblk_host_find(const char *name);
void netblk_host_detach_all(void);
extern struct list_head netblk_attachments;
int netblk_host_init(void);
void netblk_host_exit(void);
/* The attachment's counters, read under its lock. */
void netblk_host_read_stats(struct netblk_attachment *att, struct netblk_host_stats *core,
			    struct netblk_host_shim_stats *shim);

/* transport.c */
int netblk_host_transport_init(void);
void netblk_host_transport_exit(void);
void netblk_host_tx_init(struct netblk_attachment *att);
int netblk_host_socket_open(struct netblk_attachment *att, struct net *net,
			    struct netlink_ext_ack *extack);
void netblk_host_socket_stop_rx(struct netblk_attachment *att);
void netblk_host_socket_close(struct netblk_attachment *att);
/* Send what is recorded (process context; may sleep). */
void netblk_host_send_pending(struct netblk_attachment *att);
/* After an unlock in a softirq: have tx_work send what is recorded. */
void netblk_host_kick_tx(struct netblk_attachment *att);
void netblk_host_drop_pending(struct netblk_attachment *att);
/* Under the lock: request @tag failed, none of its recorded datagrams goes out. */
void netblk_host_purge_pending(struct netblk_attachment *att, u32 tag);

/* blk.c */
int netblk_host_disk_create(struct netblk_attachment *att, int major);
void netblk_host_disk_remove(struct netblk_attachment *att);
bool netblk_host_disk_open(const struct netblk_attachment *att);
struct request *netblk_host_tag_to_rq(struct netblk_attachment *att, u32 tag);
/* End the requests nothing holds any more, outside the lock. */
void netblk_host_end_done(struct netblk_attachment *att);
/* A hold on a request: it does not end until every hold is put. */
void netblk_host_rq_get(struct request *rq);
/* Put a hold outside the lock: the last one ends the request now. */
void netblk_host_rq_put(struct request *rq);
/* Put a hold under the lock: the last one leaves it to netblk_host_end_done(). */
void netblk_host_rq_put_locked(struct netblk_attachment *att, struct request *rq);
/* After a core call under the lock: the timer is armed for what waits. */
void netblk_host_arm_timer(struct netblk_attachment *att);
void netblk_host_disk_init(struct netblk_attachment *att);
/* After the socket and the timer stopped: no resize is pending any more. */
void netblk_host_disk_quiesce(struct netblk_attachment *att);

#endif
