// Pre-tokenizer regexes checked without a vocabulary: hand-checked splits for Llama 3 and Qwen2
// (whose vocab GGUFs are too large to ship) plus properties over llama.cpp's test inputs.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace goose {
namespace {

using Pieces = std::vector<std::string>;

Pieces Split(const char* pre, std::string_view text) {
  auto r = Tokenizer::PreTokenize(pre, text);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : Pieces{};
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(Split("llama-bpe", "333333333"), (Pieces{"333", "333", "333"}));
  EXPECT_EQ(Split("llama3", "3333"), (Pieces{"333", "3"}));
  // '½' is a number (No), so it is a digit group of its own and its space stays alone.
  EXPECT_EQ(Split("llama-bpe", "ied 4 ½ months"),
            (Pieces{"ied", " ", "4", " ", "½", " months"}));
}

TEST(PreTokenizerTest, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(Split("qwen2", "3333"), (Pieces{"3", "3", "3", "3"}));
  EXPECT_EQ(Split("qwen2", "333333333").size(), 9u);
}

TEST(PreTokenizerTest, EmojiAndPunctuation) {
  const Pieces want = {" this", " is", " \xF0\x9F\xA6\x99.", "cpp"};  // " this is 🦙.cpp"
  EXPECT_EQ(Split("llama-bpe", " this is \xF0\x9F\xA6\x99.cpp"), want);
  EXPECT_EQ(Split("qwen2", " this is \xF0\x9F\xA6\x99.cpp"), want);
  EXPECT_EQ(Split("gpt-2", " this is \xF0\x9F\xA6\x99.cpp"), want);
}

TEST(PreTokenizerTest, Contractions) {
  // Llama 3 / Qwen2 contractions are case-insensitive, GPT-2's are not.
  EXPECT_EQ(Split("llama-bpe", "you're HE'S"), (Pieces{"you", "'re", " HE", "'S"}));
  EXPECT_EQ(Split("qwen2", "I'LL"), (Pieces{"I", "'LL"}));
  EXPECT_EQ(Split("gpt-2", "you're HE'S"), (Pieces{"you", "'re", " HE", "'", "S"}));
}

TEST(PreTokenizerTest, Whitespace) {
  // A run of spaces leaves its last space to the following word; newlines group together.
  EXPECT_EQ(Split("llama-bpe", "   Hello"), (Pieces{"  ", " Hello"}));
  EXPECT_EQ(Split("llama-bpe", "Hello\n\nworld"), (Pieces{"Hello", "\n\n", "world"}));
  EXPECT_EQ(Split("llama-bpe", "a  \n b"), (Pieces{"a", "  \n", " b"}));
  EXPECT_EQ(Split("qwen2", "\t\n"), (Pieces{"\t\n"}));
  EXPECT_EQ(Split("llama-bpe", "x   "), (Pieces{"x", "   "}));
}

TEST(PreTokenizerTest, UnknownNameIsAnError) {
  auto r = Tokenizer::PreTokenize("no-such-pre", "abc");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-pre"), std::string::npos);
}

TEST(PreTokenizerTest, InvalidUtf8IsKept) {
  const std::string text = "ab\xFF\xC3 cd\xE2\x82";
  std::string joined;
  for (const auto& p : Split("llama-bpe", text)) joined += p;
  EXPECT_EQ(joined, text);
}

// Over the shared test inputs: the pieces concatenate back to the input, and there are never
// more pieces than the Hugging Face token count (BPE never merges across pieces).
class PreTokenizerVectorsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PreTokenizerVectorsTest, PiecesRebuildInputAndBoundTokenCount) {
  const std::string name = GetParam();
  std::vector<testing::VocabCase> cases;
  std::string error;
  ASSERT_TRUE(testing::ReadVocabCases(testing::VocabPath(name), &cases, &error)) << error;
  ASSERT_EQ(cases.size(), 46u);
  const char* pre = name == "llama-bpe" ? "llama-bpe" : name == "qwen2" ? "qwen2" : name.c_str();
  for (const auto& c : cases) {
    auto pieces = Tokenizer::PreTokenize(pre, c.text);
    ASSERT_TRUE(pieces.ok()) << pieces.status().message();
    std::string joined;
    for (const auto& p : *pieces) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, c.text);
    EXPECT_LE(pieces->size(), c.ids.size()) << name << ": \"" << testing::Escape(c.text) << "\"";
    if (c.text.empty()) {
      EXPECT_TRUE(pieces->empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vectors, PreTokenizerVectorsTest,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "deepseek-llm",
                                           "falcon", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace goose
