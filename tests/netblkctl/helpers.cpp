// SPDX-License-Identifier: GPL-2.0
/* What netblkctl's tests share (helpers.h). */
#include "helpers.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace {

// A strict JSON (RFC 8259) validator, enough to say netblkctl's output parses.
class json_checker {
public:
	explicit json_checker(std::string_view s) : s_(s) {}

	// One value and nothing after it but whitespace.
	bool document()
	{
		return value() && (ws(), i_ == s_.size());
	}

private:
	void ws()
	{
		while (i_ < s_.size() && strchr(" \t\r\n", s_[i_]))
			i_++;
	}
	bool eat(char c)
	{
		ws();
		if (i_ < s_.size() && s_[i_] == c)
			return ++i_, true;
		return false;
	}
	bool literal(std::string_view w)
	{
		if (s_.substr(i_, w.size()) != w)
			return false;
		i_ += w.size();
		return true;
	}
	bool digits()
	{
		size_t start = i_;
		while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_])))
			i_++;
		return i_ > start;
	}
	bool number()
	{
		if (i_ < s_.size() && s_[i_] == '-')
			i_++;
		if (i_ < s_.size() && s_[i_] == '0')
			i_++;
		else if (!digits())
			return false;
		if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits()))
			return false;
		if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
			i_++;
			if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
				i_++;
			if (!digits())
				return false;
		}
		return true;
	}
	bool string()
	{
		if (!eat('"'))
			return false;
		while (i_ < s_.size()) {
			auto c = static_cast<unsigned char>(s_[i_++]);
			if (c == '"')
				return true;
			if (c < 0x20)
				return false;
			if (c != '\\')
				continue;
			if (i_ >= s_.size())
				return false;
			char e = s_[i_++];
			if (e == 'u') {
				for (int k = 0; k < 4; k++)
					if (i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_++])))
						return false;
			} else if (!strchr("\"\\/bfnrt", e)) {
				return false;
			}
		}
		return false;
	}
	bool value()
	{
		if (++depth_ > 64)
			return false;
		ws();
		bool ok;
		if (i_ >= s_.size())
			ok = false;
		else if (s_[i_] == '{')
			ok = members('}', true);
		else if (s_[i_] == '[')
			ok = members(']', false);
		else if (s_[i_] == '"')
			ok = string();
		else if (s_[i_] == 't')
			ok = literal("true");
		else if (s_[i_] == 'f')
			ok = literal("false");
		else if (s_[i_] == 'n')
			ok = literal("null");
		else
			ok = number();
		depth_--;
		return ok;
	}
	bool members(char close, bool object)
	{
		i_++;
		if (eat(close))
			return true;
		do {
			if (object && !(string() && eat(':')))
				return false;
			if (!value())
				return false;
		} while (eat(','));
		return eat(close);
	}

	std::string_view s_;
	size_t i_ = 0;
	int depth_ = 0;
};

} // namespace

testing::AssertionResult valid_json(std::string_view s)
{
	if (json_checker(s).document())
		return testing::AssertionSuccess();
	return testing::AssertionFailure() << "not valid JSON:\n" << s;
}

testing::AssertionResult contains(const std::string &text, const std::string &part)
{
	if (text.find(part) != std::string::npos)
		return testing::AssertionSuccess() << "\"" << part << "\" is in:\n" << text;
	return testing::AssertionFailure() << "\"" << part << "\" is not in:\n" << text;
}

testing::AssertionResult starts_with(const std::string &text, const std::string &part)
{
	if (text.starts_with(part))
		return testing::AssertionSuccess();
	return testing::AssertionFailure() << "does not start with \"" << part << "\":\n" << text;
}

testing::AssertionResult ends_with(const std::string &text, const std::string &part)
{
	if (text.ends_with(part))
		return testing::AssertionSuccess();
	return testing::AssertionFailure() << "does not end with \"" << part << "\":\n" << text;
}

latency_hist sparse_of(const nb::histogram &h, bool reversed)
{
	latency_hist l;
	l.present = true;
	l.count = h.count();
	l.max_ns = h.max();
	l.linear_limit = nb::histogram::linear_limit;
	l.sub_buckets = nb::histogram::sub_buckets;
	for (uint32_t i = 0; i < nb::histogram::bucket_count; i++)
		if (h.bucket(i))
			l.buckets.emplace_back(i, h.bucket(i));
	if (reversed)
		std::reverse(l.buckets.begin(), l.buckets.end());
	return l;
}

// 98 samples of 75712 ns and 2 of 225757123 ns (hand-checked below).
nb::histogram *small_histogram()
{
	static nb::histogram h;
	h.reset();
	for (int i = 0; i < 98; i++)
		h.record(75712);
	h.record(225757123);
	h.record(225757123);
	return &h;
}

