// The netblk generic netlink family from user space: START, STOP, LIST.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format.h"
#include "genl.h"

struct netblk_start_args {
	std::string device;
	uint16_t port = 0;
	bool read_only = false;
	std::optional<std::string> ifname;
	std::optional<uint32_t> mtu;
	std::optional<uint32_t> cpu;
	std::optional<uint32_t> poll_us;
	// A BPF link of the NIC's XDP program for the module to hold (xdp.h).
	std::optional<int> xdp_link_fd;
};

// Fills `inst` from a START / LIST / EVENT message; attributes it does not
// know are skipped, known ones of the wrong size are an EBADMSG.
nl_status netblk_parse_instance(const nlmsghdr *nlh, netblk_instance &inst);

class netblk_client {
public:
	// Opens the socket and resolves the family and its "events" group;
	// ENOENT when the family is not registered (module not loaded).
	nl_status connect();

	// NETBLK_CMD_START; `described` says whether the kernel replied with
	// the instance (it should) before its ack.
	nl_status start(const netblk_start_args &args, netblk_instance &inst, bool &described);

	// NETBLK_CMD_STOP of one port, or of every instance when port is empty.
	nl_status stop(std::optional<uint16_t> port, uint32_t &stopped);

	// NETBLK_CMD_LIST dump (retried if the kernel says it was interrupted).
	nl_status list(std::vector<netblk_instance> &insts);

	// The "events" multicast group, for a future `watch`.
	std::optional<uint32_t> events_group() const { return events_group_; }

private:
	nlmsghdr *begin(uint8_t cmd, uint16_t flags);
	bool is_reply(const nlmsghdr *nlh, uint8_t cmd) const;
	nl_status list_once(std::vector<netblk_instance> &insts);

	genl_socket sock_;
	genl_family family_;
	std::optional<uint32_t> events_group_;
};
