// SPDX-License-Identifier: GPL-2.0
/* /etc/netblk/netblk.conf (config.cpp): its syntax, and the lines save writes. */
#include "helpers.h"

#include <arpa/inet.h>
#include <string>
#include <vector>

#include "config.h"

// /etc/netblk/netblk.conf: its syntax, and the lines save writes.
TEST(Config, ParsesTheFileAndSaveWritesItsLines)
{
	std::vector<config_line> lines;
	EXPECT_EQ(parse_config("# a comment\n\n  start /dev/vdb 7000 ro   dev=eth0 # served\n"
		"attach 10.0.0.1 7000\ttimeout=30\r\n",
		"f.conf", lines), "") << "config parses";
	ASSERT_EQ(lines.size(), 2u) << "config: two lines";
	EXPECT_TRUE(lines[0].lineno == 3 && lines[0].command == "start") << "config: start line";
	EXPECT_EQ(lines[0].args, (std::vector<std::string>{"/dev/vdb", "7000", "ro", "dev=eth0"}))
		<< "config: start words";
	EXPECT_EQ(lines[0].text, "start /dev/vdb 7000 ro   dev=eth0") << "config: text kept";
	EXPECT_EQ(lines[1].args, (std::vector<std::string>{"10.0.0.1", "7000", "timeout=30"}))
		<< "config: tab and CR";
}

TEST(Config, ParseErrorsSayTheFileLineAndWhatIsWrong)
{
	std::vector<config_line> lines;
	EXPECT_EQ(parse_config("start /dev/vdb 7000\nserve /dev/vdc 7001\n", "f.conf", lines),
		  "f.conf:2: unknown command 'serve' (want start or attach)")
		<< "config: bad command";
	EXPECT_EQ(parse_config("attach 10.0.0.1\n", "f.conf", lines),
		  "f.conf:1: attach needs <addr> <port>")
		<< "config: short line";
}

TEST(Config, SaveWritesStartAndAttachLinesWithWhatIsNotDefault)
{
	netblk_instance i = p1_on_eth0();
	EXPECT_EQ(format_start_line(i, "/dev/disk/by-id/nvme-x-part1", 1500),
		  "start /dev/disk/by-id/nvme-x-part1 7000 dev=eth0")
		<< "save: defaults left out";
	i.read_only = true;
	i.vlan = 5;
	i.mtu = 1200;
	i.poll_us = 50;
	i.sessions = 16;
	i.per_source = 4;
	i.allow = {{htonl(0x0a010000), 16, {}}, {htonl(0x0a020304), 32, {}}};
	EXPECT_EQ(format_start_line(i, i.device, 1500),
		  "start /dev/nvme0n1p1 7000 ro dev=eth0 vlan=5 mtu=1200 poll=50 sessions=16 "
		  "per-source=4 allow=10.1.0.0/16,10.2.3.4") << "save: every setting";
	netblk_attached a;
	a.disk = "netblk0";
	a.addr = htonl(0x0a000001);
	a.port = 7000;
	a.queue_depth = 64;
	EXPECT_EQ(format_attach_line(a), "attach 10.0.0.1 7000 queue-depth=64") << "save: attach";
	a.read_only = true;
	a.ifname = "eth1";
	a.timeout_ms = 30000;
	EXPECT_EQ(format_attach_line(a),
		  "attach 10.0.0.1 7000 ro dev=eth1 queue-depth=64 timeout=30")
		<< "save: attach, every setting";
	EXPECT_TRUE(format_config({"start /dev/vdb 7000"}).ends_with("\nstart /dev/vdb 7000\n"))
		<< "save: the file ends with the lines";
}
