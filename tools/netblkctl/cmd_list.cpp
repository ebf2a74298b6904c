// netblkctl list, stats and exporter: the instances and attached devices
// as the module's dumps describe them, as text, JSON or Prometheus.
#include "commands.h"

#include <cerrno>
#include <cstdio>

#include "cli.h"
#include "exporter.h"
#include "prometheus.h"
#include "xdp.h"

namespace {

// list without --attached: the instances, then (in text) the attached devices.
void print_list(const std::vector<netblk_instance> &insts,
		const std::vector<netblk_attached> &atts, bool json)
{
	if (json) {
		fputs(format_instances_json(insts).c_str(), stdout);
		return;
	}
	if (insts.empty() && atts.empty()) {
		puts("netblk: no instances");
		return;
	}
	for (const auto &inst : insts)
		fputs(format_instance_text(inst).c_str(), stdout);
	for (const auto &att : atts)
		fputs(format_attached_text(att).c_str(), stdout);
}

// The allowlist's drops happen in the XDP program, before the module: read
// from its map for the instances that have an allowlist.
void read_not_allowed(std::vector<netblk_instance> &insts)
{
	for (netblk_instance &inst : insts)
		if (!inst.allow.empty())
			inst.not_allowed = xdp_not_allowed(inst.ifindex, inst.port);
}

} // namespace

int dump_instances(std::vector<netblk_instance> &insts)
{
	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (nl_status st = client.list(insts); !st.ok())
		return failed(st);
	read_not_allowed(insts);
	return 0;
}

int dump_attached(std::vector<netblk_attached> &atts)
{
	netblk_client client;
	int rc;
	if (!connect(client, rc))
		return rc;
	if (nl_status st = client.attached(atts); !st.ok())
		return failed(st);
	return 0;
}

int cmd_list(const command_args &argv)
{
	bool json = false, attached_only = false;
	for (auto arg : argv) {
		if (arg == "--json")
			json = true;
		else if (arg == "--attached")
			attached_only = true;
		else
			return usage_error("unknown list option '" + std::string(arg) + "'");
	}
	if (attached_only) {
		std::vector<netblk_attached> atts;
		if (int rc = dump_attached(atts))
			return rc;
		if (json)
			fputs(format_attached_json(atts).c_str(), stdout);
		else if (atts.empty())
			puts("netblk: no devices attached");
		else
			for (const auto &a : atts)
				fputs(format_attached_text(a).c_str(), stdout);
		return finish();
	}

	std::vector<netblk_instance> insts;
	if (int rc = dump_instances(insts))
		return rc;
	std::vector<netblk_attached> atts;
	if (!json)
		if (int rc = dump_attached(atts))
			return rc;
	print_list(insts, atts, json);
	return finish();
}

int cmd_stats(const command_args &argv)
{
	if (argv.size() != 1 || argv[0] != "--prometheus")
		return usage_error("stats needs --prometheus");

	std::vector<netblk_instance> insts;
	if (int rc = dump_instances(insts))
		return rc;
	std::vector<netblk_attached> atts;
	if (int rc = dump_attached(atts))
		return rc;
	fputs(format_prometheus(insts, atts).c_str(), stdout);
	return finish();
}

namespace {

// One scrape for the exporter: what `stats --prometheus` prints, or why not.
scrape_result scrape_metrics()
{
	netblk_client client;
	nl_status st = client.connect();
	if (!st.ok())
		return {std::nullopt, st.err == ENOENT ? "the netblk module is not loaded (modprobe netblk)"
						       : st.text()};
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (st = client.list(insts); st.ok())
		st = client.attached(atts);
	if (!st.ok())
		return {std::nullopt, st.text()};
	read_not_allowed(insts);
	return {format_prometheus(insts, atts), {}};
}

} // namespace

int cmd_exporter(const command_args &argv)
{
	if (argv.size() != 2 || argv[0] != "--listen")
		return usage_error("exporter needs --listen ADDR:PORT");
	sockaddr_in addr;
	if (std::string err = parse_listen_address(argv[1], addr); !err.empty())
		return usage_error(err);
	// Say now, not at the first scrape, what would make every scrape fail.
	if (scrape_result r = scrape_metrics(); !r.metrics)
		fprintf(stderr, "netblkctl: warning: %s; /metrics answers 503 until then\n",
			r.error.c_str());
	return run_exporter(addr, scrape_metrics) ? exit_failed : 0;
}

