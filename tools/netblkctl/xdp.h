// The NIC side of netblk: bpf/netblk.bpf.c on the NIC's XDP hook in native
// mode, and its maps (bpf/netblk_maps.h), which steer the datagrams to an
// instance's address, port and VLAN, from the sources it allows, to the
// instance's own net device (NETBLK_A_HANDOFF_IFINDEX).
//
// The first instance on a NIC loads the program and creates a BPF link that
// it hands to the module with START (NETBLK_A_XDP_LINK_FD); the module keeps
// it until the NIC's last instance stops.  Later instances find that program
// and its maps by name and only add their entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netblk_genl.h"

struct netblk_bpf;

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

// Whether this process has CAP_NET_ADMIN (START needs it; without it
// netblkctl lets the kernel refuse rather than fail at loading BPF).
bool may_admin_net();

class nic_xdp {
public:
	nic_xdp() = default;
	nic_xdp(const nic_xdp &) = delete;
	nic_xdp &operator=(const nic_xdp &) = delete;
	// Closes every fd: a link the module did not take detaches with it.
	~nic_xdp();

	// Makes sure the NIC runs netblk_xdp in native mode: finds an earlier
	// instance's program, or loads one and links it to the NIC.  "" when
	// ready, else what is wrong (without the "netblkctl: " prefix).
	std::string prepare(const std::string &ifname, unsigned ifindex);

	// The link prepare() created, for NETBLK_A_XDP_LINK_FD; none when the
	// NIC already ran netblk_xdp.
	std::optional<int> link_fd() const;

	// The instance's allowlist (the port's old entries replaced), what
	// else its datagrams must match, and last the port's redirect to
	// netblk<port>: 0 or a positive errno.
	int steer(const xdp_steer_spec &s);

private:
	std::string attach(const std::string &ifname, unsigned ifindex, int &err);
	std::string adopt(const std::string &ifname, uint32_t prog_id);
	int replace_allowlist(const xdp_steer_spec &s);

	netblk_bpf *skel_ = nullptr;
	int link_fd_ = -1;
	int ports_fd_ = -1, steer_fd_ = -1, allow_fd_ = -1;
	bool own_map_fds_ = false;	// from bpf_map_get_fd_by_id, not the skeleton's
};
