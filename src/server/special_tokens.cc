#include "server/special_tokens.h"

#include <algorithm>
#include <cstdint>

namespace goose::server {

namespace {
constexpr int64_t kControlTokenType = 3;  // llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
}  // namespace

SpecialTokens SpecialTokens::FromGguf(const GgufFile& gguf) {
  SpecialTokens out;
  const GgufValue* tokens = gguf.GetArray("tokenizer.ggml.tokens");
  const GgufValue* types = gguf.GetArray("tokenizer.ggml.token_type");
  if (tokens == nullptr || tokens->elem_type != GgufType::kString) return out;
  out.texts_ = tokens->strings;
  if (types == nullptr || types->size() != tokens->size() ||
      types->elem_type == GgufType::kString || types->elem_type == GgufType::kArray) {
    return out;
  }
  for (size_t i = 0; i < types->size(); ++i) {
    if (types->At(i).AsInt() == kControlTokenType && !out.texts_[i].empty()) {
      out.control_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(out.control_.begin(), out.control_.end(), [&](int32_t a, int32_t b) {
    return out.texts_[a].size() > out.texts_[b].size();
  });
  return out;
}

const std::string& SpecialTokens::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && static_cast<size_t>(id) < texts_.size() ? texts_[id] : kEmpty;
}

std::vector<int32_t> SpecialTokens::Encode(const Tokenizer& tok, std::string_view text,
                                           bool add_bos) const {
  return *EncodeAtMost(tok, text, add_bos, SIZE_MAX);
}

std::optional<std::vector<int32_t>> SpecialTokens::EncodeAtMost(const Tokenizer& tok,
                                                                std::string_view text, bool add_bos,
                                                                size_t max_tokens) const {
  std::vector<int32_t> out;
  if (add_bos && tok.add_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  if (max_tokens != SIZE_MAX) {  // each control token stands for its text
    size_t longest = 0;
    for (int32_t id : control_) longest = std::max(longest, texts_[id].size());
    if (out.size() + tok.FewestTokens(text, longest) > max_tokens) return std::nullopt;
  }
  // next[k]: where control_[k]'s text occurs next at or after pos (npos: nowhere). Each entry
  // only moves forward, so a prompt costs one pass over the text per control token.
  std::vector<size_t> next(control_.size());
  for (size_t k = 0; k < control_.size(); ++k) next[k] = text.find(texts_[control_[k]]);
  size_t pos = 0;
  while (pos < text.size()) {
    // The leftmost control-token text; at one place the longest (control_ is longest first).
    size_t best = control_.size();
    for (size_t k = 0; k < control_.size(); ++k) {
      if (next[k] < pos) next[k] = text.find(texts_[control_[k]], pos);
      if (next[k] != std::string_view::npos && (best == control_.size() || next[k] < next[best])) {
        best = k;
      }
    }
    const size_t piece_end = best == control_.size() ? text.size() : next[best];
    if (piece_end > pos) {
      const auto ids = tok.EncodeAtMost(text.substr(pos, piece_end - pos), false,
                                        max_tokens - std::min(max_tokens, out.size()));
      if (!ids) return std::nullopt;
      out.insert(out.end(), ids->begin(), ids->end());
    }
    if (best == control_.size()) break;
    out.push_back(control_[best]);
    if (out.size() > max_tokens) return std::nullopt;
    pos = next[best] + texts_[control_[best]].size();
  }
  if (out.size() > max_tokens) return std::nullopt;
  return out;
}

}  // namespace goose::server
