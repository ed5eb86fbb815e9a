// Byte-level BPE encoding as llama.cpp's llm_tokenizer_bpe: pre-tokenize, map each word's bytes
// to the GPT-2 alphabet, then repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) and look the resulting symbols up in the vocabulary.
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_impl.h"

namespace goose {

void Tokenizer::Impl::EncodeBpe(std::string_view raw, std::vector<int32_t>* out,
                                size_t limit) const {
  for (std::string_view word : pre_tokenizer->Split(raw)) {
    if (out->size() > limit) return;  // ids are only ever appended: past the limit stays past
    const std::string text = ByteLevelEncode(word);
    // Llama 3 style vocabularies take a whole word that is already a token as is.
    if (ignore_merges) {
      const int32_t id = Find(text);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
    }
    auto rank = [&](std::string_view l, std::string_view r) -> std::optional<double> {
      auto it = merge_rank.find(MergeKey(l, r));
      if (it == merge_rank.end()) return std::nullopt;
      return -static_cast<double>(it->second);  // lower ranks merge first
    };
    for (std::string_view piece : MergeSymbols(text, rank)) {
      const int32_t id = Find(piece);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      // Not in the vocabulary (should not happen with a complete byte alphabet): fall back to
      // single-byte tokens where they exist, as llama.cpp does.
      for (char c : piece) {
        const int32_t byte_id = Find(std::string_view(&c, 1));
        if (byte_id >= 0) out->push_back(byte_id);
      }
    }
  }
}

}  // namespace goose
