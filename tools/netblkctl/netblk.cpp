// The netblk family: requests and the parsing of replies.  See netblk.h.
#include "netblk.h"

#include <cerrno>
#include <cstring>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

namespace {

struct parse_ctx {
	netblk_instance *inst;
	netblk_event_info *event = nullptr;	// an EVENT message's own attributes
	int bad_attr = -1;	// type of the first malformed attribute
	const char *bad_where = "";	// "stat ", "latency " or ""
};

int fail(parse_ctx *ctx, int type, const char *where = "")
{
	ctx->bad_attr = type;
	ctx->bad_where = where;
	return MNL_CB_ERROR;
}

template <typename T>
bool get_uint(const nlattr *a, T &v)
{
	constexpr mnl_attr_data_type kind = sizeof(T) == 2 ? MNL_TYPE_U16
					    : sizeof(T) == 4 ? MNL_TYPE_U32
							     : MNL_TYPE_U64;
	static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
	if (mnl_attr_validate(a, kind) < 0)
		return false;
	if constexpr (sizeof(T) == 2)
		v = mnl_attr_get_u16(a);
	else if constexpr (sizeof(T) == 4)
		v = mnl_attr_get_u32(a);
	else
		v = mnl_attr_get_u64(a);
	return true;
}

// The kernel's strings are NUL-terminated; accept one that is not, too.
bool get_string(const nlattr *a, std::string &s)
{
	if (mnl_attr_validate(a, MNL_TYPE_STRING) < 0)
		return false;
	const char *p = static_cast<const char *>(mnl_attr_get_payload(a));
	s.assign(p, strnlen(p, mnl_attr_get_payload_len(a)));
	return true;
}

bool get_flag(const nlattr *a, bool &b)
{
	if (mnl_attr_validate(a, MNL_TYPE_FLAG) < 0)
		return false;
	b = true;
	return true;
}

// A knob (netblk_options.h) by the type of its field: a flag or a number.
bool get_knob(const nlattr *a, bool &b)
{
	return get_flag(a, b);
}

bool get_knob(const nlattr *a, uint16_t &v)
{
	return get_uint(a, v);
}

bool get_knob(const nlattr *a, uint32_t &v)
{
	return get_uint(a, v);
}

#define GET_KNOB_OF_I(NAME, name, ...) case NETBLK_A_##NAME: return get_knob(a, i.name);
#define GET_KNOB_OF_T(NAME, name, ...) case NETBLK_A_##NAME: return get_knob(a, t.name);

// A knob the command line gave, to send; one not given is left out.
void put_knob(nlmsghdr *req, uint16_t attr, bool set)
{
	if (set)
		mnl_attr_put(req, attr, 0, nullptr);
}

void put_knob(nlmsghdr *req, uint16_t attr, const std::optional<uint16_t> &v)
{
	if (v)
		mnl_attr_put_u16(req, attr, *v);
}

void put_knob(nlmsghdr *req, uint16_t attr, const std::optional<uint32_t> &v)
{
	if (v)
		mnl_attr_put_u32(req, attr, *v);
}

#define PUT_KNOB(NAME, name, ...) put_knob(req, NETBLK_A_##NAME, args.name);

int stat_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_S_UNSPEC || type == NETBLK_S_PAD || type > NETBLK_S_MAX)
		return MNL_CB_OK;
	if (!get_uint(a, ctx->inst->stats[type]))
		return fail(ctx, type, "stat ");
	return MNL_CB_OK;
}

int queue_stat_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_S_UNSPEC || type == NETBLK_S_PAD || type > NETBLK_S_MAX)
		return MNL_CB_OK;
	if (!get_uint(a, ctx->inst->queue_list.back().stats[type]))
		return fail(ctx, type, "queue stat ");
	return MNL_CB_OK;
}

int queue_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_Q_CPU)
		return get_uint(a, ctx->inst->queue_list.back().cpu) ? MNL_CB_OK
								     : fail(ctx, type, "queue ");
	if (type == NETBLK_Q_STATS) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return fail(ctx, type, "queue ");
		return mnl_attr_parse_nested(a, queue_stat_cb, ctx);
	}
	return MNL_CB_OK;	// unknown to this netblkctl: ignored
}

