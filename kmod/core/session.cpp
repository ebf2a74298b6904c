// SPDX-License-Identifier: GPL-2.0
/* Sessions, cookies and replay windows: see session.h. */
#include "kernel_api.h"
#include "session.h"

namespace nb {

constexpr int err_nomem = 12;
constexpr int err_inval = 22;

constexpr u8 entry_fresh = 0;
constexpr u8 entry_in_flight = 1;
constexpr u8 entry_done = 2;

/* ---- replay_window ---- */

void replay_window::reset()
{
	top_ = 0;
	for (u32 i = 0; i < size; i++)
		entries_[i] = {};
}

replay_window::state replay_window::look(u64 seq, u32 check, u16 *status) const
{
	if (seq > top_)
		return seq - top_ > size ? state::too_far : state::fresh;
	/* seq 0 never is: it lies below the window of a session just opened */
	if (top_ - seq >= size || seq == 0)
		return state::stale;

	const entry &e = entries_[seq % size];
	if (e.state == entry_fresh)
		return state::fresh;
	if (e.check != check)
		return state::other;
	if (e.state == entry_in_flight)
		return state::in_flight;
	*status = e.status;
	return state::done;
}

void replay_window::start(u64 seq, u32 check)
{
	if (seq > top_) {
		/* the numbers the window moves over were never seen */
		u64 gap = seq - top_;

		if (gap >= size) {
			for (u32 i = 0; i < size; i++)
				entries_[i] = {};
		} else {
			for (u64 s = top_ + 1; s < seq; s++)
				entries_[s % size] = {};
		}
		top_ = seq;
	}
	entries_[seq % size] = { check, 0, entry_in_flight, 1 };
}

void replay_window::finish(u64 seq, u16 status)
{
	/* one that fell out of the window meanwhile has no entry left */
	if (!inside(seq))
		return;
	entries_[seq % size].state = entry_done;
	entries_[seq % size].status = status;
}

void replay_window::forget(u64 seq)
{
	if (inside(seq))
		entries_[seq % size] = {};
}

bool replay_window::serve_again(u64 seq)
{
	entry &e = entries_[seq % size];

	if (e.serves >= serves_max)
		return false;
	e.serves++;
	return true;
}

/* splitmix64's finaliser: every input bit moves about half the output's */
static u64 mix64(u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

u32 request_check(u8 op, u16 flags, u64 offset, u32 length)
{
	u64 what = (u64)length << 32 | (u64)flags << 8 | op;

	return (u32)(mix64(offset ^ mix64(what)) >> 32);
}

/* ---- cookies and tokens ---- */

/* Domain separation: a cookie can never be mistaken for a token. */
constexpr u64 label_cookie = 0x636f6f6b6965ull;	/* "cookie" */
constexpr u64 label_token = 0x746f6b656eull;	/* "token" */

static u64 keyed(const siphash_key &secret, u64 label, u64 a, u64 b, u64 c)
{
	siphash h(secret);

	h.update_u64(label);
	h.update_u64(a);
	h.update_u64(b);
	h.update_u64(c);
	return h.final();
}

/* ---- an instance's tables ---- */

int session_group::init(u32 queues, void *lock)
{
	if (queues == 0 || !lock)
		return -err_inval;
	tables_ = new const session_table *[queues]();
	if (!tables_)
		return -err_nomem;
	queues_ = queues;
	lock_ = lock;
	return 0;
}

void session_group::destroy()
{
	delete[] tables_;
	tables_ = nullptr;
	queues_ = 0;
}

void session_group::join(u32 queue, const session_table *table)
{
	lock();
	tables_[queue] = table;
	unlock();
}

void session_group::lock() const
{
	netblk_kernel_lock(lock_);
}

void session_group::unlock() const
{
	netblk_kernel_unlock(lock_);
}

u32 session_group::in_use_by(u64 source, u64 now_ns, const session_table *except) const
{
	u32 held = 0;

	for (u32 q = 0; q < queues_; q++)
		if (tables_[q] && tables_[q] != except)
			held += tables_[q]->in_use_by(source, now_ns);
	return held;
}

bool session_group::opened_by(u64 peer, u64 nonce, const session_table *except, u32 *id,
			      u64 *token) const
{
	for (u32 q = 0; q < queues_; q++)
		if (tables_[q] && tables_[q] != except &&
		    tables_[q]->opened_by(peer, nonce, id, token))
			return true;
	return false;
}

/* ---- a queue's table ---- */

int session_table::init(u32 capacity, u32 per_source, const siphash_key &secret, u32 queue,
			u32 queues, session_group *group)
{
	if (capacity == 0 || queues == 0 || queue >= queues ||
	    (u64)capacity * queues > 0xffffffffull)
		return -err_inval;
	sessions_ = new session[capacity]();
	if (!sessions_)
		return -err_nomem;
	capacity_ = capacity;
	per_source_ = per_source ? per_source : min(per_source_default, capacity);
	secret_ = secret;
	queue_ = queue;
	queues_ = queues;
	/* tokens are made from (queue, number): none is another queue's */
	created_ = (u64)queue << 48;
	for (u32 i = 0; i < capacity; i++)
		sessions_[i].window.reset();
	group_ = group;
	if (group_)
		group_->join(queue, this);
	return 0;
}

void session_table::destroy()
{
	if (group_)
		group_->join(queue_, nullptr);
	group_ = nullptr;
	delete[] sessions_;
	sessions_ = nullptr;
	capacity_ = 0;
}

u64 session_table::cookie(u32 ip, u16 port, u64 nonce, u64 now_ns) const
{
	return keyed(secret_, label_cookie, now_ns >> cookie_epoch_shift, pack_peer(ip, port),
		     nonce);
}

bool session_table::cookie_valid(u32 ip, u16 port, u64 nonce, u64 cookie_value,
				 u64 now_ns) const
{
	u64 epoch = now_ns >> cookie_epoch_shift;
	u64 peer = pack_peer(ip, port);

	if (keyed(secret_, label_cookie, epoch, peer, nonce) == cookie_value)
		return true;
	return epoch > 0 && keyed(secret_, label_cookie, epoch - 1, peer, nonce) == cookie_value;
}

/* ---- the table ---- */

/*
 * Where a new session from @peer goes: a free entry, else the idlest of
 * those idle for idle_evict_ns with nothing at the disk -- of its own
 * address's when that holds per_source_ already.  Never one in use: many
 * clients behind one address (NAT) do not push each other out, nor does a
 * flood of HELLOs anyone else.  capacity_ if none.
 */
u32 session_table::pick_entry(u64 peer, u64 now_ns)
{
	u64 source = peer >> 16;
	u32 free_entry = capacity_, own = capacity_, any = capacity_, own_count = 0;

	for (u32 i = 0; i < capacity_; i++) {
		const session &s = sessions_[i];

		if (!s.token) {
			if (free_entry == capacity_)
				free_entry = i;
			continue;
		}
		bool mine = s.peer >> 16 == source;

		if (mine)
			own_count++;
		if (s.in_flight || now_ns - s.last_used_ns < idle_evict_ns)
			continue;
		if (mine && (own == capacity_ || s.last_used_ns < sessions_[own].last_used_ns))
			own = i;
		if (any == capacity_ || s.last_used_ns < sessions_[any].last_used_ns)
			any = i;
	}
	if (group_)
		own_count += group_->in_use_by(source, now_ns, this);
	if (own_count >= per_source_)
		return own;
	return free_entry != capacity_ ? free_entry : any;
}

session_table::open_result session_table::open(u32 ip, u16 port, u64 nonce, u64 now_ns,
					       u32 *id, u64 *token)
{
	open_result r;

	if (!group_)
		return open_locked(ip, port, nonce, now_ns, id, token);
	/* no other queue opens one between counting and opening */
	group_->lock();
	r = open_locked(ip, port, nonce, now_ns, id, token);
	group_->unlock();
	return r;
}

u32 session_table::in_use_by(u64 source, u64 now_ns) const
{
	u32 held = 0;

	for (u32 i = 0; i < capacity_; i++) {
		const session &s = sessions_[i];

		if (!__atomic_load_n(&s.token, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&s.peer, __ATOMIC_RELAXED) >> 16 != source)
			continue;
		if (__atomic_load_n(&s.in_flight, __ATOMIC_RELAXED) ||
		    now_ns - __atomic_load_n(&s.last_used_ns, __ATOMIC_RELAXED) < idle_evict_ns)
			held++;
	}
	return held;
}

/* Its nonce and token are written in open(), under the group's lock: read under it too. */
bool session_table::opened_by(u64 peer, u64 nonce, u32 *id, u64 *token) const
{
	for (u32 i = 0; i < capacity_; i++) {
		const session &s = sessions_[i];

		if (s.token && s.peer == peer && s.nonce == nonce) {
			*id = id_of(i);
			*token = s.token;
			return true;
		}
	}
	return false;
}

session_table::open_result session_table::open_locked(u32 ip, u16 port, u64 nonce, u64 now_ns,
						      u32 *id, u64 *token)
{
	u64 peer = pack_peer(ip, port);

	if (opened_by(peer, nonce, id, token)) {
		__atomic_store_n(&sessions_[index_of(*id)].last_used_ns, now_ns, __ATOMIC_RELAXED);
		return open_result::again;
	}
	/* another queue's, whose worker alone marks it used */
	if (group_ && group_->opened_by(peer, nonce, this, id, token))
		return open_result::again;

	u32 i = pick_entry(peer, now_ns);
	if (i == capacity_) {
		counters_.refused++;
		return open_result::full;
	}
	session &s = sessions_[i];
	if (s.token) {
		/* evicted: its datagrams find nothing from now on */
		__atomic_store_n(&s.token, 0, __ATOMIC_RELAXED);
		counters_.evicted++;
	}
	u64 t = keyed(secret_, label_token, ++created_, peer, nonce);
	s.nonce = nonce;
	__atomic_store_n(&s.last_used_ns, now_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&s.in_flight, 0u, __ATOMIC_RELAXED);
	s.window.reset();
	__atomic_store_n(&s.peer, peer, __ATOMIC_RELAXED);
	__atomic_store_n(&s.token, t ? t : 1, __ATOMIC_RELEASE);
	counters_.opened++;
	*id = id_of(i);
	*token = s.token;
	return open_result::opened;
}

u32 session_table::index_of(u32 id) const
{
	if (id == 0 || queue_of(id, queues_) != queue_)
		return capacity_;
	u32 index = (id - 1) / queues_;

	return index < capacity_ ? index : capacity_;
}

bool session_table::matches(u32 id, u64 token, u32 ip, u16 port) const
{
	u32 index = index_of(id);

	if (index == capacity_ || token == 0)
		return false;

	const session &s = sessions_[index];
	return __atomic_load_n(&s.token, __ATOMIC_ACQUIRE) == token &&
	       __atomic_load_n(&s.peer, __ATOMIC_RELAXED) == pack_peer(ip, port);
}

session *session_table::find(u32 id, u64 token, u32 ip, u16 port)
{
	u32 index = index_of(id);

	if (index == capacity_ || token == 0)
		return nullptr;

	session &s = sessions_[index];
	if (s.token != token || s.peer != pack_peer(ip, port))
		return nullptr;
	return &s;
}

} /* namespace nb */
