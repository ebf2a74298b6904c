// SPDX-License-Identifier: GPL-2.0
/*
 * The life of an attachment: ATTACH opens a socket to the instance, a
 * session, asks INFO and only then makes /dev/netblkN with INFO's limits;
 * DETACH (or rmmod) undoes it in reverse.  The list of attachments and
 * every change to it are under netblk_lock (common/netblk.h), as the
 * instances' are; an attach waits for its server without it, on the list
 * as ATTACHING so that detach and rmmod can give it up.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "host.h"
#include "netblk.h"	/* netblk_lock */

LIST_HEAD(netblk_attachments);
static DEFINE_IDA(netblk_host_ida);
static int netblk_host_major;

/* ---- attach ---- */

static void netblk_host_release(struct kref *ref)
{
	/* its params hold the key */
	kfree_sensitive(container_of(ref, struct netblk_attachment, ref));
}

void netblk_host_put(struct netblk_attachment *att)
{
	kref_put(&att->ref, netblk_host_release);
}

/* What it holds; the memory goes with the last reference (netblk_host_put). */
static void netblk_host_free(struct netblk_attachment *att)
{
	netblk_host_engine_destroy(att);
	if (att->index >= 0)
		ida_free(&netblk_host_ida, att->index);
	att->index = -1;
}

/* Stop everything that calls into the core: answers, the timer, the sender. */
static void netblk_host_quiesce(struct netblk_attachment *att)
{
	netblk_host_engine_stop(att);
	netblk_host_disk_quiesce(att);
	netblk_host_engine_close(att);
}

/* Seconds a request may go unanswered while attaching: timeout= where shorter than ours. */
static unsigned int netblk_host_attach_io_wait_s(const struct netblk_attachment *att)
{
	unsigned int own = NETBLK_HOST_ATTACH_IO_WAIT / HZ;

	if (att->params.opt.timeout_ms && att->params.opt.timeout_ms < own * MSEC_PER_SEC)
		return DIV_ROUND_UP(att->params.opt.timeout_ms, MSEC_PER_SEC);
	return own;
}

/* Why the attach was given up, in the extack; the errno to return. */
static int netblk_host_abort_error(const struct netblk_attachment *att,
				   enum netblk_host_abort why, struct netlink_ext_ack *extack)
{
	const struct netblk_attach_params *p = &att->params;
	unsigned int wait = netblk_host_attach_io_wait_s(att);

	switch (why) {
	case NETBLK_HOST_DETACHED:
		NL_SET_ERR_MSG_FMT(extack, "/dev/%s was detached while it attached", att->name);
		return -ECANCELED;
	case NETBLK_HOST_UNLOADING:
		NL_SET_ERR_MSG(extack, "netblk is being unloaded");
		return -ESHUTDOWN;
	default:
		pr_warn("%s: %pI4:%u answered INFO but not the READs of the partition scan in %u s: its replies may be larger than the path carries (its mtu=), or its disk does not answer; not attached\n",
			att->name, &p->addr, p->port, wait);
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u answered INFO but no READ in %u s (path MTU? its disk?)",
				   &p->addr, p->port, wait);
		return -ETIMEDOUT;
	}
}

/*
 * Whether another queue's INFO tells of the device queue 0's did: each
 * queue's core splits requests by its own, the disk is made by queue 0's.
 */
static bool netblk_host_same_info(const struct netblk_host_info *a,
				  const struct netblk_host_info *b)
{
	return a->size_bytes == b->size_bytes && a->sector_size == b->sector_size &&
	       a->max_io == b->max_io && a->max_read == b->max_read &&
	       a->read_only == b->read_only;
}

/* Queue @q's INFO, which its connect asked (queue 0's is the attachment's). */
static int netblk_host_wait_info(struct netblk_attachment *att, struct netblk_host_queue *q,
				 struct netlink_ext_ack *extack)
{
	const struct netblk_attach_params *p = &att->params;
	long left = wait_for_completion_killable_timeout(&q->info_done, NETBLK_HOST_INFO_WAIT);
	struct netblk_host_info info;
	enum netblk_host_abort why;
	int err;

	if (left < 0)
		return left;	/* killed */
	spin_lock_bh(&att->abort_lock);
	why = att->abort;
	spin_unlock_bh(&att->abort_lock);
	if (why)
		return netblk_host_abort_error(att, why, extack);
	spin_lock_bh(&q->lock);
	err = left ? q->info_status : -ETIMEDOUT;
	if (!err)
		err = netblk_host_core_info(q->core, &info);
	spin_unlock_bh(&q->lock);
	if (!err && !q->index)
		att->info = info;
	if (!err && q->index && !netblk_host_same_info(&att->info, &info)) {
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u told queue %u of another device than queue 0 (started again meanwhile?): attach again",
				   &p->addr, p->port, q->index);
		return -ESTALE;
	}

	switch (err) {
	case 0:
		break;
	case -ETIMEDOUT:
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u did not answer INFO in %d s: is an instance started on that port?",
				   &p->addr, p->port, NETBLK_HOST_INFO_WAIT / HZ);
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

