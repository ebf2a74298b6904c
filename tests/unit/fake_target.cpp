// SPDX-License-Identifier: GPL-2.0
#include "fake_target.h"

#include <arpa/inet.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "frames.h"
#include "frame.h"
#include "protocol.h"

void netblk_queue::finish_ios()
{
	while (!pending.empty()) {
		fake_io io = pending.front();
		pending.pop_front();
		netblk_core_complete(core, io.slot, io.status);
	}
}

void netblk_queue::finish_newest()
{
	fake_io io = pending.back();
	pending.pop_back();
	netblk_core_complete(core, io.slot, io.status);
}

uint32_t netblk_queue::free_slots_left()
{
	netblk_held held{};

	netblk_core_held(core, &held);
	return NETBLK_SLOTS - held.slots;
}

netblk_queue *fake_start(uint64_t disk_size, bool read_only, uint32_t dma_align_mask,
			    uint16_t vlan)
{
	fake_options o;

	o.read_only = read_only;
	o.dma_align_mask = dma_align_mask;
	o.vlan = vlan;
	return fake_start(disk_size, o);
}

bool fake_open_session(netblk_queue *inst, uint64_t now, uint64_t nonce, uint16_t flags)
{
	test::frame_spec spec;
	spec.vlan = inst->vlan;
	std::vector<uint8_t> f = test::build_frame(spec, test::hello_request(nonce));
	uint32_t len = (uint32_t)f.size();

	if (netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, now) !=
	    NETBLK_RX_REPLY)
		return false;
	f.resize(len);
	nb::header h = test::reply_header(f);
	if (h.op != (nb::op_hello | nb::op_reply_bit) || h.status || h.session || !h.token)
		return false;

	std::vector<uint8_t> again = test::build_frame(spec, test::hello_request(nonce, h.token, flags));
	len = (uint32_t)again.size();
	size_t before = inst->sent.size();
	if (netblk_core_receive(inst->core, 0, again.data(), again.data(), &len, nullptr, 0, now) !=
	    NETBLK_RX_KEPT)
		return false;
	netblk_core_submit(inst->core, now);
	while (netblk_core_reply(inst->core, now))
		;
	if (inst->sent.size() != before + 1)
		return false;
	h = test::reply_header(inst->sent.back());
	inst->sent.pop_back();
	inst->sent_frames.pop_back();
	inst->transmit_sizes.pop_back();
	inst->freed_frames.clear();
	if (h.status || !h.session || !h.token)
		return false;
	test::session.id = h.session;
	test::session.token = h.token;
	test::session.next_seq = 1;
	return true;
}

netblk_rx_verdict fake_receive_frags(netblk_queue *inst, fake_frames &store,
				     const std::vector<uint8_t> &frame, uint32_t head,
				     const std::vector<uint32_t> &frag_sizes, uint64_t now)
{
	std::vector<netblk_piece> pieces;
	uint32_t at = head;

	store.push_back(std::make_unique<std::vector<uint8_t>>(frame.begin(), frame.begin() + head));
	std::vector<uint8_t> &first = *store.back();
	for (size_t i = 0; i < frag_sizes.size(); i++) {
		uint32_t n = i + 1 == frag_sizes.size() ? (uint32_t)frame.size() - at : frag_sizes[i];

		store.push_back(std::make_unique<std::vector<uint8_t>>(frame.begin() + at,
								       frame.begin() + at + n));
		pieces.push_back({ store.back()->data(), n });
		at += n;
	}
	inst->frags_of[first.data()] = pieces;
	uint32_t len = head;
	netblk_rx_verdict v = netblk_core_receive(inst->core, 0, first.data(), first.data(), &len,
						  pieces.data(), (uint32_t)pieces.size(), now);
	if (v == NETBLK_RX_REPLY)
		first.resize(len);
	return v;
}

netblk_stats fake_stats(netblk_queue *inst)
{
	netblk_stats s{};
	netblk_core_read_stats(inst->core, &s);

	uint64_t *now = (uint64_t *)&s;
	const uint64_t *then = (const uint64_t *)&inst->baseline;
	static_assert(sizeof(netblk_stats) % sizeof(uint64_t) == 0, "all counters");
	for (size_t i = 0; i < sizeof(s) / sizeof(uint64_t); i++)
		now[i] -= then[i];
	/* gauges are what they are now */
	netblk_stats raw{};
	netblk_core_read_stats(inst->core, &raw);
	s.inflight_queued = raw.inflight_queued;
	s.inflight_disk = raw.inflight_disk;
	s.inflight_done = raw.inflight_done;
	s.sessions_open = raw.sessions_open;
	return s;
}

