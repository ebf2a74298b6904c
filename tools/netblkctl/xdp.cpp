// The NIC's XDP program and its port map: see xdp.h.
#include "xdp.h"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <sstream>
#include <net/if.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
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

// While libxdp attaches, libbpf's messages are held back: on a kernel
// without BTF libxdp's dispatcher fails to load (libbpf says so, verifier
// log and all) and libxdp attaches the program alone -- no failure.  They
// are printed only if the attach fails after all.
bool hold_libbpf_messages = false;
std::string held_libbpf_messages;

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
	std::string line = "netblkctl: libbpf: " + std::string(msg);
	if (hold_libbpf_messages) {
		held_libbpf_messages += line;
		return static_cast<int>(line.size());
	}
	return fprintf(stderr, "%s", line.c_str());
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

// libxdp's messages, as libbpf's: warnings only, prefixed.
int libxdp_print(enum libxdp_print_level level, const char *fmt, va_list args)
{
	if (level != LIBXDP_WARN)
		return 0;
	fputs("netblkctl: libxdp: ", stderr);
	return vfprintf(stderr, fmt, args);
}

std::string libxdp_error_text(int err)
{
	char buf[128];
	if (libxdp_strerror(-err, buf, sizeof(buf)) == 0 && buf[0])
		return buf;
	return errno_text(err);
}

// What runs on a NIC's XDP hook, as libxdp sees it: its dispatcher and the
// dispatcher's programs, or one program attached without one (legacy).
struct nic_hook {
	xdp_multiprog *mp = nullptr;
	int err = 0;			// positive errno: the hook could not be read
	xdp_program *netblk = nullptr;	// netblk_xdp among them; nullptr: none

	explicit nic_hook(unsigned ifindex)
	{
		mp = xdp_multiprog__get_from_ifindex(static_cast<int>(ifindex));
		if (long e = libxdp_get_error(mp)) {
			mp = nullptr;	// ENOENT: no program at all
			err = e == -ENOENT ? 0 : static_cast<int>(-e);
			return;
		}
		if (xdp_multiprog__is_legacy(mp)) {
			xdp_program *main = xdp_multiprog__main_prog(mp);
			if (main && strcmp(xdp_program__name(main), prog_name) == 0)
				netblk = main;
			return;
		}
		for (xdp_program *p = xdp_multiprog__next_prog(nullptr, mp); p;
		     p = xdp_multiprog__next_prog(p, mp))
			if (strcmp(xdp_program__name(p), prog_name) == 0)
				netblk = p;
	}
	~nic_hook() { xdp_multiprog__close(mp); }
	nic_hook(const nic_hook &) = delete;
	nic_hook &operator=(const nic_hook &) = delete;

	bool legacy() const { return mp && xdp_multiprog__is_legacy(mp); }

	// netblk_xdp is on the dispatcher without multi-buffer support (an
	// older netblk's, or one xdp-loader loaded from netblk.bpf.o: libxdp
	// then decides before libbpf flags an "xdp.frags" section), which
	// keeps the whole dispatcher from frames in several buffers.
	bool netblk_lacks_frags() const
	{
		return netblk && !legacy() && !xdp_program__xdp_frags_support(netblk);
	}
	xdp_attach_mode mode() const { return mp ? xdp_multiprog__attach_mode(mp) : XDP_MODE_UNSPEC; }

	// Why netblk's program cannot join the hook; "" when it can (or is there).
	std::string refusal(const std::string &ifname) const
	{
		if (err)
			return "cannot read the XDP programs of " + ifname + ": " + libxdp_error_text(err);
		if (!mp)
			return {};
		xdp_program *main = xdp_multiprog__main_prog(mp);
		if (xdp_multiprog__hw_prog(mp))
			return ifname + " runs an offloaded XDP program, which runs before netblk's";
		if (legacy() && !netblk)
			return occupied(ifname, main ? xdp_program__id(main) : 0,
					main ? xdp_program__name(main) : "") +
			       " (one attached without libxdp's dispatcher, which other programs cannot "
			       "share: load it with xdp-loader)";
		if (mode() != XDP_MODE_NATIVE)
			return ifname + " runs XDP in generic (skb) mode: netblk needs native mode";
		return {};
	}
};

