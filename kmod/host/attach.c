// SPDX-License-Identifier: GPL-2.0
/*
 * The life of an attachment: ATTACH opens a socket to the instance, a
 * session, asks INFO and only then makes /dev/netblkN with INFO's limits;
 * DETACH (or rmmod) undoes it in reverse.  The list of attachments and
 * every change to it are under netblk_lock (shim/netblk.h), as the
 * instances' are.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>

#include "host.h"
#include "../shim/netblk.h"	/* netblk_lock */

LIST_HEAD(netblk_attachments);
static DEFINE_IDA(netblk_host_ida);
static int netblk_host_major;

/* ---- the core's timer ---- */

static void netblk_host_timer_at(struct netblk_attachment *att, u64 when_ns)
{
	if (hrtimer_is_queued(&att->timer) &&
	    ktime_to_ns(hrtimer_get_expires(&att->timer)) <= when_ns)
		return;
	hrtimer_start(&att->timer, ns_to_ktime(when_ns), HRTIMER_MODE_ABS_SOFT);
}

/* Under the lock, after a call to the core. */
void netblk_host_arm_timer(struct netblk_attachment *att)
{
	u64 when;

	if (att->dead)
		return;
	when = netblk_host_core_timer_ns(att->core, ktime_get_ns());
	if (when)
		netblk_host_timer_at(att, when);
}

static enum hrtimer_restart netblk_host_timer_fn(struct hrtimer *timer)
{
	struct netblk_attachment *att = container_of(timer, struct netblk_attachment, timer);
	bool kick;
	u64 next;

	spin_lock_bh(&att->lock);
	next = att->dead ? 0 : netblk_host_core_expire(att->core, ktime_get_ns());
	if (next)
		netblk_host_timer_at(att, next);
	kick = att->pending_count;
	spin_unlock_bh(&att->lock);

	netblk_host_end_done(att);
	if (kick)
		netblk_host_kick_tx(att);
	return HRTIMER_NORESTART;
}

/* ---- attach ---- */

static int netblk_host_wait_info(struct netblk_attachment *att, struct netlink_ext_ack *extack)
{
	const struct netblk_attach_params *p = &att->params;
	long left = wait_for_completion_killable_timeout(&att->info_done, NETBLK_HOST_INFO_WAIT);
	int err;

	if (left < 0)
		return left;	/* killed */
	if (!left) {
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u did not answer INFO in %d s: is an instance started on that port?",
				   &p->addr, p->port, NETBLK_HOST_INFO_WAIT / HZ);
		return -ETIMEDOUT;
	}
	spin_lock_bh(&att->lock);
	err = att->info_status;
	if (!err)
		err = netblk_host_core_info(att->core, &att->info);
	spin_unlock_bh(&att->lock);

	switch (err) {
	case 0:
		break;
	case -EKEYREJECTED:
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u refused the session: its key (or auth= mode) is not this one",
				   &p->addr, p->port);
		break;
	case -EUSERS:
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u refused the session: it holds as many as it can (its sessions=)",
				   &p->addr, p->port);
		break;
	case -EPROTO:
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u answered an INFO no instance serves", &p->addr,
				   p->port);
		break;
	default:
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u refused INFO (errno %d)", &p->addr, p->port, -err);
	}
	return err;
}

static int netblk_host_core_start(struct netblk_attachment *att)
{
	struct netblk_host_config cfg = {
		.requests = att->params.queue_depth + 1,	/* and INFO's */
		.datagrams = att->params.queue_depth * NETBLK_HOST_PIECES + 1,
		.deadline_ns = (u64)att->params.timeout_ms * NSEC_PER_MSEC,
		.seed = get_random_u64(),
		.read_only = att->params.read_only,
		.keyed = att->params.has_key,
		.shim = att,
	};

	memcpy(cfg.key, att->params.key, sizeof(cfg.key));
	att->info_tag = att->params.queue_depth;
	return netblk_host_core_create(&cfg, &att->core);
}

static void netblk_host_free(struct netblk_attachment *att)
{
	netblk_host_core_destroy(att->core);
	page_frag_cache_drain(&att->frags);
	kvfree(att->tx);
	kvfree(att->pending);
	if (att->index >= 0)
		ida_free(&netblk_host_ida, att->index);
	kfree_sensitive(att);	/* its params hold the key */
}

/* Stop everything that calls into the core: answers, the timer, the sender. */
static void netblk_host_quiesce(struct netblk_attachment *att)
{
	spin_lock_bh(&att->lock);
	att->dead = true;	/* the timer is not armed again, new requests fail */
	spin_unlock_bh(&att->lock);
	netblk_host_socket_stop_rx(att);
	hrtimer_cancel(&att->timer);
	netblk_host_disk_quiesce(att);
	netblk_host_socket_close(att);
	netblk_host_drop_pending(att);
}

/* Fail what is left, outside any softirq: a forced detach, rmmod, a failed attach. */
static void netblk_host_fail_all(struct netblk_attachment *att)
{
	spin_lock_bh(&att->lock);
	netblk_host_core_cancel_all(att->core, EIO);
	spin_unlock_bh(&att->lock);
	netblk_host_end_done(att);
}

