// The netblk generic netlink family from user space: START, STOP, LIST.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "format.h"
#include "genl.h"

// A knob's value as the command line gave it (netblk_options.h's lists):
// a flag is said or not, a number given or not.
#define NETBLK_CTL_ARG_TYPE_flag bool
#define NETBLK_CTL_ARG_TYPE_u16 std::optional<uint16_t>
#define NETBLK_CTL_ARG_TYPE_u32 std::optional<uint32_t>
#define NETBLK_CTL_ARG_FIELD(NAME, name, nr, type, ...) NETBLK_CTL_ARG_TYPE_##type name{};

struct netblk_start_args {
	std::string device;
	uint16_t port = 0;
	std::optional<std::string> ifname;
	std::vector<netblk_prefix> allow;	// empty: any source
	std::optional<std::array<uint8_t, NETBLK_KEY_BYTES>> key;	// read from key=FILE
	std::optional<uint32_t> auth;		// enum netblk_auth
	NETBLK_START_OPTIONS(NETBLK_CTL_ARG_FIELD)	// read_only, mtu, ..., nic_loss, ...
};

struct netblk_attach_args {
	uint32_t addr = 0;		// network order
	uint16_t port = 0;
	bool read_only = false;
	std::optional<std::string> ifname;
	NETBLK_ATTACH_OPTIONS(NETBLK_CTL_ARG_FIELD)	// queue_depth, timeout_ms, ...
	std::optional<std::array<uint8_t, NETBLK_KEY_BYTES>> key;
	std::optional<uint32_t> auth;		// enum netblk_auth
};

// What a STOP did: instances released, and those that no longer serve but
// still wait for their disk (LIST shows them "stopping").
struct netblk_stop_result {
	uint32_t stopped = 0;
	uint32_t stopping = 0;
};

// Fills `inst` from a START / LIST / EVENT message; attributes it does not
// know are skipped, known ones of the wrong size are an EBADMSG.
nl_status netblk_parse_instance(const nlmsghdr *nlh, netblk_instance &inst);

// Fills `att` from an ATTACH / ATTACHED message, the same way.
nl_status netblk_parse_attached(const nlmsghdr *nlh, netblk_attached &att);

// Fills `ev` from a NETBLK_CMD_EVENT message, the same way.
nl_status netblk_parse_event(const nlmsghdr *nlh, netblk_event_info &ev);

// Called for each event; a failing status is returned by read_events().
using netblk_event_fn = std::function<nl_status(const netblk_event_info &ev)>;

class netblk_client {
public:
	// Opens the socket and resolves the family and its "events" group;
	// ENOENT when the family is not registered (module not loaded).
	nl_status connect();

	// NETBLK_CMD_START; `described` says whether the kernel replied with
	// the instance (it should) before its ack.
	nl_status start(const netblk_start_args &args, netblk_instance &inst, bool &described);

	// NETBLK_CMD_STOP of one port, or of every instance when port is empty.
	nl_status stop(std::optional<uint16_t> port, netblk_stop_result &result);

	// NETBLK_CMD_LIST dump (retried if the kernel says it was interrupted).
	nl_status list(std::vector<netblk_instance> &insts);

	// NETBLK_CMD_ATTACH: /dev/netblkN of a remote instance.
	nl_status attach(const netblk_attach_args &args, netblk_attached &att, bool &described);

	// NETBLK_CMD_DETACH of one device (netblkN or /dev/netblkN), or of all
	// when disk is empty; `detached` is how many went.
	nl_status detach(std::optional<std::string> disk, bool force, uint32_t &detached);

	// NETBLK_CMD_XDP_READY: netblk's XDP program runs on NIC `ifindex`
	// again, added after the reopen LIST numbered `reopen`.
	nl_status xdp_ready(uint32_t ifindex, uint32_t reopen);

	// NETBLK_CMD_ATTACHED dump.
	nl_status attached(std::vector<netblk_attached> &atts);

	// The "events" multicast group.
	std::optional<uint32_t> events_group() const { return events_group_; }

	// Joins the "events" group: this socket then receives NETBLK_CMD_EVENT
	// messages, to be read with read_events() when fd() is readable.  Use
	// a client for nothing else once joined (its requests' replies would
	// queue behind events).  ENOENT when the module has no such group.
	nl_status join_events();

	// The socket, for poll().
	int fd() const { return sock_.fd(); }

	// Reads the events queued now, without waiting, and hands each to
	// on_event; ENOBUFS when the socket overflowed and events were lost
	// (the ones still queued are read on the next call).
	nl_status read_events(const netblk_event_fn &on_event);

private:
	nlmsghdr *begin(uint8_t cmd, uint16_t flags);
	bool is_reply(const nlmsghdr *nlh, uint8_t cmd) const;
	nl_status list_once(std::vector<netblk_instance> &insts);

	genl_socket sock_;
	genl_family family_;
	std::optional<uint32_t> events_group_;
};