netblk_queue *fake_start(uint64_t disk_size, const fake_options &o)
{
	bool read_only = o.read_only;
	uint32_t dma_align_mask = o.dma_align_mask;
	uint16_t vlan = o.vlan;

	auto *inst = new netblk_queue;
	inst->disk.assign(disk_size, 0);
	inst->vlan = vlan;
	inst->slot_buffers.assign(NETBLK_SLOTS, std::vector<uint8_t>(4096));
	inst->data_pages.assign(NETBLK_SLOTS, std::vector<uint8_t>(o.gather_page));

	netblk_core_config config{};
	config.options = o.knobs;
	config.size_bytes = disk_size;
	config.sector_size = 512;
	config.mtu = 1500;
	config.slots = NETBLK_SLOTS;
	config.nr_cpus = 2;
	config.local_ip = o.local_ip ? o.local_ip : test::server_ip;
	config.port = o.port ? o.port : test::server_port;
	config.vlan = vlan;
	memcpy(config.local_mac, test::server_mac, 6);
	config.link_mtu = 1500;
	config.read_only = read_only;
	config.volatile_cache = 1;
	config.fua = 1;
	config.dma_align_mask = dma_align_mask;
	config.gather_page = o.gather_page;
	config.physical_block_size = 4096;
	config.io_opt = 0;
	config.discard_granularity = o.trim ? 4096 : 0;
	config.max_discard_bytes = o.trim ? 1ull << 32 : 0;
	config.max_write_zeroes_bytes = o.trim ? 1ull << 20 : 0;
	config.sessions = o.sessions;
	config.queue = o.queue;
	config.queues = o.queues;
	config.group = o.group;
	config.export_id = netblk_core_export_id("8a5e0c1e", 8);
	for (int i = 0; i < NETBLK_KEY_SIZE; i++)
		config.secret[i] = o.secret ? o.secret[i] : (uint8_t)(0x5a ^ i);
	test::session = test::client_session{};
	if (o.key) {
		config.keyed = 1;
		config.auth_data = o.auth_data;
		memcpy(config.key, o.key, NETBLK_KEY_SIZE);
		test::session.auth.keyed = true;
		test::session.auth.data = o.auth_data;
		test::session.auth.key = nb::siphash_key_from_bytes(o.key);
	}
	config.disk = &fake_disk_ops;
	config.transport = &fake_transport_ops;
	config.owner = inst;
	if (netblk_core_create(&config, &inst->core)) {
		delete inst;
		return nullptr;
	}
	if (o.open_session && !fake_open_session(inst, 1000, 0x600d5e55)) {
		fake_stop(inst);
		return nullptr;
	}
	netblk_core_read_stats(inst->core, &inst->baseline);
	return inst;
}

void fake_stop(netblk_queue *inst)
{
	netblk_core_destroy(inst->core);
	delete inst;
}

extern "C" {

void *netblk_kernel_alloc(size_t size) { return calloc(1, size); }
void netblk_kernel_free(void *p) { free(p); }
void netblk_kernel_lock(void *lock) { static_cast<std::mutex *>(lock)->lock(); }
void netblk_kernel_unlock(void *lock) { static_cast<std::mutex *>(lock)->unlock(); }

} /* extern "C" */

/* The fake disk and NIC, as the core reaches them: its ops tables (target_ops.h). */

static int fake_submit_io(struct netblk_queue *inst, uint32_t slot, enum netblk_io_op op,
			  uint64_t offset, uint8_t *data, uint32_t len, int fua, int may_block)
{
	uint16_t status = nb::status_ok;

	inst->submissions++;
	inst->blocking.push_back(may_block);
	if (inst->refuse_nowait && !may_block) {
		status = NETBLK_IO_AGAIN;
	} else if (inst->disk_refusals > 0) {
		inst->disk_refusals--;
		status = NETBLK_IO_AGAIN;
	} else if (inst->fail_io) {
		status = nb::status_eio;
	} else if (op == NETBLK_IO_READ) {
		if (data)	/* else fake_submit_read_pages() has read it */
			memcpy(data, &inst->disk[offset], len);
	} else if (op == NETBLK_IO_WRITE) {
		memcpy(&inst->disk[offset], data, len);
		inst->fua_writes += fua ? 1 : 0;
	} else if (op == NETBLK_IO_DISCARD || op == NETBLK_IO_WRITE_ZEROES) {
		/* this disk reads back zeros after either */
		memset(&inst->disk[offset], 0, len);
		(op == NETBLK_IO_DISCARD ? inst->discards : inst->zeroings)++;
	} else {
		inst->flushes++;
	}
	if (inst->complete_at_once)
		netblk_core_complete(inst->core, slot, status);
	else
		inst->pending.push_back({slot, status, may_block != 0});
	return 0;
}

