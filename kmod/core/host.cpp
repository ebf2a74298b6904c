// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's core behind its C face (host_api.h): a session
 * and a queue of datagrams, the headers that go out and what the answers
 * mean.  Everything here runs under its queue's lock (host_api.h).
 */
#include "histogram.h"
#include "host_api.h"
#include "host_queue.h"
#include "host_session.h"
#include "protocol.h"
#include "kernel_api.h"

namespace nb {

constexpr int err_io = 5;
constexpr int err_again = 11;
constexpr int err_nomem = 12;
constexpr int err_inval = 22;
constexpr int err_proto = 71;

constexpr u64 ms = 1000000;
/* The first HELLO and INFO wait this long before a resend; then the RTO rules. */
constexpr u64 rto_initial_ns = 200 * ms;
/*
 * The round trip includes the disk's service time, whose tail (a flush, a
 * busy disk) is far above its median: a lower bound keeps that tail from
 * being taken for loss, as TCP's 200 ms does (RFC 6298).  20 ms was not
 * enough: on the two-guest bench the server's p99.9 reached 75 ms, and
 * 128 KiB writes at QD 8 made 705 timeouts in 8 s with no datagram lost,
 * each halving the window (20 IOPS; 40 with 100 ms, no spurious timeout
 * at 4 KiB QD 32).  A lost datagram in a busy window is resent sooner
 * anyway (fast resend); only a lone one waits this long.
 */
constexpr u64 rto_min_ns = 100 * ms;
/* A server down is asked again every 2 s at the most, however long it stays down. */
constexpr u64 rto_max_ns = 2000 * ms;
/* A refused HELLO (EUSERS: no room) is tried again after this long. */
constexpr u64 refused_retry_ns = 1000 * ms;

/* Datagrams outstanding at first, as netblk-load starts (then AIMD, rto.h). */
constexpr u32 initial_window = 32;

/* An unknown geometry's limits until INFO comes: one datagram, 512-byte chunks. */
constexpr u32 boot_slots = 1;
constexpr u32 boot_max_io = 512;

static_assert(NETBLK_HOST_INFO_SIZE == info_payload_size, "the caller pulls INFO's answer whole");

struct host_core {
	host_config config;
	host_queue queue;
	host_session session;
	auth_config auth;
	geometry info;
	bool info_valid;
	u32 info_tag;
	u64 rng;
	u64 retry_ns;		/* a refused HELLO goes again then; 0: none */
	u64 refused;
	u64 stray;		/* answers not of this session, or not well-formed */
	const netblk_host_core_ops *ops;	/* the kernel side's callbacks */
	netblk_host_queue *owner;	/* their first argument: the kernel side's queue */
	u8 info_bytes[info_payload_size];
	u32 info_len;
	u64 now_ns;		/* of the call into the core being served */
	u64 heard_ns;		/* the instance's latest well-formed answer (or connect()) */
	bool unreachable;	/* given up for gone: I/O fails at once until it answers */
	u64 outages;		/* times it was given up for gone */
	u64 failed_fast;	/* requests failed at once while it was */
	bool config_read_only;	/* attached read-only as asked */
	bool read_only;		/* attached read-only (asked, or the instance was) */
	netblk_host_change_reason changed;	/* stopped for good: why */
	u64 resizes;
	histogram service;	/* a request's queueing to its last answer, ns */
};

static u64 next_random(host_core *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng;
}

static void send_hello(host_core *c)
{
	u8 bytes[header_size];

	encode_header(bytes, c->session.hello());
	seal(c->auth, bytes, nullptr, 0);
	c->ops->send(c->owner, bytes, NETBLK_HOST_NO_TAG, 0, 0);
}

static void open_session(host_core *c, u64 now_ns)
{
	c->retry_ns = 0;
	c->session.open(next_random(c) >> 1 | 1, now_ns, c->queue.rto().timeout_ns());
	send_hello(c);
}

static void on_read(void *ctx, u32 tag, u32 at, void *frame, u32 len)
{
	host_core *c = static_cast<host_core *>(ctx);

	if (tag == c->info_tag)
		return;	/* INFO's data: receive() kept it from the linear bytes */
	c->ops->read(c->owner, tag, at, frame, len);
}

/* What a new session's INFO says against what was attached. */
static netblk_host_change_reason compare_info(const host_core *c, const geometry &now)
{
	const geometry &was = c->info;

	if (now.export_id != was.export_id)
		return NETBLK_HOST_OTHER_DEVICE;
	if (now.sector_size != was.sector_size || now.max_io < was.max_io ||
	    now.max_read < was.max_read)
		return NETBLK_HOST_GEOMETRY;	/* requests are split for the old */
	if (now.size_bytes < was.size_bytes)
		return NETBLK_HOST_SMALLER;
	if (now.read_only && !c->read_only)
		return NETBLK_HOST_READ_ONLY;
	return NETBLK_HOST_SAME;
}

/* Not the device attached: fail everything, now and from now on. */
static void stop_changed(host_core *c, netblk_host_change_reason why)
{
	c->changed = why;
	c->queue.cancel_all(status_eio);
	c->ops->changed(c->owner, why);
}

static void ask_info_again(host_core *c, u64 now_ns)
{
	/* a datagram is kept for it (queue_request()); else nothing may stay unverified */
	if (c->queue.add_first(c->info_tag, op_info, now_ns))
		return;
	c->queue.cancel_all(status_eio);
	c->queue.add_first(c->info_tag, op_info, now_ns);
}

/* The answer to a new session's INFO: the same device goes on, another stops. */
static void info_answered_again(host_core *c, u16 status)
{
	geometry now;
	netblk_host_change_reason why;

	if (status == status_eio) {
		ask_info_again(c, c->now_ns);	/* its deadline: still unverified */
		return;
	}
	if (status != status_ok || !decode_info(c->info_bytes, c->info_len, &now))
		why = NETBLK_HOST_INFO_REFUSED;
	else
		why = compare_info(c, now);
	if (why != NETBLK_HOST_SAME) {
		stop_changed(c, why);
		return;
	}
	if (now.size_bytes > c->info.size_bytes) {
		c->info.size_bytes = now.size_bytes;
		add_once(c->resizes, 1);
		c->ops->resized(c->owner, now.size_bytes);
	}
	c->info.slots = now.slots;
	c->queue.set_limits(now.slots, 0, 0);
}

static void info_answered(host_core *c, u16 status)
{
	if (c->info_valid) {
		info_answered_again(c, status);
		return;
	}
	if (status == status_ok) {
		c->info_valid = decode_info(c->info_bytes, c->info_len, &c->info);
		if (c->info_valid) {
			c->read_only = c->config_read_only || c->info.read_only;
			c->queue.set_limits(c->info.slots, c->info.max_io,
					    min(c->info.slots, initial_window));
		}
	}
	c->ops->complete(c->owner, c->info_tag, status);
}

static void on_complete(void *ctx, u32 tag, u16 status)
{
	host_core *c = static_cast<host_core *>(ctx);

	if (tag == c->info_tag) {
		info_answered(c, status);
		return;
	}
	if (status == status_ok) {
		u64 queued = c->queue.queued_ns(tag);

		if (queued && c->now_ns >= queued)
			c->service.record(c->now_ns - queued);
	}
	c->ops->complete(c->owner, tag, status);
}

static void send_datagram(host_core *c, u32 index)
{
	host_datagram d = c->queue.describe(index);
	header h = {};
	u8 bytes[header_size];

	h.magic = proto_magic;
	h.version = proto_version;
	h.op = d.op;
	h.flags = d.flags;
	h.session = c->session.id();
	h.token = c->session.token();
	h.seq = d.seq;
	h.offset = d.offset;
	h.length = d.length;
	encode_header(bytes, h);
	seal(c->auth, bytes, nullptr, 0);
	c->ops->send(c->owner, bytes, d.tag, d.at, d.op == op_write ? d.length : 0);
}

static void send_queued(host_core *c, u64 now_ns)
{
	u32 picked[32];
	u32 n;

	if (!c->session.is_open())
		return;
	do {
		n = c->queue.pick(now_ns, picked, 32);
		for (u32 i = 0; i < n; i++)
			send_datagram(c, picked[i]);
	} while (n == 32);
}

/* A HELLO's answer: the cookie to send back, the session, or a refusal. */
static void hello_answered(host_core *c, const header &h, u64 now_ns)
{
	switch (c->session.answer(h, now_ns)) {
	case host_session::result::send_cookie:
		send_hello(c);
		break;
	case host_session::result::opened:
		if (c->session.opened() > 1) {
			c->queue.reopen();	/* what the old session had outstanding */
			/* a restart may serve another device: INFO first, all else waits */
			if (c->info_valid && !c->changed && !c->queue.active(c->info_tag))
				ask_info_again(c, now_ns);
		}
		send_queued(c, now_ns);
		break;
	case host_session::result::refused:
		add_once(c->refused, 1);
		if (!c->info_valid) {
			/* attaching: INFO fails with the reason, the owner says it */
			c->queue.cancel(c->info_tag, c->session.refusal());
			break;
		}
		c->retry_ns = now_ns + refused_retry_ns;	/* attached: never give up */
		break;
	case host_session::result::busy:
	case host_session::result::ignored:
		break;
	}
}

static bool answer_valid(const host_core *c, const u8 *payload, u32 payload_len, header *h)
{
	if (!decode_header(payload, payload_len, h) || h->magic != proto_magic ||
	    h->version != proto_version || !(h->op & op_reply_bit))
		return false;
	/* an instance's EKEYREJECTED to an unkeyed HELLO is untagged: let the session see it */
	if (c->auth.keyed && h->tag != compute_tag(c->auth, payload, nullptr, 0))
		return h->op == (op_hello | op_reply_bit) && h->status == status_ekeyrejected;
	return true;
}

static void receive(host_core *c, const u8 *payload, u32 linear, u32 payload_len, void *frame,
		    u64 now_ns)
{
	header h;

	c->now_ns = now_ns;
	if (linear < header_size || !answer_valid(c, payload, payload_len, &h)) {
		add_once(c->stray, 1);
		return;
	}
	c->heard_ns = now_ns;
	c->unreachable = false;	/* it answers: requests go to it again */
	if (h.op == (op_hello | op_reply_bit)) {
		hello_answered(c, h, now_ns);
		return;
	}
	if (!c->session.owns(h)) {
		add_once(c->stray, 1);	/* an answer of a session before this one */
		return;
	}
	if (h.op == (op_info | op_reply_bit)) {
		c->info_len = min(linear - header_size, info_payload_size);
		copy_bytes(c->info_bytes, payload + header_size, c->info_len);
	}
	if (!c->session.folds())
		h.reserved = 0;	/* bits only a session that takes folded answers reads */
	if (c->queue.answer(h, payload_len - header_size, frame, now_ns) ==
	    host_answer::session_lost) {
		c->session.lost();
		open_session(c, now_ns);
		return;
	}
	send_queued(c, now_ns);
}

static u64 earliest(u64 a, u64 b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return min(a, b);
}

/*
 * When a timer must fire at the latest for what waits now: an outstanding
 * datagram's timeout, a HELLO's resend, a refused HELLO's retry (0: none).
 */
static u64 next_due(const host_core *c, u64 now_ns)
{
	u64 at = c->queue.waiting() ? now_ns + c->queue.rto().timeout_ns() : 0;

	return earliest(earliest(at, c->session.due_ns()), c->retry_ns);
}

/*
 * A request failed by its deadline (timeout=) and the instance has said
 * nothing for as long: it is given up for gone, as nvme's fast_io_fail_tmo
 * does.  Everything waiting fails now and new requests fail at once, rather
 * than each waiting the whole timeout: md retries a failed write sector by
 * sector before it fails a member, which would take hours.  A session is
 * opened again meanwhile -- its HELLO, resent every RTO (at most rto_max_ns),
 * is the probe -- and the instance's first answer ends it.
 */
static void give_up_if_silent(host_core *c, u64 now_ns)
{
	if (c->unreachable || !c->info_valid || now_ns - c->heard_ns < c->config.deadline_ns)
		return;
	c->unreachable = true;
	add_once(c->outages, 1);
	c->queue.cancel_all(status_eio);
	c->session.lost();
	open_session(c, now_ns);
}

static u64 expire(host_core *c, u64 now_ns)
{
	u64 due = c->session.due_ns();
	u64 expired = c->queue.counters().expired;

	c->now_ns = now_ns;
	if (c->retry_ns && c->retry_ns <= now_ns)
		open_session(c, now_ns);
	else if (due && due <= now_ns) {
		c->session.resent(now_ns, c->queue.rto().timeout_ns());
		send_hello(c);
	}

	u64 next = c->queue.expire(now_ns);

	if (c->queue.counters().expired != expired)
		give_up_if_silent(c, now_ns);
	/*
	 * What timed out went back to the queue, and out again here: the
	 * queue's answer above did not know it would be outstanding again.
	 */
	send_queued(c, now_ns);
	return earliest(next, next_due(c, now_ns));
}

static int queue_request(host_core *c, u32 tag, netblk_io_op op, u64 offset, u32 len, int fua,
			 u64 now_ns)
{
	u32 chunk, pieces;
	u8 code;

	if (!c->info_valid)
		return -err_inval;
	switch (op) {
	case NETBLK_IO_READ:
		code = op_read;
		chunk = c->info.max_read;
		break;
	case NETBLK_IO_WRITE:
		code = op_write;
		chunk = c->info.max_io;
		break;
	case NETBLK_IO_FLUSH:
		code = op_flush;
		chunk = 0;
		break;
	case NETBLK_IO_DISCARD:
		code = op_trim;
		chunk = c->info.max_trim;
		break;
	case NETBLK_IO_WRITE_ZEROES:
		code = op_write_zeroes;
		chunk = c->info.max_write_zeroes;
		break;
	default:
		return -err_inval;
	}
	if (code != op_flush && (!chunk || !len))
		return -err_inval;
	if (c->unreachable || c->changed) {
		add_once(c->failed_fast, 1);
		return -err_io;
	}
	pieces = chunk ? (len + chunk - 1) / chunk : 1;
	/* one datagram is always kept for a new session's INFO (ask_info_again()) */
	if (pieces >= c->queue.free_datagrams())
		return -err_again;
	if (code == op_flush) {
		c->queue.add(tag, code, 0, 0, 0, 0, now_ns);
	} else {
		for (u32 at = 0; at < len; at += chunk)
			c->queue.add(tag, code, offset + at, min(chunk, len - at),
				     code == op_write && fua ? flag_fua : 0, at, now_ns);
	}
	send_queued(c, now_ns);
	return 0;
}

} /* namespace nb */

