// The configuration file's syntax: see config.h.
#include "config.h"

#include <arpa/inet.h>

#include "options.h"

namespace {

bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

std::vector<std::string> split_words(std::string_view s)
{
	std::vector<std::string> words;
	size_t i = 0;
	while (i < s.size()) {
		while (i < s.size() && blank(s[i]))
			i++;
		size_t j = i;
		while (j < s.size() && !blank(s[j]))
			j++;
		if (j > i)
			words.emplace_back(s.substr(i, j - i));
		i = j;
	}
	return words;
}

std::string ipv4_text(uint32_t addr)
{
	char buf[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &addr, buf, sizeof(buf));
	return buf;
}

} // namespace

std::string parse_config(std::string_view text, const std::string &file,
			 std::vector<config_line> &out)
{
	unsigned lineno = 0;
	while (!text.empty()) {
		size_t nl = text.find('\n');
		std::string_view line = text.substr(0, nl);
		text = nl == text.npos ? std::string_view() : text.substr(nl + 1);
		lineno++;
		if (size_t hash = line.find('#'); hash != line.npos)
			line = line.substr(0, hash);
		std::vector<std::string> words = split_words(line);
		if (words.empty())
			continue;
		std::string where = file + ":" + std::to_string(lineno) + ": ";
		if (words[0] != "start" && words[0] != "attach")
			return where + "unknown command '" + words[0] + "' (want start or attach)";
		if (words.size() < 3)
			return where + words[0] + " needs " +
			       (words[0] == "start" ? "<blockdev> <port>" : "<addr> <port>");
		config_line l;
		l.lineno = lineno;
		l.command = words[0];
		l.args.assign(words.begin() + 1, words.end());
		while (!line.empty() && blank(line.back()))
			line.remove_suffix(1);
		while (!line.empty() && blank(line.front()))
			line.remove_prefix(1);
		l.text = line;
		out.push_back(std::move(l));
	}
	return {};
}

std::string format_start_line(const netblk_instance &inst, const std::string &device,
			      uint32_t nic_mtu)
{
	return "start " + device + " " + std::to_string(inst.port) +
	       format_start_options(inst, nic_mtu);
}

std::string format_attach_line(const netblk_attached &att)
{
	return "attach " + ipv4_text(att.addr) + " " + std::to_string(att.port) +
	       format_attach_options(att);
}

std::string format_config(const std::vector<std::string> &lines)
{
	std::string t =
		"# netblk: the instances this host serves and the devices it attaches.\n"
		"# `netblkctl restore` makes what runs match this file (netblk.service runs\n"
		"# it at boot); `netblkctl save` writes what runs now.  One a line, as the\n"
		"# command line says it: start <blockdev> <port> [option...] or\n"
		"# attach <addr> <port> [option...] -- see netblkctl(8).\n";
	for (const std::string &l : lines)
		t += l + "\n";
	return t;
}