// NETBLK_A_QUEUE_LIST: a NETBLK_A_QUEUE nest a queue, in order.
int queue_list_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	if (mnl_attr_get_type(a) != NETBLK_A_QUEUE)
		return MNL_CB_OK;
	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return fail(ctx, NETBLK_A_QUEUE);
	ctx->inst->queue_list.emplace_back();
	return mnl_attr_parse_nested(a, queue_attr_cb, ctx);
}

// NETBLK_L_BUCKETS: an array of struct netblk_latency_bucket, which the
// attribute's 4-byte alignment does not align for its u64.
bool get_buckets(const nlattr *a, latency_hist &h)
{
	constexpr size_t size = sizeof(netblk_latency_bucket);
	size_t len = mnl_attr_get_payload_len(a);
	if (len % size)
		return false;
	auto *p = static_cast<const char *>(mnl_attr_get_payload(a));
	h.buckets.clear();
	h.buckets.reserve(len / size);
	for (size_t off = 0; off < len; off += size) {
		netblk_latency_bucket b;
		memcpy(&b, p + off, size);
		h.buckets.emplace_back(b.index, b.count);
	}
	return true;
}

// NETBLK_L_OPS: an array of struct netblk_op_service_time, unaligned as the buckets.
bool get_ops(const nlattr *a, latency_hist &h)
{
	constexpr size_t size = sizeof(netblk_op_service_time);
	size_t len = mnl_attr_get_payload_len(a);
	if (len % size)
		return false;
	auto *p = static_cast<const char *>(mnl_attr_get_payload(a));
	h.ops.clear();
	for (size_t off = 0; off < len; off += size) {
		netblk_op_service_time t;
		memcpy(&t, p + off, size);
		h.ops.push_back({t.op, t.count, t.sum_ns});
	}
	return true;
}

bool get_latency_attr(const nlattr *a, latency_hist &h)
{
	switch (mnl_attr_get_type(a)) {
	case NETBLK_L_COUNT:        return get_uint(a, h.count);
	case NETBLK_L_MAX_NS:       return get_uint(a, h.max_ns);
	case NETBLK_L_SUM_NS:       return get_uint(a, h.sum_ns.emplace());
	case NETBLK_L_OPS:          return get_ops(a, h);
	case NETBLK_L_LINEAR_LIMIT: return get_uint(a, h.linear_limit);
	case NETBLK_L_SUB_BUCKETS:  return get_uint(a, h.sub_buckets);
	case NETBLK_L_BUCKETS:      return get_buckets(a, h);
	}
	return true;	// NETBLK_L_PAD, or unknown to this netblkctl
}

int latency_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	if (!get_latency_attr(a, ctx->inst->latency))
		return fail(ctx, mnl_attr_get_type(a), "latency ");
	return MNL_CB_OK;
}

// The attributes only an EVENT message has; true for any other attribute.
bool get_event_attr(const nlattr *a, netblk_event_info &ev)
{
	switch (mnl_attr_get_type(a)) {
	case NETBLK_A_EVENT:   return get_uint(a, ev.event);
	case NETBLK_A_REASON:  return get_uint(a, ev.reason);
	case NETBLK_A_ERRNO:   return get_uint(a, ev.err);
	case NETBLK_A_MESSAGE: return get_string(a, ev.message);
	}
	return true;
}

int allow_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	if (mnl_attr_get_type(a) != NETBLK_A_ALLOW_PREFIX)
		return MNL_CB_OK;
	if (mnl_attr_get_payload_len(a) != sizeof(netblk_prefix))
		return fail(ctx, NETBLK_A_ALLOW_PREFIX, "allow ");
	netblk_prefix p;
	memcpy(&p, mnl_attr_get_payload(a), sizeof(p));
	ctx->inst->allow.push_back(p);
	return MNL_CB_OK;
}

