/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Protocol v2's sessions (docs/protocol.md, "Sessions"): the stateless HELLO
 * cookie that proves a client can receive at the address it sends from, the
 * table of open sessions, allocated when the instance starts, and each
 * session's replay window, which makes every request that changes the disk
 * happen at most once however often the network delivers it.
 *
 * Threads: the worker alone opens, evicts and looks up sessions and moves
 * their windows.  The receive path only asks matches(), a filter that spares
 * a slot to a datagram of no session; it reads the two words a session is
 * known by with atomic loads, and the worker checks again.  Other queues'
 * workers, under the lock every table's open() holds (session_group), look
 * for a resent HELLO's session (token, peer, nonce: written under that
 * lock) and count an address's sessions in use (last_used_ns, in_flight
 * too: stored atomically by their worker).
 */
#ifndef NETBLK_CORE_SESSION_H
#define NETBLK_CORE_SESSION_H

#include "siphash.h"
#include "types.h"

namespace nb {

/*
 * What became of each of the last `size` sequence numbers of a session's
 * requests, as in IPsec's anti-replay window (RFC 4303 3.4.3): for one that
 * changes the disk, its status once done, so that a duplicate is answered
 * as the original was; for a READ or INFO, how often it was served, so
 * that a replay of one cannot make the instance send its answer without
 * end.  Each entry keeps a check of what the request asked (op, flags,
 * offset, length: request_check()), so that a number used again for
 * another request is told from a resend.  Sequence numbers start at 1.
 */
class replay_window {
public:
	static constexpr u32 size = 1024;
	/* A READ or INFO is served at most this often: once, then resends of it. */
	static constexpr u8 serves_max = 4;

	enum class state : u8 {
		fresh,		/* never seen: execute it */
		in_flight,	/* at the disk now: drop the duplicate */
		done,		/* answered: answer the duplicate the same, do not execute */
		stale,		/* older than the window: refuse, never execute */
		too_far,	/* more than `size` ahead of any seen: refuse */
		other,		/* seen, asking something else: refuse, never execute */
	};

	void reset();
	u64 top() const { return top_; }
	/* What @seq is, for a request whose request_check() is @check; for done, *@status is the original's answer. */
	state look(u64 seq, u32 check, u16 *status) const;
	/* @seq (fresh) goes to the disk, or is served: the window moves up to it. */
	void start(u64 seq, u32 check);
	/* @seq was answered @status: its duplicates get the same. */
	void finish(u64 seq, u16 status);
	/* @seq was not executed after all (the disk said "again"): fresh again. */
	void forget(u64 seq);
	/* @seq, a READ or INFO done, is served once more: false when it was serves_max times. */
	bool serve_again(u64 seq);

private:
	struct entry {
		u32 check;	/* request_check() of the request that took the number */
		u16 status;	/* done: its answer */
		u8 state;	/* entry_fresh, entry_in_flight, entry_done */
		u8 serves;	/* READ, INFO: times served */
	};

	bool inside(u64 seq) const { return seq <= top_ && top_ - seq < size; }

	u64 top_;		/* the highest sequence number started */
	entry entries_[size];	/* by seq % size */
};

/*
 * What a request asks, in 32 bits: the same for every resend of it, and,
 * but for one chance in 2^32, not the same for a request asking another op,
 * offset, length or flags.  A mix, not a MAC: a client that sends another
 * request under a number it used only hurts itself.
 */
u32 request_check(u8 op, u16 flags, u64 offset, u32 length);

struct session {
	u64 token;		/* 0: the entry is free.  Atomic: matches() reads it */
	u64 peer;		/* the client's IPv4 (network order) << 16 | port.  Atomic */
	u64 nonce;		/* the client's HELLO nonce: a resent HELLO gets this session again */
	/* these two are stored atomically: other queues' workers read them (in_use_by()) */
	u64 last_used_ns;
	u32 in_flight;		/* its requests at the disk: it is not evicted meanwhile */
	bool fold_answers;	/* its client takes folded WRITE answers (its HELLO asked) */
	replay_window window;
};

/* The session table's counters; the worker writes them all. */
struct session_counters {
	u64 opened;		/* sessions opened */
	u64 evicted;		/* idle sessions closed to make room */
	u64 refused;		/* HELLOs with a valid cookie refused: no room */
	u64 duplicates;		/* duplicates of answered requests, answered without the disk */
	u64 duplicates_in_flight;	/* duplicates of requests at the disk, dropped */
	u64 stale;		/* refused: older than the window (ESTALE) */
	u64 too_far;		/* refused: too far ahead of the window (EOVERFLOW) */
	u64 served_again;	/* resends of READs and INFOs served again */
};

class session_table;

/*
 * An instance's session tables, one a queue, as per-source= sees them: a
 * source address's sessions are counted over all of them, under a lock the
 * instance gives (the kernel's spinlock; kernel_api.h), so that an address
 * holds at most per-source sessions in use whichever queues its HELLOs land
 * on -- RSS spreads one address's ports over every queue.  Only opening a
 * session takes the lock: the data path never does.
 */
class session_group {
public:
	int init(u32 queues, void *lock);
	void destroy();
	/* Table @queue's: counted from now on. */
	void join(u32 queue, const session_table *table);
	void lock() const;
	void unlock() const;
	/*
	 * Sessions in use (not idle_evict_ns with nothing at the disk) that
	 * @source holds in the tables but @except; the caller holds the lock.
	 * An address's idle sessions on another queue do not count: only
	 * their own queue can close them, and a client that restarted must
	 * not be refused for them until its HELLO happens to land there.
	 */
	u32 in_use_by(u64 source, u64 now_ns, const session_table *except) const;
	/*
	 * The session a HELLO from @peer with @nonce opened on a queue but
	 * @except's (the same HELLO again, come to another queue since: the
	 * RSS table changed); the caller holds the lock.
	 */
	bool opened_by(u64 peer, u64 nonce, const session_table *except, u32 *id,
		       u64 *token) const;

private:
	const session_table **tables_ = nullptr;
	u32 queues_ = 0;
	void *lock_ = nullptr;
};

class session_table {
public:
	/* A session nobody used for this long may be closed to make room. */
	static constexpr u64 idle_evict_ns = 60ull * 1000000000ull;
	/* Sessions one IPv4 address holds at most, unless the instance says (per-source=). */
	static constexpr u32 per_source_default = 16;
	/* Cookies are good for one to two of these (2^36 ns, about 69 s). */
	static constexpr u32 cookie_epoch_shift = 36;

