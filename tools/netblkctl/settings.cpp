// Settings compared: see settings.h.
#include "settings.h"

#include <sys/stat.h>

#include "options.h"

bool same_block_device(const std::string &a, const std::string &b)
{
	if (a == b)
		return true;
	struct stat sa, sb;
	return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && S_ISBLK(sa.st_mode) &&
	       S_ISBLK(sb.st_mode) && sa.st_rdev == sb.st_rdev;
}

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
	if (std::string d = start_options_differ(want, have); !d.empty())
		return d;
	uint32_t want_auth = want.key ? want.auth.value_or(uint32_t(NETBLK_AUTH_HEADER))
				       : uint32_t(NETBLK_AUTH_NONE);
	if (want_auth != have.auth)
		return std::string("auth ") + auth_name(have.auth) + ", not " + auth_name(want_auth);
	return {};
}
