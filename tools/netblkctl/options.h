// The words after start's and attach's <port>: ro, dev=IFACE, mtu=N ...,
// into the request's arguments.  Used by the commands and by restore and
// save, which read the configuration file's lines with them (config.h), so
// the file says exactly what the command line does.
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
