// SPDX-License-Identifier: GPL-2.0
/*
 * The NIC an instance serves on: which one (dev=, or the default route's),
 * the address it answers on (the NIC's, or its VLAN device's with vlan=),
 * what the driver can do -- the CPUs it can transmit XDP frames from, and
 * whether it hides VLAN tags from XDP -- and its MTU and MAC as they change.
 */
#include "target.h"

#include <linux/ethtool.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/rtnetlink.h>
#include <net/ip_fib.h>

/* The device the default route (0.0.0.0/0 in the main table) goes out of. */
static struct net_device *netblk_default_route_dev(netdevice_tracker *tracker)
{
	struct flowi4 fl4 = { .daddr = htonl(INADDR_ANY) };
	struct net_device *dev = NULL;
	struct fib_result res;

	rcu_read_lock();
	if (!fib_lookup(&init_net, &fl4, &res, 0) && res.type == RTN_UNICAST &&
	    res.prefixlen == 0 && res.nhc) {
		dev = FIB_RES_DEV(res);
		if (dev)
			netdev_hold(dev, tracker, GFP_ATOMIC);
	}
	rcu_read_unlock();
	return dev;
}

/* The device's first primary IPv4 address, or 0. */
static __be32 netblk_dev_addr(struct net_device *dev)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	__be32 addr = 0;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(dev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (!(ifa->ifa_flags & IFA_F_SECONDARY)) {
				addr = ifa->ifa_local;
				break;
			}
		}
	}
	rcu_read_unlock();
	return addr;
}

bool netblk_nic_has_addr(struct net_device *dev, __be32 addr)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	bool found = false;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(dev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (ifa->ifa_local == addr) {
				found = true;
				break;
			}
		}
	}
	rcu_read_unlock();
	return found;
}

/* The driver's name as ethtool -i says it ("" when it does not say). */
static void netblk_nic_driver(struct net_device *nic, char *name, size_t size)
{
	struct ethtool_drvinfo info = {};

	rtnl_lock();
	if (nic->ethtool_ops && nic->ethtool_ops->get_drvinfo)
		nic->ethtool_ops->get_drvinfo(nic, &info);
	rtnl_unlock();
	if (!info.driver[0] && nic->dev.parent && nic->dev.parent->driver)
		strscpy(info.driver, nic->dev.parent->driver->name, sizeof(info.driver));
	strscpy(name, info.driver, size);
}

/*
 * Drivers whose ndo_xdp_xmit takes the transmit queue of the CPU it runs on,
 * smp_processor_id(), and answers -ENXIO on a CPU at or above their number of
 * XDP queues -- one a channel, as many as their receive queues -- rather than
 * share a queue under a lock.  Read in 6.12: mlx5e_xdp_xmit(),
 * i40e_xdp_xmit(), fun_xdp_xmit_frames().  The others that were read pick a
 * queue by CPU modulo their count (virtio_net, veth, vmxnet3, bnxt, ena, gve,
 * qede, igb, igc, mana, tun), or lock a shared one when they have fewer than
 * CPUs (ice, ixgbe, sfc), so every CPU can transmit.
 */
static const char *const netblk_per_cpu_xdp_drivers[] = { "mlx5_core", "i40e", "funeth" };

static bool netblk_nic_xmit_per_cpu(const struct netblk_instance *inst)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(netblk_per_cpu_xdp_drivers); i++)
		if (!strcmp(inst->driver, netblk_per_cpu_xdp_drivers[i]))
			return true;
	return false;
}

/* The online CPUs the NIC can transmit XDP frames from. */
void netblk_nic_xmit_cpus(struct netblk_instance *inst, struct cpumask *mask)
{
	unsigned int cpu, queues = READ_ONCE(inst->nic->real_num_rx_queues);

	cpumask_copy(mask, cpu_online_mask);
	if (!netblk_nic_xmit_per_cpu(inst))
		return;
	for_each_online_cpu(cpu)
		if (cpu >= queues)
			cpumask_clear_cpu(cpu, mask);
}

