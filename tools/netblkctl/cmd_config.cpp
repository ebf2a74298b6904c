// netblkctl save and restore: what runs, to and from the configuration
// file (config.h).
#include "commands.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "options.h"
#include "settings.h"
#include "xdp.h"

namespace {

std::vector<std::string_view> views(const std::vector<std::string> &words)
{
	return {words.begin(), words.end()};
}

// A name of the block device at `path` that survives a reboot: a link in
// /dev/disk/by-id (then by-partuuid, by-uuid, by-path) to the same device;
// `path` itself when it is one already or when there is none.
std::string stable_device_path(const std::string &path)
{
	struct stat want;
	if (path.starts_with("/dev/disk/") || path.starts_with("/dev/mapper/") ||
	    stat(path.c_str(), &want) != 0 || !S_ISBLK(want.st_mode))
		return path;
	for (const char *dir : {"/dev/disk/by-id", "/dev/disk/by-partuuid", "/dev/disk/by-uuid",
				"/dev/disk/by-path"}) {
		DIR *d = opendir(dir);
		if (!d)
			continue;
		std::vector<std::string> names;
		while (dirent *e = readdir(d))
			if (e->d_name[0] != '.')
				names.emplace_back(e->d_name);
		closedir(d);
		std::sort(names.begin(), names.end());
		for (const std::string &name : names) {
			std::string link = std::string(dir) + "/" + name;
			struct stat st;
			if (stat(link.c_str(), &st) == 0 && S_ISBLK(st.st_mode) &&
			    st.st_rdev == want.st_rdev)
				return link;
		}
	}
	return path;
}

// One line of the file, parsed.
struct config_entry {
	config_line line;
	netblk_start_args start;	// command "start"
	netblk_attach_args attach;	// command "attach"
	std::string nic;		// start: the XDP NIC (dev= or the default route's)
};

// The file's lines as commands: all of them parsed (key files read), or
// the first thing wrong as "FILE:N: ...".
std::string load_config(const std::string &file, std::vector<config_entry> &out)
{
	std::string text;
	if (!read_text_file(file, text))
		return "cannot read " + file + ": " + strerror(errno) +
		       (errno == ENOENT ? " (netblkctl save writes one)" : "");
	std::vector<config_line> lines;
	if (std::string err = parse_config(text, file, lines); !err.empty())
		return err;
	for (config_line &l : lines) {
		config_entry e;
		std::string where = file + ":" + std::to_string(l.lineno) + ": ";
		if (l.command == "start") {
			bool exist_ok = false;
			if (std::string err = parse_start_argv(views(l.args), e.start, exist_ok);
			    !err.empty())
				return where + err;
			if (exist_ok)
				return where + "--exist-ok has no place here (restore compares anyway)";
			if (!e.start.ifname && !(e.start.ifname = default_route_ifname()))
				return where + "no default route: name the NIC with dev=IFACE";
			e.nic = vlan_real_device(*e.start.ifname);
			for (const config_entry &o : out)
				if (o.line.command == "start" && o.start.port == e.start.port)
					return where + "port " + std::to_string(e.start.port) +
					       " again (line " + std::to_string(o.line.lineno) + ")";
		} else {
			if (std::string err = parse_attach_argv(views(l.args), e.attach); !err.empty())
				return where + err;
			for (const config_entry &o : out)
				if (o.line.command == "attach" && o.attach.addr == e.attach.addr &&
				    o.attach.port == e.attach.port)
					return where + "that instance again (line " +
					       std::to_string(o.line.lineno) + ")";
		}
		e.line = std::move(l);
		out.push_back(std::move(e));
	}
	return {};
}

// save's and restore's [FILE]: "" when fine (the default file if none).
std::string config_file_arg(const std::vector<std::string_view> &argv, const char *cmd,
			    std::string &file)
{
	if (argv.size() > 1)
		return std::string(cmd) + " takes at most one FILE";
	file = argv.empty() ? NETBLK_CONFIG_FILE : std::string(argv[0]);
	return {};
}

// The instances and the attached devices; 0, or the exit status of the
// failure (already reported).
int dump_running(std::vector<netblk_instance> &insts, std::vector<netblk_attached> &atts)
{
	if (int rc = dump_instances(insts))
		return rc;
	return dump_attached(atts);
}

// The attach line and the attached device name one instance (addr:port).
bool same_target(const netblk_attach_args &a, const netblk_attached &att)
{
	return a.addr == att.addr && a.port == att.port;
}

} // namespace