netblk_instance example()
{
	netblk_instance i;
	i.device = "/dev/nvme0n1p2";
	i.disk_name = "nvme0n1p2";
	i.port = 7000;
	uint8_t a[4] = {10, 0, 2, 15};
	memcpy(&i.addr, a, 4);
	i.ifname = "eth0";
	i.ifindex = 2;
	i.handoff_ifindex = 9;
	i.mtu = 1500;
	i.cpu = 1;
	i.poll_us = 50;
	i.size = 256 * MiB;
	i.sector_size = 512;
	i.max_io = 1024;
	i.slots = 256;
	i.sessions = 1024;
	i.per_source = 16;
	i.auth = NETBLK_AUTH_HEADER;
	i.uptime_ms = 21800;
	i.stats[NETBLK_S_REQUESTS] = 1246965;
	i.stats[NETBLK_S_READS] = 765567;
	i.stats[NETBLK_S_READ_BYTES] = 747 * MiB;
	i.stats[NETBLK_S_WRITES] = 481394;
	i.stats[NETBLK_S_WRITE_BYTES] = 470 * MiB;
	i.stats[NETBLK_S_FLUSHES] = 3;
	i.stats[NETBLK_S_DISK_BUSY] = 369;
	i.stats[NETBLK_S_WORKER_SLEEPS] = 192176;
	i.stats[NETBLK_S_SESSIONS_OPEN] = 3;
	i.stats[NETBLK_S_SESSIONS_OPENED] = 5;
	i.stats[NETBLK_S_SESSIONS_EVICTED] = 2;
	i.stats[NETBLK_S_DUPLICATES] = 17;
	i.stats[NETBLK_S_HELLO_COOKIES] = 6;
	return i;
}

netblk_instance p1_on_eth0()
{
	netblk_instance i;
	i.device = "/dev/nvme0n1p1";
	i.port = 7000;
	i.ifname = "eth0";
	i.mtu = 1500;
	i.sessions = 1024;
	i.per_source = 16;
	return i;
}

/* The block-device client's /dev/netblk0 on 10.9.0.1:7000, with traffic. */
netblk_attached attached_example()
{
	netblk_attached a;
	uint8_t ip[4] = {10, 9, 0, 1};
	a.disk = "netblk0";
	memcpy(&a.addr, ip, 4);
	a.port = 7000;
	a.size = 256ull << 20;
	a.max_io = 1024;
	a.slots = 256;
	a.queue_depth = 64;
	a.uptime_ms = 21500;
	a.stats[NETBLK_HS_REQUESTS] = 1025;
	a.stats[NETBLK_HS_SENDS] = 4190;
	a.stats[NETBLK_HS_RX_DATAGRAMS] = 4170;
	a.stats[NETBLK_HS_WINDOW] = 26;
	a.stats[NETBLK_HS_TIMEOUTS] = 89;
	a.stats[NETBLK_HS_FAST_RESENDS] = 12;
	a.stats[NETBLK_HS_FAST_SPURIOUS] = 10;
	a.stats[NETBLK_HS_REORDERING] = 140;
	a.stats[NETBLK_HS_SRTT_NS] = 3572500;
	a.stats[NETBLK_HS_RTO_NS] = 20000000;
	a.stats[NETBLK_HS_SESSIONS_OPENED] = 2;
	a.stats[NETBLK_HS_RENUMBERED] = 4;
	a.stats[NETBLK_HS_BYTES_IN_PLACE] = 4300000;
	a.stats[NETBLK_HS_TX_BATCHED] = 3900;
	return a;
}

void expect_region(const doc_region &r, const std::string &want)
{
	const std::string regen = "NETBLK_UPDATE_DOCS=1 build/unit/netblkctl_tests";
	const std::string begin = std::string(r.open) + r.name + ": begin (made by " + r.maker +
				  "; " + regen + ")" + r.close;
	const std::string end = std::string(r.open) + r.name + ": end" + r.close;
	std::ifstream in(r.path);
	ASSERT_TRUE(in) << "cannot read " << r.path
			<< " (run the unit tests from the repository's top directory)";
	std::stringstream buf;
	buf << in.rdbuf();
	std::string text = buf.str();
	size_t a = text.find(begin), b = text.find(end);
	ASSERT_TRUE(a != std::string::npos && b != std::string::npos && a < b)
		<< r.path << " has no " << r.name << " markers: " << begin;
	a += begin.size();
	if (text.substr(a, b - a) != want && getenv("NETBLK_UPDATE_DOCS")) {
		text.replace(a, b - a, want);
		std::ofstream(r.path) << text;
		return;
	}
	EXPECT_EQ(text.substr(a, b - a), want)
		<< r.path << ": \"" << r.name << "\" is not what " << r.maker
		<< " makes: " << regen;
}