int netblk_nic_check_cpu(struct netblk_instance *inst, u32 cpu, struct netlink_ext_ack *extack)
{
	cpumask_var_t mask;
	int err = 0;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	netblk_nic_xmit_cpus(inst, mask);
	if (cpumask_empty(mask)) {
		NL_SET_ERR_MSG_FMT(extack, "%s (%s) has no XDP transmit queue on any online CPU",
				   inst->nic->name, inst->driver);
		err = -ENXIO;
	} else if (!cpumask_test_cpu(cpu, mask)) {
		NL_SET_ERR_MSG_FMT(extack, "cpu=%u: %s (%s) sends XDP only from CPUs %*pbl: pick one",
				   cpu, inst->nic->name, inst->driver, cpumask_pr_args(mask));
		err = -EINVAL;
	}
	free_cpumask_var(mask);
	return err;
}

/*
 * Whether the NIC's driver drops the XDP program it holds when the NIC is
 * reopened: taken down (and up), or given a new MTU while up.  vmxnet3
 * (6.12) does: vmxnet3_quiesce_dev() -> vmxnet3_rq_cleanup_all() sets
 * adapter->xdp_bpf_prog to NULL without telling the core, so its frames go
 * to the stack while the kernel still shows the program attached (seen in
 * tests/e2e).  The monitor notes each such reopen, and an instance on the
 * NIC waits until netblkctl has added the program again (monitor.c).  Its
 * reopens for a ring size change (ethtool -G) or a transmit timeout tell
 * no notifier: those stay unseen.
 */
bool netblk_nic_drops_xdp(const struct net_device *nic)
{
	const struct device *parent = nic->dev.parent;

	return parent && parent->driver && !strcmp(parent->driver->name, "vmxnet3");
}

/*
 * Whether the NIC's ndo_xdp_xmit sends every buffer of a multi-buffer frame,
 * so that a reply's data may go out from a page apart from its headers (a
 * gathered READ's, engine.h): NETDEV_XDP_ACT_NDO_XMIT_SG says so, and
 * virtio-net does from 6.3 on (__virtnet_xdp_xmit_one() puts each frag in
 * the ring) while it says only NETDEV_XDP_ACT_RX_SG.  A driver that does not
 * (vmxnet3, 6.1's virtio-net) would send the first buffer alone.
 */
bool netblk_nic_sends_frags(const struct netblk_instance *inst)
{
#if NETBLK_LINUX_6_1
	return false;
#else
	if (inst->nic->xdp_features & NETDEV_XDP_ACT_NDO_XMIT_SG)
		return true;
	return LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0) &&
	       !strcmp(inst->driver, "virtio_net");
#endif
}

/*
 * Whether the NIC may hand XDP a frame from a VLAN with its tag already
 * stripped (rx-vlan-offload, or the 802.1ad one): XDP then cannot tell it
 * from an untagged one.  With the matching VLAN filter on and no VLAN device
 * on the NIC, it takes untagged frames only (and priority-tagged ones, VLAN
 * 0), so nothing is hidden.  A NIC in promiscuous mode may take any VLAN's
 * frames regardless: README.md.  The ethtool feature to turn off, or NULL.
 */
const char *netblk_nic_hides_vlans(struct net_device *nic)
{
	netdev_features_t features = READ_ONCE(nic->features);
	bool vlans;

	if (!(features & (NETIF_F_HW_VLAN_CTAG_RX | NETIF_F_HW_VLAN_STAG_RX)))
		return NULL;
	rtnl_lock();
	vlans = vlan_uses_dev(nic);
	rtnl_unlock();
	if ((features & NETIF_F_HW_VLAN_CTAG_RX) &&
	    (vlans || !(features & NETIF_F_HW_VLAN_CTAG_FILTER)))
		return "rxvlan";
	if ((features & NETIF_F_HW_VLAN_STAG_RX) &&
	    (vlans || !(features & NETIF_F_HW_VLAN_STAG_FILTER)))
		return "rx-vlan-stag-hw-parse";
	return NULL;
}