using namespace nb;

struct netblk_host_core {
	host_core c;
};

extern "C" {

int netblk_host_core_create(const struct netblk_host_config *config,
			    struct netblk_host_core **out)
{
	netblk_host_core *core;
	host_config qc = {};
	host_queue_ops ops = { on_read, on_complete };
	int err;

	if (!config->requests || !config->datagrams || !config->ops)
		return -err_inval;
	core = new netblk_host_core();
	if (!core)
		return -err_nomem;
	host_core *c = &core->c;

	c->ops = config->ops;
	c->owner = config->queue;
	c->config_read_only = config->read_only;
	c->rng = config->seed | 1;
	c->auth.keyed = config->keyed;
	c->auth.data = false;
	if (config->keyed)
		c->auth.key = siphash_key_from_bytes(config->key);
	c->session.init(config->keyed, false);
	qc.requests = config->requests;
	qc.datagrams = config->datagrams;
	qc.slots = boot_slots;
	qc.max_io = boot_max_io;
	qc.initial_window = boot_slots;
	qc.rto_initial_ns = rto_initial_ns;
	qc.rto_min_ns = rto_min_ns;
	qc.rto_max_ns = rto_max_ns;
	qc.deadline_ns = config->deadline_ns;
	qc.seed = next_random(c);
	c->config = qc;
	err = c->queue.init(qc, ops, c);
	if (err) {
		delete core;
		return err;
	}
	*out = core;
	return 0;
}

void netblk_host_core_destroy(struct netblk_host_core *core)
{
	if (!core)
		return;
	core->c.queue.destroy();
	delete core;
}

void netblk_host_core_connect(struct netblk_host_core *core, uint32_t tag, uint64_t now_ns)
{
	host_core *c = &core->c;

	c->info_tag = tag;
	c->info_valid = false;
	c->heard_ns = now_ns;
	c->queue.add(tag, op_info, 0, 0, 0, 0, now_ns);
	open_session(c, now_ns);
}

int netblk_host_core_info(const struct netblk_host_core *core, struct netblk_host_info *info)
{
	const geometry &g = core->c.info;

	if (!core->c.info_valid)
		return -err_proto;
	info->size_bytes = g.size_bytes;
	info->sector_size = g.sector_size;
	info->physical_block_size = g.physical_block_size;
	info->io_opt = g.io_opt;
	info->max_io = g.max_io;
	info->max_read = g.max_read;
	info->slots = g.slots;
	info->queues = g.queues;
	info->discard_granularity = g.discard_granularity;
	info->max_trim = g.max_trim;
	info->max_write_zeroes = g.max_write_zeroes;
	info->read_only = g.read_only;
	info->volatile_cache = g.volatile_cache;
	info->fua = g.fua;
	return 0;
}

int netblk_host_core_queue(struct netblk_host_core *core, uint32_t tag, enum netblk_io_op op,
			   uint64_t offset, uint32_t len, int fua, uint64_t now_ns)
{
	return queue_request(&core->c, tag, op, offset, len, fua, now_ns);
}

void netblk_host_core_send(struct netblk_host_core *core, uint64_t now_ns)
{
	send_queued(&core->c, now_ns);
}

void netblk_host_core_receive(struct netblk_host_core *core, const uint8_t *payload,
			      uint32_t linear, uint32_t payload_len, void *frame,
			      uint64_t now_ns)
{
	receive(&core->c, payload, linear, payload_len, frame, now_ns);
}

uint64_t netblk_host_core_expire(struct netblk_host_core *core, uint64_t now_ns)
{
	return expire(&core->c, now_ns);
}

uint64_t netblk_host_core_timer_ns(const struct netblk_host_core *core, uint64_t now_ns)
{
	return next_due(&core->c, now_ns);
}

void netblk_host_core_cancel_all(struct netblk_host_core *core, uint16_t status)
{
	core->c.queue.cancel_all(status);
}

uint32_t netblk_host_core_read_latency(const struct netblk_host_core *core, uint64_t *buckets,
				       uint32_t n, uint64_t *max, uint64_t *count, uint64_t *sum)
{
	const histogram &h = core->c.service;

	for (uint32_t i = 0; i < n && i < histogram::bucket_count; i++)
		buckets[i] = h.bucket(i);
	*max = h.max();
	*count = h.count();
	*sum = h.sum();
	return histogram::bucket_count;
}

#define NB_HOST_READ_queue(name) stats->name = read_once(q.name);
#define NB_HOST_READ_core(name)
#define NB_HOST_READ_kernel(name)
#define NB_HOST_READ(NAME, name, nr, where, ...) NB_HOST_READ_##where(name)

void netblk_host_core_read_stats(const struct netblk_host_core *core,
				 struct netblk_host_stats *stats)
{
	const host_core *c = &core->c;
	const host_counters &q = c->queue.counters();

	*stats = {};	/* a counter of where core this function forgets reads 0 */
	NETBLK_HOST_STATS(NB_HOST_READ)
	/* where core: from the session, the window, the core's own */
	stats->sends = read_once(q.sends) + c->session.hellos();
	stats->stray = read_once(q.stray) + read_once(c->stray);
	stats->sessions_opened = c->session.opened();
	stats->refused = read_once(c->refused);
	stats->window = c->queue.window().limit();
	stats->window_decreases = c->queue.window().decreases();
	stats->srtt_ns = c->queue.rto().srtt_ns();
	stats->rto_ns = c->queue.rto().timeout_ns();
	stats->outstanding = c->queue.outstanding();
	stats->queued = c->queue.queued();
	stats->unreachable = c->unreachable;
	stats->outages = read_once(c->outages);
	stats->failed_fast = read_once(c->failed_fast);
	stats->changed = c->changed;
	stats->resizes = read_once(c->resizes);
}

#define NB_HOST_ADD_queue(name) sum->name += one->name;
#define NB_HOST_ADD_core(name) sum->name += one->name;
#define NB_HOST_ADD_kernel(name)
#define NB_HOST_ADD(NAME, name, nr, where, ...) NB_HOST_ADD_##where(name)

void netblk_host_stats_add(struct netblk_host_stats *sum, const struct netblk_host_stats *one)
{
	const struct netblk_host_stats was = *sum;

	NETBLK_HOST_STATS(NB_HOST_ADD)
	sum->srtt_ns = max(was.srtt_ns, one->srtt_ns);
	sum->rto_ns = max(was.rto_ns, one->rto_ns);
	sum->reordering = max(was.reordering, one->reordering);
	sum->unreachable = max(was.unreachable, one->unreachable);
	sum->changed = max(was.changed, one->changed);
}
#undef NB_HOST_ADD
#undef NB_HOST_ADD_queue
#undef NB_HOST_ADD_core
#undef NB_HOST_ADD_kernel

} /* extern "C" */
