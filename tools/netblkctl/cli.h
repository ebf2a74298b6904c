// What every netblkctl command shares: its exit statuses, how it reports
// bad usage and the kernel's refusals, connecting to the module, and the
// small parsers of numbers the commands take.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netblk.h"

// Exit status: 0 done, 1 the kernel refused (or is unreachable), 2 bad usage.
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

// "netblkctl: MSG" and the hint to --help on stderr; exit_usage.
int usage_error(const std::string &msg);

// The kernel's refusal on stderr (with the hint to run as root for an
// EPERM the kernel gave no words for); exit_failed.
int failed(const nl_status &st);

// Whether netblk.ko is loaded; looked at before the family's lookup, which
// would have the kernel load it.
bool module_loaded();

// Flushes stdout; a failed write (full disk, closed pipe) is a failure.
int finish();

// A whole decimal number that fits 32 bits; nullopt for anything else.
std::optional<uint32_t> parse_u32(std::string_view s);

// A UDP port, 1..65535.
std::optional<uint16_t> parse_port(std::string_view s);

// Connects; says so when the module is not loaded (the exit status in `rc`).
bool connect(netblk_client &client, int &rc);

// The whole of `path`; false with errno when it cannot be read.
bool read_text_file(const std::string &path, std::string &out);
