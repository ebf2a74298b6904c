// netblkctl: start, stop, list and watch the instances of netblk.ko.  This
// file: --help, --version and which command runs; the usage is usage.cpp's,
// the commands are in cmd_*.cpp (commands.h), what they share in cli.h.
//
// Exit status: 0 done, 1 the kernel refused (or is unreachable), 2 bad usage.
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "usage.h"

namespace {

// /sys/module/netblk/version; "" for a module without one, nullopt when
// the module is not loaded.
std::optional<std::string> loaded_module_version()
{
	if (!module_loaded())
		return std::nullopt;
	std::string v;
	if (!read_text_file("/sys/module/netblk/version", v))
		v.clear();
	return v;
}

int cmd_version(const command_args &argv)
{
	if (!argv.empty())
		return usage_error("--version takes no arguments");
	std::optional<std::string> mod = loaded_module_version();
	fputs(format_version(mod ? std::optional<std::string_view>(*mod) : std::nullopt).c_str(),
	      stdout);
	return finish();
}

// --help, -h, help: the usage on stdout (words after it are not looked at).
int cmd_help(const command_args &)
{
	fputs(usage_text().c_str(), stdout);
	return finish();
}

struct command {
	const char *name;
	int (*run)(const command_args &argv);
};

const command commands[] = {
	{"start", cmd_start},
	{"stop", cmd_stop},
	{"list", cmd_list},
	{"stats", cmd_stats},
	{"exporter", cmd_exporter},
	{"attach", cmd_attach},
	{"detach", cmd_detach},
	{"save", cmd_save},
	{"restore", cmd_restore},
	{"watch", cmd_watch},
	{"supervise", cmd_supervise},
	{"genkey", cmd_genkey},
	{"--version", cmd_version},
	{"version", cmd_version},
	{"--help", cmd_help},
	{"-h", cmd_help},
	{"help", cmd_help},
};

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text().c_str(), stderr);
		return exit_usage;
	}
	std::string_view name = argv[1];
	command_args args(argv + 2, argv + argc);
	for (const command &c : commands)
		if (name == c.name)
			return c.run(args);
	return usage_error("unknown command '" + std::string(name) + "'");
}
