// Tokenizer::Impl: the loaded vocabulary shared by the SPM and BPE encoders (internal header).
//
// Contract: filled once by Tokenizer::FromGguf and never mutated afterwards, so every const
// member function may run concurrently. `pieces[id]` is the precomputed TokenToPiece result.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace goose {

// GGUF token types (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// Lets the maps be probed with string_views without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Tokenizer::Impl {
  std::string path;   // for messages
  std::string model;  // "llama" or "gpt2"
  std::string pre;    // pre-tokenizer name
  bool is_spm = true;

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id;
  // BPE merges keyed by MergeKey(left, right) -> rank (lower merges first).
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> merge_rank;
  // USER_DEFINED tokens, longest text first: matched as whole pieces before tokenizing.
  std::vector<int32_t> user_defined;
  std::vector<bool> eog;

  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  bool add_bos = false;
  bool add_space_prefix = true;
  bool ignore_merges = false;  // Llama 3: whole-word vocabulary hits skip merging
  // The most input bytes one emitted token can cover (0: no bound, see FewestTokens), and
  // which bytes always end up in a token.
  size_t max_token_bytes = 0;
  std::array<bool, 256> byte_has_token{};
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // BPE only

  int32_t Find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }

  // Appends the ids of one raw-text fragment (no user-defined tokens inside). EncodeBpe stops
  // after the pre-tokenizer word that takes out->size() past `limit`.
  void EncodeSpm(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpe(std::string_view text, std::vector<int32_t>* out, size_t limit) const;
};

// '\xff' never occurs in UTF-8, so it cannot be confused with token text.
inline std::string MergeKey(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key.push_back('\xff');
  key.append(right);
  return key;
}

// Length of the UTF-8 sequence introduced by `lead` (1 for stray continuation bytes), as
// llama.cpp's unicode_len_utf8.
inline size_t Utf8Len(unsigned char lead) {
  static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

}  // namespace goose
