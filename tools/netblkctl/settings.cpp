// Settings compared: see settings.h.
#include "settings.h"

#include <sys/stat.h>

bool same_block_device(const std::string &a, const std::string &b)
{
	if (a == b)
		return true;
	struct stat sa, sb;
	return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && S_ISBLK(sa.st_mode) &&
	       S_ISBLK(sb.st_mode) && sa.st_rdev == sb.st_rdev;
}

namespace {

std::string differs_u32(const char *name, const std::optional<uint32_t> &want, uint32_t have)
{
	if (!want || *want == have)
		return {};
	return std::string(name) + " " + std::to_string(have) + ", not " + std::to_string(*want);
}

std::string allow_text(const std::vector<netblk_prefix> &allow)
{
	if (allow.empty())
		return "any source";
	std::string t;
	for (const netblk_prefix &p : allow)
		t += (t.empty() ? "" : ",") + format_prefix(p);
	return t;
}

bool same_allow(const std::vector<netblk_prefix> &a, const std::vector<netblk_prefix> &b)
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

} // namespace

std::string start_differs(const netblk_start_args &want, const std::string &want_nic,
			  const netblk_instance &have)
{
	if (have.stopping())
		return "it is stopping";
	if (!same_block_device(want.device, have.device))
		return "device " + have.device + ", not " + want.device;
	if (want.read_only != have.read_only)
		return have.read_only ? "read-only, not read-write" : "read-write, not read-only (ro)";
	if (want_nic != have.ifname)
		return "NIC " + have.ifname + ", not " + want_nic;
	if (want.vlan && *want.vlan != have.vlan)
		return "vlan " + std::to_string(have.vlan) + ", not " + std::to_string(*want.vlan);
	for (std::string d : {differs_u32("mtu", want.mtu, have.mtu),
			      differs_u32("cpu", want.cpu, have.cpu),
			      differs_u32("poll", want.poll_us, have.poll_us),
			      differs_u32("sessions", want.sessions, have.sessions),
			      differs_u32("per-source", want.per_source, have.per_source)})
		if (!d.empty())
			return d;
	if (want.nic_loss && *want.nic_loss != have.nic_loss)
		return std::string("nic-loss ") + nic_loss_name(have.nic_loss) + ", not " +
		       nic_loss_name(*want.nic_loss);
	if (!want.allow.empty() && !same_allow(want.allow, have.allow))
		return "allow " + allow_text(have.allow) + ", not " + allow_text(want.allow);
	uint32_t want_auth = want.key ? want.auth.value_or(uint32_t(NETBLK_AUTH_HEADER))
				       : uint32_t(NETBLK_AUTH_NONE);
	if (want_auth != have.auth)
		return std::string("auth ") + auth_name(have.auth) + ", not " + auth_name(want_auth);
	return {};
}
