// Prompt-set loaders on the real shared files and on malformed temp files; SPEC parsing.
#include "bench/datasets.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include "bench_test_util.h"
#include "model/model.h"

namespace goose {
namespace {

using testing::DataDir;
using testing::TempDir;
using testing::WriteFile;

DataSpec Spec(const std::string& name, const std::string& cat = "") { return {name, cat, -1}; }

TEST(ParseDataSpecs, NamesCategoriesAndCounts) {
  auto s = ParseDataSpecs("spec_bench:summarization:20,tinystories:40,gsm8k,mt_bench:coding");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].name, "spec_bench");
  EXPECT_EQ((*s)[0].category, "summarization");
  EXPECT_EQ((*s)[0].count, 20);
  EXPECT_EQ((*s)[1].category, "");
  EXPECT_EQ((*s)[1].count, 40);
  EXPECT_EQ((*s)[2].count, -1);
  EXPECT_EQ((*s)[3].category, "coding");
}

TEST(ParseDataSpecs, ErrorsNameTheItem) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {{"wikitext", "unknown data set 'wikitext'"},
               {"gsm8k,,tinystories", "empty item"},
               {"spec_bench:qa:0", "count '0'"},
               {"spec_bench:qa:x", "count 'x'"},
               {"gsm8k:algebra", "has no categories"},
               {"spec_bench::5", "empty category"},
               {"spec_bench:a:1:2", "name[:category][:count]"}};
  for (const Case& c : cases) {
    auto s = ParseDataSpecs(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

TEST(LoadDataSet, SpecBenchByCategoryUsesFirstTurn) {
  auto p = LoadDataSet(Spec("spec_bench", "summarization"), DataDir(), nullptr, 3);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 3u);
  for (const auto& q : *p) EXPECT_FALSE(q.text.empty());
  auto all = LoadDataSet(Spec("spec_bench"), DataDir(), nullptr, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 360u);  // SOURCES.md: 360 records
  auto mt = LoadDataSet(Spec("spec_bench", "multi_turn"), DataDir(), nullptr, 0);
  ASSERT_TRUE(mt.ok());
  EXPECT_EQ(mt->size(), 60u);
  EXPECT_EQ(mt->front().text.rfind("Compose an engaging travel blog post", 0), 0u);
}

TEST(LoadDataSet, EverySetLoadsWithItsRecordCount) {
  struct Case {
    const char* name;
    size_t records;
    const char* starts;
  } cases[] = {{"mt_bench", 60, "Compose an engaging"},
               {"humaneval", 164, "from typing import List"},
               {"gsm8k", 1299, "Janet"},
               {"alpaca_eval", 805, "What are the names of some famous actors"}};
  for (const Case& c : cases) {
    auto p = LoadDataSet(Spec(c.name), DataDir(), nullptr, 0);
    ASSERT_TRUE(p.ok()) << c.name << ": " << p.status().message();
    EXPECT_EQ(p->size(), c.records) << c.name;
    EXPECT_EQ(p->front().text.rfind(c.starts, 0), 0u) << c.name << ": " << p->front().text;
  }
  auto koala = LoadDataSet(Spec("alpaca_eval", "koala"), DataDir(), nullptr, 0);
  ASSERT_TRUE(koala.ok());
  EXPECT_EQ(koala->size(), 156u);  // SOURCES.md: koala 156
}

TEST(LoadDataSet, TinyStoriesIsBosPlus48Tokens) {
  auto model = Model::Load(testing::TinyModel());
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Tokenizer& tok = (*model)->tokenizer();
  EXPECT_FALSE(LoadDataSet(Spec("tinystories"), DataDir(), nullptr, 2).ok());
  auto p = LoadDataSet(Spec("tinystories"), DataDir(), &tok, 2);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 2u);
  for (const auto& q : *p) {
    ASSERT_EQ(q.tokens.size(), 49u);
    EXPECT_EQ(q.tokens[0], tok.bos());
    EXPECT_TRUE(q.text.empty());
  }
}

