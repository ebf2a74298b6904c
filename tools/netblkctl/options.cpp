// start's and attach's options: see options.h.
#include "options.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <net/if.h>
#include <sys/stat.h>

#include "cli.h"
#include "key_text.h"

namespace {

// "mtu=1500" -> 1500 into `out`; "" when fine, else what is wrong.
std::string parse_u32_option(std::string_view arg, std::string_view name,
			     std::optional<uint32_t> &out)
{
	std::string opt = std::string(name) + "=";
	if (out)
		return opt + " given twice";
	out = parse_u32(arg.substr(opt.size()));
	if (!out)
		return "bad " + opt + " '" + std::string(arg.substr(opt.size())) +
		       "' (want 0..4294967295)";
	return {};
}

// "10.1.0.0/16" or "10.2.3.4" (a /32); "" when fine, else what is wrong.
std::string parse_prefix(std::string_view text, netblk_prefix &p)
{
	std::string t(text);
	std::string addr = t.substr(0, t.find('/'));
	p = {};
	p.len = 32;
	if (addr.size() < t.size()) {
		auto len = parse_u32(std::string_view(t).substr(addr.size() + 1));
		if (!len || *len > 32)
			return "bad prefix length in allow= '" + t + "' (want 0..32)";
		p.len = static_cast<uint8_t>(*len);
	}
	if (inet_pton(AF_INET, addr.c_str(), &p.addr) != 1)
		return "bad address in allow= '" + t + "' (want a.b.c.d or a.b.c.d/len)";
	uint32_t mask = p.len ? htonl(~0u << (32 - p.len)) : 0;
	if (p.addr & ~mask) {
		netblk_prefix fixed = p;
		fixed.addr &= mask;
		return "allow= '" + t + "' has host bits set: did you mean " +
		       format_prefix(fixed) + "?";
	}
	return {};
}

std::string parse_allow(std::string_view list, std::vector<netblk_prefix> &out)
{
	if (!out.empty())
		return "allow= given twice";
	if (list.empty())
		return "allow= needs a prefix (a.b.c.d/len), or several separated by commas";
	while (!list.empty()) {
		size_t comma = list.find(',');
		netblk_prefix p;
		if (std::string err = parse_prefix(list.substr(0, comma), p); !err.empty())
			return err;
		out.push_back(p);
		list = comma == list.npos ? std::string_view() : list.substr(comma + 1);
	}
	if (out.size() > NETBLK_ALLOW_MAX)
		return "allow= takes at most " + std::to_string(NETBLK_ALLOW_MAX) + " prefixes";
	return {};
}

// key=FILE: the key from the file into `out`; "" when fine, else what is wrong.
std::string read_key_file(std::string_view path_text,
			  std::optional<std::array<uint8_t, NETBLK_KEY_BYTES>> &out)
{
	std::string path(path_text);
	if (out)
		return "key= given twice";
	if (path.empty())
		return "key= needs a file (netblkctl genkey > FILE makes one)";
	FILE *f = fopen(path.c_str(), "re");
	if (!f)
		return "cannot read key file " + path + ": " + strerror(errno);
	char buf[256];
	size_t n = fread(buf, 1, sizeof(buf), f);
	struct stat st;
	bool shared = fstat(fileno(f), &st) == 0 && (st.st_mode & 0044);
	fclose(f);
	std::array<uint8_t, NETBLK_KEY_BYTES> key;
	if (std::string err = parse_key_text(std::string_view(buf, n), key); !err.empty())
		return "key file " + path + ": " + err;
	if (shared)
		fprintf(stderr, "netblkctl: warning: key file %s can be read by others "
			"(chmod 600 it)\n", path.c_str());
	out = key;
	return {};
}

// name=a or name=b (one of two words) into `out`; "" when fine, else what
// is wrong.
std::string parse_choice(std::string_view arg, const char *name, const char *a, uint32_t a_value,
			 const char *b, uint32_t b_value, std::optional<uint32_t> &out)
{
	std::string_view word = arg.substr(strlen(name) + 1);
	if (out)
		return std::string(name) + "= given twice";
	if (word == a)
		out = a_value;
	else if (word == b)
		out = b_value;
	else
		return "bad " + std::string(name) + "= '" + std::string(word) + "' (want " + a +
		       " or " + b + ")";
	return {};
}

std::string parse_start_option(std::string_view arg, netblk_start_args &args)
{
	if (arg == "ro") {
		args.read_only = true;
		return {};
	}
	if (arg.starts_with("dev=")) {
		if (args.ifname)
			return "dev= given twice";
		if (arg.size() == 4)
			return "dev= needs an interface name";
		args.ifname = std::string(arg.substr(4));
		return {};
	}
	if (arg.starts_with("mtu="))
		return parse_u32_option(arg, "mtu", args.mtu);
	if (arg.starts_with("cpu="))
		return parse_u32_option(arg, "cpu", args.cpu);
	if (arg.starts_with("poll="))
		return parse_u32_option(arg, "poll", args.poll_us);
	if (arg.starts_with("vlan=")) {
		std::optional<uint32_t> vlan;
		if (args.vlan)
			return "vlan= given twice";
		if (std::string err = parse_u32_option(arg, "vlan", vlan); !err.empty())
			return err;
		if (*vlan < 1 || *vlan > 4094)
			return "bad vlan= '" + std::to_string(*vlan) + "' (want 1..4094)";
		args.vlan = static_cast<uint16_t>(*vlan);
		return {};
	}
	if (arg.starts_with("allow="))
		return parse_allow(arg.substr(6), args.allow);
	if (arg.starts_with("sessions=")) {
		if (std::string err = parse_u32_option(arg, "sessions", args.sessions); !err.empty())
			return err;
		if (*args.sessions < 1 || *args.sessions > NETBLK_SESSIONS_LIMIT)
			return "bad sessions= '" + std::to_string(*args.sessions) + "' (want 1..65536)";
		return {};
	}
	if (arg.starts_with("per-source=")) {
		if (std::string err = parse_u32_option(arg, "per-source", args.per_source); !err.empty())
			return err;
		if (*args.per_source < 1 || *args.per_source > NETBLK_SESSIONS_LIMIT)
			return "bad per-source= '" + std::to_string(*args.per_source) +
			       "' (want 1..65536, at most sessions=)";
		return {};
	}
	if (arg.starts_with("key="))
		return read_key_file(arg.substr(4), args.key);
	if (arg.starts_with("nic-loss="))
		return parse_choice(arg, "nic-loss", "wait", NETBLK_NIC_LOSS_WAIT, "stop",
				    NETBLK_NIC_LOSS_STOP, args.nic_loss);
	if (arg.starts_with("auth="))
		return parse_choice(arg, "auth", "header", NETBLK_AUTH_HEADER, "full",
				    NETBLK_AUTH_FULL, args.auth);
	return "unknown option '" + std::string(arg) + "'";
}

// One of attach's trailing options; "" when fine, else what is wrong.
std::string parse_attach_option(std::string_view arg, netblk_attach_args &args)
{
	if (arg == "ro") {
		args.read_only = true;
		return {};
	}
	if (arg.starts_with("dev=")) {
		if (args.ifname)
			return "dev= given twice";
		if (arg.size() == 4 || arg.size() - 4 >= IFNAMSIZ)
			return "dev= needs an interface name (at most 15 characters)";
		args.ifname = std::string(arg.substr(4));
		return {};
	}
	if (arg.starts_with("queue-depth=")) {
		auto v = parse_u32(arg.substr(12));
		if (!v || *v < 1 || *v > NETBLK_HOST_DEPTH_LIMIT)
			return "bad queue-depth '" + std::string(arg.substr(12)) + "' (want 1..1024)";
		args.queue_depth = *v;
		return {};
	}
	if (arg.starts_with("timeout=")) {
		auto v = parse_u32(arg.substr(8));
		if (!v || *v < 1 || *v > 86400)
			return "bad timeout '" + std::string(arg.substr(8)) +
			       "' (want whole seconds, 1..86400; leave it out to wait for the server)";
		args.timeout_ms = *v * 1000;
		return {};
	}
	if (arg.starts_with("key="))
		return read_key_file(arg.substr(4), args.key);
	return "unknown attach option '" + std::string(arg) + "'";
}

} // namespace

// start's words after the command; "" when fine, else what is wrong.
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
		if (argv[i] == "--exist-ok") {
			exist_ok = true;
			continue;
		}
		if (std::string err = parse_start_option(argv[i], args); !err.empty())
			return err;
	}
	return {};
}

// attach's words after the command; "" when fine, else what is wrong.
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
		if (std::string err = parse_attach_option(argv[i], args); !err.empty())
			return err;
	return {};
}

