// The NIC's XDP program and its port map: see xdp.h.
#include "xdp.h"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <sstream>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#include "netblk.skel.h"
#include "netblk_maps.h"

namespace {

constexpr const char prog_name[] = "netblk_xdp";

// RTF_REJECT in <linux/route.h>: an unreachable/prohibit route, no NIC.
constexpr unsigned rtf_reject = 0x0200;

std::string errno_text(int err)
{
	std::string s = strerror(err);
	if (err == EPERM || err == EACCES)
		s += " (run as root)";
	return s;
}

// libbpf's own messages mostly start with "libbpf: " already.
int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level != LIBBPF_WARN)
		return 0;
	va_list copy;
	va_copy(copy, args);
	int n = vsnprintf(nullptr, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		return n;
	std::string buf(static_cast<size_t>(n) + 1, '\0');	// a verifier log is long
	vsnprintf(buf.data(), buf.size(), fmt, args);
	buf.pop_back();
	std::string_view msg = buf;
	if (msg.starts_with("libbpf: "))
		msg.remove_prefix(8);
	return fprintf(stderr, "netblkctl: libbpf: %.*s", static_cast<int>(msg.size()), msg.data());
}

struct prog_desc {
	std::string name;
	std::vector<uint32_t> map_ids;
};

// Name and maps of the program with that id; 0 or a positive errno.
int describe_prog(uint32_t id, prog_desc &d)
{
	int fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return -fd;
	std::array<uint32_t, 16> ids{};
	bpf_prog_info info{};
	info.nr_map_ids = ids.size();
	info.map_ids = reinterpret_cast<uintptr_t>(ids.data());
	uint32_t len = sizeof(info);
	int err = bpf_obj_get_info_by_fd(fd, &info, &len);
	close(fd);
	if (err)
		return -err;
	d.name.assign(info.name, strnlen(info.name, sizeof(info.name)));
	d.map_ids.assign(ids.begin(), ids.begin() + std::min<size_t>(info.nr_map_ids, ids.size()));
	return 0;
}

// The maps of the program, as bpf/netblk_maps.h has them.
struct map_desc {
	const char *name;
	bpf_map_type type;
	uint32_t key_size, value_size;
};

constexpr map_desc ports_map = {"netblk_ports", BPF_MAP_TYPE_DEVMAP_HASH, sizeof(uint32_t),
				sizeof(bpf_devmap_val)};
constexpr map_desc steer_map = {"netblk_steer", BPF_MAP_TYPE_PERCPU_HASH, sizeof(uint32_t),
				sizeof(netblk_steer)};
constexpr map_desc allow_map = {"netblk_allow", BPF_MAP_TYPE_LPM_TRIE,
				sizeof(netblk_allow_key), sizeof(uint8_t)};

// An fd of the map with that id when it is `want`, else -1.
int map_fd(uint32_t id, const map_desc &want)
{
	int fd = bpf_map_get_fd_by_id(id);
	if (fd < 0)
		return -1;
	bpf_map_info info{};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
	    strncmp(info.name, want.name, sizeof(info.name)) == 0 && info.type == want.type &&
	    info.key_size == want.key_size && info.value_size == want.value_size)
		return fd;
	close(fd);
	return -1;
}

// An fd of the map `want` among a program's maps, or -1.
int find_map(const prog_desc &d, const map_desc &want)
{
	for (uint32_t id : d.map_ids)
		if (int fd = map_fd(id, want); fd >= 0)
			return fd;
	return -1;
}

std::string occupied(const std::string &ifname, uint32_t id, const std::string &name)
{
	return ifname + " already runs XDP program " + (name.empty() ? "(unnamed)" : name) +
	       " (id " + std::to_string(id) + "): netblk needs the NIC's XDP hook";
}

std::string cannot_inspect(const std::string &ifname, uint32_t id, int err)
{
	return "cannot inspect XDP program id " + std::to_string(id) + " on " + ifname + ": " +
	       errno_text(err);
}

// The refusal for a program that is not (or not only) netblk's native one.
std::string refuse(const std::string &ifname, uint32_t id)
{
	prog_desc d;
	if (int err = describe_prog(id, d))
		return cannot_inspect(ifname, id, err);
	return occupied(ifname, id, d.name);
}

} // namespace

