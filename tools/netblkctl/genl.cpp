// Generic netlink client: see genl.h.
#include "genl.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <libmnl/libmnl.h>
#include <sys/socket.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

namespace {

constexpr size_t req_buf_size = 8192;
// The kernel sizes a dump's skbs from the largest recv() the socket has
// made (netlink_recvmsg keeps max_recvmsg_len, capped at 32 KiB less the
// skb overhead), and the first skb of a dump is built at send time: so
// every recv here is of the full 32 KiB, starting with the family lookup
// that comes before any dump.  A LIST message with a big histogram needs
// more than the 8 KiB of MNL_SOCKET_BUFFER_SIZE; no dump skb is over 32 KiB,
// so no reply is truncated (mnl reports ENOSPC if one were).
constexpr size_t recv_buf_size = 32 * 1024;

std::string attr_string(const nlattr *a)
{
	const char *s = static_cast<const char *>(mnl_attr_get_payload(a));
	return std::string(s, strnlen(s, mnl_attr_get_payload_len(a)));
}

int extack_attr_cb(const nlattr *a, void *data)
{
	if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG &&
	    mnl_attr_validate(a, MNL_TYPE_STRING) >= 0)
		*static_cast<std::string *>(data) = attr_string(a);
	return MNL_CB_OK;
}

// NLMSGERR_ATTR_MSG from the TLVs that start `offset` bytes into the payload.
std::string extack_message(const nlmsghdr *nlh, size_t offset)
{
	std::string msg;
	if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) &&
	    offset <= mnl_nlmsg_get_payload_len(nlh))
		mnl_attr_parse(nlh, offset, extack_attr_cb, &msg);
	return msg;
}

// NLMSG_ERROR: struct nlmsgerr, the request (only its header when capped),
// then the extended-ack TLVs.
nl_status error_ack(const nlmsghdr *nlh)
{
	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr))
		return nl_error(EBADMSG, "truncated netlink error message");
	auto *e = static_cast<const nlmsgerr *>(mnl_nlmsg_get_payload(nlh));
	if (e->error == 0)
		return {};
	size_t offset = sizeof(*e);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len > sizeof(nlmsghdr))
		offset += e->msg.nlmsg_len - sizeof(nlmsghdr);
	return nl_error(std::abs(e->error), extack_message(nlh, offset));
}

// NLMSG_DONE of a dump: an int (0 or -errno), then extended-ack TLVs.
nl_status dump_done(const nlmsghdr *nlh)
{
	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(int))
		return {};
	int err;
	memcpy(&err, mnl_nlmsg_get_payload(nlh), sizeof(err));
	if (err == 0)
		return {};
	return nl_error(std::abs(err), extack_message(nlh, sizeof(int)));
}

int mcast_group_cb(const nlattr *a, void *data)
{
	auto *g = static_cast<genl_mcast_group *>(data);
	switch (mnl_attr_get_type(a)) {
	case CTRL_ATTR_MCAST_GRP_NAME:
		if (mnl_attr_validate(a, MNL_TYPE_STRING) < 0)
			return MNL_CB_ERROR;
		g->name = attr_string(a);
		break;
	case CTRL_ATTR_MCAST_GRP_ID:
		if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
			return MNL_CB_ERROR;
		g->id = mnl_attr_get_u32(a);
		break;
	}
	return MNL_CB_OK;
}

// One entry of CTRL_ATTR_MCAST_GROUPS (itself a nest).
int mcast_groups_cb(const nlattr *grp, void *data)
{
	genl_mcast_group g;
	if (mnl_attr_validate(grp, MNL_TYPE_NESTED) < 0 ||
	    mnl_attr_parse_nested(grp, mcast_group_cb, &g) < 0)
		return MNL_CB_ERROR;
	static_cast<genl_family *>(data)->mcast_groups.push_back(std::move(g));
	return MNL_CB_OK;
}

int parse_mcast_groups(const nlattr *groups, genl_family &family)
{
	if (mnl_attr_validate(groups, MNL_TYPE_NESTED) < 0)
		return MNL_CB_ERROR;
	return mnl_attr_parse_nested(groups, mcast_groups_cb, &family);
}

int family_attr_cb(const nlattr *a, void *data)
{
	auto *family = static_cast<genl_family *>(data);
	switch (mnl_attr_get_type(a)) {
	case CTRL_ATTR_FAMILY_ID:
		if (mnl_attr_validate(a, MNL_TYPE_U16) < 0)
			return MNL_CB_ERROR;
		family->id = mnl_attr_get_u16(a);
		break;
	case CTRL_ATTR_VERSION:
		if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
			return MNL_CB_ERROR;
		family->version = mnl_attr_get_u32(a);
		break;
	case CTRL_ATTR_MCAST_GROUPS:
		return parse_mcast_groups(a, *family);
	}
	return MNL_CB_OK;
}

} // namespace

std::string nl_status::text() const
{
	return msg.empty() ? std::string(strerror(err)) : msg;
}

nl_status nl_error(int err, std::string msg)
{
	return nl_status{err, std::move(msg)};
}

std::optional<uint32_t> genl_mcast_group_id(const genl_family &family,
					    std::string_view name)
{
	for (const auto &g : family.mcast_groups)
		if (g.name == name)
			return g.id;
	return std::nullopt;
}

