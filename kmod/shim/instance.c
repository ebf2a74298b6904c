// SPDX-License-Identifier: GPL-2.0
/*
 * Starting and stopping an instance: the block device claim, the NIC and its
 * address, the UDP port, the worker thread.  Every refusal says, in the
 * extack, what the user should change.  Resources are taken in one order and
 * released in the reverse one, on the error paths as on stop.
 */
#include "netblk.h"

#include <linux/blkdev.h>
#include <linux/cpumask.h>
#include <linux/file.h>
#include <linux/inetdevice.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <net/ip_fib.h>
#include <net/sock.h>


LIST_HEAD(netblk_instances);
DEFINE_MUTEX(netblk_lock);

struct netblk_instance *netblk_instance_find(u16 port)
{
	struct netblk_instance *inst;

	lockdep_assert_held(&netblk_lock);
	list_for_each_entry(inst, &netblk_instances, node)
		if (inst->port == port)
			return inst;
	return NULL;
}

u64 netblk_instance_uptime_ms(const struct netblk_instance *inst)
{
	return div_u64(ktime_get_boottime_ns() - inst->started_ns, NSEC_PER_MSEC);
}

/* ---- the NIC ---- */

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

/* The NIC's first primary IPv4 address, or 0. */
static __be32 netblk_nic_addr(struct net_device *dev)
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

bool netblk_nic_has_addr(struct net_device *nic, __be32 addr)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	bool found = false;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(nic);
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

static int netblk_take_nic(struct netblk_instance *inst,
			   const struct netblk_start_params *p,
			   struct netlink_ext_ack *extack)
{
	struct net_device *dev;

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

	if (!(dev->flags & IFF_UP) || !netif_running(dev)) {
		NL_SET_ERR_MSG_FMT(extack, "%s is down: bring it up (ip link set %s up) first",
				   dev->name, dev->name);
		return -ENETDOWN;
	}
	inst->addr = netblk_nic_addr(dev);
	if (!inst->addr) {
		NL_SET_ERR_MSG_FMT(extack, "%s has no IPv4 address: add one, or pick another NIC with dev=",
				   dev->name);
		return -EADDRNOTAVAIL;
	}

	inst->mtu = p->has_mtu ? p->mtu : READ_ONCE(dev->mtu);
	if (inst->mtu < NETBLK_MTU_MIN || inst->mtu > READ_ONCE(dev->mtu)) {
		NL_SET_ERR_MSG_FMT(extack, "mtu=%u is out of range: %u to %u (the mtu of %s)",
				   inst->mtu, NETBLK_MTU_MIN, READ_ONCE(dev->mtu), dev->name);
		return -EINVAL;
	}
	return 0;
}

static void netblk_put_nic(struct netblk_instance *inst)
{
	if (inst->nic)
		netdev_put(inst->nic, &inst->nic_tracker);
	inst->nic = NULL;
}

/* ---- the UDP port ---- */

/*
 * Bind a kernel socket to the port on every address: refused if any socket
 * has it (on the NIC's address or any other), and while the instance serves,
 * no other socket can take it.
 */
static int netblk_take_port(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_ANY),
		.sin_port = htons(inst->port),
	};
	struct socket *sock;
	int err;

	err = sock_create_kern(&init_net, AF_INET, SOCK_DGRAM, IPPROTO_UDP, &sock);
	if (err) {
		NL_SET_ERR_MSG(extack, "cannot create the socket that holds the port");
		return err;
	}
	/* It only holds the port; keep what the stack might queue to it small. */
	sock->sk->sk_rcvbuf = SOCK_MIN_RCVBUF;

	err = kernel_bind(sock, (struct sockaddr *)&sin, sizeof(sin));
	if (err) {
		sock_release(sock);
		if (err == -EADDRINUSE)
			NL_SET_ERR_MSG_FMT(extack, "UDP port %u is in use by a socket on this host: pick another port",
					   inst->port);
		else
			NL_SET_ERR_MSG_FMT(extack, "cannot bind UDP port %u", inst->port);
		return err;
	}
	inst->port_sock = sock;
	return 0;
}

static void netblk_put_port(struct netblk_instance *inst)
{
	if (inst->port_sock)
		sock_release(inst->port_sock);
	inst->port_sock = NULL;
}

/* ---- the block device ---- */

