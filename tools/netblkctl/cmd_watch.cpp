// netblkctl watch and supervise: the commands that run until SIGINT or
// SIGTERM, on the module's events and a timer.
#include "commands.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "watch.h"
#include "xdp.h"

namespace {

struct watch_options {
	double interval = 1.0;		// seconds
	std::optional<uint64_t> count;	// intervals, then exit
	bool json = false;
};

std::optional<double> parse_seconds(std::string_view s)
{
	double v;
	const char *end = s.data() + s.size();
	auto [p, ec] = std::from_chars(s.data(), end, v);
	if (s.empty() || ec != std::errc() || p != end || !(v >= 0.01 && v <= 86400))
		return std::nullopt;
	return v;
}

// "--opt V" or "--opt=V": the value, moving i past it; nullopt when this
// is not --opt.  An --opt without a value gives "".
std::optional<std::string_view> option_value(const std::vector<std::string_view> &argv,
					     size_t &i, std::string_view opt)
{
	std::string_view a = argv[i];
	if (a == opt)
		return ++i < argv.size() ? argv[i] : std::string_view();
	if (a.size() > opt.size() && a.starts_with(opt) && a[opt.size()] == '=')
		return a.substr(opt.size() + 1);
	return std::nullopt;
}

// "" when fine, else what is wrong.
std::string parse_watch_options(const std::vector<std::string_view> &argv, watch_options &o)
{
	for (size_t i = 0; i < argv.size(); i++) {
		if (argv[i] == "--json") {
			o.json = true;
		} else if (auto v = option_value(argv, i, "--interval")) {
			auto secs = parse_seconds(*v);
			if (!secs)
				return "bad --interval '" + std::string(*v) +
				       "' (want seconds, 0.01..86400)";
			o.interval = *secs;
		} else if (auto v = option_value(argv, i, "--count")) {
			auto n = parse_u32(*v);
			if (!n || *n == 0)
				return "bad --count '" + std::string(*v) + "' (want 1..4294967295)";
			o.count = *n;
		} else {
			return "unknown watch option '" + std::string(argv[i]) + "'";
		}
	}
	return {};
}

double clock_seconds(clockid_t clock)
{
	timespec ts;
	clock_gettime(clock, &ts);
	return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// A line of watch's output, flushed at once (stdout may be a pipe or a
// file); false when it could not be written.
bool emit(const std::string &line)
{
	if (fputs(line.c_str(), stdout) < 0 || fputc('\n', stdout) < 0 || fflush(stdout) != 0) {
		perror("netblkctl: writing the output");
		return false;
	}
	return true;
}

// The events queued now; false when they could not be written.
bool print_events(netblk_client &events, bool json)
{
	bool written = true;
	nl_status st = events.read_events([&](const netblk_event_info &ev) -> nl_status {
		double now = clock_seconds(CLOCK_REALTIME);
		written = emit(json ? format_event_json(ev, now) : format_event_text(ev));
		return written ? nl_status{} : nl_error(EIO);
	});
	if (!written)
		return false;
	if (st.err == ENOBUFS)
		fprintf(stderr, "netblkctl: events lost (the socket's receive queue overflowed)\n");
	else if (!st.ok())
		fprintf(stderr, "netblkctl: reading events: %s\n", st.text().c_str());
	return true;
}

bool print_rates(const std::vector<instance_rates> &rates,
		 const std::vector<attached_rates> &att_rates, bool json)
{
	double now = clock_seconds(CLOCK_REALTIME);
	for (const auto &r : rates)
		if (!emit(json ? format_rates_json(r, now) : format_rates_text(r)))
			return false;
	for (const auto &r : att_rates)
		if (!emit(json ? format_attached_rates_json(r, now) : format_attached_rates_text(r)))
			return false;
	return true;
}

// Whether a LIST failed for the module's going.  ENOENT: the family's id is
// gone; EPROTONOSUPPORT: the module is on its way out (netlink cannot pin it
// for the dump).  Not looked up again: resolving the family would have the
// kernel load it.
bool module_unloaded(const nl_status &st)
{
	return st.msg.empty() && (st.err == ENOENT || st.err == EPROTONOSUPPORT);
}

// A LIST of watch failed.
int list_failed(const nl_status &st)
{
	if (module_unloaded(st)) {
		fprintf(stderr, "netblkctl: the netblk module was unloaded\n");
		return exit_failed;
	}
	return failed(st);
}

// SIGINT and SIGTERM, blocked, as a signalfd for the poll set of a command
// that runs until one comes; -1 (said) when it cannot be made.
int end_signals_fd()
{
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, nullptr);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0)
		perror("netblkctl: signalfd");
	return sfd;
}

