// EscapeForMessage: text read from a file (a GGUF key or tensor name, a vocabulary token, a
// fragment of a JSON cache) made safe to quote in a one-line error message.
//
// Contract
// - Printable ASCII and well-formed UTF-8 characters stay as they are ("▁Hello" and "Äpfel"
//   read as themselves), except:
//   - backslash and both quote characters get a backslash, so a quoted name cannot fake its own
//     closing quote;
//   - \n, \r and \t are spelled so; the other ASCII control bytes, DEL, and every byte that is
//     not part of a well-formed UTF-8 character (stray continuation bytes, overlong forms,
//     surrogates, code points past U+10FFFF, truncated sequences) become \xNN;
//   - C1 controls (U+0080..U+009F), the line and paragraph separators (U+2028, U+2029) and the
//     bidirectional controls (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), which would reorder
//     or break the terminal line, become \u{XXXX}.
// - At most `max_bytes` bytes of the input are quoted (cut at a character boundary); a longer
//   input ends in "...(N bytes)", N its whole size, so a 1 MiB key makes a short message.
// - The result is valid UTF-8 without control characters. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace goose {

inline constexpr size_t kEscapeMaxBytes = 96;

std::string EscapeForMessage(std::string_view text, size_t max_bytes = kEscapeMaxBytes);

}  // namespace goose
