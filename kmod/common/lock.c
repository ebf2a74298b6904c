// SPDX-License-Identifier: GPL-2.0
/* The module's control-plane lock and unload flag (netblk.h). */
#include "netblk.h"

DEFINE_MUTEX(netblk_lock);
bool netblk_unloading;
