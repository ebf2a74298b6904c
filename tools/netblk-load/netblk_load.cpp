// netblk-load: a load generator for a netblk instance (wire protocol v2,
// docs/protocol.md), in user space -- the client host needs no module.
//
//   netblk-load HOST PORT --mode randread|randwrite|read|write [--size 1k]
//               [--window 64] [--seconds 5] [--threads 1] [--range OFF:LEN]
//               [--timeout 0.25] [--tries 20] [--seed N] [--json]
//               [--key FILE [--auth header|full]]
//
// Each thread has its own non-blocking, connected UDP socket and keeps a
// window of requests in flight: sends go out with sendmmsg, replies come in
// with recvmmsg.  The rules are the reference client's (client/netblk/):
//
//  - Each thread opens its own session (HELLO, HELLO with the cookie) and
//    numbers every datagram it sends in it (seq, from 1); a resend keeps its
//    number, so the instance never executes a WRITE twice, and no datagram is
//    outstanding half a replay window (512 numbers) behind the newest.  An
//    instance that forgot the session (ENOTCONN: it was started again) fails
//    the request.
//  - INFO first: max_io, max_read, slots, size.  A request costs as many of
//    the instance's slots as datagrams it takes (a READ: one per max_io bytes
//    of its answer; a write: one per WRITE); the window of all threads
//    together never asks for more slots than the instance has.
//  - A READ of up to max_read bytes is one request whose answer comes in
//    ceil(size / max_io) datagrams, in any order: they are put together by
//    offset (duplicates ignored) and the read completes when every chunk has
//    come.  A write larger than max_io is sent as ceil(size / max_io) WRITEs
//    of max_io bytes (the last may be shorter), all at once, each with its own
//    number; it completes when every WRITE is answered.
//  - Silence for --timeout (0.25 s) after a send: the same datagram is sent
//    again, same number; after --tries sends the request fails (an error).
//    Sooner when later datagrams are answered and it is not (fast_gap_min
//    below): that too is a try, counted in retries and in fast_resends.
//  - --key: every datagram is tagged (over its data too with --auth full),
//    and an answer without a valid tag is stray.
//  - EAGAIN (busy): resent after a randomised back-off of 0.5 ms doubling up
//    to 50 ms; counted as busy; a request still busy after 10 x tries fails.
//  - EALREADY (a READ the instance served as often as it serves one number:
//    its answers were lost that often): sent again at once under a new
//    number, counted in retries.
//  - Any other status: the request fails (an error).
//  - Writes need --range and never leave it.
//
// Latency: from the first send of a request to its last datagram, one exact
// sample per completed request; percentiles are nearest-rank.
//
// Exit status: 0, 1 when a request failed, 2 for a bad command line or an
// instance that cannot run it.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "key_text.h"
#include "protocol.h"
#include "rto.h"

namespace {

// ---- protocol v2: the core's own codec and tags (kmod/core/protocol.h) -------

using nb::decode_header;
using nb::encode_header;
using nb::header;
using nb::header_size;
using nb::load_be32;
using nb::load_be64;
using nb::op_info;
using nb::op_read;
using nb::op_write;
using nb::proto_magic;
constexpr uint8_t op_reply = nb::op_reply_bit;
constexpr size_t info_size = nb::info_payload_min;	/* what any server sends at least */
constexpr uint16_t status_eagain = nb::status_eagain;
constexpr uint64_t seq_span = 512;  // half the instance's replay window
// A datagram still unanswered when one sent `gap` sends after it was answered
// is as good as lost: it is sent again at once (TCP's fast retransmit), not
// at its timer -- else one lost datagram stops the window at seq_span for the
// rest of the timeout.  The gap is what the window holds in datagrams (a disk
// completes those in any order: that is not loss), at least fast_gap_min, at
// most fast_gap_max.
constexpr uint64_t fast_gap_min = 8;
constexpr uint64_t fast_gap_max = seq_span / 4;

/* A request header for @op; the caller fills in session, seq, offset and length. */
header request_header(uint8_t op)
{
	header h{};
	h.magic = proto_magic;
	h.version = nb::proto_version;
	h.op = op;
	return h;
}

header unpack_header(const uint8_t *p)
{
	header h{};
	decode_header(p, header_size, &h);
	return h;
}

struct session_id {
	uint32_t id = 0;
	uint64_t token = 0;
};

struct instance_info {
	uint64_t size = 0;
	uint32_t sector_size = 0;
	uint32_t max_io = 0;
	uint32_t max_read = 0;
	uint32_t flags = 0;
	uint32_t slots = 0;
	bool read_only() const { return flags & nb::info_flag_read_only; }
};

std::string status_name(unsigned status)
{
	switch (status) {
	case EIO: return "EIO";
	case EAGAIN: return "EAGAIN";
	case EINVAL: return "EINVAL";
	case EROFS: return "EROFS";
	case ERANGE: return "ERANGE";
	case EMSGSIZE: return "EMSGSIZE";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOTCONN: return "ENOTCONN (the instance forgot the session: started again?)";
	case ESTALE: return "ESTALE";
	case EOVERFLOW: return "EOVERFLOW";
	case EUSERS: return "EUSERS (no room for another session)";
	case EKEYREJECTED: return "EKEYREJECTED (the instance wants another key or --auth)";
	case EEXIST: return "EEXIST (a number sent again for another request)";
	default: return "errno " + std::to_string(status);
	}
}

// ---- time and small helpers ---------------------------------------------------

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

std::string format(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

struct usage_error {
	std::string what;
};

// The instance did not answer, or made no sense.
struct failure {
	std::string what;
};

// '4096', '4k', '1M', '2g', '0x1000' -> bytes (suffixes are powers of 1024).
uint64_t parse_size(const std::string &text)
{
	const char *s = text.c_str();
	char *end = nullptr;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || text[0] == '-')
		throw usage_error{"not a size: '" + text + "' (use bytes or a k/m/g suffix, e.g. 4k)"};
	std::string suffix(end);
	std::transform(suffix.begin(), suffix.end(), suffix.begin(), ::tolower);
	int shift = 0;
	if (suffix == "" || suffix == "b")
		shift = 0;
	else if (suffix == "k" || suffix == "kb" || suffix == "kib")
		shift = 10;
	else if (suffix == "m" || suffix == "mb" || suffix == "mib")
		shift = 20;
	else if (suffix == "g" || suffix == "gb" || suffix == "gib")
		shift = 30;
	else if (suffix == "t" || suffix == "tb" || suffix == "tib")
		shift = 40;
	else
		throw usage_error{"not a size: '" + text + "' (use bytes or a k/m/g suffix, e.g. 4k)"};
	if (shift && v > (~0ull >> shift))
		throw usage_error{"size too large: '" + text + "'"};
	return v << shift;
}

// ---- options ------------------------------------------------------------------

enum class mode { randread, randwrite, read, write };

struct options {
	std::string host;
	std::string port;
	mode load_mode = mode::randread;
	std::string mode_name;
	uint64_t size = 1024;
	unsigned window = 64;
	double seconds = 5.0;
	unsigned threads = 1;
	bool have_range = false;
	uint64_t range_offset = 0;
	uint64_t range_length = 0;
	double timeout = 0.25;
	unsigned tries = 20;
	uint64_t seed = 0;
	bool have_seed = false;
	bool json = false;
	std::string key_file;
	std::string auth_mode;
	nb::auth_config auth{};

