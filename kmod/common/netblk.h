/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the whole module shares, the server (target/) and the block-device
 * client (host/) alike: its one lock and whether it is going away.
 */
#ifndef NETBLK_COMMON_H
#define NETBLK_COMMON_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mutex.h>

#include "compat.h"

/*
 * Serialises the control plane: start, stop, list, attach, detach and
 * unload.  No data path takes it.
 */
extern struct mutex netblk_lock;

/* rmmod has begun: nothing new starts or attaches.  Under netblk_lock. */
extern bool netblk_unloading;

#endif
