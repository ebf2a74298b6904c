// netblkctl: start, stop, list and watch the instances of netblk.ko.
//
// Exit status: 0 done, 1 the kernel refused (or is unreachable), 2 bad usage.
#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <linux/capability.h>
#include <linux/if_vlan.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "format.h"
#include "netblk.h"
#include "config.h"
#include "prometheus.h"
#include "exporter.h"
#include "settings.h"
#include "watch.h"
#include "xdp.h"

namespace {

constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

constexpr const char usage_text[] =
	"usage: netblkctl start <blockdev> <port> [ro] [dev=IFACE] [mtu=N] [cpu=N] [poll=US]\n"
	"                       [vlan=N] [allow=PREFIX[,PREFIX...]] [sessions=N] [per-source=N]\n"
	"                       [key=FILE [auth=header|full]] [nic-loss=wait|stop]\n"
	"                       [--exist-ok]\n"
	"       netblkctl list [--attached] [--json]\n"
	"       netblkctl watch [--interval S] [--count N] [--json]\n"
	"       netblkctl stats --prometheus\n"
	"       netblkctl exporter --listen ADDR:PORT\n"
	"       netblkctl supervise\n"
	"       netblkctl stop <port>|all [--exist-ok]\n"
	"       netblkctl attach <addr> <port> [ro] [dev=IFACE] [queue-depth=N] [timeout=S]\n"
	"                       [key=FILE]\n"
	"       netblkctl detach <netblkN>|all [--force]\n"
	"       netblkctl save [FILE]\n"
	"       netblkctl restore [FILE]\n"
	"       netblkctl genkey\n"
	"       netblkctl --help | --version\n"
	"\n"
	"start   serve <blockdev> over UDP on <port>\n"
	"          ro         refuse writes\n"
	"          dev=IFACE  the NIC to serve on (default: the default route's)\n"
	"          mtu=N      the MTU to size datagrams for\n"
	"          cpu=N      the CPU of the instance's worker\n"
	"          poll=US    the worker's poll time, in microseconds\n"
	"          vlan=N     serve 802.1Q VLAN N of the NIC (the address of its VLAN device)\n"
	"          allow=...  answer only these sources (10.1.0.0/16,10.2.3.4), filtered\n"
	"                     by the NIC's XDP program before anything else sees them\n"
	"          sessions=N the clients' sessions it holds at once (default 1024)\n"
	"          per-source=N  of those, one source address may hold (default 16):\n"
	"                     raise it for clients behind one NAT address\n"
	"          key=FILE   answer only datagrams tagged with this key (32 hex digits)\n"
	"          auth=...   what the tags cover: header (default with a key), or full\n"
	"                     (the data too)\n"
	"          nic-loss=...  when the NIC goes down, loses the address or lowers its\n"
	"                     MTU: wait for it to come back (default), or stop\n"
	"          --exist-ok an instance on <port> with the settings given is success\n"
	"list    the instances, their counters and service time, then the devices attached\n"
	"        here (--json: the instances as a JSON array; --attached: the attached\n"
	"        devices only, --json as a JSON array)\n"
	"watch   every S seconds (default 1) each instance's and attached device's rates\n"
	"        over the last interval, and the module's events as they come, until\n"
	"        SIGINT or SIGTERM or N intervals (--json: one JSON object a line)\n"
	"stats   the counters and the service-time histogram in the Prometheus\n"
	"        text format (node_exporter's textfile collector)\n"
	"exporter  serve the same at http://ADDR:PORT/metrics for a Prometheus\n"
	"        scraper, until SIGINT or SIGTERM (0.0.0.0:PORT: every address)\n"
	"supervise  add netblk's XDP program again to a NIC whose driver dropped it\n"
	"        when the NIC reopened (vmxnet3), so that its waiting instances serve\n"
	"        again, until SIGINT or SIGTERM (netblk-supervise.service runs it)\n"
	"stop    stop serving on <port>, or stop every instance; waits a few seconds for\n"
	"        the disk to finish what it has (list shows an instance that takes longer);\n"
	"        --exist-ok: nothing on <port> is success\n"
	"attach  make /dev/netblkN of the instance at <addr>:<port> (the block-device client)\n"
	"          ro         refuse writes (an instance that serves read-only is attached so)\n"
	"          dev=IFACE  send through this network interface only\n"
	"          queue-depth=N  requests in flight (1..1024, default 64)\n"
	"          timeout=S  fail I/O the server has not answered in S seconds (default:\n"
	"                     wait for it, however long it is away)\n"
	"          key=FILE   tag every datagram with this key (an instance's auth=header)\n"
	"detach  remove /dev/netblkN, or all of them; refused while one is open (mounted)\n"
	"        unless --force, which fails its outstanding I/O\n"
	"save    write the instances and attached devices as they run now to FILE\n"
	"        (default " NETBLK_CONFIG_FILE "), one start or attach line each\n"
	"restore make what runs match FILE: start or attach what is missing, leave\n"
	"        alone what matches, start again what differs, stop or detach the rest\n"
	"genkey  print a new random key for key= (keep it where only root can read it)\n"
	"--version  netblkctl's release and the loaded module's\n";

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

// Whether netblk.ko is loaded; looked at before the family's lookup, which
// would have the kernel load it.
bool module_loaded()
{
	struct stat st;
	return stat("/sys/module/netblk", &st) == 0;
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

// One of start's trailing options; "" when fine, else what is wrong.
// key=FILE: the key from the file; "" when fine, else what is wrong.
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

// A new key for key=, from the kernel's random numbers.
int cmd_genkey(const std::vector<std::string_view> &argv)
{
	if (!argv.empty())
		return usage_error("genkey takes no arguments");
	uint8_t key[NETBLK_KEY_BYTES];
	if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
		fprintf(stderr, "netblkctl: getrandom: %s\n", strerror(errno));
		return exit_failed;
	}
	for (uint8_t b : key)
		printf("%02x", b);
	printf("\n");
	return 0;
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

// Undoes a START whose instance cannot be reached (best effort: says so
// when even that fails).
// netblk's XDP program off every NIC no instance serves or waits on any
// more (xdp.h): after a stop, and after a start that failed.  Nothing is
// removed when the instances cannot be listed.
void release_unused_programs(netblk_client &client)
{
	std::vector<netblk_instance> insts;
	if (!client.list(insts).ok())
		return;
	std::vector<uint32_t> in_use;
	for (const netblk_instance &inst : insts)
		if (!inst.stopping())
			in_use.push_back(inst.ifindex);
	for (const std::string &err : xdp_release_unused(in_use))
		fprintf(stderr, "netblkctl: warning: %s\n", err.c_str());
}

void stop_after_failure(netblk_client &client, uint16_t port)
{
	netblk_stop_result result;
	if (nl_status st = client.stop(port, result); !st.ok())
		fprintf(stderr, "netblkctl: stopping port %u again failed too: %s\n", port,
			st.text().c_str());
	release_unused_programs(client);
}

// The device under a VLAN device (dev=eth0.5 serves VLAN 5 of eth0): where
// the XDP program goes.  `ifname` itself when it is no VLAN device.
std::string vlan_real_device(const std::string &ifname)
{
	vlan_ioctl_args req{};
	req.cmd = GET_VLAN_REALDEV_NAME_CMD;
	if (ifname.size() >= sizeof(req.device1))
		return ifname;
	memcpy(req.device1, ifname.c_str(), ifname.size() + 1);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ifname;
	bool is_vlan = ioctl(fd, SIOCGIFVLAN, &req) == 0;
	close(fd);
	return is_vlan ? std::string(req.u.device2, strnlen(req.u.device2, sizeof(req.u.device2)))
		       : ifname;
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

xdp_steer_spec steer_spec(const netblk_instance &inst)
{
	xdp_steer_spec s;
	s.port = inst.port;
	s.handoff_ifindex = inst.handoff_ifindex;
	s.addr = inst.addr;
	s.vlan = inst.vlan;
	s.allow = inst.allow;
	return s;
}

// The instances on NIC `ifindex` but port `skip`, steered again through
// `xdp`: idempotent, and it matters when the program was added anew.  The
// ports steered, as "7000, 7001".
std::string steer_nic_again(nic_xdp &xdp, const std::vector<netblk_instance> &insts,
			    uint32_t ifindex, std::optional<uint16_t> skip = std::nullopt)
{
	std::string ports;
	for (const netblk_instance &i : insts) {
		if (i.ifindex != ifindex || i.port == skip || i.stopping() || !i.handoff_ifindex)
			continue;
		if (int err = xdp.steer(steer_spec(i))) {
			fprintf(stderr, "netblkctl: cannot steer port %u again: %s\n", i.port,
				strerror(err));
			continue;
		}
		ports += (ports.empty() ? "" : ", ") + std::to_string(i.port);
	}
	return ports;
}

// The NIC's other instances, steered again (someone took off the program
// their ports were steered by: bpftool net detach, xdp-loader unload --all,
// or start replaced it).
void resteer_nic(netblk_client &client, nic_xdp &xdp, const netblk_instance &started)
{
	std::vector<netblk_instance> insts;
	if (client.list(insts).ok())
		steer_nic_again(xdp, insts, started.ifindex, started.port);
}

// The NICs whose driver dropped netblk's XDP program when they reopened
// (vmxnet3: the kernel still shows it attached, the NIC runs nothing): each
// gets a new program, every instance on it is steered again, and the module
// is told, which has them serve again.  Says what it did; a NIC that could
// not be mended is tried again on the next call.
void readd_dropped_programs(netblk_client &client, const std::vector<netblk_instance> &insts)
{
	std::vector<uint32_t> done;
	for (const netblk_instance &inst : insts) {
		if (!inst.xdp_dropped || inst.stopping() ||
		    std::find(done.begin(), done.end(), inst.ifindex) != done.end())
			continue;
		done.push_back(inst.ifindex);
		nic_xdp xdp;
		if (std::string err = xdp.renew(inst.ifname, inst.ifindex); !err.empty()) {
			fprintf(stderr, "netblkctl: %s\n", err.c_str());
			continue;
		}
		std::string ports = steer_nic_again(xdp, insts, inst.ifindex);
		if (nl_status st = client.xdp_ready(inst.ifindex, inst.xdp_dropped); !st.ok()) {
			fprintf(stderr, "netblkctl: %s: %s\n", inst.ifname.c_str(), st.text().c_str());
			continue;
		}
		printf("netblk: %s: added netblk's XDP program again (%s dropped it when %s "
		       "reopened); ports %s serve again\n", inst.ifname.c_str(), inst.driver.c_str(),
		       inst.ifname.c_str(), ports.c_str());
		fflush(stdout);
	}
}

// start --exist-ok: the exit status when an instance already holds the
// port (success when it is the one asked for), nullopt when none does.
std::optional<int> start_existing(netblk_client &client, const netblk_start_args &args)
{
	std::vector<netblk_instance> insts;
	if (nl_status st = client.list(insts); !st.ok())
		return failed(st);
	for (const netblk_instance &have : insts) {
		if (have.port != args.port)
			continue;
		std::string diff = start_differs(args, vlan_real_device(*args.ifname), have);
		if (!diff.empty()) {
			fprintf(stderr, "netblkctl: port %u is already served by an instance that "
				"differs from the one asked for: %s (stop it first)\n", args.port,
				diff.c_str());
			return exit_failed;
		}
		printf("netblk: port %u already serves %s as asked (--exist-ok)\n", args.port,
		       have.device.c_str());
		return finish();
	}
	return std::nullopt;
}

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

int cmd_start(const std::vector<std::string_view> &argv)
{
	netblk_start_args args;
	bool exist_ok = false;
	if (std::string err = parse_start_argv(argv, args, exist_ok); !err.empty())
		return usage_error(err);

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (!resolve_nic(args))
		return exit_failed;
	if (exist_ok) {
		if (std::optional<int> done = start_existing(client, args))
			return *done;
	}

	// The NIC's XDP program steers the port to the instance.  For a NIC
	// that does not exist, or without CAP_SYS_ADMIN and CAP_NET_ADMIN,
	// START goes ahead unprepared: the kernel's refusal says what is
	// wrong.  A program added for an instance that then fails to start is
	// removed by its stop.
	xdp_quiet_libbpf();
	bool privileged = has_capability(CAP_SYS_ADMIN) && has_capability(CAP_NET_ADMIN);
	// A program no instance is on any more (its instances stopped by
	// themselves, or rmmod) goes first, so that this start adds one anew:
	// a NIC that dropped it on a reopen (vmxnet3) runs the new one.
	if (privileged)
		release_unused_programs(client);
	nic_xdp xdp;
	std::string xdp_nic = vlan_real_device(*args.ifname);
	unsigned ifindex = if_nametoindex(xdp_nic.c_str());
	if (ifindex && privileged) {
		if (std::string err = xdp.prepare(xdp_nic, ifindex); !err.empty()) {
			fprintf(stderr, "netblkctl: %s\n", err.c_str());
			return exit_failed;
		}
		if (!xdp.replaced().empty())
			printf("netblk: %s\n", xdp.replaced().c_str());
	}

	netblk_instance inst;
	bool described;
	if (nl_status st = client.start(args, inst, described); !st.ok()) {
		int rc = failed(st);
		release_unused_programs(client);	// one prepare() added for it
		return rc;
	}
	if (!ifindex || !privileged) {	// the kernel should have refused
		stop_after_failure(client, args.port);
		if (!ifindex)
			fprintf(stderr, "netblkctl: no network interface %s\n", args.ifname->c_str());
		else
			fprintf(stderr, "netblkctl: starting needs CAP_SYS_ADMIN and CAP_NET_ADMIN: "
				"run as root\n");
		return exit_failed;
	}
	if (!described || !inst.handoff_ifindex) {
		stop_after_failure(client, args.port);
		fprintf(stderr, "netblkctl: the module did not say which device takes port %u's "
			"datagrams (does netblkctl match the module?)\n", args.port);
		return exit_failed;
	}
	if (int err = xdp.steer(steer_spec(inst))) {
		stop_after_failure(client, args.port);
		fprintf(stderr, "netblkctl: cannot steer port %u to the instance: %s\n", args.port,
			strerror(err));
		return exit_failed;
	}
	resteer_nic(client, xdp, inst);
	printf("%s\n", format_started(inst).c_str());
	return finish();
}

int cmd_stop(const std::vector<std::string_view> &argv)
{
	bool exist_ok = argv.size() == 2 && argv[1] == "--exist-ok";
	if (argv.size() != 1 && !exist_ok)
		return usage_error("stop needs one <port>, or all (and --exist-ok)");
	std::optional<uint16_t> port;
	if (argv[0] != "all") {
		port = parse_port(argv[0]);
		if (!port)
			return usage_error("bad port '" + std::string(argv[0]) +
					   "' (want 1..65535, or all)");
	}

	// No module, no instance: what rmmod left on the NICs goes.
	if (exist_ok && !module_loaded()) {
		for (const std::string &err : xdp_release_unused({}))
			fprintf(stderr, "netblkctl: warning: %s\n", err.c_str());
		printf("netblk: the module is not loaded: nothing serves (--exist-ok)\n");
		return finish();
	}
	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	netblk_stop_result r;
	nl_status st = client.stop(port, r);
	if (st.err != EPERM)	// refused to the caller: nothing for it to take off
		release_unused_programs(client);
	if (!st.ok()) {
		if (exist_ok && port && st.err == ENOENT) {
			printf("netblk: nothing serves port %u (--exist-ok)\n", *port);
			return finish();
		}
		return failed(st);
	}
	if (port && !r.stopping)
		printf("netblk: stopped serving on port %u\n", *port);
	else if (!port)
		printf("netblk: stopped %u instance(s)\n", r.stopped);
	if (r.stopping) {
		// It no longer serves; what it holds (the device claim, the port)
		// goes when its disk answers.  Not done: a failure.
		std::string who = port ? "port " + std::to_string(*port) +
						 " no longer serves but still waits"
				       : std::to_string(r.stopping) +
						 " instance(s) no longer serve but still wait";
		fprintf(stderr, "netblkctl: %s for the disk to finish what it was given; "
			"'netblkctl list' shows it stopping, and it is released when the disk "
			"answers\n", who.c_str());
		finish();
		return exit_failed;
	}
	return finish();
}

void print_list(const std::vector<netblk_instance> &insts,
		const std::vector<netblk_attached> &atts, bool json)
{
	if (json) {
		fputs(format_instances_json(insts).c_str(), stdout);
		return;
	}
	if (insts.empty() && atts.empty()) {
		puts("netblk: no instances");
		return;
	}
	for (const auto &inst : insts)
		fputs(format_instance_text(inst).c_str(), stdout);
	for (const auto &att : atts)
		fputs(format_attached_text(att).c_str(), stdout);
}

// The allowlist's drops happen in the XDP program, before the module: read
// from its map for the instances that have an allowlist.
void read_not_allowed(std::vector<netblk_instance> &insts)
{
	for (netblk_instance &inst : insts)
		if (!inst.allow.empty())
			inst.not_allowed = xdp_not_allowed(inst.ifindex, inst.port);
}

// Every instance, as LIST dumps them; 0, or the exit status of the failure
// (already reported).
int dump_instances(std::vector<netblk_instance> &insts)
{
	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (nl_status st = client.list(insts); !st.ok())
		return failed(st);
	read_not_allowed(insts);
	return 0;
}

// The block-device client's devices; 0, or the exit status of the failure.
int dump_attached(std::vector<netblk_attached> &atts)
{
	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (nl_status st = client.attached(atts); !st.ok())
		return failed(st);
	return 0;
}

int cmd_list(const std::vector<std::string_view> &argv)
{
	bool json = false, attached_only = false;
	for (auto arg : argv) {
		if (arg == "--json")
			json = true;
		else if (arg == "--attached")
			attached_only = true;
		else
			return usage_error("unknown list option '" + std::string(arg) + "'");
	}
	if (attached_only) {
		std::vector<netblk_attached> atts;
		if (int rc = dump_attached(atts))
			return rc;
		if (json)
			fputs(format_attached_json(atts).c_str(), stdout);
		else if (atts.empty())
			puts("netblk: no devices attached");
		else
			for (const auto &a : atts)
				fputs(format_attached_text(a).c_str(), stdout);
		return finish();
	}

	std::vector<netblk_instance> insts;
	if (int rc = dump_instances(insts))
		return rc;
	std::vector<netblk_attached> atts;
	if (!json)
		if (int rc = dump_attached(atts))
			return rc;
	print_list(insts, atts, json);
	return finish();
}

int cmd_stats(const std::vector<std::string_view> &argv)
{
	if (argv.size() != 1 || argv[0] != "--prometheus")
		return usage_error("stats needs --prometheus");

	std::vector<netblk_instance> insts;
	if (int rc = dump_instances(insts))
		return rc;
	std::vector<netblk_attached> atts;
	if (int rc = dump_attached(atts))
		return rc;
	fputs(format_prometheus(insts, atts).c_str(), stdout);
	return finish();
}

// One scrape for the exporter: what `stats --prometheus` prints, or why not.
scrape_result scrape_metrics()
{
	netblk_client client;
	nl_status st = client.connect();
	if (!st.ok())
		return {std::nullopt, st.err == ENOENT ? "the netblk module is not loaded (modprobe netblk)"
						       : st.text()};
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (st = client.list(insts); st.ok())
		st = client.attached(atts);
	if (!st.ok())
		return {std::nullopt, st.text()};
	read_not_allowed(insts);
	return {format_prometheus(insts, atts), {}};
}

int cmd_exporter(const std::vector<std::string_view> &argv)
{
	if (argv.size() != 2 || argv[0] != "--listen")
		return usage_error("exporter needs --listen ADDR:PORT");
	sockaddr_in addr;
	if (std::string err = parse_listen_address(argv[1], addr); !err.empty())
		return usage_error(err);
	// Say now, not at the first scrape, what would make every scrape fail.
	if (scrape_result r = scrape_metrics(); !r.metrics)
		fprintf(stderr, "netblkctl: warning: %s; /metrics answers 503 until then\n",
			r.error.c_str());
	return run_exporter(addr, scrape_metrics) ? exit_failed : 0;
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

int cmd_attach(const std::vector<std::string_view> &argv)
{
	netblk_attach_args args;
	if (std::string err = parse_attach_argv(argv, args); !err.empty())
		return usage_error(err);

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	netblk_attached att;
	bool described;
	if (nl_status st = client.attach(args, att, described); !st.ok())
		return failed(st);
	if (!described) {
		fprintf(stderr, "netblkctl: the module attached a device but did not say which "
			"(does netblkctl match the module?)\n");
		return exit_failed;
	}
	puts(format_attached(att).c_str());
	return finish();
}

int cmd_detach(const std::vector<std::string_view> &argv)
{
	std::optional<std::string> disk;
	bool force = false, all = false;
	for (auto arg : argv) {
		if (arg == "--force")
			force = true;
		else if (arg == "all" && !disk && !all)
			all = true;
		else if (!disk && !all && !arg.empty() && arg[0] != '-')
			disk = std::string(arg);
		else
			return usage_error("detach needs one <netblkN> (or /dev/netblkN), or all, "
					   "and maybe --force");
	}
	if (!disk && !all)
		return usage_error("detach needs one <netblkN> (or /dev/netblkN), or all");

	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	uint32_t detached;
	if (nl_status st = client.detach(disk, force, detached); !st.ok())
		return failed(st);
	printf("netblk: %u device%s detached\n", detached, detached == 1 ? "" : "s");
	return finish();
}

// ---- save and restore (config.h) ----------------------------------------

std::vector<std::string_view> views(const std::vector<std::string> &words)
{
	return {words.begin(), words.end()};
}

// The whole of `path`; false with errno when it cannot be read.
bool read_text_file(const std::string &path, std::string &out)
{
	FILE *f = fopen(path.c_str(), "re");
	if (!f)
		return false;
	char buf[4096];
	size_t n;
	out.clear();
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	bool ok = !ferror(f);
	fclose(f);
	return ok;
}

// A name of the block device at `path` that survives a reboot: a link in
// /dev/disk/by-id (then by-partuuid, by-uuid, by-path) to the same device;
// `path` itself when it is one already or when there is none.
std::string stable_device_path(const std::string &path)
{
	struct stat want;
	if (path.starts_with("/dev/disk/") || path.starts_with("/dev/mapper/") ||
	    stat(path.c_str(), &want) != 0 || !S_ISBLK(want.st_mode))
		return path;
	for (const char *dir : {"/dev/disk/by-id", "/dev/disk/by-partuuid", "/dev/disk/by-uuid",
				"/dev/disk/by-path"}) {
		DIR *d = opendir(dir);
		if (!d)
			continue;
		std::vector<std::string> names;
		while (dirent *e = readdir(d))
			if (e->d_name[0] != '.')
				names.emplace_back(e->d_name);
		closedir(d);
		std::sort(names.begin(), names.end());
		for (const std::string &name : names) {
			std::string link = std::string(dir) + "/" + name;
			struct stat st;
			if (stat(link.c_str(), &st) == 0 && S_ISBLK(st.st_mode) &&
			    st.st_rdev == want.st_rdev)
				return link;
		}
	}
	return path;
}

// The file's lines as commands: all of them parsed (key files read), or
// the first thing wrong as "FILE:N: ...".
struct config_entry {
	config_line line;
	netblk_start_args start;	// command "start"
	netblk_attach_args attach;	// command "attach"
	std::string nic;		// start: the XDP NIC (dev= or the default route's)
};

std::string load_config(const std::string &file, std::vector<config_entry> &out)
{
	std::string text;
	if (!read_text_file(file, text))
		return "cannot read " + file + ": " + strerror(errno) +
		       (errno == ENOENT ? " (netblkctl save writes one)" : "");
	std::vector<config_line> lines;
	if (std::string err = parse_config(text, file, lines); !err.empty())
		return err;
	for (config_line &l : lines) {
		config_entry e;
		std::string where = file + ":" + std::to_string(l.lineno) + ": ";
		if (l.command == "start") {
			bool exist_ok = false;
			if (std::string err = parse_start_argv(views(l.args), e.start, exist_ok);
			    !err.empty())
				return where + err;
			if (exist_ok)
				return where + "--exist-ok has no place here (restore compares anyway)";
			if (!e.start.ifname && !(e.start.ifname = default_route_ifname()))
				return where + "no default route: name the NIC with dev=IFACE";
			e.nic = vlan_real_device(*e.start.ifname);
			for (const config_entry &o : out)
				if (o.line.command == "start" && o.start.port == e.start.port)
					return where + "port " + std::to_string(e.start.port) +
					       " again (line " + std::to_string(o.line.lineno) + ")";
		} else {
			if (std::string err = parse_attach_argv(views(l.args), e.attach); !err.empty())
				return where + err;
			for (const config_entry &o : out)
				if (o.line.command == "attach" && o.attach.addr == e.attach.addr &&
				    o.attach.port == e.attach.port)
					return where + "that instance again (line " +
					       std::to_string(o.line.lineno) + ")";
		}
		e.line = std::move(l);
		out.push_back(std::move(e));
	}
	return {};
}

// save's and restore's [FILE]: "" when fine (the default file if none).
std::string config_file_arg(const std::vector<std::string_view> &argv, const char *cmd,
			    std::string &file)
{
	if (argv.size() > 1)
		return std::string(cmd) + " takes at most one FILE";
	file = argv.empty() ? NETBLK_CONFIG_FILE : std::string(argv[0]);
	return {};
}

// The instances and the attached devices; 0, or the exit status of the
// failure (already reported).
int dump_running(std::vector<netblk_instance> &insts, std::vector<netblk_attached> &atts)
{
	if (int rc = dump_instances(insts))
		return rc;
	return dump_attached(atts);
}

// The attach line and the attached device name one instance (addr:port).
bool same_target(const netblk_attach_args &a, const netblk_attached &att)
{
	return a.addr == att.addr && a.port == att.port;
}

// save [FILE]: what runs now, one line each.  A line of the file that still
// describes what runs is kept as written (its key=, its cpu=); a keyed
// instance or attachment the file does not describe cannot be written
// (the kernel never gives a key back) and fails the save.
int cmd_save(const std::vector<std::string_view> &argv)
{
	std::string file;
	if (std::string err = config_file_arg(argv, "save", file); !err.empty())
		return usage_error(err);
	std::vector<config_entry> old;
	if (access(file.c_str(), F_OK) == 0) {
		if (std::string err = load_config(file, old); !err.empty()) {
			fprintf(stderr, "netblkctl: %s: fix it or remove it first\n", err.c_str());
			return exit_failed;
		}
	}
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (int rc = dump_running(insts, atts))
		return rc;

	std::vector<std::string> lines;
	std::vector<std::string> unsaved;
	for (const netblk_instance &inst : insts) {
		if (inst.stopping())
			continue;
		const config_entry *kept = nullptr;
		for (const config_entry &e : old)
			if (e.line.command == "start" && e.start.port == inst.port &&
			    start_differs(e.start, e.nic, inst).empty())
				kept = &e;
		if (kept)
			lines.push_back(kept->line.text);
		else if (inst.auth != NETBLK_AUTH_NONE)
			unsaved.push_back("port " + std::to_string(inst.port));
		else
			lines.push_back(format_start_line(inst, stable_device_path(inst.device),
							  nic_mtu(inst.ifname)));
	}
	for (const netblk_attached &att : atts) {
		const config_entry *kept = nullptr;
		for (const config_entry &e : old)
			if (e.line.command == "attach" && same_target(e.attach, att) &&
			    e.attach.read_only == att.read_only &&
			    (e.attach.key.has_value() == (att.auth != NETBLK_AUTH_NONE)))
				kept = &e;
		if (kept)
			lines.push_back(kept->line.text);
		else if (att.auth != NETBLK_AUTH_NONE)
			unsaved.push_back(att.disk);
		else
			lines.push_back(format_attach_line(att));
	}
	if (!unsaved.empty()) {
		std::string list;
		for (const std::string &u : unsaved)
			list += (list.empty() ? "" : ", ") + u;
		fprintf(stderr, "netblkctl: %s take%s a key, which the kernel does not give back, "
			"and %s has no line for %s: add it there by hand (... key=FILE); "
			"nothing was written\n", list.c_str(), unsaved.size() == 1 ? "s" : "",
			file.c_str(), unsaved.size() == 1 ? "it" : "them");
		return exit_failed;
	}

	// Written beside it and renamed over it: a crash leaves the old or the new.
	std::string dir = file.substr(0, file.rfind('/'));
	if (file.starts_with(NETBLK_CONFIG_FILE) && !dir.empty())
		mkdir(dir.c_str(), 0755);
	std::string tmp = file + ".tmp";
	std::string text = format_config(lines);
	int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
	    fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), file.c_str()) != 0) {
		fprintf(stderr, "netblkctl: cannot write %s: %s\n", file.c_str(), strerror(errno));
		unlink(tmp.c_str());
		return exit_failed;
	}
	size_t n_att = atts.size(), n_inst = lines.size() - n_att;
	printf("netblk: saved %zu instance%s and %zu attached device%s to %s\n", n_inst,
	       n_inst == 1 ? "" : "s", n_att, n_att == 1 ? "" : "s", file.c_str());
	return finish();
}

// restore [FILE]: what runs made to match the file -- started what is
// missing, left alone what already matches, started again what differs,
// stopped (detached) what the file does not name -- each step said.  Every
// line is checked before anything is done; a step that fails does not stop
// the others, and makes the exit status 1.
int cmd_restore(const std::vector<std::string_view> &argv)
{
	std::string file;
	if (std::string err = config_file_arg(argv, "restore", file); !err.empty())
		return usage_error(err);
	std::vector<config_entry> want;
	if (std::string err = load_config(file, want); !err.empty()) {
		fprintf(stderr, "netblkctl: %s; nothing was changed\n", err.c_str());
		return exit_failed;
	}
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (int rc = dump_running(insts, atts))
		return rc;

	int result = 0;
	auto step = [&](int rc) {
		fflush(stdout);
		if (rc != 0)
			result = exit_failed;
	};
	for (const netblk_instance &inst : insts) {
		bool named = false;
		for (const config_entry &e : want)
			named |= e.line.command == "start" && e.start.port == inst.port;
		if (!named && !inst.stopping()) {
			printf("netblk: port %u is not in %s: stopping it\n", inst.port, file.c_str());
			step(cmd_stop({std::to_string(inst.port)}));
		}
	}
	for (const netblk_attached &att : atts) {
		bool named = false;
		for (const config_entry &e : want)
			named |= e.line.command == "attach" && same_target(e.attach, att);
		if (!named) {
			printf("netblk: %s is not in %s: detaching it\n", att.disk.c_str(), file.c_str());
			step(cmd_detach({att.disk}));
		}
	}
	for (const config_entry &e : want) {
		std::vector<std::string_view> args = views(e.line.args);
		if (e.line.command == "attach") {
			const netblk_attached *have = nullptr;
			for (const netblk_attached &att : atts)
				if (same_target(e.attach, att))
					have = &att;
			if (have) {
				printf("netblk: %s %s: attached already (%s)\n", file.c_str(),
				       e.line.text.c_str(), have->disk.c_str());
				continue;
			}
			step(cmd_attach(args));
			continue;
		}
		const netblk_instance *have = nullptr;
		for (const netblk_instance &inst : insts)
			if (inst.port == e.start.port)
				have = &inst;
		if (have) {
			std::string diff = start_differs(e.start, e.nic, *have);
			if (diff.empty()) {
				printf("netblk: port %u: serving as %s says\n", e.start.port,
				       file.c_str());
				continue;
			}
			printf("netblk: port %u differs from %s (%s): starting it again\n",
			       e.start.port, file.c_str(), diff.c_str());
			if (!have->stopping()) {
				int rc = cmd_stop({std::to_string(e.start.port)});
				step(rc);
				if (rc != 0)
					continue;
			}
		}
		step(cmd_start(args));
	}
	return result ? result : finish();
}

struct watch_options {
	double interval = 1.0;		// seconds
	std::optional<uint64_t> count;	// intervals, then exit
	bool json = false;
};

std::optional<double> parse_seconds(std::string_view s)
{
	double v;
	const char *end = s.data() + s.size();
	auto [p, ec] = std::from_chars(s.data(), end, v);
	if (s.empty() || ec != std::errc() || p != end || !(v >= 0.01 && v <= 86400))
		return std::nullopt;
	return v;
}

// "--opt V" or "--opt=V": the value, moving i past it; nullopt when this
// is not --opt.  An --opt without a value gives "".
std::optional<std::string_view> option_value(const std::vector<std::string_view> &argv,
					     size_t &i, std::string_view opt)
{
	std::string_view a = argv[i];
	if (a == opt)
		return ++i < argv.size() ? argv[i] : std::string_view();
	if (a.size() > opt.size() && a.starts_with(opt) && a[opt.size()] == '=')
		return a.substr(opt.size() + 1);
	return std::nullopt;
}

// "" when fine, else what is wrong.
std::string parse_watch_options(const std::vector<std::string_view> &argv, watch_options &o)
{
	for (size_t i = 0; i < argv.size(); i++) {
		if (argv[i] == "--json") {
			o.json = true;
		} else if (auto v = option_value(argv, i, "--interval")) {
			auto secs = parse_seconds(*v);
			if (!secs)
				return "bad --interval '" + std::string(*v) +
				       "' (want seconds, 0.01..86400)";
			o.interval = *secs;
		} else if (auto v = option_value(argv, i, "--count")) {
			auto n = parse_u32(*v);
			if (!n || *n == 0)
				return "bad --count '" + std::string(*v) + "' (want 1..4294967295)";
			o.count = *n;
		} else {
			return "unknown watch option '" + std::string(argv[i]) + "'";
		}
	}
	return {};
}

double clock_seconds(clockid_t clock)
{
	timespec ts;
	clock_gettime(clock, &ts);
	return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// A line of watch's output, flushed at once (stdout may be a pipe or a
// file); false when it could not be written.
bool emit(const std::string &line)
{
	if (fputs(line.c_str(), stdout) < 0 || fputc('\n', stdout) < 0 || fflush(stdout) != 0) {
		perror("netblkctl: writing the output");
		return false;
	}
	return true;
}

// The events queued now; false when they could not be written.
bool print_events(netblk_client &events, bool json)
{
	bool written = true;
	nl_status st = events.read_events([&](const netblk_event_info &ev) -> nl_status {
		double now = clock_seconds(CLOCK_REALTIME);
		written = emit(json ? format_event_json(ev, now) : format_event_text(ev));
		return written ? nl_status{} : nl_error(EIO);
	});
	if (!written)
		return false;
	if (st.err == ENOBUFS)
		fprintf(stderr, "netblkctl: events lost (the socket's receive queue overflowed)\n");
	else if (!st.ok())
		fprintf(stderr, "netblkctl: reading events: %s\n", st.text().c_str());
	return true;
}

bool print_rates(const std::vector<instance_rates> &rates,
		 const std::vector<attached_rates> &att_rates, bool json)
{
	double now = clock_seconds(CLOCK_REALTIME);
	for (const auto &r : rates)
		if (!emit(json ? format_rates_json(r, now) : format_rates_text(r)))
			return false;
	for (const auto &r : att_rates)
		if (!emit(json ? format_attached_rates_json(r, now) : format_attached_rates_text(r)))
			return false;
	return true;
}

// Whether a LIST failed for the module's going.  ENOENT: the family's id is
// gone; EPROTONOSUPPORT: the module is on its way out (netlink cannot pin it
// for the dump).  Not looked up again: resolving the family would have the
// kernel load it.
bool module_unloaded(const nl_status &st)
{
	return st.msg.empty() && (st.err == ENOENT || st.err == EPROTONOSUPPORT);
}

// A LIST of watch failed.
int list_failed(const nl_status &st)
{
	if (module_unloaded(st)) {
		fprintf(stderr, "netblkctl: the netblk module was unloaded\n");
		return exit_failed;
	}
	return failed(st);
}

// SIGINT and SIGTERM, blocked, as a signalfd for the poll set of a command
// that runs until one comes; -1 (said) when it cannot be made.
int end_signals_fd()
{
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, nullptr);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0)
		perror("netblkctl: signalfd");
	return sfd;
}