genl_socket::~genl_socket()
{
	if (nl_)
		mnl_socket_close(nl_);
}

nl_status genl_socket::open()
{
	nl_ = mnl_socket_open(NETLINK_GENERIC);
	if (!nl_)
		return nl_error(errno);
	// Best effort: without them errors still come, only without messages.
	int one = 1;
	mnl_socket_setsockopt(nl_, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(nl_, NETLINK_CAP_ACK, &one, sizeof(one));
	if (mnl_socket_bind(nl_, 0, MNL_SOCKET_AUTOPID) < 0)
		return nl_error(errno);
	portid_ = mnl_socket_get_portid(nl_);
	seq_ = static_cast<uint32_t>(time(nullptr));
	recv_buf_.resize(recv_buf_size);
	return {};
}

nlmsghdr *genl_socket::begin(uint16_t type, uint16_t flags, uint8_t cmd, uint8_t version)
{
	req_buf_.assign(req_buf_size, 0);
	nlmsghdr *nlh = mnl_nlmsg_put_header(req_buf_.data());
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	nlh->nlmsg_seq = ++seq_;
	auto *genl = static_cast<genlmsghdr *>(
		mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
	genl->cmd = cmd;
	genl->version = version;
	return nlh;
}

size_t genl_socket::req_capacity() const
{
	return req_buf_.size();
}

nl_status genl_socket::resolve_family(std::string_view name, genl_family &family)
{
	if (name.size() >= GENL_NAMSIZ)
		return nl_error(ENAMETOOLONG);
	nlmsghdr *req = begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK,
			      CTRL_CMD_GETFAMILY, 1);
	mnl_attr_put_strz(req, CTRL_ATTR_FAMILY_NAME, std::string(name).c_str());
	family = {};
	nl_status st = transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (nlh->nlmsg_type != GENL_ID_CTRL)
			return {};
		if (mnl_attr_parse(nlh, sizeof(genlmsghdr), family_attr_cb, &family) < 0)
			return nl_error(EBADMSG, "malformed reply from nlctrl");
		return {};
	});
	if (st.ok() && family.id == 0)
		return nl_error(ENOENT);
	return st;
}

nl_status genl_socket::transact(nlmsghdr *req, const genl_reply_fn &on_reply)
{
	if (mnl_socket_sendto(nl_, req, req->nlmsg_len) < 0)
		return nl_error(errno);
	return recv_replies(req, on_reply);
}

// Reads until the request is over, even after a reply failed to parse, so
// that the socket is left clean; returns the first failure.
nl_status genl_socket::recv_replies(const nlmsghdr *req, const genl_reply_fn &on_reply)
{
	nl_status result;
	bool done = false;
	dump_intr_ = false;
	while (!done) {
		int n = static_cast<int>(mnl_socket_recvfrom(nl_, recv_buf_.data(),
							     recv_buf_.size()));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return nl_error(errno);
		}
		auto *nlh = reinterpret_cast<const nlmsghdr *>(recv_buf_.data());
		for (; !done && mnl_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n)) {
			if (!mnl_nlmsg_seq_ok(nlh, req->nlmsg_seq) ||
			    !mnl_nlmsg_portid_ok(nlh, portid_))
				continue;
			if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
				dump_intr_ = true;
			nl_status st = handle(nlh, on_reply, done);
			if (result.ok())
				result = std::move(st);
		}
	}
	return result;
}

nl_status genl_socket::handle(const nlmsghdr *nlh, const genl_reply_fn &on_reply, bool &done)
{
	switch (nlh->nlmsg_type) {
	case NLMSG_ERROR:
		done = true;
		return error_ack(nlh);
	case NLMSG_DONE:
		done = true;
		return dump_done(nlh);
	case NLMSG_OVERRUN:
		done = true;
		return nl_error(ENOBUFS);
	}
	if (nlh->nlmsg_type < NLMSG_MIN_TYPE)
		return {};
	return on_reply(nlh);
}

nl_status genl_socket::join_group(uint32_t group)
{
	if (mnl_socket_setsockopt(nl_, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0)
		return nl_error(errno);
	return {};
}

int genl_socket::fd() const
{
	return nl_ ? mnl_socket_get_fd(nl_) : -1;
}

nl_status genl_socket::recv_pending(const genl_reply_fn &on_msg)
{
	for (;;) {
		iovec iov{recv_buf_.data(), recv_buf_.size()};
		sockaddr_nl addr{};
		msghdr msg{};
		msg.msg_name = &addr;
		msg.msg_namelen = sizeof(addr);
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		ssize_t n = recvmsg(fd(), &msg, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return {};
			return nl_error(errno);
		}
		if (msg.msg_flags & MSG_TRUNC)
			return nl_error(ENOSPC, "a netlink message larger than the receive buffer");
		if (addr.nl_pid != 0)
			continue;	// only the kernel speaks here
		int len = static_cast<int>(n);
		auto *nlh = reinterpret_cast<const nlmsghdr *>(recv_buf_.data());
		for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			if (nlh->nlmsg_type < NLMSG_MIN_TYPE)
				continue;
			if (nl_status st = on_msg(nlh); !st.ok())
				return st;
		}
	}
}