TEST(ExpandDataSpec, SpecBenchSplitsIntoSixGroups) {
  auto sets = ExpandDataSpec({"spec_bench", "", 2}, DataDir(), nullptr, 5);
  ASSERT_TRUE(sets.ok()) << sets.status().message();
  ASSERT_EQ(sets->size(), 6u);
  EXPECT_EQ((*sets)[0].label, "spec_bench/multi_turn");
  EXPECT_EQ((*sets)[5].label, "spec_bench/rag");
  for (const auto& s : *sets) EXPECT_EQ(s.prompts.size(), 2u) << s.label;
}

TEST(LoadDataSet, MalformedInputNamesFileAndLine) {
  const std::string dir = TempDir("malformed");
  struct Case {
    const char* name;
    const char* content;
    const char* expect;
  } cases[] = {
      {"gsm8k", "{\"question\": \"a\"}\n{\"question\": \"b\"\n", ".jsonl:2: not valid JSON"},
      {"gsm8k", "{\"question\": \"a\"}\n\n{\"answer\": \"b\"}\n", ":3: missing field \"question\""},
      {"gsm8k", "{\"question\": 7}\n", ":1: \"question\" is not a string"},
      {"spec_bench", "{\"category\": \"qa\", \"turns\": []}\n", ":1: \"turns\" must be"},
      {"mt_bench", "{\"turns\": 5}\n", ":1: \"turns\" must be"},
      {"mt_bench", "[1, 2]\n", ":1: record is not a JSON object"},
      {"gsm8k", "", "no prompts"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile(dir, "bad.jsonl", c.content);
    auto p = LoadDataSet(Spec(c.name), dir, nullptr, 0, path);
    ASSERT_FALSE(p.ok()) << c.content;
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(path), std::string::npos) << p.status().message();
  }
  const std::string arr = WriteFile(dir, "bad.json", "[{\"instruction\": \"a\"}, {\"x\": 1}]");
  auto a = LoadDataSet(Spec("alpaca_eval"), dir, nullptr, 0, arr);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("record 1: missing field \"instruction\""), std::string::npos)
      << a.status().message();
  const std::string obj = WriteFile(dir, "obj.json", "{\"instruction\": \"a\"}");
  EXPECT_FALSE(LoadDataSet(Spec("alpaca_eval"), dir, nullptr, 0, obj).ok());
  auto missing = LoadDataSet(Spec("gsm8k"), dir + "/nowhere", nullptr, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nowhere/gsm8k/test.jsonl"), std::string::npos);
  // A gzip file cut short is an error, not a silently shorter set.
  std::string gz;
  {
    const std::string path = dir + "/full.jsonl.gz";
    gzFile f = gzopen(path.c_str(), "wb");
    std::string body;
    for (int i = 0; i < 200; ++i) body += "{\"prompt\": \"def f" + std::to_string(i) + "():\"}\n";
    gzwrite(f, body.data(), body.size());
    gzclose(f);
    std::ifstream in(path, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto ok = LoadDataSet(Spec("humaneval"), dir, nullptr, 0, dir + "/full.jsonl.gz");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 200u);
  const std::string cut = WriteFile(dir, "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  EXPECT_FALSE(LoadDataSet(Spec("humaneval"), dir, nullptr, 0, cut).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace goose

namespace goose {
namespace {

TEST(LoadDataSet, CategoryFilterNeedsTheCategoryField) {
  const std::string dir = testing::TempDir("category");
  const std::string path = testing::WriteFile(dir, "q.jsonl", "{\"turns\": [\"x\"]}\n");
  auto p = LoadDataSet({"spec_bench", "qa", -1}, dir, nullptr, 0, path);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(":1: missing string field \"category\""), std::string::npos)
      << p.status().message();
  auto none = LoadDataSet({"spec_bench", "nonexistent", -1}, testing::DataDir(), nullptr, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no prompts in category 'nonexistent'"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace goose