// save [FILE]: what runs now, one line each.  A line of the file that still
// describes what runs is kept as written (its key=, its cpu=); a keyed
// instance or attachment the file does not describe cannot be written
// (the kernel never gives a key back) and fails the save.
int cmd_save(const command_args &argv)
{
	std::string file;
	if (std::string err = config_file_arg(argv, "save", file); !err.empty())
		return usage_error(err);
	std::vector<config_entry> old;
	if (access(file.c_str(), F_OK) == 0) {
		if (std::string err = load_config(file, old); !err.empty()) {
			fprintf(stderr, "netblkctl: %s: fix it or remove it first\n", err.c_str());
			return exit_failed;
		}
	}
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (int rc = dump_running(insts, atts))
		return rc;

	std::vector<std::string> lines;
	std::vector<std::string> unsaved;
	for (const netblk_instance &inst : insts) {
		if (inst.stopping())
			continue;
		const config_entry *kept = nullptr;
		for (const config_entry &e : old)
			if (e.line.command == "start" && e.start.port == inst.port &&
			    start_differs(e.start, e.nic, inst).empty())
				kept = &e;
		if (kept)
			lines.push_back(kept->line.text);
		else if (inst.auth != NETBLK_AUTH_NONE)
			unsaved.push_back("port " + std::to_string(inst.port));
		else
			lines.push_back(format_start_line(inst, stable_device_path(inst.device),
							  nic_mtu(inst.ifname)));
	}
	for (const netblk_attached &att : atts) {
		const config_entry *kept = nullptr;
		for (const config_entry &e : old)
			if (e.line.command == "attach" && same_target(e.attach, att) &&
			    e.attach.read_only == att.read_only &&
			    (e.attach.key.has_value() == (att.auth != NETBLK_AUTH_NONE)))
				kept = &e;
		if (kept)
			lines.push_back(kept->line.text);
		else if (att.auth != NETBLK_AUTH_NONE)
			unsaved.push_back(att.disk);
		else
			lines.push_back(format_attach_line(att));
	}
	if (!unsaved.empty()) {
		std::string list;
		for (const std::string &u : unsaved)
			list += (list.empty() ? "" : ", ") + u;
		fprintf(stderr, "netblkctl: %s take%s a key, which the kernel does not give back, "
			"and %s has no line for %s: add it there by hand (... key=FILE); "
			"nothing was written\n", list.c_str(), unsaved.size() == 1 ? "s" : "",
			file.c_str(), unsaved.size() == 1 ? "it" : "them");
		return exit_failed;
	}

	// Written beside it and renamed over it: a crash leaves the old or the new.
	std::string dir = file.substr(0, file.rfind('/'));
	if (file.starts_with(NETBLK_CONFIG_FILE) && !dir.empty())
		mkdir(dir.c_str(), 0755);
	std::string tmp = file + ".tmp";
	std::string text = format_config(lines);
	int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
	    fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), file.c_str()) != 0) {
		fprintf(stderr, "netblkctl: cannot write %s: %s\n", file.c_str(), strerror(errno));
		unlink(tmp.c_str());
		return exit_failed;
	}
	size_t n_att = atts.size(), n_inst = lines.size() - n_att;
	printf("netblk: saved %zu instance%s and %zu attached device%s to %s\n", n_inst,
	       n_inst == 1 ? "" : "s", n_att, n_att == 1 ? "" : "s", file.c_str());
	return finish();
}

// restore [FILE]: what runs made to match the file -- started what is
// missing, left alone what already matches, started again what differs,
// stopped (detached) what the file does not name -- each step said.  Every
// line is checked before anything is done; a step that fails does not stop
// the others, and makes the exit status 1.
int cmd_restore(const command_args &argv)
{
	std::string file;
	if (std::string err = config_file_arg(argv, "restore", file); !err.empty())
		return usage_error(err);
	std::vector<config_entry> want;
	if (std::string err = load_config(file, want); !err.empty()) {
		fprintf(stderr, "netblkctl: %s; nothing was changed\n", err.c_str());
		return exit_failed;
	}
	std::vector<netblk_instance> insts;
	std::vector<netblk_attached> atts;
	if (int rc = dump_running(insts, atts))
		return rc;

	int result = 0;
	auto step = [&](int rc) {
		fflush(stdout);
		if (rc != 0)
			result = exit_failed;
	};
	for (const netblk_instance &inst : insts) {
		bool named = false;
		for (const config_entry &e : want)
			named |= e.line.command == "start" && e.start.port == inst.port;
		if (!named && !inst.stopping()) {
			printf("netblk: port %u is not in %s: stopping it\n", inst.port, file.c_str());
			step(cmd_stop({std::to_string(inst.port)}));
		}
	}
	for (const netblk_attached &att : atts) {
		bool named = false;
		for (const config_entry &e : want)
			named |= e.line.command == "attach" && same_target(e.attach, att);
		if (!named) {
			printf("netblk: %s is not in %s: detaching it\n", att.disk.c_str(), file.c_str());
			step(cmd_detach({att.disk}));
		}
	}
	for (const config_entry &e : want) {
		std::vector<std::string_view> args = views(e.line.args);
		if (e.line.command == "attach") {
			const netblk_attached *have = nullptr;
			for (const netblk_attached &att : atts)
				if (same_target(e.attach, att))
					have = &att;
			if (have) {
				printf("netblk: %s %s: attached already (%s)\n", file.c_str(),
				       e.line.text.c_str(), have->disk.c_str());
				continue;
			}
			step(cmd_attach(args));
			continue;
		}
		const netblk_instance *have = nullptr;
		for (const netblk_instance &inst : insts)
			if (inst.port == e.start.port)
				have = &inst;
		if (have) {
			std::string diff = start_differs(e.start, e.nic, *have);
			if (diff.empty()) {
				printf("netblk: port %u: serving as %s says\n", e.start.port,
				       file.c_str());
				continue;
			}
			printf("netblk: port %u differs from %s (%s): starting it again\n",
			       e.start.port, file.c_str(), diff.c_str());
			if (!have->stopping()) {
				int rc = cmd_stop({std::to_string(e.start.port)});
				step(rc);
				if (rc != 0)
					continue;
			}
		}
		step(cmd_start(args));
	}
	return result ? result : finish();
}

