// Loading from hand-built GGUF metadata: malformed tokenizer keys give errors naming the file
// and key; small synthetic vocabs pin down SPM/BPE details (user-defined tokens, byte fallback,
// BOS handling, EOG detection).
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace goose {
namespace {

// An 11-token SPM vocab: <unk> <s> </s>, two byte tokens, pieces and a user-defined token.
GgufWriter SpmWriter() {
  GgufWriter w;
  w.Set("tokenizer.ggml.model", GgufValue::String("llama"));
  w.Set("tokenizer.ggml.tokens", GgufValue::StringArray({"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>",
                                                         "\xE2\x96\x81", "a", "b",
                                                         "\xE2\x96\x81"
                                                         "ab",
                                                         "<|user|>", "ab"}));
  w.Set("tokenizer.ggml.scores", GgufValue::F32Array({0, 0, 0, 0, 0, -1, -2, -2, -0.5f, 0, -1.5f}));
  w.Set("tokenizer.ggml.token_type", GgufValue::I32Array({2, 3, 3, 6, 6, 1, 1, 1, 1, 4, 1}));
  return w;
}

StatusOr<std::unique_ptr<Tokenizer>> Build(const GgufWriter& w, std::unique_ptr<GgufFile>* keep) {
  auto gguf = GgufFile::FromBytes(w.Serialize(), "synthetic.gguf");
  if (!gguf.ok()) return gguf.status();
  *keep = std::move(gguf).value();
  return Tokenizer::FromGguf(**keep);
}

// Expects loading to fail with a message that names the file and every one of `needles`.
void ExpectError(const GgufWriter& w, std::initializer_list<const char*> needles) {
  std::unique_ptr<GgufFile> keep;
  auto tok = Build(w, &keep);
  ASSERT_FALSE(tok.ok());
  const std::string msg = tok.status().message();  // status() is a temporary
  EXPECT_NE(msg.find("synthetic.gguf"), std::string::npos) << msg;
  for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
}

TEST(TokenizerMetadataTest, SyntheticSpmVocab) {
  std::unique_ptr<GgufFile> keep;
  auto tok = Build(SpmWriter(), &keep);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.n_vocab(), 11);
  EXPECT_EQ(t.bos(), 1);  // llama.cpp defaults for SPM
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.Encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(t.Encode("", false), (std::vector<int32_t>{}));
  // "a"+"b" -> "ab" first, then "▁"+"ab" -> "▁ab".
  EXPECT_EQ(t.Encode("ab", true), (std::vector<int32_t>{1, 8}));
  // 'c' is neither a piece nor has a byte token -> <unk>; '\n' and 'Ã' fall back to bytes.
  EXPECT_EQ(t.Encode("a\n", false), (std::vector<int32_t>{5, 6, 3}));
  EXPECT_EQ(t.Encode("c", false), (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(t.Encode("\xC3", false), (std::vector<int32_t>{5, 4}));
  // The user-defined token is matched whole, and the dummy prefix follows it again.
  EXPECT_EQ(t.Encode("ab<|user|>ab", false), (std::vector<int32_t>{8, 9, 8}));
  EXPECT_EQ(t.TokenToPiece(8), " ab");
  EXPECT_EQ(t.TokenToPiece(3), "\n");
  EXPECT_EQ(t.TokenToPiece(9), "<|user|>");
  EXPECT_EQ(t.TokenToPiece(1), "");
  EXPECT_EQ(t.TokenToPiece(0), "");
  EXPECT_EQ(t.TokenToPiece(-1), "");
  EXPECT_EQ(t.TokenToPiece(11), "");
  EXPECT_TRUE(t.IsEog(2));
  EXPECT_FALSE(t.IsEog(8));
  EXPECT_FALSE(t.IsEog(99));
}

TEST(TokenizerMetadataTest, OptionalKeysOverrideDefaults) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.add_bos_token", GgufValue::Bool(false));
  w.Set("tokenizer.ggml.add_space_prefix", GgufValue::Bool(false));
  w.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(9));
  w.Set("tokenizer.ggml.eot_token_id", GgufValue::U32(2));
  std::unique_ptr<GgufFile> keep;
  auto tok = Build(w, &keep);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_FALSE((*tok)->add_bos());
  EXPECT_EQ((*tok)->Encode("ab", true), (std::vector<int32_t>{10}));  // no BOS, no prefix
  EXPECT_EQ((*tok)->eos(), 9);
  EXPECT_TRUE((*tok)->IsEog(9));
  EXPECT_TRUE((*tok)->IsEog(2));
}

TEST(TokenizerMetadataTest, SyntheticBpeVocab) {
  GgufWriter w;
  w.Set("tokenizer.ggml.model", GgufValue::String("gpt2"));
  w.Set("tokenizer.ggml.pre", GgufValue::String("gpt-2"));
  // "Ġ" is the byte-level spelling of ' '.
  w.Set("tokenizer.ggml.tokens",
        GgufValue::StringArray({"h", "i", "\xC4\xA0", "hi", "\xC4\xA0hi", "<|endoftext|>"}));
  w.Set("tokenizer.ggml.token_type", GgufValue::I32Array({1, 1, 1, 1, 1, 3}));
  w.Set("tokenizer.ggml.merges", GgufValue::StringArray({"h i", "\xC4\xA0 hi"}));
  w.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(5));
  std::unique_ptr<GgufFile> keep;
  auto tok = Build(w, &keep);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = **tok;
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.bos(), -1);
  EXPECT_EQ(t.Encode("hi hi", true), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(t.Encode("ih", false), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(t.Decode({4, 3}), " hihi");
  EXPECT_EQ(t.TokenToPiece(5), "");
  EXPECT_TRUE(t.IsEog(5));
}

TEST(TokenizerMetadataTest, MissingModel) {
  GgufWriter w;
  w.Set("tokenizer.ggml.tokens", GgufValue::StringArray({"a"}));
  ExpectError(w, {"tokenizer.ggml.model", "missing"});
}

TEST(TokenizerMetadataTest, UnknownModel) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.model", GgufValue::String("bert"));
  ExpectError(w, {"tokenizer.ggml.model", "bert"});
  w.Set("tokenizer.ggml.model", GgufValue::String("bert\xe2\x80\xae"));  // + RLO
  ExpectError(w, {"\"bert\\u{202E}\""});
}

