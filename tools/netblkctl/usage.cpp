// netblkctl's usage and the documentation made from it: see usage.h.
#include "usage.h"

#include <cctype>
#include <string_view>
#include <vector>

#include "config.h"
#include "netblk_options.h"
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

namespace {

// The columns of the usage's synopses: "usage: " or its width of blanks
// before each command, more before the lines an option breaks onto.
constexpr size_t command_column = 7;

// The usage's synopses, a line each as it prints them (the first
// paragraph, up to the blank line).
std::vector<std::string> synopsis_lines()
{
	std::string text = usage_text();
	std::vector<std::string> lines;
	for (size_t at = 0, nl; (nl = text.find('\n', at)) != text.npos && nl != at; at = nl + 1)
		lines.push_back(text.substr(at, nl - at));
	return lines;
}

// A line that starts a command's synopsis, not one an option broke onto.
bool starts_command(const std::string &line)
{
	return line.size() > command_column && line[command_column] != ' ';
}

bool is_lower(char c)
{
	return islower(static_cast<unsigned char>(c));
}

bool is_word_char(char c)
{
	return is_lower(c) || isdigit(static_cast<unsigned char>(c)) || c == '-';
}

// A literal word of the usage: "start", "--json", "ro"; not "<port>" or
// "FILE" or "|".
bool is_literal(std::string_view w)
{
	if (w.starts_with("--"))
		w.remove_prefix(2);
	if (w.empty() || !is_lower(w[0]))
		return false;
	for (char c : w)
		if (!is_word_char(c))
			return false;
	return true;
}

// The word at `i` bold, with its '=' when it takes a value, and a choice's
// words after it plain ("*auth=*header|full"); where it ends.
size_t mark_word(std::string_view s, size_t i, std::string &out)
{
	size_t j = i + 1;
	while (j < s.size() && is_word_char(s[j]))
		j++;
	bool takes_value = j < s.size() && s[j] == '=';
	j += takes_value;
	out += "*" + std::string(s.substr(i, j - i)) + "*";
	while (takes_value && j < s.size() && (is_lower(s[j]) || s[j] == '|'))
		out += s[j++];
	return j;
}

// The placeholder at `i` underlined ("<port>", "IFACE": "_port_",
// "_IFACE_"); where it ends.
size_t mark_placeholder(std::string_view s, size_t i, std::string &out)
{
	size_t j = i + 1;
	if (s[i] == '<') {
		j = s.find('>', i) + 1;
		out += "_" + std::string(s.substr(i + 1, j - i - 2)) + "_";
		return j;
	}
	while (j < s.size() && isalpha(static_cast<unsigned char>(s[j])))
		j++;
	out += "_" + std::string(s.substr(i, j - i)) + "_";
	return j;
}

// The usage's words after a command in scdoc: words and option names bold
// ("[*ro*]", "*dev=*"), <placeholders> and upper-case names underlined
// ("_port_", "_IFACE_"), a choice's words after '=' plain ("header|full"),
// the rest as it is.
std::string man_markup(std::string_view s)
{
	std::string out;
	for (size_t i = 0; i < s.size();) {
		bool placeholder = (s[i] == '<' && s.find('>', i) != s.npos) ||
				   isupper(static_cast<unsigned char>(s[i]));
		if (placeholder)
			i = mark_placeholder(s, i, out);
		else if (is_lower(s[i]) || s.substr(i, 2) == "--")
			i = mark_word(s, i, out);
		else
			out += s[i++];
	}
	return out;
}

// A synopsis in scdoc: the command and the words that follow it bold as
// one ("*netblkctl stats --prometheus*"), then the rest marked up.
std::string man_synopsis(std::string_view line)
{
	size_t end = 0;
	for (size_t at = 0; at < line.size();) {
		size_t sp = std::min(line.find(' ', at), line.size());
		if (!is_literal(line.substr(at, sp - at)))
			break;
		end = sp;
		at = sp + 1;
	}
	return "*" + std::string(line.substr(0, end)) + "*" + man_markup(line.substr(end));
}

// `text`'s words in lines of at most `width` characters, `first` and
// `next` included: what begins the first line and the others.
std::string wrap(const std::string &first, const std::string &next, std::string_view text,
		 size_t width)
{
	std::string out, line = first;
	size_t line_start = line.size();	// where the line's words begin
	while (!text.empty()) {
		size_t sp = std::min(text.find(' '), text.size());
		std::string_view w = text.substr(0, sp);
		text.remove_prefix(std::min(sp + 1, text.size()));
		bool first_word = line.size() == line_start;
		if (!first_word && line.size() + 1 + w.size() > width) {
			out += line + "\n";
			line = next;
			line_start = line.size();
			first_word = true;
		}
		line += (first_word ? "" : " ") + std::string(w);
	}
	return out + line + "\n";
}

// A knob of netblk_options.h marked "gen", as its docs say it.
struct knob_doc {
	const char *cli;	// the word before '=' (a flag's whole word)
	const char *metavar;
	const char *help;	// lines separated by '\n'
	bool flag;
};

#define KNOB_FLAG_flag true
#define KNOB_FLAG_u16 false
#define KNOB_FLAG_u32 false
#define KNOB_DOC_own(cli, mv, hlp, is_flag)
#define KNOB_DOC_gen(cli, mv, hlp, is_flag) {cli, mv, hlp, is_flag},
#define KNOB_DOC(NAME, fld, nr, type, lo, hi, dflt, ctl, cli, mv, hlp)		\
	KNOB_DOC_##ctl(cli, mv, hlp, KNOB_FLAG_##type)

std::vector<knob_doc> gen_knobs(knob_command c)
{
	if (c == knob_command::attach)
		return {NETBLK_ATTACH_OPTIONS(KNOB_DOC)};
	return {NETBLK_START_OPTIONS(KNOB_DOC)};
}

// The help as one sentence: its lines joined, a full stop at the end.
std::string sentence(const knob_doc &k)
{
	std::string s = k.help;
	for (char &c : s)
		if (c == '\n')
			c = ' ';
	return s.ends_with('.') ? s : s + ".";
}

// Text in scdoc: its own marks escaped, but an underscore inside a word
// ("BLK_STS_AGAIN"), which scdoc leaves alone.
std::string man_escape(std::string_view s)
{
	std::string out;
	auto alnum_at = [s](size_t i) {
		return i < s.size() && isalnum(static_cast<unsigned char>(s[i]));
	};
	for (size_t i = 0; i < s.size(); i++) {
		bool in_word = i > 0 && alnum_at(i - 1) && alnum_at(i + 1);
		if (s[i] == '\\' || s[i] == '*' || (s[i] == '_' && !in_word))
			out += '\\';
		out += s[i];
	}
	return out;
}

// The widths of the generated paragraphs: README.md's bullets, and the man
// page's text after its two tabs (a tab counted as one).
constexpr size_t readme_width = 76;
constexpr size_t man_width = 66;

} // namespace

