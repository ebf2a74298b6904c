/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Freestanding basics of the C++ core.  The core is compiled both into the
 * kernel module (g++ -nostdinc -nostdinc++: only gcc's own <stddef.h>,
 * <stdint.h> and <stdarg.h> exist) and into the user-space unit tests, so it
 * carries the little it needs of a standard library itself.
 */
#ifndef NETBLK_CORE_TYPES_H
#define NETBLK_CORE_TYPES_H

#include <stddef.h>
#include <stdint.h>

namespace nb {

using u8 = uint8_t;
using u16 = uint16_t;
using u32 = uint32_t;
using u64 = uint64_t;

template <typename T> constexpr T min(T a, T b) { return a < b ? a : b; }
template <typename T> constexpr T max(T a, T b) { return a > b ? a : b; }

/* A view of bytes someone else owns: a frame, a header, a payload. */
struct byte_span {
	u8 *data;
	u32 size;
};

/* Big-endian loads and stores at any alignment (wire fields are unaligned). */
inline u16 load_be16(const u8 *p) { return (u16)((u16)p[0] << 8 | p[1]); }
inline u32 load_be32(const u8 *p)
{
	return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3];
}
inline u64 load_be64(const u8 *p) { return (u64)load_be32(p) << 32 | load_be32(p + 4); }

inline void store_be16(u8 *p, u16 v) { p[0] = (u8)(v >> 8); p[1] = (u8)v; }
inline void store_be32(u8 *p, u32 v)
{
	p[0] = (u8)(v >> 24); p[1] = (u8)(v >> 16); p[2] = (u8)(v >> 8); p[3] = (u8)v;
}
inline void store_be64(u8 *p, u64 v) { store_be32(p, (u32)(v >> 32)); store_be32(p + 4, (u32)v); }

/*
 * Byte copies go to the compiler's memcpy: inlined for the few bytes of a
 * header, the kernel's (or libc's) memcpy for the one payload the core copies
 * (a write the disk cannot DMA from in place).
 */
inline void copy_bytes(u8 *dst, const u8 *src, u32 n) { __builtin_memcpy(dst, src, n); }

/*
 * Counters have one writer each, so an update is a plain load and store; a
 * reader on another CPU (the netlink dump) reads them with relaxed atomic
 * loads, which on x86-64 are plain moves that cannot tear.
 */
inline u64 read_once(const u64 &v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); }
inline void add_once(u64 &v, u64 n) { __atomic_store_n(&v, v + n, __ATOMIC_RELAXED); }
inline void write_once(u64 &v, u64 n) { __atomic_store_n(&v, n, __ATOMIC_RELAXED); }

} /* namespace nb */

#endif
