// netblkctl attach and detach: /dev/netblkN, the block-device client's
// devices.
#include "commands.h"

#include <cstdio>

#include "cli.h"
#include "options.h"

int cmd_attach(const command_args &argv)
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

int cmd_detach(const command_args &argv)
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

