/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * START's and ATTACH's knobs, each defined once: X-macro lists that the
 * uapi's attribute numbers (netblk_genl.h's enum netblk_attr), genl.c's
 * policy, the structs of the values the kernel parses them into and echoes
 * them from (struct netblk_start_options, core_api.h, which the core gets
 * whole in its config; struct netblk_attach_options, host/host.h), and
 * netblkctl's arguments, sending, parsing back and, for the lines marked
 * "gen", its option table's row, save and outputs are all made from.
 * Macros only, no types: the core includes it without kernel headers.
 *
 * A knob is a number or a flag the kernel takes as it is (within min..max)
 * or puts its default in for.  What needs more stays hand-written: the
 * device, the port, dev= (IFNAME), allow= (ALLOW), key= and auth= (which
 * go together), ATTACH's ADDR and its READ_ONLY (START's line below
 * defines the attribute; ATTACH also makes it true when the server serves
 * read-only).  Checks between knobs (per-source= at most sessions=) and
 * values resolved once started (the NIC's MTU, the CPU chosen, the VLAN of
 * a VLAN device) are hand-written too, where the knob's value is used.
 *
 * Adding a knob: a line here with the next free attribute number (and
 * NETBLK_A_NEXT moved past it), "gen" for netblkctl, and the code that
 * uses the value -- the core reads config.options.<name>
 * (engine::options_), the attach side att->params.opt.<name>.  Then, from
 * the top directory, "make build/unit/netblkctl_tests &&
 * NETBLK_UPDATE_DOCS=1 build/unit/netblkctl_tests" writes a "gen" knob's
 * docs: README.md's usage and bullet, netblkctl(8)'s synopsis and entry,
 * the bash completion's words, the Prometheus label in
 * tools/netblkctl/README.md (tests/netblkctl/test_docs.cpp fails until
 * they are written).  Never renumber or reuse an attribute: netlink
 * readers of any release depend on the numbers
 * (tests/netblkctl/test_options.cpp pins them).  A list's order is the
 * order of the struct's fields, of netblkctl's usage and save (for "gen"
 * lines, after the hand-written options) and of its JSON fields, not of
 * the numbers.
 *
 * Each entry: X(NAME, name, nr, type, min, max, def, ctl, cli, metavar, help)
 *   NAME    the attribute: NETBLK_A_<NAME>
 *   name    the field of the structs of values (kernel and netblkctl), and
 *           the JSON field
 *   nr      the attribute's number
 *   type    flag (an NLA_FLAG: absent is false), u16 or u32
 *   min,max what the kernel takes: anything else is refused by the policy
 *           (netlink's own "integer out of range"); a flag's are 0, 1
 *   def     the value when the attribute is absent (a default depending on
 *           another knob or on the NIC is put in by hand: 0 here)
 *   ctl     netblkctl: "own" -- its option table row, save rule and output
 *           are hand-written (options.cpp, format.cpp, prometheus.cpp),
 *           being older than this list or worded specially; "gen" -- made
 *           from this line: the row, saved when neither 0 nor def, the
 *           JSON field, the Prometheus label, the text's "options" line,
 *           and its docs (tools/netblkctl/usage.h)
 *   cli     netblkctl's word before '=' ("gen" lines)
 *   metavar its value's name in the usage ("gen" lines)
 *   help    what it does, in the usage, README.md and netblkctl(8) ("gen"
 *           lines): lines that keep the usage within 80 columns (59
 *           characters), which the docs join into one sentence
 */
#ifndef NETBLK_OPTIONS_H
#define NETBLK_OPTIONS_H

/* START's knobs (LIST and events say them back, as the instance runs them). */
#define NETBLK_SESSIONS_LIMIT		65536	/* sessions= at most */
#define NETBLK_SESSIONS_DEFAULT		1024	/* sessions= when not said */
#define NETBLK_HOST_DEPTH_LIMIT		1024	/* ATTACH's queue-depth= at most */
#define NETBLK_HOST_DEPTH_DEFAULT	64	/* requests in flight a device */

#define NETBLK_START_OPTIONS(X)							\
	/* refuse writes */							\
	X(READ_ONLY, read_only, 3, flag, 0, 1, 0, own, "ro", "", "")		\
	/* the MTU to size datagrams for (0: the NIC's) */			\
	X(MTU, mtu, 5, u32, 0, 0xffffffff, 0, own, "mtu", "", "")		\
	/* the worker's cpu (absent: chosen by the NIC's queues) */		\
	X(CPU, cpu, 6, u32, 0, 0xffffffff, 0, own, "cpu", "", "")		\
	/* the worker's poll time (instance.c: at most NETBLK_POLL_US_MAX) */	\
	X(POLL_US, poll_us, 7, u32, 0, 0xffffffff, 0, own, "poll", "", "")	\
	/* the 802.1Q VLAN served; 0: untagged (or the VLAN of dev=) */	\
	X(VLAN, vlan, 26, u16, 0, 0xffff, 0, own, "vlan", "", "")		\
	/* protocol v2 sessions the instance holds */				\
	X(SESSIONS, sessions, 33, u32, 1, NETBLK_SESSIONS_LIMIT, NETBLK_SESSIONS_DEFAULT, own, "sessions", "", "") \
	/* u32, enum netblk_nic_loss: what it does when its NIC goes */	\
	X(NIC_LOSS, nic_loss, 41, u32, 0, 1, 0, own, "nic-loss", "", "")	\
	/*								\
	 * of the sessions, those one IPv4 address may hold (1 up to		\
	 * SESSIONS; absent: 16, or SESSIONS if fewer)				\
	 */									\
	X(PER_SOURCE, per_source, 46, u32, 1, NETBLK_SESSIONS_LIMIT, 0, own, "per-source", "", "") \
	/*								\
	 * times a request the disk refuses for now (BLK_STS_AGAIN) is	\
	 * submitted, a backoff apart that doubles from 50 us, before it is	\
	 * answered EAGAIN; from the fourth on it may block the worker	\
	 */									\
	X(DISK_TRIES, disk_tries, 47, u32, 1, 16, 6, gen, "disk-tries", "N",	\
	  "times a request the disk refuses for now is tried before\n"	\
	  "it is answered EAGAIN (1..16, default 6); the waits double\n"	\
	  "from 50 us, and from the fourth try on the worker may block")	\
	/*								\
	 * workers, each pinned to a CPU of its own with its own slots and	\
	 * sessions.  Absent: as many as the NIC has RX queues, at most the	\
	 * CPUs it transmits XDP from (instance.c); LIST says the number	\
	 * run, so its default here is 1, the one netblkctl leaves unsaid	\
	 */									\
	X(QUEUES, queues, 48, u32, 1, 64, 1, gen, "queues", "N",		\
	  "workers, each on a CPU of its own with its own slots and\n"	\
	  "sessions (1..64; default: the NIC's RX queues, at most the\n"	\
	  "CPUs it can send XDP frames from)")

/* ATTACH's knobs (ATTACHED says them back). */
#define NETBLK_ATTACH_OPTIONS(X)						\
	/* requests in flight */						\
	X(QUEUE_DEPTH, queue_depth, 37, u32, 1, NETBLK_HOST_DEPTH_LIMIT, NETBLK_HOST_DEPTH_DEFAULT, own, "queue-depth", "", "") \
	/* fail I/O not done in this long; 0: never */				\
	X(TIMEOUT_MS, timeout_ms, 38, u32, 0, 0xffffffff, 0, own, "timeout", "", "") \
	/*								\
	 * blk-mq hardware queues, each with its own socket, session and	\
	 * queue-depth= requests; 0 (absent): one a CPU, at most the		\
	 * instance's queues (INFO).  ATTACHED says the number made.		\
	 */									\
	X(HOST_QUEUES, queues, 51, u32, 0, 64, 0, gen, "queues", "N",		\
	  "hardware queues, each with its own socket, session and\n"	\
	  "queue-depth (1..64; default: one a CPU, at most the\n"		\
	  "instance's queues)")

/*
 * The C type a knob's value is kept in, by its type (the kernel's and the
 * core's structs of values; the includer has uint8_t and its kin).
 */
#define NETBLK_OPTION_CTYPE_flag	uint8_t
#define NETBLK_OPTION_CTYPE_u16		uint16_t
#define NETBLK_OPTION_CTYPE_u32		uint32_t

/* The next free attribute number of enum netblk_attr. */
#define NETBLK_A_NEXT 52

#endif /* NETBLK_OPTIONS_H */