static void netblk_bdev_error(const char *path, int err, bool read_only,
			      struct netlink_ext_ack *extack)
{
	switch (err) {
	case -ENOENT:
		NL_SET_ERR_MSG_FMT(extack, "no such device: %s", path);
		break;
	case -ENOTBLK:
		NL_SET_ERR_MSG_FMT(extack, "%s is not a block device", path);
		break;
	case -ENXIO:
	case -ENODEV:
		NL_SET_ERR_MSG_FMT(extack, "%s has no disk behind it (removed, or no media)", path);
		break;
	case -EBUSY:
		NL_SET_ERR_MSG(extack, "the device is in use: mounted, or claimed by a holder (a filesystem, md, dm, netblk) of it, its whole disk or one of its partitions; stop that user, or serve it ro");
		break;
	case -EACCES:
	case -EROFS:
	case -EPERM:
		NL_SET_ERR_MSG_FMT(extack, "%s cannot be opened %s: serve it ro", path,
				   read_only ? "for reading" : "for writing");
		break;
	default:
		NL_SET_ERR_MSG_FMT(extack, "cannot open %s (error %d)", path, err);
		break;
	}
}

/*
 * Read-write claims the device exclusively, with the instance as holder: the
 * kernel then refuses a mount, another exclusive holder, and the whole disk
 * against its partitions, until the claim is dropped.  Read-only takes no
 * claim, so it may serve a mounted device.
 */
static int netblk_open_bdev(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	blk_mode_t mode = BLK_OPEN_READ | (inst->read_only ? 0 : BLK_OPEN_WRITE);
	struct block_device *bdev;
	struct file *file;

	file = bdev_file_open_by_path(inst->device, mode, inst->read_only ? NULL : inst,
				      inst->read_only ? NULL : &netblk_holder_ops);
	if (IS_ERR(file)) {
		netblk_bdev_error(inst->device, PTR_ERR(file), inst->read_only, extack);
		return PTR_ERR(file);
	}
	inst->bdev_file = file;
	bdev = file_bdev(file);
	inst->size_bytes = bdev_nr_bytes(bdev);
	inst->sector_size = bdev_logical_block_size(bdev);
	return 0;
}

static void netblk_close_bdev(struct netblk_instance *inst)
{
	/* bdev_fput drops the exclusive claim now, not at the next task_work. */
	if (inst->bdev_file)
		bdev_fput(inst->bdev_file);
	inst->bdev_file = NULL;
}

/* ---- the core ---- */

static int netblk_create_core(struct netblk_instance *inst, struct netlink_ext_ack *extack)
{
	struct block_device *bdev = file_bdev(inst->bdev_file);
	struct netblk_core_config config = {
		.size_bytes = inst->size_bytes,
		.sector_size = inst->sector_size,
		.mtu = inst->mtu,
		.slots = NETBLK_SLOTS,
		.nr_cpus = nr_cpu_ids,
		.local_ip = (__force u32)inst->addr,
		.port = inst->port,
		.read_only = inst->read_only,
		.volatile_cache = bdev_write_cache(bdev),
		.fua = bdev_fua(bdev),
		/* payloads the disk cannot DMA from in place are copied, counted */
		.dma_align_mask = bdev_dma_alignment(bdev),
		.shim = inst,
	};
	int err;

	if (!netblk_core_max_io_for_mtu(inst->mtu, inst->sector_size)) {
		NL_SET_ERR_MSG_FMT(extack, "%u-byte sectors do not fit a datagram at mtu %u (max %u): raise mtu=",
				   inst->sector_size, inst->mtu,
				   inst->mtu - NETBLK_DATAGRAM_OVERHEAD);
		return -EMSGSIZE;
	}
	err = netblk_core_create(&config, &inst->core);
	if (err)
		NL_SET_ERR_MSG(extack, "out of memory for the instance's slots");
	return err;
}

/* ---- the worker ---- */

/* Instances take the online CPUs from the highest down; the least used first. */
static u32 netblk_pick_cpu(void)
{
	unsigned int cpu, best = nr_cpu_ids, best_users = UINT_MAX;
	struct netblk_instance *inst;

	for (cpu = nr_cpu_ids; cpu-- > 0;) {
		unsigned int users = 0;

		if (!cpu_online(cpu))
			continue;
		list_for_each_entry(inst, &netblk_instances, node)
			users += inst->cpu == cpu;
		if (users < best_users) {
			best = cpu;
			best_users = users;
		}
	}
	return best < nr_cpu_ids ? best : raw_smp_processor_id();
}

/* ---- start and stop ---- */

