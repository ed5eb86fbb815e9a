// UTF-8 checks for text that crosses the HTTP boundary.
//
// Contract
// - IsValidUtf8: strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
// - ToValidUtf8: copies every valid sequence and writes U+FFFD for each byte that does not start
//   one, deciding at every byte from the bytes that follow it only. So splitting a text at
//   points that are never inside a valid sequence (what StreamDecoder and TextStream emit) and
//   converting the pieces gives the same bytes as converting the whole: streamed and
//   non-streamed answers agree even on invalid model output.
// - Pure functions; safe on any bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace goose::server {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if none starts there.
size_t ValidUtf8SequenceLength(std::string_view s, size_t i);
bool IsValidUtf8(std::string_view s);
std::string ToValidUtf8(std::string_view s);

}  // namespace goose::server
