// netblkctl: start, stop and list the instances of netblk.ko.
//
// Exit status: 0 done, 1 the kernel refused (or is unreachable), 2 bad usage.
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <net/if.h>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "netblk.h"
#include "xdp.h"

namespace {

constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

constexpr const char usage_text[] =
	"usage: netblkctl start <blockdev> <port> [ro] [dev=IFACE] [mtu=N] [cpu=N] [poll=US]\n"
	"       netblkctl list [--json]\n"
	"       netblkctl stop <port>|all\n"
	"       netblkctl --help\n"
	"\n"
	"start   serve <blockdev> over UDP on <port>\n"
	"          ro         refuse writes\n"
	"          dev=IFACE  the NIC to serve on (default: the default route's)\n"
	"          mtu=N      the MTU to size datagrams for\n"
	"          cpu=N      the CPU of the instance's worker\n"
	"          poll=US    the worker's poll time, in microseconds\n"
	"list    the instances and their counters (--json: as a JSON array)\n"
	"stop    stop serving on <port>, or stop every instance\n";

int usage_error(const std::string &msg)
{
	fprintf(stderr, "netblkctl: %s\nTry 'netblkctl --help'.\n", msg.c_str());
	return exit_usage;
}

int failed(const nl_status &st)
{
	std::string text = st.text();
	if (st.err == EPERM && st.msg.empty())
		text += " (needs CAP_NET_ADMIN: run as root)";
	fprintf(stderr, "netblkctl: %s\n", text.c_str());
	return exit_failed;
}

// Flushes stdout; a failed write (full disk, closed pipe) is a failure.
int finish()
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("netblkctl: writing the output");
		return exit_failed;
	}
	return 0;
}

std::optional<uint32_t> parse_u32(std::string_view s)
{
	uint32_t v;
	const char *end = s.data() + s.size();
	auto [p, ec] = std::from_chars(s.data(), end, v);
	if (s.empty() || ec != std::errc() || p != end)
		return std::nullopt;
	return v;
}

std::optional<uint16_t> parse_port(std::string_view s)
{
	auto v = parse_u32(s);
	if (!v || *v < 1 || *v > 65535)
		return std::nullopt;
	return static_cast<uint16_t>(*v);
}

// Connects; says so when the module is not loaded.
bool connect(netblk_client &client, int &rc)
{
	nl_status st = client.connect();
	if (st.ok())
		return true;
	if (st.err == ENOENT) {
		fprintf(stderr, "netblkctl: the netblk module is not loaded (modprobe netblk)\n");
		rc = exit_failed;
	} else {
		rc = failed(st);
	}
	return false;
}

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

// One of start's trailing options; "" when fine, else what is wrong.
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
	return "unknown option '" + std::string(arg) + "'";
}

// Undoes a START whose instance cannot be reached (best effort: says so
// when even that fails).
void stop_after_failure(netblk_client &client, uint16_t port)
{
	uint32_t stopped;
	if (nl_status st = client.stop(port, stopped); !st.ok())
		fprintf(stderr, "netblkctl: stopping port %u again failed too: %s\n", port,
			st.text().c_str());
}

// dev=IFACE, or the default route's NIC; false (with the message printed)
// when there is none.
bool resolve_nic(netblk_start_args &args)
{
	if (args.ifname)
		return true;
	args.ifname = default_route_ifname();
	if (args.ifname)
		return true;
	fprintf(stderr, "netblkctl: no default route: name the NIC with dev=IFACE\n");
	return false;
}

