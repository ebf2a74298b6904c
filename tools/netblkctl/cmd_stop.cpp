// netblkctl stop: one instance, or every one.
#include "commands.h"

#include <cerrno>
#include <cstdio>

#include "cli.h"
#include "xdp.h"

int cmd_stop(const command_args &argv)
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

