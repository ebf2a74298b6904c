// SPDX-License-Identifier: GPL-2.0
/*
 * Watching what an instance stands on.  When its NIC goes down, loses the
 * address the instance answers on or lowers its MTU below the instance's,
 * the instance waits for it to come back as it was, holding its disk and its
 * port, and serves again by itself (nic-loss=wait, the default; with
 * nic-loss=stop it stops).  When its NIC goes away (the instance lets go of
 * it at once, whether its disk answers or not), fails every reply, or
 * starts hiding VLAN tags from XDP; when its own netblk<port> device is taken
 * down by hand; or when its block device is removed, the instance stops on
 * its own.  Each says why on the events group.  A NIC whose driver drops
 * its XDP program when it reopens (netblk_nic_drops_xdp) has its instances
 * wait, after it is back, until netblkctl has added the program again and
 * said so (XDP_READY).  Disk I/O errors are
 * announced too, at most one a second an instance.  The reaper also releases
 * stopping instances once their disks are done, and announces those that
 * take long.
 *
 * The notifiers run under rtnl (or the disk's holder lock), which the start
 * path takes while holding netblk_lock, so they only schedule the reaper;
 * the reaper takes netblk_lock and looks at every instance.
 */
#include "target.h"

#include <linux/blkdev.h>
#include <linux/inetdevice.h>
#include <linux/workqueue.h>

static void netblk_reap(struct work_struct *work);
static DECLARE_DELAYED_WORK(netblk_reaper, netblk_reap);

/*
 * Besides the kicks, the reaper looks once a second while anything serves:
 * a read-only instance holds no claim, so nothing tells it its disk went.
 */
#define NETBLK_REAP_INTERVAL HZ

void netblk_monitor_kick(void)
{
	mod_delayed_work(system_wq, &netblk_reaper, 0);
}

/*
 * The NICs that dropped their XDP program on a reopen and have not had it
 * added again: ifindex -> the reopen's number (never 0), which XDP_READY
 * must name, so that a reopen after netblkctl looked is not forgotten.
 * Written by the netdev notifier under rtnl, where netblk_lock cannot be
 * taken: the xarray has its own lock.
 */
static DEFINE_XARRAY(netblk_xdp_dropped);
static atomic_t netblk_xdp_reopens = ATOMIC_INIT(0);

static void netblk_note_reopen(struct net_device *dev)
{
	u32 n = (u32)atomic_inc_return(&netblk_xdp_reopens) & INT_MAX;

	if (xa_err(xa_store(&netblk_xdp_dropped, dev->ifindex, xa_mk_value(n ?: 1), GFP_KERNEL)))
		pr_warn("%s dropped its XDP program; out of memory to note it\n", dev->name);
}

/* The number of the reopen that dropped @nic's program; 0: it runs. */
u32 netblk_monitor_xdp_dropped(const struct net_device *nic)
{
	void *entry = xa_load(&netblk_xdp_dropped, nic->ifindex);

	return entry ? xa_to_value(entry) : 0;
}

/* XDP_READY: netblkctl added @nic's program again after reopen @reopen. */
int netblk_monitor_xdp_ready(struct net_device *nic, u32 reopen, struct netlink_ext_ack *extack)
{
	void *old = xa_cmpxchg(&netblk_xdp_dropped, nic->ifindex, xa_mk_value(reopen), NULL,
			       GFP_KERNEL);

	if (old == xa_mk_value(reopen)) {
		netblk_monitor_kick();
		return 0;
	}
	if (!old)
		return 0;	/* nothing waits for it */
	NL_SET_ERR_MSG_FMT(extack, "%s reopened again (reopen %lu, not %u): add the program again",
			   nic->name, xa_to_value(old), reopen);
	return -EAGAIN;
}

/*
 * Whether an instance other than @inst serves or waits on @nic: netblkctl
 * takes netblk's program off a NIC where none does before a START.
 */
static bool netblk_nic_served(const struct netblk_instance *inst, const struct net_device *nic)
{
	struct netblk_instance *other;

	list_for_each_entry(other, &netblk_instances, node)
		if (other != inst && other->nic == nic && other->state != NETBLK_STATE_STOPPING)
			return true;
	return false;
}

/*
 * @inst has just started (under netblk_lock): the reaper looks at it from
 * now on, once a second.  The first instance on its NIC runs on a program
 * netblkctl has just added anew (it takes off one no instance is on
 * first), so the NIC's reopens before count no more.
 */
void netblk_monitor_started(struct netblk_instance *inst)
{
	lockdep_assert_held(&netblk_lock);
	if (!netblk_nic_served(inst, inst->nic))
		xa_erase(&netblk_xdp_dropped, inst->nic->ifindex);
	netblk_monitor_kick();
}