bool get_attr(const nlattr *a, parse_ctx *ctx)
{
	netblk_instance &i = *ctx->inst;
	switch (mnl_attr_get_type(a)) {
	case NETBLK_A_DRIVER:      return get_string(a, i.driver);
	case NETBLK_A_STATE:       return get_uint(a, i.state);
	case NETBLK_A_STOPPING_MS: return get_uint(a, i.stopping_ms);
	case NETBLK_A_WAITING_MS:  return get_uint(a, i.waiting_ms);
	case NETBLK_A_WAITING_FOR: return get_string(a, i.waiting_for);
	case NETBLK_A_DEVICE:      return get_string(a, i.device);
	case NETBLK_A_DISK_NAME:   return get_string(a, i.disk_name);
	case NETBLK_A_XDP_DROPPED: return get_uint(a, i.xdp_dropped);
	case NETBLK_A_PORT:        return get_uint(a, i.port);
	case NETBLK_A_IFNAME:      return get_string(a, i.ifname);
	case NETBLK_A_IFINDEX:     return get_uint(a, i.ifindex);
	case NETBLK_A_HANDOFF_IFINDEX: return get_uint(a, i.handoff_ifindex);
	case NETBLK_A_ADDR:        return get_uint(a, i.addr);
	case NETBLK_A_SIZE:        return get_uint(a, i.size);
	case NETBLK_A_SECTOR_SIZE: return get_uint(a, i.sector_size);
	case NETBLK_A_MAX_IO:      return get_uint(a, i.max_io);
	case NETBLK_A_SLOTS:       return get_uint(a, i.slots);
	case NETBLK_A_AUTH:        return get_uint(a, i.auth);
	case NETBLK_A_UPTIME_MS:   return get_uint(a, i.uptime_ms);
	NETBLK_START_OPTIONS(GET_KNOB_OF_I)
	}
	return true;	// unknown to this netblkctl: ignored
}

int instance_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<parse_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_A_STATS) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return fail(ctx, type);
		return mnl_attr_parse_nested(a, stat_attr_cb, ctx);
	}
	if (type == NETBLK_A_QUEUE_LIST) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return fail(ctx, type);
		ctx->inst->queue_list.clear();
		return mnl_attr_parse_nested(a, queue_list_cb, ctx);
	}
	if (type == NETBLK_A_ALLOW) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return fail(ctx, type);
		ctx->inst->allow.clear();
		return mnl_attr_parse_nested(a, allow_attr_cb, ctx);
	}
	if (type == NETBLK_A_LATENCY) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return fail(ctx, type);
		ctx->inst->latency = {};
		ctx->inst->latency.present = true;
		return mnl_attr_parse_nested(a, latency_attr_cb, ctx);
	}
	if (ctx->event && !get_event_attr(a, *ctx->event))
		return fail(ctx, type);
	return get_attr(a, ctx) ? MNL_CB_OK : fail(ctx, type);
}

struct attached_ctx {
	netblk_attached *att;
	int bad_attr = -1;
};

int host_stat_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_HS_UNSPEC || type == NETBLK_HS_PAD || type > NETBLK_HS_MAX)
		return MNL_CB_OK;
	if (!get_uint(a, ctx->att->stats[type])) {
		ctx->bad_attr = type;
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

int host_queue_stat_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_HS_UNSPEC || type == NETBLK_HS_PAD || type > NETBLK_HS_MAX)
		return MNL_CB_OK;
	if (!get_uint(a, ctx->att->queue_list.back()[type])) {
		ctx->bad_attr = type;
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

int host_queue_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type != NETBLK_Q_HOST_STATS)
		return MNL_CB_OK;	// unknown to this netblkctl: ignored
	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) {
		ctx->bad_attr = type;
		return MNL_CB_ERROR;
	}
	return mnl_attr_parse_nested(a, host_queue_stat_cb, ctx);
}

// An attached device's NETBLK_A_QUEUE_LIST: a NETBLK_A_QUEUE nest a hardware queue.
int host_queue_list_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	if (mnl_attr_get_type(a) != NETBLK_A_QUEUE)
		return MNL_CB_OK;
	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) {
		ctx->bad_attr = NETBLK_A_QUEUE;
		return MNL_CB_ERROR;
	}
	ctx->att->queue_list.emplace_back();
	return mnl_attr_parse_nested(a, host_queue_attr_cb, ctx);
}

