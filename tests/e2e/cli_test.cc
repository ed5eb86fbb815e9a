// The goose binary as a user runs it: output formats, equality of speculative and plain text,
// and one-line errors with a non-zero exit (never a crash) for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_util.h"

namespace goose {
namespace {

struct RunResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string out, err;
};

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("goose_cli_" + std::to_string(getpid()) + "_" + name))
      .string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult Goose(const std::string& args) {
  const std::string out = TempPath("stdout"), err = TempPath("stderr");
  const std::string cmd = std::string(GOOSE_BINARY_DIR) + "/goose " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::string Model() { return SharedPath("models/stories260K.gguf"); }

nlohmann::json ReferenceRecord(int index) {
  std::ifstream in(SharedPath("reference/stories260K_greedy.jsonl"));
  std::string line;
  for (int i = 0; i <= index; ++i) std::getline(in, line);
  return nlohmann::json::parse(line);
}

TEST(Cli, GenerateJsonMatchesReference) {
  const nlohmann::json ref = ReferenceRecord(0);
  const RunResult r = Goose("generate -m " + Model() +
                            " -p 'Once upon a time' -n 32 --ignore-eos -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_tokens"], ref["prompt_tokens"]);
  std::vector<int> expect = ref["output_tokens"].get<std::vector<int>>();
  expect.resize(32);
  EXPECT_EQ(j["tokens"].get<std::vector<int>>(), expect);
  EXPECT_EQ(j["text"].get<std::string>(), ref["output_text"].get<std::string>().substr(0, j["text"].get<std::string>().size()));
  for (const char* key : {"mean_accepted_tokens", "forward_passes", "tokens_per_second"}) {
    EXPECT_TRUE(j["stats"].contains(key)) << key;
  }
}

TEST(Cli, EverySpecPrintsTheSameText) {
  const std::string base = "generate -m " + Model() +
                           " -p 'Lily and Tom went to the park. Lily and Tom' -n 48 -t 1";
  const RunResult plain = Goose(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* spec : {"pld", "tr", "balanced", "sequoia", "goose"}) {
    const RunResult r = Goose(base + " --spec " + spec);
    ASSERT_EQ(r.exit_code, 0) << spec << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << spec;
  }
  const RunResult paper = Goose(base + " --spec goose --goose-preset paper");
  EXPECT_EQ(paper.out, plain.out);
  const RunResult sampled = Goose(base + " --temp 0.8 --seed 3");
  const RunResult sampled_spec = Goose(base + " --temp 0.8 --seed 3 --spec goose");
  EXPECT_EQ(sampled.out, sampled_spec.out);
}

TEST(Cli, SpecJsonHasPerSourceStats) {
  const RunResult r = Goose("generate -m " + Model() +
                            " -p 'I like cake. I like cake. I like' -n 40 -t 1 --spec goose --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out)["stats"];
  EXPECT_TRUE(s["drafted"].contains("spine"));
  EXPECT_TRUE(s["accepted"].contains("branch"));
  EXPECT_GT(s["mean_accepted_tokens"].get<double>(), 1.0);
}

TEST(Cli, TokenizeMatchesReferencePromptTokens) {
  const nlohmann::json ref = ReferenceRecord(2);
  const RunResult r = Goose("tokenize -m " + Model() + " -p '" +
                            ref["prompt"].get<std::string>() + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"], ref["prompt_tokens"]);
  const RunResult plain = Goose("tokenize -m " + Model() + " -p 'Hi' --no-bos");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out.find(" 1 "), std::string::npos);
}

TEST(Cli, SynthesizedModelGenerates) {
  const std::string path = TempPath("synth.gguf");
  const RunResult s = Goose("synth --arch qwen2 --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
                            "--ffn 64 --dtype q8_0 --vocab-from " + Model() + " -o " + path);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const RunResult g = Goose("generate -m " + path + " -p hello -n 8 --json --ignore-eos");
  std::filesystem::remove(path);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["tokens"].size(), 8u);
}

struct BadCase {
  const char* name;
  std::string args;
  const char* expect;  // substring of the error message
};

TEST(Cli, BadInputGivesOneLineErrorAndNonZeroExit) {
  const std::string garbage = TempPath("garbage.gguf");
  {
    std::ofstream out(garbage, std::ios::binary);
    out << "GGUF\x03\x00\x00\x00 this is not a model";
  }
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Once upon a time ";
  const BadCase cases[] = {
      {"unknown flag", "generate --frobnicate", "frobnicate"},
      {"non-numeric temp", "generate --temp abc", "temp"},
      {"negative n", "generate -n -5", "n"},
      {"unknown spec", "generate -m " + Model() + " --spec nope", "nope"},
      {"unknown preset", "generate -m " + Model() + " --spec goose --goose-preset x", "preset"},
      {"missing model", "generate -m /nonexistent/model.gguf -p hi", "/nonexistent/model.gguf"},
      {"malformed gguf", "generate -m " + garbage + " -p hi", garbage.c_str()},
      {"prompt too long", "generate -m " + Model() + " -c 16 -p '" + long_prompt + "'", "context"},
      {"missing prompt file", "generate -m " + Model() + " -f /nonexistent/prompt.txt", "prompt"},
      {"no subcommand", "", "subcommand"},
      {"unknown dtype", "synth --hidden 8 --layers 1 --heads 1 --ffn 8 --dtype q9 -o /tmp/x.gguf",
       "q9"},
      {"budget out of range", "generate --budget 1000", "budget"},
  };
  for (const BadCase& c : cases) {
    const RunResult r = Goose(c.args);
    EXPECT_GT(r.exit_code, 0) << c.name << " (killed by a signal if -1)";
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty() || c.args.empty()) << c.name << " printed to stdout: " << r.out;
  }
  std::filesystem::remove(garbage);
}

}  // namespace
}  // namespace goose
