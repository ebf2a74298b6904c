// netblkctl start: an instance on a block device and a port, and the
// steering of its port by netblk's XDP program on the NIC (xdp.h).
#include "commands.h"

#include <algorithm>
#include <cstring>
#include <linux/capability.h>
#include <linux/if_vlan.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "settings.h"
#include "xdp.h"

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

namespace {

// Undoes a START whose instance cannot be reached (best effort: says so
// when even that fails).
void stop_after_failure(netblk_client &client, uint16_t port)
{
	netblk_stop_result result;
	if (nl_status st = client.stop(port, result); !st.ok())
		fprintf(stderr, "netblkctl: stopping port %u again failed too: %s\n", port,
			st.text().c_str());
	release_unused_programs(client);
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

} // namespace

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

int cmd_start(const command_args &argv)
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

