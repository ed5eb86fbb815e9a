// TextStream and the UTF-8 helpers, on the tiny model's real vocabulary (its byte tokens make
// invalid UTF-8 easy to produce).
#include "server/text_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/engine_test_util.h"
#include "server/utf8.h"

namespace goose::server {
namespace {

const Tokenizer& Tok() { return Tiny().tokenizer(); }

// What a client must receive for `tokens`: the decoded text cut before the stop occurrence that
// ends first, made valid UTF-8 in one piece.
std::string Expected(const std::vector<int32_t>& tokens, const std::vector<std::string>& stop) {
  const std::string text = Tok().Decode(tokens);
  size_t best_end = std::string::npos, best_start = 0;
  for (const std::string& s : stop) {
    const size_t at = text.find(s);
    if (at != std::string::npos &&
        (at + s.size() < best_end || (at + s.size() == best_end && at < best_start))) {
      best_end = at + s.size();
      best_start = at;
    }
  }
  return ToValidUtf8(best_end == std::string::npos ? text : text.substr(0, best_start));
}

std::string Stream(const std::vector<int32_t>& tokens, const std::vector<std::string>& stop,
                   std::vector<std::string>* pieces = nullptr) {
  TextStream ts(Tok(), stop);
  std::string out;
  for (int32_t t : tokens) {
    const std::string p = ts.Push(t);
    if (pieces) pieces->push_back(p);
    out += p;
  }
  out += ts.Finish();
  return out;
}

std::vector<int32_t> Encode(const std::string& text) { return Tok().Encode(text, false); }

TEST(Utf8, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa1 \xe2\x82\xac \xf0\x9f\xa6\x99"));  // á € 🦙
  EXPECT_FALSE(IsValidUtf8("\xc3"));                                   // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));                                   // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                               // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));                           // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));                       // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

TEST(Utf8, ReplacesEachInvalidByte) {
  EXPECT_EQ(ToValidUtf8("a\xffz"), "a\xef\xbf\xbdz");
  EXPECT_EQ(ToValidUtf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(ToValidUtf8("\xe2\x82\xac"), "\xe2\x82\xac");
  EXPECT_EQ(ToValidUtf8("\xf0\xe2\x82\xac"), "\xef\xbf\xbd\xe2\x82\xac");
}

TEST(TextStream, WithoutStopStringsIsTheDecodedText) {
  const std::vector<int32_t> ids = Encode("Once upon a time, there was a little girl.");
  EXPECT_EQ(Stream(ids, {}), Tok().Decode(ids));
}

TEST(TextStream, StopStringAcrossTokensIsCutAndNotReturned) {
  const std::vector<int32_t> ids = Encode("Lily saw a big red ball in the park.");
  std::vector<std::string> pieces;
  TextStream ts(Tok(), {"red ball"});
  std::string out;
  for (int32_t t : ids) {
    out += ts.Push(t);
    if (ts.stopped()) break;
  }
  out += ts.Finish();
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.stop_string(), "red ball");
  EXPECT_EQ(out, Tok().Decode(ids).substr(0, Tok().Decode(ids).find("red ball")));
}

TEST(TextStream, HoldsBackOnlyWhatCouldStillBecomeAStop) {
  // "the park" never completes "the parkour": the held bytes come out at the end.
  const std::vector<int32_t> ids = Encode("in the park");
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(ids, {"the parkour"}, &pieces), Tok().Decode(ids));
  // The last push ends in "the park" (a prefix of "the parkour"), so the pushes returned less.
  std::string pushed;
  for (const std::string& p : pieces) pushed += p;
  EXPECT_LT(pushed.size(), Tok().Decode(ids).size());
}

TEST(TextStream, FirstEndingStopWinsWhateverTheOrder) {
  const std::vector<int32_t> ids = Encode("abcdef");
  // "cd" ends before "bcdef" does, though "bcdef" starts first.
  EXPECT_EQ(Stream(ids, {"bcdef", "cd"}), Expected(ids, {"bcdef", "cd"}));
  EXPECT_EQ(Expected(ids, {"bcdef", "cd"}),
            Tok().Decode(ids).substr(0, Tok().Decode(ids).find("cd")));
}

// Random token strings (byte tokens included, so invalid UTF-8 and split characters happen) and
// random stop strings taken from their text: the streamed pieces always concatenate to Expected.
TEST(TextStream, MatchesTheWholeTextReference) {
  std::mt19937 rng(7);
  const int n_vocab = Tok().n_vocab();
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 30);
    for (int32_t& t : ids) t = static_cast<int32_t>(rng() % n_vocab);
    const std::string text = Tok().Decode(ids);
    std::vector<std::string> stop;
    for (int k = rng() % 3; k > 0 && !text.empty(); --k) {
      const size_t a = rng() % text.size();
      stop.push_back(text.substr(a, 1 + rng() % 6));
    }
    if (trial % 5 == 0) stop.push_back("\xe2\x82");  // never valid on its own
    std::vector<std::string> pieces;
    const std::string got = Stream(ids, stop, &pieces);
    EXPECT_EQ(got, Expected(ids, stop)) << "trial " << trial;
    for (const std::string& p : pieces) EXPECT_TRUE(IsValidUtf8(p));
  }
}

}  // namespace
}  // namespace goose::server
