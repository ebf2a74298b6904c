// start's and attach's options: see options.h.  Each command has a table
// of option descriptions (start_options, attach_options below) that one
// parser, one usage writer, save's writer and --exist-ok's and restore's
// comparison read.  Adding an option to netblkctl is a line in a table and
// its name in the table's have_order when the kernel says it back (besides
// the field it lands in, netblk.h, and sending it, netblk.cpp).
#include "options.h"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <cstring>
#include <net/if.h>
#include <span>
#include <sys/stat.h>
#include <variant>

#include "cli.h"
#include "core_api.h"		// NETBLK_SESSIONS_DEFAULT, NETBLK_PER_SOURCE_DEFAULT
#include "key_text.h"

namespace {

// What an option's value is, and so how it is parsed and said in the usage.
enum class option_kind {
	flag,		// the word alone: "ro"
	name,		// name=TEXT, not empty; at most `max` bytes unless max is 0
	u32,		// name=N, a whole number in min..max, landing times `scale`
	choice,		// name=WORD, one of `choices`
	prefixes,	// name=PREFIX[,PREFIX...], at most `max` IPv4 prefixes
	key_file,	// name=FILE, a file holding a key (key_text.h)
};

struct option_choice {
	const char *word;	// nullptr: past the last choice
	uint32_t value;
};

using netblk_key = std::array<uint8_t, NETBLK_KEY_BYTES>;

// Where in the command's arguments `Args` an option's value lands; the
// type goes with the kind (option_well_formed).
template <class Args>
using option_field = std::variant<bool Args::*, std::optional<std::string> Args::*,
				  std::optional<uint32_t> Args::*, std::optional<uint16_t> Args::*,
				  std::vector<netblk_prefix> Args::*, std::optional<netblk_key> Args::*>;

// Where the running instance's (or device's) value of an option is, in
// `Have` (netblk_instance, netblk_attached): monostate when it has none.
template <class Have>
using have_field = std::variant<std::monostate, bool Have::*, std::string Have::*,
				uint32_t Have::*, uint16_t Have::*, std::vector<netblk_prefix> Have::*>;

template <class Args, class Have>
struct option_desc {
	const char *name;		// the word before '=' (a flag's whole word)
	option_kind kind;
	option_field<Args> field;
	uint32_t min = 0;		// u32: the range
	uint32_t max = 0;		// u32: the range; name, prefixes: the most
	uint32_t scale = 1;		// u32: what the value is multiplied by where it lands
	// u32: what a bad value is told it wants, when more than "min..max";
	// name: what an empty one is told it needs.
	const char *want = nullptr;
	std::array<option_choice, 3> choices{};	// choice: the words and their values
	// The usage: the value's name in the synopsis ("N", "IFACE"), what the
	// option does (lines separated by '\n'), whether the synopsis breaks
	// its line before it, and whether it goes inside the previous one's
	// brackets (auth= is said only with key=).
	const char *metavar = nullptr;
	const char *help = nullptr;
	bool new_line = false;
	bool within_previous = false;
	// What the running instance has, compared by --exist-ok and restore
	// and written by save; whether save writes it: by default a flag set,
	// a text or list not empty, a number not 0, a choice not its first
	// (the default); `saved_if` says otherwise, `not_saved` never.
	have_field<Have> have{};
	bool (*saved_if)(uint32_t value, const Have &have, uint32_t nic_mtu) = nullptr;
	bool not_saved = false;
	// u32: what the kernel puts in when it is not said, which save does
	// not write either (netblk_options.h's default)
	uint32_t def = 0;
};

// A command's options, and the wording of its messages (attach's have been
// "unknown attach option" and "bad timeout '0'", without the '=': kept for
// whoever matches them).
template <class Args, class Have>
struct option_table {
	std::span<const option_desc<Args, Have>> options;
	const char *unknown;		// "unknown option"
	bool bad_without_equals;	// "bad timeout '0'" rather than "bad timeout= '0'"
};

template <class Args, class Have>
constexpr bool option_well_formed(const option_desc<Args, Have> &o)
{
	switch (o.kind) {
	case option_kind::flag:
		return std::holds_alternative<bool Args::*>(o.field);
	case option_kind::name:
		return std::holds_alternative<std::optional<std::string> Args::*>(o.field) && o.want;
	case option_kind::u32:
		return (std::holds_alternative<std::optional<uint32_t> Args::*>(o.field) ||
			(std::holds_alternative<std::optional<uint16_t> Args::*>(o.field) &&
			 o.max <= UINT16_MAX)) &&
		       o.min <= o.max && o.scale >= 1 && o.max <= UINT32_MAX / o.scale;
	case option_kind::choice:
		return std::holds_alternative<std::optional<uint32_t> Args::*>(o.field) &&
		       o.choices[0].word && o.choices[1].word;
	case option_kind::prefixes:
		return std::holds_alternative<std::vector<netblk_prefix> Args::*>(o.field) && o.max;
	case option_kind::key_file:
		return std::holds_alternative<std::optional<netblk_key> Args::*>(o.field);
	}
	return false;
}

// The running instance's value is of the type the option's kind takes.
template <class Args, class Have>
constexpr bool have_well_formed(const option_desc<Args, Have> &o)
{
	if (std::holds_alternative<std::monostate>(o.have))
		return true;
	switch (o.kind) {
	case option_kind::flag:
		return std::holds_alternative<bool Have::*>(o.have);
	case option_kind::name:
		return std::holds_alternative<std::string Have::*>(o.have);
	case option_kind::u32:
		return std::holds_alternative<uint32_t Have::*>(o.have) ||
		       std::holds_alternative<uint16_t Have::*>(o.have);
	case option_kind::choice:
		return std::holds_alternative<uint32_t Have::*>(o.have);
	case option_kind::prefixes:
		return std::holds_alternative<std::vector<netblk_prefix> Have::*>(o.have);
	case option_kind::key_file:
		return false;	// the kernel never gives a key back
	}
	return false;
}

template <class Args, class Have>
constexpr bool options_well_formed(const option_table<Args, Have> &t)
{
	for (const option_desc<Args, Have> &o : t.options)
		if (!option_well_formed(o) || !have_well_formed(o) || !o.help ||
		    (o.kind != option_kind::flag && !o.metavar))
			return false;
	return true;
}

using start_args = netblk_start_args;
using attach_args = netblk_attach_args;
using instance = netblk_instance;
using attached = netblk_attached;

// save: an instance takes its NIC's MTU, 1024 sessions and 16 (at most
// all) of them a source unless told otherwise: said only when different.
bool mtu_not_nics(uint32_t mtu, const instance &, uint32_t nic_mtu)
{
	return mtu != nic_mtu;
}

bool sessions_not_default(uint32_t sessions, const instance &, uint32_t)
{
	return sessions && sessions != NETBLK_SESSIONS_DEFAULT;
}

bool per_source_not_default(uint32_t per_source, const instance &inst, uint32_t)
{
	return per_source &&
	       per_source != std::min<uint32_t>(NETBLK_PER_SOURCE_DEFAULT, inst.sessions);
}

// The row of a knob of netblk_options.h's lists marked "gen": its word,
// its range, its usage, its default.  The "own" ones have rows of their
// own below (older than the lists, or worded specially).
#define GEN_KIND_flag option_kind::flag
#define GEN_KIND_u16 option_kind::u32
#define GEN_KIND_u32 option_kind::u32
#define GEN_ROW_own(Args, Have, fld, type, lo, hi, dflt, cli, mv, hlp)
#define GEN_ROW_gen(Args, Have, fld, type, lo, hi, dflt, cli, mv, hlp)			\
	{.name = cli, .kind = GEN_KIND_##type, .field = &Args::fld, .min = lo, .max = hi,	\
	 .metavar = mv, .help = hlp, .have = &Have::fld, .def = dflt},
#define GEN_START_ROW(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, mv, hlp)		\
	GEN_ROW_##ctl(start_args, instance, fld, type, lo, hi, dflt, cli, mv, hlp)
#define GEN_ATTACH_ROW(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, mv, hlp)		\
	GEN_ROW_##ctl(attach_args, attached, fld, type, lo, hi, dflt, cli, mv, hlp)
// Their words, in their have_order.
#define GEN_WORD_own(cli)
#define GEN_WORD_gen(cli) cli,
#define GEN_WORD(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, ...) GEN_WORD_##ctl(cli)

// start's options, in the order of the usage: the lists' "gen" knobs last.
constexpr option_desc<start_args, instance> start_option_list[] = {
	{.name = "ro", .kind = option_kind::flag, .field = &start_args::read_only,
	 .help = "refuse writes", .have = &instance::read_only},
	{.name = "dev", .kind = option_kind::name, .field = &start_args::ifname,
	 .want = "an interface name", .metavar = "IFACE",
	 .help = "the NIC to serve on (default: the default route's)", .have = &instance::ifname},
	{.name = "mtu", .kind = option_kind::u32, .field = &start_args::mtu, .max = UINT32_MAX,
	 .metavar = "N", .help = "the MTU to size datagrams for",
	 .have = &instance::mtu, .saved_if = mtu_not_nics},
	{.name = "cpu", .kind = option_kind::u32, .field = &start_args::cpu, .max = UINT32_MAX,
	 .metavar = "N", .help = "the CPU of the instance's worker",
	 .have = &instance::cpu, .not_saved = true},	// by default what the NIC can do
	{.name = "poll", .kind = option_kind::u32, .field = &start_args::poll_us, .max = UINT32_MAX,
	 .metavar = "US", .help = "the worker's poll time, in microseconds",
	 .have = &instance::poll_us},
	{.name = "vlan", .kind = option_kind::u32, .field = &start_args::vlan, .min = 1, .max = 4094,
	 .metavar = "N", .help = "serve 802.1Q VLAN N of the NIC (the address of its VLAN device)",
	 .new_line = true, .have = &instance::vlan},
	{.name = "allow", .kind = option_kind::prefixes, .field = &start_args::allow,
	 .max = NETBLK_ALLOW_MAX, .metavar = "PREFIX[,PREFIX...]",
	 .help = "answer only these sources (10.1.0.0/16,10.2.3.4), filtered\n"
		 "by the NIC's XDP program before anything else sees them",
	 .have = &instance::allow},
	{.name = "sessions", .kind = option_kind::u32, .field = &start_args::sessions, .min = 1,
	 .max = NETBLK_SESSIONS_LIMIT, .metavar = "N",
	 .help = "the clients' sessions it holds at once (default 1024)",
	 .have = &instance::sessions, .saved_if = sessions_not_default},
	{.name = "per-source", .kind = option_kind::u32, .field = &start_args::per_source,
	 .min = 1, .max = NETBLK_SESSIONS_LIMIT, .want = "1..65536, at most sessions=",
	 .metavar = "N",
	 .help = "of those, one source address may hold (default 16):\n"
		 "raise it for clients behind one NAT address",
	 .have = &instance::per_source, .saved_if = per_source_not_default},
	{.name = "key", .kind = option_kind::key_file, .field = &start_args::key,
	 .metavar = "FILE", .help = "answer only datagrams tagged with this key (32 hex digits)",
	 .new_line = true},
	{.name = "auth", .kind = option_kind::choice, .field = &start_args::auth,
	 .choices = {{{"header", NETBLK_AUTH_HEADER}, {"full", NETBLK_AUTH_FULL}}},
	 .metavar = "...",
	 .help = "what the tags cover: header (default with a key), or full\n"
		 "(the data too)",
	 .within_previous = true},
	{.name = "nic-loss", .kind = option_kind::choice, .field = &start_args::nic_loss,
	 .choices = {{{"wait", NETBLK_NIC_LOSS_WAIT}, {"stop", NETBLK_NIC_LOSS_STOP}}},
	 .metavar = "...",
	 .help = "when the NIC goes down, loses the address or lowers its\n"
		 "MTU: wait for it to come back (default), or stop",
	 .have = &instance::nic_loss},
	NETBLK_START_OPTIONS(GEN_START_ROW)
};
constexpr option_table<start_args, instance> start_options = {start_option_list,
								  "unknown option", false};
static_assert(options_well_formed(start_options));

// attach's options, in the order of the usage.
constexpr option_desc<attach_args, attached> attach_option_list[] = {
	{.name = "ro", .kind = option_kind::flag, .field = &attach_args::read_only,
	 .help = "refuse writes (an instance that serves read-only is attached so)",
	 .have = &attached::read_only},
	{.name = "dev", .kind = option_kind::name, .field = &attach_args::ifname,
	 .max = IFNAMSIZ - 1, .want = "an interface name", .metavar = "IFACE",
	 .help = "send through this network interface only", .have = &attached::ifname},
	{.name = "queue-depth", .kind = option_kind::u32, .field = &attach_args::queue_depth,
	 .min = 1, .max = NETBLK_HOST_DEPTH_LIMIT, .metavar = "N",
	 .help = "requests in flight (1..1024, default 64)", .have = &attached::queue_depth},
	{.name = "timeout", .kind = option_kind::u32, .field = &attach_args::timeout_ms, .min = 1,
	 .max = 86400, .scale = 1000,
	 .want = "whole seconds, 1..86400; leave it out to wait for the server", .metavar = "S",
	 .help = "fail I/O the server has not answered in S seconds (default:\n"
		 "wait for it, however long it is away)", .have = &attached::timeout_ms},
	{.name = "key", .kind = option_kind::key_file, .field = &attach_args::key,
	 .metavar = "FILE", .help = "tag every datagram with this key (an instance's auth=header)",
	 .new_line = true},
	NETBLK_ATTACH_OPTIONS(GEN_ATTACH_ROW)
};
constexpr option_table<attach_args, attached> attach_options = {attach_option_list,
								   "unknown attach option", true};
static_assert(options_well_formed(attach_options));

// The order in which what runs is looked at: save writes the options in it
// and --exist-ok and restore name the first that differs.  It is the order
// they always have (restore takes any); every option with a `have` is in
// it once.
constexpr const char *start_have_order[] = {
	"ro", "dev", "vlan", "mtu", "cpu", "poll", "sessions", "per-source", "nic-loss", "allow",
	NETBLK_START_OPTIONS(GEN_WORD)
};
constexpr const char *attach_have_order[] = {
	"ro", "dev", "queue-depth", "timeout",
	NETBLK_ATTACH_OPTIONS(GEN_WORD)
};

template <class Args, class Have>
constexpr bool have_order_complete(const option_table<Args, Have> &t,
				   std::span<const char *const> order)
{
	size_t with_have = 0;
	for (const option_desc<Args, Have> &o : t.options) {
		bool has = !std::holds_alternative<std::monostate>(o.have);
		size_t named = 0;
		for (const char *name : order)
			named += std::string_view(name) == o.name;
		if (named != (has ? 1u : 0u))
			return false;
		with_have += has;
	}
	return with_have == order.size();
}
static_assert(have_order_complete(start_options, start_have_order));
static_assert(have_order_complete(attach_options, attach_have_order));

// ---- the values --------------------------------------------------------

// "10.1.0.0/16" or "10.2.3.4" (a /32) of option `name`; "" when fine, else
// what is wrong.
std::string parse_prefix(const std::string &name, std::string_view text, netblk_prefix &p)
{
	std::string t(text);
	std::string addr = t.substr(0, t.find('/'));
	p = {};
	p.len = 32;
	if (addr.size() < t.size()) {
		auto len = parse_u32(std::string_view(t).substr(addr.size() + 1));
		if (!len || *len > 32)
			return "bad prefix length in " + name + "= '" + t + "' (want 0..32)";
		p.len = static_cast<uint8_t>(*len);
	}
	if (inet_pton(AF_INET, addr.c_str(), &p.addr) != 1)
		return "bad address in " + name + "= '" + t + "' (want a.b.c.d or a.b.c.d/len)";
	uint32_t mask = p.len ? htonl(~0u << (32 - p.len)) : 0;
	if (p.addr & ~mask) {
		netblk_prefix fixed = p;
		fixed.addr &= mask;
		return name + "= '" + t + "' has host bits set: did you mean " +
		       format_prefix(fixed) + "?";
	}
	return {};
}

// The prefixes separated by commas into `out` (empty before: the option is
// not given twice).
std::string parse_prefixes(const std::string &name, std::string_view list, uint32_t max,
			   std::vector<netblk_prefix> &out)
{
	if (list.empty())
		return name + "= needs a prefix (a.b.c.d/len), or several separated by commas";
	while (!list.empty()) {
		size_t comma = list.find(',');
		netblk_prefix p;
		if (std::string err = parse_prefix(name, list.substr(0, comma), p); !err.empty())
			return err;
		out.push_back(p);
		list = comma == list.npos ? std::string_view() : list.substr(comma + 1);
	}
	if (out.size() > max)
		return name + "= takes at most " + std::to_string(max) + " prefixes";
	return {};
}

// The key in the file at `path` into `out`; "" when fine, else what is
// wrong.  A file others can read is taken, with a warning.
std::string read_key_file(const std::string &name, const std::string &path,
			  std::optional<netblk_key> &out)
{
	if (path.empty())
		return name + "= needs a file (netblkctl genkey > FILE makes one)";
	FILE *f = fopen(path.c_str(), "re");
	if (!f)
		return "cannot read key file " + path + ": " + strerror(errno);
	char buf[256];
	size_t n = fread(buf, 1, sizeof(buf), f);
	struct stat st;
	bool shared = fstat(fileno(f), &st) == 0 && (st.st_mode & 0044);
	fclose(f);
	netblk_key key;
	if (std::string err = parse_key_text(std::string_view(buf, n), key); !err.empty())
		return "key file " + path + ": " + err;
	if (shared)
		fprintf(stderr, "netblkctl: warning: key file %s can be read by others "
			"(chmod 600 it)\n", path.c_str());
	out = key;
	return {};
}

// "header or full"; "a, b or c".
template <size_t N>
std::string choice_words(const std::array<option_choice, N> &choices, const char *sep_last)
{
	std::string words;
	for (size_t i = 0; i < N && choices[i].word; i++) {
		bool last = i + 1 == N || !choices[i + 1].word;
		words += (i == 0 ? "" : last ? sep_last : ", ");
		words += choices[i].word;
	}
	return words;
}

// Whether the option is in `args` already (it cannot be given twice).
template <class Args, class Have>
bool option_given(const option_desc<Args, Have> &o, const Args &args)
{
	return std::visit([&](auto field) {
		const auto &value = args.*field;
		if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>)
			return false;	// a flag: saying it twice says it
		else if constexpr (std::is_same_v<std::decay_t<decltype(value)>,
						  std::vector<netblk_prefix>>)
			return !value.empty();
		else
			return value.has_value();
	}, o.field);
}