	bool writing() const { return load_mode == mode::randwrite || load_mode == mode::write; }
	bool random() const { return load_mode == mode::randread || load_mode == mode::randwrite; }
};

constexpr const char *usage_text =
	"usage: netblk-load HOST PORT --mode randread|randwrite|read|write [--size 1k]\n"
	"                   [--window 64] [--seconds 5] [--threads 1] [--range OFF:LEN]\n"
	"                   [--timeout 0.25] [--tries 20] [--seed N] [--json]\n"
	"                   [--key FILE [--auth header|full]]\n"
	"  Load a netblk instance (UDP, protocol v2) and report IOPS, MiB/s and latency.\n"
	"  --size     bytes per request, whole sectors: reads up to max_read (one READ),\n"
	"             writes up to max_read (ceil(size/max_io) WRITEs of max_io)\n"
	"  --window   requests in flight per thread (capped by the instance's slots)\n"
	"  --range    where requests go; required for writes (reads: the whole device)\n"
	"  --timeout  seconds of silence before a datagram is resent; --tries: sends\n"
	"             before a request fails\n"
	"  --key      a keyed instance's key file (32 hex digits); --auth: what its tags\n"
	"             cover, header (the default) or full\n";

// The key file, parsed as netblkctl start key=FILE parses it.
nb::siphash_key read_key(const std::string &path)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		throw usage_error{"cannot read key file " + path + ": " + strerror(errno)};
	char text[256];
	ssize_t n = read(fd, text, sizeof(text));
	int err = errno;
	close(fd);
	if (n < 0)
		throw usage_error{"cannot read key file " + path + ": " + strerror(err)};
	std::array<uint8_t, key_text_bytes> key;
	if (std::string why = parse_key_text(std::string_view(text, static_cast<size_t>(n)), key);
	    !why.empty())
		throw usage_error{"key file " + path + ": " + why};
	return nb::siphash_key_from_bytes(key.data());
}

long parse_int(const std::string &name, const std::string &v, long lo, long hi)
{
	char *end = nullptr;
	errno = 0;
	long n = strtol(v.c_str(), &end, 10);
	if (errno || end == v.c_str() || *end || n < lo || n > hi)
		throw usage_error{name + ": not a number in " + std::to_string(lo) + ".." +
				  std::to_string(hi) + ": '" + v + "'"};
	return n;
}

double parse_positive(const std::string &name, const std::string &v)
{
	char *end = nullptr;
	double d = strtod(v.c_str(), &end);
	if (end == v.c_str() || *end || !(d > 0) || !std::isfinite(d))
		throw usage_error{name + ": must be a number > 0: '" + v + "'"};
	return d;
}

