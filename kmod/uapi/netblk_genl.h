/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * netblk generic netlink family: the contract between netblk.ko and
 * netblkctl (or any other client: `genl-ctrl-list` shows the family).
 *
 * Family "netblk", version 1.  Multicast group "events".
 *
 * START  (doit, CAP_SYS_ADMIN and CAP_NET_ADMIN)
 *                               DEVICE, PORT, [READ_ONLY], [IFNAME], [MTU],
 *                               [CPU], [POLL_US], [VLAN], [ALLOW],
 *                               [SESSIONS], [KEY], [AUTH], [NIC_LOSS],
 *                               [PER_SOURCE], [DISK_TRIES], [QUEUES] (the knobs:
 *                               netblk_options.h's NETBLK_START_OPTIONS)
 *        reply: one NETBLK_CMD_START message describing the new instance
 *        (the same attributes as a LIST entry; every knob as it runs,
 *        READ_ONLY when set, VLAN 0 when untagged).  The caller then steers
 *        (ADDR, PORT, VLAN) to HANDOFF_IFINDEX in the NIC program's maps,
 *        and puts ALLOW in its allowlist (bpf/README.md).
 * STOP   (doit, CAP_SYS_ADMIN and CAP_NET_ADMIN) PORT, or ALL
 *        reply: one NETBLK_CMD_STOP message with STOPPED (u32: how many
 *        were released) and STOPPING (u32: how many no longer serve but
 *        still wait, past the few seconds STOP waits, for their disk to
 *        finish what it has; LIST shows them, and an EVENT says when they
 *        are released).
 * LIST   (dumpit, CAP_NET_ADMIN) one NETBLK_CMD_LIST message per instance,
 *                               with STATS and LATENCY.  The kernel sizes a
 *                               dump's messages from the reader's largest
 *                               recv so far: read with 32 KiB buffers, or an
 *                               instance whose histogram does not fit comes
 *                               without LATENCY.
 * EVENT  (multicast on "events", CAP_NET_ADMIN to join) EVENT, REASON, and
 *                               the instance's attributes as in LIST (no
 *                               STATS).
 *
 * ATTACH (doit, CAP_SYS_ADMIN and CAP_NET_ADMIN)
 *                               ADDR, PORT, [IFNAME], [READ_ONLY],
 *                               [QUEUE_DEPTH], [TIMEOUT_MS], [KEY] (the
 *                               knobs: NETBLK_ATTACH_OPTIONS)
 *        the block-device client: opens a session with the instance at
 *        ADDR:PORT, asks INFO (5 s at most), and makes /dev/netblkN of it,
 *        whose partition table the kernel reads: a READ unanswered for
 *        15 s (or TIMEOUT_MS, when shorter) fails the attach (ETIMEDOUT).
 *        reply: one NETBLK_CMD_ATTACH message describing it (as an
 *        ATTACHED entry).  Other commands go on meanwhile.
 * DETACH (doit, CAP_SYS_ADMIN and CAP_NET_ADMIN) DISK, or ALL; [FORCE]
 *        refused (EBUSY) while the disk is open unless FORCE, which fails
 *        its outstanding I/O.  An attach still in progress is given up
 *        (it fails ECANCELED) and counted.  reply: NETBLK_CMD_DETACH with
 *        STOPPED (u32: how many were detached).
 * ATTACHED (dumpit, CAP_NET_ADMIN) one message per attached device, with
 *                               HOST_STATS.
 *
 * XDP_READY (doit, CAP_NET_ADMIN) IFINDEX, XDP_DROPPED
 *        netblkctl added netblk's XDP program to the NIC again after the
 *        reopen LIST numbered XDP_DROPPED (vmxnet3 drops it on every
 *        reopen): the instances waiting for it serve again.  EAGAIN when the
 *        NIC reopened again since; 0 when nothing waited.
 *
 * Every refusal is an errno with an extended-ack message saying what to
 * change; a caller without the capabilities a command needs gets EPERM
 * (START, STOP, ATTACH and DETACH: with a message naming the one missing).
 */
#ifndef NETBLK_GENL_H
#define NETBLK_GENL_H

#include <linux/types.h>

#include "netblk_counters.h"
#include "netblk_options.h"

#define NETBLK_GENL_NAME		"netblk"
#define NETBLK_GENL_VERSION		1
#define NETBLK_GENL_MCGRP_EVENTS	"events"

#define NETBLK_ALLOW_MAX		64	/* prefixes in an allowlist */
#define NETBLK_KEY_BYTES		16	/* a key= key: SipHash-2-4's 128 bits */