/* Why the NIC refuses every reply, as far as the instance can tell. */
static void netblk_xmit_failure_msg(struct netblk_instance *inst, char *msg, size_t size)
{
	struct netblk_queue *q, *failed = inst->queues;
	cpumask_var_t mask;
	int err = 0;

	/* the first queue whose transmits fail: they fail from its CPU */
	netblk_for_each_queue(q, inst) {
		err = netblk_core_tx_failure(q->core);
		if (err) {
			failed = q;
			break;
		}
	}
	if (zalloc_cpumask_var(&mask, GFP_KERNEL)) {
		netblk_nic_xmit_cpus(inst, mask);
		if (!cpumask_test_cpu(failed->cpu, mask)) {
			snprintf(msg, size, "%s refused every reply for 1 s (error %d): it sends XDP only from CPUs %*pbl",
				 inst->nic->name, err, cpumask_pr_args(mask));
			free_cpumask_var(mask);
			return;
		}
		free_cpumask_var(mask);
	}
	snprintf(msg, size, "%s refused every reply for 1 s (error %d) from cpu %u",
		 inst->nic->name, err, failed->cpu);
}

/*
 * Why @inst cannot go on serving, written into @msg; 0 when it can.
 * *@can_wait: the NIC may come back as it was (down, its address or its
 * MTU gone) -- with nic-loss=wait the instance waits instead of stopping.
 */
static enum netblk_stop_reason netblk_instance_broken(struct netblk_instance *inst,
						      char *msg, size_t size, bool *can_wait)
{
	struct net_device *nic = inst->nic, *adev = inst->addr_dev;
	struct block_device *bdev = inst->disk.bdev;
	u32 mtu = READ_ONCE(adev->mtu);
	const char *feature;

	/* unregistering: netblk_check_nic_leaving() comes first */
	*can_wait = false;
	if (!(nic->flags & IFF_UP) || !(adev->flags & IFF_UP)) {
		snprintf(msg, size, "%s went down", adev->name);
		*can_wait = true;
		return NETBLK_REASON_NIC_GONE;
	}
	if (!netblk_nic_has_addr(adev, inst->addr)) {
		snprintf(msg, size, "%s lost its address %pI4", adev->name, &inst->addr);
		*can_wait = true;
		return NETBLK_REASON_NIC_GONE;
	}
	if (mtu < inst->opt.mtu) {
		snprintf(msg, size, "%s's mtu fell to %u, below the instance's %u: start it with mtu=%u",
			 adev->name, mtu, inst->opt.mtu, mtu);
		*can_wait = true;
		return NETBLK_REASON_NIC_MTU;
	}
	if (netblk_monitor_xdp_dropped(nic)) {
		snprintf(msg, size, "%s dropped netblk's XDP program: netblkctl supervise adds it again",
			 nic->name);
		*can_wait = true;
		return NETBLK_REASON_NIC_GONE;
	}
	/*
	 * Failures while it waited, or not yet forgotten by the worker since,
	 * came from the NIC's absence: they do not count.
	 */
	if (test_bit(NETBLK_TX_FAILED, &inst->flags) && inst->state == NETBLK_STATE_SERVING &&
	    !netblk_instance_rearming(inst)) {
		netblk_xmit_failure_msg(inst, msg, size);
		return NETBLK_REASON_NIC_XMIT;
	}
	feature = netblk_nic_hides_vlans(nic);
	if (feature) {
		snprintf(msg, size, "%s strips VLAN tags from XDP now: ethtool -K %s %s off",
			 nic->name, nic->name, feature);
		return NETBLK_REASON_NIC_VLAN;
	}
	if (!(inst->handoff->flags & IFF_UP)) {
		snprintf(msg, size, "%s, the instance's own device, was taken down by hand",
			 inst->handoff->name);
		return NETBLK_REASON_HANDOFF_DOWN;
	}
	if (READ_ONCE(inst->bdev_dead) || test_bit(GD_DEAD, &bdev->bd_disk->state) ||
	    !disk_live(bdev->bd_disk)) {
		snprintf(msg, size, "%s was removed", inst->device);
		return NETBLK_REASON_DEVICE_GONE;
	}
	return 0;
}

static void netblk_announce_io_error(struct netblk_instance *inst)
{
	char msg[96];

	if (!test_and_clear_bit(NETBLK_IO_ERROR_PENDING, &inst->flags))
		return;
	if (time_before(jiffies, inst->io_error_announced + HZ))
		return;	/* the next error after the second is announced */
	inst->io_error_announced = jiffies;
	snprintf(msg, sizeof(msg), "%s failed a request at offset %llu", inst->device,
		 READ_ONCE(inst->io_error_offset));
	netblk_target_notify(inst, NETBLK_EVENT_IO_ERROR, 0, -EIO, msg);
}

/*
 * Its NIC, or the device its address is on, is being unregistered: the
 * instance lets go of both at once (netblk_nic_detach), serving, waiting or
 * already stopping for a disk that does not answer, and stops.  The kernel
 * tells the notifiers again each second until it has, which kicks the
 * reaper again: an instance still starting then is seen once it has.
 */
