/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * netblk's counters, each defined once: X-macro lists that the uapi's
 * attribute enums (netblk_genl.h), the C++ core's counter structs and
 * snapshots (core/counters.h, core_api.h, host_api.h, host_queue.h), the
 * kernel side's (host/host.h), genl.c's emission and netblkctl's text, JSON,
 * Prometheus output and documentation table are all made from.  Macros
 * only, no types: the core includes it without kernel headers.
 *
 * Adding a counter: one line here, with the next free attribute number
 * (and NETBLK_S_NEXT / NETBLK_HS_NEXT moved past it), and the line of the
 * data path that counts it.  Never renumber or reuse an attribute: netlink
 * readers of any release depend on the numbers (tests/netblkctl/
 * test_counters.cpp pins them).  The list's order is the order of JSON
 * fields and of the documentation's table, not of the numbers.
 *
 * Each entry: X(NAME, name, nr, where, kind, prom, help)
 *   NAME  the attribute: NETBLK_S_<NAME> (NETBLK_HS_<NAME>)
 *   name  the field of the snapshot struct (and of its writer's struct),
 *         and the JSON field
 *   nr    the attribute's number
 *   where who writes it, so that each counter has one writer and no
 *         update needs a locked instruction:
 *         instances (struct netblk_stats):
 *           rx        the receive path: per CPU (struct rx_counters), summed
 *                     when read
 *           worker    the instance's worker thread (struct worker_counters)
 *           rx_worker both: a field in each, their sum read
 *           computed  core/engine.cpp's read_stats() makes it by hand: a sum
 *                     of an array, an in-flight difference, the session
 *                     table's
 *         attached devices (struct netblk_host_stats, netblk_host_kernel_stats):
 *           queue     the client core's host_queue (struct host_counters)
 *           core      the client core fills it by hand
 *                     (netblk_host_core_read_stats, core/host.cpp)
 *           kernel    the kernel side's (struct netblk_host_kernel_stats,
 *                     host/host.h), written under its queue's lock
 *         an attached device's counters are its queues' summed (the round
 *         trip, resend timeout, unreachable and changed: the worst queue's)
 *   kind  count (a counter of events), bytes (a counter of bytes), gauge
 *         (a level now), ns (a level in nanoseconds)
 *   prom  its Prometheus family (netblkctl stats --prometheus), or "" when
 *         it is not a family of its own but a label of another (by stage,
 *         why, how) or the sum of a labelled family; those netblkctl's
 *         prometheus.cpp emits by hand
 *   help  what it counts: Prometheus's HELP, and the documentation's
 *
 * The counters by reason and by status (NETBLK_DROPS, NETBLK_REFUSALS) are
 * arrays in the core, indexed by enum netblk_drop_reason and enum
 * netblk_refusal (core_api.h, made from these lists); a new reason or
 * status also needs the core's own enum (core/frame.h's drop_reason,
 * core/protocol.h's refusal) and what detects it.  Their sums are bad and
 * refused.
 */
#ifndef NETBLK_COUNTERS_H
#define NETBLK_COUNTERS_H

/* An instance's counters (nested in NETBLK_A_STATS, each a u64). */
#define NETBLK_STATS(X)								\
	X(REQUESTS, requests, 1, rx, count, "netblk_requests_total",		\
	  "Datagrams that parsed as requests.")					\
	X(BAD, bad, 2, computed, count, "",					\
	  "Datagrams dropped unanswered: the sum of dropped_* "			\
	  "(netblk_bad_total by reason).")					\
	X(REFUSED, refused, 3, computed, count, "",				\
	  "Requests answered with an error without the disk: the sum of "	\
	  "refused_* (netblk_refused_total by status).")			\
	X(BUSY, busy, 4, rx, count, "netblk_busy_total",			\
	  "Refusals for want of a free slot (part of netblk_refused_total).")	\
	X(INFLIGHT_QUEUED, inflight_queued, 5, computed, gauge, "",		\
	  "Requests queued for the disk (netblk_inflight{stage=\"queued\"}).")	\
	X(INFLIGHT_DISK, inflight_disk, 6, computed, gauge, "",			\
	  "Requests at the disk (netblk_inflight{stage=\"disk\"}).")		\
	X(INFLIGHT_DONE, inflight_done, 7, computed, gauge, "",			\
	  "Requests done, waiting for their reply "				\
	  "(netblk_inflight{stage=\"done\"}).")					\
	X(READS, reads, 8, worker, count, "netblk_reads_total",			\
	  "Read requests accepted (a resent read is served again and counted "	\
	  "again).")								\
	X(READ_BYTES, read_bytes, 9, worker, bytes, "netblk_read_bytes_total",	\
	  "Bytes of the read requests accepted.")				\
	X(WRITES, writes, 10, worker, count, "netblk_writes_total",		\
	  "Write requests accepted (a resent copy counts once).")		\
	X(WRITE_BYTES, write_bytes, 11, worker, bytes, "netblk_write_bytes_total", \
	  "Bytes of the write requests accepted.")				\
	X(FLUSHES, flushes, 12, worker, count, "netblk_flushes_total",		\
	  "Flush requests accepted.")						\
	X(FUA_WRITES, fua_writes, 13, worker, count, "netblk_fua_writes_total",	\
	  "Write requests accepted with FUA.")					\
	X(IO_ERRORS, io_errors, 14, worker, count, "netblk_io_errors_total",	\
	  "Requests (READ: datagrams) the disk failed, answered EIO; refusals "	\
	  "are not counted here.")						\
	X(DISK_BUSY, disk_busy, 15, worker, count, "netblk_disk_busy_total",	\
	  "Times the disk said again (BLK_STS_AGAIN): retried after a backoff.") \
	X(DISK_BLOCKING, disk_blocking, 33, worker, count,			\
	  "netblk_disk_blocking_total",						\
	  "Retries submitted without REQ_NOWAIT, letting the disk make the "	\
	  "worker wait.")							\
	X(DISK_GAVE_UP, disk_gave_up, 34, worker, count,			\
	  "netblk_disk_gave_up_total",						\
	  "Requests still refused after every retry: answered EAGAIN.")		\
	X(NO_BUFFER, no_buffer, 35, worker, count, "netblk_no_buffer_total",	\
	  "Requests without a page to read or copy into: answered EAGAIN.")	\
	X(REPLIES_DROPPED, replies_dropped, 16, rx_worker, count,		\
	  "netblk_replies_dropped_total",					\
	  "Replies not sent: over the NIC's MTU, no buffer to answer in, or "	\
	  "the NIC did not take them.")						\
	X(REPLIES_OVERSIZED, replies_oversized, 36, worker, count,		\
	  "netblk_replies_oversized_total",					\
	  "Replies larger than the NIC's MTU at the time (part of "		\
	  "netblk_replies_dropped_total).")					\
	X(TX_DEFERRED, tx_deferred, 37, worker, count, "netblk_tx_deferred_total", \
	  "Times a reply waited for room in the NIC's transmit ring.")		\
	X(TX_ERRORS, tx_errors, 38, worker, count, "netblk_tx_errors_total",	\
	  "Transmits the NIC failed with an error.")				\
	X(WORKER_SLEEPS, worker_sleeps, 17, worker, count,			\
	  "netblk_worker_sleeps_total",						\
	  "Times the instance's worker went to sleep for want of work.")	\
	X(FRAMES_RX, frames_rx, 18, rx, count, "netblk_frames_received_total",	\
	  "Frames steered to the instance.")					\
	X(STEERED, steered, 73, rx, count, "netblk_steered_total",		\
	  "Datagrams of a session of another queue that arrived on a CPU "	\
	  "whose queue is not the session's (the NIC's RSS or RPS moved it): "	\
	  "handed to its own queue's worker, which serves it as any.")		\
	X(FRAMES_TX, frames_tx, 19, rx_worker, count, "netblk_frames_sent_total", \
	  "Frames handed to the NIC.")						\
	X(BYTES_ZEROCOPY, bytes_zerocopy, 20, worker, bytes,			\
	  "netblk_zerocopy_bytes_total",					\
	  "Data bytes that reached the disk or the NIC in place, without a "	\
	  "copy.")								\
	X(BYTES_COPIED, bytes_copied, 21, worker, bytes,			\
	  "netblk_copied_bytes_total",						\
	  "Data bytes the CPU had to copy (a fallback path).")			\
	X(PAGES_REPLACED, pages_replaced, 74, worker, count,			\
	  "netblk_pages_replaced_total",					\
	  "Slot pages the NIC still held from an earlier reply when the slot "	\
	  "took a request: left to the NIC, and a fresh page allocated in "	\
	  "their place. A steady count is a NIC slow to free what it sent, "	\
	  "each an allocation on the reply path.")				\
	X(WRITES_MISALIGNED, writes_misaligned, 72, rx, count,		\
	  "netblk_writes_misaligned_total",					\
	  "WRITEs whose data the NIC put where the disk cannot DMA from (the "	\
	  "device's dma alignment): copied by the CPU (in bytes_copied). A "	\
	  "steady count is a client's or a NIC's layout costing a copy each.")	\
	X(DISK_BATCHES, disk_batches, 22, worker, count,			\
	  "netblk_disk_batches_total",						\
	  "Worker rounds that submitted bios under one plug.")			\
	X(TX_BATCHES, tx_batches, 23, worker, count, "netblk_transmits_total",	\
	  "Transmits of replies to the NIC, each with one flush.")		\
	X(ANSWERS_FOLDED, answers_folded, 64, worker, count,			\
	  "netblk_answers_folded_total",					\
	  "WRITE answers sent as a bit of another WRITE's answer, not a frame "	\
	  "of their own.")							\
	X(READS_GATHERED, reads_gathered, 65, worker, count,			\
	  "netblk_reads_gathered_total",					\
	  "READs of several datagrams read in one disk I/O and sent from its "	\
	  "pages.")								\
	X(TRIMS, trims, 39, worker, count, "netblk_trims_total",		\
	  "TRIM requests accepted.")						\
	X(TRIM_BYTES, trim_bytes, 40, worker, bytes, "netblk_trim_bytes_total",	\
	  "Bytes of the TRIM requests accepted.")				\
	X(WRITE_ZEROES, write_zeroes, 41, worker, count,			\
	  "netblk_write_zeroes_total", "WRITE_ZEROES requests accepted.")	\
	X(WRITE_ZEROES_BYTES, write_zeroes_bytes, 42, worker, bytes,		\
	  "netblk_write_zeroes_bytes_total",					\
	  "Bytes of the WRITE_ZEROES requests accepted.")			\
	X(SESSIONS_OPEN, sessions_open, 43, computed, gauge,			\
	  "netblk_sessions_open", "Protocol v2 sessions open now.")		\
	X(SESSIONS_OPENED, sessions_opened, 44, computed, count,		\
	  "netblk_sessions_opened_total", "Protocol v2 sessions opened.")	\
	X(SESSIONS_EVICTED, sessions_evicted, 45, computed, count,		\
	  "netblk_sessions_evicted_total",					\
	  "Idle sessions closed to make room for new ones.")			\
	X(SESSIONS_REFUSED, sessions_refused, 46, computed, count,		\
	  "netblk_sessions_refused_total",					\
	  "HELLOs refused (EUSERS): the session table is full of active "	\
	  "sessions.")								\
	X(HELLO_COOKIES, hello_cookies, 47, rx, count,				\
	  "netblk_hello_cookies_total",						\
	  "HELLOs answered with a cookie (the first step of opening a "		\
	  "session).")								\
	X(NOT_CONNECTED, not_connected, 48, rx_worker, count,			\
	  "netblk_not_connected_total",						\
	  "Requests answered ENOTCONN: no such session.")			\
	X(AUTH_FAILED, auth_failed, 49, rx, count, "netblk_auth_failed_total",	\
	  "Datagrams answered EKEYREJECTED: no valid tag on a keyed instance.")	\
	X(OLD_VERSION, old_version, 50, rx, count, "netblk_old_version_total",	\
	  "Datagrams of another protocol version, answered EPROTONOSUPPORT.")	\
	X(DUPLICATES, duplicates, 51, computed, count, "netblk_duplicates_total", \
	  "Duplicates of answered requests that change the disk: answered "	\
	  "again, not executed.")						\
	X(DUPLICATES_IN_FLIGHT, duplicates_in_flight, 52, computed, count,	\
	  "netblk_duplicates_in_flight_total",					\
	  "Duplicates of requests still at the disk: dropped.")			\
	X(STALE, stale, 53, computed, count, "netblk_stale_total",		\
	  "Requests older than their session's replay window: refused ESTALE, " \
	  "never executed.")							\
	X(TOO_FAR, too_far, 54, computed, count, "netblk_too_far_total",	\
	  "Requests too far ahead of their session's replay window: refused "	\
	  "EOVERFLOW.")								\
	X(SERVED_AGAIN, served_again, 71, computed, count,			\
	  "netblk_served_again_total",						\
	  "Resends of READs and INFOs served again (at most 3 a request: then "	\
	  "EALREADY).")

/*
 * Datagrams dropped unanswered, by the first reason that applies:
 * X(NAME, name, nr, text, help), the attribute NETBLK_S_DROP_<NAME>, the
 * core's NETBLK_DROP_<NAME>, the JSON field dropped_<name>,
 * netblk_bad_total{reason="<name>"}, `list`'s text.  In the core's order.
 */
#define NETBLK_DROPS(X)								\
	X(MALFORMED, malformed, 25, "malformed",				\
	  "Not a whole IPv4/UDP datagram.")					\
	X(FRAGMENT, fragment, 26, "fragment", "An IPv4 fragment.")		\
	X(MULTIBUFFER, multibuffer, 27, "multi-buffer",				\
	  "An XDP frame in more buffers than the module takes.")		\
	X(MISADDRESSED, misaddressed, 28, "misaddressed",			\
	  "Not to the NIC's MAC, the instance's address and port.")		\
	X(VLAN, vlan, 29, "other VLAN", "Not on the instance's VLAN.")		\
	X(SOURCE, source, 30, "bad source",					\
	  "From a group MAC, a martian IPv4 address or port 0.")		\
	X(CHECKSUM, checksum, 31, "checksum", "UDP checksum wrong.")		\
	X(NOT_REQUEST, not_request, 32, "not a request",			\
	  "Not a netblk request.")

/*
 * Requests refused on the spot, or by the worker without the disk, by the
 * status answered: X(NAME, name, nr, help), the attribute
 * NETBLK_S_REFUSED_<NAME>, the core's NETBLK_REFUSED_<NAME>, the JSON field
 * refused_<name>, netblk_refused_total{status="<NAME>"}.  In the core's
 * order.
 */
#define NETBLK_REFUSALS(X)							\
	X(EAGAIN, eagain, 55, "No free slot (busy).")				\
	X(EINVAL, einval, 56, "A malformed or misaligned request.")		\
	X(EROFS, erofs, 57, "A change to a read-only instance.")		\
	X(ERANGE, erange, 58, "Beyond the device's end.")			\
	X(EMSGSIZE, emsgsize, 59, "More than a request may carry or ask.")	\
	X(EOPNOTSUPP, eopnotsupp, 60,						\
	  "An op the device or the instance does not do.")			\
	X(ENOTCONN, enotconn, 61, "No such session.")				\
	X(EKEYREJECTED, ekeyrejected, 62, "No valid tag on a keyed instance.")	\
	X(EPROTONOSUPPORT, eprotonosupport, 63, "Another protocol version.")	\
	X(ESTALE, estale, 66, "A number below its session's replay window.")	\
	X(EOVERFLOW, eoverflow, 67, "A number too far above it.")		\
	X(EUSERS, eusers, 68, "HELLO: no room for another session.")		\
	X(EALREADY, ealready, 69, "A READ or INFO served as often as one is.")	\
	X(EEXIST, eexist, 70, "A number used for another request.")

/* One past the highest NETBLK_S_ attribute: a new counter takes it. */
#define NETBLK_S_NEXT 75

/* An attached device's counters (nested in NETBLK_A_HOST_STATS, each a u64). */
#define NETBLK_HOST_STATS(X)							\
	X(REQUESTS, requests, 2, kernel, count, "netblk_host_requests_total",	\
	  "Block requests the device took.")					\
	X(ERRORS, errors, 3, kernel, count, "netblk_host_errors_total",		\
	  "Block requests ended with an error.")				\
	X(SENDS, sends, 4, core, count, "netblk_host_datagrams_sent_total",	\
	  "Datagrams sent to the instance, resends and HELLOs included.")	\
	X(TIMEOUTS, timeouts, 5, queue, count, "",				\
	  "Resends after silence (netblk_host_resends_total{why=\"timeout\"}).") \
	X(FAST_RESENDS, fast_resends, 6, queue, count, "",			\
	  "Resends of datagrams overtaken by later answers "			\
	  "(netblk_host_resends_total{why=\"fast\"}).")				\
	X(BUSY, busy, 7, queue, count, "",					\
	  "EAGAIN answers, each sent again "					\
	  "(netblk_host_resends_total{why=\"busy\"}).")				\
	X(STRAY, stray, 8, core, count, "netblk_host_stray_total",		\
	  "Answers to nothing outstanding: late answers to resent datagrams, "	\
	  "or of an old session.")						\
	X(DUPLICATES, duplicates, 9, queue, count, "",				\
	  "READ answers had already.")						\
	X(SESSIONS_OPENED, sessions_opened, 10, core, count,			\
	  "netblk_host_sessions_opened_total",					\
	  "Sessions opened with the instance (more than one: it was started "	\
	  "again).")								\
	X(RENUMBERED, renumbered, 11, queue, count,				\
	  "netblk_host_renumbered_total",					\
	  "Datagrams sent again in a new session.")				\
	X(REFUSED, refused, 12, core, count, "", "HELLOs refused.")		\
	X(COMPLETED, completed, 13, queue, count, "",				\
	  "Requests answered in full.")						\
	X(FAILED, failed, 14, queue, count, "",					\
	  "Requests failed: refused, past their deadline, cancelled.")		\
	X(WINDOW, window, 15, core, gauge, "netblk_host_window",		\
	  "Datagrams that may be outstanding now.")				\
	X(WINDOW_DECREASES, window_decreases, 16, core, count,			\
	  "netblk_host_window_decreases_total",					\
	  "Times the window of datagrams outstanding was halved (a loss, an "	\
	  "EAGAIN).")								\
	X(SRTT_NS, srtt_ns, 17, core, ns, "netblk_host_srtt_seconds",		\
	  "The smoothed round trip of a datagram, the server's disk included.") \
	X(RTO_NS, rto_ns, 18, core, ns, "", "The resend timeout now.")		\
	X(OUTSTANDING, outstanding, 19, core, gauge, "netblk_host_outstanding",	\
	  "Datagrams sent and not answered yet.")				\
	X(QUEUED, queued, 20, core, gauge, "",					\
	  "Datagrams waiting for the window.")					\
	X(BYTES_IN_PLACE, bytes_in_place, 21, kernel, bytes, "",			\
	  "WRITE data the skbs took from the request's own pages "		\
	  "(netblk_host_bytes_total{how=\"in_place\"}).")			\
	X(BYTES_COPIED, bytes_copied, 22, kernel, bytes, "",			\
	  "WRITE data copied on its way out: a page the network may not hold, " \
	  "a device without scatter-gather "					\
	  "(netblk_host_bytes_total{how=\"copied\"}).")				\
	X(READ_BYTES_COPIED, read_bytes_copied, 23, kernel, bytes, "",		\
	  "READ data copied from the answers into the request's pages "		\
	  "(netblk_host_bytes_total{how=\"read_copied\"}).")			\
	X(TX_ERRORS, tx_errors, 24, kernel, count, "netblk_host_send_errors_total", \
	  "Sends the socket refused (the resend timer sends them again).")	\
	X(TX_DROPPED, tx_dropped, 25, kernel, count, "",				\
	  "Datagrams not sent: no room to record them.")			\
	X(RX_DATAGRAMS, rx_datagrams, 26, kernel, count,				\
	  "netblk_host_datagrams_received_total",				\
	  "Datagrams received from the instance.")				\
	X(UNREACHABLE, unreachable, 27, core, gauge, "netblk_host_unreachable",	\
	  "1 while the server is taken for unreachable (silent for timeout=): " \
	  "I/O fails at once.")							\
	X(OUTAGES, outages, 28, core, count, "netblk_host_outages_total",	\
	  "Times the server was silent for the device's timeout= and taken "	\
	  "for unreachable.")							\
	X(FAILED_FAST, failed_fast, 29, core, count,				\
	  "netblk_host_failed_fast_total",					\
	  "Block requests failed at once: the server taken for unreachable, "	\
	  "or the device stopped.")						\
	X(CHANGED, changed, 30, core, gauge, "netblk_host_stopped",		\
	  "Why the device's I/O fails for good after a restart, 0 while it "	\
	  "serves: 1 the server serves another device, 2 a smaller one, 3 it "	\
	  "read-only, 4 other sectors or less a datagram, 5 INFO refused "	\
	  "(enum netblk_host_change).")						\
	X(RESIZES, resizes, 31, core, count, "netblk_host_resizes_total",	\
	  "Times the server said, in a new session, that the device grew.")	\
	X(SPURIOUS, spurious, 32, queue, count,					\
	  "netblk_host_spurious_timeouts_total",				\
	  "Resends after silence (why=\"timeout\") whose first send was "	\
	  "answered after all.")						\
	X(TX_BATCHED, tx_batched, 33, kernel, count,				\
	  "netblk_host_datagrams_batched_total",				\
	  "Datagrams sent in one UDP GSO send with others (one skb down the "	\
	  "stack for the lot).")						\
	X(FOLDED, folded, 34, queue, count, "netblk_host_answers_folded_total",	\
	  "WRITEs answered by a bit of another WRITE's answer (folded "		\
	  "answers), not one of their own.")					\
	X(FAST_SPURIOUS, fast_spurious, 35, queue, count,			\
	  "netblk_host_spurious_fast_resends_total",				\
	  "Resends of overtaken datagrams (why=\"fast\") whose first send was "	\
	  "answered after all: reordered, not lost.")				\
	X(REORDERING, reordering, 36, queue, gauge, "netblk_host_reordering",	\
	  "The most later datagrams a first send's answer was seen to come "	\
	  "after: an answer overtaken by fewer is not taken for lost.")		\
	X(HEADER_PAGES, header_pages, 37, kernel, count, "",			\
	  "Pages the client took for WRITE headers (a 32 KiB one serves 512; "	\
	  "order 0: 64).")

/* One past the highest NETBLK_HS_ attribute: a new counter takes it. */
#define NETBLK_HS_NEXT 38

#endif /* NETBLK_COUNTERS_H */
