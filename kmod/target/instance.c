// SPDX-License-Identifier: GPL-2.0
/*
 * Starting and stopping an instance: the block device claim, the NIC and its
 * address (nic.c), the UDP port, the worker thread.  Every refusal says, in
 * the extack, what the user should change.  Resources are taken in one order
 * and released in the reverse one, on the error paths as on stop.
 *
 * Stopping is in two steps, so that a disk that does not answer holds up
 * nothing but its own instance: netblk_instance_stop() takes the port away
 * (nothing new arrives) and tells the worker to drain -- under netblk_lock,
 * which that does not wait for -- and netblk_instance_finish() releases the
 * rest once the worker has drained.  In between, whoever asked to stop waits
 * for the drain without the lock (netblk_instance_wait), bounded; an instance
 * still draining after that is "stopping" in LIST, announced once, and holds
 * a reference to the module (rmmod says it is in use) until its disk answers
 * and the reaper releases it.
 */
#include "target.h"

#include <linux/blkdev.h>
#include <linux/cpumask.h>
#include <linux/file.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/notifier.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <net/sock.h>


LIST_HEAD(netblk_instances);

/*
 * What stopped instances still held when they were gone: 0 unless something
 * leaked.  Written under netblk_lock when an instance stops.
 */
static unsigned long netblk_leaked_slots;
static unsigned long netblk_leaked_frames;
module_param_named(leaked_slots, netblk_leaked_slots, ulong, 0444);
MODULE_PARM_DESC(leaked_slots, "slots stopped instances did not get back (0 unless a bug)");
module_param_named(leaked_frames, netblk_leaked_frames, ulong, 0444);
MODULE_PARM_DESC(leaked_frames, "frames stopped instances did not release (0 unless a bug)");

/*
 * What happens to instances (enum netblk_event), for whoever listens: the
 * netlink events group (event.c).  Raised under netblk_lock, so no listener
 * may take it.
 */
static BLOCKING_NOTIFIER_HEAD(netblk_target_chain);

int netblk_target_register_notifier(struct notifier_block *nb)
{
	return blocking_notifier_chain_register(&netblk_target_chain, nb);
}

void netblk_target_unregister_notifier(struct notifier_block *nb)
{
	blocking_notifier_chain_unregister(&netblk_target_chain, nb);
}

void netblk_target_notify(const struct netblk_instance *inst, enum netblk_event event,
			  enum netblk_stop_reason reason, int err, const char *msg)
{
	struct netblk_target_event ev = {
		.inst = inst, .reason = reason, .err = err, .msg = msg,
	};

	blocking_notifier_call_chain(&netblk_target_chain, event, &ev);
}

/* A START refused: what was asked, and why (@msg, the extack's, may be NULL). */
void netblk_target_notify_failed(const struct netblk_start_params *p, int err, const char *msg)
{
	struct netblk_target_event ev = { .params = p, .err = err, .msg = msg };

	blocking_notifier_call_chain(&netblk_target_chain, NETBLK_EVENT_FAILED, &ev);
}

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

u64 netblk_instance_stopping_ms(const struct netblk_instance *inst)
{
	if (inst->state != NETBLK_STATE_STOPPING)
		return 0;
	return div_u64(ktime_get_boottime_ns() - inst->stopping_ns, NSEC_PER_MSEC);
}

u64 netblk_instance_waiting_ms(const struct netblk_instance *inst)
{
	if (inst->state != NETBLK_STATE_WAITING)
		return 0;
	return div_u64(ktime_get_boottime_ns() - inst->waiting_ns, NSEC_PER_MSEC);
}

/*
 * Its NIC went down, lost the address or the MTU (monitor.c): wait for it,
 * holding the disk, the port and the XDP program -- nothing is torn down,
 * so that serving again is only a state.  @why is said in LIST and on the
 * events group, and kept up to date while it waits.
 */