// The value after "name=" of option `o` into `args`; "" when fine, else
// what is wrong.
template <class Args, class Have>
std::string parse_value(const option_table<Args, Have> &table, const option_desc<Args, Have> &o,
			std::string_view value, Args &args)
{
	std::string name = o.name;
	if (option_given(o, args))
		return name + "= given twice";
	switch (o.kind) {
	case option_kind::flag:
		break;
	case option_kind::name:
		if (value.empty() || (o.max && value.size() > o.max))
			return name + "= needs " + o.want +
			       (o.max ? " (at most " + std::to_string(o.max) + " characters)" : "");
		args.*std::get<std::optional<std::string> Args::*>(o.field) = std::string(value);
		break;
	case option_kind::u32: {
		std::optional<uint32_t> n = parse_u32(value);
		if (!n || *n < o.min || *n > o.max)
			return "bad " + name + (table.bad_without_equals ? "" : "=") + " '" +
			       std::string(value) + "' (want " +
			       (o.want ? o.want : std::to_string(o.min) + ".." + std::to_string(o.max)) +
			       ")";
		if (auto *f = std::get_if<std::optional<uint32_t> Args::*>(&o.field))
			args.**f = *n * o.scale;
		else
			args.*std::get<std::optional<uint16_t> Args::*>(o.field) =
				static_cast<uint16_t>(*n * o.scale);
		break;
	}
	case option_kind::choice: {
		auto &out = args.*std::get<std::optional<uint32_t> Args::*>(o.field);
		for (const option_choice &c : o.choices)
			if (c.word && value == c.word)
				out = c.value;
		if (!out)
			return "bad " + name + "= '" + std::string(value) + "' (want " +
			       choice_words(o.choices, " or ") + ")";
		break;
	}
	case option_kind::prefixes:
		return parse_prefixes(name, value, o.max,
				      args.*std::get<std::vector<netblk_prefix> Args::*>(o.field));
	case option_kind::key_file:
		return read_key_file(name, std::string(value),
				     args.*std::get<std::optional<netblk_key> Args::*>(o.field));
	}
	return {};
}

