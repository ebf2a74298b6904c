/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netblk wire protocol v2 (docs/protocol.md): the 54-byte header every
 * request and reply begins with, the INFO payload, the tag that
 * authenticates a datagram on a keyed instance, the request validation that
 * decides between dropping, refusing and serving a datagram, and the
 * Ethernet/IPv4/UDP framing around it.  Sessions, cookies and replay
 * windows are session.h's.
 */
#ifndef NETBLK_CORE_PROTOCOL_H
#define NETBLK_CORE_PROTOCOL_H

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

constexpr u32 eth_header_size = 14;
constexpr u32 ipv4_header_size = 20;	/* replies never carry options */
constexpr u32 udp_header_size = 8;
constexpr u32 header_size = 54;
constexpr u32 reserved_offset = 42;	/* a folded WRITE answer's bits */
constexpr u32 tag_offset = 46;		/* the tag is the header's last 8 bytes */
/* IPv4 + UDP + netblk: what a datagram spends before its data. */
constexpr u32 datagram_overhead = ipv4_header_size + udp_header_size + header_size;	/* 82 */
/* Ethernet + the above: a reply's data starts dword-aligned at this offset. */
constexpr u32 reply_headroom = eth_header_size + datagram_overhead;	/* 96 */
static_assert(reply_headroom % 8 == 0, "data starts 8-byte aligned in the frame");
constexpr u32 info_payload_size = 56;
constexpr u32 read_datagrams_max = 16;	/* max_read = 16 x max_io */
/* One 512-byte sector behind the headers. */
constexpr u32 mtu_min = datagram_overhead + 512;	/* 594 */

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
	u32 slots;
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

/* Whole sectors that fit one datagram at @mtu; 0 when not even one does. */
u32 max_io_for_mtu(u32 mtu, u32 sector_size);

/*
 * Fills @g from the device and the mtu; false when no sector fits.  The
 * largest TRIM and WRITE_ZEROES are the device's, in whole sectors, at most
 * 1 GiB (one request's length is 32 bits; the block layer splits them).  A
 * read-only instance offers none of them, nor a write cache or FUA.
 */
bool geometry_init(geometry *g, u64 size_bytes, u32 sector_size, u32 mtu, u32 slots,
		   bool read_only, bool volatile_cache, bool fua, const device_limits &limits);

/*
 * An export's identity from what names its device for good (a GPT
 * partition's UUID, or its device number and first sector): SipHash-2-4 of
 * @id under a fixed key -- a name, not a secret.
 */
u64 export_id(const u8 *id, u32 len);

/* False when @len is too short for a header.  Byte order is converted. */
bool decode_header(const u8 *p, u32 len, header *h);
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

/* ---- Ethernet / IPv4 / UDP framing ---- */

constexpr u32 vlan_tag_size = 4;	/* an 802.1Q tag after the source MAC */

/* Bytes of headers before a reply's data: 96, or 100 with a VLAN tag. */
constexpr u32 reply_headers_size(bool tagged)
{
	return reply_headroom + (tagged ? vlan_tag_size : 0);
}

/*
 * The instance's own end of the link: what a request must be addressed to,
 * and what its replies come from.
 */
struct endpoint {
	u8 mac[6];		/* the NIC's own address */
	u16 vlan;		/* the 802.1Q VLAN served, 0: untagged frames only */
	u32 ip;			/* network order */
	u16 port;		/* host order */
};

/*
 * Why a frame steered to an instance is dropped unanswered.  Counted each
 * on its own (netblk_genl.h NETBLK_S_DROP_*); `bad` is their sum.
 */
enum drop_reason : u8 {
	drop_malformed,		/* not a whole IPv4/UDP datagram, or a bad IPv4 header checksum */
	drop_fragment,		/* an IPv4 fragment: there is no reassembly */
	drop_multibuffer,	/* an XDP frame in several buffers */
	drop_misaddressed,	/* not to the NIC's MAC, the instance's address and port */
	drop_vlan,		/* tagged for a VLAN the instance does not serve, or untagged for one that does */
	drop_source,		/* from where no reply may go: group MAC, martian IPv4, port 0 */
	drop_checksum,		/* a UDP checksum that does not add up */
	drop_not_request,	/* no netblk request: too short, wrong magic, or a reply */
	drop_reasons,		/* how many there are */
};

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

