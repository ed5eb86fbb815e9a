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
  EXPECT_EQ(Split("llama-bpe", "ied 4 ½ months"), (Pieces{"ied", " ", "4", " ", "½", " months"}));
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

// Hand-derived splits, one table per pre-tokenizer. Each expectation follows from the regex
// list llama.cpp uses for that `tokenizer.ggml.pre` (src/llama-vocab.cpp), matched the way PCRE
// matches: at each position the first alternative that matches wins (not the longest), greedy
// quantifiers backtrack, and regexes after the first run on every piece separately.
struct SplitCase {
  std::string text;
  Pieces want;
};

void ExpectSplits(const char* pre, const std::vector<SplitCase>& cases) {
  for (const SplitCase& c : cases) {
    EXPECT_EQ(Split(pre, c.text), c.want) << pre << ": \"" << testing::Escape(c.text) << "\"";
  }
}

const std::string kHeart = "\xE2\x9D\xA4\xEF\xB8\x8F";  // U+2764 U+FE0F: a symbol and a mark
const std::string kLlama = "\xF0\x9F\xA6\x99";          // U+1F999, a symbol

// Llama 3: (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]) | [^\r\n\p{L}\p{N}]?\p{L}+
// | \p{N}{1,3} | ' ?[^\s\p{L}\p{N}]+[\r\n]*' | \s*[\r\n]+ | \s+(?!\S) | \s+
const std::vector<SplitCase> kLlama3Cases = {
    // Contractions, either case; the contraction alternative comes first, so "'sup" loses its
    // "'s". "'xyz" (no contraction) is one optional-prefix letter run, but after a space the
    // prefix slot is the space's, so " '" is a punctuation piece and "x" a word.
    {"I'm you'll she'd it's don't they've we're",
     {"I", "'m", " you", "'ll", " she", "'d", " it", "'s", " don", "'t", " they", "'ve", " we",
      "'re"}},
    {"HE'S WE'LL I'D we'Re", {"HE", "'S", " WE", "'LL", " I", "'D", " we", "'Re"}},
    {"'sup", {"'s", "up"}},
    {"'xyz 'x", {"'xyz", " '", "x"}},
    // Digits in groups of at most three, never joined to a space or letters.
    {"1234567 89", {"123", "456", "7", " ", "89"}},
    {"x2024y", {"x", "202", "4", "y"}},
    {"\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6", {"\xD9\xA3\xD9\xA4\xD9\xA5", "\xD9\xA6"}},  // ٣٤٥٦
    // One non-letter, non-digit, non-newline character may lead a letter run.
    {"(hello) world", {"(hello", ")", " world"}},
    {"a (b)", {"a", " (", "b", ")"}},
    {"snake_case-name", {"snake", "_case", "-name"}},
    {"$100", {"$", "100"}},
    // Punctuation runs take a leading space and trailing newlines.
    {"Hello!!! World...", {"Hello", "!!!", " World", "..."}},
    {"ok?!\n\nNext", {"ok", "?!\n\n", "Next"}},
    // Whitespace: a run gives its last space to the next word; \s*[\r\n]+ is tried first.
    {"a \t b", {"a", " \t", " b"}},
    {"line1\r\nline2", {"line", "1", "\r\n", "line", "2"}},
    {"a\n  ", {"a", "\n", "  "}},
    {"a  \n", {"a", "  \n"}},
    {"\n\n\n   x", {"\n\n\n", "  ", " x"}},
    // Other scripts are letters; emoji and variation selectors are neither letters nor digits.
    {"Привет мир", {"Привет", " мир"}},
    {"你好世界", {"你好世界"}},
    {"I " + kHeart + " " + kLlama + "s", {"I", " " + kHeart, " " + kLlama, "s"}},
    {kLlama + "s " + kLlama, {kLlama + "s", " " + kLlama}},
};

TEST(PreTokenizerTest, Llama3HandDerivedSplits) {
  ExpectSplits("llama-bpe", kLlama3Cases);
  ExpectSplits("llama3", kLlama3Cases);
}

// Qwen2: the Llama 3 regex with \p{N} instead of \p{N}{1,3}.
TEST(PreTokenizerTest, Qwen2HandDerivedSplits) {
  ExpectSplits(
      "qwen2",
      {
          {"DON'T we'Ll", {"DON", "'T", " we", "'Ll"}},
          {"1234 56", {"1", "2", "3", "4", " ", "5", "6"}},
          {"abc123def", {"abc", "1", "2", "3", "def"}},
          {"2024年", {"2", "0", "2", "4", "年"}},
          {"\xD9\xA3\xD9\xA4", {"\xD9\xA3", "\xD9\xA4"}},  // Arabic-Indic digits are \p{N} too
          {"(hello) world", {"(hello", ")", " world"}},
          {"ok?!\n\nNext", {"ok", "?!\n\n", "Next"}},
          {"a\n  ", {"a", "\n", "  "}},
          {"   Hello  ", {"  ", " Hello", "  "}},
          {"I " + kHeart + " " + kLlama + "s", {"I", " " + kHeart, " " + kLlama, "s"}},
      });
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S); whitespace
// no alternative takes (a newline before a letter) is a piece of its own.
TEST(PreTokenizerTest, Gpt2HandDerivedSplits) {
  ExpectSplits(
      "gpt-2",
      {
          {"I'm they'll it's", {"I", "'m", " they", "'ll", " it", "'s"}},
          {"HE'S we'Re", {"HE", "'", "S", " we", "'", "Re"}},  // case-sensitive contractions
          {"'sup", {"'s", "up"}},
          {"1234567 89", {"1234567", " 89"}},
          {"abc123def", {"abc", "123", "def"}},
          {"(hello) world", {"(", "hello", ")", " world"}},
          {"a \t b", {"a", " \t", " b"}},
          {"a\n\nb", {"a", "\n", "\n", "b"}},
          {"ok?!\n\nNext", {"ok", "?!", "\n", "\n", "Next"}},
          {"   Hello   ", {"  ", " Hello", "   "}},
          {"Привет мир", {"Привет", " мир"}},
          {"I " + kHeart + " " + kLlama + "s", {"I", " " + kHeart, " " + kLlama, "s"}},
      });
}

// Default: [\p{P}\$\+<=>\^~\|]+, then GPT-2's regex, then \p{N}+, then [0-9][0-9][0-9], each on
// the pieces of the one before. The first splits off punctuation, apostrophes included.
TEST(PreTokenizerTest, DefaultHandDerivedSplits) {
  ExpectSplits("default", {
                              {"don't stop", {"don", "'", "t", " stop"}},
                              {"Hello, world!", {"Hello", ",", " world", "!"}},
                              {"1234567", {"123", "456", "7"}},
                              {" 12345", {" ", "123", "45"}},
                              {"$5+3=8", {"$", "5", "+", "3", "=", "8"}},
                              {"x<=y a...b", {"x", "<=", "y", " a", "...", "b"}},
                              {"snake_case-name", {"snake", "_", "case", "-", "name"}},
                              {"Hi!!  you", {"Hi", "!!", " ", " you"}},
                              {"a`b", {"a", "`", "b"}},  // ` is a symbol (Sk), not punctuation
                              {kLlama + "!", {kLlama, "!"}},
                              {"\xC2\xBD", {"\xC2\xBD"}},  // ½: \p{N} but no ASCII digits
                          });
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
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "falcon",
                                           "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace goose
