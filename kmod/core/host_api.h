/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C face of the block-device client's core (issue 10; "host" as in
 * drivers/nvme/host): one session of an attachment (host_session.h), its
 * datagrams outstanding (host_queue.h), the headers it sends and the answers
 * it reads.  The client's kernel side (kmod/host/) owns the block requests,
 * the socket and the timer, and gives each of an attachment's queues a core
 * of its own (attach queues=N: a session each); it calls these under that
 * queue's lock, and the core calls back through the struct
 * netblk_host_core_ops it was given at creation (at the end of this file),
 * under the same lock: the core names nothing of the kernel side.
 */
#ifndef NETBLK_CORE_HOST_API_H
#define NETBLK_CORE_HOST_API_H

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

#include "core_api.h"	/* NETBLK_KEY_SIZE */
#include "kernel_api.h"	/* enum netblk_io_op */

#define NETBLK_HOST_HEADER_SIZE 54	/* what netblk_host_core_ops.send gets before the data */
#define NETBLK_HOST_INFO_SIZE 60	/* INFO's answer after the header (56 from older servers) */

/*
 * Why an attachment stopped for good: what the instance's INFO said in a
 * new session (after a restart) is not the device it was attached to.
 * Its I/O fails from then on; the same values as the uapi's
 * enum netblk_host_change.
 */
enum netblk_host_change_reason {
	NETBLK_HOST_SAME = 0,
	NETBLK_HOST_OTHER_DEVICE,	/* another export id: another device */
	NETBLK_HOST_SMALLER,		/* the device shrank: data beyond is gone */
	NETBLK_HOST_READ_ONLY,		/* served read-only now, attached read-write */
	NETBLK_HOST_GEOMETRY,		/* other sectors, or less data a datagram */
	NETBLK_HOST_INFO_REFUSED,	/* INFO refused, or nonsense */
};

struct netblk_host_core;
struct netblk_host_queue;	/* the kernel side's: one of an attachment's queues, passed back */
struct netblk_host_core_ops;

struct netblk_host_config {
	uint32_t requests;	/* tags 0 .. requests - 1 */
	uint32_t datagrams;	/* queued or outstanding at once, at most */
	/*
	 * A request not done this long after it was queued fails EIO, and an
	 * instance silent this long is given up for gone until it answers
	 * again: requests fail at once meanwhile.  0: never.
	 */
	uint64_t deadline_ns;
	uint64_t seed;		/* random: nonces and back-off jitter */
	uint8_t read_only;	/* attached read-only: an instance now read-only is no change */
	uint8_t keyed;		/* tag every datagram with key, and want answers tagged */
	uint8_t key[NETBLK_KEY_SIZE];
	const struct netblk_host_core_ops *ops;	/* what the core calls back */
	struct netblk_host_queue *queue;	/* the callbacks' first argument */
};

/* What the instance serves, as its INFO said. */
struct netblk_host_info {
	uint64_t size_bytes;
	uint32_t sector_size;
	uint32_t physical_block_size;
	uint32_t io_opt;
	uint32_t max_io;	/* data bytes a datagram carries */
	uint32_t max_read;	/* bytes one READ may ask for */
	uint32_t slots;		/* requests each of the instance's queues holds */
	uint32_t queues;	/* the instance's (1 from servers before queues=) */
	uint32_t discard_granularity;
	uint32_t max_trim;	/* 0: no TRIM */
	uint32_t max_write_zeroes;	/* 0: no WRITE_ZEROES */
	uint8_t read_only;
	uint8_t volatile_cache;
	uint8_t fua;
};

/*
 * An attachment's counters that the client core keeps: netblk_counters.h's
 * NETBLK_HOST_STATS whose where is queue or core (the kernel side keeps the others,
 * host/host.h).
 */
#define NETBLK_HOST_STATS_FIELD_queue(name) uint64_t name;
#define NETBLK_HOST_STATS_FIELD_core(name) uint64_t name;
#define NETBLK_HOST_STATS_FIELD_kernel(name)
#define NETBLK_HOST_STATS_FIELD(NAME, name, nr, where, ...) NETBLK_HOST_STATS_FIELD_##where(name)
struct netblk_host_stats {
	NETBLK_HOST_STATS(NETBLK_HOST_STATS_FIELD)
};

/* 0, or -EINVAL (a config no queue can have) or -ENOMEM.  Process context. */
int netblk_host_core_create(const struct netblk_host_config *config,
			    struct netblk_host_core **out);
void netblk_host_core_destroy(struct netblk_host_core *core);

/*
 * Open a session (the first HELLO goes out now), then ask INFO as request
 * @tag.  Until INFO has been answered, a refused session fails request @tag
 * with the refusal (EUSERS: no room; EKEYREJECTED: the key, or its mode, is
 * not the instance's); once attached, a refused HELLO is tried again every
 * second.  Every later session (the instance was started again) asks INFO
 * again as request @tag before anything else goes: the same device goes on
 * (grown: netblk_host_core_ops.resized), another stops the attachment
 * (netblk_host_core_ops.changed), its I/O failing EIO.
 */
