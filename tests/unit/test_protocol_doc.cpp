// SPDX-License-Identifier: GPL-2.0
/*
 * docs/protocol.md's worked example against the core: its bytes are what
 * the instance makes of the same secret, key, time, addresses and nonce --
 * the HELLO, its cookie, the HELLO bringing it back, the session it opens,
 * a tagged READ and its first answer -- and its export ids are the core's.
 * The same blocks are checked against the Python client by
 * tests/client/test_protocol_doc.py.  Run from the repository's top
 * directory (make unit does).
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fake_target.h"
#include "frames.h"
#include "frame.h"
#include "protocol.h"
#include "session.h"

using namespace nb;

namespace {

const char doc_path[] = "docs/protocol.md";

using lines = std::vector<std::string>;

/*
 * The blocks of the worked example: each fenced block that follows a line
 * `<!-- example: NAME -->`, by NAME.
 */
std::map<std::string, lines> example_blocks(std::string *error)
{
	std::ifstream in(doc_path);
	std::map<std::string, lines> blocks;
	std::string line, name;
	const std::string mark = "<!-- example: ";
	bool inside = false;

	if (!in) {
		*error = std::string("cannot read ") + doc_path +
			 " (run the unit tests from the repository's top directory)";
		return blocks;
	}
	while (std::getline(in, line)) {
		if (inside) {
			if (line.rfind("```", 0) == 0) {
				inside = false;
				name.clear();
			} else {
				blocks[name].push_back(line);
			}
		} else if (line.rfind(mark, 0) == 0) {
			name = line.substr(mark.size(), line.find(" -->") - mark.size());
		} else if (!name.empty() && line.rfind("```", 0) == 0) {
			inside = true;
			blocks[name];
		}
	}
	return blocks;
}

bool hex_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* "4e 42 4c 4b  magic": the bytes before the first two spaces, two digits each. */
bool hex_line(const std::string &line, std::vector<u8> *out)
{
	std::istringstream words(line.substr(0, line.find("  ")));
	std::string w;
	bool any = false;

	while (words >> w) {
		if (w.size() != 2 || !hex_digit(w[0]) || !hex_digit(w[1]))
			return false;
		out->push_back((u8)std::stoul(w, nullptr, 16));
		any = true;
	}
	return any;
}

std::string hex(const std::vector<u8> &bytes)
{
	std::string s;
	char b[4];

	for (u8 v : bytes) {
		snprintf(b, sizeof(b), "%02x ", v);
		s += b;
	}
	return s;
}

/* A header as the doc writes it, a field a line: what to paste when the code changed. */
std::string as_doc(const std::vector<u8> &h)
{
	static const struct {
		u32 size;
		const char *name;
	} fields[] = {{4, "magic"}, {1, "version"}, {1, "op"}, {2, "status"}, {2, "flags"},
		      {4, "session"}, {8, "token"}, {8, "seq"}, {8, "offset"}, {4, "length"},
		      {4, "reserved"}, {8, "tag"}};
	std::string s = "\n";
	u32 at = 0;

	for (auto &f : fields) {
		std::string bytes = hex(std::vector<u8>(h.begin() + at, h.begin() + at + f.size));
		bytes.pop_back();
		bytes.resize(24, ' ');
		s += bytes + "  " + f.name + "\n";
		at += f.size;
	}
	return s;
}

class worked_example : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string error;

		blocks = example_blocks(&error);
		ASSERT_TRUE(error.empty()) << error;
		for (const std::string &line : blocks["parameters"]) {
			std::istringstream words(line);
			std::string name, value;

			if (words >> name >> value)
				params[name] = value;
		}
	}

	/* A datagram's block: 54 bytes of header, a line a field. */
	std::vector<u8> datagram(const std::string &name)
	{
		std::vector<u8> bytes;

		EXPECT_TRUE(blocks.count(name)) << doc_path << " has no block `<!-- example: "
						<< name << " -->`";
		for (const std::string &line : blocks[name])
			EXPECT_TRUE(hex_line(line, &bytes)) << name << ": not hex bytes: " << line;
		EXPECT_EQ(bytes.size(), header_size) << name;
		return bytes;
	}

	std::string param(const std::string &name)
	{
		EXPECT_TRUE(params.count(name)) << "the parameters block has no " << name;
		return params[name];
	}

	u64 number(const std::string &name) { return std::stoull(param(name), nullptr, 0); }

	std::vector<u8> key_bytes(const std::string &name)
	{
		std::vector<u8> b;
		std::string text = param(name);

		for (size_t i = 0; i + 1 < text.size(); i += 2)
			b.push_back((u8)std::stoul(text.substr(i, 2), nullptr, 16));
		EXPECT_EQ(b.size(), 16u) << name;
		b.resize(16);
		return b;
	}

	/* "192.0.2.1:50000": the address in network order, and the port. */
	void address(const std::string &name, u32 *ip, u16 *port)
	{
		std::string text = param(name);
		size_t colon = text.find(':');

		ASSERT_NE(colon, std::string::npos) << name;
		ASSERT_EQ(inet_pton(AF_INET, text.substr(0, colon).c_str(), ip), 1) << name;
		*port = (u16)std::stoul(text.substr(colon + 1));
	}

	std::map<std::string, lines> blocks;
	std::map<std::string, std::string> params;
};