// For a command that runs until SIGINT or SIGTERM: a client for requests,
// one joined to the events group, and end_signals_fd(); -1 (said, with the
// exit status in `rc`) when one of them cannot be had.
int open_event_loop(netblk_client &requests, netblk_client &events, int &rc)
{
	if (!connect(requests, rc) || !connect(events, rc))
		return -1;
	if (nl_status st = events.join_events(); !st.ok()) {
		rc = failed(st);
		return -1;
	}
	int sfd = end_signals_fd();
	if (sfd < 0)
		rc = exit_failed;
	return sfd;
}

int cmd_watch(const std::vector<std::string_view> &argv)
{
	watch_options opt;
	if (std::string err = parse_watch_options(argv, opt); !err.empty())
		return usage_error(err);

	// One socket for the dumps, one that only receives events.
	netblk_client dump, events;
	int rc;
	int sfd = open_event_loop(dump, events, rc);
	if (sfd < 0)
		return rc;

	std::vector<netblk_instance> prev, cur;
	std::vector<netblk_attached> prev_att, cur_att;
	if (nl_status st = dump.list(prev); !st.ok())
		return list_failed(st);
	if (nl_status st = dump.attached(prev_att); !st.ok())
		return list_failed(st);
	double t_prev = clock_seconds(CLOCK_MONOTONIC);
	double next = t_prev + opt.interval;
	uint64_t intervals = 0;
	for (;;) {
		double now = clock_seconds(CLOCK_MONOTONIC);
		int timeout = now >= next ? 0 : static_cast<int>(std::ceil((next - now) * 1000));
		pollfd fds[2] = {{events.fd(), POLLIN, 0}, {sfd, POLLIN, 0}};
		if (poll(fds, 2, timeout) < 0 && errno != EINTR) {
			perror("netblkctl: poll");
			return exit_failed;
		}
		if (fds[1].revents & POLLIN)
			break;
		if ((fds[0].revents & (POLLIN | POLLERR)) && !print_events(events, opt.json))
			return exit_failed;
		now = clock_seconds(CLOCK_MONOTONIC);
		if (now < next)
			continue;
		if (nl_status st = dump.list(cur); !st.ok())
			return list_failed(st);
		if (nl_status st = dump.attached(cur_att); !st.ok())
			return list_failed(st);
		now = clock_seconds(CLOCK_MONOTONIC);
		if (!print_rates(compute_all_rates(prev, cur, now - t_prev),
				 compute_attached_rates(prev_att, cur_att, now - t_prev), opt.json))
			return exit_failed;
		prev.swap(cur);
		prev_att.swap(cur_att);
		t_prev = now;
		next += opt.interval;
		if (next <= now)	// a slow dump: skip the ticks it missed
			next = now + opt.interval;
		if (opt.count && ++intervals >= *opt.count)
			break;
	}
	close(sfd);
	return finish();
}

