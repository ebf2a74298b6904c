/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a client (the block-device client of issue 10, "host" as in
 * drivers/nvme/host) has outstanding with one instance: the datagrams its
 * requests are split into, each with its sequence number in the session,
 * its sends and its timer; which to send now; what each answer means.
 *
 * The rules are the reference client's (client/netblk/, docs/protocol.md):
 *  - A datagram is numbered at its first send, and keeps its number for
 *    every resend, so the instance's replay window executes it once.  None
 *    is outstanding seq_span numbers behind the newest.
 *  - No more outstanding than send_window allows, counted in the
 *    instance's slots they take -- a READ one for each datagram of its
 *    answer, as the instance counts them -- so that the window, capped at
 *    the slots, never asks for more than the instance holds; resends go
 *    before new ones.
 *  - Silence for rto_estimator's timeout: resent, and the window halves.
 *    Silence counts from its send, or from the latest answer to anything
 *    outstanding when that is later -- TCP restarts its timer on every ACK
 *    of new data (RFC 6298 5.3) -- so that while answers keep coming, the
 *    last datagrams of a window that a slow receiver drains in turn are not
 *    taken for lost; one lost among them is overtaken (below) instead.
 *    An answer that comes sooner after the resend than half the fastest
 *    round trip ever seen is the first send's: the timeout was spurious
 *    (a round trip in the tail, not a loss), so the halving is undone and
 *    the round trip from the first send is sampled -- what RFC 3522's Eifel
 *    does with TCP timestamps, which the protocol does not carry.  So is
 *    one whose number is answered a second time after it was done: both
 *    sends got through (RFC 3708's detection, the instance's answer to the
 *    duplicate standing in for TCP's DSACK) -- the round trip that a queue
 *    in the path stretched past the timeout is learnt, not taken for loss.
 *    Overtaken -- one sent a window after it was answered and it was not
 *    (the window it was sent in: one that grows meanwhile does not move the
 *    mark), or more sends after it than the most any answer was seen to be
 *    overtaken by -- resent at once (fast resend), the window halves.  The
 *    instance's disk completes out of order, so answers do too: how far
 *    (in sends) is learnt from every first send's answer, as TCP learns
 *    its reordering metric (RFC 4737's reordering extent), so that it is
 *    not taken for loss again.  A fast resend proved needless -- the first
 *    send answered before the resend went, or sooner after it than half
 *    the fastest round trip, or both sends answered -- teaches the same,
 *    and once every fast resend of a halving is proved so, the halving is
 *    undone (RFC 3708's DSACK-based undo; Linux's undo_retrans).
 *  - EAGAIN: sent again after a back-off of 0.5 ms doubling to 50 ms
 *    (randomised), the window halves.
 *  - ENOTCONN (the instance forgot the session: it was started again):
 *    the owner opens a new session and calls reopen(); everything
 *    outstanding is numbered again in it and sent again, in order.
 *  - EALREADY (a READ or INFO the instance served as often as it serves
 *    one number: its answers were lost that often): sent again at once,
 *    under a new number; the chunks had stay had.
 *  - An untagged answer on a keyed session is no answer (anyone who can
 *    forge the instance's address could send it): the owner drops it.
 *  - Any other refusal fails the request with that status.  By default
 *    nothing else ever fails one (a server restart or a network outage is
 *    waited out); with a deadline, a request not done that long after it
 *    was added fails EIO -- sent or not (a session that cannot be opened).
 *
 * The owner (the kernel side, or a unit test) owns the requests and their
 * data, and knows each request by a tag from 0 to requests - 1; events go
 * to it through host_queue_ops.  One caller at a time: the owner's lock
 * covers answers (softirq), timers and new requests alike.
 */
#ifndef NETBLK_CORE_HOST_QUEUE_H
#define NETBLK_CORE_HOST_QUEUE_H

#include "protocol.h"
#include "rto.h"
#include "types.h"

#include "netblk_counters.h"

namespace nb {

struct host_queue_ops {
	/* A READ answer's @len bytes of data go to byte @at of request @tag (INFO's: at 0). */
	void (*read_data)(void *ctx, u32 tag, u32 at, void *frame, u32 len);
	/* Request @tag is over: every datagram answered (0), or its status. */
	void (*complete)(void *ctx, u32 tag, u16 status);
};

struct host_config {
	u32 requests;		/* tags 0 .. requests - 1 */
	u32 datagrams;		/* queued or outstanding at once, at most */
	u32 slots;		/* the instance's (INFO): the window's cap */
	u32 max_io;		/* the instance's (INFO): a READ's answer chunks */
	u32 initial_window;
	u64 rto_initial_ns;
	u64 rto_min_ns;
	u64 rto_max_ns;
	u64 deadline_ns;	/* a request not done this long after it was added fails; 0: never */
	u64 seed;		/* the back-offs' randomness */
};

/* The host queue's counters; its one caller writes them all. */
/* The queue's counters: netblk_counters.h's NETBLK_HOST_STATS of where queue, and its own. */
#define NB_HOST_QUEUE_FIELD_queue(name) u64 name;
#define NB_HOST_QUEUE_FIELD_core(name)
#define NB_HOST_QUEUE_FIELD_kernel(name)
#define NB_HOST_QUEUE_FIELD(NAME, name, nr, where, ...) NB_HOST_QUEUE_FIELD_##where(name)
struct host_counters {
	NETBLK_HOST_STATS(NB_HOST_QUEUE_FIELD)
	u64 sends;		/* datagrams sent, resends included (HELLOs are the session's) */
	u64 stray;		/* answers to no datagram outstanding: late, or malformed */
	u64 reopened;		/* sessions opened again (ENOTCONN) */
	u64 expired;		/* of the failed, failed by the deadline */
};

/* A datagram to send, as the owner builds it: header fields and where its data is. */
struct host_datagram {
	u32 tag;		/* its request */
	u32 at;			/* WRITE: its data is at this byte of the request */
	u64 seq;
	u64 offset;
	u32 length;
	u16 flags;
	u8 op;
};

enum class host_answer : u8 {
	stray,		/* ignored: no outstanding datagram has this number and op */
	duplicate,	/* a READ chunk had already */
	partial,	/* part of a request answered: more to come */
	done,		/* the request's last datagram: complete() was called */
	busy,		/* EAGAIN: sent again after a back-off */
	session_lost,	/* ENOTCONN: open a session, then reopen() */
	renumbered,	/* EALREADY (a READ or INFO): sent again under a new number */
	failed,		/* refused: complete() was called with the status */
};

class host_queue {
public:
	static constexpr u64 seq_span = 512;	/* half the instance's replay window */
	static constexpr u32 fast_gap_min = 8;
	static constexpr u32 fast_gap_max = seq_span / 4;

	int init(const host_config &cfg, const host_queue_ops &ops, void *ctx);
	void destroy();

	/*
	 * Queue one datagram of request @tag: @op on @length bytes at device
	 * @offset, its data (or its answer's) at byte @at of the request.
	 * False when the queue holds config.datagrams already, or for a READ
	 * beyond max_read (16 x max_io).  The request completes when all its
	 * datagrams are answered.
	 */
	bool add(u32 tag, u8 op, u64 offset, u32 length, u16 flags, u32 at, u64 now_ns);
	/*
	 * Queue request @tag (one datagram, no data: a new session's INFO) ahead
	 * of everything, and send nothing else until it is over.
	 */
	bool add_first(u32 tag, u8 op, u64 now_ns);

	/*
	 * Up to @max datagrams to send now, resends first, as the window and
	 * the sequence span allow: their indices in @out, each sent as
	 * describe() says.
	 */
	u32 pick(u64 now_ns, u32 *out, u32 max);
	host_datagram describe(u32 index) const;

	/*
	 * An answer of this session (the owner checked session, token, tag).
	 * A WRITE answered OK whose `reserved` bits are set answers the WRITEs
	 * numbered after it that they name too (folded answers: the owner
	 * clears them where the session does not fold); what is returned is
	 * what became of @h's own number.
	 */
	host_answer answer(const header &h, u32 data_len, void *frame, u64 now_ns);

	/*
	 * Timers: silence, back-offs, the deadline.  Returns when to call
	 * again (0: nothing outstanding).
	 */
	u64 expire(u64 now_ns);

	/* A new session is open: everything outstanding goes again, numbered anew. */
	void reopen();
	/* Fail request @tag now (@status): forced detach, a changed device. */
	void cancel(u32 tag, u16 status);
	void cancel_all(u16 status);

	/*
	 * What a (new) INFO says: the instance's slots cap the window, and
	 * READs queued from now on are answered in chunks of @max_io.  A
	 * @window not 0 starts the window again at that size (the first INFO).
	 */
	void set_limits(u32 slots, u32 max_io, u32 window)
	{
		if (window)
			window_.init(slots, window);
		else
			window_.set_cap(slots);
		if (max_io)
			cfg_.max_io = max_io;
	}

	const host_counters &counters() const { return counters_; }
	const rto_estimator &rto() const { return rto_; }
	const send_window &window() const { return window_; }
	u32 outstanding() const { return lists_[list_outstanding].count; }
	u32 queued() const { return lists_[list_queued].count; }
	/* Whether a timer must run: datagrams outstanding or backed off, or a deadline. */
	bool waiting() const
	{
		return lists_[list_outstanding].count || lists_[list_backoff].count ||
		       (cfg_.deadline_ns && lists_[list_queued].count);
	}
	/* When request @tag's first datagram was added (valid in complete()). */
	u64 queued_ns(u32 tag) const { return tag < cfg_.requests ? requests_[tag].queued_ns : 0; }
	/* Whether request @tag has datagrams queued or outstanding. */
	bool active(u32 tag) const { return tag < cfg_.requests && requests_[tag].active; }
	/* How many more datagrams add() takes now. */
	u32 free_datagrams() const { return lists_[list_free].count; }
	u64 next_seq() const { return next_seq_; }

private:
	enum list_id : u8 { list_free, list_queued, list_outstanding, list_backoff, list_count };

	struct piece {
		u64 seq;		/* 0 until first sent (again, after reopen) */
		u64 offset;
		u64 sent_ns;		/* its latest send */
		u64 first_sent_ns;	/* its first send (in this session) */
		u64 sent_no;		/* counters_.sends at its latest send */
		u64 first_sent_no;	/* ... at its first send (in this session) */
		u64 fast_cut;		/* overtaken: the halving its resend is of (0: none to undo) */
		u64 due_ns;		/* backoff: when to send it again */
		u32 length;
		u32 tag;
		u32 at;
		u32 sends;
		u32 busy;
		u32 fast_gap;		/* later sends answered that make it overtaken */
		u32 prev, next;		/* in lists_[list] */
		u16 flags;
		u16 chunks_got;		/* READ: answers had, a bit each */
		bool timed_out;		/* resent after silence */
		bool overtaken;		/* resent as overtaken (fast resend) */
		u8 chunks;		/* answers that complete it: READ ceil(length / max_io), else 1 */
		u8 chunks_left;		/* of those, not had yet */
		u8 op;
		u8 list;
	};

	struct request {
		u64 queued_ns;		/* when its first datagram was added */
		u32 left;		/* datagrams not answered yet */
		bool active;
	};

	/*
	 * A datagram done after a resend was decided: what proves the resend
	 * needless -- now, or when a second answer comes -- acts on.
	 */
	struct resent_done {
		u64 seq;		/* 0: none */
		u64 rtt_ns;		/* first send to first answer */
		u64 fast_cut;		/* piece::fast_cut */
		bool timed_out;
		bool overtaken;
		u8 op;
	};

	struct list {
		u32 head, tail, count;
		u32 slots;	/* the instance's slots its pieces take: their chunks */
	};

	static constexpr u32 none = ~0u;
	static constexpr u32 seq_slots = 2 * seq_span;
	static constexpr u32 resent_slots = 64;	/* by seq: the latest resent ones done */

	void link_tail(list_id l, u32 i);
	void link_head(list_id l, u32 i);
	void unlink(u32 i);
	void move_tail(list_id l, u32 i) { unlink(i); link_tail(l, i); }
	u32 next_to_pick() const;
	void request_over(u32 tag);

	u64 oldest_seq();
	void forget_seq(piece &p);
	void release(u32 i);
	void finish(u32 i, u64 now_ns);
	bool first_send_answered(const piece &p, u64 now_ns);
	resent_done resent_record(const piece &p, u64 now_ns) const;
	void second_answer(const header &h);
	host_answer answer_one(const header &h, u32 data_len, void *frame, u64 now_ns,
			       bool folded);
	void answer_folded(const header &h, u64 now_ns);
	void resend_was_needless(const resent_done &r);
	void learn_reordering(u32 behind);
	u32 behind(const piece &p) const;
	bool halve_for(const piece &p);
	void fail_request(u32 tag, u16 status);
	void resend_soon(u32 i);
	void renumber(u32 i);
	void resend_overtaken();
	u32 fast_gap() const;
	/* Where its timeout counts from: its send, or the latest answer if later. */
	u64 silent_since(const piece &p) const { return max(p.sent_ns, answered_ns_); }
	u64 jittered_backoff_ns(u32 busy);
	u64 expire_deadlines(u64 now_ns);

	host_config cfg_ = {};
	host_queue_ops ops_ = {};
	void *ctx_ = nullptr;
	piece *pieces_ = nullptr;
	request *requests_ = nullptr;
	u32 *by_seq_ = nullptr;		/* seq % seq_slots -> piece, for numbers outstanding */
	list lists_[list_count] = {};
	u64 next_seq_ = 1;
	u64 oldest_seq_ = 1;		/* no number below it is outstanding */
	u64 answered_no_ = 0;		/* the newest send (by sent_no) answered */
	u64 answered_ns_ = 0;		/* when an outstanding datagram was last answered */
	u64 rng_ = 0;
	u32 barrier_ = none;		/* add_first()'s request: nothing else goes meanwhile */
	u64 timeout_cut_ = 0;		/* window_.decreases() after a timeout's halving */
	u64 fast_cut_ = 0;		/* window_.decreases() after a fast resend's halving */
	u32 fast_unproven_ = 0;		/* fast resends of that halving not proved needless */
	resent_done resent_[resent_slots] = {};
	rto_estimator rto_ = {};
	send_window window_ = {};
	host_counters counters_ = {};
};

} /* namespace nb */

#endif
