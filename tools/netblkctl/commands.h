// netblkctl's commands, one file each or a family a file, and what one
// command uses of another's.  Each cmd_* takes the words after the command
// and returns the exit status (cli.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "netblk.h"

using command_args = std::vector<std::string_view>;

// cmd_start.cpp: start, and netblk's XDP program on the NICs.
int cmd_start(const command_args &argv);

// netblk's XDP program off every NIC no instance serves or waits on any
// more (xdp.h): after a stop, and after a start that failed.  Nothing is
// removed when the instances cannot be listed.
void release_unused_programs(netblk_client &client);

// The device under a VLAN device (dev=eth0.5 serves VLAN 5 of eth0): where
// the XDP program goes.  `ifname` itself when it is no VLAN device.
std::string vlan_real_device(const std::string &ifname);

// The NICs whose driver dropped netblk's XDP program when they reopened
// (vmxnet3: the kernel still shows it attached, the NIC runs nothing): each
// gets a new program, every instance on it is steered again, and the module
// is told, which has them serve again.  Says what it did; a NIC that could
// not be mended is tried again on the next call.
void readd_dropped_programs(netblk_client &client, const std::vector<netblk_instance> &insts);

// cmd_stop.cpp
int cmd_stop(const command_args &argv);

// cmd_list.cpp: list, stats and exporter, what the module's dumps say.
int cmd_list(const command_args &argv);
int cmd_stats(const command_args &argv);
int cmd_exporter(const command_args &argv);

// Every instance, as LIST dumps them; 0, or the exit status of the failure
// (already reported).
int dump_instances(std::vector<netblk_instance> &insts);

// The block-device client's devices; 0, or the exit status of the failure.
int dump_attached(std::vector<netblk_attached> &atts);

// cmd_attach.cpp: the block-device client's devices.
int cmd_attach(const command_args &argv);
int cmd_detach(const command_args &argv);

// cmd_config.cpp: save and restore (config.h).
int cmd_save(const command_args &argv);
int cmd_restore(const command_args &argv);

// cmd_watch.cpp: the commands that run until SIGINT or SIGTERM.
int cmd_watch(const command_args &argv);
int cmd_supervise(const command_args &argv);

// cmd_genkey.cpp
int cmd_genkey(const command_args &argv);
