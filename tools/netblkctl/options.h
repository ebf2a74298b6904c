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
