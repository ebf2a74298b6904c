// SPDX-License-Identifier: GPL-2.0
/*
 * What g++ expects of a C++ runtime, for the module: operator new and delete
 * go to the kernel's allocator (kmalloc).  No global constructors exist (the
 * build fails if one appears) and no thread-safe statics are used
 * (-fno-threadsafe-statics), so nothing else is needed.  The user-space unit
 * tests use the C++ library's own operators instead.
 */
#include "kernel_api.h"
#include "types.h"

#ifdef NETBLK_KERNEL

void *operator new(size_t size) { return netblk_kernel_alloc(size); }
void *operator new[](size_t size) { return netblk_kernel_alloc(size); }
void operator delete(void *p) noexcept { netblk_kernel_free(p); }
void operator delete[](void *p) noexcept { netblk_kernel_free(p); }
void operator delete(void *p, size_t) noexcept { netblk_kernel_free(p); }
void operator delete[](void *p, size_t) noexcept { netblk_kernel_free(p); }

#endif
