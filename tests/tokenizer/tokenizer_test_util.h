// Helpers shared by the tokenizer tests: locating /work/shared data, reading llama.cpp's
// tokenizer test vectors (format in shared/vocab/SOURCES.md) and loading vocab GGUFs.
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace goose::testing {

inline std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED")) return env;
  return GOOSE_SHARED_DIR;
}

inline bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Splits `.inp` on "\n__ggml_vocab_test__\n" (a non-empty trailing piece is one more input) and
// pairs each input with the ids on the same line of `.out`.
inline bool ReadVocabCases(const std::string& base, std::vector<VocabCase>* cases,
                           std::string* error) {
  std::string inp, outp;
  if (!ReadWholeFile(base + ".inp", &inp) || !ReadWholeFile(base + ".out", &outp)) {
    *error = "cannot read " + base + ".inp/.out";
    return false;
  }
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t hit = inp.find(kSep, pos);
    if (hit == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + kSep.size();
  }
  std::vector<std::vector<int32_t>> ids;
  std::istringstream lines(outp);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<int32_t> row;
    long v;
    while (nums >> v) row.push_back(static_cast<int32_t>(v));
    ids.push_back(row);
  }
  if (texts.size() != ids.size()) {
    *error = base + ": " + std::to_string(texts.size()) + " inputs but " +
             std::to_string(ids.size()) + " expected-id lines";
    return false;
  }
  for (size_t i = 0; i < texts.size(); ++i) cases->push_back({texts[i], ids[i]});
  return true;
}

struct LoadedTokenizer {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
};

inline std::string VocabPath(const std::string& name) {
  return SharedDir() + "/vocab/ggml-vocab-" + name + ".gguf";
}

inline std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace goose::testing
