// What netblkctl prints: an instance as the kernel describes it, and the
// helpers that turn it into text or JSON.  No netlink here, so these can be
// unit-tested on their own (see tests/format_check.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "netblk_genl.h"

// One instance: the attributes of a NETBLK_CMD_START reply or a LIST entry.
// Attributes the kernel did not send stay zero / empty.
struct netblk_instance {
	std::string device;
	uint16_t port = 0;
	bool read_only = false;
	std::string ifname;
	uint32_t ifindex = 0;
	uint32_t handoff_ifindex = 0;	// the instance's netblk<port> device
	uint32_t addr = 0;		// IPv4, network order
	uint32_t mtu = 0;
	uint32_t cpu = 0;
	uint32_t poll_us = 0;
	uint64_t size = 0;		// bytes
	uint32_t sector_size = 0;
	uint32_t max_io = 0;		// data bytes a datagram carries
	uint32_t slots = 0;
	uint64_t uptime_ms = 0;
	std::array<uint64_t, NETBLK_S_MAX + 1> stats{};	// by enum netblk_stat_attr

	uint64_t stat(netblk_stat_attr s) const { return stats[s]; }
};

// Bytes in the largest of KiB/MiB/GiB/TiB that gives at least 1, with one
// decimal only when not whole: "512 KiB", "1.5 GiB".  Below 1 KiB: "512 B".
std::string format_size(uint64_t bytes);

// Dotted quad of an address in network order: "10.0.2.15".
std::string format_ipv4(uint32_t addr_be);

// A JSON string literal, quotes included; bytes that are not UTF-8 become
// U+FFFD.
std::string json_string(std::string_view s);

// The line `netblkctl start` prints (no newline).
std::string format_started(const netblk_instance &inst);

// The lines `netblkctl list` prints for one instance (newline-terminated).
std::string format_instance_text(const netblk_instance &inst);

// `netblkctl list --json`: an array of objects (newline-terminated), one per
// instance.  Field names (stable; keep README.md in step):
//   port, device, read_only (bool), ifname, ifindex, handoff_ifindex,
//   addr ("a.b.c.d"), mtu, cpu, poll_us, size_bytes, sector_size, max_io,
//   slots, uptime_ms,
//   stats: { requests, bad, refused, busy, inflight_queued, inflight_disk,
//            inflight_done, reads, read_bytes, writes, write_bytes, flushes,
//            fua_writes, io_errors, disk_busy, replies_dropped,
//            worker_sleeps, frames_rx, frames_tx, bytes_zerocopy,
//            bytes_copied }
std::string format_instances_json(const std::vector<netblk_instance> &insts);