// One of the words after <port>; "" when fine, else what is wrong.
template <class Args, class Have>
std::string parse_option(const option_table<Args, Have> &table, std::string_view arg, Args &args)
{
	for (const option_desc<Args, Have> &o : table.options) {
		std::string_view name = o.name;
		if (o.kind == option_kind::flag) {
			if (arg != name)
				continue;
			args.*std::get<bool Args::*>(o.field) = true;
			return {};
		}
		if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=')
			return parse_value(table, o, arg.substr(name.size() + 1), args);
	}
	return std::string(table.unknown) + " '" + std::string(arg) + "'";
}

// ---- what runs: compared and saved -------------------------------------

// The number of option `o` in `have`.
template <class Args, class Have>
uint32_t have_number(const option_desc<Args, Have> &o, const Have &have)
{
	if (auto *f = std::get_if<uint16_t Have::*>(&o.have))
		return have.**f;
	return have.*std::get<uint32_t Have::*>(o.have);
}

template <size_t N>
const char *choice_word(const std::array<option_choice, N> &choices, uint32_t value)
{
	for (const option_choice &c : choices)
		if (c.word && c.value == value)
			return c.word;
	return "?";
}

// "10.1.0.0/16,10.2.3.4"; "any source" for none.
std::string prefixes_text(const std::vector<netblk_prefix> &prefixes)
{
	if (prefixes.empty())
		return "any source";
	std::string t;
	for (const netblk_prefix &p : prefixes)
		t += (t.empty() ? "" : ",") + format_prefix(p);
	return t;
}

