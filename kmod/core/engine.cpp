// SPDX-License-Identifier: GPL-2.0
/*
 * One instance's data path, minus the kernel (engine.h): its setup and
 * teardown, when the worker is next due, what a stop drops.  The path
 * itself: receive.cpp, admit.cpp, submit.cpp, transmit.cpp; the counters
 * read: stats.cpp; the C face: core_api.cpp.
 */
#include "engine.h"

namespace nb {

static_assert((int)drop_reasons == NETBLK_DROP_REASONS && (int)drop_multibuffer == NETBLK_DROP_MULTIBUFFER,
	      "core_api.h's drop reasons are frame.h's");
static_assert(sizeof(piece) == sizeof(netblk_piece) &&
		      offsetof(piece, len) == offsetof(netblk_piece, len),
	      "core_api.h's netblk_piece is frame_bytes.h's piece");
/*
 * A READ's data is read in where its reply sends it from: behind the headers,
 * 8-byte aligned (4 behind a VLAN tag).
 */
static_assert((frame_headers_size(false) + header_size) % 8 == 0 &&
		      (frame_headers_size(true) + header_size) % 4 == 0,
	      "a reply's data starts aligned behind its headers");
static_assert(op_last + 1 == NETBLK_OP_CODES, "core_api.h's op codes are protocol.h's");
static_assert(session_table::per_source_default == NETBLK_PER_SOURCE_DEFAULT,
	      "core_api.h's default is session.h's");
static_assert(read_datagrams_max <= NETBLK_GATHER_PAGES_MAX, "a gathered READ needs a page a datagram at most");
static_assert((int)refusals == NETBLK_REFUSALS &&
		      (int)refused_eprotonosupport == NETBLK_REFUSED_EPROTONOSUPPORT &&
		      (int)refused_eopnotsupp == NETBLK_REFUSED_EOPNOTSUPP &&
		      (int)refused_eexist == NETBLK_REFUSED_EEXIST,
	      "core_api.h's refusals are protocol.h's");

bool slot_list::init(u32 capacity)
{
	entries = new u32[capacity]();
	head = count = 0;
	mask = capacity - 1;
	return entries != nullptr;
}

void slot_list::destroy()
{
	delete[] entries;
	entries = nullptr;
}

int engine::init(const netblk_core_config &config)
{
	if (config.slots == 0 || (config.slots & (config.slots - 1)) || config.nr_cpus == 0)
		return -err_inval;
	device_limits limits = {
		config.physical_block_size, config.io_opt, config.discard_granularity,
		config.max_discard_bytes, config.max_write_zeroes_bytes,
	};

	if (!geometry_init(&geo_, config.size_bytes, config.sector_size,
			   frame_payload_max(config.mtu), config.slots, config.read_only,
			   config.volatile_cache, config.fua, limits))
		return -err_inval;
	geo_.export_id = config.export_id;
	options_ = config.options;
	nr_cpus_ = config.nr_cpus;
	queues_ = config.queues ? config.queues : 1;
	queue_ = config.queue;
	geo_.queues = queues_;
	frame_local_init(&local_, config);
	reply_headroom_ = frame_headroom(local_) + header_size;
	link_size_ = frame_link_size(local_);
	dma_align_mask_ = config.dma_align_mask;
	/* a datagram's data must lie in one data page: max_io must divide it */
	if (config.gather_page && config.gather_page % geo_.max_io == 0)
		gather_page_ = config.gather_page;
	owner_ = config.owner;
	disk_ = config.disk;
	transport_ = config.transport;
	auth_.keyed = config.keyed;
	auth_.data = config.auth_data;
	auth_.key = siphash_key_from_bytes(config.key);
	set_link(config.link_mtu, config.local_mac);
	if (sessions_.init(config.sessions ? config.sessions : NETBLK_SESSIONS_DEFAULT,
			   config.sessions_per_source, siphash_key_from_bytes(config.secret),
			   queue_, queues_, config.group ? &config.group->group : nullptr))
		return -err_nomem;

	/* value-initialised: counters and slots start at zero */
	slots_ = new slot[config.slots]();
	rx_ = new rx_counters[config.nr_cpus]();
	if (!slots_ || !rx_ || !retry_.init(config.slots) || !unsent_.init(config.slots) ||
	    !scattered_.init(config.slots) || !free_slots_.init(config.slots) || !requests_.init(config.slots) ||
	    !completions_.init(config.slots)) {
		destroy();
		return -err_nomem;
	}
	for (u32 i = 0; i < config.slots; i++)
		free_slots_.push(i);
	return 0;
}

void engine::destroy()
{
	sessions_.destroy();
	completions_.destroy();
	requests_.destroy();
	free_slots_.destroy();
	scattered_.destroy();
	unsent_.destroy();
	retry_.destroy();
	delete[] rx_;
	rx_ = nullptr;
	delete[] slots_;
	slots_ = nullptr;
}

void engine::set_link(u32 mtu, const u8 *mac)
{
	frame_local_set_mac(&local_, mac);
	__atomic_store_n(&link_mtu_, mtu, __ATOMIC_RELAXED);
}

u64 engine::next_work(u64 now_ns) const
{
	u64 due = NETBLK_NO_WORK;

	if (requests_.size() || completions_.size() || scattered_.count)
		return 0;
	if (retry_.count)
		due = disk_freed_ ? 0 : retry_due_;
	if (unsent_.count)
		due = min(due, tx_due_);
	return due <= now_ns ? 0 : due;
}

/*
 * Stopping: what is queued and not yet at the disk (or waits to be tried
 * again) is dropped unanswered (the client resends), its frames freed and
 * its slots returned; so are replies still waiting for room in the NIC.
 */
void engine::drop_queued()
{
	u32 index;

	while (retry_.count || requests_.pop(&index)) {
		if (retry_.count)
			index = retry_.pop();
		/* a gathered READ's datagrams with it */
		for (u32 count = slots_of(slots_[index]); count--;) {
			slot &s = slots_[index];
			u32 next = s.next;

			if (s.frame)
				transport_->free_frame(owner_, s.frame);
			add_once(worker_.dropped_on_stop, 1);
			add_once(worker_.submitted, 1);
			add_once(worker_.reaped, 1);
			release(index);
			index = next;
		}
	}
	while (scattered_.count)
		drop_reply(scattered_.pop());
	while (unsent_.count)
		drop_reply(unsent_.pop());
}

void engine::held(netblk_held *held) const
{
	u64 kept = 0;

	for (u32 cpu = 0; cpu < nr_cpus_; cpu++)
		kept += read_once(rx_[cpu].frames_kept);
	held->slots = geo_.slots - free_slots_.size();
	held->frames = kept - read_once(worker_.frames_released);
}

} /* namespace nb */
