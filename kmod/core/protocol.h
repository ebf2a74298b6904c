/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netblk wire protocol v2 (docs/protocol.md): the 54-byte header every
 * request and reply begins with, the INFO payload, the tag that
 * authenticates a datagram on a keyed instance, and the request validation
 * that decides between dropping, refusing and serving a datagram.  The
 * Ethernet/IPv4/UDP framing around it is frame.h's, a received frame's
 * buffers frame_bytes.h's; sessions, cookies and replay windows are
 * session.h's.
 */
#ifndef NETBLK_CORE_PROTOCOL_H
#define NETBLK_CORE_PROTOCOL_H

#include "frame_bytes.h"
#include "siphash.h"
#include "types.h"

namespace nb {

constexpr u32 proto_magic = 0x4E424C4Bu;	/* "NBLK" */
constexpr u8 proto_version = 2;

enum op_code : u8 {
	op_info = 1,
	op_read = 2,
	op_write = 3,
	op_flush = 4,
	op_trim = 5,
	op_write_zeroes = 6,
	op_hello = 7,
};
constexpr u8 op_reply_bit = 0x80;
constexpr u8 op_last = op_hello;

/* Whether @op changes the disk: executed at most once (the replay window). */
constexpr bool op_changes_disk(u8 op)
{
	return op == op_write || op == op_flush || op == op_trim || op == op_write_zeroes;
}

constexpr u16 flag_fua = 1u << 0;
constexpr u16 flags_known = flag_fua;
/*
 * In HELLO's answers and EKEYREJECTED's: what the instance's tags cover, so
 * that a client with the key in the other mode is told, not left guessing.
 */
constexpr u16 flag_auth_key = 1u << 8;
constexpr u16 flag_auth_data = 1u << 9;
/*
 * Folded WRITE answers (docs/protocol.md): in a HELLO's answer the instance
 * offers them; in the HELLO that brings the cookie back the client takes
 * them, and the answer that opens the session says they are on.  Then the
 * answer to a WRITE may answer, in its `reserved` bits, WRITEs of the
 * fold_span numbers after its own too -- one datagram for a batch of
 * completions, not one each.  Only a client that asked gets them, so a
 * client that never heard of them is answered as before.
 */
constexpr u16 flag_fold_answers = 1u << 10;
constexpr u16 hello_flags_known = flag_fold_answers;
constexpr u32 fold_span = 32;	/* the bits of `reserved` */

/* Reply status: Linux errno values, the same on every architecture netblk runs on. */
enum status_code : u16 {
	status_ok = 0,
	status_eio = 5,
	status_eexist = 17,		/* a sequence number used for another request: never executed */
	status_eagain = 11,
	status_einval = 22,
	status_erofs = 30,
	status_erange = 34,
	status_eoverflow = 75,		/* a sequence number too far ahead of the window */
	status_eusers = 87,		/* no room for another session */
	status_emsgsize = 90,
	status_eprotonosupport = 93,
	status_eopnotsupp = 95,
	status_enotconn = 107,		/* no such session: open one (HELLO) */
	status_ealready = 114,		/* a READ or INFO served as often as one is: number it anew */
	status_estale = 116,		/* a sequence number older than the window: never executed */
	status_ekeyrejected = 129,	/* no valid tag on a keyed instance */
};

constexpr u32 header_size = 54;
constexpr u32 reserved_offset = 42;	/* a folded WRITE answer's bits */
constexpr u32 tag_offset = 46;		/* the tag is the header's last 8 bytes */
constexpr u32 info_payload_size = 60;
constexpr u32 info_payload_min = 56;	/* without queues: what servers before queues= sent */
constexpr u32 read_datagrams_max = 16;	/* max_read = 16 x max_io */

/* Protocol v1's header, which only the EPROTONOSUPPORT answer still speaks. */
constexpr u32 v1_header_size = 30;

struct header {
	u32 magic;
	u8 version;
	u8 op;
	u16 status;
	u16 flags;
	u32 session;	/* 0 in a HELLO; else the id HELLO gave */
	u64 token;	/* HELLO: 0 or the cookie; else the session's token */
	u64 seq;	/* HELLO: the client's nonce; else the request's number in its session */
	u64 offset;
	u32 length;
	u32 reserved;	/* 0; in a folded WRITE answer, bit i: seq + 1 + i answered OK too */
	u64 tag;	/* keyed instances: compute_tag(); else 0 */
};

/* What an instance serves, as INFO tells a client. */
struct geometry {
	u64 size_bytes;
	u32 sector_size;
	u32 physical_block_size;
	u32 io_opt;		/* optimal I/O size, 0: none given */
	u32 max_io;
	u32 max_read;
	u32 slots;		/* a queue's */
	u32 queues;		/* the instance's: each with slots of its own */
	u32 discard_granularity;
	u32 max_trim;		/* bytes one TRIM may cover; 0: no TRIM */
	u32 max_write_zeroes;	/* bytes one WRITE_ZEROES may cover; 0: none */
	bool read_only;
	bool volatile_cache;
	bool fua;
	/*
	 * Which device this is, the same across restarts of an instance on
	 * it (export_id()): a client that finds another after a restart stops
	 * rather than write to the wrong disk.
	 */
	u64 export_id;
};

constexpr u32 info_flag_read_only = 1u << 0;
constexpr u32 info_flag_volatile_cache = 1u << 1;
constexpr u32 info_flag_fua = 1u << 2;
constexpr u32 info_flag_trim = 1u << 3;
constexpr u32 info_flag_write_zeroes = 1u << 4;

/* What the device can do beyond reads and writes (the block layer's limits). */
struct device_limits {
	u32 physical_block_size;
	u32 io_opt;
	u32 discard_granularity;
	u64 max_discard_bytes;		/* 0: no discard */
	u64 max_write_zeroes_bytes;	/* 0: no write-zeroes */
};

/*
 * Whole sectors that fit one datagram behind its netblk header, when it
 * carries @payload_max bytes of payload (the frame's answer at an MTU:
 * frame.h frame_payload_max()); 0 when not even one does.
 */
u32 max_io_for_payload(u32 payload_max, u32 sector_size);

/*
 * Fills @g from the device and the datagram's room, @payload_max as
 * max_io_for_payload() takes it; false when no sector fits.  The
 * largest TRIM and WRITE_ZEROES are the device's, in whole sectors, at most
 * 1 GiB (one request's length is 32 bits; the block layer splits them).  A
 * read-only instance offers none of them, nor a write cache or FUA.
 */
bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 payload_max, u32 slots,
		   bool read_only, bool volatile_cache, bool fua, const device_limits &limits);

