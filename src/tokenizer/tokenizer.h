// Tokenizer: text <-> token ids, built from a GGUF file's `tokenizer.ggml.*` metadata.
//
// Contract
// - Models: `llama` (SentencePiece-style BPE over scores with byte fallback and a dummy-prefix
//   space, as llama.cpp's SPM tokenizer) and `gpt2` (byte-level BPE over merges, with the
//   pre-tokenizer regexes selected by `tokenizer.ggml.pre`: default, llama-bpe/llama3, qwen2,
//   gpt-2, deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact). Regexes run in PCRE2
//   with Unicode properties. Anything else is a load error naming the file and key.
// - Encode(text, add_bos) never parses special-token text; BOS is prepended only when asked and
//   the vocab says BOS is used (`tokenizer.ggml.add_bos_token`, default true for `llama`).
// - EncodeAtMost(text, add_bos, max_tokens) is Encode when that gives at most max_tokens ids,
//   else nullopt, and stops as soon as that is certain: a text FewestTokens says is too long is
//   refused after one scan of its bytes, and otherwise encoding stops after the user-defined-
//   token fragment (BPE: the pre-tokenizer word) that passes the limit. So what a too-long
//   prompt costs is bounded by the limit, not by the text.
// - FewestTokens(text, longest): a lower bound on the ids of text in any encoding whose tokens
//   each stand for at most max(longest, the vocabulary's longest token) bytes: the bytes that
//   always end up in some token (a byte without a byte token, say 0xFF in a vocabulary of
//   UTF-8 text, may produce none) divided by that length. 0 where no such bound holds (a BPE
//   merge whose result is not a token).
// - TokenToPiece returns the raw bytes a token stands for (byte tokens -> that byte, U+2581 ->
//   space for SPM, byte-level BPE unmapped back to bytes); control tokens -> "".
// - StreamDecoder turns a token stream into text without ever emitting half a UTF-8 character.
// - Immutable after load; safe to share across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace goose {

class Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  ~Tokenizer();

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const;
  std::optional<std::vector<int32_t>> EncodeAtMost(std::string_view text, bool add_bos,
                                                   size_t max_tokens) const;
  size_t FewestTokens(std::string_view text, size_t longest = 0) const;
  std::string TokenToPiece(int32_t id) const;
  // Concatenated pieces (for tests and --json "text").
  std::string Decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 if none
  int32_t eos() const;  // -1 if none
  bool add_bos() const;
  // End-of-generation tokens (EOS, EOT, ...): generation stops when one is sampled.
  bool IsEog(int32_t id) const;
  const std::string& model() const;  // "llama" or "gpt2"
  const std::string& pre() const;    // pre-tokenizer name ("default" if absent)

  // Pre-tokenizer splitting alone (exposed so the llama-bpe/qwen2 regexes can be tested
  // without their vocabularies). Returns the pieces, in order, concatenating to `text`.
  static StatusOr<std::vector<std::string>> PreTokenize(std::string_view pre,
                                                        std::string_view text);

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: Push() returns the bytes that form complete UTF-8 characters so far;
// Flush() returns whatever is left (possibly an invalid tail) at the end of generation.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string Push(int32_t id);
  std::string Flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace goose