/* vlan=N, or dev= naming a VLAN device: the NIC under it, and its VLAN device. */
static int netblk_nic_vlan(struct netblk_instance *inst, u16 vlan, struct netlink_ext_ack *extack)
{
	struct net_device *nic = inst->nic, *vdev;

	if (is_vlan_dev(nic)) {
		u16 id = vlan_dev_vlan_id(nic);

		if (vlan && vlan != id) {
			NL_SET_ERR_MSG_FMT(extack, "dev=%s is VLAN %u, not vlan=%u", nic->name, id, vlan);
			return -EINVAL;
		}
		/* serve on the real NIC, answering on the VLAN device's address */
		vdev = nic;
		netdev_hold(vdev, &inst->addr_dev_tracker, GFP_KERNEL);
		inst->addr_dev = vdev;
		netdev_put(vdev, &inst->nic_tracker);
		/* the VLAN device holds its real one: no gap */
		inst->nic = vlan_dev_real_dev(vdev);
		netdev_hold(inst->nic, &inst->nic_tracker, GFP_KERNEL);
		inst->opt.vlan = id;
		return 0;
	}
	inst->addr_dev = nic;
	if (!vlan)
		return 0;
	if (vlan >= VLAN_N_VID - 1) {
		NL_SET_ERR_MSG_FMT(extack, "vlan=%u is out of range: 1 to %u", vlan, VLAN_N_VID - 2);
		return -EINVAL;
	}
	rcu_read_lock();
	vdev = __vlan_find_dev_deep_rcu(nic, htons(ETH_P_8021Q), vlan);
	if (vdev)
		netdev_hold(vdev, &inst->addr_dev_tracker, GFP_ATOMIC);
	rcu_read_unlock();
	if (!vdev) {
		NL_SET_ERR_MSG_FMT(extack, "%s has no VLAN %u device: ip link add link %s type vlan id %u",
				   nic->name, vlan, nic->name, vlan);
		return -ENODEV;
	}
	inst->addr_dev = vdev;
	inst->opt.vlan = vlan;
	return 0;
}

/*
 * A NIC that is down at START (a boot that restores before the link is up, a
 * cable out): with nic-loss=wait the instance starts WAITING, as if the NIC
 * had gone down under it, and serves once it is up -- its address, which a
 * down NIC keeps, is what it will serve.  With nic-loss=stop a down NIC is
 * refused.  (A program netblkctl added to a down vmxnet3 NIC runs once it
 * opens: only a close drops it.)
 */
static int netblk_nic_start_down(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	const char *name = inst->addr_dev->name;

	if (inst->opt.nic_loss != NETBLK_NIC_LOSS_WAIT) {
		/* extack messages end at 80 bytes */
		NL_SET_ERR_MSG_FMT(extack, "%s is down: bring it up, or start with nic-loss=wait",
				   name);
		return -ENETDOWN;
	}
	snprintf(inst->waiting_for, sizeof(inst->waiting_for), "%s is down", name);
	return 0;
}

static int netblk_nic_check(struct netblk_instance *inst, const struct netblk_start_params *p,
			    struct netlink_ext_ack *extack)
{
	struct net_device *nic = inst->nic, *adev = inst->addr_dev;
	u32 nic_mtu = READ_ONCE(adev->mtu);
	const char *feature;

	if (!(adev->flags & IFF_UP) || !netif_running(adev) || !netif_running(nic)) {
		int err = netblk_nic_start_down(inst, extack);

		if (err)
			return err;
	}
	/* replies go out through the NIC's XDP transmit, in native mode */
	if (!nic->netdev_ops->ndo_xdp_xmit) {
		NL_SET_ERR_MSG_FMT(extack, "%s has no ndo_xdp_xmit: netblk needs a NIC driver with native XDP",
				   nic->name);
		return -EOPNOTSUPP;
	}
	inst->addr = netblk_dev_addr(adev);
	if (!inst->addr) {
		NL_SET_ERR_MSG_FMT(extack, "%s has no IPv4 address: add one, or pick another NIC with dev=",
				   adev->name);
		return -EADDRNOTAVAIL;
	}
	feature = netblk_nic_hides_vlans(nic);
	if (feature) {
		NL_SET_ERR_MSG_FMT(extack, "%s strips VLAN tags from XDP: ethtool -K %s %s off",
				   nic->name, nic->name, feature);
		return -EOPNOTSUPP;
	}
	inst->opt.mtu = netblk_start_given(p, MTU) ? p->opt.mtu : nic_mtu;
	if (inst->opt.mtu < NETBLK_MTU_MIN || inst->opt.mtu > nic_mtu) {
		NL_SET_ERR_MSG_FMT(extack, "mtu=%u is out of range: %u to %u (the mtu of %s)",
				   inst->opt.mtu, NETBLK_MTU_MIN, nic_mtu, adev->name);
		return -EINVAL;
	}
	return 0;
}

