/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C face of the C++ core: what the server's kernel C (kmod/target/)
 * calls.  An instance has a core a queue (a worker's: netblk_core_config's
 * queue of queues); each holds everything of its queue that needs no kernel:
 * its geometry, its slot table and rings, the logic of the receive path and
 * the worker, its counters and its service-time histogram.  It reaches the
 * kernel only through the ops tables of target_ops.h it is created with.
 */
#ifndef NETBLK_CORE_API_H
#define NETBLK_CORE_API_H

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

#include "netblk_counters.h"
#include "netblk_options.h"

#define NETBLK_SLOTS 256	/* requests an instance holds at once */
#define NETBLK_PER_SOURCE_DEFAULT 16	/* of those, one IPv4 address holds at most */
#define NETBLK_SESSIONS_MAX 65536
#define NETBLK_KEY_SIZE 16	/* SipHash-2-4 keys: the secret, a key= file's key */
#define NETBLK_TX_BATCH 64	/* replies handed to the NIC in one transmit */

struct netblk_core;
struct netblk_session_group;	/* an instance's queues' session tables, as per-source= counts */
struct netblk_queue;		/* the kernel side's; passed back to its ops */
struct netblk_target_disk_ops;	/* target_ops.h */
struct netblk_target_transport_ops;

/*
 * Why a frame is dropped unanswered: nb::drop_reason (frame.h), for C;
 * netblk_counters.h's NETBLK_DROPS, in its order.
 */
#define NETBLK_DROP_ENUM(NAME, ...) NETBLK_DROP_##NAME,
enum netblk_drop_reason {
	NETBLK_DROPS(NETBLK_DROP_ENUM)
	NETBLK_DROP_REASONS,
};
#undef NETBLK_DROP_ENUM

/*
 * The status a request was refused with: on the spot, in the receive path,
 * or by the worker, without the disk (the session's replay window, a full
 * session table); netblk_counters.h's NETBLK_REFUSALS, in its order.
 * `refused` is their sum.
 */
#define NETBLK_REFUSAL_ENUM(NAME, ...) NETBLK_REFUSED_##NAME,
enum netblk_refusal {
	NETBLK_REFUSALS(NETBLK_REFUSAL_ENUM)
	NETBLK_REFUSALS,
};
#undef NETBLK_REFUSAL_ENUM

/*
 * START's knobs as the instance runs them (netblk_options.h's
 * NETBLK_START_OPTIONS, in its order): what START said or the default, and
 * what the kernel resolved (the NIC's MTU, the CPU it chose, the VLAN of a
 * VLAN device).  The core gets them whole, in its config: a knob the core
 * uses is read there, with no field of its own to plumb.
 */
#define NETBLK_START_OPTION_FIELD(NAME, name, nr, type, ...) NETBLK_OPTION_CTYPE_##type name;
struct netblk_start_options {
	NETBLK_START_OPTIONS(NETBLK_START_OPTION_FIELD)
};
#undef NETBLK_START_OPTION_FIELD

/* Every knob its default (the tests' configs; the kernel parses START's). */
static inline void netblk_start_options_init(struct netblk_start_options *o)
{
#define NETBLK_START_OPTION_DEFAULT(NAME, name, nr, type, lo, hi, def, ...) o->name = def;
	NETBLK_START_OPTIONS(NETBLK_START_OPTION_DEFAULT)
#undef NETBLK_START_OPTION_DEFAULT
}

struct netblk_core_config {
	uint64_t size_bytes;
	uint32_t sector_size;
	uint32_t mtu;
	uint32_t slots;
	uint32_t nr_cpus;	/* receive-side counters are per CPU */
	uint32_t local_ip;	/* network order: the only destination answered */
	uint16_t port;
	uint16_t vlan;		/* 802.1Q VLAN served; 0: untagged frames only */
	uint8_t local_mac[6];	/* the NIC's: requests must be sent to it, replies come from it */
	uint32_t link_mtu;	/* the NIC's MTU now (netblk_core_set_link() follows it) */
	uint8_t read_only;
	uint8_t volatile_cache;
	uint8_t fua;
	uint32_t dma_align_mask; /* payload address and length the disk can take */
	/*
	 * Not 0: a READ answered in several datagrams is read in one disk I/O
	 * into data pages of this many bytes, and each datagram's data goes
	 * out from there as a second buffer of its frame -- for a NIC that
	 * sends multi-buffer XDP frames, and a max_io that divides it.  0: each
	 * datagram is read on its own into its own buffer.
	 */
	uint32_t gather_page;
	/* the block device's limits beyond reads and writes (INFO tells them) */
	uint32_t physical_block_size;
	uint32_t io_opt;
	uint32_t discard_granularity;
	uint64_t max_discard_bytes;	/* 0: the device cannot discard */
	uint64_t max_write_zeroes_bytes;	/* 0: the device cannot write zeroes */
	/*
	 * The instance's queues: this core is queue @queue of @queues, each
	 * with a worker, slots and sessions of its own (0 of 1: the only one)
	 */
	uint32_t queue;
	uint32_t queues;
	uint32_t sessions;		/* the session table's size (this queue's) */
	/* of the instance's, one IPv4 address holds at most (0: the default), in all of @group */
	uint32_t sessions_per_source;
	struct netblk_session_group *group;	/* netblk_core_group_create()'s; NULL: this core alone */
	uint64_t export_id;		/* netblk_core_export_id() of the device */
	uint8_t secret[NETBLK_KEY_SIZE];	/* random: cookies and session tokens */
	uint8_t keyed;			/* accept only datagrams tagged with key */
	uint8_t auth_data;		/* auth=full: the tag covers the data too */
	uint8_t key[NETBLK_KEY_SIZE];
	/*
	 * START's knobs, whole.  Some are also above, resolved into the
	 * core's own terms before this struct had them (mtu, vlan, read_only,
	 * sessions, sessions_per_source): those fields are the ones read.
	 */
	struct netblk_start_options options;
	/* what it reaches the kernel by (target_ops.h), and the queue they are called with */
	const struct netblk_target_disk_ops *disk;
	const struct netblk_target_transport_ops *transport;
	struct netblk_queue *owner;
};