// The same prefixes, in any order.
bool same_prefixes(const std::vector<netblk_prefix> &a, const std::vector<netblk_prefix> &b)
{
	if (a.size() != b.size())
		return false;
	for (const netblk_prefix &p : a) {
		bool found = false;
		for (const netblk_prefix &q : b)
			found |= p.addr == q.addr && p.len == q.len;
		if (!found)
			return false;
	}
	return true;
}

// " mtu=1200" when save writes option `o` of `have`, else "".
template <class Args, class Have>
std::string saved_option(const option_desc<Args, Have> &o, const Have &have, uint32_t nic_mtu)
{
	std::string name = o.name;
	switch (o.kind) {
	case option_kind::flag:
		return have.*std::get<bool Have::*>(o.have) ? " " + name : "";
	case option_kind::name: {
		const std::string &text = have.*std::get<std::string Have::*>(o.have);
		return text.empty() ? "" : " " + name + "=" + text;
	}
	case option_kind::u32: {
		uint32_t n = have_number(o, have);
		if (o.saved_if ? !o.saved_if(n, have, nic_mtu) : n == 0 || n == o.def)
			return {};
		return " " + name + "=" + std::to_string(n / o.scale + (n % o.scale != 0));
	}
	case option_kind::choice: {
		uint32_t v = have.*std::get<uint32_t Have::*>(o.have);
		return v == o.choices[0].value ? "" : " " + name + "=" + choice_word(o.choices, v);
	}
	case option_kind::prefixes: {
		const auto &prefixes = have.*std::get<std::vector<netblk_prefix> Have::*>(o.have);
		return prefixes.empty() ? "" : " " + name + "=" + prefixes_text(prefixes);
	}
	case option_kind::key_file:
		break;
	}
	return {};
}