/* NETBLK_A_AUTH: what a keyed instance's tags cover (docs/protocol.md). */
enum netblk_auth {
	NETBLK_AUTH_NONE,	/* no key: no tags */
	NETBLK_AUTH_HEADER,	/* the header of every datagram */
	NETBLK_AUTH_FULL,	/* the header and the data */
};

/* NETBLK_A_ALLOW_PREFIX: one allowed source prefix, e.g. 10.1.0.0/16. */
struct netblk_prefix {
	__be32 addr;		/* network order; no bits set past len */
	__u8 len;		/* 0..32 */
	__u8 reserved[3];
};

enum netblk_cmd {
	NETBLK_CMD_UNSPEC,
	NETBLK_CMD_START,
	NETBLK_CMD_STOP,
	NETBLK_CMD_LIST,
	NETBLK_CMD_EVENT,
	NETBLK_CMD_ATTACH,
	NETBLK_CMD_DETACH,
	NETBLK_CMD_ATTACHED,
	NETBLK_CMD_XDP_READY,
	__NETBLK_CMD_MAX,
};
#define NETBLK_CMD_MAX (__NETBLK_CMD_MAX - 1)

#define NETBLK_A_OPTION(NAME, name, nr, ...) NETBLK_A_##NAME = nr,
enum netblk_attr {
	NETBLK_A_UNSPEC,
	NETBLK_A_DEVICE,	/* string: block device path, e.g. /dev/nvme0n1p3 */
	NETBLK_A_PORT,		/* u16: UDP port, host order */
	NETBLK_A_IFNAME = 4,	/* string: NIC (once it went away: the name it had) */
	NETBLK_A_ALL = 8,	/* flag: STOP every instance */
	NETBLK_A_IFINDEX,	/* u32: the NIC's; an instance's, not once its NIC went away */
	NETBLK_A_ADDR,		/* u32: IPv4 address, network order */
	NETBLK_A_SIZE,		/* u64: device size in bytes */
	NETBLK_A_SECTOR_SIZE,	/* u32: logical block size */
	NETBLK_A_MAX_IO,	/* u32: data bytes one datagram carries */
	NETBLK_A_SLOTS,		/* u32: requests the instance holds at once */
	NETBLK_A_UPTIME_MS,	/* u64 */
	NETBLK_A_STOPPED,	/* u32: instances a STOP stopped */
	NETBLK_A_EVENT,		/* u32: enum netblk_event */
	NETBLK_A_REASON,	/* u32: enum netblk_stop_reason */
	NETBLK_A_ERRNO,		/* u32: positive errno of a failure event */
	NETBLK_A_MESSAGE,	/* string: human-readable detail of an event */
	NETBLK_A_STATS,		/* nested: enum netblk_stat_attr */
	NETBLK_A_PAD,		/* padding of the u64 attributes: skip it */
	/*
	 * u32: ignored since 0.2.0.  It was an fd of a BPF link the module
	 * held; now the module holds no BPF object: netblkctl adds the XDP
	 * program to the NIC's libxdp dispatcher and removes it (bpf/README.md).
	 */
	NETBLK_A_XDP_LINK_FD,
	/*
	 * u32: the instance's own net device (netblk<port>); the XDP
	 * program's netblk_ports devmap maps the port to it.
	 */
	NETBLK_A_HANDOFF_IFINDEX,
	NETBLK_A_LATENCY,	/* nested: enum netblk_latency_attr (LIST) */
	/* nested: NETBLK_A_ALLOW_PREFIX entries; absent: any source */
	NETBLK_A_ALLOW = 27,
	NETBLK_A_ALLOW_PREFIX,	/* binary: struct netblk_prefix */
	NETBLK_A_DRIVER,	/* string: the NIC's driver */
	NETBLK_A_STATE,		/* u32: enum netblk_state */
	NETBLK_A_STOPPING_MS,	/* u64: how long it has been stopping */
	NETBLK_A_STOPPING,	/* u32: instances a STOP left stopping */
	/* binary, NETBLK_KEY_BYTES: accept only datagrams tagged with this key (START only) */
	NETBLK_A_KEY = 34,
	NETBLK_A_AUTH,		/* u32: enum netblk_auth; absent: NONE, or HEADER with a key */
	NETBLK_A_DISK,		/* string: an attached device, netblkN */
	NETBLK_A_FORCE = 39,	/* flag: DETACH an open device */
	NETBLK_A_HOST_STATS,	/* nested: enum netblk_host_stat_attr (ATTACHED) */
	NETBLK_A_WAITING_MS = 42,	/* u64: how long it has been waiting for its NIC */
	NETBLK_A_WAITING_FOR,	/* string: what it waits for ("eth0 is down") */
	/* string: the served device as the kernel names it (nvme0n1p1, as in /proc/diskstats) */
	NETBLK_A_DISK_NAME,
	/*
	 * u32, LIST: the NIC's driver dropped netblk's XDP program when the NIC
	 * reopened, and this numbers that reopen (absent: the program runs);
	 * XDP_READY names it back.
	 */
	NETBLK_A_XDP_DROPPED,
	/*
	 * START's and ATTACH's knobs (READ_ONLY 3, MTU 5, CPU 6, POLL_US 7,
	 * VLAN 26, SESSIONS 33, QUEUE_DEPTH 37, TIMEOUT_MS 38, NIC_LOSS 41,
	 * PER_SOURCE 46, ...): netblk_options.h's lists say what each is and
	 * fix its number.
	 */
	NETBLK_START_OPTIONS(NETBLK_A_OPTION)
	NETBLK_ATTACH_OPTIONS(NETBLK_A_OPTION)
	/*
	 * nested, LIST: the instance's queues (start queues=N), a NETBLK_A_QUEUE
	 * nest each, in order: enum netblk_queue_attr; ATTACHED: a device's
	 * hardware queues (attach queues=N), when it has several
	 */
	NETBLK_A_QUEUE_LIST = 49,
	NETBLK_A_QUEUE,
	__NETBLK_A_MAX = NETBLK_A_NEXT,
};
#undef NETBLK_A_OPTION
#define NETBLK_A_MAX (__NETBLK_A_MAX - 1)

