// SPDX-License-Identifier: GPL-2.0
/* A client's datagrams outstanding with one instance: see host_queue.h. */
#include "host_queue.h"

namespace nb {

constexpr int err_nomem = 12;
constexpr int err_inval = 22;

/* ---- lists: every piece is on exactly one ---- */

void host_queue::link_tail(list_id l, u32 i)
{
	piece &p = pieces_[i];
	list &L = lists_[l];

	p.list = l;
	L.slots += p.chunks;
	p.next = none;
	p.prev = L.tail;
	if (L.tail != none)
		pieces_[L.tail].next = i;
	else
		L.head = i;
	L.tail = i;
	L.count++;
}

void host_queue::link_head(list_id l, u32 i)
{
	piece &p = pieces_[i];
	list &L = lists_[l];

	p.list = l;
	L.slots += p.chunks;
	p.prev = none;
	p.next = L.head;
	if (L.head != none)
		pieces_[L.head].prev = i;
	else
		L.tail = i;
	L.head = i;
	L.count++;
}

void host_queue::unlink(u32 i)
{
	piece &p = pieces_[i];
	list &L = lists_[p.list];

	if (p.prev != none)
		pieces_[p.prev].next = p.next;
	else
		L.head = p.next;
	if (p.next != none)
		pieces_[p.next].prev = p.prev;
	else
		L.tail = p.prev;
	L.count--;
	L.slots -= p.chunks;
	p.prev = p.next = none;
}

/* ---- setup ---- */

int host_queue::init(const host_config &cfg, const host_queue_ops &ops, void *ctx)
{
	if (!cfg.requests || !cfg.datagrams || !cfg.max_io || !ops.complete || !ops.read_data)
		return -err_inval;
	cfg_ = cfg;
	ops_ = ops;
	ctx_ = ctx;
	pieces_ = new piece[cfg.datagrams]();
	requests_ = new request[cfg.requests]();
	by_seq_ = new u32[seq_slots];
	if (!pieces_ || !requests_ || !by_seq_) {
		destroy();
		return -err_nomem;
	}
	for (u32 l = 0; l < list_count; l++)
		lists_[l] = {none, none, 0, 0};
	for (u32 i = 0; i < cfg.datagrams; i++)
		link_tail(list_free, i);
	for (u32 s = 0; s < seq_slots; s++)
		by_seq_[s] = none;
	next_seq_ = oldest_seq_ = 1;
	answered_no_ = 0;
	barrier_ = none;
	timeout_cut_ = fast_cut_ = 0;
	fast_unproven_ = 0;
	rng_ = cfg.seed | 1;
	rto_.init(cfg.rto_initial_ns, cfg.rto_min_ns, cfg.rto_max_ns);
	window_.init(cfg.slots, cfg.initial_window);
	counters_ = {};
	return 0;
}

void host_queue::destroy()
{
	delete[] pieces_;
	delete[] requests_;
	delete[] by_seq_;
	pieces_ = nullptr;
	requests_ = nullptr;
	by_seq_ = nullptr;
}

/* ---- requests in ---- */

bool host_queue::add(u32 tag, u8 op, u64 offset, u32 length, u16 flags, u32 at, u64 now_ns)
{
	if (tag >= cfg_.requests || lists_[list_free].head == none)
		return false;
	if (op == op_read && length > read_datagrams_max * cfg_.max_io)
		return false;	/* more than max_read: the owner splits at it */

	u32 i = lists_[list_free].head;
	piece &p = pieces_[i];
	request &r = requests_[tag];

	unlink(i);
	p = {};
	p.prev = p.next = none;
	p.offset = offset;
	p.length = length;
	p.tag = tag;
	p.at = at;
	p.flags = flags;
	p.op = op;
	p.chunks = op == op_read ? (u8)((length + cfg_.max_io - 1) / cfg_.max_io) : 1;
	if (!p.chunks)
		p.chunks = 1;	/* a READ of 0 bytes is refused, and that ends it */
	p.chunks_left = p.chunks;
	link_tail(list_queued, i);
	if (!r.active) {
		r = {};
		r.active = true;
		r.queued_ns = now_ns ? now_ns : 1;
	}
	r.left++;
	return true;
}

bool host_queue::add_first(u32 tag, u8 op, u64 now_ns)
{
	if (!add(tag, op, 0, 0, 0, 0, now_ns))
		return false;

	u32 i = lists_[list_queued].tail;

	unlink(i);
	link_head(list_queued, i);
	barrier_ = tag;
	return true;
}

/* ---- sending ---- */

/* The queue's head; while a barrier stands, its request's datagram or none. */
u32 host_queue::next_to_pick() const
{
	u32 i = lists_[list_queued].head;

	if (barrier_ == none)
		return i;
	while (i != none && pieces_[i].tag != barrier_)
		i = pieces_[i].next;
	return i;
}

/* The lowest number outstanding (next_seq_ when none): moves up only. */
u64 host_queue::oldest_seq()
{
	while (oldest_seq_ < next_seq_ && by_seq_[oldest_seq_ % seq_slots] == none)
		oldest_seq_++;
	return oldest_seq_;
}

u32 host_queue::pick(u64 now_ns, u32 *out, u32 max)
{
	u32 n = 0;

	while (n < max && lists_[list_outstanding].slots < window_.limit()) {
		u32 i = next_to_pick();

		if (i == none)
			break;
		piece &p = pieces_[i];

		/* whole pieces: one larger than the window goes alone */
		if (lists_[list_outstanding].slots &&
		    lists_[list_outstanding].slots + p.chunks > window_.limit())
			break;

		if (!p.seq) {
			if (next_seq_ - oldest_seq() >= seq_span)
				break;	/* the oldest would fall behind: wait for it */
			p.seq = next_seq_++;
			by_seq_[p.seq % seq_slots] = i;
		}
		move_tail(list_outstanding, i);
		p.sent_ns = now_ns;
		p.sent_no = ++counters_.sends;
		if (!p.sends++) {
			p.first_sent_ns = now_ns;
			p.first_sent_no = p.sent_no;
		}
		p.fast_gap = fast_gap();
		out[n++] = i;
	}
	return n;
}

host_datagram host_queue::describe(u32 index) const
{
	const piece &p = pieces_[index];

	return {p.tag, p.at, p.seq, p.offset, p.length, p.flags, p.op};
}

/* ---- answers ---- */

void host_queue::forget_seq(piece &p)
{
	if (p.seq && by_seq_[p.seq % seq_slots] != none &&
	    &pieces_[by_seq_[p.seq % seq_slots]] == &p)
		by_seq_[p.seq % seq_slots] = none;
	p.seq = 0;
}

void host_queue::release(u32 i)
{
	piece &p = pieces_[i];

	forget_seq(p);
	move_tail(list_free, i);
}

/* How many later sends were answered before @p's first send was (answered_no_ not yet moved). */
u32 host_queue::behind(const piece &p) const
{
	return answered_no_ > p.first_sent_no ?
	       (u32)min<u64>(answered_no_ - p.first_sent_no, ~0u) : 0;
}

void host_queue::finish(u32 i, u64 now_ns)
{
	piece &p = pieces_[i];
	u32 tag = p.tag;

	if (!first_send_answered(p, now_ns) && (p.timed_out || p.overtaken)) {
		resent_done &r = resent_[p.seq % resent_slots];

		r = resent_record(p, now_ns);	/* a second answer may prove it needless yet */
	}
	window_.answered(p.chunks);
	answered_no_ = max(answered_no_, p.sent_no);
	release(i);
	if (--requests_[tag].left == 0) {
		request_over(tag);
		add_once(counters_.completed, 1);
		ops_.complete(ctx_, tag, status_ok);
	}
}

void host_queue::request_over(u32 tag)
{
	requests_[tag].active = false;
	requests_[tag].left = 0;
	if (barrier_ == tag)
		barrier_ = none;
}

/*
 * Karn: the answer to a datagram sent more than once times neither send --
 * unless it is the first send's for sure: it came before a resend went,
 * or too soon after one for the resend's (half the fastest round trip).
 * Then the resend was needless.  A first send's answer is timed, and how
 * many later sends it was overtaken by is learnt.  Returns whether a
 * resend was proved needless.
 */
bool host_queue::first_send_answered(const piece &p, u64 now_ns)
{
	u64 min_rtt = rto_.min_rtt_ns();
	bool resent = p.timed_out || p.overtaken;

	if (now_ns < p.sent_ns)
		return false;
	if (p.sends != 1 && !(p.sends == 2 && resent && min_rtt &&
			      now_ns - p.sent_ns < min_rtt / 2))
		return false;
	rto_.sample(now_ns - p.first_sent_ns);
	learn_reordering(behind(p));
	if (!resent)
		return false;
	resend_was_needless(resent_record(p, now_ns));
	return true;
}

/* What proves @p's resends needless acts on, @p answered now. */
host_queue::resent_done host_queue::resent_record(const piece &p, u64 now_ns) const
{
	u64 rtt_ns = now_ns > p.first_sent_ns ? now_ns - p.first_sent_ns : 0;

	return {p.seq, rtt_ns, p.fast_cut, p.timed_out, p.overtaken, p.op};
}

/*
 * The first send of one resent got through: no loss.  How far it was
 * overtaken is learnt, and the halving is undone -- a timeout's at once, a
 * fast resend's once every fast resend of that halving is proved needless
 * (another of them may have been lost).
 */
void host_queue::resend_was_needless(const resent_done &r)
{
	if (r.timed_out) {
		add_once(counters_.spurious, 1);
		if (window_.decreases() == timeout_cut_)
			window_.undo();	/* the last halving was a timeout's */
	}
	if (r.overtaken) {
		add_once(counters_.fast_spurious, 1);
		if (r.fast_cut && r.fast_cut == fast_cut_ && window_.decreases() == fast_cut_ &&
		    fast_unproven_ && !--fast_unproven_)
			window_.undo();
	}
}

void host_queue::learn_reordering(u32 behind)
{
	if (behind > counters_.reordering)
		write_once(counters_.reordering, (u64)behind);
}

/* A stray answer: the second to a number done after a resend? */
void host_queue::second_answer(const header &h)
{
	resent_done &r = resent_[h.seq % resent_slots];

	if (!h.seq || r.seq != h.seq || h.op != (r.op | op_reply_bit) ||
	    h.status == status_enotconn)
		return;
	r.seq = 0;	/* once: a READ's other chunks prove nothing more */
	/*
	 * After a timeout the first answer is taken for the first send's, held
	 * past the timeout by a queue in the path: that round trip is learnt.
	 * A fast resend goes sooner: its first answer may be either send's.
	 */
	if (r.timed_out)
		rto_.sample(r.rtt_ns);
	resend_was_needless(r);
}

void host_queue::fail_request(u32 tag, u16 status)
{
	if (!requests_[tag].active)
		return;
	for (u32 l = list_queued; l < list_count; l++) {
		u32 i = lists_[l].head;

		while (i != none) {
			u32 next = pieces_[i].next;

			if (pieces_[i].tag == tag)
				release(i);
			i = next;
		}
	}
	request_over(tag);
	add_once(counters_.failed, 1);
	ops_.complete(ctx_, tag, status);
}

/* Back to the front of the queue, its number kept: sent before anything new. */
void host_queue::resend_soon(u32 i)
{
	unlink(i);
	link_head(list_queued, i);
}

/* Sent again at once under a new number (EALREADY), its chunks had kept. */
void host_queue::renumber(u32 i)
{
	forget_seq(pieces_[i]);
	resend_soon(i);
	add_once(counters_.renumbered, 1);
}

/* Later sends answered that make one overtaken: a window, or more than any reordering seen. */
u32 host_queue::fast_gap() const
{
	u32 reordered = (u32)min<u64>(counters_.reordering + 1, fast_gap_max);

	return min(max(max(window_.limit(), reordered), fast_gap_min), fast_gap_max);
}

/* Halve the window for @p's loss (once among the same sends): whether it did now. */
bool host_queue::halve_for(const piece &p)
{
	u64 cuts = window_.decreases();

	window_.congested(p.sent_no, counters_.sends);
	return window_.decreases() != cuts;
}

/*
 * Outstanding datagrams are in the order of their sends: the head is the
 * oldest, and one sent its fast_gap (the window then) sends before the
 * newest answered is as good as lost.
 */
void host_queue::resend_overtaken()
{
	while (lists_[list_outstanding].head != none) {
		u32 i = lists_[list_outstanding].head;
		piece &p = pieces_[i];

		if (p.sent_no + p.fast_gap > answered_no_)
			break;
		if (halve_for(p)) {
			fast_cut_ = window_.decreases();
			fast_unproven_ = 0;
		}
		/* undone only if the last halving is a fast resend's */
		p.fast_cut = window_.decreases() == fast_cut_ ? fast_cut_ : 0;
		if (p.fast_cut)
			fast_unproven_++;
		p.overtaken = true;
		add_once(counters_.fast_resends, 1);
		resend_soon(i);
	}
}

host_answer host_queue::answer(const header &h, u32 data_len, void *frame, u64 now_ns)
{
	host_answer r = answer_one(h, data_len, frame, now_ns, false);

	if (h.reserved && h.op == (op_write | op_reply_bit) && h.status == status_ok)
		answer_folded(h, now_ns);
	return r;
}

/*
 * The WRITEs a folded answer's bits name, each answered OK as by an answer
 * of its own -- but for its offset and length, which only the first
 * carries.
 */
void host_queue::answer_folded(const header &h, u64 now_ns)
{
	header each = h;

	each.reserved = 0;
	for (u32 bit = 0; bit < fold_span; bit++) {
		if (!(h.reserved & (1u << bit)))
			continue;
		each.seq = h.seq + 1 + bit;
		if (answer_one(each, 0, nullptr, now_ns, true) != host_answer::stray)
			add_once(counters_.folded, 1);
	}
}

host_answer host_queue::answer_one(const header &h, u32 data_len, void *frame, u64 now_ns,
				   bool folded)
{
	u32 i = h.seq ? by_seq_[h.seq % seq_slots] : none;

	if (i == none || pieces_[i].seq != h.seq || h.op != (pieces_[i].op | op_reply_bit)) {
		second_answer(h);
		add_once(counters_.stray, 1);
		return host_answer::stray;
	}

	piece &p = pieces_[i];

	answered_ns_ = now_ns;	/* the instance is there: the timers run from now */
	if (h.status == status_eagain) {
		if (p.list != list_outstanding)
			return host_answer::duplicate;	/* one back-off per send */
		add_once(counters_.busy, 1);
		window_.congested(p.sent_no, counters_.sends);
		p.busy++;
		p.due_ns = now_ns + jittered_backoff_ns(p.busy);
		move_tail(list_backoff, i);
		return host_answer::busy;
	}
	if (h.status == status_enotconn)
		return host_answer::session_lost;
	if (h.status == status_ealready && (p.op == op_read || p.op == op_info)) {
		if (p.list != list_outstanding)
			return host_answer::duplicate;
		renumber(i);
		return host_answer::renumbered;
	}
	if (h.status != status_ok) {
		fail_request(p.tag, h.status);
		return host_answer::failed;
	}

	if (p.op == op_read) {
		/* a chunk: max_io-aligned within the READ, max_io long but the last */
		u64 rel = h.offset - p.offset;

		if (h.offset < p.offset || rel >= p.length || rel % cfg_.max_io ||
		    h.length != min<u64>(cfg_.max_io, p.length - rel) || data_len != h.length) {
			add_once(counters_.stray, 1);
			return host_answer::stray;
		}

		u16 bit = (u16)(1u << (rel / cfg_.max_io));

		if (p.chunks_got & bit) {
			add_once(counters_.duplicates, 1);
			return host_answer::duplicate;
		}
		p.chunks_got |= bit;
		ops_.read_data(ctx_, p.tag, p.at + (u32)rel, frame, h.length);
		if (--p.chunks_left)
			return host_answer::partial;
	} else if (!folded && (h.offset != p.offset || h.length != p.length)) {
		add_once(counters_.stray, 1);
		return host_answer::stray;
	} else if (p.op == op_info) {
		ops_.read_data(ctx_, p.tag, 0, frame, data_len);	/* the owner decodes it */
	}

	bool last = requests_[p.tag].left == 1;

	finish(i, now_ns);
	resend_overtaken();
	return last ? host_answer::done : host_answer::partial;
}

/* ---- timers ---- */

/* busy_backoff_ns() times 0.5 to 1.5 (xorshift64: no crypto needed). */
u64 host_queue::jittered_backoff_ns(u32 busy)
{
	u64 base = busy_backoff_ns(busy);

	rng_ ^= rng_ << 13;
	rng_ ^= rng_ >> 7;
	rng_ ^= rng_ << 17;
	return base / 2 + rng_ % (base + 1);
}

/* Fails the requests past the deadline; returns the soonest deadline of the rest (0: none). */
u64 host_queue::expire_deadlines(u64 now_ns)
{
	u64 soonest = 0;

	if (!cfg_.deadline_ns)
		return 0;
	for (u32 tag = 0; tag < cfg_.requests; tag++) {
		request &r = requests_[tag];

		if (!r.active)
			continue;
		if (now_ns - r.queued_ns >= cfg_.deadline_ns) {
			add_once(counters_.expired, 1);
			fail_request(tag, status_eio);
		}
		else if (!soonest || r.queued_ns + cfg_.deadline_ns < soonest)
			soonest = r.queued_ns + cfg_.deadline_ns;
	}
	return soonest;
}

u64 host_queue::expire(u64 now_ns)
{
	u64 timeout = rto_.timeout_ns();
	bool timed_out = false;

	/* every outstanding datagram waits the same timeout: the head is due first */
	while (lists_[list_outstanding].head != none) {
		u32 i = lists_[list_outstanding].head;
		piece &p = pieces_[i];
		u64 since = silent_since(p);

		if (now_ns < since || now_ns - since < timeout)
			break;
		if (halve_for(p))
			timeout_cut_ = window_.decreases();
		/*
		 * Lost though later ones were answered: what was learnt of
		 * reordering held its fast resend back -- forget it (as
		 * Linux's tcp_enter_loss() does its reordering metric).
		 */
		if (answered_no_ >= p.sent_no + fast_gap_min)
			write_once(counters_.reordering, 0);
		add_once(counters_.timeouts, 1);
		p.timed_out = true;
		resend_soon(i);
		timed_out = true;
	}
	if (timed_out)
		rto_.timed_out();	/* once a firing, as TCP backs off once an RTO */

	u64 next = 0;
	u32 i = lists_[list_backoff].head;

	while (i != none) {
		u32 after = pieces_[i].next;

		if (pieces_[i].due_ns <= now_ns)
			resend_soon(i);
		else if (!next || pieces_[i].due_ns < next)
			next = pieces_[i].due_ns;
		i = after;
	}
	u64 deadline = expire_deadlines(now_ns);

	if (deadline && (!next || deadline < next))
		next = deadline;
	if (lists_[list_outstanding].head != none) {
		u64 due = silent_since(pieces_[lists_[list_outstanding].head]) + rto_.timeout_ns();

		if (!next || due < next)
			next = due;
	}
	return next;
}

/* ---- sessions ---- */

void host_queue::reopen()
{
	/*
	 * Newest first to the queue's head: they go again in the order of
	 * their old numbers, ahead of what was never sent.
	 */
	u64 oldest = oldest_seq();

	for (u64 s = next_seq_; s-- > oldest;) {
		u32 i = by_seq_[s % seq_slots];

		if (i == none || pieces_[i].seq != s)
			continue;
		forget_seq(pieces_[i]);
		pieces_[i].chunks_got = 0;	/* the new session answers the whole READ */
		pieces_[i].sends = 0;		/* its round trips count from its first send in it */
		pieces_[i].timed_out = false;
		pieces_[i].overtaken = false;
		pieces_[i].fast_cut = 0;
		pieces_[i].chunks_left = pieces_[i].chunks;
		resend_soon(i);
		add_once(counters_.renumbered, 1);
	}
	next_seq_ = oldest_seq_ = 1;
	answered_no_ = counters_.sends;	/* sends of the old session overtake nothing */
	for (resent_done &r : resent_)
		r.seq = 0;		/* its numbers start again */
	add_once(counters_.reopened, 1);
}

void host_queue::cancel(u32 tag, u16 status)
{
	if (tag < cfg_.requests)
		fail_request(tag, status);
}

void host_queue::cancel_all(u16 status)
{
	for (u32 tag = 0; tag < cfg_.requests; tag++)
		fail_request(tag, status);
}

} /* namespace nb */
