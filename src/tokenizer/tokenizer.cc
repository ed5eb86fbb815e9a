// Tokenizer loading from GGUF metadata, user-defined-token partitioning, decoding and streaming.
// The model-specific encoders live in spm.cc and bpe.cc.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/escape.h"

namespace goose {
namespace {

constexpr const char* kPrefix = "tokenizer.ggml.";

std::string Key(const char* name) { return std::string(kPrefix) + name; }

// Typed metadata readers: absent keys are fine (caller keeps its default), present keys of the
// wrong type are errors naming the file and key.
Status ReadInt(const GgufFile& g, const char* name, int64_t* out, bool* found = nullptr) {
  const std::string key = Key(name);
  const GgufValue* v = g.Find(key);
  if (found) *found = v != nullptr;
  if (!v) return Status::Ok();
  if (!v->is_integer() || v->type == GgufType::kBool) {
    return Status::Error(StrFormat("%s: metadata key %s has type %s, expected an integer",
                                   g.path().c_str(), key.c_str(),
                                   std::string(GgufTypeName(v->type)).c_str()));
  }
  *out = v->AsInt();
  return Status::Ok();
}

Status ReadBool(const GgufFile& g, const char* name, bool* out) {
  const std::string key = Key(name);
  const GgufValue* v = g.Find(key);
  if (!v) return Status::Ok();
  if (v->type != GgufType::kBool) {
    return Status::Error(StrFormat("%s: metadata key %s has type %s, expected bool",
                                   g.path().c_str(), key.c_str(),
                                   std::string(GgufTypeName(v->type)).c_str()));
  }
  *out = v->u != 0;
  return Status::Ok();
}

Status ReadString(const GgufFile& g, const char* name, std::string* out, bool required) {
  const std::string key = Key(name);
  const GgufValue* v = g.Find(key);
  if (!v) {
    if (!required) return Status::Ok();
    return Status::Error(StrFormat("%s: missing metadata key %s", g.path().c_str(), key.c_str()));
  }
  if (v->type != GgufType::kString) {
    return Status::Error(StrFormat("%s: metadata key %s has type %s, expected string",
                                   g.path().c_str(), key.c_str(),
                                   std::string(GgufTypeName(v->type)).c_str()));
  }
  *out = v->str;
  return Status::Ok();
}

// Returns the array under `name` (nullptr if absent), checking its element kind and length.
enum class ElemKind { kString, kNumber, kInteger };
StatusOr<const GgufValue*> ReadArray(const GgufFile& g, const char* name, ElemKind kind,
                                     int64_t want_len) {
  const std::string key = Key(name);
  const GgufValue* v = g.Find(key);
  if (!v) return static_cast<const GgufValue*>(nullptr);
  if (v->type != GgufType::kArray) {
    return Status::Error(StrFormat("%s: metadata key %s has type %s, expected an array",
                                   g.path().c_str(), key.c_str(),
                                   std::string(GgufTypeName(v->type)).c_str()));
  }
  const GgufType et = v->elem_type;
  bool ok = false;
  const char* want = "";
  switch (kind) {
    case ElemKind::kString:
      ok = et == GgufType::kString;
      want = "string";
      break;
    case ElemKind::kNumber:
      ok = et == GgufType::kFloat32 || et == GgufType::kFloat64;
      want = "float";
      break;
    case ElemKind::kInteger:
      ok = et != GgufType::kString && et != GgufType::kArray && et != GgufType::kBool &&
           et != GgufType::kFloat32 && et != GgufType::kFloat64;
      want = "integer";
      break;
  }
  if (!ok) {
    return Status::Error(StrFormat("%s: metadata key %s is an array of %s, expected %s elements",
                                   g.path().c_str(), key.c_str(),
                                   std::string(GgufTypeName(et)).c_str(), want));
  }
  if (want_len >= 0 && static_cast<int64_t>(v->size()) != want_len) {
    return Status::Error(
        StrFormat("%s: metadata key %s has %zu elements but tokenizer.ggml.tokens has %lld",
                  g.path().c_str(), key.c_str(), v->size(), static_cast<long long>(want_len)));
  }
  return v;
}

// Texts that llama.cpp also treats as end-of-generation when present as control tokens.
bool LooksLikeEog(const std::string& t) {
  static const char* kNames[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                 "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                 "<EOT>",         "_<EOT>",        "<｜end▁of▁sentence｜>"};
  for (const char* n : kNames) {
    if (t == n) return true;
  }
  return false;
}

std::string SpmPiece(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xe2\x96\x81") == 0) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1.
int ParseByteToken(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string ComputePiece(const Tokenizer::Impl& im, int32_t id) {
  const std::string& text = im.tokens[id];
  const int32_t type = im.types.empty() ? kTokenNormal : im.types[id];
  switch (type) {
    case kTokenUserDefined:
      return text;
    case kTokenNormal:
    case kTokenUndefined:
      return im.is_spm ? SpmPiece(text) : ByteLevelDecode(text);
    case kTokenByte: {
      int b = ParseByteToken(text);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      return im.is_spm ? SpmPiece(text) : ByteLevelDecode(text);
    }
    default:  // control, unknown, unused: not text
      return "";
  }
}

// Whether byte b ends up in some token whatever surrounds it: SPM's byte fallback (<0xXX>, the
// byte itself, else <unk>); for byte-level BPE, its character being a token (merges then only
// grow it into tokens, see MergesAreTokens).
bool ByteHasToken(const Tokenizer::Impl& im, int b) {
  const std::string byte(1, static_cast<char>(b));
  if (!im.is_spm) return im.Find(ByteLevelEncode(byte)) >= 0;
  static const char kHex[] = "0123456789ABCDEF";
  const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
  return im.unk >= 0 || im.Find(name) >= 0 || im.Find(byte) >= 0;
}

// SPM merges only into vocabulary tokens; a BPE merge whose result is not a token falls back
// to single-byte tokens that may not exist.
bool MergesAreTokens(const Tokenizer::Impl& im) {
  for (const auto& [key, rank] : im.merge_rank) {
    std::string merged = key;
    merged.erase(merged.find('\xff'), 1);
    if (im.Find(merged) < 0) return false;
  }
  return true;
}

// The most input bytes one token the encoders emit can stand for (0: no bound). A token matched
// in SPM's text covers at most its bytes (a space there is 3 bytes, U+2581); one matched in
// byte-level text, one input byte per character; a user-defined token, its bytes.
size_t MaxTokenBytes(const Tokenizer::Impl& im) {
  if (!MergesAreTokens(im)) return 0;
  size_t most = 1;  // a byte fallback token
  for (size_t i = 0; i < im.tokens.size(); ++i) {
    const std::string& t = im.tokens[i];
    size_t n = t.size();
    if (!im.is_spm && im.types[i] != kTokenUserDefined) {
      n = 0;
      for (char c : t) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }
    most = std::max(most, n);
  }
  return most;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  auto im = std::make_unique<Impl>();
  const char* path = gguf.path().c_str();
  im->path = gguf.path();
  GOOSE_RETURN_IF_ERROR(ReadString(gguf, "model", &im->model, /*required=*/true));
  if (im->model == "llama") {
    im->is_spm = true;
  } else if (im->model == "gpt2") {
    im->is_spm = false;
  } else {
    return Status::Error(StrFormat(
        "%s: metadata key tokenizer.ggml.model is \"%s\"; supported tokenizers are \"llama\" "
        "(SentencePiece) and \"gpt2\" (byte-level BPE)",
        path, EscapeForMessage(im->model).c_str()));
  }
  im->pre = "default";
  GOOSE_RETURN_IF_ERROR(ReadString(gguf, "pre", &im->pre, /*required=*/false));

  GOOSE_ASSIGN_OR_RETURN(const GgufValue* tokens, ReadArray(gguf, "tokens", ElemKind::kString, -1));
  if (!tokens) {
    return Status::Error(
        StrFormat("%s: missing metadata key tokenizer.ggml.tokens (the vocabulary)", path));
  }
  const int64_t n = static_cast<int64_t>(tokens->size());
  if (n == 0 || n > INT32_MAX) {
    return Status::Error(StrFormat("%s: metadata key tokenizer.ggml.tokens has %lld entries", path,
                                   static_cast<long long>(n)));
  }
  GOOSE_ASSIGN_OR_RETURN(const GgufValue* scores, ReadArray(gguf, "scores", ElemKind::kNumber, n));
  GOOSE_ASSIGN_OR_RETURN(const GgufValue* types,
                         ReadArray(gguf, "token_type", ElemKind::kInteger, n));

  im->tokens.reserve(n);
  im->token_to_id.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    im->tokens.push_back(tokens->strings[i]);
    im->token_to_id[im->tokens.back()] = static_cast<int32_t>(i);  // last wins, as llama.cpp
  }
  im->scores.assign(n, 0.0f);
  if (scores) {
    for (int64_t i = 0; i < n; ++i) im->scores[i] = static_cast<float>(scores->At(i).AsDouble());
  }
  im->types.assign(n, kTokenNormal);
  if (types) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = types->At(i).AsInt();
      if (t < 0 || t > kTokenByte) {
        return Status::Error(StrFormat(
            "%s: metadata key tokenizer.ggml.token_type[%lld] = %lld is not a token type (0..6)",
            path, static_cast<long long>(i), static_cast<long long>(t)));
      }
      im->types[i] = static_cast<int32_t>(t);
    }
  }

  if (!im->is_spm) {
    GOOSE_ASSIGN_OR_RETURN(const GgufValue* merges,
                           ReadArray(gguf, "merges", ElemKind::kString, -1));
    if (!merges) {
      return Status::Error(StrFormat(
          "%s: missing metadata key tokenizer.ggml.merges (required by the gpt2 tokenizer)", path));
    }
    im->merge_rank.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string& m = merges->strings[i];
      // Split at the first space after the first byte, so a merge of " " itself would parse.
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) {
        return Status::Error(
            StrFormat("%s: metadata key tokenizer.ggml.merges[%zu] = \"%s\" is not \"left right\"",
                      path, i, EscapeForMessage(m).c_str()));
      }
      im->merge_rank.emplace(
          MergeKey(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1)),
          static_cast<int32_t>(i));
    }
    auto pre = PreTokenizer::Create(im->pre);
    if (!pre.ok()) return Status::Error(std::string(path) + ": " + pre.status().message());
    im->pre_tokenizer = std::move(pre).value();
    im->ignore_merges = PreTokenizerIgnoresMerges(im->pre);
  }

  // Special ids. SPM defaults follow llama.cpp (<unk>=0, <s>=1, </s>=2).
  int64_t bos = im->is_spm ? 1 : -1, eos = im->is_spm ? 2 : -1, unk = im->is_spm ? 0 : -1;
  int64_t eot = -1, eom = -1;
  GOOSE_RETURN_IF_ERROR(ReadInt(gguf, "bos_token_id", &bos));
  GOOSE_RETURN_IF_ERROR(ReadInt(gguf, "eos_token_id", &eos));
  GOOSE_RETURN_IF_ERROR(ReadInt(gguf, "unknown_token_id", &unk));
  GOOSE_RETURN_IF_ERROR(ReadInt(gguf, "eot_token_id", &eot));
  GOOSE_RETURN_IF_ERROR(ReadInt(gguf, "eom_token_id", &eom));
  const std::pair<const char*, int64_t*> ids[] = {{"bos_token_id", &bos},
                                                  {"eos_token_id", &eos},
                                                  {"unknown_token_id", &unk},
                                                  {"eot_token_id", &eot},
                                                  {"eom_token_id", &eom}};
  for (const auto& [name, v] : ids) {
    if (*v < -1 || *v >= n) {
      return Status::Error(
          StrFormat("%s: metadata key tokenizer.ggml.%s = %lld is outside the "
                    "vocabulary of %lld tokens",
                    path, name, static_cast<long long>(*v), static_cast<long long>(n)));
    }
  }
  im->bos = static_cast<int32_t>(bos);
  im->eos = static_cast<int32_t>(eos);
  im->unk = static_cast<int32_t>(unk);
  im->add_bos = im->is_spm;
  GOOSE_RETURN_IF_ERROR(ReadBool(gguf, "add_bos_token", &im->add_bos));
  GOOSE_RETURN_IF_ERROR(ReadBool(gguf, "add_space_prefix", &im->add_space_prefix));

  im->eog.assign(n, false);
  for (int64_t v : {eos, eot, eom}) {
    if (v >= 0) im->eog[v] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (im->types[i] == kTokenControl && LooksLikeEog(im->tokens[i])) im->eog[i] = true;
    if (im->types[i] == kTokenUserDefined && !im->tokens[i].empty()) {
      im->user_defined.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(im->user_defined.begin(), im->user_defined.end(), [&](int32_t a, int32_t b) {
    return im->tokens[a].size() > im->tokens[b].size();
  });

  im->pieces.resize(n);
  for (int64_t i = 0; i < n; ++i) im->pieces[i] = ComputePiece(*im, static_cast<int32_t>(i));
  im->max_token_bytes = MaxTokenBytes(*im);
  for (int b = 0; b < 256; ++b) im->byte_has_token[b] = ByteHasToken(*im, b);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(im)));
}