bool get_attached_attr(const nlattr *a, netblk_attached &t)
{
	switch (mnl_attr_get_type(a)) {
	case NETBLK_A_DISK:        return get_string(a, t.disk);
	case NETBLK_A_ADDR:        return get_uint(a, t.addr);
	case NETBLK_A_PORT:        return get_uint(a, t.port);
	case NETBLK_A_IFNAME:      return get_string(a, t.ifname);
	case NETBLK_A_READ_ONLY:   return get_flag(a, t.read_only);
	case NETBLK_A_SIZE:        return get_uint(a, t.size);
	case NETBLK_A_SECTOR_SIZE: return get_uint(a, t.sector_size);
	case NETBLK_A_MAX_IO:      return get_uint(a, t.max_io);
	case NETBLK_A_SLOTS:       return get_uint(a, t.slots);
	case NETBLK_A_AUTH:        return get_uint(a, t.auth);
	case NETBLK_A_UPTIME_MS:   return get_uint(a, t.uptime_ms);
	NETBLK_ATTACH_OPTIONS(GET_KNOB_OF_T)
	}
	return true;	// unknown to this netblkctl: ignored
}

int host_latency_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	if (!get_latency_attr(a, ctx->att->latency)) {
		ctx->bad_attr = mnl_attr_get_type(a);
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

int attached_attr_cb(const nlattr *a, void *data)
{
	auto *ctx = static_cast<attached_ctx *>(data);
	uint16_t type = mnl_attr_get_type(a);
	if (type == NETBLK_A_LATENCY) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) {
			ctx->bad_attr = type;
			return MNL_CB_ERROR;
		}
		ctx->att->latency = {};
		ctx->att->latency.present = true;
		return mnl_attr_parse_nested(a, host_latency_attr_cb, ctx);
	}
	if (type == NETBLK_A_HOST_STATS || type == NETBLK_A_QUEUE_LIST) {
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) {
			ctx->bad_attr = type;
			return MNL_CB_ERROR;
		}
		if (type == NETBLK_A_QUEUE_LIST) {
			ctx->att->queue_list.clear();
			return mnl_attr_parse_nested(a, host_queue_list_cb, ctx);
		}
		return mnl_attr_parse_nested(a, host_stat_attr_cb, ctx);
	}
	if (!get_attached_attr(a, *ctx->att)) {
		ctx->bad_attr = type;
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

nl_status malformed(const parse_ctx &ctx)
{
	return nl_error(EBADMSG, std::string("the kernel sent a malformed netblk ") +
				 ctx.bad_where + "attribute " + std::to_string(ctx.bad_attr) +
				 " (does netblkctl match the module?)");
}

int stopped_attr_cb(const nlattr *a, void *data)
{
	auto *r = static_cast<netblk_stop_result *>(data);
	switch (mnl_attr_get_type(a)) {
	case NETBLK_A_STOPPED:  return get_uint(a, r->stopped) ? MNL_CB_OK : MNL_CB_ERROR;
	case NETBLK_A_STOPPING: return get_uint(a, r->stopping) ? MNL_CB_OK : MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

} // namespace

nl_status netblk_parse_instance(const nlmsghdr *nlh, netblk_instance &inst)
{
	parse_ctx ctx{&inst};
	if (mnl_attr_parse(nlh, sizeof(genlmsghdr), instance_attr_cb, &ctx) < 0)
		return malformed(ctx);
	return {};
}

nl_status netblk_parse_attached(const nlmsghdr *nlh, netblk_attached &att)
{
	attached_ctx ctx{&att};
	if (mnl_attr_parse(nlh, sizeof(genlmsghdr), attached_attr_cb, &ctx) < 0)
		return nl_error(EBADMSG, "the kernel sent a malformed netblk attribute " +
					 std::to_string(ctx.bad_attr) +
					 " of an attached device (does netblkctl match the module?)");
	return {};
}

nl_status netblk_parse_event(const nlmsghdr *nlh, netblk_event_info &ev)
{
	parse_ctx ctx{&ev.inst, &ev};
	if (mnl_attr_parse(nlh, sizeof(genlmsghdr), instance_attr_cb, &ctx) < 0)
		return malformed(ctx);
	return {};
}

nl_status netblk_client::connect()
{
	if (nl_status st = sock_.open(); !st.ok())
		return st;
	if (nl_status st = sock_.resolve_family(NETBLK_GENL_NAME, family_); !st.ok())
		return st;
	events_group_ = genl_mcast_group_id(family_, NETBLK_GENL_MCGRP_EVENTS);
	return {};
}

nlmsghdr *netblk_client::begin(uint8_t cmd, uint16_t flags)
{
	return sock_.begin(family_.id, flags, cmd, NETBLK_GENL_VERSION);
}

bool netblk_client::is_reply(const nlmsghdr *nlh, uint8_t cmd) const
{
	if (nlh->nlmsg_type != family_.id ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(genlmsghdr))
		return false;
	auto *genl = static_cast<const genlmsghdr *>(mnl_nlmsg_get_payload(nlh));
	return genl->cmd == cmd;
}

nl_status netblk_client::start(const netblk_start_args &args, netblk_instance &inst,
			       bool &described)
{
	nlmsghdr *req = begin(NETBLK_CMD_START, NLM_F_REQUEST | NLM_F_ACK);
	mnl_attr_put_u16(req, NETBLK_A_PORT, args.port);
	NETBLK_START_OPTIONS(PUT_KNOB)
	if (args.key)
		mnl_attr_put(req, NETBLK_A_KEY, args.key->size(), args.key->data());
	if (args.auth)
		mnl_attr_put_u32(req, NETBLK_A_AUTH, *args.auth);
	if (!args.allow.empty()) {
		nlattr *nest = mnl_attr_nest_start(req, NETBLK_A_ALLOW);
		for (const netblk_prefix &p : args.allow)
			mnl_attr_put(req, NETBLK_A_ALLOW_PREFIX, sizeof(p), &p);
		mnl_attr_nest_end(req, nest);
	}
	size_t cap = sock_.req_capacity();
	if (args.ifname && !mnl_attr_put_strz_check(req, cap, NETBLK_A_IFNAME, args.ifname->c_str()))
		return nl_error(ENAMETOOLONG, "interface name too long");
	if (!mnl_attr_put_strz_check(req, cap, NETBLK_A_DEVICE, args.device.c_str()))
		return nl_error(ENAMETOOLONG, "device path too long");

	described = false;
	return sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_START))
			return {};
		described = true;
		return netblk_parse_instance(nlh, inst);
	});
}

