// SPDX-License-Identifier: GPL-2.0
/*
 * The XDP program on each NIC (bpf/netblk.bpf.c).  netblkctl loads it and
 * attaches it with a BPF link, and hands the link to the first instance on
 * the NIC; the module holds the link from then on, one reference for all the
 * NIC's instances, and drops it when the last of them stops -- which
 * detaches the program.  Nothing of netblk's stays on a NIC that serves no
 * instance, whether it was stopped or the module unloaded.
 */
#include "netblk.h"

#include <linux/bpf.h>
#include <linux/module.h>
#include <linux/version.h>
#include <linux/rtnetlink.h>

struct netblk_nic_xdp {
	struct list_head node;		/* on netblk_nic_xdps, under netblk_lock */
	int ifindex;
	struct bpf_link *link;
	unsigned int users;		/* instances on the NIC */
};

static LIST_HEAD(netblk_nic_xdps);

/*
 * bpf_link_get_from_fd() is exported to the BPF_INTERNAL namespace only: the
 * one way for a module to hold on to a link user space created, which is
 * what ties the program's life on the NIC to the instances'.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
MODULE_IMPORT_NS("BPF_INTERNAL");
#else
MODULE_IMPORT_NS(BPF_INTERNAL);
#endif

static struct netblk_nic_xdp *netblk_xdp_find(int ifindex)
{
	struct netblk_nic_xdp *x;

	list_for_each_entry(x, &netblk_nic_xdps, node)
		if (x->ifindex == ifindex)
			return x;
	return NULL;
}

/* Whether @link is what the NIC runs in native (driver) mode. */
static bool netblk_xdp_link_on(struct net_device *nic, struct bpf_link *link)
{
	bool on;

	rtnl_lock();
	on = link->type == BPF_LINK_TYPE_XDP &&
	     (struct bpf_link *)nic->xdp_state[XDP_MODE_DRV].link == link;
	rtnl_unlock();
	return on;
}

/* A reference to the link behind @link_fd, if it is @nic's native-mode program. */
static struct bpf_link *netblk_xdp_take_link(struct net_device *nic, int link_fd,
					     struct netlink_ext_ack *extack)
{
	struct bpf_link *link;

	if (link_fd < 0) {
		NL_SET_ERR_MSG_FMT(extack, "no netblk XDP program on %s: start instances with netblkctl",
				   nic->name);
		return ERR_PTR(-EAGAIN);
	}
	link = bpf_link_get_from_fd(link_fd);
	if (IS_ERR(link)) {
		NL_SET_ERR_MSG(extack, "the XDP link fd given is not a BPF link");
		return link;
	}
	if (!netblk_xdp_link_on(nic, link)) {
		bpf_link_put(link);
		NL_SET_ERR_MSG_FMT(extack, "the XDP link given is not the native-mode program of %s",
				   nic->name);
		return ERR_PTR(-EINVAL);
	}
	return link;
}

int netblk_xdp_hold(struct netblk_instance *inst, int link_fd, struct netlink_ext_ack *extack)
{
	struct net_device *nic = inst->nic;
	struct netblk_nic_xdp *x;
	struct bpf_link *link;

	lockdep_assert_held(&netblk_lock);
	if (!nic->netdev_ops->ndo_xdp_xmit) {
		NL_SET_ERR_MSG_FMT(extack, "%s has no ndo_xdp_xmit: netblk needs a NIC driver with native XDP",
				   nic->name);
		return -EOPNOTSUPP;
	}
	x = netblk_xdp_find(nic->ifindex);
	if (x && netblk_xdp_link_on(nic, x->link)) {
		x->users++;
		inst->xdp = x;
		return 0;
	}
	/*
	 * None yet -- or someone detached ours (bpftool link detach): then the
	 * NIC's instances get the program netblkctl attached anew.
	 */
	link = netblk_xdp_take_link(nic, link_fd, extack);
	if (IS_ERR(link))
		return PTR_ERR(link);
	if (x) {
		bpf_link_put(x->link);
		x->link = link;
		x->users++;
		inst->xdp = x;
		return 0;
	}
	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x) {
		bpf_link_put(link);
		return -ENOMEM;
	}
	x->ifindex = nic->ifindex;
	x->link = link;
	x->users = 1;
	list_add(&x->node, &netblk_nic_xdps);
	inst->xdp = x;
	return 0;
}

void netblk_xdp_release(struct netblk_instance *inst)
{
	struct netblk_nic_xdp *x = inst->xdp;

	lockdep_assert_held(&netblk_lock);
	if (!x)
		return;
	inst->xdp = NULL;
	if (--x->users)
		return;
	list_del(&x->node);
	/* The last reference detaches the program (in a workqueue). */
	bpf_link_put(x->link);
	kfree(x);
}
