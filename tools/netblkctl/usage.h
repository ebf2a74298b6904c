// netblkctl's usage, as --help prints it, and the user documentation made
// from it and from kmod/uapi/netblk_options.h's knob list: each a region of
// its file (README.md, man/netblkctl.8.scd, netblkctl.bash-completion)
// between markers, which tests/netblkctl/test_docs.cpp compares with what
// these say and NETBLK_UPDATE_DOCS=1 build/unit/netblkctl_tests writes.
#pragma once

#include <string>

// The whole usage: each command's synopsis, then what each does; start's
// and attach's options from their tables (options.h).
std::string usage_text();

// README.md's "## netblkctl" block: the usage's synopses, indented as code,
// between blank lines.
std::string format_readme_usage();

// README.md's bullets of START's "gen" knobs, after the hand-written ones:
// "- `disk-tries=`: <its help>." a knob.
std::string format_readme_knobs();

// netblkctl(8)'s SYNOPSIS: each of the usage's synopses a paragraph, in
// scdoc's bold and underline.
std::string format_man_synopsis();

// The command whose "gen" knobs or options a text is of.
enum class knob_command { start, attach };

// netblkctl(8)'s entries of the command's "gen" knobs, after its
// hand-written ones: "\t*disk-tries=*_N_\n\t\t<Its help>.\n\n" a knob.
std::string format_man_knobs(knob_command c);

// The bash completion's line that offers the command's options after
// <port>.
std::string format_completion_options(knob_command c);
