// An instance's settings against what a command asks of it: whether a
// running instance is the one `start ... --exist-ok` describes.  No netlink
// here (tests/netblkctl/test_settings.cpp tests it on its own).
#pragma once

#include <string>

#include "format.h"
#include "netblk.h"

// "" when the running instance `have` has every setting `want` names, else
// the first that differs ("mtu 1500, not 9000"). Settings `want` leaves out
// (mtu=, cpu=, poll=, sessions=, vlan=, allow=, nic-loss=: those of start's
// option table with a running value, start_options_differ) are not compared; read-only
// and whether the instance takes a key always are (a key's bytes cannot
// be: the kernel never gives them back).  The NIC compared is the XDP one:
// `want_nic` is dev=IFACE or the default route's, less any VLAN device.
std::string start_differs(const netblk_start_args &want, const std::string &want_nic,
			  const netblk_instance &have);

// The two paths name one block device (the same path, or block special
// files of one device number).
bool same_block_device(const std::string &a, const std::string &b);
