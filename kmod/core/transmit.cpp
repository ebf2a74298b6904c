// SPDX-License-Identifier: GPL-2.0
/*
 * The worker, to the NIC: replies sealed in the buffers they were read
 * into, WRITE answers folded, batches handed to the transport, the slots
 * given back once sent (engine.h).
 */
#include "engine.h"

namespace nb {

/* Its reply does not go out: the client asks again. */
void engine::drop_reply(u32 index)
{
	add_once(worker_.replies_dropped, 1);
	release_unsent(index);
}

/* A slot back from the disk: build its reply (true), or drop it (false). */
bool engine::finish_io(u32 index, u64 now_ns)
{
	slot &s = slots_[index];
	u32 data_len = 0;

	if (s.windowed)
		window_done(s);

	if (s.status == status_ok) {
		if (s.request.op == op_read)
			data_len = s.request.length;
		else if (s.request.op == op_info)
			data_len = info_payload_size;
		if (s.request.op == op_read || (s.request.op == op_write && !s.copy))
			add_once(worker_.bytes_zerocopy, s.request.length);
	} else if (s.status == status_eio && !s.without_disk) {
		add_once(worker_.io_errors, 1);
	}

	/*
	 * A multi-buffer frame still held (answered before its copy: a
	 * duplicate, ENOTCONN, no buffer) is not the reply: the slot's own
	 * buffer is, or else a spare one.
	 */
	if (s.frags) {
		let_go_frame(s);
		if (!s.reply_at)
			s.reply_at = transport_->slot_buffer(owner_, index);
	}
	/*
	 * A gathered READ's datagrams: the headers in the slot's own buffer,
	 * the data where the disk read it (or none, answered an error).
	 */
	if (s.request.op == op_read && !s.reply_at) {
		s.scattered = s.scattered && s.status == status_ok;
		s.reply_at = transport_->slot_buffer(owner_, index);
	}
	if (!s.reply_at) {
		/* no buffer of the slot's own could be had: EAGAIN, headers alone */
		s.reply_at = transport_->reply_buffer(owner_, index);
		if (!s.reply_at) {
			drop_reply(index);
			return false;
		}
		s.lent = true;
	}
	header reply = s.request;
	reply.op = (u8)(s.request.op | op_reply_bit);
	reply.status = s.status;
	reply.reserved = 0;
	s.reply_len = write_reply_headers(s.reply_at, s.route, reply, data_len);
	if (!foldable(s))
		seal_reply(s, data_len);	/* else reply() does, once it knows what folds in */
	/* The NIC's MTU went down under the instance: never send more than it carries. */
	if (s.reply_len - link_size_ >
	    __atomic_load_n(&link_mtu_, __ATOMIC_RELAXED)) {
		add_once(worker_.replies_oversized, 1);
		drop_reply(index);
		return false;
	}
	s.first_tx_ns = now_ns;
	record_service_time(s.request.op, now_ns > s.arrival_ns ? now_ns - s.arrival_ns : 0);
	return true;
}

/* Into the histogram, and the op's count and sum (validated: op <= op_last). */
void engine::record_service_time(u8 op, u64 ns)
{
	hist_.record(ns);
	if (op > op_last)
		return;
	add_once(worker_.served[op], 1);
	add_once(worker_.served_ns[op], ns);
}

/*
 * A keyed instance tags its replies as clients tag their requests (with
 * auth=full over a READ's data too, which the CPU then reads).
 */
void engine::seal_reply(slot &s, u32 data_len)
{
	u8 *hdr = s.reply_at + s.reply_len - data_len - header_size;

	seal(auth_, hdr, s.scattered ? s.payload : hdr + header_size, data_len);
}

void engine::tx_entry(netblk_tx &tx, u32 index)
{
	const slot &s = slots_[index];

	tx.frame = s.frame;
	tx.data = s.reply_at;
	tx.slot = index;
	tx.len = s.reply_len;
	tx.frag = nullptr;
	tx.frag_len = 0;
	if (s.scattered) {
		tx.frag = s.payload;
		tx.frag_len = s.request.length;
		tx.len -= tx.frag_len;
	}
}

u32 engine::take_unsent(netblk_tx *batch)
{
	u32 n = 0;

	while (n < NETBLK_TX_BATCH && unsent_.count)
		tx_entry(batch[n++], unsent_.pop());
	return n;
}

/*
 * A NIC that fails every transmit with an error for a second cannot send
 * this instance's replies at all (a CPU it has no XDP queue for, a
 * detached peer): say so once, and for good.
 */
void engine::note_transmit(u32 sent, int error, u64 now_ns)
{
	if (sent || !error) {
		tx_error_streak_ = 0;
		return;
	}
	add_once(worker_.tx_errors, 1);
	if (!tx_error_streak_++)
		tx_error_since_ = now_ns;
	if (!tx_failure_ && tx_error_streak_ >= tx_failure_tries &&
	    now_ns - tx_error_since_ >= tx_failure_ns)
		__atomic_store_n(&tx_failure_, error, __ATOMIC_RELAXED);
}

/* The NIC came back: what it failed before says nothing about it now. */
void engine::tx_rearm()
{
	tx_error_streak_ = 0;
	__atomic_store_n(&tx_failure_, 0, __ATOMIC_RELAXED);
}

/*
 * One transmit.  What the NIC had no room for is offered again a little
 * later (its ring drains as it sends), for up to tx_give_up_ns.
 */
void engine::transmit(netblk_tx *batch, u32 n, u64 now_ns)
{
	int error = 0;
	u32 sent = transport_->transmit(owner_, batch, n, &error);

	add_once(worker_.tx_batches, 1);
	add_once(worker_.frames_tx, sent);
	note_transmit(sent, error, now_ns);
	for (u32 i = 0; i < sent; i++)
		release(batch[i].slot);
	for (u32 i = sent; i < n; i++) {
		u32 index = batch[i].slot;

		if (now_ns - slots_[index].first_tx_ns >= tx_give_up_ns) {
			drop_reply(index);
			continue;
		}
		unsent_.push(index);
		add_once(worker_.tx_deferred, 1);
	}
	if (sent == n) {
		tx_backoff_ns_ = tx_backoff_min_ns;
		return;
	}
	tx_due_ = now_ns + tx_backoff_ns_;
	tx_backoff_ns_ = min(tx_backoff_ns_ * 2, tx_backoff_max_ns);
}

/* A WRITE answered OK whose answer may carry others' or go in another's. */
bool engine::foldable(const slot &s) const
{
	return s.fold && s.status == status_ok && !s.lent;
}

/*
 * Folds slot @index's answer into one of @count built before it in this
 * round, to the same session, at most fold_span numbers below its own: that
 * one's `reserved` bit answers it, and its own frame is freed unsent.  The
 * client finds the same in one datagram as in many, and the instance sends,
 * and the client receives, one where a batch of completions came back.
 */
bool engine::fold_answer(const netblk_tx *built, u32 count, u32 index)
{
	slot &s = slots_[index];

	if (!foldable(s))
		return false;
	for (u32 i = count; i-- > 0;) {
		slot &into = slots_[built[i].slot];
		u64 gap = s.request.seq - into.request.seq;

		if (!foldable(into) || into.request.session != s.request.session ||
		    into.request.token != s.request.token || s.request.seq <= into.request.seq ||
		    gap > fold_span)
			continue;
		into.folded |= 1u << (gap - 1);
		add_once(worker_.answers_folded, 1);
		release_unsent(index);
		return true;
	}
	return false;
}

/* The answers of this round that others may have folded into: their bits, then their tags. */
void engine::seal_folding(const netblk_tx *built, u32 count)
{
	for (u32 i = 0; i < count; i++) {
		slot &s = slots_[built[i].slot];

		if (!foldable(s))
			continue;
		store_be32(s.reply_at + s.reply_len - header_size + reserved_offset, s.folded);
		seal_reply(s, 0);
	}
}

/* The disk answered gathered READ @index: each of its datagrams is answered so. */
void engine::scatter(u32 index)
{
	slot &first = slots_[index];
	u32 count = slots_of(first), at = index;

	first.read_len = 0;
	if (first.scattered)
		add_once(worker_.reads_gathered, 1);	/* once, however often the disk said "again" */
	for (u32 i = 0; i < count; i++, at = slots_[at].next) {
		slots_[at].status = first.status;
		scattered_.push(at);
	}
}

/*
 * The disk said "again": tried again after a backoff (true), or, after
 * disk-tries= tries, answered EAGAIN (false).
 */
bool engine::retry_again(u32 index, u64 now_ns)
{
	slot &s = slots_[index];

	if (++s.tries < options_.disk_tries) {
		retry_later(index, now_ns);
		return true;
	}
	s.status = status_eagain;
	add_once(worker_.disk_gave_up, 1);
	return false;
}

/*
 * The next slot back from the disk to answer: a datagram of a gathered READ
 * the disk answered, else the next completion not to be tried again --
 * which, the first of a gathered READ, brings all its datagrams.
 */
bool engine::next_done(u32 *index, u64 now_ns)
{
	while (!scattered_.count) {
		if (!completions_.pop(index))
			return false;
		slot &s = slots_[*index];

		add_once(worker_.reaped, slots_of(s));
		if (s.status != NETBLK_IO_AGAIN)
			disk_freed_ = true;
		else if (retry_again(*index, now_ns))
			continue;
		if (!s.read_len)
			return true;
		scatter(*index);
	}
	*index = scattered_.pop();
	return true;
}

u32 engine::reply(u64 now_ns)
{
	netblk_tx *batch = tx_batch_;
	u32 n = 0, moved = 0, index, resends = 0;

	if (unsent_.count && now_ns >= tx_due_)
		moved = n = resends = take_unsent(batch);
	while (n < NETBLK_TX_BATCH && next_done(&index, now_ns)) {
		moved++;
		if (finish_io(index, now_ns) && !fold_answer(batch + resends, n - resends, index))
			tx_entry(batch[n++], index);
	}
	seal_folding(batch + resends, n - resends);
	if (n)
		transmit(batch, n, now_ns);
	return moved;
}

} /* namespace nb */