/* Everything but the network: the core, its rings, /dev/netblkN's number. */
static struct netblk_attachment *netblk_host_alloc(const struct netblk_attach_params *p,
						   struct netlink_ext_ack *extack)
{
	struct netblk_attachment *att;
	int err;

	att = kzalloc(sizeof(*att), GFP_KERNEL);
	if (!att)
		return ERR_PTR(-ENOMEM);
	kref_init(&att->ref);
	init_completion(&att->settled);
	att->state = NETBLK_HOST_ATTACHING;
	att->attaching = true;
	att->params = *p;
	att->index = -1;
	netblk_host_engine_init(att, &netblk_host_udp_ops);
	netblk_host_disk_init(att);

	err = ida_alloc_max(&netblk_host_ida, MINORMASK / NETBLK_HOST_MINORS, GFP_KERNEL);
	if (err < 0) {
		NL_SET_ERR_MSG(extack, "no /dev/netblkN left: detach one");
		goto put;
	}
	att->index = err;
	snprintf(att->name, sizeof(att->name), "netblk%d", att->index);
	err = netblk_host_engine_create(att, 0);	/* the others once its INFO says how many */
	if (err)
		goto free_index;
	return att;

free_index:
	ida_free(&netblk_host_ida, att->index);
put:
	netblk_host_put(att);
	return ERR_PTR(err);
}

/* On the list, ATTACHING: detach and rmmod find it from here on. */
static int netblk_host_reserve(struct netblk_attachment *att, struct netlink_ext_ack *extack)
{
	mutex_lock(&netblk_lock);
	if (netblk_unloading) {
		mutex_unlock(&netblk_lock);
		NL_SET_ERR_MSG(extack, "netblk is being unloaded");
		return -ESHUTDOWN;
	}
	list_add_tail(&att->node, &netblk_attachments);
	mutex_unlock(&netblk_lock);
	return 0;
}

/*
 * How many queues: queues= as given, else one a CPU up to as many as the
 * instance has (INFO) -- more would share its workers, fewer its CPUs.
 * Never more than CPUs: blk-mq makes no more hardware queues than that, and
 * a session more would carry nothing.
 */
static u32 netblk_host_nr_queues(const struct netblk_attachment *att)
{
	u32 n = att->params.opt.queues ?: min(num_online_cpus(), att->info.queues);

	return clamp_t(u32, n, 1, min_t(u32, nr_cpu_ids, NETBLK_HOST_QUEUES_MAX));
}

/*
 * Queue 0's session and its INFO, then the other queues' (each its own
 * socket, session and INFO, which its core needs before it takes I/O):
 * each waits up to NETBLK_HOST_INFO_WAIT, the others all at once.
 */
static int netblk_host_connect(struct netblk_attachment *att, struct net *net,
			       struct netlink_ext_ack *extack)
{
	u32 n, i;
	int err = netblk_host_engine_connect(att->queues[0], net, extack);

	if (!err)
		err = netblk_host_wait_info(att, att->queues[0], extack);
	if (err)
		return err;
	n = netblk_host_nr_queues(att);
	att->params.opt.queues = n;	/* what ATTACHED says back */
	for (i = 1; i < n; i++) {
		err = netblk_host_engine_create(att, i);
		if (!err)
			err = netblk_host_engine_connect(att->queues[i], net, extack);
		if (err)
			return err;
	}
	for (i = 1; i < n && !err; i++)
		err = netblk_host_wait_info(att, att->queues[i], extack);
	return err;
}

/*
 * /dev/netblkN, with INFO's limits.  add_disk() reads the partition table:
 * a READ not answered in NETBLK_HOST_ATTACH_IO_WAIT fails it and the attach
 * (blk.c's timeout), and so does one the core gives up (timeout=).
 */
static int netblk_host_make_disk(struct netblk_attachment *att, struct netlink_ext_ack *extack)
{
	const struct netblk_attach_params *p = &att->params;
	int err;

	if (att->info.read_only && !p->read_only) {
		pr_info("%pI4:%u serves read-only: %s is read-only\n", &p->addr, p->port, att->name);
		att->params.read_only = true;
	}
	err = netblk_host_disk_create(att, netblk_host_major);
	if (err)
		NL_SET_ERR_MSG_FMT(extack, "cannot create the block device (%d)", err);
	return err;
}

/*
 * ATTACHED, unless it was given up meanwhile; the caller gets a reference
 * of its own, the attacher's becomes the list's.
 */
static int netblk_host_commit(struct netblk_attachment *att, struct netlink_ext_ack *extack)
{
	enum netblk_host_abort why;
	bool gave_up;

	mutex_lock(&netblk_lock);
	/* a core that gave the instance up for silent (timeout=) while attaching */
	gave_up = netblk_host_engine_gave_up(att);
	spin_lock_bh(&att->abort_lock);
	why = att->abort;
	if (!why && gave_up)
		why = NETBLK_HOST_NO_ANSWER;
	if (!why)
		att->attaching = false;
	spin_unlock_bh(&att->abort_lock);
	if (why) {
		mutex_unlock(&netblk_lock);
		return netblk_host_abort_error(att, why, extack);
	}
	att->state = NETBLK_HOST_ATTACHED;
	att->attached_ns = ktime_get_boottime_ns();
	kref_get(&att->ref);
	complete_all(&att->settled);
	mutex_unlock(&netblk_lock);
	return 0;
}