template <class Args, class Have>
std::string saved_options(const option_table<Args, Have> &table,
			  std::span<const char *const> order, const Have &have, uint32_t nic_mtu)
{
	std::string words;
	for (const char *name : order)
		for (const option_desc<Args, Have> &o : table.options)
			if (std::string_view(name) == o.name && !o.not_saved)
				words += saved_option(o, have, nic_mtu);
	return words;
}

// The number option `o` (a u32) is given in `want`, as it lands there.
template <class Args, class Have>
uint32_t want_number(const option_desc<Args, Have> &o, const Args &want)
{
	if (auto *f = std::get_if<std::optional<uint16_t> Args::*>(&o.field))
		return *(want.**f);
	return *(want.*std::get<std::optional<uint32_t> Args::*>(o.field));
}

// "mtu 1500, not 9000" when option `o`, a number, a choice or a list that
// `want` names, is otherwise in `have`; else "".  Flags, names and keys are
// compared by start_differs (settings.h), in words of their own.
template <class Args, class Have>
std::string option_differs(const option_desc<Args, Have> &o, const Args &want, const Have &have)
{
	if (!option_given(o, want) || std::holds_alternative<std::monostate>(o.have))
		return {};
	std::string name = o.name;
	switch (o.kind) {
	case option_kind::u32: {
		uint32_t w = want_number(o, want), h = have_number(o, have);
		return w == h ? "" : name + " " + std::to_string(h) + ", not " + std::to_string(w);
	}
	case option_kind::choice: {
		uint32_t w = *(want.*std::get<std::optional<uint32_t> Args::*>(o.field));
		uint32_t h = have.*std::get<uint32_t Have::*>(o.have);
		return w == h ? "" : name + " " + choice_word(o.choices, h) + ", not " +
						   choice_word(o.choices, w);
	}
	case option_kind::prefixes: {
		const auto &w = want.*std::get<std::vector<netblk_prefix> Args::*>(o.field);
		const auto &h = have.*std::get<std::vector<netblk_prefix> Have::*>(o.have);
		return same_prefixes(w, h) ? "" : name + " " + prefixes_text(h) + ", not " +
							  prefixes_text(w);
	}
	case option_kind::flag:
	case option_kind::name:
	case option_kind::key_file:
		break;
	}
	return {};
}