void netblk_host_core_connect(struct netblk_host_core *core, uint32_t tag, uint64_t now_ns);

/*
 * The INFO answer, once request @tag of connect() completed with 0: 0 and
 * *@info, or -EPROTO when it said what no instance serves.
 */
int netblk_host_core_info(const struct netblk_host_core *core, struct netblk_host_info *info);

/*
 * Queue request @tag: @op (enum netblk_io_op) on @len bytes at device byte
 * @offset, split into datagrams of max_io bytes (WRITE) or max_read (READ).
 * 0; -EAGAIN when there is no room for its datagrams now (try again once
 * some complete); -EINVAL for what INFO says the instance cannot take;
 * -EIO while the instance is given up for gone (deadline_ns).
 */
int netblk_host_core_queue(struct netblk_host_core *core, uint32_t tag, enum netblk_io_op op,
			   uint64_t offset, uint32_t len, int fua, uint64_t now_ns);

/* Send what the window allows now, through netblk_host_core_ops.send. */
void netblk_host_core_send(struct netblk_host_core *core, uint64_t now_ns);

/*
 * A datagram from the instance: @payload its first @linear bytes (at least
 * the header's, and INFO's payload when it is one), @payload_len the UDP
 * payload's length, @frame the caller's handle for netblk_host_core_ops.read.
 */
void netblk_host_core_receive(struct netblk_host_core *core, const uint8_t *payload,
			      uint32_t linear, uint32_t payload_len, void *frame,
			      uint64_t now_ns);

/* Timers: resends, back-offs, HELLOs, deadlines.  When to call again (0: nothing waits). */
uint64_t netblk_host_core_expire(struct netblk_host_core *core, uint64_t now_ns);

/*
 * When the timer must fire at the latest, given what waits now (0: nothing
 * does); expire() then says exactly.  For the caller to arm its timer after
 * queue(), receive() or connect().
 */
uint64_t netblk_host_core_timer_ns(const struct netblk_host_core *core, uint64_t now_ns);

/* Fail every request now with @status (an errno): a forced detach, a changed device. */
void netblk_host_core_cancel_all(struct netblk_host_core *core, uint16_t status);

void netblk_host_core_read_stats(const struct netblk_host_core *core,
				 struct netblk_host_stats *stats);
/*
 * Add one hardware queue's counters into an attachment's @sum: counts and
 * the levels that are the queue's share (window, outstanding, queued) add
 * up; what says a state -- round trip, resend timeout, reordering learnt,
 * unreachable, changed -- is the worst queue's.
 */
void netblk_host_stats_add(struct netblk_host_stats *sum, const struct netblk_host_stats *one);

/*
 * The service-time histogram: a block request's queueing to its last
 * answer, in ns, as netblk_core_read_latency() reads an instance's.
 */
uint32_t netblk_host_core_read_latency(const struct netblk_host_core *core, uint64_t *buckets,
				       uint32_t n, uint64_t *max, uint64_t *count, uint64_t *sum);

/* ---- what the client's kernel side provides, called under the queue's lock ---- */

/* netblk_host_core_ops.send's @tag of a datagram of no request (HELLO). */
#define NETBLK_HOST_NO_TAG 0xffffffffu

/*
 * The core's callbacks, given at creation (netblk_host_config.ops): how it
 * reaches the block requests and the network without naming them.
 */
struct netblk_host_core_ops {
	/*
	 * Send one datagram of request @tag (NETBLK_HOST_NO_TAG: of none):
	 * @header (NETBLK_HOST_HEADER_SIZE bytes), then for a WRITE @len bytes
	 * of the request's data from its byte @at (0: none).  Nothing sent when
	 * it fails: the datagram's timer sends it again.  Once the request is
	 * over (complete) none of its datagrams may go out any more.
	 */
	void (*send)(struct netblk_host_queue *queue, const uint8_t *header, uint32_t tag,
		     uint32_t at, uint32_t len);
	/*
	 * A READ answer's @len bytes of data (after the header in @frame) go
	 * to byte @at of request @tag.
	 */
	void (*read)(struct netblk_host_queue *queue, uint32_t tag, uint32_t at, void *frame,
		     uint32_t len);
	/* Request @tag is over: 0, or the errno it failed with. */
	void (*complete)(struct netblk_host_queue *queue, uint32_t tag, uint16_t status);
	/* A new session's INFO: the device grew to @size_bytes. */
	void (*resized)(struct netblk_host_queue *queue, uint64_t size_bytes);
	/* A new session's INFO: not the device attached (@reason); everything failed EIO. */
	void (*changed)(struct netblk_host_queue *queue, enum netblk_host_change_reason reason);
};

#ifdef __cplusplus
}
#endif

#endif
