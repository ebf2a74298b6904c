// SPDX-License-Identifier: GPL-2.0
/*
 * A slot's moves that every stage of the path makes: completed, its frame
 * let go, released and given back to the free list, its replay window
 * entry finished, a refusal counted.  The bottom of the engine's files:
 * it calls none of them (engine.h).
 */
#include "engine.h"

namespace nb {

void engine::complete(u32 index, u16 status)
{
	slots_[index].status = status;
	completions_.push(index);
}

/* No reply goes out from it: the frame it holds, if any, is freed; the slot is free. */
void engine::release_unsent(u32 index)
{
	slot &s = slots_[index];

	if (s.frame)
		transport_->free_frame(owner_, s.frame);
	release(index);
}

/* Its frame is the NIC's now, or freed: the slot is free. */
void engine::release(u32 index)
{
	slot &s = slots_[index];

	if (s.frame) {
		s.frame = nullptr;
		add_once(worker_.frames_released, 1);
	}
	if (s.lent) {
		s.lent = false;
		transport_->reply_done(owner_, index);
	}
	add_once(worker_.replied, 1);
	give_back(index);
}

/*
 * Slot @index is free again -- a READ's slots only all together, once the
 * last of its datagrams is released: until then, a gathered READ's later
 * datagrams send from its first slots' data pages, which a slot taken
 * again would read other data into.
 */
void engine::give_back(u32 index)
{
	u32 first = slots_[index].first;

	if (first == no_slot) {
		free_slots_.push(index);
		return;
	}
	if (--slots_[first].unreleased)
		return;
	for (u32 at = first; at != no_slot; at = slots_[at].next)
		free_slots_.push(at);
}

/* The slot is done with its received frame before its reply: give it back now. */
void engine::let_go_frame(slot &s)
{
	if (!s.frame)
		return;
	transport_->free_frame(owner_, s.frame);
	s.frame = nullptr;
	add_once(worker_.frames_released, 1);
}

/* A request started in its window has its answer: its duplicates get it too. */
void engine::window_done(slot &s)
{
	peer_addr from = route_peer(s.route);
	session *ss = sessions_.find(s.request.session, s.request.token, from.ip, from.port);

	s.windowed = false;
	if (!ss)
		return;		/* never: a session with requests at the disk stays */
	__atomic_store_n(&ss->in_flight, ss->in_flight - 1, __ATOMIC_RELAXED);
	if (s.status == status_eagain)
		ss->window.forget(s.request.seq);	/* not executed: may be sent again */
	else
		ss->window.finish(s.request.seq, s.status);
}

/* The slots a request stands for: a READ's datagrams not started apart yet, or itself. */
u32 engine::slots_of(const slot &s) const
{
	return s.read_len ? (s.read_len + geo_.max_io - 1) / geo_.max_io : 1;
}

/* By status; validate_header() refuses with no status refusal_of() does not know (unit tested). */
void engine::count_refusal(u64 *refused_by, u16 status)
{
	refusal r = refusal_of(status);

	if (r != refusals)
		add_once(refused_by[r], 1);
}

} /* namespace nb */