void netblk_instance_wait_nic(struct netblk_instance *inst, const char *why)
{
	lockdep_assert_held(&netblk_lock);
	if (inst->state == NETBLK_STATE_WAITING &&
	    !strncmp(inst->waiting_for, why, sizeof(inst->waiting_for) - 1))
		return;
	/* waiting already, for something else now: said again */
	if (inst->state == NETBLK_STATE_SERVING) {
		inst->state = NETBLK_STATE_WAITING;
		inst->waiting_ns = ktime_get_boottime_ns();
	} else if (inst->state != NETBLK_STATE_WAITING) {
		return;
	}
	strscpy(inst->waiting_for, why, sizeof(inst->waiting_for));
	pr_info("port %u waits: %s\n", inst->port, why);
	netblk_target_notify(inst, NETBLK_EVENT_WAITING, 0, 0, why);
}

/*
 * The NIC is back as it was: serve again.  The NIC may have failed replies
 * while it was away; the worker, the only writer of those counts, is told
 * to forget them before the reaper looks at them again.
 */
void netblk_instance_resume(struct netblk_instance *inst)
{
	struct netblk_queue *q;
	char msg[64];

	lockdep_assert_held(&netblk_lock);
	if (inst->state != NETBLK_STATE_WAITING)
		return;
	snprintf(msg, sizeof(msg), "%s is back after %llu ms", inst->nic->name,
		 netblk_instance_waiting_ms(inst));
	netblk_for_each_queue(q, inst)
		WRITE_ONCE(q->tx_rearm, true);
	inst->state = NETBLK_STATE_SERVING;
	inst->waiting_for[0] = '\0';
	pr_info("port %u serves again: %s\n", inst->port, msg);
	netblk_target_notify(inst, NETBLK_EVENT_RESUMED, 0, 0, msg);
	netblk_for_each_queue(q, inst)
		netblk_worker_kick(q);
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

/* The reaper's work (monitor.c's), which each instance keeps to kick it by. */
static struct delayed_work *netblk_reaper_work;

void netblk_instance_set_reaper(struct delayed_work *reaper)
{
	netblk_reaper_work = reaper;
}

#ifdef NETBLK_HAVE_HOLDER_OPS
/*
 * A read-write instance's claim: the kernel tells the holder its disk is
 * gone.  Called with bd_holder_lock held, which the holder must release.
 */
static void netblk_bdev_mark_dead(struct block_device *bdev, bool surprise)
	__releases(&bdev->bd_holder_lock)
{
	struct netblk_instance *inst = bdev->bd_holder;

	WRITE_ONCE(inst->bdev_dead, true);
	mutex_unlock(&bdev->bd_holder_lock);
	netblk_reaper_kick(inst);
}

static const struct blk_holder_ops netblk_holder_ops = {
	.mark_dead = netblk_bdev_mark_dead,
};
#define NETBLK_HOLDER_OPS (&netblk_holder_ops)
#else
#define NETBLK_HOLDER_OPS NULL
#endif


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
	struct block_device *bdev;
	int err;

	err = netblk_bdev_open(&inst->disk, inst->device, inst->opt.read_only ? NULL : inst,
			       NETBLK_HOLDER_OPS);
	if (err) {
		netblk_bdev_error(inst->device, err, inst->opt.read_only, extack);
		return err;
	}
	bdev = inst->disk.bdev;
	snprintf(inst->disk_name, sizeof(inst->disk_name), "%pg", bdev);
	inst->size_bytes = bdev_nr_bytes(bdev);
	inst->sector_size = bdev_logical_block_size(bdev);
	return 0;
}

static void netblk_close_bdev(struct netblk_instance *inst)
{
	netblk_bdev_close(&inst->disk);
}

/* ---- the core ---- */

/*
 * INFO's identity of the device: its GPT partition UUID where it has one
 * (the same after a reboot), else its device number and first sector (the
 * same while the server runs).  A client that finds another after a restart
 * fails its I/O rather than write to the wrong disk.
 */
