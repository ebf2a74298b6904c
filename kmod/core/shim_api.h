/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few plain C functions the C++ core needs from the kernel, implemented
 * by the shim (kmod/shim/core_glue.c) in the module and by a fake in the unit
 * tests (tests/unit/fake_shim.cpp).
 */
#ifndef NETBLK_SHIM_API_H
#define NETBLK_SHIM_API_H

#ifdef __cplusplus
#include <stddef.h>
#include <stdint.h>
extern "C" {
#else
#include <linux/types.h>
#endif

/* Zeroed memory, or NULL; may sleep.  Never called on the data path. */
void *netblk_shim_alloc(size_t size);
void netblk_shim_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
