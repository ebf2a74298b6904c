// SPDX-License-Identifier: GPL-2.0
/* Key files (key_text.cpp): 32 hexadecimal digits, spaces allowed. */
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "format.h"
#include "key_text.h"

TEST(KeyText, ParsesHexDigitsWithSpacesAndSaysWhatIsWrong)
{
	std::array<uint8_t, NETBLK_KEY_BYTES> key{};
	EXPECT_EQ(parse_key_text("000102030405060708090a0b0c0d0E0F\n", key), "") << "key parses";
	EXPECT_TRUE(key[0] == 0 && key[10] == 0x0a && key[15] == 0x0f) << "key bytes in order";
	EXPECT_EQ(parse_key_text(" 0001 0203 0405 0607\t0809 0a0b 0c0d 0e0f ", key), "")
		<< "key with spaces";
	EXPECT_EQ(parse_key_text("0001", key).find("4 hexadecimal digits"), 0u) << "short key";
	EXPECT_EQ(parse_key_text(std::string(34, 'a'), key).find("more than 32"), 0u) << "long key";
	EXPECT_EQ(parse_key_text("0g" + std::string(30, '0'), key).find("not a hexadecimal digit: 'g'"),
		  0u)
		<< "bad digit";
}
