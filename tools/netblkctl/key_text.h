// A key file's text, shared by netblkctl (start key=FILE) and netblk-load
// (--key FILE): one parser, so both take and refuse the same files.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

constexpr size_t key_text_bytes = 16;  // 128 bits: NETBLK_KEY_BYTES

// 32 hexadecimal digits (128 bits), whitespace anywhere ignored, as
// `netblkctl genkey` writes them.  "" when fine, else what is wrong.
std::string parse_key_text(std::string_view text, std::array<uint8_t, key_text_bytes> &key);
