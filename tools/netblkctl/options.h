// The words after start's and attach's <port>: ro, dev=IFACE, mtu=N ...,
// into the request's arguments.  One table of option descriptions a
// command (options.cpp) parses them, checks them and writes their lines of
// the usage, so that an option is one line of its table.  Used by the
// commands and by save and restore, which read the configuration file's
// lines with them (config.h): the file says exactly what the command line
// does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "netblk.h"

// start's words after the command (<blockdev> <port> [option...]
// [--exist-ok]); "" when fine, else what is wrong.
std::string parse_start_argv(const std::vector<std::string_view> &argv, netblk_start_args &args,
			     bool &exist_ok);

// attach's words after the command (<addr> <port> [option...]); "" when
// fine, else what is wrong.
std::string parse_attach_argv(const std::vector<std::string_view> &argv, netblk_attach_args &args);

// A command's options in its usage: the synopsis after "<port>" (" [ro]
// [dev=IFACE] ...", its lines broken and indented for the usage's first
// column), and the lines that say what each does (each ending in '\n').
struct option_usage {
	std::string synopsis;
	std::string help;
};
option_usage start_option_usage();
option_usage attach_option_usage();

// The words the bash completion offers after <port>, separated by spaces:
// each option's ("ro", "dev=", "mtu=" ...) in the order of the usage, and
// start's --exist-ok.
std::string start_option_words();
std::string attach_option_words();

// save: a running instance's options as start's words (" ro dev=eth0
// vlan=5 ..."), those it was started with or that make it what it is; the
// defaults are left out, mtu= when it is `nic_mtu`, the NIC's.  Its
// worker's CPU is not written: by default instances take theirs from what
// the NIC can do.  A key never is (the kernel does not give it back).
std::string format_start_options(const netblk_instance &inst, uint32_t nic_mtu);

// save: an attached device's options as attach's words.
std::string format_attach_options(const netblk_attached &att);

// --exist-ok and restore: the first of the numbers, choices and lists
// (mtu=, vlan=, allow=, nic-loss= ...) `want` names that the running
// instance `have` has otherwise, as "mtu 1500, not 9000"; "" when none.
std::string start_options_differ(const netblk_start_args &want, const netblk_instance &have);
