// Fuzz target tokenizer: arbitrary bytes as prompt text through every vocabulary goose loads.
//
// Vocabularies (loaded once): every ../shared/vocab/*.gguf whose tokenizer goose supports
// (llama-spm and phi-3: SPM; gpt-2, starcoder, falcon, mpt, refact, deepseek-llm,
// deepseek-coder: byte-level BPE; bert-bge is WordPiece and skipped) and the tiny model's
// (models/stories260K.gguf, SPM). The input is the text, as is, for all of them.
// Properties, per vocabulary:
// - ids are in the vocabulary; Encode(text, true) is Encode(text, false) with BOS in front when
//   the vocabulary adds one; streaming decode gives Decode's bytes.
// - Round trip, for valid UTF-8 text: Decode(Encode(text)) == text, where the vocabulary can
//   represent the text: every byte of it has a byte token (SPM's byte fallback, <0xXX>) or its
//   GPT-2 alphabet symbol is a token (byte-level BPE). Without one, a byte is dropped (as
//   llama.cpp does; falcon lacks 16 control bytes such as \x04). What the formats change, by
//   design, and the expected text reproduces:
//   - SPM adds the dummy-prefix space (add_space_prefix, default on) in front of the text, and
//     again after every user-defined token it splits out (as llama.cpp does); SPM spells a space
//     U+2581, so a U+2581 in the text comes back as a space. The expected text is built the same
//     way (see SpmExpected).
//   - Invalid UTF-8 is only checked for ids in range: SPM's byte fallback and byte-level BPE
//     keep its bytes too, but no vocabulary promises to.
// - Every pre-tokenizer (also llama-bpe and qwen2, whose vocabularies are not in shared/) splits
//   the text into non-empty pieces that concatenate back to it.
// run-fuzz flags: -max_len=1024
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fuzz_util.h"
#include "gguf/gguf_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace goose::fuzz {
namespace {

struct Vocab {
  std::string name;
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
  bool space_prefix = true;               // SPM's dummy prefix (tokenizer.ggml.add_space_prefix)
  std::vector<std::string> user_defined;  // texts of USER_DEFINED tokens (type 4)
  // Bytes the vocabulary can spell alone: SPM a <0xXX> byte token, BPE the byte's GPT-2
  // alphabet symbol as a text token. Falcon's vocabulary lacks 16 control bytes, for one.
  std::array<bool, 256> byte_ok{};
};

std::vector<Vocab>& Vocabs() {
  static std::vector<Vocab> v;
  return v;
}

void LoadVocab(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) {
    std::fprintf(stderr, "tokenizer fuzz: %s\n", gguf.status().message().c_str());
    std::abort();
  }
  auto tok = Tokenizer::FromGguf(**gguf);
  if (!tok.ok()) return;  // a tokenizer goose does not implement (bert)
  Vocab v;
  v.name = std::filesystem::path(path).filename().string();
  v.gguf = std::move(gguf).value();
  v.tok = std::move(tok).value();
  if (const GgufValue* s = v.gguf->Find("tokenizer.ggml.add_space_prefix")) v.space_prefix = s->u;
  const GgufValue* types = v.gguf->GetArray("tokenizer.ggml.token_type");
  const GgufValue* tokens = v.gguf->GetArray("tokenizer.ggml.tokens");
  const bool spm = v.tok->model() == "llama";
  std::unordered_map<std::string, int64_t> type_of;
  for (size_t i = 0; i < tokens->strings.size(); ++i) {
    const int64_t type = types ? types->At(i).AsInt() : 1;
    type_of[tokens->strings[i]] = type;
    if (type == 4 && !tokens->strings[i].empty()) v.user_defined.push_back(tokens->strings[i]);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const auto it = type_of.find(spm ? std::string(name) : ByteLevelEncode(std::string(1, b)));
    v.byte_ok[b] = it != type_of.end() && (spm ? it->second == 6 : it->second == 1);
  }
  Vocabs().push_back(std::move(v));
}

