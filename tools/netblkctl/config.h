// /etc/netblk/netblk.conf: what `netblkctl restore` brings up and `netblkctl
// save` writes.  One instance or attachment a line, in the words of the
// command line: `start <blockdev> <port> [option...]` or `attach <addr>
// <port> [option...]`; '#' starts a comment; words are separated by blanks
// and cannot contain any (there is no quoting).  The options are parsed by
// netblkctl's own parsers, so the file says exactly what the commands do.
// No netlink and no files here (tests/netblkctl/test_config.cpp tests it on its own).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "format.h"

#define NETBLK_CONFIG_FILE "/etc/netblk/netblk.conf"

struct config_line {
	unsigned lineno = 0;
	std::string command;		// "start" or "attach"
	std::vector<std::string> args;	// after the command
	std::string text;		// the line as written, comment removed
};

// The file's lines into `out`; "" when fine, else "FILE:N: what is wrong".
std::string parse_config(std::string_view text, const std::string &file,
			 std::vector<config_line> &out);

// A running instance as a start line: `device` the path to name it by (a
// stable /dev/disk/ one where there is), `nic_mtu` the NIC's MTU now (mtu=
// is written only when the instance's differs).  Its worker's CPU is not
// written: by default instances take theirs from what the NIC can do.  The
// options are written from start's table (format_start_options, options.h).
std::string format_start_line(const netblk_instance &inst, const std::string &device,
			      uint32_t nic_mtu);

// An attached device as an attach line (format_attach_options).
std::string format_attach_line(const netblk_attached &att);

// The whole file: a header saying what it is, then the lines.
std::string format_config(const std::vector<std::string> &lines);