// ---- the usage ---------------------------------------------------------

// The column the synopsis's broken lines start in ("usage: netblkctl "
// and more), and the help's: the option's name in the first, what it
// does in the second and its further lines.
constexpr size_t synopsis_indent = 23;
// A synopsis line's columns at most, its indent included: an option that
// would go past starts a line of its own (the lists' knobs come last).
constexpr size_t synopsis_width = 86;
constexpr size_t help_indent = 10;
constexpr size_t help_text_column = 21;

template <class Args, class Have>
std::string option_label(const option_desc<Args, Have> &o, bool in_help)
{
	if (o.kind == option_kind::flag)
		return o.name;
	std::string label = std::string(o.name) + "=";
	if (in_help && (o.kind == option_kind::choice || o.kind == option_kind::prefixes))
		return label + "...";
	if (o.kind == option_kind::choice)
		return label + choice_words(o.choices, "|");
	return label + o.metavar;
}

// The option in the synopsis: " [dev=IFACE]", on a new line when it says so
// or the line is full, or inside the previous option's brackets when it says so.
template <class Args, class Have>
void add_synopsis(const option_desc<Args, Have> &o, std::string &synopsis)
{
	std::string item = "[" + option_label(o, false) + "]";
	size_t line_start = synopsis.rfind('\n');
	size_t line = synopsis.size() - (line_start == std::string::npos ? 0 : line_start + 1);

	if (o.within_previous)
		synopsis.insert(synopsis.size() - 1, " " + item);
	else if (o.new_line || line + 1 + item.size() > synopsis_width)
		synopsis += "\n" + std::string(synopsis_indent, ' ') + item;
	else
		synopsis += " " + item;
}

