// SPDX-License-Identifier: GPL-2.0
/*
 * The worker's admission: a queued request checked against its session and
 * replay window, refused or answered without the disk, or let through; what
 * it changes counted once (engine.h).
 */
#include "engine.h"

namespace nb {

/* Done without the disk, or not started: its reply comes from reply(). */
void engine::answer_now(u32 index, u16 status)
{
	complete(index, status);
}

/*
 * A request the worker answers without sending it to the disk: a READ of
 * several datagrams gets one answer, from its first slot, and its other
 * slots send nothing.
 */
void engine::answer_without_disk(u32 index, u16 status)
{
	slot &s = slots_[index];

	add_once(worker_.submitted, slots_of(s));
	s.without_disk = true;
	if (s.read_len) {
		add_once(worker_.reaped, slots_of(s) - 1);
		s.read_len = 0;
		for (u32 at = s.next, next; at != no_slot; at = next) {
			next = slots_[at].next;
			release_unsent(at);
		}
	}
	answer_now(index, status);
}

/* A duplicate of a request at the disk: it gets no answer of its own. */
void engine::discard(u32 index)
{
	add_once(worker_.submitted, 1);
	add_once(worker_.reaped, 1);
	release_unsent(index);
}

void engine::open_session(u32 index, slot &s, u64 now_ns)
{
	peer_addr from = route_peer(s.route);
	u32 id = 0;
	u64 token = 0;
	session_table::open_result r = sessions_.open(from.ip, from.port, s.request.seq, now_ns,
						      &id, &token);
	bool fold = s.request.flags & flag_fold_answers;
	/* null when the same HELLO opened it on another queue, which set it then */
	session *opened = r == session_table::open_result::full ? nullptr :
			  sessions_.find(id, token, from.ip, from.port);

	if (opened)
		opened->fold_answers = fold;
	s.request.session = id;
	s.request.token = token;
	/* the answer that opens it says whether its WRITE answers fold: as the client asked */
	s.request.flags = (u16)(auth_flags() | (fold ? flag_fold_answers : 0));
	if (r == session_table::open_result::full)
		refuse(index, status_eusers);
	else
		answer_without_disk(index, status_ok);
}

/* Refused by the worker: one header carrying @status, counted by it. */
void engine::refuse(u32 index, u16 status)
{
	count_refusal(worker_.refused_by, status);
	answer_without_disk(index, status);
}

/*
 * Whether a request the receive path queued goes to the disk: its session
 * must still be open, and its number new to the session's replay window --
 * a duplicate of a request that changes the disk answered gets the same
 * answer again, of one at the disk nothing; a READ or INFO is served again
 * up to serves_max times in all; a number outside the window, or used for
 * another request, is refused.  Everything it does not let through is
 * answered (or dropped) here.
 */
bool engine::admit(u32 index, u64 now_ns)
{
	slot &s = slots_[index];
	const header &h = s.request;
	session_counters &sc = sessions_.counters();
	u16 status = status_ok;

	if (h.op == op_hello) {
		open_session(index, s, now_ns);
		return false;
	}
	peer_addr from = route_peer(s.route);
	session *ss = sessions_.find(h.session, h.token, from.ip, from.port);
	if (!ss) {
		/* evicted or replaced between the receive path's look and now */
		add_once(worker_.not_connected, 1);
		refuse(index, status_enotconn);
		return false;
	}
	/* atomic: another queue's worker reads it to count the address's sessions in use */
	__atomic_store_n(&ss->last_used_ns, now_ns, __ATOMIC_RELAXED);

	/* a READ of several datagrams is admitted as its first: the whole READ */
	u32 check = request_check(h.op, h.flags, h.offset, s.read_len ? s.read_len : h.length);
	switch (ss->window.look(h.seq, check, &status)) {
	case replay_window::state::fresh:
		ss->window.start(h.seq, check);
		if (!op_changes_disk(h.op)) {
			ss->window.finish(h.seq, status_ok);
			count_read(h, s.read_len);
			return true;
		}
		__atomic_store_n(&ss->in_flight, ss->in_flight + 1, __ATOMIC_RELAXED);
		s.windowed = true;
		s.fold = ss->fold_answers && h.op == op_write;
		count_change(h);
		return true;
	case replay_window::state::in_flight:
		add_once(sc.duplicates_in_flight, 1);
		discard(index);
		return false;
	case replay_window::state::done:
		if (!op_changes_disk(h.op)) {
			if (!ss->window.serve_again(h.seq)) {
				refuse(index, status_ealready);
				return false;
			}
			add_once(sc.served_again, 1);
			count_read(h, s.read_len);
			return true;
		}
		add_once(sc.duplicates, 1);
		answer_without_disk(index, status);
		return false;
	case replay_window::state::other:
		refuse(index, status_eexist);
		return false;
	case replay_window::state::stale:
		add_once(sc.stale, 1);
		refuse(index, status_estale);
		return false;
	default: /* too_far */
		add_once(sc.too_far, 1);
		refuse(index, status_eoverflow);
		return false;
	}
}

/* A READ (each copy served) or INFO, admitted; @read_len: a READ of several datagrams' length. */
void engine::count_read(const header &h, u32 read_len)
{
	if (h.op != op_read)
		return;
	add_once(worker_.reads, 1);
	add_once(worker_.read_bytes, read_len ? read_len : h.length);
}

/* A request that changes the disk, admitted: counted by kind. */
void engine::count_change(const header &h)
{
	worker_counters &w = worker_;

	switch (h.op) {
	case op_write:
		add_once(w.writes, 1);
		add_once(w.write_bytes, h.length);
		if (h.flags & flag_fua)
			add_once(w.fua_writes, 1);
		break;
	case op_flush:
		add_once(w.flushes, 1);
		break;
	case op_trim:
		add_once(w.trims, 1);
		add_once(w.trim_bytes, h.length);
		break;
	case op_write_zeroes:
		add_once(w.write_zeroes, 1);
		add_once(w.write_zeroes_bytes, h.length);
		break;
	}
}

} /* namespace nb */
