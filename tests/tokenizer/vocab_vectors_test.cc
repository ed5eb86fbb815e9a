// Tokenizes llama.cpp's test inputs with every vocab in shared/vocab that has a GGUF and checks
// the ids against Hugging Face's (the .out files), then checks decoding round-trips.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace goose {
namespace {

using testing::Escape;
using testing::IdsToString;

struct VocabParam {
  const char* name;
  const char* model;
  const char* pre;
  int32_t n_vocab;
};

// One load per vocab for all its tests (loading dominates the run time under sanitizers).
struct LoadedVocab {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
  std::vector<testing::VocabCase> cases;
  double load_seconds = 0;  // GgufFile::Open + Tokenizer::FromGguf
  std::string error;
};

const LoadedVocab& GetVocab(const std::string& name) {
  static std::map<std::string, LoadedVocab> cache;
  auto [it, inserted] = cache.try_emplace(name);
  LoadedVocab& v = it->second;
  if (!inserted) return v;
  const std::string path = testing::VocabPath(name);
  const auto t0 = std::chrono::steady_clock::now();
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) {
    v.error = gguf.status().message();
    return v;
  }
  v.gguf = std::move(gguf).value();
  auto tok = Tokenizer::FromGguf(*v.gguf);
  if (!tok.ok()) {
    v.error = tok.status().message();
    return v;
  }
  v.tok = std::move(tok).value();
  v.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!testing::ReadVocabCases(path, &v.cases, &v.error)) v.tok.reset();
  return v;
}

class VocabVectorsTest : public ::testing::TestWithParam<VocabParam> {
 protected:
  void SetUp() override {
    const LoadedVocab& v = GetVocab(GetParam().name);
    ASSERT_TRUE(v.tok) << v.error;
    tok_ = v.tok.get();
    cases_ = &v.cases;
    load_seconds_ = v.load_seconds;
  }

  const Tokenizer* tok_ = nullptr;
  const std::vector<testing::VocabCase>* cases_ = nullptr;
  double load_seconds_ = 0;
};

TEST_P(VocabVectorsTest, MetadataAndLoadTime) {
  EXPECT_EQ(tok_->model(), GetParam().model);
  EXPECT_EQ(tok_->pre(), GetParam().pre);
  EXPECT_EQ(tok_->n_vocab(), GetParam().n_vocab);
  EXPECT_EQ(cases_->size(), 46u);
  // Open + FromGguf, recorded, not asserted: speed goes in benchmarks, never in a timed unit
  // test (the largest vocab, deepseek-llm's 102400 tokens, loads in ~0.1 s optimized).
  RecordProperty("load_ms", static_cast<int>(load_seconds_ * 1000));
}

TEST_P(VocabVectorsTest, EncodeMatchesHuggingFace) {
  int failures = 0;
  for (const auto& c : *cases_) {
    const std::vector<int32_t> got = tok_->Encode(c.text, /*add_bos=*/false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << GetParam().name << ": input \"" << Escape(c.text) << "\"\n  expected"
                    << IdsToString(c.ids) << "\n  got     " << IdsToString(got);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(VocabVectorsTest, DecodeRoundTrips) {
  const bool spm = tok_->model() == "llama";
  for (const auto& c : *cases_) {
    std::string want = c.text;
    // SentencePiece's dummy prefix: decoding gives the text with one extra leading space.
    if (spm && !want.empty()) want = " " + want;
    EXPECT_EQ(tok_->Decode(c.ids), want) << GetParam().name << ": \"" << Escape(c.text) << "\"";
    EXPECT_EQ(tok_->Decode(tok_->Encode(c.text, false)), want);
  }
}

// EncodeAtMost(text, limit) is Encode(text) when that has at most `limit` ids, else nullopt; the
// bound it refuses long texts by (FewestTokens) holds, and every shared vocabulary has one.
// Each input alone, with and without BOS, and all of them as one text.
TEST_P(VocabVectorsTest, EncodeAtMostIsEncodeWithinItsLimit) {
  std::vector<std::string> texts;
  std::string all;
  for (const auto& c : *cases_) {
    texts.push_back(c.text);
    all += c.text + " ";
  }
  texts.push_back(all);
  // The vocabulary's longest pieces, each alone: where the bound is tightest (one token that
  // stands for max_token_bytes bytes).
  std::vector<std::pair<size_t, int32_t>> longest;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    longest.push_back({tok_->TokenToPiece(id).size(), id});
  }
  std::partial_sort(longest.begin(), longest.begin() + 8, longest.end(), std::greater<>());
  for (int i = 0; i < 8; ++i) texts.push_back(tok_->TokenToPiece(longest[i].second));
  EXPECT_GT(tok_->FewestTokens(all), 0u);
  for (const std::string& text : texts) {
    for (bool bos : {false, true}) {
      const std::vector<int32_t> ids = tok_->Encode(text, bos);
      EXPECT_LE(tok_->FewestTokens(text) + (bos && tok_->add_bos() ? 1 : 0), ids.size())
          << Escape(text);
      for (size_t limit : {size_t{0}, ids.size() / 2, ids.size() - std::min<size_t>(ids.size(), 1),
                           ids.size(), ids.size() + 1}) {
        const std::optional<std::vector<int32_t>> got = tok_->EncodeAtMost(text, bos, limit);
        if (ids.size() <= limit) {
          ASSERT_TRUE(got) << Escape(text) << " limit " << limit;
          EXPECT_EQ(*got, ids) << Escape(text);
        } else {
          EXPECT_FALSE(got) << Escape(text) << " limit " << limit;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllVocabs, VocabVectorsTest,
    ::testing::Values(VocabParam{"llama-spm", "llama", "default", 32000},
                      VocabParam{"phi-3", "llama", "default", 32064},
                      VocabParam{"gpt-2", "gpt2", "gpt-2", 50257},
                      VocabParam{"starcoder", "gpt2", "starcoder", 49152},
                      VocabParam{"falcon", "gpt2", "falcon", 65024},
                      VocabParam{"mpt", "gpt2", "mpt", 50432},
                      VocabParam{"refact", "gpt2", "refact", 49216},
                      VocabParam{"deepseek-llm", "gpt2", "deepseek-llm", 102400},
                      VocabParam{"deepseek-coder", "gpt2", "deepseek-coder", 32256}),
    [](const ::testing::TestParamInfo<VocabParam>& info) {
      std::string n = info.param.name;
      for (char& c : n) {
        if (c == '-') c = '_';
      }
      return n;
    });

}  // namespace
}  // namespace goose
