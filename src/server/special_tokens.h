// SpecialTokens: the vocabulary's control tokens (<|im_start|>, <|eot_id|>, <s>, ...) by text, so
// that a rendered chat prompt encodes its turn markers as the single tokens the model was
// trained on. Tokenizer::Encode (like `goose generate`) reads such text as plain characters.
//
// Contract
// - FromGguf reads tokenizer.ggml.tokens and tokenizer.ggml.token_type (type 3 = control);
//   control tokens with empty text are left out. A vocabulary without types has none.
// - Encode(text, add_bos) splits the text at every control-token text (longest first, leftmost
//   first, as llama.cpp's parse_special), encodes the pieces between them with
//   Tokenizer::Encode(piece, false) and prepends BOS when asked and the vocabulary uses one
//   (exactly what Encode(text, add_bos) does for a text without control-token texts).
// - EncodeAtMost(tok, text, add_bos, max_tokens): Encode when that gives at most max_tokens ids,
//   else nullopt, at a cost bounded by max_tokens as Tokenizer::EncodeAtMost's (a text that
//   cannot fit is refused before the control-token search).
// - Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace goose::server {

class SpecialTokens {
 public:
  static SpecialTokens FromGguf(const GgufFile& gguf);
  std::vector<int32_t> Encode(const Tokenizer& tok, std::string_view text, bool add_bos) const;
  std::optional<std::vector<int32_t>> EncodeAtMost(const Tokenizer& tok, std::string_view text,
                                                   bool add_bos, size_t max_tokens) const;
  // Text of token `id` as the vocabulary stores it ("" if out of range).
  const std::string& TokenText(int32_t id) const;
  size_t size() const { return control_.size(); }

 private:
  std::vector<std::string> texts_;  // [n_vocab] every token's text
  std::vector<int32_t> control_;    // control token ids, longest text first
};

}  // namespace goose::server
