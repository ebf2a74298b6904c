// SPDX-License-Identifier: GPL-2.0
/* A received frame's bytes in several buffers.  See frame_bytes.h. */
#include "frame_bytes.h"

namespace nb {

/* ---- frames in several buffers ---- */

frame_runs::frame_runs(const frame_bytes &f, u32 offset, u32 len)
	: f_(f), buffer_(0), offset_(offset), left_(len)
{
}

bool frame_runs::next(const u8 **p, u32 *n)
{
	while (left_ && buffer_ <= f_.nr_frags) {
		const u8 *base = buffer_ ? f_.frags[buffer_ - 1].data : f_.head;
		u32 size = buffer_ ? f_.frags[buffer_ - 1].len : f_.head_len;

		if (offset_ >= size) {
			/* it begins in a later buffer */
			offset_ -= size;
			buffer_++;
			continue;
		}
		*p = base + offset_;
		*n = min(size - offset_, left_);
		left_ -= *n;
		offset_ = 0;
		buffer_++;
		return true;
	}
	return false;
}

void copy_from_frame(u8 *dst, const frame_bytes &f, u32 offset, u32 len)
{
	frame_runs runs(f, offset, len);
	const u8 *p;
	u32 n;

	while (runs.next(&p, &n)) {
		copy_bytes(dst, p, n);
		dst += n;
	}
}

} /* namespace nb */