/*
 * A consistent-enough copy of an instance's counters: a field for each of
 * netblk_counters.h's NETBLK_STATS (the attribute NETBLK_S_<NAME>), and
 * the arrays by reason and by status.
 */
#define NETBLK_STATS_FIELD(NAME, name, ...) uint64_t name;
struct netblk_stats {
	NETBLK_STATS(NETBLK_STATS_FIELD)
	uint64_t dropped[NETBLK_DROP_REASONS];	/* enum netblk_drop_reason; bad is their sum */
	uint64_t refused_by[NETBLK_REFUSALS];	/* enum netblk_refusal; refused is their sum */
};
#undef NETBLK_STATS_FIELD

/* What an instance still holds: all zero once it has drained. */
struct netblk_held {
	uint32_t slots;		/* not back on the free ring */
	uint64_t frames;	/* received frames kept and not yet released */
};

/*
 * The session tables of an instance's @queues cores, which count a source
 * address's sessions together under @lock (a spinlock_t of the caller's,
 * taken only to open a session).  0, -EINVAL or -ENOMEM; destroyed after
 * its cores.
 */
int netblk_core_group_create(uint32_t queues, void *lock, struct netblk_session_group **out);
void netblk_core_group_destroy(struct netblk_session_group *group);

/*
 * 0, -EINVAL when no sector fits a datagram at the mtu, or -ENOMEM.  Called
 * once per instance, in process context.
 */
int netblk_core_create(const struct netblk_core_config *config, struct netblk_core **out);
void netblk_core_destroy(struct netblk_core *core);

/* INFO's identity of a device from what names it for good (protocol.h export_id()). */
uint64_t netblk_core_export_id(const void *id, uint32_t len);
/* Data bytes one datagram carries (0 when no sector fits at that mtu). */
uint32_t netblk_core_max_io_for_mtu(uint32_t mtu, uint32_t sector_size);
uint32_t netblk_core_max_io(const struct netblk_core *core);
uint32_t netblk_core_slots(const struct netblk_core *core);
/* netblk_core_config.gather_page where the core gathers READs, or 0. */
uint32_t netblk_core_gather_page(const struct netblk_core *core);
/* Bytes of headers before a reply's data: 96, or 100 with a VLAN tag. */
uint32_t netblk_core_reply_headroom(const struct netblk_core *core);

/*
 * The NIC's MTU or address changed (a netdev notifier, any context): replies
 * from now on come from @mac, and none larger than @mtu goes out.
 */
void netblk_core_set_link(struct netblk_core *core, uint32_t mtu, const uint8_t *mac);

/* ---- the receive path (a NIC's softirq, any CPU, one frame at a time a CPU) ---- */

enum netblk_rx_verdict {
	NETBLK_RX_KEPT,		/* a slot holds the frame now */
	NETBLK_RX_FREE,		/* the core is done with it: free it */
	NETBLK_RX_REPLY,	/* it now holds a reply of *len bytes: transmit it */
};

/*
 * One of the buffers after the first of a multi-buffer XDP frame (a jumbo
 * datagram on a NIC whose receive buffers are smaller than the MTU).
 */
struct netblk_piece {
	uint8_t *data;
	uint32_t len;
};

/* Buffers after the first the core takes a frame in (MAX_SKB_FRAGS's default). */
#define NETBLK_FRAGS_MAX 17

/*
 * A frame the XDP program steered to the instance: @data is its first
 * (Ethernet) byte, *@len the length of its first buffer, and @frags its
 * @nr_frags others (NULL and 0 for a frame of one buffer).  @frame is the
 * transport's handle, kept in the slot when the verdict is KEPT.  A REPLY is
 * *@len bytes at @data: the first buffer's, never the others.
 */