namespace {

struct Fragment {
  std::string_view text;  // raw text, or the token's text
  int32_t token = -1;     // >= 0: a user-defined token matched as a whole
};

// Splits out every occurrence of a user-defined token (longest tokens first), as llama.cpp's
// tokenizer_st_partition does with parse_special=false.
std::vector<Fragment> Partition(const Tokenizer::Impl& im, std::string_view text) {
  std::vector<Fragment> frags = {{text, -1}};
  for (int32_t id : im.user_defined) {
    const std::string& tok = im.tokens[id];
    std::vector<Fragment> next;
    for (const Fragment& f : frags) {
      if (f.token >= 0 || f.text.size() < tok.size()) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      while (true) {
        size_t hit = f.text.find(tok, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), -1});
        next.push_back({f.text.substr(hit, tok.size()), id});
        pos = hit + tok.size();
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), -1});
    }
    frags = std::move(next);
  }
  return frags;
}

// Encode, stopping after the fragment that takes the ids past `limit` (ids are only appended,
// so the result is then longer than `limit` whatever the rest would add).
std::vector<int32_t> EncodeUpTo(const Tokenizer::Impl& im, std::string_view text, bool add_bos,
                                size_t limit) {
  std::vector<int32_t> out;
  if (add_bos && im.add_bos && im.bos >= 0) out.push_back(im.bos);
  if (text.empty()) return out;
  // SentencePiece adds the dummy-prefix space at the start and after every special token.
  bool prev_special = true;
  for (const Fragment& f : Partition(im, text)) {
    if (out.size() > limit) break;
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    if (im.is_spm) {
      std::string s;
      if (im.add_space_prefix && prev_special) s = " ";
      s.append(f.text);
      im.EncodeSpm(s, &out);
    } else {
      im.EncodeBpe(f.text, &out, limit);
    }
    prev_special = false;
  }
  return out;
}

}  // namespace

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos) const {
  return EncodeUpTo(*impl_, text, add_bos, SIZE_MAX);
}