// For a command that runs until SIGINT or SIGTERM: a client for requests,
// one joined to the events group, and end_signals_fd(); -1 (said, with the
// exit status in `rc`) when one of them cannot be had.
int open_event_loop(netblk_client &requests, netblk_client &events, int &rc)
{
	if (!connect(requests, rc) || !connect(events, rc))
		return -1;
	if (nl_status st = events.join_events(); !st.ok()) {
		rc = failed(st);
		return -1;
	}
	int sfd = end_signals_fd();
	if (sfd < 0)
		rc = exit_failed;
	return sfd;
}

} // namespace

int cmd_watch(const command_args &argv)
{
	watch_options opt;
	if (std::string err = parse_watch_options(argv, opt); !err.empty())
		return usage_error(err);

	// One socket for the dumps, one that only receives events.
	netblk_client dump, events;
	int rc;
	int sfd = open_event_loop(dump, events, rc);
	if (sfd < 0)
		return rc;

	std::vector<netblk_instance> prev, cur;
	std::vector<netblk_attached> prev_att, cur_att;
	if (nl_status st = dump.list(prev); !st.ok())
		return list_failed(st);
	if (nl_status st = dump.attached(prev_att); !st.ok())
		return list_failed(st);
	double t_prev = clock_seconds(CLOCK_MONOTONIC);
	double next = t_prev + opt.interval;
	uint64_t intervals = 0;
	for (;;) {
		double now = clock_seconds(CLOCK_MONOTONIC);
		int timeout = now >= next ? 0 : static_cast<int>(std::ceil((next - now) * 1000));
		pollfd fds[2] = {{events.fd(), POLLIN, 0}, {sfd, POLLIN, 0}};
		if (poll(fds, 2, timeout) < 0 && errno != EINTR) {
			perror("netblkctl: poll");
			return exit_failed;
		}
		if (fds[1].revents & POLLIN)
			break;
		if ((fds[0].revents & (POLLIN | POLLERR)) && !print_events(events, opt.json))
			return exit_failed;
		now = clock_seconds(CLOCK_MONOTONIC);
		if (now < next)
			continue;
		if (nl_status st = dump.list(cur); !st.ok())
			return list_failed(st);
		if (nl_status st = dump.attached(cur_att); !st.ok())
			return list_failed(st);
		now = clock_seconds(CLOCK_MONOTONIC);
		if (!print_rates(compute_all_rates(prev, cur, now - t_prev),
				 compute_attached_rates(prev_att, cur_att, now - t_prev), opt.json))
			return exit_failed;
		prev.swap(cur);
		prev_att.swap(cur_att);
		t_prev = now;
		next += opt.interval;
		if (next <= now)	// a slow dump: skip the ticks it missed
			next = now + opt.interval;
		if (opt.count && ++intervals >= *opt.count)
			break;
	}
	close(sfd);
	return finish();
}

// Mends, as they come, the NICs whose driver dropped netblk's XDP program
// (readd_dropped_programs): a WAITING event says an instance waits for
// something new, and the instances are looked at once a few seconds too --
// an event can be lost, and a NIC that failed to be mended is tried again.
int cmd_supervise(const command_args &argv)
{
	if (!argv.empty())
		return usage_error("supervise takes no arguments");
	if (!module_loaded()) {
		printf("netblk: the module is not loaded: nothing to supervise\n");
		return finish();
	}
	netblk_client client, events;
	int rc;
	int sfd = open_event_loop(client, events, rc);
	if (sfd < 0)
		return rc;
	xdp_quiet_libbpf();
	constexpr int look_ms = 5000;
	bool look = true;
	for (;;) {
		if (look) {
			std::vector<netblk_instance> insts;
			nl_status st = client.list(insts);
			if (module_unloaded(st)) {	// rmmod: not to be undone by a restart
				printf("netblk: the module was unloaded: nothing to supervise\n");
				break;
			}
			if (!st.ok())
				return failed(st);
			readd_dropped_programs(client, insts);
		}
		pollfd fds[2] = {{events.fd(), POLLIN, 0}, {sfd, POLLIN, 0}};
		int n = poll(fds, 2, look_ms);
		if (n < 0 && errno != EINTR) {
			perror("netblkctl: poll");
			return exit_failed;
		}
		if (fds[1].revents & POLLIN)
			break;
		look = n == 0;
		if (fds[0].revents & (POLLIN | POLLERR)) {
			// what the events say is looked up in LIST; lost ones too
			nl_status st = events.read_events([&](const netblk_event_info &ev) -> nl_status {
				look = look || ev.event == NETBLK_EVENT_WAITING;
				return {};
			});
			look = look || st.err == ENOBUFS;
		}
	}
	close(sfd);
	return finish();
}

