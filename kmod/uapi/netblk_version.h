/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * The one place netblk's version is written: the module (MODULE_VERSION,
 * /sys/module/netblk/version), netblkctl --version, and -- checked by
 * tests/pkg -- the Python client's __version__ and debian/changelog.
 * The wire protocol has its own version (docs/protocol.md); this one names
 * a release of the whole tree.
 */
#ifndef _UAPI_NETBLK_VERSION_H
#define _UAPI_NETBLK_VERSION_H

#define NETBLK_VERSION "0.2.0"

#endif
