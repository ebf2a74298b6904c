// SPDX-License-Identifier: GPL-2.0
#include "fake_shim.h"

#include <arpa/inet.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "frames.h"
#include "protocol.h"

void netblk_instance::finish_ios()
{
	while (!pending.empty()) {
		fake_io io = pending.front();
		pending.pop_front();
		netblk_core_complete(core, io.slot, io.status);
	}
}

void netblk_instance::finish_newest()
{
	fake_io io = pending.back();
	pending.pop_back();
	netblk_core_complete(core, io.slot, io.status);
}

netblk_instance *fake_start(uint64_t disk_size, bool read_only, uint32_t dma_align_mask,
			    uint16_t vlan)
{
	auto *inst = new netblk_instance;
	inst->disk.assign(disk_size, 0);
	inst->slot_buffers.assign(NETBLK_SLOTS, std::vector<uint8_t>(4096));

	netblk_core_config config{};
	config.size_bytes = disk_size;
	config.sector_size = 512;
	config.mtu = 1500;
	config.slots = NETBLK_SLOTS;
	config.nr_cpus = 2;
	config.local_ip = test::server_ip;
	config.port = test::server_port;
	config.vlan = vlan;
	memcpy(config.local_mac, test::server_mac, 6);
	config.link_mtu = 1500;
	config.read_only = read_only;
	config.volatile_cache = 1;
	config.fua = 1;
	config.dma_align_mask = dma_align_mask;
	config.shim = inst;
	if (netblk_core_create(&config, &inst->core)) {
		delete inst;
		return nullptr;
	}
	return inst;
}

void fake_stop(netblk_instance *inst)
{
	netblk_core_destroy(inst->core);
	delete inst;
}

extern "C" {

void *netblk_shim_alloc(size_t size) { return calloc(1, size); }
void netblk_shim_free(void *p) { free(p); }

int netblk_shim_submit_io(struct netblk_instance *inst, uint32_t slot, enum netblk_io_op op,
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
		memcpy(data, &inst->disk[offset], len);
	} else if (op == NETBLK_IO_WRITE) {
		memcpy(&inst->disk[offset], data, len);
		inst->fua_writes += fua ? 1 : 0;
	} else {
		inst->flushes++;
	}
	if (inst->complete_at_once)
		netblk_core_complete(inst->core, slot, status);
	else
		inst->pending.push_back({slot, status, may_block != 0});
	return 0;
}

uint8_t *netblk_shim_slot_buffer(struct netblk_instance *inst, uint32_t slot)
{
	return inst->no_buffers ? nullptr : inst->slot_buffers[slot].data();
}

uint8_t *netblk_shim_reply_buffer(struct netblk_instance *inst, uint32_t slot)
{
	if (inst->no_spare)
		return nullptr;
	inst->spare.emplace_back(128);
	inst->lent.push_back(slot);
	return inst->spare.back().data();
}

void netblk_shim_reply_done(struct netblk_instance *inst, uint32_t slot)
{
	auto it = std::find(inst->lent.begin(), inst->lent.end(), slot);
	if (it != inst->lent.end())
		inst->lent.erase(it);
	else
		inst->returned_unlent++;
}

uint32_t netblk_shim_transmit(struct netblk_instance *inst, const struct netblk_tx *tx,
			      uint32_t n, int *error)
{
	uint32_t taken = n < inst->nic_takes ? n : inst->nic_takes;

	inst->transmit_sizes.push_back(n);
	*error = inst->nic_error;
	if (inst->nic_error)
		return 0;
	/* what it does not take of received frames stays the caller's */
	for (uint32_t i = 0; i < taken; i++)
		inst->sent.emplace_back(tx[i].data, tx[i].data + tx[i].len);
	return taken;
}

void netblk_shim_free_frame(struct netblk_instance *inst, void *frame)
{
	inst->freed_frames.push_back(frame);
}

} /* extern "C" */
