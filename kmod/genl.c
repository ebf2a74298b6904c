// SPDX-License-Identifier: GPL-2.0
/*
 * The "netblk" generic netlink family's policy and ops table, and its
 * registration: what the commands are and who answers them.  The contract
 * is uapi/netblk_genl.h.  The handlers are the server's (target/ctl.c) and
 * the client's (host/ctl.c); the family object, and what both sides'
 * handlers share, is common/family.c's, so that nothing below calls up
 * into this file.
 *
 * The family's ops run in parallel (parallel_ops): genl_mutex, which every
 * family without it shares (nl80211, team, ...), is never held while an
 * attach waits for the network or a stop for a disk.  Each handler takes
 * netblk_lock itself, and only around what it changes or reads: none waits
 * for the network or a disk under it.
 */
#include "target/target.h"
#include "host/host.h"
#include "host/ctl.h"
#include "family.h"

#include <net/genetlink.h>
#include <net/netlink.h>

/*
 * Each knob's range (netblk_options.h), which its policy entry points at;
 * a flag has none.  Named by the attribute, not the field: START's and
 * ATTACH's fields may share a name (queues).  Not const: 6.1's nla_policy
 * points at them without (compat.h's kernels).
 */
#define NETBLK_OPTION_RANGE_flag(NAME, lo, hi)
#define NETBLK_OPTION_RANGE_u16(NAME, lo, hi) \
	static struct netlink_range_validation netblk_range_##NAME = { .min = lo, .max = hi };
#define NETBLK_OPTION_RANGE_u32 NETBLK_OPTION_RANGE_u16
#define NETBLK_OPTION_RANGE(NAME, name, nr, type, lo, hi, ...) \
	NETBLK_OPTION_RANGE_##type(NAME, lo, hi)
NETBLK_START_OPTIONS(NETBLK_OPTION_RANGE)
NETBLK_ATTACH_OPTIONS(NETBLK_OPTION_RANGE)

#define NETBLK_OPTION_POLICY_flag(NAME) [NETBLK_A_##NAME] = { .type = NLA_FLAG },
#define NETBLK_OPTION_POLICY_u16(NAME) \
	[NETBLK_A_##NAME] = NLA_POLICY_FULL_RANGE(NLA_U16, &netblk_range_##NAME),
#define NETBLK_OPTION_POLICY_u32(NAME) \
	[NETBLK_A_##NAME] = NLA_POLICY_FULL_RANGE(NLA_U32, &netblk_range_##NAME),
#define NETBLK_OPTION_POLICY(NAME, name, nr, type, ...) NETBLK_OPTION_POLICY_##type(NAME)

static const struct nla_policy netblk_policy[NETBLK_A_MAX + 1] = {
	[NETBLK_A_DEVICE]	= { .type = NLA_NUL_STRING, .len = NETBLK_DEVICE_MAX - 1 },
	[NETBLK_A_PORT]		= { .type = NLA_U16 },
	[NETBLK_A_IFNAME]	= { .type = NLA_NUL_STRING, .len = IFNAMSIZ - 1 },
	[NETBLK_A_ALL]		= { .type = NLA_FLAG },
	[NETBLK_A_IFINDEX]	= { .type = NLA_U32 },
	[NETBLK_A_XDP_LINK_FD]	= { .type = NLA_U32 },
	[NETBLK_A_ALLOW]	= { .type = NLA_NESTED },
	[NETBLK_A_ALLOW_PREFIX]	= NLA_POLICY_EXACT_LEN(sizeof(struct netblk_prefix)),
	[NETBLK_A_KEY]		= NLA_POLICY_EXACT_LEN(NETBLK_KEY_BYTES),
	[NETBLK_A_AUTH]		= NLA_POLICY_MAX(NLA_U32, NETBLK_AUTH_FULL),
	[NETBLK_A_ADDR]		= { .type = NLA_U32 },
	[NETBLK_A_DISK]		= { .type = NLA_NUL_STRING, .len = DISK_NAME_LEN - 1 },
	[NETBLK_A_FORCE]	= { .type = NLA_FLAG },
	[NETBLK_A_XDP_DROPPED]	= NLA_POLICY_MIN(NLA_U32, 1),
	NETBLK_START_OPTIONS(NETBLK_OPTION_POLICY)
	NETBLK_ATTACH_OPTIONS(NETBLK_OPTION_POLICY)
};

/*
 * START, STOP, ATTACH and DETACH check CAP_SYS_ADMIN and CAP_NET_ADMIN
 * themselves (netblk_genl_admin), to say which is missing; the rest need
 * CAP_NET_ADMIN.
 */
static const struct genl_ops netblk_ops[] = {
	{
		.cmd = NETBLK_CMD_START,
		.doit = netblk_cmd_start,
	},
	{
		.cmd = NETBLK_CMD_STOP,
		.doit = netblk_cmd_stop,
	},
	{
		/* device paths, addresses and allowlists are not for every user */
		.cmd = NETBLK_CMD_LIST,
		.dumpit = netblk_dump_list,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = NETBLK_CMD_ATTACH,
		.doit = netblk_cmd_attach,
	},
	{
		.cmd = NETBLK_CMD_DETACH,
		.doit = netblk_cmd_detach,
	},
	{
		.cmd = NETBLK_CMD_ATTACHED,
		.dumpit = netblk_dump_attached,
		.flags = GENL_ADMIN_PERM,
	},
	{
		/*
		 * It only says that the NIC's program is there again, so that
		 * its waiting instances serve: a false one makes them serve a
		 * NIC that steers nothing to them -- what CAP_NET_ADMIN can do
		 * anyway by taking the program off.  Adding the program is what
		 * takes more (CAP_BPF), in netblkctl.
		 */
		.cmd = NETBLK_CMD_XDP_READY,
		.doit = netblk_cmd_xdp_ready,
		.flags = GENL_ADMIN_PERM,
	},
};

int netblk_genl_register(void)
{
	int err;

	/* the family is common/family.c's: the handlers put messages of it */
	netblk_family.policy = netblk_policy;
	netblk_family.ops = netblk_ops;
	netblk_family.n_ops = ARRAY_SIZE(netblk_ops);
	err = genl_register_family(&netblk_family);
	if (err)
		return err;
	err = netblk_event_init();
	if (err)
		genl_unregister_family(&netblk_family);
	return err;
}

void netblk_genl_unregister(void)
{
	netblk_event_exit();
	genl_unregister_family(&netblk_family);
}
