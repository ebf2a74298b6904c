/*
 * The user documentation made from netblkctl's usage, its option tables and
 * kmod/uapi/netblk_options.h's knob list (usage.h, prometheus.h): each
 * region of README.md, netblkctl(8), the bash completion and
 * tools/netblkctl/README.md is what netblkctl says now, so that a knob added
 * to the list is documented by NETBLK_UPDATE_DOCS=1
 * build/unit/netblkctl_tests and cannot be left out.
 */
#include <gtest/gtest.h>

#include "helpers.h"
#include "prometheus.h"
#include "usage.h"

namespace {

constexpr char readme[] = "README.md";
constexpr char man[] = "man/netblkctl.8.scd";
constexpr char completion[] = "tools/netblkctl/netblkctl.bash-completion";

TEST(Docs, TheReadmeUsageIsNetblkctls)
{
	expect_region({readme, "<!-- ", " -->\n", "usage", "format_readme_usage()"},
		      format_readme_usage());
	/* netblkctl's own README had a hand copy, without per-source=, disk-tries=, queues= */
	expect_region({"tools/netblkctl/README.md", "<!-- ", " -->\n", "usage",
		       "format_readme_usage()"},
		      format_readme_usage());
}

TEST(Docs, TheReadmeDescribesEveryGenKnob)
{
	expect_region({readme, "<!-- ", " -->\n", "start knobs", "format_readme_knobs()"},
		      format_readme_knobs());
}

TEST(Docs, TheManSynopsisIsTheUsage)
{
	expect_region({man, "; ", "\n", "synopsis", "format_man_synopsis()"},
		      format_man_synopsis());
}

TEST(Docs, TheManDescribesEveryGenKnob)
{
	expect_region({man, "; ", "\n", "start knobs", "format_man_knobs()"},
		      format_man_knobs(knob_command::start));
	expect_region({man, "; ", "\n", "attach knobs", "format_man_knobs()"},
		      format_man_knobs(knob_command::attach));
}

TEST(Docs, TheCompletionOffersEveryOption)
{
	expect_region({completion, "\t\t\t# ", "\n", "start options",
		       "format_completion_options()"},
		      format_completion_options(knob_command::start));
	expect_region({completion, "\t\t\t# ", "\n", "attach options",
		       "format_completion_options()"},
		      format_completion_options(knob_command::attach));
}

TEST(Docs, TheReadmeNamesEveryInstanceInfoLabel)
{
	expect_region({"tools/netblkctl/README.md", "<!-- ", " -->", "instance_info",
		       "format_instance_info_docs()"},
		      format_instance_info_docs());
}

/* The scdoc of a synopsis: bold words, underlined placeholders. */
TEST(Docs, TheManSynopsisMarksUpTheUsage)
{
	std::string s = format_man_synopsis();
	EXPECT_TRUE(contains(s, "\n\n*netblkctl stats --prometheus*\n\n"));
	EXPECT_TRUE(contains(s, "\n\n*netblkctl exporter --listen* _ADDR_:_PORT_\n\n"));
	EXPECT_TRUE(contains(s, "\n\n*netblkctl stop* _port_|*all* [*--exist-ok*]\n\n"));
	EXPECT_TRUE(contains(s, " [*key=*_FILE_ [*auth=*header|full]] "));
	EXPECT_TRUE(contains(s, " [*allow=*_PREFIX_[,_PREFIX_...]] "));
	EXPECT_TRUE(ends_with(s, "\n\n*netblkctl --help* | *--version*\n"));
}

} // namespace
