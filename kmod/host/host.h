/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The block-device client ("host", as in drivers/nvme/host): an
 * attachment is one /dev/netblkN backed by one remote instance.  The C++
 * core (core/host_api.h) holds its session and its datagrams; this holds
 * the kernel objects around it, each file calling by name only the ones
 * listed after it (attach picks the transport and hands it to the engine;
 * blk -> engine; the engine reaches the transport through
 * struct netblk_host_transport_ops alone, and the core calls back through
 * struct netblk_host_core_ops alone -- nothing below names what is above):
 *
 *   attach.c     its life: attach, detach, the list of them (under netblk_lock;
 *                an attach waits for the network without it)
 *   blk.c        the block device: blk-mq requests in, completions out
 *   engine.c     the request engine: the lock, the core's calls and
 *                callbacks, its timer, the requests it ends, the sends it
 *                kicks -- the one place that sequence is written
 *   transport.c  the UDP socket, the first netblk_host_transport_ops:
 *                datagrams out (WRITE data from the request's pages, not
 *                copied), answers in (its softirq), handed up through the
 *                function the engine gave it at open
 *
 * An attachment has one or more queues (attach queues=N; struct
 * netblk_host_queue): a blk-mq hardware queue each, with its own core and
 * session, socket (its own source port, for the server NIC's RSS to spread
 * them), pending ring, sender and timer.  Queue 0 connects first, and its
 * INFO says what the disk is and how many queues the instance has; the
 * others connect before the disk is made.  Each queue's resends,
 * reconnects and outages are its own; what the attachment says (LIST) is
 * its queues' summed.
 *
 * One spinlock a queue (lock, taken with BHs off) covers its core: the
 * block layer's requests on that hardware queue, its socket's answers and
 * its timer all go through it (engine.c).  Datagrams are recorded under it
 * and sent after it (sending may sleep).
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
#include "kernel_api.h"	/* enum netblk_io_op */
#include "host_api.h"
#include "netblk_genl.h"

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
/* An attachment's queues at most (attach queues=N): what START's queues= takes. */
#define NETBLK_HOST_QUEUES_MAX		64

/* ATTACH's knobs (netblk_options.h's NETBLK_ATTACH_OPTIONS, in its order). */
#define NETBLK_ATTACH_OPTION_FIELD(NAME, name, nr, type, ...) NETBLK_OPTION_CTYPE_##type name;
struct netblk_attach_options {
	NETBLK_ATTACH_OPTIONS(NETBLK_ATTACH_OPTION_FIELD)
};
#undef NETBLK_ATTACH_OPTION_FIELD

/* What ATTACH asks for; unset optional values are 0. */
struct netblk_attach_params {
	__be32 addr;
	u16 port;
	char ifname[IFNAMSIZ];	/* empty: the route decides */
	bool read_only;
	struct netblk_attach_options opt;	/* the knobs: given, or their defaults */
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
 * kernel, a queue's; its lock's holder writes them.
 */
#define NETBLK_HOST_KERNEL_FIELD_kernel(name) u64 name;
#define NETBLK_HOST_KERNEL_FIELD_queue(name)
#define NETBLK_HOST_KERNEL_FIELD_core(name)
#define NETBLK_HOST_KERNEL_FIELD(NAME, name, nr, where, ...) NETBLK_HOST_KERNEL_FIELD_##where(name)
struct netblk_host_kernel_stats {
	NETBLK_HOST_STATS(NETBLK_HOST_KERNEL_FIELD)
};

/*
 * A transport's upcall, given to it at open: an answer from the instance,
 * @payload its first @linear bytes (at least the header's, and INFO's
 * payload when it is one), @payload_len the UDP payload's length, @frame
 * the transport's handle for its read().  In its softirq; the engine takes
 * the lock.
 */
struct netblk_host_queue;
typedef void (*netblk_host_rx_fn)(struct netblk_host_queue *q, const u8 *payload,
				  u32 linear, u32 payload_len, void *frame);

/*
 * What the request engine (engine.c) asks of a transport, for one of an
 * attachment's queues, which it reaches through the attachment's ops table
 * alone; the UDP socket (transport.c, netblk_host_udp_ops) is the first.
 * Datagrams are recorded under the queue's lock and sent after it.
 */
struct netblk_host_transport_ops {
	/* Its memory for @q (process context); destroy() frees what create() left. */
	int (*create)(struct netblk_host_queue *q);
	void (*destroy)(struct netblk_host_queue *q);
	/* The link to the instance; each answer goes to @rx from then on. */
	int (*open)(struct netblk_host_queue *q, struct net *net, netblk_host_rx_fn rx,
		    struct netlink_ext_ack *extack);
	/* No answer reaches rx once this returns. */
	void (*stop_rx)(struct netblk_host_queue *q);
	/* After stop_rx and the timer: nothing kicks it any more; the link goes. */
	void (*close)(struct netblk_host_queue *q);
	/*
	 * Under the lock: record a datagram of request @tag (@rq, held while
	 * recorded; NULL and NETBLK_HOST_NO_TAG: of none), its @header, then
	 * @len bytes of @rq's data from its byte @at.  Dropped and counted when
	 * there is no room: the core's timer sends it again.
	 */
	void (*record)(struct netblk_host_queue *q, const u8 *header, u32 tag,
		       struct request *rq, u32 at, u32 len);
	/* Under the lock: whether anything recorded waits to be sent. */
	bool (*recorded)(struct netblk_host_queue *q);
	/* Under the lock: request @tag failed, none of its recorded datagrams goes out. */
	void (*purge)(struct netblk_host_queue *q, u32 tag);
	/* Forget what was recorded and not sent (detach); takes the lock. */
	void (*drop)(struct netblk_host_queue *q);
	/* Send what is recorded (process context; may sleep). */
	void (*flush)(struct netblk_host_queue *q);
	/* After an unlock in a softirq: have a worker send what is recorded. */
	void (*kick)(struct netblk_host_queue *q);
	/* Under the lock: @len bytes of an answer's data in @frame to byte @at of @rq. */
	void (*read)(struct netblk_host_queue *q, void *frame, struct request *rq, u32 at,
		     u32 len);
};

struct netblk_host_cmd {
	struct llist_node done;	/* on its queue's list of requests to end */
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

/*
 * One of an attachment's queues: blk-mq hardware queue index's requests,
 * one session with the instance through a socket of its own.
 */
struct netblk_host_queue {
	struct netblk_attachment *att;
	u32 index;			/* its hardware queue's, and att->queues[]' */

