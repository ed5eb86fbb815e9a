// TextStream: generated token ids -> the text a client receives, piece by piece, with OpenAI's
// stop strings.
//
// Contract
// - Push(token) decodes with StreamDecoder (never half a UTF-8 character) and returns the text
//   that is now final: everything except a tail that could still grow into a stop string.
//   Finish() flushes the decoder and returns the rest.
// - Stop strings: generation ends at the first place a stop string is complete, i.e. the
//   occurrence that *ends* first (ties: the one starting first); the text stops right before it
//   and the stop string is not returned. After that, stopped() is true and Push() returns "".
//   Ending at the earliest end makes the result independent of how tokens were grouped into
//   pushes (a speculative cycle commits several at once), so streamed and non-streamed answers,
//   and answers under different acceptance, are the same text.
// - Every returned piece is valid UTF-8 (ToValidUtf8): pieces split only between characters, so
//   their concatenation equals ToValidUtf8 of the whole text cut at the stop string.
// - Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace goose::server {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop);
  std::string Push(int32_t token);
  std::string Finish();
  bool stopped() const { return stopped_; }
  const std::string& stop_string() const { return stop_string_; }  // the one that matched

 private:
  // Scans text_ from emitted_ for a stop string or a held tail; returns the final text.
  std::string Release(bool at_end);
  StreamDecoder decoder_;
  std::vector<std::string> stop_;
  std::string text_;  // decoded bytes not yet returned, from the first unreturned byte
  bool stopped_ = false;
  std::string stop_string_;
};

}  // namespace goose::server