nl_status netblk_client::stop(std::optional<uint16_t> port, netblk_stop_result &result)
{
	nlmsghdr *req = begin(NETBLK_CMD_STOP, NLM_F_REQUEST | NLM_F_ACK);
	if (port)
		mnl_attr_put_u16(req, NETBLK_A_PORT, *port);
	else
		mnl_attr_put(req, NETBLK_A_ALL, 0, nullptr);

	result = {};
	return sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_STOP))
			return {};
		if (mnl_attr_parse(nlh, sizeof(genlmsghdr), stopped_attr_cb, &result) < 0)
			return nl_error(EBADMSG, "the kernel sent a malformed STOP reply");
		return {};
	});
}

nl_status netblk_client::list_once(std::vector<netblk_instance> &insts)
{
	insts.clear();
	nlmsghdr *req = begin(NETBLK_CMD_LIST, NLM_F_REQUEST | NLM_F_DUMP);
	return sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_LIST))
			return {};
		netblk_instance inst;
		nl_status st = netblk_parse_instance(nlh, inst);
		if (st.ok())
			insts.push_back(std::move(inst));
		return st;
	});
}

nl_status netblk_client::list(std::vector<netblk_instance> &insts)
{
	constexpr int tries = 3;
	nl_status st;
	for (int i = 0; i < tries; i++) {
		st = list_once(insts);
		if (!st.ok() || !sock_.dump_interrupted())
			break;
	}
	return st;
}

