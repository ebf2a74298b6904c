// SPDX-License-Identifier: GPL-2.0
/* What compat.h's helpers for older kernels need to keep. */
#include "compat.h"

#ifdef NETBLK_EXTACK_RING
/* snprintf writes at most NETBLK_EXTACK_MSG_LEN bytes: the last byte stays NUL */
static char netblk_extack_ring[NETBLK_EXTACK_RING][NETBLK_EXTACK_MSG_LEN + 1];
static atomic_t netblk_extack_next = ATOMIC_INIT(0);

char *netblk_extack_buffer(void)
{
	unsigned int i = (unsigned int)atomic_inc_return(&netblk_extack_next);

	return netblk_extack_ring[i % NETBLK_EXTACK_RING];
}
#endif