// Mends, as they come, the NICs whose driver dropped netblk's XDP program
// (readd_dropped_programs): a WAITING event says an instance waits for
// something new, and the instances are looked at once a few seconds too --
// an event can be lost, and a NIC that failed to be mended is tried again.
int cmd_supervise(const std::vector<std::string_view> &argv)
{
	if (!argv.empty())
		return usage_error("supervise takes no arguments");
	if (!module_loaded()) {
		printf("netblk: the module is not loaded: nothing to supervise\n");
		return finish();
	}
	netblk_client client, events;
	int rc;
	int sfd = open_event_loop(client, events, rc);
	if (sfd < 0)
		return rc;
	xdp_quiet_libbpf();
	constexpr int look_ms = 5000;
	bool look = true;
	for (;;) {
		if (look) {
			std::vector<netblk_instance> insts;
			nl_status st = client.list(insts);
			if (module_unloaded(st)) {	// rmmod: not to be undone by a restart
				printf("netblk: the module was unloaded: nothing to supervise\n");
				break;
			}
			if (!st.ok())
				return failed(st);
			readd_dropped_programs(client, insts);
		}
		pollfd fds[2] = {{events.fd(), POLLIN, 0}, {sfd, POLLIN, 0}};
		int n = poll(fds, 2, look_ms);
		if (n < 0 && errno != EINTR) {
			perror("netblkctl: poll");
			return exit_failed;
		}
		if (fds[1].revents & POLLIN)
			break;
		look = n == 0;
		if (fds[0].revents & (POLLIN | POLLERR)) {
			// what the events say is looked up in LIST; lost ones too
			nl_status st = events.read_events([&](const netblk_event_info &ev) -> nl_status {
				look = look || ev.event == NETBLK_EVENT_WAITING;
				return {};
			});
			look = look || st.err == ENOBUFS;
		}
	}
	close(sfd);
	return finish();
}