options parse_options(int argc, char **argv)
{
	options o;
	std::vector<std::string> positional;
	for (int i = 1; i < argc; ++i) {
		std::string arg = argv[i];
		if (arg == "-h" || arg == "--help") {
			fputs(usage_text, stdout);
			exit(0);
		}
		if (arg.rfind("--", 0) != 0) {
			positional.push_back(arg);
			continue;
		}
		std::string name = arg, value;
		bool inline_value = false;
		if (auto eq = arg.find('='); eq != std::string::npos) {
			name = arg.substr(0, eq);
			value = arg.substr(eq + 1);
			inline_value = true;
		}
		if (name == "--json") {
			o.json = true;
			continue;
		}
		if (!inline_value) {
			if (i + 1 >= argc)
				throw usage_error{name + " needs a value"};
			value = argv[++i];
		}
		if (name == "--mode") {
			o.mode_name = value;
			if (value == "randread")
				o.load_mode = mode::randread;
			else if (value == "randwrite")
				o.load_mode = mode::randwrite;
			else if (value == "read")
				o.load_mode = mode::read;
			else if (value == "write")
				o.load_mode = mode::write;
			else
				throw usage_error{"--mode: one of randread, randwrite, read, write"};
		} else if (name == "--size") {
			o.size = parse_size(value);
		} else if (name == "--window") {
			o.window = static_cast<unsigned>(parse_int(name, value, 1, 65535));
		} else if (name == "--seconds") {
			o.seconds = parse_positive(name, value);
		} else if (name == "--threads") {
			o.threads = static_cast<unsigned>(parse_int(name, value, 1, 255));
		} else if (name == "--range") {
			auto colon = value.find(':');
			if (colon == std::string::npos)
				throw usage_error{"--range: use OFFSET:LENGTH, e.g. 64m:16m"};
			o.range_offset = parse_size(value.substr(0, colon));
			o.range_length = parse_size(value.substr(colon + 1));
			o.have_range = true;
		} else if (name == "--timeout") {
			o.timeout = parse_positive(name, value);
		} else if (name == "--tries") {
			o.tries = static_cast<unsigned>(parse_int(name, value, 1, 65535));
		} else if (name == "--seed") {
			o.seed = strtoull(value.c_str(), nullptr, 0);
			o.have_seed = true;
		} else if (name == "--key") {
			o.key_file = value;
		} else if (name == "--auth") {
			if (value != "header" && value != "full")
				throw usage_error{"--auth: header or full"};
			o.auth_mode = value;
		} else {
			throw usage_error{"unknown option " + name};
		}
	}
	if (positional.size() != 2)
		throw usage_error{"HOST and PORT are required (and nothing else without --)"};
	o.host = positional[0];
	o.port = positional[1];
	parse_int("PORT", o.port, 1, 65535);
	if (o.mode_name.empty())
		throw usage_error{"--mode is required"};
	if (o.writing() && !o.have_range)
		throw usage_error{"--mode " + o.mode_name + " writes: say where with --range OFFSET:LENGTH "
				  "(it overwrites that range)"};
	if (!o.auth_mode.empty() && o.key_file.empty())
		throw usage_error{"--auth needs the key: --key FILE"};
	if (!o.key_file.empty()) {
		o.auth.keyed = true;
		o.auth.data = o.auth_mode == "full";
		o.auth.key = read_key(o.key_file);
	}
	return o;
}

// ---- sockets --------------------------------------------------------------------

sockaddr_in resolve(const options &o)
{
	addrinfo hints{};
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	addrinfo *res = nullptr;
	int rc = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res);
	if (rc != 0 || !res)
		throw usage_error{"cannot resolve " + o.host + ": " + gai_strerror(rc)};
	sockaddr_in addr;
	memcpy(&addr, res->ai_addr, sizeof(addr));
	freeaddrinfo(res);
	return addr;
}

// A connected, non-blocking UDP socket with room for a window of answers.
int open_socket(const sockaddr_in &addr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		throw usage_error{std::string("socket: ") + strerror(errno)};
	int buf = 8 << 20;
	for (auto [force, plain] : {std::pair{SO_RCVBUFFORCE, SO_RCVBUF},
				    std::pair{SO_SNDBUFFORCE, SO_SNDBUF}}) {
		if (setsockopt(fd, SOL_SOCKET, force, &buf, sizeof(buf)) != 0)
			setsockopt(fd, SOL_SOCKET, plain, &buf, sizeof(buf));
	}
	if (connect(fd, reinterpret_cast<const sockaddr *>(&addr), sizeof(addr)) != 0) {
		std::string msg = std::string("connect: ") + strerror(errno);
		close(fd);
		throw usage_error{msg};
	}
	return fd;
}

// One request and its answer: sent every timeout, up to tries sends (EAGAIN:
// again after a back-off); returns the answer's length in @buf.
size_t exchange(int fd, const options &o, const header &req, std::vector<uint8_t> &buf)
{
	uint8_t out[header_size];
	encode_header(out, req);
	nb::seal(o.auth, out, nullptr, 0);
	bool refused = false;
	unsigned busy = 0;
	for (unsigned attempt = 0; attempt < o.tries; ++attempt) {
		if (send(fd, out, sizeof(out), 0) < 0 && errno == ECONNREFUSED)
			refused = true;
		uint64_t deadline = now_ns() + static_cast<uint64_t>(o.timeout * 1e9);
		for (;;) {
			uint64_t now = now_ns();
			if (now >= deadline)
				break;
			pollfd p{fd, POLLIN, 0};
			int ms = static_cast<int>((deadline - now + 999999) / 1000000);
			poll(&p, 1, ms);
			ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
			if (n < 0) {
				if (errno == ECONNREFUSED)
					refused = true;
				continue;
			}
			if (n >= static_cast<ssize_t>(nb::v1_header_size) && n < static_cast<ssize_t>(header_size) &&
			    load_be32(buf.data()) == proto_magic &&
			    nb::load_be16(buf.data() + 6) == EPROTONOSUPPORT)
				throw failure{"the instance does not speak protocol version 2 (EPROTONOSUPPORT)"};
			if (static_cast<size_t>(n) < header_size)
				continue;
			header r = unpack_header(buf.data());
			if (r.magic != proto_magic || r.op != (req.op | op_reply) || r.seq != req.seq)
				continue;
			// a HELLO that brings its cookie waits for the session, not for a
			// copy of the cookie's answer the network delivered twice
			if (req.op == nb::op_hello && req.token && !r.session && !r.status)
				continue;
			if (r.status == status_eagain && ++busy <= 10 * o.tries) {
				// busy: send again after a back-off, not counted as a try
				unsigned ms = std::min(1u << std::min(busy - 1, 6u), 50u);
				usleep(ms * 1000);
				--attempt;
				break;
			}
			if (r.status)
				throw failure{std::string(req.op == nb::op_hello ? "HELLO" : "INFO") +
					      " refused: " + status_name(r.status)};
			return static_cast<size_t>(n);
		}
	}
	std::string msg = format("%s: no answer from %s:%s after %u tries (%g s apart)",
				 req.op == nb::op_hello ? "HELLO" : "INFO", o.host.c_str(),
				 o.port.c_str(), o.tries, o.timeout);
	if (refused)
		msg += " -- port unreachable: is an instance serving that port?";
	throw failure{msg};
}