int netblk_nic_take(struct netblk_instance *inst, const struct netblk_start_params *p,
		    struct netlink_ext_ack *extack)
{
	struct net_device *dev;
	int err;

	if (p->ifname[0]) {
		dev = netdev_get_by_name(&init_net, p->ifname, &inst->nic_tracker, GFP_KERNEL);
		if (!dev) {
			NL_SET_ERR_MSG_FMT(extack, "no network interface %s: name an existing one with dev=",
					   p->ifname);
			return -ENODEV;
		}
	} else {
		dev = netblk_default_route_dev(&inst->nic_tracker);
		if (!dev) {
			NL_SET_ERR_MSG(extack, "no default route to take the NIC from: name one with dev=IFACE");
			return -ENODEV;
		}
	}
	inst->nic = dev;
	err = netblk_nic_vlan(inst, p->opt.vlan, extack);
	if (err)
		return err;
	netblk_nic_driver(inst->nic, inst->driver, sizeof(inst->driver));
	return netblk_nic_check(inst, p, extack);
}

void netblk_nic_put(struct netblk_instance *inst)
{
	if (inst->addr_dev && inst->addr_dev != inst->nic)
		netdev_put(inst->addr_dev, &inst->addr_dev_tracker);
	inst->addr_dev = NULL;
	if (inst->nic)
		netdev_put(inst->nic, &inst->nic_tracker);
	inst->nic = NULL;
}

/* The NIC's name, or the one it had when it went. */
const char *netblk_nic_name(const struct netblk_instance *inst)
{
	return inst->nic ? inst->nic->name : inst->nic_name;
}

/*
 * The NIC or the device the address is on, if either is being unregistered
 * (NULL if neither is, or they were let go of already).  Unregistering waits
 * for every reference to the device (netdev_wait_allrefs()), and tells the
 * netdev notifiers again each second meanwhile.
 */
struct net_device *netblk_nic_leaving(const struct netblk_instance *inst)
{
	lockdep_assert_held(&netblk_lock);
	if (!inst->nic)
		return NULL;
	if (inst->nic->reg_state != NETREG_REGISTERED)
		return inst->nic;
	if (inst->addr_dev->reg_state != NETREG_REGISTERED)
		return inst->addr_dev;
	return NULL;
}

/*
 * Let go of the NIC and the address device now, not once the disk has
 * answered: a disk that does not answer would hold up their unregistration
 * -- `ip link del` of the VLAN device, a driver unbind, a VF removal -- for
 * as long as it does not (as macvlan and vlan let go of a lower device on
 * its NETDEV_UNREGISTER).  Nothing is sent from here on: every transmit
 * looks at NETBLK_NIC_GONE under RCU before it touches the NIC or the rxq,
 * and those that looked before it was set are waited out.  What the disk
 * still holds -- slots, bios, the frames it reads into or writes from -- are
 * pages, not the NIC's: they stay the instance's until the disk answers.
 */
void netblk_nic_detach(struct netblk_instance *inst)
{
	lockdep_assert_held(&netblk_lock);
	if (!inst->nic || netblk_nic_gone(inst))
		return;
	strscpy(inst->nic_name, inst->nic->name, sizeof(inst->nic_name));
	set_bit(NETBLK_NIC_GONE, &inst->flags);
	synchronize_rcu();
	netblk_buffers_unreg_rxq(inst);
	netblk_nic_put(inst);
}

/*
 * Replies follow the NIC's MTU and MAC as they are now (an MTU lowered under
 * the instance must not make them too long): each worker refreshes them each
 * round, which costs two loads when nothing changed.  Once the NIC is gone
 * nothing is sent, and nothing is refreshed.
 */
void netblk_nic_refresh_link(struct netblk_queue *q)
{
	struct netblk_instance *inst = q->inst;
	struct net_device *dev;

	rcu_read_lock();
	dev = netblk_nic_gone(inst) ? NULL : READ_ONCE(inst->addr_dev);
	if (dev)
		netblk_core_set_link(q->core, READ_ONCE(dev->mtu), dev->dev_addr);
	rcu_read_unlock();
}