// /sys/module/netblk/version; "" for a module without one, nullopt when
// the module is not loaded.
std::optional<std::string> loaded_module_version()
{
	if (!module_loaded())
		return std::nullopt;
	std::string v;
	if (!read_text_file("/sys/module/netblk/version", v))
		v.clear();
	return v;
}

int cmd_version(const std::vector<std::string_view> &argv)
{
	if (!argv.empty())
		return usage_error("--version takes no arguments");
	std::optional<std::string> mod = loaded_module_version();
	fputs(format_version(mod ? std::optional<std::string_view>(*mod) : std::nullopt).c_str(),
	      stdout);
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
	if (cmd == "--version" || cmd == "version")
		return cmd_version(args);
	if (cmd == "start")
		return cmd_start(args);
	if (cmd == "stop")
		return cmd_stop(args);
	if (cmd == "attach")
		return cmd_attach(args);
	if (cmd == "detach")
		return cmd_detach(args);
	if (cmd == "genkey")
		return cmd_genkey(args);
	if (cmd == "save")
		return cmd_save(args);
	if (cmd == "restore")
		return cmd_restore(args);
	if (cmd == "list")
		return cmd_list(args);
	if (cmd == "watch")
		return cmd_watch(args);
	if (cmd == "stats")
		return cmd_stats(args);
	if (cmd == "exporter")
		return cmd_exporter(args);
	if (cmd == "supervise")
		return cmd_supervise(args);
	return usage_error("unknown command '" + std::string(cmd) + "'");
}