static u64 netblk_export_id(struct block_device *bdev)
{
	struct {
		u32 dev;
		u32 pad;
		u64 start;
	} number = { .dev = bdev->bd_dev, .start = bdev->bd_start_sect };
	const char *uuid = bdev->bd_meta_info ? bdev->bd_meta_info->uuid : NULL;

	if (uuid && uuid[0])
		return netblk_core_export_id(uuid, strnlen(uuid, PARTITION_META_INFO_UUIDLTH));
	return netblk_core_export_id(&number, sizeof(number));
}

/*
 * A core for each queue.  sessions= is shared out among them (a session is
 * one queue's for its life), and per-source= holds in all of them together:
 * RSS spreads one address's ports over every queue.
 */
static int netblk_create_cores(struct netblk_instance *inst, const struct netblk_start_params *p,
			       struct netlink_ext_ack *extack)
{
	struct block_device *bdev = inst->disk.bdev;
	u32 sessions = DIV_ROUND_UP(inst->opt.sessions, inst->nr_queues);
	struct netblk_queue *q;
	struct netblk_core_config config = {
		.size_bytes = inst->size_bytes,
		.sector_size = inst->sector_size,
		.mtu = inst->opt.mtu,
		.slots = NETBLK_SLOTS,
		.nr_cpus = nr_cpu_ids,
		.local_ip = (__force u32)inst->addr,
		.port = inst->port,
		.vlan = inst->opt.vlan,
		.link_mtu = READ_ONCE(inst->addr_dev->mtu),
		.read_only = inst->opt.read_only,
		.volatile_cache = bdev_write_cache(bdev),
		.fua = bdev_fua(bdev),
		/* payloads the disk cannot DMA from in place are copied, counted */
		.dma_align_mask = bdev_dma_alignment(bdev),
		/* a READ of several datagrams in one disk I/O, where the NIC can send it */
		.gather_page = netblk_nic_sends_frags(inst) ? PAGE_SIZE : 0,
		.physical_block_size = bdev_physical_block_size(bdev),
		.io_opt = bdev_io_opt(bdev),
		.discard_granularity = bdev_discard_granularity(bdev),
		.max_discard_bytes = (u64)bdev_max_discard_sectors(bdev) << SECTOR_SHIFT,
		.max_write_zeroes_bytes = (u64)bdev_write_zeroes_sectors(bdev) << SECTOR_SHIFT,
		.queues = inst->nr_queues,
		.sessions = sessions,
		.sessions_per_source = inst->opt.per_source,
		.options = inst->opt,
		.export_id = netblk_export_id(bdev),
		.keyed = p->auth != NETBLK_AUTH_NONE,
		.auth_data = p->auth == NETBLK_AUTH_FULL,
		.disk = &netblk_disk_ops,
		.transport = inst->transport,
	};
	int err = 0;

	BUILD_BUG_ON(NETBLK_KEY_SIZE != NETBLK_KEY_BYTES);
	/* a new secret each start: no cookie or session of before is good */
	get_random_bytes(config.secret, sizeof(config.secret));
	if (p->has_key)
		memcpy(config.key, p->key, sizeof(config.key));
	memcpy(config.local_mac, inst->addr_dev->dev_addr, ETH_ALEN);
	if (!netblk_core_max_io_for_mtu(inst->opt.mtu, inst->sector_size)) {
		/* the NIC's MTU too: mtu= is never above it */
		NL_SET_ERR_MSG_FMT(extack, "%u-byte sectors need mtu=%u or more, not %u (and a NIC that carries it)",
				   inst->sector_size, inst->sector_size + NETBLK_DATAGRAM_OVERHEAD,
				   inst->opt.mtu);
		return -EMSGSIZE;
	}
	err = netblk_core_group_create(inst->nr_queues, &inst->sessions_lock, &inst->sessions);
	config.group = inst->sessions;
	netblk_for_each_queue(q, inst) {
		if (err)
			break;
		config.queue = q->index;
		config.owner = q;
		err = netblk_core_create(&config, &q->core);
	}
	memzero_explicit(config.key, sizeof(config.key));
	memzero_explicit(config.secret, sizeof(config.secret));
	if (err)
		NL_SET_ERR_MSG(extack, "out of memory for the instance's slots and sessions");
	return err;
}