static int netblk_check_params(const struct netblk_start_params *p,
			       struct netlink_ext_ack *extack)
{
	if (p->port < NETBLK_PORT_MIN) {
		NL_SET_ERR_MSG_FMT(extack, "port %u is below %u (the well-known ports): pick %u or above",
				   p->port, NETBLK_PORT_MIN, NETBLK_PORT_MIN);
		return -EINVAL;
	}
	if (p->poll_us > NETBLK_POLL_US_MAX) {
		NL_SET_ERR_MSG_FMT(extack, "poll=%u is out of range: 0 to %u microseconds",
				   p->poll_us, NETBLK_POLL_US_MAX);
		return -EINVAL;
	}
	if (p->has_cpu && (p->cpu >= nr_cpu_ids || !cpu_online(p->cpu))) {
		NL_SET_ERR_MSG_FMT(extack, "cpu=%u is not an online CPU (online: %*pbl)",
				   p->cpu, cpumask_pr_args(cpu_online_mask));
		return -EINVAL;
	}
	if (netblk_instance_find(p->port)) {
		NL_SET_ERR_MSG_FMT(extack, "port %u is already served by netblk: stop that instance or pick another port",
				   p->port);
		return -EADDRINUSE;
	}
	return 0;
}

/* What a drained instance still holds is a leak: say so, and count it. */
static void netblk_check_drained(struct netblk_instance *inst)
{
	struct netblk_held held;

	if (!inst->core)
		return;
	netblk_core_held(inst->core, &held);
	if (!held.slots && !held.frames)
		return;
	pr_warn("port %u stopped holding %u slots and %llu frames\n", inst->port,
		held.slots, held.frames);
	netblk_leaked_slots += held.slots;
	netblk_leaked_frames += held.frames;
}

static void netblk_instance_free(struct netblk_instance *inst)
{
	netblk_handoff_destroy(inst);
	netblk_worker_stop(inst);
	netblk_check_drained(inst);
	netblk_xdp_release(inst);
	netblk_buffers_exit(inst);
	netblk_disk_exit(inst);
	netblk_core_destroy(inst->core);
	netblk_close_bdev(inst);
	netblk_put_port(inst);
	netblk_put_nic(inst);
	kfree(inst);
}

int netblk_instance_start(const struct netblk_start_params *p,
			  struct netlink_ext_ack *extack,
			  struct netblk_instance **out)
{
	struct netblk_instance *inst;
	int err;

	lockdep_assert_held(&netblk_lock);
	if (netblk_unloading) {
		NL_SET_ERR_MSG(extack, "netblk is being unloaded");
		return -ESHUTDOWN;
	}
	err = netblk_check_params(p, extack);
	if (err)
		return err;

	inst = kzalloc(sizeof(*inst), GFP_KERNEL);
	if (!inst)
		return -ENOMEM;
	strscpy(inst->device, p->device, sizeof(inst->device));
	inst->port = p->port;
	inst->read_only = p->read_only;
	inst->poll_us = p->poll_us;
	inst->cpu = p->has_cpu ? p->cpu : netblk_pick_cpu();

	/* Each step is undone by netblk_instance_free, in reverse. */
	err = netblk_take_nic(inst, p, extack);
	if (err)
		goto fail;
	err = netblk_take_port(inst, extack);
	if (err)
		goto fail;
	err = netblk_open_bdev(inst, extack);
	if (err)
		goto fail;
	err = netblk_create_core(inst, extack);
	if (err)
		goto fail;
	err = netblk_disk_init(inst);
	if (err) {
		NL_SET_ERR_MSG(extack, "out of memory for the instance's bios");
		goto fail;
	}
	err = netblk_buffers_init(inst);
	if (err) {
		NL_SET_ERR_MSG(extack, "out of memory for the instance's frame buffers");
		goto fail;
	}
	err = netblk_xdp_hold(inst, p->xdp_link_fd, extack);
	if (err)
		goto fail;
	err = netblk_worker_start(inst, extack);
	if (err)
		goto fail;
	/* Last: from here on the NIC's program steers the port's frames to it. */
	err = netblk_handoff_create(inst, extack);
	if (err)
		goto fail;

	inst->started_ns = ktime_get_boottime_ns();
	list_add_tail(&inst->node, &netblk_instances);
	*out = inst;
	return 0;

fail:
	netblk_instance_free(inst);
	return err;
}

void netblk_instance_stop(struct netblk_instance *inst)
{
	lockdep_assert_held(&netblk_lock);
	list_del(&inst->node);
	netblk_instance_free(inst);
}
