/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The plain C functions any C++ core -- the server's and the client's --
 * needs from the kernel: its allocator (common/core_glue.c; the unit tests'
 * calloc), and the ops a disk does.  What the server's core needs of its
 * disk and its transport is target_ops.h's, reached through ops tables.
 */
#ifndef NETBLK_KERNEL_API_H
#define NETBLK_KERNEL_API_H

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

/* Zeroed memory, or NULL; may sleep.  Only called when an instance starts. */
void *netblk_kernel_alloc(size_t size);
void netblk_kernel_free(void *p);
/*
 * A spinlock_t the caller owns (the unit tests': a std::mutex): the cores
 * of an instance's queues share it to open sessions (core/session.h,
 * session_group).  Only their workers take it, never a softirq: bottom
 * halves stay on while one scans the tables.
 */
void netblk_kernel_lock(void *lock);
void netblk_kernel_unlock(void *lock);

enum netblk_io_op {
	NETBLK_IO_READ = 1,
	NETBLK_IO_WRITE,
	NETBLK_IO_FLUSH,
	NETBLK_IO_DISCARD,
	NETBLK_IO_WRITE_ZEROES,
};

#ifdef __cplusplus
}
#endif

#endif
