/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A received frame's bytes in one buffer or several, and the runs they go
 * in: what the netblk header's tag (protocol.h) and the UDP checksum
 * (frame.h) both read, so that neither needs the other.
 */
#ifndef NETBLK_CORE_FRAME_BYTES_H
#define NETBLK_CORE_FRAME_BYTES_H

#include "types.h"

namespace nb {

/*
 * A received frame's bytes: its first buffer, and for a multi-buffer XDP
 * frame (a jumbo datagram on a NIC whose receive buffers are smaller, like
 * virtio-net's 3520-byte ones) the buffers it goes on in, in order.  Its
 * headers, netblk's included, are always in the first (parse_frame()).
 */
struct piece {
	u8 *data;
	u32 len;
};

struct frame_bytes {
	const u8 *head;
	u32 head_len;
	const piece *frags;
	u32 nr_frags;
	u32 frags_len;		/* their bytes together */
};

/* A frame of one buffer. */
inline frame_bytes one_buffer(const u8 *frame, u32 len)
{
	return { frame, len, nullptr, 0, 0 };
}

/*
 * The bytes [offset, offset + len) of a frame, one contiguous run a call,
 * in order; next() is false once they are all given (or the frame ends).
 */
class frame_runs {
public:
	frame_runs(const frame_bytes &f, u32 offset, u32 len);
	bool next(const u8 **p, u32 *n);

private:
	const frame_bytes &f_;
	u32 buffer_;		/* 0: the head; i + 1: frags[i] */
	u32 offset_;		/* in that buffer */
	u32 left_;
};

/* Copy @len bytes from @offset of @f to @dst. */
void copy_from_frame(u8 *dst, const frame_bytes &f, u32 offset, u32 len);

} /* namespace nb */

#endif