/* ---- the queues and their CPUs ---- */

static int netblk_alloc_queues(struct netblk_instance *inst, u32 n)
{
	u32 i;

	inst->queues = kcalloc(n, sizeof(*inst->queues), GFP_KERNEL);
	inst->cpu_queue = kcalloc(nr_cpu_ids, sizeof(*inst->cpu_queue), GFP_KERNEL);
	if (!inst->queues || !inst->cpu_queue)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		inst->queues[i].inst = inst;
		inst->queues[i].index = i;
		init_completion(&inst->queues[i].drained);
	}
	inst->nr_queues = n;
	inst->opt.queues = n;
	return 0;
}

/* Workers of all instances on @cpu. */
static u32 netblk_cpu_users(u32 cpu)
{
	struct netblk_instance *other;
	struct netblk_queue *q;
	u32 users = 0;

	list_for_each_entry(other, &netblk_instances, node)
		netblk_for_each_queue(q, other)
			users += q->cpu == cpu;
	return users;
}

/* Of @mask, the CPU fewest workers are on, the highest first; taken off @mask. */
static u32 netblk_take_cpu(struct cpumask *mask)
{
	unsigned int cpu, best = nr_cpu_ids, best_users = UINT_MAX;

	for (cpu = nr_cpu_ids; cpu-- > 0;) {
		u32 users;

		if (!cpumask_test_cpu(cpu, mask))
			continue;
		users = netblk_cpu_users(cpu);
		if (users < best_users) {
			best = cpu;
			best_users = users;
		}
	}
	if (best < nr_cpu_ids)
		cpumask_clear_cpu(best, mask);
	return best;
}

/*
 * How many queues: queues=, or as many as the NIC has RX queues (its RSS
 * spreads flows over that many CPUs), at most the CPUs it can transmit XDP
 * frames from -- each queue's worker on one of those of its own.
 */
static int netblk_count_queues(struct netblk_instance *inst, const struct netblk_start_params *p,
			       const struct cpumask *mask, struct netlink_ext_ack *extack)
{
	u32 cpus = cpumask_weight(mask);
	u32 rx = max(READ_ONCE(inst->nic->real_num_rx_queues), 1u);

	if (!cpus) {
		NL_SET_ERR_MSG_FMT(extack, "%s (%s) has no XDP transmit queue on any online CPU",
				   inst->nic->name, inst->driver);
		return -ENXIO;
	}
	if (!netblk_start_given(p, QUEUES))
		return min3(cpus, rx, (u32)NETBLK_QUEUES_MAX);
	if (p->opt.queues > cpus) {
		/* a worker a CPU (netlink cuts a message at 80 bytes) */
		NL_SET_ERR_MSG_FMT(extack, "queues=%u: %s sends XDP from %u CPUs (%*pbl): at most queues=%u",
				   p->opt.queues, inst->nic->name, cpus, cpumask_pr_args(mask), cpus);
		return -EINVAL;
	}
	return p->opt.queues;
}

/*
 * Each queue's worker on a CPU of its own the NIC can transmit XDP frames
 * from, the least used first (cpu= is the first queue's); each CPU's
 * arrivals not of a session go to the queue on it, or one by its number.
 */
static int netblk_pick_cpus(struct netblk_instance *inst, const struct netblk_start_params *p,
			    struct netlink_ext_ack *extack)
{
	struct netblk_queue *q;
	cpumask_var_t mask;
	int n, err;
	u32 cpu;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	netblk_nic_xmit_cpus(inst, mask);
	n = netblk_count_queues(inst, p, mask, extack);
	err = n < 0 ? n : netblk_alloc_queues(inst, n);
	if (err)
		goto out;
	netblk_for_each_queue(q, inst) {
		if (q->index == 0 && netblk_start_given(p, CPU)) {
			err = netblk_nic_check_cpu(inst, p->opt.cpu, extack);
			if (err)
				goto out;
			q->cpu = p->opt.cpu;
			cpumask_clear_cpu(q->cpu, mask);
			continue;
		}
		q->cpu = netblk_take_cpu(mask);
		if (q->cpu >= nr_cpu_ids) {
			NL_SET_ERR_MSG_FMT(extack, "queues=%u: %s has no CPU left for queue %u beside cpu=%u",
					   inst->nr_queues, inst->nic->name, q->index, p->opt.cpu);
			err = -EINVAL;
			goto out;
		}
	}
	inst->opt.cpu = inst->queues[0].cpu;
	for_each_possible_cpu(cpu)
		inst->cpu_queue[cpu] = cpu % inst->nr_queues;
	netblk_for_each_queue(q, inst)
		inst->cpu_queue[q->cpu] = q->index;
out:
	free_cpumask_var(mask);
	return err;
}