/* Where a received datagram's parts lie in its frame. */
struct frame_layout {
	u32 l3_offset;		/* IPv4 header: 14, or 18 behind a VLAN tag */
	u32 udp_offset;		/* UDP header */
	u32 payload_offset;	/* netblk header */
	u32 payload_len;	/* UDP payload, netblk header included */
	u32 head_len;		/* bytes of the frame in its first buffer */
	bool frags;		/* it goes on in other buffers */
	u16 vlan;		/* the tag's VLAN id, 0 when untagged */
	u8 src_mac[6];
	u32 src_ip, dst_ip;	/* network byte order, as on the wire */
	u16 src_port, dst_port;	/* host byte order */
};

/*
 * Whether a received Ethernet frame is a datagram for @local: IPv4 UDP to its
 * address and port on its VLAN, unfragmented, from a source a reply may go
 * to, with lengths that add up and checksums that hold (a UDP checksum of 0
 * is the sender's choice not to have one), and its headers -- netblk's too --
 * in its first buffer.  Fills @out when it is; otherwise *@why says what is
 * wrong.  Verifying the UDP checksum reads the payload.
 */
bool parse_frame(const frame_bytes &f, const endpoint &local, frame_layout *out,
		 drop_reason *why);

inline bool parse_frame(const u8 *frame, u32 frame_len, const endpoint &local,
			frame_layout *out, drop_reason *why)
{
	return parse_frame(one_buffer(frame, frame_len), local, out, why);
}

/* Whether an IPv4 source address (network order) is one no reply may go to. */
bool martian_source(u32 src_ip, u32 local_ip);

/* The addresses a reply goes back with. */
struct reply_route {
	u8 src_mac[6], dst_mac[6];
	u16 vlan;		/* 0: untagged */
	u32 src_ip, dst_ip;	/* network order */
	u16 src_port, dst_port;	/* host order */
};

/*
 * Back to where the request came from, from @local: the reply's source MAC is
 * the NIC's own, never whatever the request was sent to.
 */
void route_from_request(const frame_layout &req, const endpoint &local, reply_route *route);

/*
 * Write the reply's Ethernet (with the route's VLAN tag, if any), IPv4, UDP
 * and netblk headers -- reply_headers_size() bytes -- for @data_len bytes of
 * data after them, at @frame.  The UDP checksum is 0 ("not computed"):
 * computing it would read the data.  Returns the frame's length.
 */
u32 write_reply_headers(u8 *frame, const reply_route &route, const header &reply,
			u32 data_len, u16 ip_id);

/*
 * The Ethernet, IPv4 and UDP headers alone, for @payload_len bytes of UDP
 * payload after them; returns where the payload begins in @frame.
 */
u32 write_frame_headers(u8 *frame, const reply_route &route, u32 payload_len, u16 ip_id);

/* The IPv4 header checksum over @len bytes (a multiple of 2). */
u16 ipv4_checksum(const u8 *ip_header, u32 len);

/*
 * The ones' complement sum (RFC 1071) of @len bytes added to @sum, not yet
 * folded to 16 bits nor complemented; @len may be odd.
 */
u64 ones_sum(const u8 *p, u32 len, u64 sum);

/* Whether a UDP datagram's checksum holds (or is 0: not computed). */
bool udp_checksum_ok(const u8 *ip_header, const u8 *udp, u32 udp_len);
/* The same for the datagram at @udp_offset of a frame of several buffers. */
bool udp_checksum_ok(const u8 *ip_header, const frame_bytes &f, u32 udp_offset, u32 udp_len);

} /* namespace nb */

#endif
