/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels netblk builds for, in one place.  Each
 * helper says which kernel it is for; kmod/Kbuild tests the headers for what
 * a version number cannot tell (stable kernels backport renames).
 */
#ifndef NETBLK_COMPAT_H
#define NETBLK_COMPAT_H

#include <linux/netdevice.h>
#include <linux/version.h>
#include <net/genetlink.h>

/*
 * A device that cannot change namespaces: dev->netns_immutable from 6.15
 * (and 6.12.y stable), dev->netns_local in 6.12, NETIF_F_NETNS_LOCAL before.
 */
static inline void netblk_set_netns_immutable(struct net_device *dev)
{
#if defined(NETBLK_HAVE_NETNS_IMMUTABLE)
	dev->netns_immutable = true;
#elif defined(NETBLK_HAVE_NETNS_LOCAL)
	dev->netns_local = true;
#else
	dev->features |= NETIF_F_NETNS_LOCAL;
#endif
}

/* Joining a multicast group needs CAP_NET_ADMIN: a group flag from 6.7 on. */
#ifdef GENL_MCAST_CAP_NET_ADMIN
#define NETBLK_MCGRP_FLAGS	GENL_MCAST_CAP_NET_ADMIN
#else
#define NETBLK_MCGRP_FLAGS	0
#endif

#endif
