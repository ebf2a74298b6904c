/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The target's (the server's) view of an instance: the kernel objects it holds (the block
 * device, the NIC, the port's socket, the worker thread) around the C++ core
 * (core_api.h), which holds everything that needs no kernel.
 */
#ifndef NETBLK_TARGET_H
#define NETBLK_TARGET_H

#include "netblk.h"	/* first: pr_fmt */

#include <linux/blkdev.h>
#include <linux/bpf.h>		/* XDP_PACKET_HEADROOM */
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <net/xdp.h>

#include "core_api.h"
#include "target_ops.h"
#include "netblk_genl.h"

#define NETBLK_PORT_MIN		1024
#define NETBLK_MTU_MIN		594	/* one 512-byte sector behind the headers */
#define NETBLK_DATAGRAM_OVERHEAD	82	/* IPv4 + UDP + netblk headers */
#define NETBLK_POLL_US_MAX	100000
#define NETBLK_DEVICE_MAX	256	/* bytes of a device path, NUL included */
#define NETBLK_DRIVER_MAX	32	/* ethtool's driver name */
#define NETBLK_STOP_WAIT	(5 * HZ)	/* STOP waits this long for the disk */
#define NETBLK_SPARE_PAGES	8	/* an instance's buffers for EAGAIN replies */

/* Each START knob's index in NETBLK_START_OPTIONS: its bit in netblk_start_params.given. */
#define NETBLK_START_OPT_INDEX(NAME, ...) NETBLK_START_OPT_##NAME,
enum netblk_start_opt {
	NETBLK_START_OPTIONS(NETBLK_START_OPT_INDEX)
	NETBLK_START_OPTS
};
#undef NETBLK_START_OPT_INDEX

/* What START asks for; unset optional values are 0 / empty. */
struct netblk_start_params {
	char device[NETBLK_DEVICE_MAX];
	char ifname[IFNAMSIZ];
	u16 port;
	struct netblk_start_options opt;	/* the knobs: given, or their defaults */
	u64 given;		/* BIT_ULL(NETBLK_START_OPT_*): the knobs START gave */
	u32 nr_allow;
	struct netblk_prefix allow[NETBLK_ALLOW_MAX];
	bool has_key;
	u8 key[NETBLK_KEY_BYTES];
	u32 auth;		/* enum netblk_auth */
};

/* START gave knob NAME (else its value is the list's default). */
#define netblk_start_given(p, NAME) (!!((p)->given & BIT_ULL(NETBLK_START_OPT_##NAME)))

struct netblk_io;
struct xdp_frame;
struct genl_info;
struct netlink_callback;

#define NETBLK_REPLY_HEADROOM	96	/* Ethernet + IPv4 + UDP + netblk headers */
#define NETBLK_QUEUES_MAX	64	/* queues= at most */

/*
 * One of an instance's queues: a worker thread pinned to a CPU of its own,
 * with its own core (slots, rings, sessions, counters), bios and frame
 * buffers.  Nothing in it is written by another queue's worker: a session
 * belongs to one queue, and its datagrams are handed to that queue's core
 * on whatever CPU they arrive (handoff.c).
 */
struct netblk_queue {
	struct netblk_instance *inst;
	u32 index;			/* of inst->queues */
	u32 cpu;			/* its worker's */
	struct task_struct *worker;
	bool worker_idle;		/* asleep, or about to be: wake it */
	bool worker_stop;		/* drain and leave: set by netblk_worker_drain() */
	bool tx_rearm;			/* resumed: the worker forgets the NIC's failures */
	struct completion drained;	/* the worker has nothing left at the disk */
	struct netblk_core *core;

	/* disk.c */
	struct netblk_io *ios;		/* a bio a slot */
	unsigned long *polling;		/* slots whose polled bio is in flight */

	/* xmit.c: the slots' frame buffers */
	struct page **pages;
	struct page **data_pages;	/* a gathered READ's (netblk_core_gather_page), or NULL */
	struct page *spare[NETBLK_SPARE_PAGES];	/* for EAGAIN replies when a slot has no page */
	unsigned long spare_lent;	/* worker only: spares a slot's reply is in */
	s8 *spare_of;			/* worker only: the spare a slot holds, or -1 */
	struct xdp_rxq_info rxq;	/* their memory model, for the NIC to free by */
};

struct netblk_instance {
	struct list_head node;		/* on netblk_instances, under netblk_lock */
	struct kref ref;		/* the list's, and each waiter's (netblk_instance_put) */

	/* its life (instance.c), under netblk_lock */
	enum netblk_state state;
	enum netblk_stop_reason stop_reason;
	char stop_msg[96];		/* why it stopped, for the STOPPED event */
	u64 stopping_ns;		/* boottime it began stopping */
	bool lingering;			/* announced as still stopping; holds the module */
	bool finished;			/* everything released, off the list */
	u64 waiting_ns;			/* boottime it began waiting for its NIC */
	char waiting_for[96];		/* what it waits for, while WAITING */

	/* what it serves, fixed once started */
	char device[NETBLK_DEVICE_MAX];
	u16 port;
	/*
	 * the knobs as it runs them: START's, with mtu, cpu and vlan resolved
	 * (the NIC's MTU, the CPU chosen, the VLAN of a VLAN device)
	 */
	struct netblk_start_options opt;
	u32 auth;			/* enum netblk_auth (the key is the core's alone) */
	u32 nr_allow;
	struct netblk_prefix allow[NETBLK_ALLOW_MAX];	/* netblkctl puts them in the XDP program */
	u64 size_bytes;
	u32 sector_size;
	u64 started_ns;			/* boottime */

	struct netblk_bdev disk;		/* the block device it serves (compat.h) */
	char disk_name[BDEVNAME_SIZE];	/* as the kernel names it: nvme0n1p1 */
	/*
	 * Both NULL once either is unregistered (netblk_nic_detach): under
	 * netblk_lock, or under RCU when netblk_nic_gone() said no.
	 */
	struct net_device *nic;		/* the NIC its XDP program runs on */
	netdevice_tracker nic_tracker;
	struct net_device *addr_dev;	/* where its address is: the NIC, or its VLAN device */
	netdevice_tracker addr_dev_tracker;
	char nic_name[IFNAMSIZ];	/* the NIC's, as it was when it went */
	char driver[NETBLK_DRIVER_MAX];	/* the NIC's */
	__be32 addr;			/* the IPv4 address it answers on */
	struct socket *port_sock;	/* holds the port against other sockets */
	struct net_device *handoff;	/* netblk<port>: where the program steers to */
	const struct netblk_target_transport_ops *transport;	/* the XDP one */
	/* its queues (nr_queues of them), and the queue of each CPU's arrivals */
	struct netblk_queue *queues;
	u32 nr_queues;			/* opt.queues once they are allocated, 0 before */
	u16 *cpu_queue;			/* by CPU: its queue, or the queue it hands HELLOs to */
	/* its queues' session tables, counted together for per-source= */
	struct netblk_session_group *sessions;
	spinlock_t sessions_lock;	/* taken by a queue's core to open a session */

	/* disk.c */
	bool nowait;			/* REQ_NOWAIT: a full queue answers, not sleeps */
	bool polled;			/* REQ_POLLED: completions are polled, not interrupts */

	/* xmit.c: the layout of every queue's slots' frame buffers */
	unsigned int page_order;
	u32 frame_headroom;		/* page start to the frame's first byte */
	u32 dma_align_mask;

	/* monitor.c */
	struct delayed_work *reaper;	/* the reaper's work (netblk_reaper_kick) */
	bool bdev_dead;			/* the holder was told the disk is gone */
	unsigned long flags;		/* NETBLK_IO_ERROR_PENDING, _TX_FAILED, _NIC_GONE */
	u64 io_error_offset;		/* the last failed request's */
	unsigned long io_error_announced; /* jiffies */
};

/* Each of @inst's queues, as @q. */
#define netblk_for_each_queue(q, inst) \
	for ((q) = (inst)->queues; (q) && (q) < (inst)->queues + (inst)->nr_queues; (q)++)

#define NETBLK_IO_ERROR_PENDING	0	/* a disk error not announced yet */
#define NETBLK_TX_FAILED	1	/* the NIC fails every transmit: stop */
#define NETBLK_NIC_GONE		2	/* the NIC let go of: nothing goes out any more */

/* Whether the NIC was let go of (netblk_nic_detach): read under RCU before inst->nic. */
static inline bool netblk_nic_gone(const struct netblk_instance *inst)
{
	return test_bit(NETBLK_NIC_GONE, &inst->flags);
}

/*
 * Work was queued for the worker (a ring push, a release): wake it only if
 * it is going to sleep.  A running worker finds the work on its next round,
 * and a wakeup it does not need costs its pi_lock on every completion.  The
 * barrier pairs with the one in netblk_worker_sleep(): either the worker
 * sees the work, or the producer sees it idle.
 */
static inline void netblk_worker_kick(struct netblk_queue *q)
{
	smp_mb();	/* the push before, worker_idle after: see above */
	if (READ_ONCE(q->worker_idle))
		wake_up_process(q->worker);
}

/*
 * Something the reaper must look at (monitor.c): a NIC that fails every
 * reply, a disk error, a drain that ended, a disk gone.  Through the work
 * item the instance keeps, so that what runs below the reaper -- the
 * worker, the disk's claim -- does not call up into it.  Any context.
 */
static inline void netblk_reaper_kick(struct netblk_instance *inst)
{
	mod_delayed_work(system_wq, inst->reaper, 0);
}

/* All instances, under netblk_lock. */
extern struct list_head netblk_instances;

/* instance.c */
int netblk_instance_start(const struct netblk_start_params *params,
			  struct netlink_ext_ack *extack,
			  struct netblk_instance **out);
void netblk_instance_stop(struct netblk_instance *inst, enum netblk_stop_reason reason,
			  const char *msg);
bool netblk_instance_finish(struct netblk_instance *inst);
void netblk_instance_linger(struct netblk_instance *inst);
bool netblk_instance_wait(struct netblk_instance *inst, unsigned long timeout);
void netblk_instance_put(struct netblk_instance *inst);
struct netblk_instance *netblk_instance_find(u16 port);
u64 netblk_instance_uptime_ms(const struct netblk_instance *inst);
u64 netblk_instance_stopping_ms(const struct netblk_instance *inst);
void netblk_instance_wait_nic(struct netblk_instance *inst, const char *why);
void netblk_instance_resume(struct netblk_instance *inst);
u64 netblk_instance_waiting_ms(const struct netblk_instance *inst);
int netblk_instances_stop(bool all, u16 port, enum netblk_stop_reason reason,
			  unsigned long timeout, u32 *released, u32 *stopping);
void netblk_stop_all(enum netblk_stop_reason reason);
void netblk_instance_set_reaper(struct delayed_work *reaper);

/* What an event says (instance.c's chain; the action is enum netblk_event). */
struct netblk_target_event {
	const struct netblk_instance *inst;		/* NULL: a START refused */
	const struct netblk_start_params *params;	/* the refused START's */
	enum netblk_stop_reason reason;
	int err;
	const char *msg;
};

struct notifier_block;
int netblk_target_register_notifier(struct notifier_block *nb);
void netblk_target_unregister_notifier(struct notifier_block *nb);
void netblk_target_notify(const struct netblk_instance *inst, enum netblk_event event,
			  enum netblk_stop_reason reason, int err, const char *msg);
void netblk_target_notify_failed(const struct netblk_start_params *p, int err, const char *msg);

/* instance.c: what its queues hold, summed */
u32 netblk_instance_at_disk(const struct netblk_instance *inst);
void netblk_instance_read_stats(const struct netblk_instance *inst, struct netblk_stats *s);
bool netblk_instance_drained(struct netblk_instance *inst);
bool netblk_instance_rearming(const struct netblk_instance *inst);

/* nic.c */
int netblk_nic_take(struct netblk_instance *inst, const struct netblk_start_params *p,
		    struct netlink_ext_ack *extack);
void netblk_nic_put(struct netblk_instance *inst);
struct net_device *netblk_nic_leaving(const struct netblk_instance *inst);
void netblk_nic_detach(struct netblk_instance *inst);
const char *netblk_nic_name(const struct netblk_instance *inst);
bool netblk_nic_has_addr(struct net_device *dev, __be32 addr);
int netblk_nic_check_cpu(struct netblk_instance *inst, u32 cpu, struct netlink_ext_ack *extack);
void netblk_nic_xmit_cpus(struct netblk_instance *inst, struct cpumask *mask);
const char *netblk_nic_hides_vlans(struct net_device *nic);
bool netblk_nic_drops_xdp(const struct net_device *nic);
bool netblk_nic_sends_frags(const struct netblk_instance *inst);
void netblk_nic_refresh_link(struct netblk_queue *q);

/* handoff.c */
int netblk_handoff_create(struct netblk_instance *inst, struct netlink_ext_ack *extack);
void netblk_handoff_destroy(struct netblk_instance *inst);

/* disk.c */
extern const struct netblk_target_disk_ops netblk_disk_ops;
int netblk_disk_init(struct netblk_instance *inst);
void netblk_disk_exit(struct netblk_instance *inst);
void netblk_disk_poll(struct netblk_queue *q);

/* xdp.c: the XDP transport's ops (handoff.c, xmit.c) */
extern const struct netblk_target_transport_ops netblk_xdp_ops;

/* xmit.c */
u8 *netblk_xdp_slot_buffer(struct netblk_queue *q, u32 slot);
u8 *netblk_xdp_data_page(struct netblk_queue *q, u32 slot);
u8 *netblk_xdp_reply_buffer(struct netblk_queue *q, u32 slot);
void netblk_xdp_reply_done(struct netblk_queue *q, u32 slot);
u32 netblk_xdp_transmit(struct netblk_queue *q, const struct netblk_tx *tx, u32 n,
			int *error);
u32 netblk_xdp_frame_frags(struct netblk_queue *q, void *frame,
			   struct netblk_piece *frags, u32 max);
void netblk_xdp_free_frame(struct netblk_queue *q, void *frame);
int netblk_nic_xmit(struct netblk_instance *inst, struct xdp_frame **frames, u32 n);
struct xdp_frame *netblk_buffer_frame(struct netblk_queue *q, u8 *data, u32 len);
int netblk_buffers_init(struct netblk_instance *inst);
void netblk_buffers_exit(struct netblk_instance *inst);
void netblk_buffers_unreg_rxq(struct netblk_instance *inst);

/* worker.c */
int netblk_worker_start(struct netblk_queue *q, struct netlink_ext_ack *extack);
void netblk_worker_drain(struct netblk_queue *q);
void netblk_worker_stop(struct netblk_queue *q);

/* event.c: the events group listens on the instances' chain */
int netblk_event_init(void);
void netblk_event_exit(void);

/* ctl.c: the server's commands, for genl.c's ops table */
#define NETBLK_PUT_STATS	1u	/* what netblk_put_instance adds to the description */
#define NETBLK_PUT_LATENCY	2u
int netblk_put_instance(struct sk_buff *skb, const struct netblk_instance *inst,
			unsigned int what);
int netblk_cmd_start(struct sk_buff *skb, struct genl_info *info);
int netblk_cmd_stop(struct sk_buff *skb, struct genl_info *info);
int netblk_dump_list(struct sk_buff *skb, struct netlink_callback *cb);
int netblk_cmd_xdp_ready(struct sk_buff *skb, struct genl_info *info);

/* monitor.c */
int netblk_monitor_init(void);
void netblk_monitor_exit(void);
void netblk_monitor_kick(void);
u32 netblk_monitor_xdp_dropped(const struct net_device *nic);
int netblk_monitor_xdp_ready(struct net_device *nic, u32 reopen, struct netlink_ext_ack *extack);
void netblk_monitor_started(struct netblk_instance *inst);

/* genl.c */
int netblk_genl_register(void);
void netblk_genl_unregister(void);

#endif
