// Byte-level mapping of GPT-2 style BPE (`bytes_to_unicode`): every byte is shown as a
// printable Unicode character so that merges operate on text. Encode/decode are exact inverses
// for any byte string; decoding text outside the mapping keeps those characters as UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace goose {

// Bytes -> mapped UTF-8 text (e.g. ' ' -> "Ġ").
std::string ByteLevelEncode(std::string_view bytes);
// Mapped UTF-8 text -> bytes.
std::string ByteLevelDecode(std::string_view text);

}  // namespace goose