enum netblk_rx_verdict netblk_core_receive(struct netblk_core *core, uint32_t cpu,
					   void *frame, uint8_t *data, uint32_t *len,
					   const struct netblk_piece *frags, uint32_t nr_frags,
					   uint64_t now_ns);
/*
 * Which of the instance's queues a frame is for: the queue of the session a
 * request names (netblk_core_config.queue), or @core's own for any other
 * (a HELLO, what is not netblk's): called on the queue of the CPU it
 * arrived on, before netblk_core_receive() on the queue it names.  A
 * session's datagram arriving on another queue's CPU is counted (steered)
 * on @core.  Reads the headers unchecked: the queue it names checks them.
 */
uint32_t netblk_core_queue_of(struct netblk_core *core, uint32_t cpu, const uint8_t *data,
			      uint32_t len);
/* How many of the refusals the receive path sent the NIC took. */
void netblk_core_rx_sent(struct netblk_core *core, uint32_t cpu, uint32_t sent,
			 uint32_t dropped);
/* A frame the transport dropped unseen (in more than NETBLK_FRAGS_MAX + 1 buffers). */
void netblk_core_rx_drop(struct netblk_core *core, uint32_t cpu, enum netblk_drop_reason why);

/* ---- the worker (one kernel thread an instance) ---- */

/* Send what is queued to the disk (the worker holds a plug around it). */
uint32_t netblk_core_submit(struct netblk_core *core, uint64_t now_ns);
/*
 * Answer what the disk has finished, in one transmit, and send again what
 * the NIC had no room for.  Returns how many slots it moved on.
 */
uint32_t netblk_core_reply(struct netblk_core *core, uint64_t now_ns);

#define NETBLK_NO_WORK (~(uint64_t)0)
/*
 * When submit or reply has something to do: 0 now, NETBLK_NO_WORK when only
 * a ring push (which kicks the worker) can bring any, else the time at which
 * a retry is due -- for the disk's "again" or a reply the NIC had no room for.
 */
uint64_t netblk_core_next_work(struct netblk_core *core, uint64_t now_ns);

/*
 * 0, or the NIC's error (a negative errno) once every transmit has failed
 * with an error for a second: the NIC cannot send this instance's replies
 * (mlx5 and i40e answer -ENXIO from a CPU they have no XDP queue for).
 * Sticky, until the worker rearms it: an instance that waited for its NIC
 * and serves again (a NIC that was down failed what it was given).
 */
int netblk_core_tx_failure(const struct netblk_core *core);
/* Worker: forget the NIC's failures so far (netblk_core_tx_failure 0 again). */
void netblk_core_tx_rearm(struct netblk_core *core);
void netblk_core_count_sleep(struct netblk_core *core);
/* Worker: a slot's page the NIC still held was replaced by a fresh one. */
void netblk_core_count_page_replaced(struct netblk_core *core);
/* On stop: drop what is queued and not yet at the disk; slots at the disk stay. */
void netblk_core_drop_queued(struct netblk_core *core);
uint32_t netblk_core_at_disk(struct netblk_core *core);
void netblk_core_held(struct netblk_core *core, struct netblk_held *held);

/* ---- the disk's completion (any context, hard IRQ included) ---- */

#define NETBLK_IO_AGAIN 0xffff	/* the disk refused it for now (BLK_STS_AGAIN): submit again */
void netblk_core_complete(struct netblk_core *core, uint32_t slot, uint16_t status);

void netblk_core_read_stats(const struct netblk_core *core, struct netblk_stats *stats);
/* Add one queue's counters (netblk_core_read_stats) into an instance's @sum. */
void netblk_stats_add(struct netblk_stats *sum, const struct netblk_stats *one);

/* The histogram's layout (core/histogram.h), for readers of its buckets. */
#define NETBLK_LATENCY_LINEAR_LIMIT 128
#define NETBLK_LATENCY_SUB_BUCKETS 64

/*
 * Service time by the request's op (the protocol's op code): up to @n ops
 * with replies into @out; returns how many ops have had replies.
 */
#define NETBLK_OP_CODES 8	/* op codes 0 (none) to 7 (HELLO), protocol.h */

struct netblk_op_service {
	uint32_t op;
	uint64_t count;
	uint64_t sum_ns;
};
uint32_t netblk_core_read_op_service(const struct netblk_core *core,
				     struct netblk_op_service *out, uint32_t n);

/*
 * The service-time histogram (nanoseconds, core/histogram.h's buckets):
 * copies up to @n bucket counts into @buckets and returns how many there
 * are; *@max is the largest sample, *@count the samples, *@sum their exact
 * sum.
 */
uint32_t netblk_core_read_latency(const struct netblk_core *core, uint64_t *buckets,
				  uint32_t n, uint64_t *max, uint64_t *count, uint64_t *sum);

#ifdef __cplusplus
}
#endif

#endif