std::optional<std::string> default_route_ifname(std::string_view text)
{
	std::istringstream in{std::string(text)};
	std::string line;
	std::getline(in, line);	// the header
	std::optional<std::string> best;
	unsigned long best_metric = 0;
	while (std::getline(in, line)) {
		std::istringstream f(line);
		std::string iface, dest, gw, flags, refcnt, use, metric, mask;
		if (!(f >> iface >> dest >> gw >> flags >> refcnt >> use >> metric >> mask))
			continue;
		if (dest != "00000000" || mask != "00000000" || iface == "*")
			continue;
		char *end;
		unsigned long fl = strtoul(flags.c_str(), &end, 16);
		if (*end || (fl & rtf_reject))
			continue;
		unsigned long m = strtoul(metric.c_str(), &end, 10);
		if (*end)
			continue;
		if (!best || m < best_metric) {
			best = iface;
			best_metric = m;
		}
	}
	return best;
}

std::optional<std::string> default_route_ifname()
{
	std::ifstream f("/proc/net/route");
	if (!f)
		return std::nullopt;
	std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
	return default_route_ifname(text);
}

void xdp_quiet_libbpf()
{
	libbpf_set_print(libbpf_print);
}

bool may_admin_net()
{
	__user_cap_header_struct hdr{};
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	__user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
	if (syscall(SYS_capget, &hdr, data) != 0)
		return true;	// cannot tell: let the kernel say
	return data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32));
}

nic_xdp::~nic_xdp()
{
	if (link_fd_ >= 0)
		close(link_fd_);
	if (own_map_fds_)
		for (int fd : {ports_fd_, steer_fd_, allow_fd_})
			if (fd >= 0)
				close(fd);
	netblk_bpf__destroy(skel_);
}

std::optional<int> nic_xdp::link_fd() const
{
	if (link_fd_ < 0)
		return std::nullopt;
	return link_fd_;
}

std::string nic_xdp::prepare(const std::string &ifname, unsigned ifindex)
{
	// Twice: another netblkctl may attach the program between our look
	// and our link (the link then fails with EBUSY).
	for (int attempt = 0;; attempt++) {
		bpf_xdp_query_opts q{};
		q.sz = sizeof(q);
		if (int err = bpf_xdp_query(ifindex, 0, &q))
			return "cannot read the XDP programs of " + ifname + ": " + errno_text(-err);
		// A generic (skb) mode program excludes a native one; an
		// offloaded one runs before ours.
		if (q.skb_prog_id)
			return refuse(ifname, q.skb_prog_id);
		if (q.hw_prog_id)
			return refuse(ifname, q.hw_prog_id);
		if (q.drv_prog_id)
			return adopt(ifname, q.drv_prog_id);
		int err;
		std::string msg = attach(ifname, ifindex, err);
		if (msg.empty() || err != EBUSY || attempt > 0)
			return msg;
	}
}

// The NIC runs a native program already: an earlier instance's, or not ours.
std::string nic_xdp::adopt(const std::string &ifname, uint32_t prog_id)
{
	prog_desc d;
	if (int err = describe_prog(prog_id, d))
		return cannot_inspect(ifname, prog_id, err);
	if (d.name != prog_name)
		return occupied(ifname, prog_id, d.name);
	own_map_fds_ = true;
	ports_fd_ = find_map(d, ports_map);
	steer_fd_ = find_map(d, steer_map);
	allow_fd_ = find_map(d, allow_map);
	if (ports_fd_ >= 0 && steer_fd_ >= 0 && allow_fd_ >= 0)
		return {};
	return ifname + " runs an XDP program " + prog_name + " (id " + std::to_string(prog_id) +
	       ") without netblk's maps: an older netblk's, or not netblk's (stop its instances "
	       "and start again)";
}

