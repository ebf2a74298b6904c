// What the commands share: see cli.h.
#include "cli.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <sys/stat.h>

int usage_error(const std::string &msg)
{
	fprintf(stderr, "netblkctl: %s\nTry 'netblkctl --help'.\n", msg.c_str());
	return exit_usage;
}

int failed(const nl_status &st)
{
	std::string text = st.text();
	if (st.err == EPERM && st.msg.empty())
		text += " (needs CAP_NET_ADMIN: run as root)";
	fprintf(stderr, "netblkctl: %s\n", text.c_str());
	return exit_failed;
}

bool module_loaded()
{
	struct stat st;
	return stat("/sys/module/netblk", &st) == 0;
}

int finish()
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("netblkctl: writing the output");
		return exit_failed;
	}
	return 0;
}

std::optional<uint32_t> parse_u32(std::string_view s)
{
	uint32_t v;
	const char *end = s.data() + s.size();
	auto [p, ec] = std::from_chars(s.data(), end, v);
	if (s.empty() || ec != std::errc() || p != end)
		return std::nullopt;
	return v;
}

std::optional<uint16_t> parse_port(std::string_view s)
{
	auto v = parse_u32(s);
	if (!v || *v < 1 || *v > 65535)
		return std::nullopt;
	return static_cast<uint16_t>(*v);
}

bool connect(netblk_client &client, int &rc)
{
	nl_status st = client.connect();
	if (st.ok())
		return true;
	if (st.err == ENOENT) {
		fprintf(stderr, "netblkctl: the netblk module is not loaded (modprobe netblk)\n");
		rc = exit_failed;
	} else {
		rc = failed(st);
	}
	return false;
}

bool read_text_file(const std::string &path, std::string &out)
{
	FILE *f = fopen(path.c_str(), "re");
	if (!f)
		return false;
	char buf[4096];
	size_t n;
	out.clear();
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	bool ok = !ferror(f);
	fclose(f);
	return ok;
}

