// SentencePiece-style encoding as llama.cpp's llm_tokenizer_spm: start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring vocabulary token
// (ties: leftmost), then map leftover characters that are not tokens to <0xXX> byte tokens.
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_impl.h"

namespace goose {

void Tokenizer::Impl::EncodeSpm(std::string_view raw, std::vector<int32_t>* out) const {
  // Spaces are spelled U+2581 in SentencePiece vocabularies.
  std::string text;
  text.reserve(raw.size() + 8);
  for (char c : raw) {
    if (c == ' ') {
      text += "\xe2\x96\x81";
    } else {
      text.push_back(c);
    }
  }
  // Adjacent symbols are contiguous in `text`, so a pair's merged token is one view.
  auto score = [&](std::string_view l, std::string_view r) -> std::optional<double> {
    const int32_t id = Find(std::string_view(l.data(), l.size() + r.size()));
    if (id < 0) return std::nullopt;
    return scores[id];
  };
  // Merged symbols are always tokens; only single characters can miss the vocabulary.
  for (std::string_view piece : MergeSymbols(text, score)) {
    const int32_t id = Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      static const char kHex[] = "0123456789ABCDEF";
      const unsigned char b = static_cast<unsigned char>(c);
      const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      int32_t byte_id = Find(name);
      if (byte_id < 0) byte_id = Find(std::string_view(&c, 1));
      if (byte_id < 0) byte_id = unk;
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

}  // namespace goose
