#include "key_text.h"

std::string parse_key_text(std::string_view text, std::array<uint8_t, key_text_bytes> &key)
{
	size_t digits = 0;

	for (char c : text) {
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		int v = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			return std::string("not a hexadecimal digit: '") + c +
			       "' (a key is 32 of them: netblkctl genkey makes one)";
		if (digits == 2 * key_text_bytes)
			return "more than 32 hexadecimal digits (a key is 128 bits)";
		if (digits % 2 == 0)
			key[digits / 2] = 0;
		key[digits / 2] = static_cast<uint8_t>(key[digits / 2] << 4 | v);
		digits++;
	}
	if (digits != 2 * key_text_bytes)
		return std::to_string(digits) +
		       " hexadecimal digits: a key is 32 of them (128 bits; netblkctl genkey makes one)";
	return {};
}