// The option's lines in the help: its label, then what it does, a line of
// it each line of the help text.
template <class Args, class Have>
void add_help(const option_desc<Args, Have> &o, std::string &help)
{
	std::string label = option_label(o, true);
	size_t width = help_text_column - help_indent;
	help += std::string(help_indent, ' ') + label +
		(label.size() < width ? std::string(width - label.size(), ' ') : "  ");
	std::string_view text = o.help;
	for (size_t nl; (nl = text.find('\n')) != text.npos; text.remove_prefix(nl + 1))
		help += std::string(text.substr(0, nl)) + "\n" + std::string(help_text_column, ' ');
	help += std::string(text) + "\n";
}

template <class Args, class Have>
option_usage usage_of(const option_table<Args, Have> &table)
{
	option_usage u;
	for (const option_desc<Args, Have> &o : table.options) {
		add_synopsis(o, u.synopsis);
		add_help(o, u.help);
	}
	return u;
}

// The options' words as the bash completion offers them: a flag's word,
// "name=" for one that takes a value, in the order of the usage.
template <class Args, class Have>
std::string words_of(const option_table<Args, Have> &table)
{
	std::string words;
	for (const option_desc<Args, Have> &o : table.options)
		words += (words.empty() ? "" : " ") + std::string(o.name) +
			 (o.kind == option_kind::flag ? "" : "=");
	return words;
}