// bpffs at /sys/fs/bpf: where libxdp pins its dispatcher.  Without it
// libxdp would attach netblk's program alone, which no other program
// could then share.
bool have_bpffs()
{
	struct statfs st;
	constexpr long bpf_fs_magic = 0xcafe4a11;	// BPF_FS_MAGIC, <linux/magic.h>
	return statfs("/sys/fs/bpf", &st) == 0 && st.f_type == bpf_fs_magic;
}

} // namespace

// Serializes netblkctl's changes to the NICs' XDP programs (start, and
// stop's removal of the programs no instance needs): two starts on one NIC
// must not both add netblk_xdp to its dispatcher.  libxdp locks only its
// own steps.
class xdp_lock {
public:
	// Taken once a process: a nested lock (a stop after a failed start)
	// only counts.
	xdp_lock()
	{
		if (depth_++)
			return;
		for (const char *path : {"/run/netblkctl.lock", "/tmp/netblkctl.lock"}) {
			fd_ = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			if (fd_ >= 0)
				break;
		}
		if (fd_ >= 0)
			flock(fd_, LOCK_EX);
	}
	~xdp_lock()
	{
		if (--depth_ == 0 && fd_ >= 0) {
			close(fd_);
			fd_ = -1;
		}
	}
	xdp_lock(const xdp_lock &) = delete;
	xdp_lock &operator=(const xdp_lock &) = delete;

private:
	static inline int depth_ = 0;
	static inline int fd_ = -1;
};

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

bool has_capability(int cap)
{
	__user_cap_header_struct hdr{};
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	__user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
	if (syscall(SYS_capget, &hdr, data) != 0)
		return true;	// cannot tell: let the kernel say
	return data[cap / 32].effective & (1u << (cap % 32));
}

nic_xdp::nic_xdp() : lock_(std::make_unique<xdp_lock>())
{
}

nic_xdp::~nic_xdp()
{
	if (own_map_fds_)
		for (int fd : {ports_fd_, steer_fd_, allow_fd_})
			if (fd >= 0)
				close(fd);
	xdp_program__close(prog_);
	netblk_bpf__destroy(skel_);
}

// Takes netblk_xdp off the NIC; "" when done, else why not.
static std::string take_off(const nic_hook &hook, const std::string &ifname, unsigned ifindex)
{
	int err = xdp_program__detach(hook.netblk, static_cast<int>(ifindex), hook.mode(), 0);
	if (err)
		return "cannot take netblk's XDP program off " + ifname + ": " + libxdp_error_text(-err);
	return {};
}

std::string nic_xdp::prepare(const std::string &ifname, unsigned ifindex)
{
	libxdp_set_print(libxdp_print);
	nic_hook hook(ifindex);
	if (std::string why = hook.refusal(ifname); !why.empty())
		return why;
	if (hook.netblk && !hook.netblk_lacks_frags())
		return adopt(ifname, xdp_program__id(hook.netblk));
	if (hook.netblk) {
		// replaced: the caller steers the NIC's instances to the new one
		if (std::string err = take_off(hook, ifname, ifindex); !err.empty())
			return err;
		replaced_ = "netblk's XDP program on " + ifname + " (id " +
			    std::to_string(xdp_program__id(hook.netblk)) +
			    ") had no multi-buffer support: replaced by one with it";
	}
	if (!have_bpffs())
		return "no bpffs at /sys/fs/bpf, where libxdp keeps the XDP dispatcher: mount -t bpf "
		       "bpf /sys/fs/bpf";
	return attach(ifname, ifindex);
}

std::string nic_xdp::renew(const std::string &ifname, unsigned ifindex)
{
	libxdp_set_print(libxdp_print);
	{
		nic_hook hook(ifindex);
		if (hook.err)
			return hook.refusal(ifname);
		// Replacing the dispatcher (or removing it, when netblk's was its
		// only program) has the driver take a program again.
		if (hook.netblk)
			if (std::string err = take_off(hook, ifname, ifindex); !err.empty())
				return err;
	}
	return prepare(ifname, ifindex);
}