enum netblk_event {
	NETBLK_EVENT_STARTED = 1,
	/* released: REASON says why it stopped; MESSAGE the details */
	NETBLK_EVENT_STOPPED,
	NETBLK_EVENT_FAILED,	/* a START refused: ERRNO, MESSAGE (the extack) */
	/* the disk failed a request: ERRNO, MESSAGE; at most one a second */
	NETBLK_EVENT_IO_ERROR,
	/*
	 * no longer serving, but its disk has not finished what it was given
	 * after some seconds: MESSAGE says what it waits for.  STOPPED follows
	 * once the disk answers.
	 */
	NETBLK_EVENT_STOPPING,
	/*
	 * its NIC went down, lost the instance's address or lowered its MTU
	 * below the instance's: it keeps its disk and its port and waits
	 * (nic-loss=wait).  MESSAGE says what for.
	 */
	NETBLK_EVENT_WAITING,
	NETBLK_EVENT_RESUMED,	/* the NIC is back: serving again.  MESSAGE: after how long */
};

/* What an instance does when its NIC goes down, loses the address or the MTU. */
enum netblk_nic_loss {
	NETBLK_NIC_LOSS_WAIT,	/* wait for it to come back (the default) */
	NETBLK_NIC_LOSS_STOP,	/* stop, as a vanished NIC or disk does */
};

enum netblk_state {
	NETBLK_STATE_SERVING = 1,
	NETBLK_STATE_STOPPING,	/* waits for its disk to finish before it is released */
	NETBLK_STATE_WAITING,	/* waits for its NIC (NETBLK_EVENT_WAITING); holds its disk and port */
};

enum netblk_stop_reason {
	NETBLK_REASON_ASKED = 1,	/* netblkctl stop */
	NETBLK_REASON_RMMOD,		/* module unloaded */
	NETBLK_REASON_NIC_GONE,		/* NIC down, unregistered or lost its address */
	NETBLK_REASON_DEVICE_GONE,	/* block device removed */
	NETBLK_REASON_NIC_MTU,		/* the NIC's MTU fell below the instance's */
	NETBLK_REASON_NIC_XMIT,		/* the NIC failed every reply for a second */
	/* the NIC changed so that it could pass it another VLAN's requests */
	NETBLK_REASON_NIC_VLAN,
	NETBLK_REASON_HANDOFF_DOWN,	/* its netblk<port> device was taken down */
};

/*
 * One of an instance's queues (NETBLK_A_QUEUE): its worker's CPU, and the
 * counters that show how work spreads over the queues, its own alone
 * (nested: NETBLK_S_REQUESTS, _FRAMES_RX, _FRAMES_TX, _STEERED,
 * _SESSIONS_OPEN, _INFLIGHT_DISK; NETBLK_A_STATS has them all, summed).
 * An attached device's hardware queue (ATTACHED, in its NETBLK_A_QUEUE_LIST)
 * has NETBLK_Q_HOST_STATS instead: NETBLK_HS_REQUESTS, _COMPLETED, _SENDS,
 * _TIMEOUTS, _SESSIONS_OPENED, _OUTSTANDING (NETBLK_A_HOST_STATS: all, summed).
 */
enum netblk_queue_attr {
	NETBLK_Q_UNSPEC,
	NETBLK_Q_CPU,		/* u32 */
	NETBLK_Q_STATS,		/* nested: enum netblk_stat_attr */
	NETBLK_Q_HOST_STATS,	/* nested: enum netblk_host_stat_attr */
	__NETBLK_Q_MAX,
};
#define NETBLK_Q_MAX (__NETBLK_Q_MAX - 1)