/* ---- start and stop ---- */

static int netblk_check_allow(const struct netblk_start_params *p,
			      struct netlink_ext_ack *extack)
{
	u32 i;

	for (i = 0; i < p->nr_allow; i++) {
		const struct netblk_prefix *a = &p->allow[i];
		__be32 mask = a->len ? htonl(~0u << (32 - a->len)) : 0;

		if (a->len > 32) {
			NL_SET_ERR_MSG_FMT(extack, "allow=: a prefix of %u bits: 0 to 32", a->len);
			return -EINVAL;
		}
		if (a->addr & ~mask) {
			NL_SET_ERR_MSG_FMT(extack, "allow=%pI4/%u has host bits set: %pI4/%u?",
					   &a->addr, a->len, &(__be32){ a->addr & mask }, a->len);
			return -EINVAL;
		}
	}
	return 0;
}

static int netblk_check_params(const struct netblk_start_params *p,
			       struct netlink_ext_ack *extack)
{
	struct netblk_instance *other;

	if (p->port < NETBLK_PORT_MIN) {
		NL_SET_ERR_MSG_FMT(extack, "port %u is below %u (the well-known ports): pick %u or above",
				   p->port, NETBLK_PORT_MIN, NETBLK_PORT_MIN);
		return -EINVAL;
	}
	if (p->opt.poll_us > NETBLK_POLL_US_MAX) {
		NL_SET_ERR_MSG_FMT(extack, "poll=%u is out of range: 0 to %u microseconds",
				   p->opt.poll_us, NETBLK_POLL_US_MAX);
		return -EINVAL;
	}
	if (netblk_start_given(p, CPU) && (p->opt.cpu >= nr_cpu_ids || !cpu_online(p->opt.cpu))) {
		NL_SET_ERR_MSG_FMT(extack, "cpu=%u is not an online CPU (online: %*pbl)",
				   p->opt.cpu, cpumask_pr_args(cpu_online_mask));
		return -EINVAL;
	}
	other = netblk_instance_find(p->port);
	if (other && other->state == NETBLK_STATE_STOPPING) {
		NL_SET_ERR_MSG_FMT(extack, "port %u's last instance is still stopping, waiting for its disk (netblkctl list): pick another port",
				   p->port);
		return -EADDRINUSE;
	}
	if (other) {
		NL_SET_ERR_MSG_FMT(extack, "port %u is already served by netblk: stop that instance or pick another port",
				   p->port);
		return -EADDRINUSE;
	}
	return netblk_check_allow(p, extack);
}

/* What a drained instance still holds is a leak: say so, and count it. */
static void netblk_check_drained(struct netblk_instance *inst)
{
	struct netblk_held held;
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst) {
		if (!q->core)
			continue;
		netblk_core_held(q->core, &held);
		if (!held.slots && !held.frames)
			continue;
		pr_warn("port %u queue %u stopped holding %u slots and %llu frames\n", inst->port,
			q->index, held.slots, held.frames);
		netblk_leaked_slots += held.slots;
		netblk_leaked_frames += held.frames;
	}
}

/* Requests its queues have at the disk. */
u32 netblk_instance_at_disk(const struct netblk_instance *inst)
{
	const struct netblk_queue *q;
	u32 at_disk = 0;

	netblk_for_each_queue(q, inst)
		at_disk += netblk_core_at_disk(q->core);
	return at_disk;
}