// The NIC runs netblk_xdp already: an earlier instance's.
std::string nic_xdp::adopt(const std::string &ifname, uint32_t prog_id)
{
	prog_desc d;
	if (int err = describe_prog(prog_id, d))
		return cannot_inspect(ifname, prog_id, err);
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

uint32_t nic_mtu(const std::string &ifname)
{
	std::ifstream f("/sys/class/net/" + ifname + "/mtu");
	uint32_t mtu = 0;

	return f >> mtu ? mtu : 0;
}

// Why a driver with native XDP may still refuse the program: above what one
// receive buffer holds (a page less XDP's room: about 3500 bytes on every
// driver) it must run multi-buffer XDP too, which many drivers lack, and
// virtio-net before Linux 6.3.
static std::string attach_refusal_hint(const std::string &ifname, int err)
{
	const uint32_t single_buffer_mtu = 3494;	// vmxnet3's limit, the lowest seen
	uint32_t mtu = nic_mtu(ifname);

	if ((err == -EINVAL || err == -EOPNOTSUPP) && mtu > single_buffer_mtu)
		return " (at mtu " + std::to_string(mtu) + " netblk needs a NIC driver that runs " +
		       "multi-buffer XDP: lower " + ifname + "'s mtu to " +
		       std::to_string(single_buffer_mtu) + " or less, or see docs/jumbo.md)";
	return " (netblk needs a NIC driver with native XDP)";
}

// Adds the program to the NIC's dispatcher through libxdp (which creates
// the dispatcher on a NIC that has none), in native mode.
std::string nic_xdp::attach(const std::string &ifname, unsigned ifindex)
{
	skel_ = netblk_bpf__open();
	if (!skel_)
		return "cannot open the XDP program: " + errno_text(errno);
	DECLARE_LIBXDP_OPTS(xdp_program_opts, opts, .obj = skel_->obj, .prog_name = prog_name);
	prog_ = xdp_program__create(&opts);
	if (long err = libxdp_get_error(prog_)) {
		prog_ = nullptr;
		return "cannot load the XDP program: " + libxdp_error_text(static_cast<int>(-err));
	}
	// Multi-buffer aware (a jumbo MTU on virtio-net needs it).  libbpf
	// sets the flag of an "xdp.frags" section only when it loads the
	// program, after libxdp has decided the dispatcher's: say it here.
	if (int err = xdp_program__set_xdp_frags_support(prog_, true))
		return "cannot load the XDP program: " + libxdp_error_text(-err);
	hold_libbpf_messages = true;
	int err = xdp_program__attach(prog_, static_cast<int>(ifindex), XDP_MODE_NATIVE, 0);
	hold_libbpf_messages = false;
	std::string held = std::move(held_libbpf_messages);
	held_libbpf_messages.clear();
	if (err) {
		fputs(held.c_str(), stderr);
		std::string why = err == -EPERM || err == -EACCES
					  ? errno_text(-err)
					  : libxdp_error_text(-err) + attach_refusal_hint(ifname, err);
		return "cannot attach the XDP program to " + ifname + " in native mode: " + why;
	}
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
	nic_hook hook(ifindex);
	prog_desc d;
	if (!hook.netblk || describe_prog(xdp_program__id(hook.netblk), d))
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

std::vector<std::string> xdp_release_unused(const std::vector<uint32_t> &in_use)
{
	std::vector<std::string> errors;
	libxdp_set_print(libxdp_print);
	xdp_lock lock;
	struct if_nameindex *nics = if_nameindex();
	for (struct if_nameindex *n = nics; n && n->if_index; n++) {
		if (std::find(in_use.begin(), in_use.end(), n->if_index) != in_use.end())
			continue;
		nic_hook hook(n->if_index);
		if (!hook.netblk)
			continue;
		if (std::string err = take_off(hook, n->if_name, n->if_index); !err.empty())
			errors.push_back(err);
	}
	if_freenameindex(nics);
	return errors;
}
