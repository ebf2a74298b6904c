// SPDX-License-Identifier: GPL-2.0
/* SipHash-2-4: see siphash.h, and the paper's section 2 for the rounds. */
#include "siphash.h"

namespace nb {

static inline u64 rotl(u64 x, u32 b) { return x << b | x >> (64 - b); }

static inline u64 load_le64(const u8 *p)
{
	u64 v = 0;

	for (u32 i = 0; i < 8; i++)
		v |= (u64)p[i] << (8 * i);
	return v;
}

siphash_key siphash_key_from_bytes(const u8 *bytes)
{
	return siphash_key{load_le64(bytes), load_le64(bytes + 8)};
}

siphash::siphash(const siphash_key &key)
	: v0_(key.k0 ^ 0x736f6d6570736575ull), v1_(key.k1 ^ 0x646f72616e646f6dull),
	  v2_(key.k0 ^ 0x6c7967656e657261ull), v3_(key.k1 ^ 0x7465646279746573ull),
	  tail_(0), tail_len_(0), total_(0)
{
}

/* One message word through two SipRounds (the "2" of 2-4). */
void siphash::compress(u64 m)
{
	v3_ ^= m;
	for (u32 round = 0; round < 2; round++) {
		v0_ += v1_; v1_ = rotl(v1_, 13); v1_ ^= v0_; v0_ = rotl(v0_, 32);
		v2_ += v3_; v3_ = rotl(v3_, 16); v3_ ^= v2_;
		v0_ += v3_; v3_ = rotl(v3_, 21); v3_ ^= v0_;
		v2_ += v1_; v1_ = rotl(v1_, 17); v1_ ^= v2_; v2_ = rotl(v2_, 32);
	}
	v0_ ^= m;
}

void siphash::update(const u8 *p, u32 len)
{
	total_ += len;
	/* fill a partial word first */
	while (tail_len_ && len) {
		tail_ |= (u64)*p++ << (8 * tail_len_++);
		len--;
		if (tail_len_ == 8) {
			compress(tail_);
			tail_ = 0;
			tail_len_ = 0;
		}
	}
	for (; len >= 8; p += 8, len -= 8)
		compress(load_le64(p));
	while (len--)
		tail_ |= (u64)*p++ << (8 * tail_len_++);
}

void siphash::update_u64(u64 v)
{
	u8 bytes[8];

	for (u32 i = 0; i < 8; i++)
		bytes[i] = (u8)(v >> (8 * i));
	update(bytes, 8);
}

u64 siphash::final()
{
	u64 b = tail_ | (u64)(total_ & 0xff) << 56;

	compress(b);
	v2_ ^= 0xff;
	/* the four finalisation rounds: compress() twice with a zero word */
	for (u32 i = 0; i < 2; i++)
		compress(0);
	return v0_ ^ v1_ ^ v2_ ^ v3_;
}

u64 siphash24(const siphash_key &key, const u8 *p, u32 len)
{
	siphash h(key);

	h.update(p, len);
	return h.final();
}

} /* namespace nb */