/* Its counters: every queue's, summed (all are counts or levels). */
void netblk_instance_read_stats(const struct netblk_instance *inst, struct netblk_stats *s)
{
	const struct netblk_queue *q;
	struct netblk_stats one;

	memset(s, 0, sizeof(*s));
	netblk_for_each_queue(q, inst) {
		netblk_core_read_stats(q->core, &one);
		netblk_stats_add(s, &one);
	}
}

/* Every queue's worker has drained. */
bool netblk_instance_drained(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst)
		if (!completion_done(&q->drained))
			return false;
	return true;
}

/* A queue has not yet forgotten the NIC's failures of before it resumed. */
bool netblk_instance_rearming(const struct netblk_instance *inst)
{
	const struct netblk_queue *q;

	netblk_for_each_queue(q, inst)
		if (READ_ONCE(q->tx_rearm))
			return true;
	return false;
}

/* What the port and the NIC give it: gone first when it stops. */
static void netblk_instance_unhook(struct netblk_instance *inst)
{
	inst->transport->close(inst);
}

/* The rest, once nothing is at the disk. */
static void netblk_instance_release(struct netblk_instance *inst)
{
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst)
		netblk_worker_stop(q);
	netblk_check_drained(inst);
	inst->transport->exit(inst);
	netblk_disk_exit(inst);
	netblk_for_each_queue(q, inst) {
		netblk_core_destroy(q->core);
		q->core = NULL;
	}
	netblk_core_group_destroy(inst->sessions);
	inst->sessions = NULL;
	netblk_close_bdev(inst);
	netblk_put_port(inst);
	netblk_nic_put(inst);
}

static void netblk_instance_free(struct kref *ref)
{
	struct netblk_instance *inst = container_of(ref, struct netblk_instance, ref);

	kfree(inst->cpu_queue);
	kfree(inst->queues);
	kfree(inst);
}

void netblk_instance_put(struct netblk_instance *inst)
{
	kref_put(&inst->ref, netblk_instance_free);
}

static void netblk_instance_init(struct netblk_instance *inst, const struct netblk_start_params *p)
{
	kref_init(&inst->ref);
	spin_lock_init(&inst->sessions_lock);
	inst->reaper = netblk_reaper_work;
	inst->transport = &netblk_xdp_ops;
	inst->state = NETBLK_STATE_SERVING;
	strscpy(inst->device, p->device, sizeof(inst->device));
	inst->port = p->port;
	inst->opt = p->opt;	/* mtu, cpu and vlan are resolved on the way */
	inst->auth = p->auth;
	inst->nr_allow = p->nr_allow;
	memcpy(inst->allow, p->allow, p->nr_allow * sizeof(p->allow[0]));
}

int netblk_instance_start(const struct netblk_start_params *p,
			  struct netlink_ext_ack *extack,
			  struct netblk_instance **out)
{
	struct netblk_instance *inst;
	struct netblk_queue *q;
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
	netblk_instance_init(inst, p);

	/* Each step is undone in reverse by netblk_instance_unhook and _release. */
	err = netblk_nic_take(inst, p, extack);
	if (err)
		goto fail;
	err = netblk_pick_cpus(inst, p, extack);
	if (err)
		goto fail;
	err = netblk_take_port(inst, extack);
	if (err)
		goto fail;
	err = netblk_open_bdev(inst, extack);
	if (err)
		goto fail;
	err = netblk_create_cores(inst, p, extack);
	if (err)
		goto fail;
	err = netblk_disk_init(inst);
	if (err) {
		NL_SET_ERR_MSG(extack, "out of memory for the instance's bios");
		goto fail;
	}
	err = inst->transport->init(inst);
	if (err) {
		NL_SET_ERR_MSG(extack, "out of memory for the instance's frame buffers");
		goto fail;
	}
	netblk_for_each_queue(q, inst) {
		err = netblk_worker_start(q, extack);
		if (err)
			goto fail;
	}
	/* Last: from here on the NIC's program steers the port's frames to it. */
	err = inst->transport->open(inst, extack);
	if (err)
		goto fail;

