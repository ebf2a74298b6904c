// SPDX-License-Identifier: GPL-2.0
/*
 * The unit tests' target: an in-memory disk and NIC behind the ops tables the
 * core is created with (target_ops.h), so the data path runs in user space.
 */
#ifndef NETBLK_FAKE_SHIM_H
#define NETBLK_FAKE_SHIM_H

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "core_api.h"
#include "target_ops.h"

struct fake_io {
	uint32_t slot;
	uint16_t status;
	bool may_block;
};

/* One queue's core on its fake disk and NIC: what the tests call an instance. */
struct netblk_queue {
	netblk_core *core = nullptr;
	std::vector<uint8_t> disk;
	bool complete_at_once = true;	/* else held until finish_ios() */
	int disk_refusals = 0;		/* this many submissions get NETBLK_IO_AGAIN */
	bool refuse_nowait = false;	/* every submission that may not block gets AGAIN */
	bool fail_io = false;		/* the disk answers EIO */
	uint32_t nic_takes = ~0u;	/* the NIC takes at most this many a transmit */
	int nic_error = 0;		/* the NIC fails every transmit with this */
	bool no_buffers = false;	/* no slot buffer can be had */
	bool no_spare = false;		/* nor a reply buffer */
	bool no_data_pages = false;	/* nor a data page for a gathered READ */
	std::deque<fake_io> pending;
	std::vector<std::vector<uint8_t>> slot_buffers;
	std::vector<std::vector<uint8_t>> data_pages;	/* a slot's, gather_page bytes */
	std::vector<uint32_t> read_pages;	/* pages each gathered READ's I/O took */
	uint32_t frags_sent = 0;	/* frames the NIC took in two buffers */
	std::vector<std::vector<uint8_t>> sent;	/* frames the NIC took */
	std::vector<void *> sent_frames;	/* each one's received frame, or NULL: a buffer */
	std::vector<uint32_t> transmit_sizes;	/* frames a transmit call carried */
	std::vector<void *> freed_frames;
	/* the buffers after the first of multi-buffer frames (receive_frags() sets them) */
	std::map<void *, std::vector<netblk_piece>> frags_of;
	std::vector<std::vector<uint8_t>> spare;	/* reply buffers handed out */
	std::vector<uint32_t> lent;	/* slots holding one now */
	uint32_t returned_unlent = 0;	/* reply_done() for a slot that held none */
	std::vector<bool> blocking;	/* each submission's may_block */
	uint64_t fua_writes = 0, flushes = 0, discards = 0, zeroings = 0;
	netblk_stats baseline{};	/* the counters once the session was open */
	uint16_t vlan = 0;

	void finish_ios();
	void finish_newest();		/* only the last one submitted */
	uint32_t free_slots_left();	/* slots a new request could take now */
	uint64_t submissions = 0;
};

/* START's knobs (netblk_options.h), each its default. */
inline netblk_start_options fake_default_knobs()
{
	netblk_start_options k;
	netblk_start_options_init(&k);
	return k;
}

/* What a fake instance is started with, beyond the disk's size. */
struct fake_options {
	bool read_only = false;
	uint32_t dma_align_mask = 3;
	uint16_t vlan = 0;		/* 0: untagged */
	const uint8_t *key = nullptr;	/* 16 bytes: a keyed instance */
	bool auth_data = false;
	uint32_t sessions = 0;		/* 0: the default */
	bool open_session = true;	/* HELLO twice, into test::session */
	bool trim = true;		/* the disk can discard and write zeroes */
	uint32_t gather_page = 0;	/* not 0: READs gathered into data pages this size */
	const uint8_t *secret = nullptr;	/* 16 bytes: the instance's secret (else a fixed one) */
	uint32_t local_ip = 0;		/* network order; 0: test::server_ip */
	uint16_t port = 0;		/* 0: test::server_port */
	uint32_t queue = 0, queues = 1;	/* this core is queue @queue of @queues */
	netblk_session_group *group = nullptr;	/* the instance's queues' tables */
	/* START's knobs the core reads in config.options (the fields above predate it) */
	netblk_start_options knobs = fake_default_knobs();
};

/*
 * An instance's core on a fake disk of @disk_size bytes, 512-byte sectors,
 * mtu 1500, serving test::server_ip:7000 (or as @options say), with
 * test::session open on it
 * (its two HELLOs leave no sent frames behind; fake_stats() counts from
 * after them).
 */
netblk_queue *fake_start(uint64_t disk_size, const fake_options &options);
netblk_queue *fake_start(uint64_t disk_size, bool read_only = false,
			    uint32_t dma_align_mask = 3, uint16_t vlan = 0);
void fake_stop(netblk_queue *inst);

/*
 * Open test::session on @inst at @now (ns), as a client does: a HELLO, its
 * cookie back (with @flags: flag_fold_answers asks for folded answers).
 * False when the instance did not answer as it should.
 */
bool fake_open_session(netblk_queue *inst, uint64_t now, uint64_t nonce, uint16_t flags = 0);

/* The instance's counters less those of opening the session (gauges as they are). */
netblk_stats fake_stats(netblk_queue *inst);

/* Frames received, each kept where it is while the core may hold it. */
using fake_frames = std::vector<std::unique_ptr<std::vector<uint8_t>>>;

/*
 * The receive path for a multi-buffer frame: @frame cut into a first buffer
 * of @head bytes and others of @frag_sizes (the last takes the rest), each
 * a vector of its own in @store as a NIC's would be.  The first buffer is
 * the frame's handle, and holds the reply when the verdict is REPLY.
 */
netblk_rx_verdict fake_receive_frags(netblk_queue *inst, fake_frames &store,
				     const std::vector<uint8_t> &frame, uint32_t head,
				     const std::vector<uint32_t> &frag_sizes, uint64_t now);


/* The fake's ops tables (fake_target.cpp), which fake_start() hands the core. */
extern const netblk_target_disk_ops fake_disk_ops;
extern const netblk_target_transport_ops fake_transport_ops;

#endif