	spinlock_t lock;		/* the core, pending, stats, dead */
	struct netblk_host_core *core;
	struct netblk_host_kernel_stats stats;
	struct netblk_host_pending *pending;	/* a ring of NETBLK_HOST_PENDING */
	u32 pending_head, pending_count;
	bool dead;			/* detached, or given up: new requests fail */
	u32 info_tag;			/* the core's tag for INFO: the last one */
	int info_status;		/* 0, or why INFO failed (negative errno) */
	struct completion info_done;

	struct hrtimer timer;		/* the core's resends (softirq) */
	struct work_struct tx_work;	/* sends what softirqs recorded */
	struct mutex tx_mutex;		/* one sender on the socket at a time */
	struct netblk_host_tx *tx;	/* under tx_mutex */
	struct socket *sock;
	netblk_host_rx_fn rx;		/* where the socket's answers go (the engine's) */
	struct page_frag_cache frags;	/* WRITE headers (under lock) */
	struct page *header_page;	/* the last header's page: compared, never used */

	struct llist_head done;		/* struct netblk_host_cmd the core finished */
};

struct netblk_attachment {
	struct list_head node;		/* on netblk_attachments, under netblk_lock */
	struct kref ref;		/* the attacher's, then the list's; and each waiter's */
	enum netblk_host_state state;	/* under netblk_lock */
	struct completion settled;	/* attaching is over: attached, or undone */
	int index;			/* N of /dev/netblkN */
	char name[DISK_NAME_LEN];
	struct netblk_attach_params params;	/* opt.queues: the number made, once known */
	struct netblk_host_info info;	/* queue 0's INFO */
	u64 attached_ns;		/* boottime */

	const struct netblk_host_transport_ops *transport;
	/* queues[0 .. nr_queues): each made whole (engine created) before it is counted */
	u32 nr_queues;
	struct netblk_host_queue *queues[NETBLK_HOST_QUEUES_MAX];

	spinlock_t abort_lock;		/* attaching, abort */
	bool attaching;			/* not attached yet: blk-mq's timeout fails the attach */
	enum netblk_host_abort abort;	/* why the attach was given up */