// HELLO, then HELLO with the cookie the first answer brought: a session.
session_id open_session(int fd, const options &o)
{
	std::vector<uint8_t> buf(65536);
	header h = request_header(nb::op_hello);
	h.seq = (std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) | 1;
	for (int step = 0; step < 2; ++step) {
		exchange(fd, o, h, buf);
		header r = unpack_header(buf.data());
		if (bool(r.flags & nb::flag_auth_key) != o.auth.keyed ||
		    bool(r.flags & nb::flag_auth_data) != o.auth.data)
			throw failure{std::string("the instance ") +
				      (r.flags & nb::flag_auth_key ?
					       (r.flags & nb::flag_auth_data ? "tags header and data: --key FILE --auth full"
									     : "tags headers: --key FILE")
					       : "has no key: no --key")};
		if (r.session)
			return session_id{r.session, r.token};
		h.token = r.token;  // the cookie
	}
	throw failure{"HELLO: a cookie twice, no session"};
}

// A session, then INFO in it.
instance_info ask_info(const sockaddr_in &addr, const options &o)
{
	int fd = open_socket(addr);
	std::vector<uint8_t> buf(65536);
	size_t n;
	try {
		session_id s = open_session(fd, o);
		header h = request_header(op_info);
		h.session = s.id;
		h.token = s.token;
		h.seq = 1;
		n = exchange(fd, o, h, buf);
	} catch (...) {
		close(fd);
		throw;
	}
	close(fd);
	if (n < header_size + info_size)
		throw usage_error{"INFO reply too short"};
	nb::geometry g{};
	if (!nb::decode_info(buf.data() + header_size, static_cast<uint32_t>(n - header_size), &g))
		throw usage_error{"INFO reply makes no sense (sector size, max_io, max_read or slots)"};
	instance_info info;
	info.size = g.size_bytes;
	info.sector_size = g.sector_size;
	info.max_io = g.max_io;
	info.max_read = g.max_read;
	info.slots = g.slots;
	info.flags = (g.read_only ? nb::info_flag_read_only : 0) |
		     (g.volatile_cache ? nb::info_flag_volatile_cache : 0) |
		     (g.fua ? nb::info_flag_fua : 0) | (g.max_trim ? nb::info_flag_trim : 0) |
		     (g.max_write_zeroes ? nb::info_flag_write_zeroes : 0);
	return info;
}

// ---- the load ---------------------------------------------------------------------

constexpr unsigned max_parts = 64;  // datagrams of one request (READ chunks or WRITEs)
constexpr unsigned batch = 64;      // datagrams per sendmmsg / recvmmsg

// Which datagram a sequence number is: seqs outstanding lie within seq_span
// of each other, so a table of twice that many, by seq, finds each.
constexpr uint64_t seq_table_size = 2 * seq_span;

enum class dgram_state : uint8_t { waiting, backoff, done };

// One datagram of a request: the READ, or one of the WRITEs.
struct dgram {
	dgram_state state = dgram_state::done;
	unsigned tries = 0;  // sends that waited for an answer
	unsigned busy = 0;   // EAGAIN answers
	uint64_t due = 0;    // resend (waiting) or send again (backoff) at
	uint64_t seq = 0;    // its number in the thread's session, kept for resends
	uint64_t sent = 0;   // worker::sent_ at its latest send
};

struct request {
	bool active = false;
	uint32_t gen = 0;
	uint64_t offset = 0;
	uint32_t length = 0;
	uint64_t start = 0;
	unsigned parts = 0;     // datagrams sent: 1 READ, or the WRITEs
	unsigned chunks = 0;    // answers that complete it
	unsigned got = 0;       // of those, arrived
	uint64_t got_mask = 0;  // which ones
	dgram dg[max_parts];
};

struct results {
	uint64_t ops = 0;
	uint64_t errors = 0;
	uint64_t retries = 0;
	uint64_t fast_resends = 0;  // of the retries, sent before their timer
	uint64_t window_decreases = 0;  // halvings of the window: losses and EAGAINs
	uint64_t busy = 0;
	uint64_t sends = 0;
	uint64_t stray = 0;
	uint64_t duplicates = 0;
	uint64_t icmp_refused = 0;
	std::vector<uint64_t> latency_ns;
	std::string first_error;
	uint64_t min_offset = ~0ull;  // what was actually asked for
	uint64_t max_end = 0;
};

struct plan {
	options opt;
	instance_info info;
	sockaddr_in addr{};
	uint64_t base = 0;    // the range
	uint64_t span = 0;
	uint64_t count = 0;   // requests of `size` that fit the range
	unsigned cost = 1;    // slots one request takes
	unsigned window = 1;  // per thread, after the slot cap
	uint64_t end = 0;     // no new requests from then on
	std::vector<uint8_t> payload;
};

class worker {
public:
	worker(const plan &p, unsigned index)
		: plan_(p), index_(index), reqs_(p.window),
		  rng_(p.opt.have_seed ? p.opt.seed + index : std::random_device{}() + index)
	{
		timeout_ns_ = static_cast<uint64_t>(p.opt.timeout * 1e9);
		busy_tries_ = 10 * p.opt.tries;
		fast_gap_ = std::clamp<uint64_t>(uint64_t{p.window} * p.cost, fast_gap_min, fast_gap_max);
		cwnd_.init(p.window * p.cost, p.window * p.cost);
		seq_next_ = p.count * index / p.opt.threads;
		recv_size_ = std::max<size_t>(header_size + p.info.max_io, 2048);
		by_seq_.assign(seq_table_size, ~0u);
		rbuf_.resize(recv_size_ * batch);
		shdr_.resize(batch * header_size);
		res_.latency_ns.reserve(1 << 16);
	}

