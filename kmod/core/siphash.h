/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SipHash-2-4 (Aumasson and Bernstein, 2012): the keyed MAC of protocol v2's
 * tags and the pseudo-random function its cookies and session tokens come
 * from.  The core carries its own rather than calling lib/siphash.c so that
 * the very code the module runs is what the unit tests check against the
 * published test vectors, and so that a tag can be taken over a header and
 * a payload that are not adjacent (the tag field lies between them) without
 * a copy: lib/siphash.c only hashes one contiguous buffer.
 */
#ifndef NETBLK_CORE_SIPHASH_H
#define NETBLK_CORE_SIPHASH_H

#include "types.h"

namespace nb {

/* A 128-bit key, as two little-endian 64-bit words (the reference's k0, k1). */
struct siphash_key {
	u64 k0, k1;
};

/* Keys come as 16 bytes (a key file, a random secret): bytes 0-7 are k0. */
siphash_key siphash_key_from_bytes(const u8 *bytes);

/* An incremental computation: update() any number of times, then final(). */
class siphash {
public:
	explicit siphash(const siphash_key &key);
	void update(const u8 *p, u32 len);
	void update_u64(u64 v);	/* the 8 bytes of @v, little-endian */
	u64 final();

private:
	void compress(u64 m);

	u64 v0_, v1_, v2_, v3_;
	u64 tail_;		/* bytes not yet compressed, little-endian */
	u32 tail_len_;
	u32 total_;		/* bytes seen: the final block carries it mod 256 */
};

/* SipHash-2-4 of @len bytes at @p under @key. */
u64 siphash24(const siphash_key &key, const u8 *p, u32 len);

} /* namespace nb */

#endif