TEST(TokenizerMetadataTest, MissingTokens) {
  GgufWriter w;
  w.Set("tokenizer.ggml.model", GgufValue::String("llama"));
  ExpectError(w, {"tokenizer.ggml.tokens", "missing"});
}

TEST(TokenizerMetadataTest, TokensOfWrongType) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.tokens", GgufValue::I32Array({1, 2, 3}));
  ExpectError(w, {"tokenizer.ggml.tokens", "string"});
}

TEST(TokenizerMetadataTest, ScoresLengthMismatch) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.scores", GgufValue::F32Array({0, 0, 0}));
  ExpectError(w, {"tokenizer.ggml.scores", "3 elements", "11"});
}

TEST(TokenizerMetadataTest, TokenTypeLengthAndRange) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.token_type", GgufValue::I32Array({1}));
  ExpectError(w, {"tokenizer.ggml.token_type", "1 elements"});
  w.Set("tokenizer.ggml.token_type", GgufValue::I32Array({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 42}));
  ExpectError(w, {"tokenizer.ggml.token_type[10]", "42"});
}

TEST(TokenizerMetadataTest, SpecialIdOutOfRange) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(1000));
  ExpectError(w, {"tokenizer.ggml.bos_token_id", "1000"});
}

TEST(TokenizerMetadataTest, WrongScalarType) {
  GgufWriter w = SpmWriter();
  w.Set("tokenizer.ggml.add_bos_token", GgufValue::String("yes"));
  ExpectError(w, {"tokenizer.ggml.add_bos_token", "bool"});
}

TEST(TokenizerMetadataTest, BpeNeedsMergesAndKnownPre) {
  GgufWriter w;
  w.Set("tokenizer.ggml.model", GgufValue::String("gpt2"));
  w.Set("tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b", "ab"}));
  ExpectError(w, {"tokenizer.ggml.merges"});
  w.Set("tokenizer.ggml.merges", GgufValue::StringArray({"ab"}));
  ExpectError(w, {"tokenizer.ggml.merges[0]"});
  // Text from the file is quoted escaped (util/escape.h).
  w.Set("tokenizer.ggml.merges", GgufValue::StringArray({"a\n\xff"}));
  ExpectError(w, {"tokenizer.ggml.merges[0] = \"a\\n\\xFF\""});
  w.Set("tokenizer.ggml.merges", GgufValue::StringArray({"a b"}));
  w.Set("tokenizer.ggml.pre", GgufValue::String("klingon"));
  ExpectError(w, {"klingon", "tokenizer.ggml.pre"});
  w.Set("tokenizer.ggml.pre", GgufValue::String("kling\x1b[0mon"));
  ExpectError(w, {"\"kling\\x1B[0mon\""});
}

}  // namespace
}  // namespace goose
