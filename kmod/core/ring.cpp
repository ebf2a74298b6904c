// SPDX-License-Identifier: GPL-2.0
#include "ring.h"

namespace nb {

bool ring::init(u32 capacity)
{
	if (capacity == 0 || (capacity & (capacity - 1)))
		return false;
	cells_ = new cell[capacity];
	if (!cells_)
		return false;
	for (u32 i = 0; i < capacity; i++)
		cells_[i].sequence = i;
	mask_ = capacity - 1;
	enqueue_pos_ = 0;
	dequeue_pos_ = 0;
	return true;
}

void ring::destroy()
{
	delete[] cells_;
	cells_ = nullptr;
}

u32 ring::size() const
{
	u64 head = __atomic_load_n(&dequeue_pos_, __ATOMIC_RELAXED);
	u64 tail = __atomic_load_n(&enqueue_pos_, __ATOMIC_RELAXED);

	return tail > head ? (u32)(tail - head) : 0;
}

} /* namespace nb */