std::string format_readme_usage()
{
	std::string out = "\n";
	for (const std::string &line : synopsis_lines())
		out += "    " + line.substr(command_column) + "\n";
	return out + "\n";
}

std::string format_readme_knobs()
{
	std::string out;
	for (const knob_doc &k : gen_knobs(knob_command::start))
		out += wrap("- `" + std::string(k.cli) + (k.flag ? "" : "=") + "`: ", "  ",
			    sentence(k), readme_width);
	return out;
}

std::string format_man_synopsis()
{
	std::string out, line;
	for (const std::string &l : synopsis_lines()) {
		if (starts_command(l) && !line.empty()) {
			out += man_synopsis(line) + "\n\n";
			line.clear();
		}
		size_t text = l.find_first_not_of(' ', command_column);
		line += (line.empty() ? "" : " ") + l.substr(text);
	}
	return out + man_synopsis(line) + "\n";
}

std::string format_man_knobs(knob_command c)
{
	std::string out;
	for (const knob_doc &k : gen_knobs(c)) {
		std::string label = k.cli;
		if (!k.flag)
			label += "=" + std::string(k.metavar);
		std::string text = man_escape(sentence(k));
		text[0] = static_cast<char>(toupper(static_cast<unsigned char>(text[0])));
		out += "\t" + man_markup(label) + "\n" + wrap("\t\t", "\t\t", text, man_width) +
		       "\n";
	}
	return out;
}

std::string format_completion_options(knob_command c)
{
	std::string words = c == knob_command::start ? start_option_words() : attach_option_words();
	return "\t\t\tCOMPREPLY=($(compgen -W \"" + words + "\" -- \"$cur\"))\n";
}
