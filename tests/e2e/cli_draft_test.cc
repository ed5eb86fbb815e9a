// -md / --model-draft as a user runs it: the draft-model methods print plain decoding's text,
// --json carries the draft work, goose bench runs them; a method without -md, a missing,
// corrupt, other-vocabulary or short-context draft file is one "goose: ..." line and exit 1; a
// draft costlier than its target is a warning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "method/weak_drafter.h"
#include "test_temp.h"

namespace goose {
namespace {

std::string Temp(const std::string& name) { return ProcessTempPath("cli_draft_" + name); }

RunResult Goose(const std::string& args) { return RunGoose(args); }

std::string Tiny() { return SharedPath("models/stories260K.gguf"); }

// The weak drafter as a file (the loaded model's file is gone): written again for the CLI.
std::string WeakDrafterFile() {
  static const std::string path = [] {
    const std::string p = Temp("weak.gguf");
    const std::string cmd = "'" + SharedPath("tools/inflate_gguf.py") + "' '" + Tiny() + "' '" + p +
                            "' --shape keep --drop-layers 3 --dtype f32 >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0 ? p : std::string();
  }();
  return path;
}

// goose synth with the tiny model's (or another) vocabulary; "" on failure.
std::string SynthFile(const std::string& name, const std::string& extra,
                      const std::string& shape = "--hidden 32 --ffn 64") {
  const std::string p = Temp(name + ".gguf");
  const RunResult r =
      Goose("synth " + shape + " --layers 1 --heads 2 --kv-heads 2 " + extra + " -o " + p);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? p : "";
}

bool OneErrorLine(const RunResult& r) {
  return r.exit_code == 1 && r.err.rfind("goose: ", 0) == 0 && r.err.find('\n') == r.err.size() - 1;
}

const std::string kPrompt = " -p 'Lily and Tom went to the park. Lily and Tom' -n 40 -t 1";

TEST(CliDraft, DraftMethodsPrintPlainTextAndReportDraftWork) {
  const std::string weak = WeakDrafterFile();
  if (weak.empty()) GTEST_SKIP() << "no weak drafter (inflate_gguf.py needs python3-numpy)";
  const RunResult plain = Goose("generate -m " + Tiny() + kPrompt + " --spec none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* spec : {"draft", "draft-tree", "draft-tree+prune", "graft", "graft+paper"}) {
    // Both spellings of the flag.
    const std::string flag = std::string(spec) == "graft" ? " -md " : " --model-draft ";
    // A fixed budget: under --budget auto whether the draft model pays depends on the machine's
    // load (CI once measured it costlier and ran plain steps).
    const RunResult r =
        Goose("generate -m " + Tiny() + flag + weak + kPrompt + " --spec " + spec + " --budget 8");
    ASSERT_EQ(r.exit_code, 0) << spec << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << spec;
    EXPECT_NE(r.err.find("draft model: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" passes/cycle"), std::string::npos) << r.err;
  }
  const RunResult j = Goose("generate -m " + Tiny() + " -md " + weak + kPrompt +
                            " --spec graft --budget 12 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto stats = nlohmann::json::parse(j.out)["stats"];
  EXPECT_EQ(stats["draft_model_file"], weak);
  ASSERT_TRUE(stats.contains("draft_model")) << stats.dump();
  EXPECT_GT(stats["draft_model"]["passes_per_cycle"].get<double>(), 0.0);
  EXPECT_TRUE(stats["drafted"].contains("graft_table"));
  // Its drafts were accepted (the text alone would not show it).
  EXPECT_GT(stats["accepted"]["draft"].get<int64_t>(), 0) << stats["accepted"];
}

TEST(CliDraft, MethodWithoutDraftModelIsOneError) {
  const RunResult r = Goose("generate -m " + Tiny() + kPrompt + " --spec graft");
  EXPECT_TRUE(OneErrorLine(r)) << r.exit_code << " " << r.err;
  EXPECT_NE(r.err.find("needs a draft model: give one with -md DRAFT.gguf"), std::string::npos)
      << r.err;
  const RunResult b = Goose("bench -m " + Tiny() +
                            " --data tinystories:1 --methods graft --budgets 8 --quiet --out " +
                            Temp("bench_nodraft"));
  EXPECT_TRUE(OneErrorLine(b)) << b.exit_code << " " << b.err;
  EXPECT_NE(b.err.find("-md"), std::string::npos) << b.err;
}

TEST(CliDraft, MissingCorruptOtherVocabularyAndShortContextDraftsAreOneErrorEach) {
  const std::string corrupt = Temp("corrupt.gguf");
  {
    std::ofstream f(corrupt, std::ios::binary);
    f << "GGUF\x03garbage, not a model";
  }
  const std::string other_vocab =
      SynthFile("spm", "--vocab-from " + SharedPath("vocab/ggml-vocab-llama-spm.gguf"));
  const std::string short_ctx = SynthFile("short", "--ctx 64");
  ASSERT_FALSE(other_vocab.empty());
  ASSERT_FALSE(short_ctx.empty());
  struct Case {
    std::string file, expect;
  };
  const Case cases[] = {
      {Temp("missing.gguf"), "missing.gguf"},
      {corrupt, "corrupt.gguf"},
      {other_vocab, "vocabulary differs from the target's at token"},
      {short_ctx, "context length is 64 tokens"},
  };
  for (const Case& c : cases) {
    const RunResult r =
        Goose("generate -m " + Tiny() + " -md " + c.file + kPrompt + " --spec graft");
    EXPECT_TRUE(OneErrorLine(r)) << c.file << ": " << r.exit_code << " " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("draft model"), std::string::npos) << r.err;
  }
  // The short context fits a request that asks for no more than it holds.
  const RunResult fits =
      Goose("generate -m " + Tiny() + " -md " + short_ctx + " -c 64" + kPrompt + " --spec draft");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  for (const std::string& f : {corrupt, other_vocab, short_ctx}) std::filesystem::remove(f);
}

TEST(CliDraft, ADraftCostlierThanItsTargetIsAWarning) {
  const std::string big = SynthFile("big", "", "--hidden 256 --ffn 512");
  ASSERT_FALSE(big.empty());
  const RunResult r = Goose("generate -m " + Tiny() + " -md " + big + kPrompt + " --spec draft");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("goose: warning: the draft model reads"), std::string::npos) << r.err;
  std::filesystem::remove(big);
}

TEST(CliDraft, BenchRunsTheDraftMethodsAndTabulatesThem) {
  const std::string weak = WeakDrafterFile();
  if (weak.empty()) GTEST_SKIP() << "no weak drafter (inflate_gguf.py needs python3-numpy)";
  const std::string out = Temp("bench");
  const RunResult r = Goose("bench -m " + Tiny() + " -md " + weak +
                            " --data tinystories:2 --max-tokens 24 -t 1 --quiet --methods "
                            "draft,draft-tree,graft --budgets 8,auto --out " +
                            out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = ReadAll(out + "/results.md");
  EXPECT_NE(md.find("## Draft model"), std::string::npos) << md;
  EXPECT_NE(md.find("graft@8"), std::string::npos);
  const auto j = nlohmann::json::parse(ReadAll(out + "/results.json"));
  EXPECT_EQ(j["equality"]["mismatching_prompts"], 0);
  EXPECT_EQ(j["settings"]["draft_model"], weak);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace goose