	inst->started_ns = ktime_get_boottime_ns();
	/* Its NIC was down (netblk_nic_start_down): it starts waiting for it. */
	if (inst->waiting_for[0]) {
		inst->state = NETBLK_STATE_WAITING;
		inst->waiting_ns = inst->started_ns;
		pr_info("port %u waits: %s\n", inst->port, inst->waiting_for);
	}
	list_add_tail(&inst->node, &netblk_instances);
	*out = inst;
	return 0;

fail:
	netblk_instance_unhook(inst);
	netblk_for_each_queue(q, inst)
		if (q->worker)
			netblk_worker_drain(q);
	netblk_instance_release(inst);
	netblk_instance_put(inst);
	return err;
}

/*
 * Stop serving: the port goes (nothing new arrives) and the worker drains.
 * What stopped it is kept for the STOPPED event, which netblk_instance_finish
 * sends once the instance is released.
 */
void netblk_instance_stop(struct netblk_instance *inst, enum netblk_stop_reason reason,
			  const char *msg)
{
	struct netblk_queue *q;

	lockdep_assert_held(&netblk_lock);
	if (inst->state == NETBLK_STATE_STOPPING)
		return;
	inst->state = NETBLK_STATE_STOPPING;
	inst->stopping_ns = ktime_get_boottime_ns();
	inst->stop_reason = reason;
	strscpy(inst->stop_msg, msg ?: "", sizeof(inst->stop_msg));
	netblk_instance_unhook(inst);
	netblk_for_each_queue(q, inst)
		netblk_worker_drain(q);
}

/* Wait, without netblk_lock, up to @timeout jiffies for every queue's drain; whether they ended. */
bool netblk_instance_wait(struct netblk_instance *inst, unsigned long timeout)
{
	unsigned long deadline = jiffies + timeout;
	struct netblk_queue *q;

	netblk_for_each_queue(q, inst) {
		long left = max_t(long, (long)(deadline - jiffies), 0);

		if (!wait_for_completion_timeout(&q->drained, left) && !completion_done(&q->drained))
			return false;
	}
	return true;
}

/* Release a stopping instance whose worker has drained; whether it could. */
bool netblk_instance_finish(struct netblk_instance *inst)
{
	const char *msg = inst->stop_msg[0] ? inst->stop_msg : NULL;

	lockdep_assert_held(&netblk_lock);
	if (inst->finished)
		return true;
	if (inst->state != NETBLK_STATE_STOPPING || !netblk_instance_drained(inst))
		return false;
	netblk_target_notify(inst, NETBLK_EVENT_STOPPED, inst->stop_reason, 0, msg);
	if (msg)
		pr_info("stopped serving %s on port %u: %s\n", inst->device, inst->port, msg);
	else
		pr_info("stopped serving %s on port %u\n", inst->device, inst->port);
	list_del(&inst->node);
	netblk_instance_release(inst);
	inst->finished = true;
	if (inst->lingering)
		module_put(THIS_MODULE);
	netblk_instance_put(inst);	/* the list's */
	return true;
}

/*
 * Still draining after the wait: say so once, and keep the module loaded
 * until it is released (rmmod cannot wait for a disk that may never answer).
 */
void netblk_instance_linger(struct netblk_instance *inst)
{
	char msg[128];

	lockdep_assert_held(&netblk_lock);
	if (inst->lingering || inst->finished)
		return;
	inst->lingering = try_module_get(THIS_MODULE);
	if (!inst->lingering)
		return;	/* being unloaded: the unload waits for it instead */
	snprintf(msg, sizeof(msg), "no longer serves, but %u requests are still at %s",
		 netblk_instance_at_disk(inst), inst->device);
	pr_warn("port %u %s\n", inst->port, msg);
	netblk_target_notify(inst, NETBLK_EVENT_STOPPING, inst->stop_reason, 0, msg);
}

/* ---- stopping several: STOP, rmmod ---- */

