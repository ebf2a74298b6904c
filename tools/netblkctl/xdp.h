// The NIC side of netblk: bpf/netblk.bpf.c on the NIC's XDP hook in native
// mode, and its netblk_ports devmap, which steers a UDP port's datagrams to
// the instance's own net device (NETBLK_A_HANDOFF_IFINDEX).
//
// The first instance on a NIC loads the program and creates a BPF link that
// it hands to the module with START (NETBLK_A_XDP_LINK_FD); the module keeps
// it until the NIC's last instance stops.  Later instances find that program
// and its map by name and only add their port.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct netblk_bpf;

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

	// netblk_ports[port] = { .ifindex = ifindex }; 0 or a positive errno.
	int steer(uint16_t port, uint32_t ifindex);

private:
	std::string attach(const std::string &ifname, unsigned ifindex, int &err);
	std::string adopt(const std::string &ifname, uint32_t prog_id);

	netblk_bpf *skel_ = nullptr;
	int link_fd_ = -1;
	int ports_fd_ = -1;
	bool own_ports_fd_ = false;	// from bpf_map_get_fd_by_id, not the skeleton's
};