/*
 * Counters of one instance, nested in NETBLK_A_STATS, each a u64: the
 * lists of netblk_counters.h say what each counts and fix its number.
 */
#define NETBLK_S_ATTR(NAME, name, nr, ...) NETBLK_S_##NAME = nr,
#define NETBLK_S_DROP_ATTR(NAME, name, nr, ...) NETBLK_S_DROP_##NAME = nr,
#define NETBLK_S_REFUSED_ATTR(NAME, name, nr, ...) NETBLK_S_REFUSED_##NAME = nr,
enum netblk_stat_attr {
	NETBLK_S_UNSPEC,
	NETBLK_S_PAD = 24,	/* padding of the u64 attributes: skip it */
	NETBLK_STATS(NETBLK_S_ATTR)
	NETBLK_DROPS(NETBLK_S_DROP_ATTR)
	NETBLK_REFUSALS(NETBLK_S_REFUSED_ATTR)
	__NETBLK_S_MAX = NETBLK_S_NEXT,
};
#undef NETBLK_S_ATTR
#undef NETBLK_S_DROP_ATTR
#undef NETBLK_S_REFUSED_ATTR
#define NETBLK_S_MAX (__NETBLK_S_MAX - 1)

/*
 * Why an attached device stopped for good (NETBLK_HS_CHANGED): after a
 * restart, the server's INFO says it is not the device attached.  Its I/O
 * fails EIO from then on, and nothing of it is sent; detach it.
 */
enum netblk_host_change {
	NETBLK_HOST_CHANGE_NONE,
	NETBLK_HOST_CHANGE_OTHER_DEVICE,	/* another export id: another device */
	NETBLK_HOST_CHANGE_SMALLER,		/* the device shrank */
	NETBLK_HOST_CHANGE_READ_ONLY,		/* served read-only now, attached read-write */
	NETBLK_HOST_CHANGE_GEOMETRY,		/* other sectors, or less data a datagram */
	NETBLK_HOST_CHANGE_INFO_REFUSED,	/* INFO refused, or nonsense */
};

/*
 * Counters of one attached device, nested in NETBLK_A_HOST_STATS, each a
 * u64: netblk_counters.h's NETBLK_HOST_STATS says what each counts and
 * fixes its number.
 */
#define NETBLK_HS_ATTR(NAME, name, nr, ...) NETBLK_HS_##NAME = nr,
enum netblk_host_stat_attr {
	NETBLK_HS_UNSPEC,
	NETBLK_HS_PAD = 1,	/* padding of the u64 attributes: skip it */
	NETBLK_HOST_STATS(NETBLK_HS_ATTR)
	__NETBLK_HS_MAX = NETBLK_HS_NEXT,
};
#undef NETBLK_HS_ATTR
#define NETBLK_HS_MAX (__NETBLK_HS_MAX - 1)

/*
 * The service-time histogram of an instance, nested in NETBLK_A_LATENCY:
 * nanoseconds from a request's arrival at the XDP hook to its reply handed to
 * the NIC.  Log-linear buckets: values below LINEAR_LIMIT have one bucket
 * each; above, each power of two 2^e (e >= log2(LINEAR_LIMIT)) is cut into
 * SUB_BUCKETS equal buckets.  Only buckets with samples are sent.
 */
enum netblk_latency_attr {
	NETBLK_L_UNSPEC,
	NETBLK_L_COUNT,		/* u64: samples */
	NETBLK_L_MAX_NS,	/* u64: the largest sample, exact */
	NETBLK_L_LINEAR_LIMIT,	/* u32 */
	NETBLK_L_SUB_BUCKETS,	/* u32 */
	NETBLK_L_BUCKETS,	/* binary: struct netblk_latency_bucket[] */
	NETBLK_L_PAD,
	NETBLK_L_SUM_NS,	/* u64: the samples' sum, exact */
	/* binary: struct netblk_op_service_time[], an instance's ops with replies */
	NETBLK_L_OPS,
	__NETBLK_L_MAX,
};
#define NETBLK_L_MAX (__NETBLK_L_MAX - 1)

/* The service time of an instance's replies to one op (docs/protocol.md's op codes). */
struct netblk_op_service_time {
	__u32 op;
	__u32 reserved;
	__u64 count;		/* replies */
	__u64 sum_ns;		/* their service times' sum */
};

struct netblk_latency_bucket {
	__u32 index;		/* bucket number, from 0 */
	__u32 reserved;
	__u64 count;
};

#endif /* NETBLK_GENL_H */