	enum class open_result : u8 { opened, again, full };

	/*
	 * @per_source: sessions one IPv4 address may hold (0:
	 * per_source_default), in all of @group's tables.  The table of
	 * queue @queue of @queues: its session ids are those that say so
	 * (queue_of()), and its tokens are
	 * made from numbers no other queue's table uses.  @group: the
	 * instance's tables, whose sessions per_source counts (none: this
	 * table's alone).
	 */
	int init(u32 capacity, u32 per_source, const siphash_key &secret, u32 queue = 0,
		 u32 queues = 1, session_group *group = nullptr);
	void destroy();
	u32 capacity() const { return capacity_; }
	u32 per_source() const { return per_source_; }
	/* Sessions close only to make room for another: those opened less those evicted. */
	u64 open_count() const
	{
		return read_once(counters_.opened) - read_once(counters_.evicted);
	}
	const session_counters &counters() const { return counters_; }
	session_counters &counters() { return counters_; }

	/* The cookie a HELLO from @ip:@port with @nonce must bring back. */
	u64 cookie(u32 ip, u16 port, u64 nonce, u64 now_ns) const;
	/* Made now or in the epoch before: a cookie lives 69 to 138 s. */
	bool cookie_valid(u32 ip, u16 port, u64 nonce, u64 cookie, u64 now_ns) const;

	/*
	 * Open a session for a HELLO that brought a valid cookie: a free entry,
	 * else the idlest of all idle for idle_evict_ns -- of the source
	 * address's own when it holds per_source() already (in this table,
	 * and in use in the group's others).  The same HELLO
	 * again (its answer was lost) gets the same session (again), on
	 * whichever of the group's queues it was opened.  full:
	 * none can be had, and no active session was pushed out.
	 */
	open_result open(u32 ip, u16 port, u64 nonce, u64 now_ns, u32 *id, u64 *token);

	/* The receive path's filter (any CPU): might @id be this client's session? */
	bool matches(u32 id, u64 token, u32 ip, u16 port) const;
	/* The worker's lookup: the session, or null. */
	session *find(u32 id, u64 token, u32 ip, u16 port);

	/* Sessions of this table from @source (an address, as peer >> 16) in use: any thread. */
	u32 in_use_by(u64 source, u64 now_ns) const;
	/* The session a HELLO from @peer with @nonce opened here: under the group's lock. */
	bool opened_by(u64 peer, u64 nonce, u32 *id, u64 *token) const;

	/* The queue whose table session @id (not 0) is in, of @queues. */
	static u32 queue_of(u32 id, u32 queues) { return (id - 1) % queues; }

private:
	/* Session ids on the wire: 0 is "none"; id - 1 is index * queues + queue. */
	u32 id_of(u32 index) const { return index * queues_ + queue_ + 1; }
	/* The entry of @id, or capacity_ when it is not one of this table's. */
	u32 index_of(u32 id) const;
	static u64 pack_peer(u32 ip, u16 port) { return (u64)ip << 16 | port; }
	u32 pick_entry(u64 peer, u64 now_ns);
	open_result open_locked(u32 ip, u16 port, u64 nonce, u64 now_ns, u32 *id, u64 *token);

	session *sessions_ = nullptr;
	u32 capacity_ = 0;
	u32 per_source_ = 0;
	u32 queue_ = 0, queues_ = 1;
	session_group *group_ = nullptr;
	u64 created_ = 0;	/* sessions ever opened: every token is made from a new one */
	siphash_key secret_ = {};
	session_counters counters_ = {};
};

} /* namespace nb */

/* core_api.h's handle on an instance's session_group */
struct netblk_session_group {
	nb::session_group group;
};

#endif
