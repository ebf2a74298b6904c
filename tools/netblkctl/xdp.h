// The NIC side of netblk: bpf/netblk.bpf.c on the NIC's XDP hook in native
// mode, and its maps (bpf/netblk_maps.h), which steer the datagrams to an
// instance's address, port and VLAN, from the sources it allows, to the
// instance's own net device (NETBLK_A_HANDOFF_IFINDEX).
//
// netblkctl owns the program: the first instance on a NIC adds it to the
// NIC's XDP dispatcher through libxdp (Debian's libxdp, as xdp-tools do), so
// that other programs attached the same way share the NIC; later instances
// find it and its maps by name and only add their entries.  The module holds
// no BPF object.  stop, and start before it adds one, remove the program
// from every NIC no instance is on any more (xdp_release_unused): one that
// stopped by itself, or by rmmod, leaves it inert -- its port's entry went
// with the instance's device -- until then.  A NIC whose driver dropped it
// on a reopen (vmxnet3) gets a new one from `netblkctl supervise`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netblk_genl.h"

struct netblk_bpf;
struct xdp_program;
class xdp_lock;

// What the NIC's program needs to steer an instance's datagrams to it.
struct xdp_steer_spec {
	uint16_t port = 0;
	uint32_t handoff_ifindex = 0;
	uint32_t addr = 0;		// the instance's IPv4 address, network order
	uint16_t vlan = 0;
	std::vector<netblk_prefix> allow;	// empty: any source
};

// The count, kept by the program on NIC `ifindex`, of datagrams for `port`
// it dropped for a source not on the instance's allowlist; nullopt when the
// NIC runs no netblk program or it cannot be read (no CAP_SYS_ADMIN).
std::optional<uint64_t> xdp_not_allowed(uint32_t ifindex, uint16_t port);

// The interface of the default route in the text of /proc/net/route:
// destination and mask 00000000, the lowest metric (the first of equals);
// nullopt when there is none.
std::optional<std::string> default_route_ifname(std::string_view proc_net_route);
// The same, read from /proc/net/route.
std::optional<std::string> default_route_ifname();

// Has libbpf print only its errors (LIBBPF_WARN), as "netblkctl: libbpf: ...".
void xdp_quiet_libbpf();

// Whether this process has capability `cap` (CAP_*) in effect.  START needs
// CAP_SYS_ADMIN and CAP_NET_ADMIN: without them netblkctl lets the kernel
// refuse, naming the one missing, rather than fail at loading BPF.
bool has_capability(int cap);

// Removes netblk's XDP program from every NIC whose ifindex is not in
// `in_use` (the NICs with an instance that serves or waits); what could not
// be removed, each in words.
std::vector<std::string> xdp_release_unused(const std::vector<uint32_t> &in_use);

// The NIC's MTU now; 0 when it cannot be read.
uint32_t nic_mtu(const std::string &ifname);

class nic_xdp {
public:
	nic_xdp();
	nic_xdp(const nic_xdp &) = delete;
	nic_xdp &operator=(const nic_xdp &) = delete;
	// Closes its fds; the program stays on the NIC (libxdp pins it).
	~nic_xdp();

	// Makes sure the NIC runs netblk_xdp in native mode: finds an earlier
	// instance's program, or adds one to the NIC's dispatcher -- also in
	// place of an earlier one without multi-buffer support (replaced()
	// says so; steer() the NIC's instances again).  "" when ready, else
	// what is wrong (without the "netblkctl: " prefix).  Holds netblkctl's
	// XDP lock from construction to destruction.
	std::string prepare(const std::string &ifname, unsigned ifindex);

	// What prepare() replaced, in words; "" when nothing.
	const std::string &replaced() const { return replaced_; }

	// prepare() after taking netblk_xdp off the NIC: for a NIC whose
	// driver dropped the program while the kernel still shows it attached
	// (vmxnet3, on a reopen).  The new program's maps are empty: steer()
	// every instance on the NIC again.
	std::string renew(const std::string &ifname, unsigned ifindex);

	// The instance's allowlist (the port's old entries replaced), what
	// else its datagrams must match, and last the port's redirect to
	// netblk<port>: 0 or a positive errno.
	int steer(const xdp_steer_spec &s);

private:
	std::string attach(const std::string &ifname, unsigned ifindex);
	std::string adopt(const std::string &ifname, uint32_t prog_id);
	int replace_allowlist(const xdp_steer_spec &s);

	std::unique_ptr<xdp_lock> lock_;
	netblk_bpf *skel_ = nullptr;
	xdp_program *prog_ = nullptr;	// libxdp's handle of what attach() added
	int ports_fd_ = -1, steer_fd_ = -1, allow_fd_ = -1;
	bool own_map_fds_ = false;	// from bpf_map_get_fd_by_id, not the skeleton's
	std::string replaced_;
};