// start's word after its options, which is no request's option.
constexpr char exist_ok_word[] = "--exist-ok";

} // namespace

option_usage start_option_usage()
{
	return usage_of(start_options);
}

option_usage attach_option_usage()
{
	return usage_of(attach_options);
}

std::string start_option_words()
{
	return words_of(start_options) + " " + exist_ok_word;
}

std::string attach_option_words()
{
	return words_of(attach_options);
}

std::string format_start_options(const netblk_instance &inst, uint32_t nic_mtu)
{
	return saved_options(start_options, start_have_order, inst, nic_mtu);
}

std::string format_attach_options(const netblk_attached &att)
{
	return saved_options(attach_options, attach_have_order, att, 0);
}

std::string start_options_differ(const netblk_start_args &want, const netblk_instance &have)
{
	for (std::string_view name : start_have_order)
		for (const auto &o : start_options.options)
			if (name == o.name)
				if (std::string d = option_differs(o, want, have); !d.empty())
					return d;
	return {};
}

std::string parse_start_argv(const std::vector<std::string_view> &argv, netblk_start_args &args,
			     bool &exist_ok)
{
	if (argv.size() < 2)
		return "start needs <blockdev> <port>";
	args.device = argv[0];
	if (args.device.empty())
		return "empty <blockdev>";
	auto port = parse_port(argv[1]);
	if (!port)
		return "bad port '" + std::string(argv[1]) + "' (want 1..65535)";
	args.port = *port;
	exist_ok = false;
	for (size_t i = 2; i < argv.size(); i++) {
		if (argv[i] == exist_ok_word) {
			exist_ok = true;
			continue;
		}
		if (std::string err = parse_option(start_options, argv[i], args); !err.empty())
			return err;
	}
	return {};
}

std::string parse_attach_argv(const std::vector<std::string_view> &argv, netblk_attach_args &args)
{
	if (argv.size() < 2)
		return "attach needs <addr> <port>";
	std::string addr(argv[0]);
	in_addr a;
	if (inet_pton(AF_INET, addr.c_str(), &a) != 1)
		return "bad address '" + addr + "' (want an IPv4 address, a.b.c.d)";
	args.addr = a.s_addr;
	auto port = parse_port(argv[1]);
	if (!port)
		return "bad port '" + std::string(argv[1]) + "' (want 1..65535)";
	args.port = *port;
	for (size_t i = 2; i < argv.size(); i++)
		if (std::string err = parse_option(attach_options, argv[i], args); !err.empty())
			return err;
	return {};
}
