/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A bounded lock-free ring of slot numbers, safe for any number of producers
 * and consumers (D. Vyukov's bounded MPMC queue): each cell carries a sequence
 * number that says whose turn it is, so a push or a pop is one compare-and-swap
 * on the shared position plus a release store on the cell.  The rings of an
 * instance are as large as its slot table, so a push of a slot the instance
 * owns never finds the ring full.
 *
 * The storage is allocated once, by init(); nothing allocates afterwards.
 */
#ifndef NETBLK_CORE_RING_H
#define NETBLK_CORE_RING_H

#include "types.h"

namespace nb {

class ring {
public:
	/* @capacity must be a power of two.  False when out of memory. */
	bool init(u32 capacity);
	void destroy();

	bool push(u32 value);
	bool pop(u32 *value);

	/* Entries in the ring, as of some moment during the call. */
	u32 size() const;
	u32 capacity() const { return mask_ + 1; }

private:
	struct cell {
		u64 sequence;
		u32 value;
	};

	cell *cells_ = nullptr;
	u32 mask_ = 0;
	u8 pad0_[64 - sizeof(cell *) - sizeof(u32)];
	u64 enqueue_pos_ = 0;	/* producers' cache line */
	u8 pad1_[64 - sizeof(u64)];
	u64 dequeue_pos_ = 0;	/* consumers' cache line */
	u8 pad2_[64 - sizeof(u64)];
};

inline bool ring::push(u32 value)
{
	u64 pos = __atomic_load_n(&enqueue_pos_, __ATOMIC_RELAXED);

	for (;;) {
		cell *c = &cells_[pos & mask_];
		u64 seq = __atomic_load_n(&c->sequence, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - pos);

		if (dif == 0) {
			if (__atomic_compare_exchange_n(&enqueue_pos_, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				c->value = value;
				__atomic_store_n(&c->sequence, pos + 1, __ATOMIC_RELEASE);
				return true;
			}
			/* pos was reloaded by the failed exchange */
		} else if (dif < 0) {
			return false;	/* full */
		} else {
			pos = __atomic_load_n(&enqueue_pos_, __ATOMIC_RELAXED);
		}
	}
}

inline bool ring::pop(u32 *value)
{
	u64 pos = __atomic_load_n(&dequeue_pos_, __ATOMIC_RELAXED);

	for (;;) {
		cell *c = &cells_[pos & mask_];
		u64 seq = __atomic_load_n(&c->sequence, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - (pos + 1));

		if (dif == 0) {
			if (__atomic_compare_exchange_n(&dequeue_pos_, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				*value = c->value;
				__atomic_store_n(&c->sequence, pos + mask_ + 1, __ATOMIC_RELEASE);
				return true;
			}
		} else if (dif < 0) {
			return false;	/* empty */
		} else {
			pos = __atomic_load_n(&dequeue_pos_, __ATOMIC_RELAXED);
		}
	}
}

} /* namespace nb */

#endif