/* The netblk payload of a reply frame (20-byte IPv4 header, as replies have). */
std::vector<u8> payload_of(const std::vector<u8> &frame, size_t len)
{
	u32 at = eth_header_size + ipv4_header_size + udp_header_size;

	return std::vector<u8>(frame.begin() + at, frame.begin() + at + len);
}

} // namespace

TEST_F(worked_example, KeyAndEpochAreAsTheDocSays)
{
	siphash_key k = siphash_key_from_bytes(key_bytes("key").data());

	EXPECT_EQ(k.k0, number("k0"));
	EXPECT_EQ(k.k1, number("k1"));
	EXPECT_EQ(number("time") >> session_table::cookie_epoch_shift, number("epoch"));
}

TEST_F(worked_example, SessionAndReadAreTheInstancesBytes)
{
	std::vector<u8> key = key_bytes("key"), secret = key_bytes("secret");
	u64 now = number("time"), nonce = number("nonce");
	test::frame_spec spec;
	fake_options o;

	address("client", &spec.src_ip, &spec.src_port);
	address("instance", &spec.dst_ip, &spec.dst_port);
	o.key = key.data();
	o.secret = secret.data();
	o.local_ip = spec.dst_ip;
	o.port = spec.dst_port;
	o.open_session = false;
	std::unique_ptr<netblk_queue, void (*)(netblk_queue *)> held(fake_start(1 << 20, o),
									  fake_stop);
	netblk_queue *inst = held.get();
	ASSERT_NE(inst, nullptr);
	for (size_t i = 0; i < inst->disk.size(); i++)
		inst->disk[i] = (u8)(i * 7 + 3);

	/* (a) the client's HELLO, (b) the instance's cookie */
	std::vector<u8> hello = test::hello_request(nonce);
	EXPECT_EQ(hello, datagram("hello")) << "the HELLO the client sends:" << as_doc(hello);
	std::vector<u8> f = test::build_frame(spec, datagram("hello"));
	u32 len = (u32)f.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, now),
		  NETBLK_RX_REPLY);
	std::vector<u8> cookie = payload_of(f, header_size);
	EXPECT_EQ(len, test::reply_headroom);
	EXPECT_EQ(cookie, datagram("cookie")) << "the instance's answer:" << as_doc(cookie);

	/* (c) the HELLO bringing the cookie back, (d) the session it opens */
	std::vector<u8> again = test::hello_request(nonce, load_be64(cookie.data() + 14));
	EXPECT_EQ(again, datagram("hello-cookie")) << "the HELLO with its cookie:" << as_doc(again);
	f = test::build_frame(spec, datagram("hello-cookie"));
	len = (u32)f.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, now),
		  NETBLK_RX_KEPT);
	netblk_core_submit(inst->core, now);
	while (netblk_core_reply(inst->core, now))
		;
	ASSERT_EQ(inst->sent.size(), 1u);
	std::vector<u8> opened = payload_of(inst->sent[0], header_size);
	EXPECT_EQ(opened, datagram("session")) << "the answer that opens the session:" << as_doc(opened);

	/* (e) a READ in the session, (f) the answer carrying its first chunk */
	test::session.id = load_be32(opened.data() + 10);
	test::session.token = load_be64(opened.data() + 14);
	std::vector<u8> read = test::request(op_read, 4096, 4096, 0, 0, 1);
	EXPECT_EQ(read, datagram("read")) << "the READ:" << as_doc(read);
	f = test::build_frame(spec, datagram("read"));
	len = (u32)f.size();
	ASSERT_EQ(netblk_core_receive(inst->core, 0, f.data(), f.data(), &len, nullptr, 0, now),
		  NETBLK_RX_FREE);
	netblk_core_submit(inst->core, now);
	while (netblk_core_reply(inst->core, now))
		;
	ASSERT_EQ(inst->sent.size(), 5u) << "the session's answer and 4 of the READ's";
	std::vector<u8> first;
	for (size_t i = 1; i < inst->sent.size(); i++)
		if (test::reply_header(inst->sent[i]).offset == 4096)
			first = payload_of(inst->sent[i], header_size + 1024);
	ASSERT_EQ(first.size(), header_size + 1024) << "no answer carries offset 4096";
	std::vector<u8> head(first.begin(), first.begin() + header_size);
	EXPECT_EQ(head, datagram("read-answer")) << "the READ's first answer:" << as_doc(head);
	EXPECT_TRUE(std::equal(first.begin() + header_size, first.end(), inst->disk.begin() + 4096));
}

TEST_F(worked_example, ExportIdsAreTheCoresOfWhatNamesTheDevice)
{
	ASSERT_TRUE(blocks.count("export-id")) << doc_path << " has no export-id example";
	ASSERT_EQ(blocks["export-id"].size(), 3u);
	for (const std::string &line : blocks["export-id"]) {
		std::istringstream words(line);
		std::string kind, value, id;
		std::vector<u8> bytes;

		ASSERT_TRUE(words >> kind >> value >> id) << line;
		if (kind == "text") {
			bytes.assign(value.begin(), value.end());
		} else {
			ASSERT_EQ(kind, "bytes") << line;
			for (size_t i = 0; i + 1 < value.size(); i += 2)
				bytes.push_back((u8)std::stoul(value.substr(i, 2), nullptr, 16));
			ASSERT_EQ(bytes.size(), 16u) << "a device number and first sector: " << line;
		}
		char want[24];
		snprintf(want, sizeof(want), "0x%016llx",
			 (unsigned long long)netblk_core_export_id(bytes.data(), (u32)bytes.size()));
		EXPECT_EQ(id, want) << line;
	}
}