std::optional<std::vector<int32_t>> Tokenizer::EncodeAtMost(std::string_view text, bool add_bos,
                                                            size_t max_tokens) const {
  const Impl& im = *impl_;
  const size_t n_bos = add_bos && im.add_bos && im.bos >= 0 ? 1 : 0;
  if (n_bos + FewestTokens(text) > max_tokens) return std::nullopt;
  std::vector<int32_t> out = EncodeUpTo(im, text, add_bos, max_tokens);
  if (out.size() > max_tokens) return std::nullopt;
  return out;
}

size_t Tokenizer::FewestTokens(std::string_view text, size_t longest) const {
  const Impl& im = *impl_;
  if (im.max_token_bytes == 0) return 0;
  size_t covered = 0;  // bytes that are in some token, each of at most `per_token` bytes
  for (char c : text) covered += im.byte_has_token[static_cast<unsigned char>(c)];
  const size_t per_token = std::max(longest, im.max_token_bytes);
  return (covered + per_token - 1) / per_token;
}

std::string Tokenizer::TokenToPiece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return "";
  return impl_->pieces[id];
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < n_vocab()) out += impl_->pieces[id];
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::IsEog(int32_t id) const { return id >= 0 && id < n_vocab() && impl_->eog[id]; }
const std::string& Tokenizer::model() const { return impl_->model; }
const std::string& Tokenizer::pre() const { return impl_->pre; }

StatusOr<std::vector<std::string>> Tokenizer::PreTokenize(std::string_view pre,
                                                          std::string_view text) {
  GOOSE_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> p, PreTokenizer::Create(pre));
  std::vector<std::string> out;
  for (std::string_view piece : p->Split(text)) out.emplace_back(piece);
  return out;
}

// Length of the longest prefix of `s` made of complete UTF-8 characters; an invalid byte counts
// as complete (it can never become valid), a truncated but so-far-valid tail does not.
static size_t CompleteUtf8Prefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 1;
    if (len == 1) {
      ++i;
      continue;
    }
    size_t j = 1;
    while (j < len && i + j < s.size() && (static_cast<unsigned char>(s[i + j]) & 0xC0) == 0x80) {
      ++j;
    }
    if (j == len) {
      i += len;
    } else if (i + j == s.size()) {
      break;  // incomplete tail: wait for more bytes
    } else {
      i += j;  // broken sequence: emit as is
    }
  }
  return i;
}

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tok_.TokenToPiece(id);
  const size_t n = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace goose