	struct work_struct resize_work;	/* the disk's capacity to info.size_bytes */
	struct blk_mq_tag_set tag_set;
	struct gendisk *disk;
};

/* ---- a block request's holds (netblk_host_cmd.holds): here, for every file to take ---- */

/* Request @tag of queue @q: its hardware queue's tags (each has its own). */
static inline struct request *netblk_host_tag_to_rq(struct netblk_host_queue *q, u32 tag)
{
	struct netblk_attachment *att = q->att;

	if (tag >= att->params.opt.queue_depth || !att->tag_set.tags)
		return NULL;
	return blk_mq_tag_to_rq(att->tag_set.tags[q->index], tag);
}

static inline void netblk_host_rq_end(struct request *rq)
{
	if (likely(!blk_should_fake_timeout(rq->q)))
		blk_mq_complete_request(rq);
}

/* A hold on a request: it does not end until every hold is put. */
static inline void netblk_host_rq_get(struct request *rq)
{
	refcount_inc(&((struct netblk_host_cmd *)blk_mq_rq_to_pdu(rq))->holds);
}

/*
 * Put a hold outside the lock: the last one ends the request now.  Where
 * datagrams were sent, and where an skb let go of a request's pages (the
 * softirq or task that freed it).
 */
static inline void netblk_host_rq_put(struct request *rq)
{
	struct netblk_host_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (refcount_dec_and_test(&cmd->holds))
		netblk_host_rq_end(rq);
}

/* Put a hold under the lock: the last one leaves it to the engine, after the lock. */
static inline void netblk_host_rq_put_locked(struct netblk_host_queue *q, struct request *rq)
{
	struct netblk_host_cmd *cmd = blk_mq_rq_to_pdu(rq);

	/* ended after the lock: ending it may start more I/O on this disk */
	if (refcount_dec_and_test(&cmd->holds))
		llist_add(&cmd->done, &q->done);
}

/* attach.c: attach without netblk_lock (it takes it); the rest under it */
int netblk_host_attach(const struct netblk_attach_params *p, struct net *net,
		       struct netlink_ext_ack *extack, struct netblk_attachment **out);
void netblk_host_put(struct netblk_attachment *att);
int netblk_host_detach(struct netblk_attachment *att, bool force,
		       struct netlink_ext_ack *extack, struct netblk_attachment **attaching);
/* Without netblk_lock: the given-up attach @att (netblk_host_detach) is undone. */
void netblk_host_wait_undone(struct netblk_attachment *att);
struct netblk_attachment *netblk_host_find(const char *name);
void netblk_host_detach_all(void);
extern struct list_head netblk_attachments;
int netblk_host_init(void);
void netblk_host_exit(void);

/* blk.c */
int netblk_host_disk_create(struct netblk_attachment *att, int major);
void netblk_host_disk_remove(struct netblk_attachment *att);
bool netblk_host_disk_open(const struct netblk_attachment *att);
void netblk_host_disk_init(struct netblk_attachment *att);
/* After the socket and the timer stopped: no resize is pending any more. */
void netblk_host_disk_quiesce(struct netblk_attachment *att);

/* engine.c: a queue's lock, its core, its timer; the transport through its ops */
void netblk_host_engine_init(struct netblk_attachment *att,
			     const struct netblk_host_transport_ops *transport);
/* Queue @index (att->nr_queues, counted once made): its memory, its core. */
int netblk_host_engine_create(struct netblk_attachment *att, u32 index);
/* Every queue netblk_host_engine_create() made, whatever of it there is. */
void netblk_host_engine_destroy(struct netblk_attachment *att);
/* Queue @q's link, a session, and INFO asked as request info_tag (attach.c waits for it). */
int netblk_host_engine_connect(struct netblk_host_queue *q, struct net *net,
			       struct netlink_ext_ack *extack);
/* A block request to its queue's core: 0, -EAGAIN (no room now), -EIO, -EINVAL. */
int netblk_host_engine_queue(struct netblk_host_queue *q, struct request *rq,
			     enum netblk_io_op op);
/* Nothing calls into the cores any more: answers, the timers; new requests fail. */
void netblk_host_engine_stop(struct netblk_attachment *att);
/* After netblk_host_engine_stop(): the links go, and what they had recorded. */
void netblk_host_engine_close(struct netblk_attachment *att);
/* Fail what is left, outside any softirq: a forced detach, rmmod, a failed attach. */
void netblk_host_engine_fail_all(struct netblk_attachment *att);
bool netblk_host_give_up(struct netblk_attachment *att, enum netblk_host_abort why);
/* Whether any queue's core gave the instance up for silent (timeout=). */
bool netblk_host_engine_gave_up(struct netblk_attachment *att);
/* The attachment's counters, its queues' summed, each read under its lock. */
void netblk_host_read_queue_stats(struct netblk_host_queue *q, struct netblk_host_stats *core,
				  struct netblk_host_kernel_stats *kernel);
void netblk_host_read_stats(struct netblk_attachment *att, struct netblk_host_stats *core,
			    struct netblk_host_kernel_stats *kernel);

/* transport.c: the UDP socket */
extern const struct netblk_host_transport_ops netblk_host_udp_ops;
int netblk_host_udp_init(void);
void netblk_host_udp_exit(void);

#endif
