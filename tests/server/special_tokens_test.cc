// SpecialTokens on a real vocabulary with control tokens (Phi-3: <|user|>, <|end|>, ...).
#include "server/special_tokens.h"

#include <gtest/gtest.h>

#include <memory>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace goose::server {
namespace {

struct Phi3 {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
};

const Phi3& Vocab() {
  static const Phi3 v = [] {
    Phi3 p;
    auto g = GgufFile::Open(std::string(GOOSE_SHARED_DIR) + "/vocab/ggml-vocab-phi-3.gguf");
    if (!g.ok()) std::abort();
    p.gguf = std::move(g).value();
    auto t = Tokenizer::FromGguf(*p.gguf);
    if (!t.ok()) std::abort();
    p.tok = std::move(t).value();
    return p;
  }();
  return v;
}

TEST(SpecialTokens, EncodesControlTokenTextsAsTheirTokens) {
  const SpecialTokens sp = SpecialTokens::FromGguf(*Vocab().gguf);
  const Tokenizer& tok = *Vocab().tok;
  EXPECT_EQ(sp.TokenText(32010), "<|user|>");
  const std::vector<int32_t> ids = sp.Encode(tok, "<|user|>\nHello<|end|>\n<|assistant|>\n", true);
  // BOS, <|user|>, the text between as Encode gives it, <|end|>, ..., <|assistant|>, ...
  std::vector<int32_t> want = {tok.bos(), 32010};
  for (int32_t t : tok.Encode("\nHello", false)) want.push_back(t);
  want.push_back(32007);
  for (int32_t t : tok.Encode("\n", false)) want.push_back(t);
  want.push_back(32001);
  for (int32_t t : tok.Encode("\n", false)) want.push_back(t);
  EXPECT_EQ(ids, want);
  // Plain Encode reads the same text as characters: many more tokens, none of them control.
  const std::vector<int32_t> plain = tok.Encode("<|user|>\nHello<|end|>\n<|assistant|>\n", true);
  EXPECT_GT(plain.size(), ids.size());
  for (int32_t t : plain) EXPECT_LT(t, 32000);
}

TEST(SpecialTokens, TextWithoutControlTokensEncodesLikeEncode) {
  const SpecialTokens sp = SpecialTokens::FromGguf(*Vocab().gguf);
  const Tokenizer& tok = *Vocab().tok;
  for (const char* text : {"", "Hello world", " <|notatoken|> <| user |>", "\n\n  x"}) {
    EXPECT_EQ(sp.Encode(tok, text, true), tok.Encode(text, true)) << text;
    EXPECT_EQ(sp.Encode(tok, text, false), tok.Encode(text, false)) << text;
  }
}

TEST(SpecialTokens, AdjacentAndRepeatedControlTokens) {
  const SpecialTokens sp = SpecialTokens::FromGguf(*Vocab().gguf);
  const Tokenizer& tok = *Vocab().tok;
  EXPECT_EQ(sp.Encode(tok, "<|end|><|end|><|user|>", false),
            (std::vector<int32_t>{32007, 32007, 32010}));
}

// EncodeAtMost is Encode within its limit, nullopt past it, around control tokens too.
TEST(SpecialTokens, EncodeAtMostIsEncodeWithinItsLimit) {
  const SpecialTokens sp = SpecialTokens::FromGguf(*Vocab().gguf);
  const Tokenizer& tok = *Vocab().tok;
  for (const char* text : {"", "Hello world", "<|user|>\nHello<|end|>\n<|assistant|>\n",
                           "<|end|><|end|><|user|>", "a<|end|>"}) {
    const std::vector<int32_t> ids = sp.Encode(tok, text, true);
    for (size_t limit = 0; limit <= ids.size() + 1; ++limit) {
      const std::optional<std::vector<int32_t>> got = sp.EncodeAtMost(tok, text, true, limit);
      if (ids.size() <= limit) {
        ASSERT_TRUE(got) << text << " limit " << limit;
        EXPECT_EQ(*got, ids) << text;
      } else {
        EXPECT_FALSE(got) << text << " limit " << limit;
      }
    }
  }
  // A text too long for any way of encoding it is refused before it is searched or encoded.
  EXPECT_FALSE(sp.EncodeAtMost(tok, std::string(1 << 20, 'a'), true, 100));
}

}  // namespace
}  // namespace goose::server