	void run()
	{
		fd_ = open_socket(plan_.addr);
		try {
			session_ = open_session(fd_, plan_.opt);
		} catch (const failure &f) {
			++res_.errors;
			res_.first_error = f.what;
			close(fd_);
			return;
		}
		run_window();
		res_.window_decreases = cwnd_.decreases();
		close(fd_);
	}

	results res_;

private:
	// Requests in flight until the run's end, and their answers after it.
	void run_window()
	{
		for (;;) {
			uint64_t now = now_ns();
			if (now < plan_.end)
				for (unsigned i = 0; i < reqs_.size(); ++i)
					if (!reqs_[i].active && seq_room(plan_.cost) &&
					    used_ + plan_.cost <= cwnd_.limit())
						issue(i, now);
			flush_sends();
			if (active_ == 0 && now >= plan_.end)
				break;
			uint64_t next = timers(now_ns());
			flush_sends();
			wait_until(next);
			receive();
		}
	}

	const plan &plan_;
	unsigned index_;
	std::vector<request> reqs_;
	std::mt19937_64 rng_;
	int fd_ = -1;
	unsigned active_ = 0;
	unsigned used_ = 0;		// slots the active requests take
	// The datagrams in flight, in slots: halved on a loss or an EAGAIN,
	// grown back by one a window answered (the core's, as the block-device
	// client's).  Without it a resend goes into a queue that just dropped,
	// and a lossy path loses more.
	nb::send_window cwnd_;
	uint64_t timeout_ns_ = 0;
	unsigned busy_tries_ = 0;
	uint64_t seq_next_ = 0;
	size_t recv_size_ = 0;
	std::vector<uint8_t> rbuf_;
	std::vector<uint8_t> shdr_;
	mmsghdr smsg_[batch]{};
	iovec siov_[batch][2]{};
	unsigned nsend_ = 0;
	session_id session_;
	uint64_t wire_seq_ = 1;		// the next datagram's number
	uint64_t sent_ = 0;		// datagrams queued to send, resends included
	uint64_t answered_ = 0;		// the newest send (by sent_) answered
	uint64_t fast_gap_ = 0;
	uint64_t oldest_seq_ = 1;	// no outstanding datagram's number is below it
	std::vector<uint32_t> by_seq_;	// seq % seq_table_size -> slot << 8 | part

	// Whether @parts more numbers keep every outstanding one within
	// seq_span of the newest (the window is looked at again only when the
	// oldest seen may have been answered).
	bool seq_room(unsigned parts)
	{
		if (wire_seq_ + parts - oldest_seq_ <= seq_span)
			return true;
		uint64_t oldest = wire_seq_;
		for (const request &r : reqs_)
			if (r.active)
				for (unsigned k = 0; k < r.parts; ++k)
					if (r.dg[k].state != dgram_state::done)
						oldest = std::min(oldest, r.dg[k].seq);
		oldest_seq_ = oldest;
		return wire_seq_ + parts - oldest_seq_ <= seq_span;
	}

	uint64_t next_offset()
	{
		uint64_t k;
		if (plan_.opt.random()) {
			k = std::uniform_int_distribution<uint64_t>(0, plan_.count - 1)(rng_);
		} else {
			k = seq_next_ % plan_.count;
			++seq_next_;
		}
		return plan_.base + k * plan_.opt.size;
	}

	void issue(unsigned slot, uint64_t now)
	{
		request &r = reqs_[slot];
		r.active = true;
		++r.gen;
		r.offset = next_offset();
		r.length = static_cast<uint32_t>(plan_.opt.size);
		if (r.offset < plan_.base || r.offset + r.length > plan_.base + plan_.span)
			abort();  // never outside the range
		res_.min_offset = std::min(res_.min_offset, r.offset);
		res_.max_end = std::max(res_.max_end, r.offset + r.length);
		r.start = now;
		unsigned n = (r.length + plan_.info.max_io - 1) / plan_.info.max_io;
		r.parts = plan_.opt.writing() ? n : 1;
		r.chunks = n;
		r.got = 0;
		r.got_mask = 0;
		for (unsigned k = 0; k < r.parts; ++k) {
			uint64_t seq = wire_seq_++;
			r.dg[k] = dgram{dgram_state::waiting, 1, 0, now + timeout_ns_, seq};
			by_seq_[seq % seq_table_size] = slot << 8 | k;
			queue_send(slot, k);
		}
		++active_;
		used_ += plan_.cost;
	}

	void queue_send(unsigned slot, unsigned k)
	{
		if (nsend_ == batch)
			flush_sends();
		request &r = reqs_[slot];
		r.dg[k].sent = ++sent_;
		header h = request_header(op_read);
		h.session = session_.id;
		h.token = session_.token;
		h.seq = r.dg[k].seq;
		uint8_t *hdr = &shdr_[nsend_ * header_size];
		iovec *iov = siov_[nsend_];
		iov[0] = {hdr, header_size};
		unsigned niov = 1;
		if (plan_.opt.writing()) {
			uint32_t at = k * plan_.info.max_io;
			h.op = op_write;
			h.offset = r.offset + at;
			h.length = std::min(plan_.info.max_io, r.length - at);
			iov[1] = {const_cast<uint8_t *>(plan_.payload.data()) + at, h.length};
			niov = 2;
		} else {
			h.offset = r.offset;
			h.length = r.length;
		}
		encode_header(hdr, h);
		nb::seal(plan_.opt.auth, hdr, niov > 1 ? static_cast<const uint8_t *>(iov[1].iov_base) : nullptr,
			 niov > 1 ? static_cast<uint32_t>(iov[1].iov_len) : 0);
		smsg_[nsend_] = {};
		smsg_[nsend_].msg_hdr.msg_iov = iov;
		smsg_[nsend_].msg_hdr.msg_iovlen = niov;
		++nsend_;
	}