// SPM's decoding of valid UTF-8 `text` (see the header): the dummy prefix at the start and after
// each user-defined token, U+2581 read back as a space. User-defined tokens are found as
// Tokenizer's Partition does: longest first, leftmost occurrences, never inside another's match.
std::string SpmExpected(const Vocab& v, const std::string& text) {
  struct Frag {
    std::string text;
    bool special;
  };
  std::vector<Frag> frags = {{text, false}};
  std::vector<std::string> uds = v.user_defined;
  std::stable_sort(uds.begin(), uds.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& ud : uds) {
    std::vector<Frag> next;
    for (const Frag& f : frags) {
      if (f.special) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(ud, pos)) != std::string::npos; pos = hit + ud.size()) {
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), false});
        next.push_back({ud, true});
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), false});
    }
    frags = std::move(next);
  }
  std::string out;
  bool prev_special = true;
  for (const Frag& f : frags) {
    if (f.special) {
      out += f.text;
    } else {
      if (v.space_prefix && prev_special) out += ' ';
      for (size_t i = 0; i < f.text.size(); ++i) {
        if (f.text.compare(i, 3, "\xe2\x96\x81") == 0) {
          out += ' ';
          i += 2;
        } else {
          out += f.text[i];
        }
      }
    }
    prev_special = f.special;
  }
  return out;
}

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    char buf[8];
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

void CheckVocab(const Vocab& v, const std::string& text, bool utf8) {
  const Tokenizer& tok = *v.tok;
  const std::vector<int32_t> ids = tok.Encode(text, /*add_bos=*/false);
  for (int32_t id : ids) {
    FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "%s: id %d outside the vocabulary", v.name.c_str(),
               id);
  }
  std::vector<int32_t> with_bos = tok.Encode(text, /*add_bos=*/true);
  if (tok.add_bos() && tok.bos() >= 0) {
    FUZZ_CHECK(!with_bos.empty() && with_bos[0] == tok.bos(), "%s: no BOS", v.name.c_str());
    with_bos.erase(with_bos.begin());
  }
  FUZZ_CHECK(with_bos == ids, "%s: add_bos changes more than the BOS", v.name.c_str());
  const std::string decoded = tok.Decode(ids);
  StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Push(id);
  streamed += stream.Flush();
  FUZZ_CHECK(streamed == decoded, "%s: streamed decode differs", v.name.c_str());
  if (!utf8) return;
  for (unsigned char c : text) {
    if (!v.byte_ok[c]) return;  // the vocabulary cannot spell this text
  }
  const std::string want =
      tok.model() == "llama" ? (text.empty() ? "" : SpmExpected(v, text)) : text;
  FUZZ_CHECK(decoded == want,
             "%s: round trip\n  text    \"%s\"\n  decoded \"%s\"\n  want    \"%s\"", v.name.c_str(),
             Printable(text).c_str(), Printable(decoded).c_str(), Printable(want).c_str());
}

const char* const kPreTokenizers[] = {"default",      "llama-bpe",      "qwen2",
                                      "gpt-2",        "starcoder",      "falcon",
                                      "deepseek-llm", "deepseek-coder", "dbrx"};

std::vector<std::pair<std::string, std::unique_ptr<PreTokenizer>>>& PreTokenizers() {
  static std::vector<std::pair<std::string, std::unique_ptr<PreTokenizer>>> v;
  return v;
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace goose;
  using namespace goose::fuzz;
  namespace fs = std::filesystem;
  const std::string shared = SharedDir();
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(shared + "/vocab")) {
    if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  paths.push_back(shared + "/models/stories260K.gguf");
  for (const std::string& p : paths) LoadVocab(p);
  for (const char* name : kPreTokenizers) {
    auto pre = PreTokenizer::Create(name);
    if (!pre.ok()) {
      std::fprintf(stderr, "tokenizer fuzz: %s\n", pre.status().message().c_str());
      std::abort();
    }
    PreTokenizers().emplace_back(name, std::move(pre).value());
  }
  int spm = 0, bpe = 0;
  for (const Vocab& v : Vocabs()) (v.tok->model() == "llama" ? spm : bpe)++;
  if (spm < 2 || bpe < 2) {
    std::fprintf(stderr, "tokenizer fuzz: found %d SPM and %d BPE vocabularies under %s\n", spm,
                 bpe, shared.c_str());
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const bool utf8 = IsValidUtf8(text);
  for (const Vocab& v : Vocabs()) CheckVocab(v, text, utf8);
  for (const auto& [name, pre] : PreTokenizers()) {
    std::string joined;
    for (std::string_view p : pre->Split(text)) {
      FUZZ_CHECK(!p.empty(), "pre-tokenizer %s: empty piece", name.c_str());
      joined += p;
    }
    FUZZ_CHECK(joined == text, "pre-tokenizer %s: pieces do not concatenate to the text",
               name.c_str());
  }
  return 0;
}