int cmd_start(const std::vector<std::string_view> &argv)
{
	if (argv.size() < 2)
		return usage_error("start needs <blockdev> <port>");
	netblk_start_args args;
	args.device = argv[0];
	if (args.device.empty())
		return usage_error("empty <blockdev>");
	auto port = parse_port(argv[1]);
	if (!port)
		return usage_error("bad port '" + std::string(argv[1]) + "' (want 1..65535)");
	args.port = *port;
	for (size_t i = 2; i < argv.size(); i++)
		if (std::string err = parse_start_option(argv[i], args); !err.empty())
			return usage_error(err);

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (!resolve_nic(args))
		return exit_failed;

	// The NIC's XDP program steers the port to the instance.  For a NIC
	// that does not exist, or without CAP_NET_ADMIN, START goes ahead
	// unprepared: the kernel's refusal says what is wrong.  `xdp` closes
	// its fds at return, so a link the module did not take detaches.
	xdp_quiet_libbpf();
	nic_xdp xdp;
	unsigned ifindex = if_nametoindex(args.ifname->c_str());
	bool privileged = may_admin_net();
	if (ifindex && privileged) {
		if (std::string err = xdp.prepare(*args.ifname, ifindex); !err.empty()) {
			fprintf(stderr, "netblkctl: %s\n", err.c_str());
			return exit_failed;
		}
		args.xdp_link_fd = xdp.link_fd();
	}

	netblk_instance inst;
	bool described;
	if (nl_status st = client.start(args, inst, described); !st.ok())
		return failed(st);
	if (!ifindex || !privileged) {	// the kernel should have refused
		stop_after_failure(client, args.port);
		if (!ifindex)
			fprintf(stderr, "netblkctl: no network interface %s\n", args.ifname->c_str());
		else
			fprintf(stderr, "netblkctl: starting needs CAP_NET_ADMIN: run as root\n");
		return exit_failed;
	}
	if (!described || !inst.handoff_ifindex) {
		stop_after_failure(client, args.port);
		fprintf(stderr, "netblkctl: the module did not say which device takes port %u's "
			"datagrams (does netblkctl match the module?)\n", args.port);
		return exit_failed;
	}
	if (int err = xdp.steer(args.port, inst.handoff_ifindex)) {
		stop_after_failure(client, args.port);
		fprintf(stderr, "netblkctl: cannot steer port %u to the instance: %s\n", args.port,
			strerror(err));
		return exit_failed;
	}
	printf("%s\n", format_started(inst).c_str());
	return finish();
}

int cmd_stop(const std::vector<std::string_view> &argv)
{
	if (argv.size() != 1)
		return usage_error("stop needs one <port>, or all");
	std::optional<uint16_t> port;
	if (argv[0] != "all") {
		port = parse_port(argv[0]);
		if (!port)
			return usage_error("bad port '" + std::string(argv[0]) +
					   "' (want 1..65535, or all)");
	}

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	uint32_t stopped;
	if (nl_status st = client.stop(port, stopped); !st.ok())
		return failed(st);
	if (port)
		printf("netblk: stopped serving on port %u\n", *port);
	else
		printf("netblk: stopped %u instance(s)\n", stopped);
	return finish();
}

void print_list(const std::vector<netblk_instance> &insts, bool json)
{
	if (json) {
		fputs(format_instances_json(insts).c_str(), stdout);
		return;
	}
	if (insts.empty()) {
		puts("netblk: no instances");
		return;
	}
	for (const auto &inst : insts)
		fputs(format_instance_text(inst).c_str(), stdout);
}

int cmd_list(const std::vector<std::string_view> &argv)
{
	bool json = false;
	for (auto arg : argv) {
		if (arg != "--json")
			return usage_error("unknown list option '" + std::string(arg) + "'");
		json = true;
	}

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	std::vector<netblk_instance> insts;
	if (nl_status st = client.list(insts); !st.ok())
		return failed(st);
	print_list(insts, json);
	return finish();
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return exit_usage;
	}
	std::string_view cmd = argv[1];
	std::vector<std::string_view> args(argv + 2, argv + argc);
	if (cmd == "--help" || cmd == "-h" || cmd == "help") {
		fputs(usage_text, stdout);
		return finish();
	}
	if (cmd == "start")
		return cmd_start(args);
	if (cmd == "stop")
		return cmd_stop(args);
	if (cmd == "list")
		return cmd_list(args);
	return usage_error("unknown command '" + std::string(cmd) + "'");
}