	void flush_sends()
	{
		unsigned at = 0;
		while (at < nsend_) {
			int n = sendmmsg(fd_, smsg_ + at, nsend_ - at, 0);
			if (n > 0) {
				at += n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == ECONNREFUSED)
				++res_.icmp_refused;
			// EAGAIN, ENOBUFS, ECONNREFUSED, ...: this datagram is as good
			// as lost -- its timer resends it.
			++at;
		}
		res_.sends += nsend_;
		nsend_ = 0;
	}

	// Resends after silence or back-off; failures after `tries`.  Returns
	// when the next timer is due (~0 when none).
	uint64_t timers(uint64_t now)
	{
		uint64_t next = ~0ull;
		for (unsigned slot = 0; slot < reqs_.size(); ++slot) {
			request &r = reqs_[slot];
			if (!r.active)
				continue;
			for (unsigned k = 0; k < r.parts && r.active; ++k) {
				dgram &p = r.dg[k];
				if (p.state == dgram_state::done)
					continue;
				if (p.state == dgram_state::waiting && p.sent + fast_gap_ <= answered_ &&
				    p.tries < plan_.opt.tries) {
					cwnd_.congested(p.sent, sent_);
					++p.tries;
					++res_.retries;
					++res_.fast_resends;
					p.due = now + timeout_ns_;
					queue_send(slot, k);
				} else if (p.due <= now) {
					if (p.state == dgram_state::backoff) {
						p.state = dgram_state::waiting;
					} else if (p.tries >= plan_.opt.tries) {
						fail(r, format("%s %" PRIu64 "+%u: no answer after %u tries",
							       plan_.opt.writing() ? "WRITE" : "READ",
							       r.offset, r.length, p.tries));
						break;
					} else {
						cwnd_.congested(p.sent, sent_);
						++p.tries;
						++res_.retries;
					}
					p.due = now + timeout_ns_;
					queue_send(slot, k);
				}
				next = std::min(next, p.due);
			}
		}
		return next;
	}

	void wait_until(uint64_t when)
	{
		uint64_t now = now_ns();
		if (when <= now)
			return;
		uint64_t d = when - now;
		timespec ts{static_cast<time_t>(d / 1000000000u), static_cast<long>(d % 1000000000u)};
		pollfd p{fd_, POLLIN, 0};
		ppoll(&p, 1, when == ~0ull ? nullptr : &ts, nullptr);
	}

	void receive()
	{
		mmsghdr msgs[batch];
		iovec iov[batch];
		for (;;) {
			for (unsigned i = 0; i < batch; ++i) {
				iov[i] = {&rbuf_[i * recv_size_], recv_size_};
				msgs[i] = {};
				msgs[i].msg_hdr.msg_iov = &iov[i];
				msgs[i].msg_hdr.msg_iovlen = 1;
			}
			int n = recvmmsg(fd_, msgs, batch, MSG_DONTWAIT, nullptr);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == ECONNREFUSED) {
					++res_.icmp_refused;
					continue;
				}
				return;  // EAGAIN: drained
			}
			uint64_t now = now_ns();
			for (int i = 0; i < n; ++i)
				take(&rbuf_[i * recv_size_], msgs[i].msg_len,
				     msgs[i].msg_hdr.msg_flags & MSG_TRUNC, now);
			if (static_cast<unsigned>(n) < batch)
				return;
		}
	}

	void take(const uint8_t *d, size_t len, bool truncated, uint64_t now)
	{
		if (len < header_size || truncated) {
			++res_.stray;
			return;
		}
		header h = unpack_header(d);
		uint32_t where = by_seq_[h.seq % seq_table_size];
		unsigned slot = where >> 8, k = where & 0xff;
		uint8_t want_op = (plan_.opt.writing() ? op_write : op_read) | op_reply;
		if (h.magic != proto_magic || h.op != want_op || where == ~0u ||
		    slot >= reqs_.size() || !reqs_[slot].active || k >= reqs_[slot].parts ||
		    reqs_[slot].dg[k].seq != h.seq || h.session != session_.id ||
		    h.token != session_.token) {
			++res_.stray;
			return;
		}
		// Untagged: a forgery, or another key.  The instance's EKEYREJECTED
		// is untagged too, but in a session anyone who can forge the
		// instance's address could send one: ignored (the HELLO's is not).
		if (plan_.opt.auth.keyed &&
		    h.tag != nb::compute_tag(plan_.opt.auth, d, d + header_size,
					     static_cast<uint32_t>(len - header_size))) {
			++res_.stray;
			return;
		}
		request &r = reqs_[slot];
		dgram &p = r.dg[k];
		answered_ = std::max(answered_, p.sent);
		if (h.status == nb::status_ealready && !plan_.opt.writing()) {
			// served as often as the instance serves one number: its
			// answers were lost that often; asked again under a new one
			by_seq_[p.seq % seq_table_size] = ~0u;
			p.seq = wire_seq_++;
			by_seq_[p.seq % seq_table_size] = slot << 8 | k;
			p.due = now + timeout_ns_;
			++res_.retries;
			queue_send(slot, k);
			return;
		}
		if (h.status == status_eagain) {
			if (p.state != dgram_state::waiting)
				return;  // one back-off per send
			++p.busy;
			++res_.busy;
			cwnd_.congested(p.sent, sent_);
			if (p.busy > busy_tries_) {
				fail(r, format("%s %" PRIu64 "+%u: still busy (EAGAIN) after %u tries",
					       plan_.opt.writing() ? "WRITE" : "READ", r.offset, r.length,
					       p.busy));
				return;
			}
			double ms = std::min(0.5 * std::ldexp(1.0, static_cast<int>(std::min(p.busy - 1, 16u))),
					     50.0);
			double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(rng_);
			p.state = dgram_state::backoff;
			p.due = now + static_cast<uint64_t>(ms * jitter * 1e6);
			return;
		}
		if (h.status) {
			fail(r, format("%s %" PRIu64 "+%u refused: %s at %" PRIu64 "+%u",
				       plan_.opt.writing() ? "WRITE" : "READ", r.offset, r.length,
				       status_name(h.status).c_str(), h.offset, h.length));
			return;
		}
		unsigned chunk;
		if (plan_.opt.writing()) {
			chunk = k;
			if (h.offset != r.offset + uint64_t{k} * plan_.info.max_io) {
				++res_.stray;
				return;
			}
		} else {
			// A READ chunk: offset within the request, on a max_io
			// boundary, max_io long (the last one the rest), data attached.
			uint64_t rel = h.offset - r.offset;
			if (h.offset < r.offset || rel >= r.length || rel % plan_.info.max_io ||
			    h.length != std::min<uint64_t>(plan_.info.max_io, r.length - rel) ||
			    len - header_size != h.length) {
				++res_.stray;
				return;
			}
			chunk = static_cast<unsigned>(rel / plan_.info.max_io);
		}
		if (r.got_mask & (uint64_t{1} << chunk)) {
			++res_.duplicates;
			return;
		}
		r.got_mask |= uint64_t{1} << chunk;
		++r.got;
		cwnd_.answered();
		if (plan_.opt.writing())
			p.state = dgram_state::done;
		if (r.got == r.chunks) {
			res_.latency_ns.push_back(now - r.start);
			++res_.ops;
			r.active = false;
			--active_;
			used_ -= plan_.cost;
		}
	}

	void fail(request &r, std::string why)
	{
		++res_.errors;
		if (res_.first_error.empty())
			res_.first_error = std::move(why);
		r.active = false;
		++r.gen;
		for (unsigned k = 0; k < r.parts; ++k)
			r.dg[k].state = dgram_state::done;  // what still comes for it is stray
		--active_;
		used_ -= plan_.cost;
	}
};