/*
 * An export's identity from what names its device for good (a GPT
 * partition's UUID, or its device number and first sector): SipHash-2-4 of
 * @id under a fixed key -- a name, not a secret.
 */
u64 export_id(const u8 *id, u32 len);

/* False when @len is too short for a header.  Byte order is converted. */
bool decode_header(const u8 *p, u32 len, header *h);
/*
 * The session a v2 request (not a HELLO) in @len bytes at @p says it is of,
 * unchecked, or 0: where to take it, before anything is checked.
 */
u32 peek_session(const u8 *p, u32 len);
void encode_header(u8 *p, const header &h);
void encode_info(u8 *p, const geometry &g);
/*
 * A client's reading of an INFO answer's @len bytes; false when it is short
 * or says what no instance serves (sectors not a power of two from 512 to
 * 64 KiB, a size or max_io not in whole sectors, max_read not 1 to 16 of
 * max_io, no slots, TRIM or WRITE_ZEROES limits not in whole sectors), so
 * that a client never sets a disk's limits from nonsense.
 */
bool decode_info(const u8 *p, u32 len, geometry *g);

/*
 * A keyed instance's authentication: the tag is SipHash-2-4 under the key of
 * the header's first tag_offset bytes, and with auth=full of the data after
 * the header too, in both directions.
 */
struct auth_config {
	bool keyed;
	bool data;		/* auth=full */
	siphash_key key;
};

u64 compute_tag(const auth_config &a, const u8 *header_bytes, const u8 *data, u32 data_len);
/* The same over data lying at @data_offset of a frame, in as many buffers as it takes. */
u64 compute_tag(const auth_config &a, const u8 *header_bytes, const frame_bytes &f,
		u32 data_offset, u32 data_len);
/* Store the tag of an encoded header (and its data): 0 when not keyed. */
void seal(const auth_config &a, u8 *header_bytes, const u8 *data, u32 data_len);

enum class verdict : u8 {
	serve,		/* valid: take a slot and do it */
	refuse,		/* answer one header carrying the status */
	refuse_v1,	/* another version: answer one v1 header, EPROTONOSUPPORT */
	hello,		/* a well-formed HELLO: the session logic decides */
	drop,		/* answer nothing: malformed, or itself a reply */
};

struct decision {
	verdict what;
	u16 status;	/* for refuse */
};

/*
 * The checks that need no session: is this a v2 request, rightly tagged,
 * of a known op with known flags?  @udp_payload_len is the length of the UDP
 * payload (netblk header included) as the UDP header says.  serve here means
 * "look up its session, then validate_op()".
 */
decision validate_header(const u8 *payload, u32 udp_payload_len, const auth_config &a,
			 header *h);
/* The same for the UDP payload at @payload_offset of a frame of several buffers. */
decision validate_header(const frame_bytes &f, u32 payload_offset, u32 udp_payload_len,
			 const auth_config &a, header *h);

/*
 * What a request of an open session asks for: whole sectors inside the
 * device, within the limits INFO gives, nothing that changes a read-only
 * instance, what the device can do.
 */
decision validate_op(const header &h, u32 udp_payload_len, const geometry &g);

/*
 * The statuses a request is refused with on the spot, each counted on its
 * own (core_api.h enum netblk_refusal, netblk_genl.h NETBLK_S_REFUSED_*).
 */
enum refusal : u8 {
	refused_eagain,
	refused_einval,
	refused_erofs,
	refused_erange,
	refused_emsgsize,
	refused_eopnotsupp,
	refused_enotconn,
	refused_ekeyrejected,
	refused_eprotonosupport,
	refused_estale,
	refused_eoverflow,
	refused_eusers,
	refused_ealready,
	refused_eexist,
	refusals,		/* how many there are; also "not a refusal status" */
};

/* The counter of a refusal with @status; refusals when it is none. */
refusal refusal_of(u16 status);

} /* namespace nb */

#endif