/*
 * Undo an attach that failed, everything in reverse.  It stays on the list
 * until it is undone, so that rmmod finds it and waits (settled) before it
 * takes away what this uses; given up by no one from here on (under
 * netblk_lock: a give-up under it is over, and blk-mq's timeout ends with
 * the disk, before the core goes).
 */
static void netblk_host_undo(struct netblk_attachment *att)
{
	mutex_lock(&netblk_lock);
	spin_lock_bh(&att->abort_lock);
	att->attaching = false;
	spin_unlock_bh(&att->abort_lock);
	mutex_unlock(&netblk_lock);

	netblk_host_quiesce(att);
	netblk_host_engine_fail_all(att);
	netblk_host_disk_remove(att);
	netblk_host_free(att);

	mutex_lock(&netblk_lock);
	list_del(&att->node);
	mutex_unlock(&netblk_lock);
	complete_all(&att->settled);
	netblk_host_put(att);
}

/*
 * ATTACH: reserve the attachment on the list (ATTACHING), then without
 * netblk_lock -- nothing else waits for this one's server -- a session,
 * INFO and the disk; ATTACHED last.  *@out holds a reference for the caller
 * (netblk_host_put).
 */
int netblk_host_attach(const struct netblk_attach_params *p, struct net *net,
		       struct netlink_ext_ack *extack, struct netblk_attachment **out)
{
	struct netblk_attachment *att;
	int err;

	att = netblk_host_alloc(p, extack);
	if (IS_ERR(att))
		return PTR_ERR(att);
	err = netblk_host_reserve(att, extack);
	if (err) {
		netblk_host_free(att);
		netblk_host_put(att);
		return err;
	}
	err = netblk_host_connect(att, net, extack);
	if (!err)
		err = netblk_host_make_disk(att, extack);
	if (!err)
		err = netblk_host_commit(att, extack);
	if (err) {
		netblk_host_undo(att);
		return err;
	}
	pr_info("/dev/%s is %pI4:%u (%llu MiB, %s), %u bytes a datagram, %u queue%s\n",
		att->name, &p->addr, p->port, att->info.size_bytes >> 20,
		att->params.read_only ? "read-only" : "read-write", att->info.max_io,
		att->nr_queues, att->nr_queues == 1 ? "" : "s");
	*out = att;
	return 0;
}

/* ---- detach ---- */

/*
 * An ATTACHING one is given up for @why (its attacher undoes it) and
 * returned in *@attaching with a reference, to wait for without the lock
 * (netblk_host_wait_undone).
 */
static void netblk_host_cancel(struct netblk_attachment *att, enum netblk_host_abort why,
			       struct netblk_attachment **attaching)
{
	netblk_host_give_up(att, why);
	kref_get(&att->ref);
	*attaching = att;
}

void netblk_host_wait_undone(struct netblk_attachment *att)
{
	wait_for_completion(&att->settled);
	netblk_host_put(att);
}

/*
 * Detach @att; one still attaching is given up instead, and *@attaching
 * set (netblk_host_cancel).
 */
int netblk_host_detach(struct netblk_attachment *att, bool force,
		       struct netlink_ext_ack *extack, struct netblk_attachment **attaching)
{
	lockdep_assert_held(&netblk_lock);
	if (att->state == NETBLK_HOST_ATTACHING) {
		netblk_host_cancel(att, netblk_unloading ? NETBLK_HOST_UNLOADING :
							   NETBLK_HOST_DETACHED, attaching);
		return 0;
	}
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
	netblk_host_engine_fail_all(att);
	netblk_host_disk_remove(att);
	pr_info("/dev/%s (%pI4:%u) detached\n", att->name, &att->params.addr, att->params.port);
	netblk_host_free(att);
	netblk_host_put(att);	/* the list's */
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

/* rmmod (netblk_unloading set): every device goes; an attach under way is given up, waited for. */
void netblk_host_detach_all(void)
{
	struct netblk_attachment *att, *next, *attaching;

	do {
		attaching = NULL;
		mutex_lock(&netblk_lock);
		list_for_each_entry_safe(att, next, &netblk_attachments, node) {
			if (att->state == NETBLK_HOST_ATTACHING && attaching)
				continue;	/* the next round's */
			netblk_host_detach(att, true, NULL, &attaching);
		}
		mutex_unlock(&netblk_lock);
		if (attaching)
			netblk_host_wait_undone(attaching);
	} while (attaching);
}

int netblk_host_init(void)
{
	int err = netblk_host_udp_init();

	if (err)
		return err;
	netblk_host_major = register_blkdev(0, "netblk");
	if (netblk_host_major < 0) {
		netblk_host_udp_exit();
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
	netblk_host_udp_exit();
}
