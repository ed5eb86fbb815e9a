// EscapeForMessage: what a message may quote from a file.
#include "util/escape.h"

#include <gtest/gtest.h>

#include <string>

namespace goose {
namespace {

TEST(EscapeForMessageTest, PrintableAsciiAndUtf8StayAsTheyAre) {
  EXPECT_EQ(EscapeForMessage("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
  EXPECT_EQ(EscapeForMessage("\xe2\x96\x81Hello"), "\xe2\x96\x81Hello");  // ▁Hello
  EXPECT_EQ(EscapeForMessage("\xc3\x84pfel \xf0\x9f\xa6\x99"), "\xc3\x84pfel \xf0\x9f\xa6\x99");
  EXPECT_EQ(EscapeForMessage(""), "");
}

TEST(EscapeForMessageTest, InvalidUtf8BecomesHexBytes) {
  // The case from issue 18: a key name ending in 0xFF bytes.
  EXPECT_EQ(EscapeForMessage("tokenize\xff\xff"), "tokenize\\xFF\\xFF");
  EXPECT_EQ(EscapeForMessage("\x80"), "\\x80");                    // stray continuation byte
  EXPECT_EQ(EscapeForMessage("\xc0\xaf"), "\\xC0\\xAF");           // overlong '/'
  EXPECT_EQ(EscapeForMessage("\xe0\x80\xaf"), "\\xE0\\x80\\xAF");  // overlong, 3 bytes
  EXPECT_EQ(EscapeForMessage("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(EscapeForMessage("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(EscapeForMessage("a\xe2\x96"), "a\\xE2\\x96");                  // truncated at the end
  EXPECT_EQ(EscapeForMessage("\xe2\x96z"), "\\xE2\\x96z");  // truncated in the middle
}

TEST(EscapeForMessageTest, ControlsAndQuotesAreSpelledOut) {
  EXPECT_EQ(EscapeForMessage("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(EscapeForMessage(std::string("\0\x1b[2J\x7f", 6)), "\\x00\\x1B[2J\\x7F");
  EXPECT_EQ(EscapeForMessage("it's \"x\" \\ y"), "it\\'s \\\"x\\\" \\\\ y");
  EXPECT_EQ(EscapeForMessage("\xc2\x85"), "\\u{0085}");  // C1 NEL
  EXPECT_EQ(EscapeForMessage("ab\xe2\x80\xae"
                             "cd"),
            "ab\\u{202E}cd");                                // RLO
  EXPECT_EQ(EscapeForMessage("\xe2\x80\xa8"), "\\u{2028}");  // line separator
  EXPECT_EQ(EscapeForMessage("\xe2\x81\xa6"), "\\u{2066}");  // LRI
}

TEST(EscapeForMessageTest, LongTextIsCutAtACharacterBoundary) {
  const std::string key(1 << 20, 'k');
  EXPECT_EQ(EscapeForMessage(key, 4), "kkkk...(1048576 bytes)");
  EXPECT_LT(EscapeForMessage(key).size(), 120u);
  // A 3-byte character that would straddle the limit is left out whole.
  EXPECT_EQ(EscapeForMessage("ab\xe2\x96\x81", 4), "ab...(5 bytes)");
  EXPECT_EQ(EscapeForMessage("ab\xe2\x96\x81", 5), "ab\xe2\x96\x81");
  EXPECT_EQ(EscapeForMessage("abcd", 4), "abcd");
}

TEST(EscapeForMessageTest, OutputIsAlwaysCleanUtf8) {
  // Every 2-byte string: no control byte survives and every non-ASCII byte is part of a
  // well-formed character (checked by escaping the output again: it must not change, except
  // that backslashes double).
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string in = {static_cast<char>(a), static_cast<char>(b)};
      const std::string out = EscapeForMessage(in);
      for (unsigned char c : out) ASSERT_FALSE(c < 0x20 || c == 0x7F) << a << " " << b;
      std::string undoubled;
      const std::string again = EscapeForMessage(out, out.size());
      for (size_t i = 0; i < again.size(); ++i) {
        if (again[i] == '\\' && i + 1 < again.size()) ++i;
        undoubled += again[i];
      }
      ASSERT_EQ(undoubled, out) << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace goose