static void netblk_check_nic_leaving(struct netblk_instance *inst)
{
	struct net_device *dev = netblk_nic_leaving(inst);
	char msg[IFNAMSIZ + 16];
	u32 at_disk;

	if (!dev)
		return;
	at_disk = netblk_instance_at_disk(inst);
	snprintf(msg, sizeof(msg), "%s is going away", dev->name);
	if (at_disk)
		pr_info("port %u lets go of %s: it is going away; the answers to the %u requests still at %s are dropped\n",
			inst->port, dev->name, at_disk, inst->device);
	else
		pr_info("port %u lets go of %s: it is going away\n", inst->port, dev->name);
	netblk_nic_detach(inst);
	netblk_instance_stop(inst, NETBLK_REASON_NIC_GONE, msg);
}

static void netblk_check_instance(struct netblk_instance *inst)
{
	enum netblk_stop_reason reason;
	bool can_wait;
	char msg[128];

	netblk_check_nic_leaving(inst);
	if (inst->state == NETBLK_STATE_STOPPING) {
		/* released once drained; announced if that takes long */
		if (!netblk_instance_finish(inst) &&
		    netblk_instance_stopping_ms(inst) >= jiffies_to_msecs(NETBLK_STOP_WAIT))
			netblk_instance_linger(inst);
		return;
	}
	netblk_announce_io_error(inst);
	reason = netblk_instance_broken(inst, msg, sizeof(msg), &can_wait);
	if (!reason) {
		netblk_instance_resume(inst);	/* if it waited */
		return;
	}
	if (can_wait && inst->opt.nic_loss == NETBLK_NIC_LOSS_WAIT) {
		netblk_instance_wait_nic(inst, msg);
		return;
	}
	netblk_instance_stop(inst, reason, msg);
}

static void netblk_reap(struct work_struct *work)
{
	struct netblk_instance *inst, *next;

	mutex_lock(&netblk_lock);
	list_for_each_entry_safe(inst, next, &netblk_instances, node)
		netblk_check_instance(inst);
	if (!list_empty(&netblk_instances) && !netblk_unloading)
		schedule_delayed_work(&netblk_reaper, NETBLK_REAP_INTERVAL);
	mutex_unlock(&netblk_lock);
}

/*
 * The reopens that drop a NIC's program, where its driver does: a close, and
 * an MTU change while it is open.
 */
static void netblk_track_xdp_drops(unsigned long event, struct net_device *dev)
{
	switch (event) {
	case NETDEV_DOWN:
		if (netblk_nic_drops_xdp(dev))
			netblk_note_reopen(dev);
		break;
	case NETDEV_CHANGEMTU:
		if (netblk_nic_drops_xdp(dev) && netif_running(dev))
			netblk_note_reopen(dev);
		break;
	case NETDEV_UNREGISTER:
		xa_erase(&netblk_xdp_dropped, dev->ifindex);	/* the number may be reused */
		break;
	}
}

static int netblk_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	/*
	 * What may stop an instance, make it wait or let it serve again: the
	 * reaper looks.  The MTU and MAC replies use are the worker's to
	 * follow, each round.
	 */
	netblk_track_xdp_drops(event, netdev_notifier_info_to_dev(ptr));
	switch (event) {
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_UNREGISTER:
	case NETDEV_CHANGENAME:
	case NETDEV_CHANGEMTU:
	case NETDEV_FEAT_CHANGE:
	case NETDEV_CHANGEUPPER:
		netblk_monitor_kick();
		break;
	}
	return NOTIFY_DONE;
}

static int netblk_inetaddr_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	if (event == NETDEV_DOWN || event == NETDEV_UP)
		netblk_monitor_kick();
	return NOTIFY_DONE;
}

static struct notifier_block netblk_netdev_notifier = {
	.notifier_call = netblk_netdev_event,
};

static struct notifier_block netblk_inetaddr_notifier = {
	.notifier_call = netblk_inetaddr_event,
};

int netblk_monitor_init(void)
{
	int err;

	netblk_instance_set_reaper(&netblk_reaper);
	err = register_netdevice_notifier(&netblk_netdev_notifier);
	if (err)
		return err;
	err = register_inetaddr_notifier(&netblk_inetaddr_notifier);
	if (err)
		unregister_netdevice_notifier(&netblk_netdev_notifier);
	return err;
}

/* After every instance has stopped: nothing can kick the reaper any more. */
void netblk_monitor_exit(void)
{
	unregister_inetaddr_notifier(&netblk_inetaddr_notifier);
	unregister_netdevice_notifier(&netblk_netdev_notifier);
	cancel_delayed_work_sync(&netblk_reaper);
	xa_destroy(&netblk_xdp_dropped);
}
