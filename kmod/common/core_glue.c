// SPDX-License-Identifier: GPL-2.0
/* The kernel functions the C++ core calls (core/kernel_api.h). */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "kernel_api.h"

/*
 * Instance-sized objects (the slot table, the histogram) are tens of KiB:
 * kvzalloc takes them from vmalloc when contiguous pages are scarce.  Only
 * ever called when an instance starts.
 */
void *netblk_kernel_alloc(size_t size)
{
	return kvzalloc(size, GFP_KERNEL);
}

void netblk_kernel_free(void *p)
{
	kvfree(p);
}

void netblk_kernel_lock(void *lock)
{
	spin_lock(lock);
}

void netblk_kernel_unlock(void *lock)
{
	spin_unlock(lock);
}
