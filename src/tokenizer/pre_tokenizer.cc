// Regex lists per `tokenizer.ggml.pre`, transcribed from llama.cpp's llm_tokenizer_bpe (which
// in turn follows each model's Hugging Face tokenizer.json; HF is the ground truth).
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <initializer_list>

#include "util/escape.h"

namespace goose {
namespace {

// GPT-2's pattern without the final `|\s+`: whitespace left unmatched survives as a gap piece.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (case-insensitive contractions spelled out, as llama.cpp adapts them).
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but digits one at a time.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

struct PreSpec {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges;
};

const PreSpec kSpecs[] = {
    {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}, false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}, {kLlama3}, true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}, false},
    {{"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"}, {kQwen2}, false},
    {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion"}, {kGpt2}, false},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
     {R"(\p{N})", kGpt2},
     false},
    {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}, false},
    {{"deepseek-llm"},
     {R"([\r\n])",
      // Cased letters (Lu/Ll/Lt) as listed in DeepSeek's tokenizer.json; written as escapes
      // because Unicode normalization of the literal characters would reorder some ranges.
      R"(\s?[)"
      R"(\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA})"
      R"(\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377})"
      R"(\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
      R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
      R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
      R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
      R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59})"
      R"(\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE})"
      R"(\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
      R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
      R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})"
      R"(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
      R"(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE})"
      R"(\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
      R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
      R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
      R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
      R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})"
      R"(]+)",
      R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
      R"(\s+$)", kCjk, R"(\p{N}+)"},
     false},
    {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}, false},
};

const PreSpec* FindSpec(std::string_view name) {
  for (const PreSpec& spec : kSpecs) {
    for (const char* n : spec.names) {
      if (name == n) return &spec;
    }
  }
  return nullptr;
}

}  // namespace

bool PreTokenizerIgnoresMerges(std::string_view name) {
  const PreSpec* spec = FindSpec(name);
  return spec && spec->ignore_merges;
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view name) {
  const PreSpec* spec = FindSpec(name);
  if (!spec) {
    return Status::Error(
        StrFormat("unsupported BPE pre-tokenizer \"%s\" (tokenizer.ggml.pre); supported: default, "
                  "llama3/llama-bpe, qwen2, gpt-2, mpt, starcoder, refact, falcon, deepseek-llm, "
                  "deepseek-coder and aliases",
                  EscapeForMessage(name).c_str()));
  }
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  for (const char* pattern : spec->regexes) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* re =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
    if (!re) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return Status::Error(
          StrFormat("pre-tokenizer \"%.*s\": regex /%s/ failed to compile at "
                    "offset %zu: %s",
                    static_cast<int>(name.size()), name.data(), pattern,
                    static_cast<size_t>(err_off), reinterpret_cast<const char*>(msg)));
    }
    pcre2_jit_compile(re,
                      PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
    p->regexes_.push_back(re);
  }
  return p;
}

PreTokenizer::~PreTokenizer() {
  for (pcre2_code* re : regexes_) pcre2_code_free(re);
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (pcre2_code* re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
    next.clear();
    for (std::string_view frag : pieces) {
      // Each regex sees one piece at a time, so lookaheads stop at the piece's end.
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(frag.data());
      size_t pos = 0, last = 0;
      while (pos < frag.size()) {
        const int rc = pcre2_match(re, subject, frag.size(), pos, 0, md, nullptr);
        if (rc < 0) break;  // no further match: the rest is a gap
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t s = ov[0], e = ov[1];
        if (e <= s) {  // empty match: step over one byte-sequence and retry
          pos = s + 1;
          while (pos < frag.size() && (static_cast<unsigned char>(frag[pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (s > last) next.push_back(frag.substr(last, s - last));
        next.push_back(frag.substr(s, e - s));
        last = pos = e;
      }
      if (last < frag.size()) next.push_back(frag.substr(last));
    }
    pieces.swap(next);
    pcre2_match_data_free(md);
  }
  return pieces;
}

}  // namespace goose
