// netblkctl's usage: see usage.h.
#include "usage.h"

#include "config.h"
#include "options.h"

std::string usage_text()
{
	option_usage start = start_option_usage(), attach = attach_option_usage();
	return
		"usage: netblkctl start <blockdev> <port>" + start.synopsis + "\n"
		"                       [--exist-ok]\n"
		"       netblkctl list [--attached] [--json]\n"
		"       netblkctl watch [--interval S] [--count N] [--json]\n"
		"       netblkctl stats --prometheus\n"
		"       netblkctl exporter --listen ADDR:PORT\n"
		"       netblkctl supervise\n"
		"       netblkctl stop <port>|all [--exist-ok]\n"
		"       netblkctl attach <addr> <port>" + attach.synopsis + "\n"
		"       netblkctl detach <netblkN>|all [--force]\n"
		"       netblkctl save [FILE]\n"
		"       netblkctl restore [FILE]\n"
		"       netblkctl genkey\n"
		"       netblkctl --help | --version\n"
		"\n"
		"start   serve <blockdev> over UDP on <port>\n"
		+ start.help +
		"          --exist-ok an instance on <port> with the settings given is success\n"
		"list    the instances, their counters and service time, then the devices attached\n"
		"        here (--json: the instances as a JSON array; --attached: the attached\n"
		"        devices only, --json as a JSON array)\n"
		"watch   every S seconds (default 1) each instance's and attached device's rates\n"
		"        over the last interval, and the module's events as they come, until\n"
		"        SIGINT or SIGTERM or N intervals (--json: one JSON object a line)\n"
		"stats   the counters and the service-time histogram in the Prometheus\n"
		"        text format (node_exporter's textfile collector)\n"
		"exporter  serve the same at http://ADDR:PORT/metrics for a Prometheus\n"
		"        scraper, until SIGINT or SIGTERM (0.0.0.0:PORT: every address)\n"
		"supervise  add netblk's XDP program again to a NIC whose driver dropped it\n"
		"        when the NIC reopened (vmxnet3), so that its waiting instances serve\n"
		"        again, until SIGINT or SIGTERM (netblk-supervise.service runs it)\n"
		"stop    stop serving on <port>, or stop every instance; waits a few seconds for\n"
		"        the disk to finish what it has (list shows an instance that takes longer);\n"
		"        --exist-ok: nothing on <port> is success\n"
		"attach  make /dev/netblkN of the instance at <addr>:<port> (the block-device client)\n"
		+ attach.help +
		"detach  remove /dev/netblkN, or all of them; refused while one is open (mounted)\n"
		"        unless --force, which fails its outstanding I/O\n"
		"save    write the instances and attached devices as they run now to FILE\n"
		"        (default " NETBLK_CONFIG_FILE "), one start or attach line each\n"
		"restore make what runs match FILE: start or attach what is missing, leave\n"
		"        alone what matches, start again what differs, stop or detach the rest\n"
		"genkey  print a new random key for key= (keep it where only root can read it)\n"
		"--version  netblkctl's release and the loaded module's\n";
}