static int fake_submit_read_pages(struct netblk_queue *inst, uint32_t slot, uint64_t offset,
				  uint8_t *const *pages, uint32_t nr, uint32_t len, int may_block)
{
	uint32_t page_size = (uint32_t)inst->data_pages[0].size();

	inst->read_pages.push_back(nr);
	/* the disk's copy into the pages, whole ones but for the last, before it completes */
	for (uint32_t i = 0, left = len; i < nr; i++) {
		uint32_t piece = std::min(left, page_size);

		memcpy(pages[i], &inst->disk[offset + (uint64_t)i * page_size], piece);
		left -= piece;
	}
	return fake_submit_io(inst, slot, NETBLK_IO_READ, offset, nullptr, 0, 0, may_block);
}

static uint8_t *fake_data_page(struct netblk_queue *inst, uint32_t slot)
{
	return inst->no_data_pages ? nullptr : inst->data_pages[slot].data();
}

static uint8_t *fake_slot_buffer(struct netblk_queue *inst, uint32_t slot)
{
	return inst->no_buffers ? nullptr : inst->slot_buffers[slot].data();
}

static uint8_t *fake_reply_buffer(struct netblk_queue *inst, uint32_t slot)
{
	if (inst->no_spare)
		return nullptr;
	inst->spare.emplace_back(128);
	inst->lent.push_back(slot);
	return inst->spare.back().data();
}

static void fake_reply_done(struct netblk_queue *inst, uint32_t slot)
{
	auto it = std::find(inst->lent.begin(), inst->lent.end(), slot);
	if (it != inst->lent.end())
		inst->lent.erase(it);
	else
		inst->returned_unlent++;
}

static uint32_t fake_transmit(struct netblk_queue *inst, const struct netblk_tx *tx,
			      uint32_t n, int *error)
{
	uint32_t taken = n < inst->nic_takes ? n : inst->nic_takes;

	inst->transmit_sizes.push_back(n);
	*error = inst->nic_error;
	if (inst->nic_error)
		return 0;
	/* what it does not take of received frames stays the caller's */
	for (uint32_t i = 0; i < taken; i++) {
		inst->sent.emplace_back(tx[i].data, tx[i].data + tx[i].len);
		inst->sent_frames.push_back(tx[i].frame);
		/* a second buffer goes out after the first, as one frame */
		if (tx[i].frag) {
			inst->sent.back().insert(inst->sent.back().end(), tx[i].frag,
						 tx[i].frag + tx[i].frag_len);
			inst->frags_sent++;
		}
	}
	return taken;
}

static uint32_t fake_frame_frags(struct netblk_queue *inst, void *frame,
				 struct netblk_piece *frags, uint32_t max)
{
	const std::vector<netblk_piece> &pieces = inst->frags_of.at(frame);

	std::copy_n(pieces.begin(), std::min<size_t>(pieces.size(), max), frags);
	return (uint32_t)pieces.size();
}

static void fake_free_frame(struct netblk_queue *inst, void *frame)
{
	inst->freed_frames.push_back(frame);
}

const netblk_target_disk_ops fake_disk_ops = {
	.submit_io = fake_submit_io,
	.submit_read_pages = fake_submit_read_pages,
};

const netblk_target_transport_ops fake_transport_ops = {
	.slot_buffer = fake_slot_buffer,
	.data_page = fake_data_page,
	.reply_buffer = fake_reply_buffer,
	.reply_done = fake_reply_done,
	.transmit = fake_transmit,
	.frame_frags = fake_frame_frags,
	.free_frame = fake_free_frame,
	/* the instance's (target/instance.c): the core never calls them */
	.init = nullptr,
	.exit = nullptr,
	.open = nullptr,
	.close = nullptr,
};