nl_status netblk_client::attach(const netblk_attach_args &args, netblk_attached &att,
				bool &described)
{
	nlmsghdr *req = begin(NETBLK_CMD_ATTACH, NLM_F_REQUEST | NLM_F_ACK);
	mnl_attr_put_u32(req, NETBLK_A_ADDR, args.addr);
	mnl_attr_put_u16(req, NETBLK_A_PORT, args.port);
	if (args.read_only)
		mnl_attr_put(req, NETBLK_A_READ_ONLY, 0, nullptr);
	NETBLK_ATTACH_OPTIONS(PUT_KNOB)
	if (args.key)
		mnl_attr_put(req, NETBLK_A_KEY, args.key->size(), args.key->data());
	if (args.auth)
		mnl_attr_put_u32(req, NETBLK_A_AUTH, *args.auth);
	if (args.ifname &&
	    !mnl_attr_put_strz_check(req, sock_.req_capacity(), NETBLK_A_IFNAME, args.ifname->c_str()))
		return nl_error(ENAMETOOLONG, "interface name too long");

	described = false;
	return sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_ATTACH))
			return {};
		described = true;
		return netblk_parse_attached(nlh, att);
	});
}

nl_status netblk_client::detach(std::optional<std::string> disk, bool force, uint32_t &detached)
{
	nlmsghdr *req = begin(NETBLK_CMD_DETACH, NLM_F_REQUEST | NLM_F_ACK);
	if (force)
		mnl_attr_put(req, NETBLK_A_FORCE, 0, nullptr);
	if (!disk)
		mnl_attr_put(req, NETBLK_A_ALL, 0, nullptr);
	else if (!mnl_attr_put_strz_check(req, sock_.req_capacity(), NETBLK_A_DISK, disk->c_str()))
		return nl_error(ENAMETOOLONG, "device name too long");

	netblk_stop_result result;
	nl_status st = sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_DETACH))
			return {};
		if (mnl_attr_parse(nlh, sizeof(genlmsghdr), stopped_attr_cb, &result) < 0)
			return nl_error(EBADMSG, "the kernel sent a malformed DETACH reply");
		return {};
	});
	detached = result.stopped;
	return st;
}

nl_status netblk_client::xdp_ready(uint32_t ifindex, uint32_t reopen)
{
	nlmsghdr *req = begin(NETBLK_CMD_XDP_READY, NLM_F_REQUEST | NLM_F_ACK);
	mnl_attr_put_u32(req, NETBLK_A_IFINDEX, ifindex);
	mnl_attr_put_u32(req, NETBLK_A_XDP_DROPPED, reopen);
	return sock_.transact(req, [](const nlmsghdr *) -> nl_status { return {}; });
}

nl_status netblk_client::attached(std::vector<netblk_attached> &atts)
{
	atts.clear();
	nlmsghdr *req = begin(NETBLK_CMD_ATTACHED, NLM_F_REQUEST | NLM_F_DUMP);
	return sock_.transact(req, [&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_ATTACHED))
			return {};
		netblk_attached att;
		nl_status st = netblk_parse_attached(nlh, att);
		if (st.ok())
			atts.push_back(std::move(att));
		return st;
	});
}

nl_status netblk_client::join_events()
{
	if (!events_group_)
		return nl_error(ENOENT, "the netblk module has no \"" NETBLK_GENL_MCGRP_EVENTS
					"\" group (does netblkctl match the module?)");
	return sock_.join_group(*events_group_);
}

nl_status netblk_client::read_events(const netblk_event_fn &on_event)
{
	return sock_.recv_pending([&](const nlmsghdr *nlh) -> nl_status {
		if (!is_reply(nlh, NETBLK_CMD_EVENT))
			return {};
		netblk_event_info ev;
		if (nl_status st = netblk_parse_event(nlh, ev); !st.ok())
			return st;
		return on_event(ev);
	});
}