// ---- report -------------------------------------------------------------------------

double percentile_us(const std::vector<uint64_t> &sorted, double q)
{
	if (sorted.empty())
		return 0.0;
	double rank = std::ceil(q / 100.0 * static_cast<double>(sorted.size()));
	size_t k = static_cast<size_t>(std::clamp(rank - 1.0, 0.0, static_cast<double>(sorted.size() - 1)));
	return static_cast<double>(sorted[k]) / 1000.0;
}

std::string json_string(const std::string &s)
{
	std::string out = "\"";
	for (unsigned char c : s) {
		if (c == '"' || c == '\\')
			out += '\\', out += static_cast<char>(c);
		else if (c < 0x20)
			out += format("\\u%04x", c);
		else
			out += static_cast<char>(c);
	}
	return out + "\"";
}

int run(const options &o)
{
	plan p;
	p.opt = o;
	p.addr = resolve(o);
	p.info = ask_info(p.addr, o);
	const instance_info &g = p.info;

	if (o.writing() && g.read_only())
		throw usage_error{"--mode " + o.mode_name + ": the instance is read-only"};
	p.base = o.have_range ? o.range_offset : 0;
	p.span = o.have_range ? o.range_length : g.size;
	if (o.size == 0 || o.size % g.sector_size)
		throw usage_error{format("--size %" PRIu64 " is not a whole number of %u-byte sectors",
					 o.size, g.sector_size)};
	if (o.size > g.max_read)
		throw usage_error{format("--size %" PRIu64 " is more than one READ carries here (max_read %u)",
					 o.size, g.max_read)};
	unsigned datagrams = static_cast<unsigned>((o.size + g.max_io - 1) / g.max_io);
	if (datagrams > max_parts)
		throw usage_error{format("--size %" PRIu64 " takes %u datagrams; at most %u", o.size,
					 datagrams, max_parts)};
	if (p.base % g.sector_size || p.span % g.sector_size)
		throw usage_error{format("--range %" PRIu64 ":%" PRIu64 " is not sector-aligned (%u)",
					 p.base, p.span, g.sector_size)};
	if (p.base > g.size || p.span > g.size - p.base)
		throw usage_error{format("--range %" PRIu64 ":%" PRIu64 " ends beyond the device (%" PRIu64
					 " bytes)", p.base, p.span, g.size)};
	if (p.span < o.size)
		throw usage_error{format("--range %" PRIu64 ":%" PRIu64 " is smaller than --size %" PRIu64,
					 p.base, p.span, o.size)};
	p.count = p.span / o.size;
	p.cost = datagrams;
	// The window: all threads' requests together hold at most `slots` slots.
	uint64_t slots = g.slots ? g.slots : (1u << 30);
	uint64_t cap = slots / (uint64_t{p.cost} * o.threads);
	p.window = static_cast<unsigned>(std::max<uint64_t>(1, std::min<uint64_t>(o.window, cap)));
	if (o.writing()) {
		p.payload.resize(o.size);
		std::mt19937_64 fill(o.have_seed ? o.seed : std::random_device{}());
		for (auto &b : p.payload)
			b = static_cast<uint8_t>(fill());
	}

	uint64_t start = now_ns();
	p.end = start + static_cast<uint64_t>(o.seconds * 1e9);
	std::vector<worker> workers;
	workers.reserve(o.threads);
	for (unsigned t = 0; t < o.threads; ++t)
		workers.emplace_back(p, t);
	std::vector<std::thread> threads;
	for (auto &w : workers)
		threads.emplace_back([&w] { w.run(); });
	for (auto &t : threads)
		t.join();
	double elapsed = static_cast<double>(now_ns() - start) / 1e9;

	results all;
	for (auto &w : workers) {
		const results &r = w.res_;
		all.ops += r.ops;
		all.errors += r.errors;
		all.retries += r.retries;
		all.fast_resends += r.fast_resends;
		all.window_decreases += r.window_decreases;
		all.busy += r.busy;
		all.sends += r.sends;
		all.stray += r.stray;
		all.duplicates += r.duplicates;
		all.icmp_refused += r.icmp_refused;
		all.latency_ns.insert(all.latency_ns.end(), r.latency_ns.begin(), r.latency_ns.end());
		if (all.first_error.empty())
			all.first_error = r.first_error;
		all.min_offset = std::min(all.min_offset, r.min_offset);
		all.max_end = std::max(all.max_end, r.max_end);
	}
	std::sort(all.latency_ns.begin(), all.latency_ns.end());
	double iops = elapsed > 0 ? static_cast<double>(all.ops) / elapsed : 0.0;
	double mib_s = iops * static_cast<double>(o.size) / (1 << 20);
	double p50 = percentile_us(all.latency_ns, 50), p99 = percentile_us(all.latency_ns, 99);
	double p999 = percentile_us(all.latency_ns, 99.9);
	double mx = all.latency_ns.empty() ? 0.0 : static_cast<double>(all.latency_ns.back()) / 1000.0;
	double mean = 0;
	for (uint64_t v : all.latency_ns)
		mean += static_cast<double>(v) / 1000.0;
	if (!all.latency_ns.empty())
		mean /= static_cast<double>(all.latency_ns.size());
	uint64_t lo = all.min_offset == ~0ull ? 0 : all.min_offset;

	if (o.json) {
		std::string j = "{";
		j += "\"mode\": " + json_string(o.mode_name);
		j += format(", \"size\": %" PRIu64 ", \"window\": %u, \"threads\": %u", o.size, p.window,
			    o.threads);
		j += format(", \"datagrams_per_request\": %u, \"op\": %s", datagrams,
			    o.writing() ? "\"WRITE\"" : "\"READ\"");
		j += format(", \"seconds\": %.6f", elapsed);
		j += format(", \"range\": {\"offset\": %" PRIu64 ", \"length\": %" PRIu64 "}", p.base, p.span);
		j += format(", \"touched\": {\"offset\": %" PRIu64 ", \"end\": %" PRIu64 "}", lo, all.max_end);
		j += format(", \"ops\": %" PRIu64 ", \"bytes\": %" PRIu64, all.ops, all.ops * o.size);
		j += format(", \"iops\": %.1f, \"mib_s\": %.3f", iops, mib_s);
		j += format(", \"latency_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p99.9\": %.1f, \"max\": %.1f, "
			    "\"mean\": %.1f}", p50, p99, p999, mx, mean);
		j += format(", \"retries\": %" PRIu64 ", \"fast_resends\": %" PRIu64 ", \"busy\": %" PRIu64
			    ", \"errors\": %" PRIu64 ", \"window_decreases\": %" PRIu64, all.retries,
			    all.fast_resends, all.busy, all.errors, all.window_decreases);
		j += format(", \"sends\": %" PRIu64 ", \"stray\": %" PRIu64 ", \"duplicates\": %" PRIu64
			    ", \"icmp_refused\": %" PRIu64, all.sends, all.stray, all.duplicates,
			    all.icmp_refused);
		j += format(", \"instance\": {\"size\": %" PRIu64 ", \"sector_size\": %u, \"max_io\": %u, "
			    "\"max_read\": %u, \"slots\": %u, \"flags\": %u}", g.size, g.sector_size, g.max_io,
			    g.max_read, g.slots, g.flags);
		j += ", \"first_error\": " + (all.first_error.empty() ? std::string("null")
								 : json_string(all.first_error));
		j += "}\n";
		fputs(j.c_str(), stdout);
	} else {
		printf("netblk-load %s: %" PRIu64 "-byte requests (%u %s datagram%s each), window %u x %u "
		       "thread%s, range %" PRIu64 "+%" PRIu64 ", %.2f s\n",
		       o.mode_name.c_str(), o.size, datagrams, o.writing() ? "WRITE" : "READ-answer",
		       datagrams == 1 ? "" : "s", p.window, o.threads, o.threads == 1 ? "" : "s", p.base,
		       p.span, elapsed);
		printf("  %" PRIu64 " ops  %.1f IOPS  %.2f MiB/s\n", all.ops, iops, mib_s);
		printf("  latency (us): p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", p50, p99, p999, mx);
		printf("  retries %" PRIu64 " (fast %" PRIu64 ")  busy %" PRIu64 "  errors %" PRIu64 "\n",
		       all.retries, all.fast_resends, all.busy, all.errors);
		if (!all.first_error.empty())
			printf("  first error: %s\n", all.first_error.c_str());
	}
	return all.errors ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv)
{
	try {
		return run(parse_options(argc, argv));
	} catch (const usage_error &e) {
		fprintf(stderr, "netblk-load: %s\n", e.what.c_str());
		fputs("(netblk-load --help: usage)\n", stderr);
		return 2;
	} catch (const failure &e) {
		fprintf(stderr, "netblk-load: %s\n", e.what.c_str());
		return 1;
	} catch (const std::exception &e) {
		fprintf(stderr, "netblk-load: %s\n", e.what());
		return 1;
	}
}
