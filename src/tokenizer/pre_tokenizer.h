// PreTokenizer: the regex splitting that byte-level BPE runs before merging (llama.cpp's
// unicode_regex_split / Hugging Face's `Split` + `ByteLevel` pre-tokenizers).
//
// Contract
// - Create(name) selects the regex list for a `tokenizer.ggml.pre` name (default, llama3 /
//   llama-bpe, qwen2, gpt-2, deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact and a
//   few aliases); an unknown name is an error that names it.
// - Split() applies the regexes in order. Each regex runs on every piece produced so far,
//   separately; both the matches and the unmatched gaps between them become pieces, so the
//   pieces always concatenate back to the input. Invalid UTF-8 never matches and is kept as gaps.
// - Compiled once (PCRE2, UTF + UCP, JIT when available); Split() is const and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

struct pcre2_real_code_8;  // pcre2_code, kept out of this header

namespace goose {

class PreTokenizer {
 public:
  static StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Pieces are views into `text`, non-empty, in order.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  PreTokenizer() = default;
  std::vector<pcre2_real_code_8*> regexes_;
};

// Whether `name` is a Llama 3 style vocabulary, where llama.cpp looks a whole pre-tokenized
// word up before merging (`tokenizer_ignore_merges`).
bool PreTokenizerIgnoresMerges(std::string_view name);

}  // namespace goose