// Loads the program and links it to the NIC in native mode; `err` is the
// errno of a failure.
std::string nic_xdp::attach(const std::string &ifname, unsigned ifindex, int &err)
{
	err = 0;
	skel_ = netblk_bpf__open_and_load();
	if (!skel_) {
		err = errno;
		return "cannot load the XDP program: " + errno_text(err);
	}
	bpf_link_create_opts o{};
	o.sz = sizeof(o);
	o.flags = XDP_FLAGS_DRV_MODE;
	int fd = bpf_link_create(bpf_program__fd(skel_->progs.netblk_xdp), ifindex, BPF_XDP, &o);
	if (fd < 0) {
		err = -fd;
		netblk_bpf__destroy(skel_);
		skel_ = nullptr;
		std::string why = err == EPERM || err == EACCES
					  ? errno_text(err)
					  : std::string(strerror(err)) +
						    " (netblk needs a NIC driver with native XDP)";
		return "cannot attach the XDP program to " + ifname + " in native mode: " + why;
	}
	link_fd_ = fd;
	ports_fd_ = bpf_map__fd(skel_->maps.netblk_ports);
	steer_fd_ = bpf_map__fd(skel_->maps.netblk_steer);
	allow_fd_ = bpf_map__fd(skel_->maps.netblk_allow);
	return {};
}

// A previous instance's entries for the port go; then the new ones.
int nic_xdp::replace_allowlist(const xdp_steer_spec &s)
{
	uint16_t port_be = htons(s.port);
	std::vector<netblk_allow_key> old;
	netblk_allow_key key{}, next{};
	void *prev = nullptr;
	while (bpf_map_get_next_key(allow_fd_, prev, &next) == 0) {
		if (next.port == port_be)
			old.push_back(next);
		key = next;
		prev = &key;
	}
	for (const netblk_allow_key &k : old)
		if (bpf_map_delete_elem(allow_fd_, &k) && errno != ENOENT)
			return errno;
	for (const netblk_prefix &p : s.allow) {
		netblk_allow_key k{};
		k.prefixlen = 32 + p.len;
		k.port = port_be;
		k.vlan = htons(s.vlan);
		k.src = p.addr;
		uint8_t one = 1;
		if (bpf_map_update_elem(allow_fd_, &k, &one, BPF_ANY))
			return errno;
	}
	return 0;
}

int nic_xdp::steer(const xdp_steer_spec &s)
{
	if (ports_fd_ < 0 || steer_fd_ < 0 || allow_fd_ < 0)
		return EBADF;
	if (int err = replace_allowlist(s))
		return err;

	// one copy for each possible CPU, counters from zero
	int cpus = libbpf_num_possible_cpus();
	if (cpus <= 0)
		return -cpus;
	netblk_steer st{};
	st.addr = s.addr;
	st.vlan = s.vlan;
	st.flags = s.allow.empty() ? 0 : NETBLK_STEER_ALLOWLIST;
	std::vector<netblk_steer> values(static_cast<size_t>(cpus), st);
	uint32_t key = s.port;
	if (bpf_map_update_elem(steer_fd_, &key, values.data(), BPF_ANY))
		return errno;

	bpf_devmap_val val{};
	val.ifindex = s.handoff_ifindex;
	if (bpf_map_update_elem(ports_fd_, &key, &val, BPF_ANY))
		return errno;
	return 0;
}

std::optional<uint64_t> xdp_not_allowed(uint32_t ifindex, uint16_t port)
{
	bpf_xdp_query_opts q{};
	q.sz = sizeof(q);
	prog_desc d;
	if (bpf_xdp_query(static_cast<int>(ifindex), 0, &q) || !q.drv_prog_id ||
	    describe_prog(q.drv_prog_id, d) || d.name != prog_name)
		return std::nullopt;
	int fd = find_map(d, steer_map);
	if (fd < 0)
		return std::nullopt;
	int cpus = libbpf_num_possible_cpus();
	std::vector<netblk_steer> values(static_cast<size_t>(cpus > 0 ? cpus : 1));
	uint32_t key = port;
	std::optional<uint64_t> sum;
	if (cpus > 0 && bpf_map_lookup_elem(fd, &key, values.data()) == 0) {
		sum = 0;
		for (const netblk_steer &v : values)
			*sum += v.not_allowed;
	}
	close(fd);
	return sum;
}
