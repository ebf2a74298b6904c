// A small generic netlink client on libmnl: resolves a family, sends one
// request and walks the replies up to the ack (doit) or NLMSG_DONE (dump),
// turning an error ack into an errno plus its extended-ack message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct mnl_socket;
struct nlmsghdr;

// 0, or a positive errno with the kernel's extended-ack message (may be empty).
struct nl_status {
	int err = 0;
	std::string msg;

	bool ok() const { return err == 0; }
	// The extended-ack message, or strerror(err) when there is none.
	std::string text() const;
};

nl_status nl_error(int err, std::string msg = {});

struct genl_mcast_group {
	std::string name;
	uint32_t id = 0;
};

struct genl_family {
	uint16_t id = 0;
	uint32_t version = 0;
	std::vector<genl_mcast_group> mcast_groups;
};

// The id of a family's multicast group, if the family has one by that name.
std::optional<uint32_t> genl_mcast_group_id(const genl_family &family,
					    std::string_view name);

// Called for every reply message of a request other than the final ack or
// NLMSG_DONE; a failing status ends the request with that status.
using genl_reply_fn = std::function<nl_status(const nlmsghdr *nlh)>;

class genl_socket {
public:
	genl_socket() = default;
	genl_socket(const genl_socket &) = delete;
	genl_socket &operator=(const genl_socket &) = delete;
	~genl_socket();

	// Opens and binds a NETLINK_GENERIC socket with extended acks on.
	nl_status open();

	// CTRL_CMD_GETFAMILY; ENOENT when no such family is registered.
	nl_status resolve_family(std::string_view name, genl_family &family);

	// Starts a request in this socket's buffer: netlink header (type, flags,
	// a fresh sequence number) and genetlink header (cmd, version).  Add
	// attributes with mnl_attr_put*() and pass it to transact().
	nlmsghdr *begin(uint16_t type, uint16_t flags, uint8_t cmd, uint8_t version);
	// The size of the request buffer, for mnl_attr_put_*_check().
	size_t req_capacity() const;

	// Sends the request and feeds each reply to on_reply until the ack
	// (a request with NLM_F_ACK) or NLMSG_DONE (a dump).
	nl_status transact(nlmsghdr *req, const genl_reply_fn &on_reply);

	// Whether a reply of the last transact() carried NLM_F_DUMP_INTR (the
	// dumped state changed meanwhile; the dump is worth repeating).
	bool dump_interrupted() const { return dump_intr_; }

	// Subscribes to a multicast group.
	nl_status join_group(uint32_t group);

	// The socket's file descriptor, for poll(); -1 before open().
	int fd() const;

	// Reads what is queued without waiting (multicast messages) and feeds
	// every message that is not a netlink control message (error, done,
	// ...) to on_msg, until nothing is left; a failing on_msg stops it.
	// ENOBUFS when the socket's receive queue overflowed (messages lost).
	nl_status recv_pending(const genl_reply_fn &on_msg);

private:
	nl_status recv_replies(const nlmsghdr *req, const genl_reply_fn &on_reply);
	nl_status handle(const nlmsghdr *nlh, const genl_reply_fn &on_reply, bool &done);

	mnl_socket *nl_ = nullptr;
	uint32_t portid_ = 0;
	uint32_t seq_ = 0;
	bool dump_intr_ = false;
	std::vector<char> req_buf_;
	std::vector<char> recv_buf_;
};
