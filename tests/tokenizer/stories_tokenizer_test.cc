// The tiny Llama's SPM vocab against llama.cpp's recorded prompts and outputs
// (shared/reference/stories260K_greedy.jsonl), and streaming detokenization.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer_test_util.h"

namespace goose {
namespace {

testing::LoadedTokenizer Load(const std::string& path) {
  testing::LoadedTokenizer t;
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status().message();
  if (!gguf.ok()) return t;
  t.gguf = std::move(gguf).value();
  auto tok = Tokenizer::FromGguf(*t.gguf);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  if (tok.ok()) t.tok = std::move(tok).value();
  return t;
}

TEST(StoriesTokenizerTest, MatchesLlamaCppPromptsAndOutputs) {
  auto t = Load(testing::SharedDir() + "/models/stories260K.gguf");
  ASSERT_TRUE(t.tok);
  EXPECT_EQ(t.tok->model(), "llama");
  EXPECT_EQ(t.tok->n_vocab(), 512);
  EXPECT_EQ(t.tok->bos(), 1);
  EXPECT_EQ(t.tok->eos(), 2);
  EXPECT_TRUE(t.tok->IsEog(2));
  EXPECT_FALSE(t.tok->IsEog(1));
  EXPECT_EQ(t.tok->TokenToPiece(1), "");  // control token

  std::ifstream in(testing::SharedDir() + "/reference/stories260K_greedy.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto rec = nlohmann::json::parse(line);
    const std::string prompt = rec["prompt"];
    const auto want_prompt = rec["prompt_tokens"].get<std::vector<int32_t>>();
    const auto output = rec["output_tokens"].get<std::vector<int32_t>>();
    const std::string output_text = rec["output_text"];
    EXPECT_EQ(t.tok->Encode(prompt, /*add_bos=*/true), want_prompt) << "prompt: " << prompt;
    EXPECT_EQ(t.tok->Decode(output), output_text) << "prompt: " << prompt;

    StreamDecoder stream(*t.tok);
    std::string streamed;
    for (int32_t id : output) streamed += stream.Push(id);
    streamed += stream.Flush();
    EXPECT_EQ(streamed, output_text);
    ++records;
  }
  EXPECT_EQ(records, 12);
}

TEST(StreamDecoderTest, HoldsBackSplitCharacters) {
  auto t = Load(testing::VocabPath("llama-spm"));
  ASSERT_TRUE(t.tok);
  // 🦙 is not in the Llama 2 vocab: it becomes four byte tokens after the dummy-prefix space.
  const std::string llama = "\xF0\x9F\xA6\x99";
  const std::vector<int32_t> ids = t.tok->Encode(llama + "!", false);
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ(t.tok->TokenToPiece(ids[1]), "\xF0");
  StreamDecoder stream(*t.tok);
  EXPECT_EQ(stream.Push(ids[0]), " ");
  EXPECT_EQ(stream.Push(ids[1]), "");
  EXPECT_EQ(stream.Push(ids[2]), "");
  EXPECT_EQ(stream.Push(ids[3]), "");
  EXPECT_EQ(stream.Push(ids[4]), llama);
  EXPECT_EQ(stream.Push(ids[5]), "!");
  EXPECT_EQ(stream.Flush(), "");

  // An unfinished character at the end comes out of Flush(); a broken one is not held back.
  StreamDecoder tail(*t.tok);
  EXPECT_EQ(tail.Push(ids[1]), "");
  EXPECT_EQ(tail.Push(ids[2]), "");
  EXPECT_EQ(tail.Flush(), "\xF0\x9F");
  StreamDecoder broken(*t.tok);
  EXPECT_EQ(broken.Push(ids[1]), "");
  EXPECT_EQ(broken.Push(ids[5]), "\xF0!");
}

TEST(StreamDecoderTest, ByteLevelTokensSplitCharacters) {
  auto t = Load(testing::VocabPath("gpt-2"));
  ASSERT_TRUE(t.tok);
  const std::string text =
      " \xF0\x9F\xA6\x99 \xE1\x9E\x80\xE1\x9E\xB6 Cửa";  // " 🦙 កា Cửa"
  const std::vector<int32_t> ids = t.tok->Encode(text, false);
  bool saw_partial = false;
  for (int32_t id : ids) {
    const std::string piece = t.tok->TokenToPiece(id);
    for (unsigned char c : piece) saw_partial |= c >= 0x80;
  }
  ASSERT_TRUE(saw_partial);
  StreamDecoder stream(*t.tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = stream.Push(id);
    // Every chunk is whole characters: it never ends inside a multi-byte sequence.
    if (!chunk.empty()) {
      size_t i = chunk.size() - 1;
      while (i > 0 && (static_cast<unsigned char>(chunk[i]) & 0xC0) == 0x80) --i;
      const unsigned char lead = chunk[i];
      const size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      EXPECT_EQ(chunk.size() - i, len) << "chunk ends mid-character";
    }
    out += chunk;
  }
  out += stream.Flush();
  EXPECT_EQ(out, text);
}

}  // namespace
}  // namespace goose