int netblk_host_attach(const struct netblk_attach_params *p, struct net *net,
		       struct netlink_ext_ack *extack, struct netblk_attachment **out)
{
	struct netblk_attachment *att;
	int err;

	lockdep_assert_held(&netblk_lock);
	att = kzalloc(sizeof(*att), GFP_KERNEL);
	if (!att)
		return -ENOMEM;
	att->params = *p;
	att->index = -1;
	spin_lock_init(&att->lock);
	init_completion(&att->info_done);
	init_llist_head(&att->done);
	hrtimer_init(&att->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	att->timer.function = netblk_host_timer_fn;
	netblk_host_tx_init(att);
	netblk_host_disk_init(att);

	err = -ENOMEM;
	att->pending = kvcalloc(NETBLK_HOST_PENDING, sizeof(*att->pending), GFP_KERNEL);
	if (!att->pending)
		goto free;
	att->tx = kvzalloc(sizeof(*att->tx), GFP_KERNEL);
	if (!att->tx)
		goto free;
	err = ida_alloc_max(&netblk_host_ida, MINORMASK / NETBLK_HOST_MINORS, GFP_KERNEL);
	if (err < 0) {
		NL_SET_ERR_MSG(extack, "no /dev/netblkN left: detach one");
		goto free;
	}
	att->index = err;
	snprintf(att->name, sizeof(att->name), "netblk%d", att->index);
	err = netblk_host_core_start(att);
	if (err)
		goto free;
	err = netblk_host_socket_open(att, net, extack);
	if (err)
		goto free;

	spin_lock_bh(&att->lock);
	netblk_host_core_connect(att->core, att->info_tag, ktime_get_ns());
	netblk_host_arm_timer(att);
	spin_unlock_bh(&att->lock);
	netblk_host_send_pending(att);

	err = netblk_host_wait_info(att, extack);
	if (err)
		goto quiesce;
	if (att->info.read_only && !att->params.read_only) {
		pr_info("%pI4:%u serves read-only: %s is read-only\n", &p->addr, p->port, att->name);
		att->params.read_only = true;
	}
	err = netblk_host_disk_create(att, netblk_host_major);
	if (err) {
		NL_SET_ERR_MSG_FMT(extack, "cannot create the block device (%d)", err);
		goto quiesce;
	}
	att->attached_ns = ktime_get_boottime_ns();
	list_add_tail(&att->node, &netblk_attachments);
	pr_info("/dev/%s is %pI4:%u (%llu MiB, %s), %u bytes a datagram\n", att->name,
		&p->addr, p->port, att->info.size_bytes >> 20,
		att->params.read_only ? "read-only" : "read-write", att->info.max_io);
	*out = att;
	return 0;

quiesce:
	netblk_host_quiesce(att);
	netblk_host_fail_all(att);
free:
	netblk_host_free(att);
	return err;
}

/* ---- detach ---- */

int netblk_host_detach(struct netblk_attachment *att, bool force,
		       struct netlink_ext_ack *extack)
{
	lockdep_assert_held(&netblk_lock);
	if (!force && netblk_host_disk_open(att)) {
		NL_SET_ERR_MSG_FMT(extack, "/dev/%s is open (mounted, or in use): unmount it, or detach --force",
				   att->name);
		return -EBUSY;
	}
	list_del(&att->node);
	/*
	 * New requests fail from here; those in flight fail EIO, which is
	 * what a forced detach means (and all a detach of a closed disk
	 * meets is a prober's read).
	 */
	netblk_host_quiesce(att);
	netblk_host_fail_all(att);
	netblk_host_disk_remove(att);
	pr_info("/dev/%s (%pI4:%u) detached\n", att->name, &att->params.addr, att->params.port);
	netblk_host_free(att);
	return 0;
}

struct netblk_attachment *netblk_host_find(const char *name)
{
	struct netblk_attachment *att;

	lockdep_assert_held(&netblk_lock);
	if (!strncmp(name, "/dev/", 5))
		name += 5;
	list_for_each_entry(att, &netblk_attachments, node)
		if (!strcmp(att->name, name))
			return att;
	return NULL;
}

void netblk_host_detach_all(void)
{
	struct netblk_attachment *att, *next;

	mutex_lock(&netblk_lock);
	list_for_each_entry_safe(att, next, &netblk_attachments, node)
		netblk_host_detach(att, true, NULL);
	mutex_unlock(&netblk_lock);
}

void netblk_host_read_stats(struct netblk_attachment *att, struct netblk_host_stats *core,
			    struct netblk_host_shim_stats *shim)
{
	spin_lock_bh(&att->lock);
	netblk_host_core_read_stats(att->core, core);
	*shim = att->stats;
	spin_unlock_bh(&att->lock);
}

int netblk_host_init(void)
{
	int err = netblk_host_transport_init();

	if (err)
		return err;
	netblk_host_major = register_blkdev(0, "netblk");
	if (netblk_host_major < 0) {
		netblk_host_transport_exit();
		return netblk_host_major;
	}
	return 0;
}

void netblk_host_exit(void)
{
	netblk_host_detach_all();
	/*
	 * Every request has ended, so every skb that held one has let go; a
	 * zero-copy completion may still be on its last lines (transport.c).
	 */
	synchronize_rcu();
	unregister_blkdev(netblk_host_major, "netblk");
	netblk_host_transport_exit();
}
