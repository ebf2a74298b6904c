// SPDX-License-Identifier: GPL-2.0
/*
 * The worker, to the disk: a request's bios started from the frame's own
 * pages (or a copy where the disk cannot take them), retried when the disk
 * says again, completed (engine.h).
 */
#include "engine.h"

namespace nb {

/* A WRITE's data to @to, from the buffers of its frame. */
void engine::copy_payload(const slot &s, u8 *to)
{
	piece frags[NETBLK_FRAGS_MAX];
	frame_bytes bytes = { s.payload, s.head_payload, frags, 0, 0 };

	if (s.frags)
		bytes.nr_frags = transport_->frame_frags(owner_, s.frame, (netblk_piece *)frags,
							 NETBLK_FRAGS_MAX);
	copy_from_frame(to, bytes, 0, s.request.length);
}

int engine::start_write(u32 index, slot &s, bool may_block)
{
	u8 *data = s.payload;
	u32 len = s.request.length;

	/* (a multi-buffer frame's data is in the slot's buffer from its first try on) */
	if (s.copy && s.frame) {
		/*
		 * The disk cannot DMA from where the NIC put the payload
		 * (misaligned for it, or in several buffers): the cases the
		 * CPU copies, counted.
		 */
		u8 *buffer = transport_->slot_buffer(owner_, index);

		if (!buffer) {
			add_once(worker_.no_buffer, 1);
			answer_now(index, status_eagain);
			return 0;
		}
		data = buffer + reply_headroom_;
		copy_payload(s, data);
		add_once(worker_.bytes_copied, len);
		if (s.frags) {
			/* the reply goes in the same buffer, ahead of the data */
			let_go_frame(s);
			s.reply_at = buffer;
			s.payload = data;
		}
	}
	return disk_->submit_io(owner_, index, NETBLK_IO_WRITE, s.request.offset, data, len,
				     s.request.flags & flag_fua, may_block);
}

/*
 * A READ of one datagram, or INFO: answered in the slot's own buffer, the
 * data read in behind the reply's headroom.  No buffer for it: EAGAIN.
 */
int engine::start_read(u32 index, slot &s, bool may_block)
{
	s.reply_at = transport_->slot_buffer(owner_, index);
	if (!s.reply_at) {
		add_once(worker_.no_buffer, 1);
		answer_now(index, status_eagain);
		return 0;
	}
	if (s.request.op == op_info) {
		encode_info(s.reply_at + reply_headroom_, geo_);
		answer_now(index, status_ok);
		return 0;
	}
	return disk_->submit_io(owner_, index, NETBLK_IO_READ, s.request.offset,
				     s.reply_at + reply_headroom_, s.request.length, 0, may_block);
}

/* A READ of several datagrams, not gathered: each datagram goes to the disk on its own. */
void engine::start_datagram_reads(u32 index)
{
	slots_[index].read_len = 0;
	for (u32 at = index, next; at != no_slot; at = next) {
		next = slots_[at].next;
		if (start_read(at, slots_[at], false))
			answer_now(at, status_eio);
	}
}

/*
 * A gathered READ to the disk, in one I/O: its datagrams' data one after
 * another across the data pages of its first slots, datagram i's at
 * i * max_io -- never across two pages, as max_io divides a page.
 */
int engine::start_gathered_read(u32 index, slot &s, bool may_block)
{
	u8 *pages[read_datagrams_max];
	u32 nr = (s.read_len + gather_page_ - 1) / gather_page_;
	u32 per_page = gather_page_ / geo_.max_io;
	u32 count = slots_of(s), at = index;

	for (u32 p = 0; p < nr; p++, at = slots_[at].next) {
		pages[p] = transport_->data_page(owner_, at);
		if (!pages[p]) {
			add_once(worker_.no_buffer, 1);
			answer_now(index, status_eagain);
			return 0;
		}
	}
	at = index;
	for (u32 i = 0; i < count; i++, at = slots_[at].next) {
		slots_[at].payload = pages[i / per_page] + (i % per_page) * geo_.max_io;
		slots_[at].scattered = true;
	}
	return disk_->submit_read_pages(owner_, index, s.request.offset, pages, nr,
					     s.read_len, may_block);
}

/* Slot @index's I/O, its answer when it needs none; non-zero: not started. */
int engine::start_op(u32 index, slot &s, bool may_block)
{
	switch (s.request.op) {
	case op_read:
		if (s.read_len)
			return start_gathered_read(index, s, may_block);
		[[fallthrough]];
	case op_info:
		return start_read(index, s, may_block);
	case op_write:
		return start_write(index, s, may_block);
	case op_trim:
	case op_write_zeroes:
		return disk_->submit_io(owner_, index,
					     s.request.op == op_trim ? NETBLK_IO_DISCARD :
								       NETBLK_IO_WRITE_ZEROES,
					     s.request.offset, nullptr, s.request.length, 0, may_block);
	default: /* op_flush */
		return disk_->submit_io(owner_, index, NETBLK_IO_FLUSH, 0, nullptr, 0, 0,
					     may_block);
	}
}

void engine::start_io(u32 index)
{
	slot &s = slots_[index];
	/* The disk said "again" to it often enough: let it make the worker wait. */
	bool may_block = s.tries >= again_nowait_tries;

	add_once(worker_.submitted, slots_of(s));
	if (may_block)
		add_once(worker_.disk_blocking, 1);
	if (s.request.op == op_read && s.read_len && !gather_page_) {
		start_datagram_reads(index);
		return;
	}
	if (start_op(index, s, may_block))
		answer_now(index, status_eio);
}

/*
 * The disk said "again": try once more after a backoff that doubles each
 * time (a frozen queue answers every try at once: retrying at once would
 * spin), or as soon as the disk finishes something (a full queue has room
 * then).
 */
void engine::retry_later(u32 index, u64 now_ns)
{
	slot &s = slots_[index];

	s.retry_ns = now_ns + (again_backoff_ns << (s.tries - 1));
	if (!retry_.count) {
		/* what the disk finished before this one was refused made no room for it */
		disk_freed_ = false;
		retry_due_ = s.retry_ns;
	} else if (s.retry_ns < retry_due_) {
		retry_due_ = s.retry_ns;
	}
	retry_.push(index);
	add_once(worker_.disk_busy, slots_of(s));
}

u32 engine::submit_retries(u64 now_ns)
{
	u32 n = 0, count = retry_.count;
	bool all = disk_freed_;
	u64 due = NETBLK_NO_WORK;

	if (!count || (!all && now_ns < retry_due_))
		return 0;
	disk_freed_ = false;
	while (count--) {
		u32 index = retry_.pop();

		if (all || slots_[index].retry_ns <= now_ns) {
			start_io(index);
			n++;
		} else {
			retry_.push(index);
			due = min(due, slots_[index].retry_ns);
		}
	}
	retry_due_ = due;
	return n;
}

u32 engine::submit(u64 now_ns)
{
	u32 n = submit_retries(now_ns), index;

	while (requests_.pop(&index)) {
		if (admit(index, now_ns))
			start_io(index);
		n++;
	}
	if (n)
		add_once(worker_.disk_batches, 1);
	return n;
}

} /* namespace nb */