/* The instances a stop is for (@all, or @port's), each with a reference; NULL when none. */
static struct netblk_instance **netblk_stop_targets(bool all, u16 port, u32 *n)
{
	struct netblk_instance **insts, *inst;
	u32 count = 0;

	lockdep_assert_held(&netblk_lock);
	if (!all) {
		inst = netblk_instance_find(port);
		if (!inst)
			return NULL;
		insts = kmalloc(sizeof(*insts), GFP_KERNEL);
		if (!insts)
			return ERR_PTR(-ENOMEM);
		insts[count++] = inst;
	} else {
		list_for_each_entry(inst, &netblk_instances, node)
			count++;
		insts = kmalloc_array(max(count, 1u), sizeof(*insts), GFP_KERNEL);
		if (!insts)
			return ERR_PTR(-ENOMEM);
		count = 0;
		list_for_each_entry(inst, &netblk_instances, node)
			insts[count++] = inst;
	}
	for (*n = 0; *n < count; (*n)++)
		kref_get(&insts[*n]->ref);
	return insts;
}

/*
 * The reaper may release the instance (its core with it) as soon as its
 * drain ends, which may be right after the wait gave up: look at the core
 * under netblk_lock, where release cannot run, and only if not released.
 */
static void netblk_warn_unload_wait(struct netblk_instance *inst)
{
	mutex_lock(&netblk_lock);
	if (!inst->finished)
		pr_warn("unloading waits for port %u: %u requests still at %s\n", inst->port,
			netblk_instance_at_disk(inst), inst->device);
	mutex_unlock(&netblk_lock);
}

/*
 * Stop every instance (@all) or @port's: take their ports away at once,
 * then wait for their disks without netblk_lock -- @timeout jiffies in all,
 * or as long as it takes for rmmod (@unload) -- and release those that
 * drained.  Those that did not are left stopping, announced once.  0 or an
 * errno (-ENOENT: no instance serves @port); *@released says how many were
 * released, *@stopping how many were left stopping.
 */
static int netblk_stop_instances(bool all, u16 port, bool unload, enum netblk_stop_reason reason,
				 unsigned long timeout, u32 *released, u32 *stopping)
{
	unsigned long deadline = jiffies + timeout;
	struct netblk_instance **insts;
	u32 n, i;

	*released = *stopping = 0;
	mutex_lock(&netblk_lock);
	insts = netblk_stop_targets(all, port, &n);
	if (IS_ERR_OR_NULL(insts)) {
		mutex_unlock(&netblk_lock);
		return insts ? PTR_ERR(insts) : -ENOENT;
	}
	for (i = 0; i < n; i++)
		netblk_instance_stop(insts[i], reason, NULL);
	mutex_unlock(&netblk_lock);

	for (i = 0; i < n; i++) {
		if (!unload) {
			netblk_instance_wait(insts[i], max_t(long, deadline - jiffies, 0));
			continue;
		}
		/* rmmod: the disk may not be left with our bios; say what it waits for */
		while (!netblk_instance_wait(insts[i], 10 * HZ))
			netblk_warn_unload_wait(insts[i]);
	}

	mutex_lock(&netblk_lock);
	for (i = 0; i < n; i++) {
		if (netblk_instance_finish(insts[i])) {
			(*released)++;
			continue;
		}
		netblk_instance_linger(insts[i]);
		(*stopping)++;
	}
	mutex_unlock(&netblk_lock);
	for (i = 0; i < n; i++)
		netblk_instance_put(insts[i]);
	kfree(insts);
	return 0;
}

/* STOP: every instance (@all) or @port's, waiting @timeout jiffies at most for their disks. */
int netblk_instances_stop(bool all, u16 port, enum netblk_stop_reason reason,
			  unsigned long timeout, u32 *released, u32 *stopping)
{
	return netblk_stop_instances(all, port, false, reason, timeout, released, stopping);
}

/* rmmod: every instance, waiting for their disks as long as they take. */
void netblk_stop_all(enum netblk_stop_reason reason)
{
	u32 released, stopping;

	netblk_stop_instances(true, 0, true, reason, 0, &released, &stopping);
}
