// The goose binary as a user runs it: output formats, equality of speculative and plain text,
// and one-line errors with a non-zero exit (never a crash) for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "test_temp.h"

namespace goose {
namespace {

std::string TempPath(const std::string& name) { return ProcessTempPath("cli_" + name); }

std::string GooseBinary() { return std::string(GOOSE_BINARY_DIR) + "/goose"; }

// The cache directory of every goose run here (learned tables, cost curves): the tests never
// touch the user's ~/.cache.
std::string CacheHome() { return TempPath("cache"); }

// The binary with the test's cache directory, after `shell_prefix`.
RunResult Goose(const std::string& args, const std::string& binary = GooseBinary(),
                const std::string& shell_prefix = "") {
  return RunGoose(args, shell_prefix + "XDG_CACHE_HOME='" + CacheHome() + "' ", binary);
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
  const RunResult r =
      Goose("generate -m " + Model() + " -p 'Once upon a time' -n 32 --ignore-eos -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_tokens"], ref["prompt_tokens"]);
  std::vector<int> expect = ref["output_tokens"].get<std::vector<int>>();
  expect.resize(32);
  EXPECT_EQ(j["tokens"].get<std::vector<int>>(), expect);
  // The text is those 32 tokens decoded: a non-empty beginning of the reference's text.
  const std::string text = j["text"].get<std::string>();
  EXPECT_EQ(text,
            TinyModel().tokenizer().Decode(std::vector<int32_t>(expect.begin(), expect.end())));
  EXPECT_GT(text.size(), 64u);
  EXPECT_EQ(ref["output_text"].get<std::string>().rfind(text, 0), 0u) << text;
  for (const char* key : {"mean_accepted_tokens", "forward_passes", "tokens_per_second"}) {
    EXPECT_TRUE(j["stats"].contains(key)) << key;
  }
}

// Draft tokens accepted, over every source, in a --json answer's stats.
int64_t AcceptedDrafts(const nlohmann::json& stats) {
  int64_t n = 0;
  for (const auto& [source, count] : stats["accepted"].items()) n += count.get<int64_t>();
  return n;
}

// Every method prints plain decoding's text, by default (--budget auto, which on the tiny model
// mostly takes plain steps: its trees do not pay on this machine's costs) and at the method's
// own budget, where the JSON shows that its drafts were accepted.
TEST(Cli, EverySpecPrintsTheSameText) {
  const std::string base =
      "generate -m " + Model() + " -p 'Lily and Tom went to the park. Lily and Tom' -n 48 -t 1";
  const RunResult plain = Goose(base + " --spec none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const RunResult plain_json = Goose(base + " --spec none --json");
  ASSERT_EQ(plain_json.exit_code, 0) << plain_json.err;
  const auto want = nlohmann::json::parse(plain_json.out);
  for (const std::string spec :
       {"pld", "tr", "balanced", "sequoia", "goose", "goose --goose-preset paper"}) {
    const RunResult r = Goose(base + " --spec " + spec);
    ASSERT_EQ(r.exit_code, 0) << spec << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << spec;
    const RunResult own = Goose(base + " --spec " + spec + " --budget 0 --json");
    ASSERT_EQ(own.exit_code, 0) << spec << ": " << own.err;
    const auto j = nlohmann::json::parse(own.out);
    EXPECT_EQ(j["tokens"], want["tokens"]) << spec;
    EXPECT_EQ(j["text"], want["text"]) << spec;
    EXPECT_GT(AcceptedDrafts(j["stats"]), 0) << spec << ": " << j["stats"]["accepted"];
  }
  const RunResult sampled = Goose(base + " --spec none --temp 0.8 --seed 3 --json");
  const RunResult sampled_spec =
      Goose(base + " --temp 0.8 --seed 3 --spec goose --budget 0 --json");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  ASSERT_EQ(sampled_spec.exit_code, 0) << sampled_spec.err;
  const auto s = nlohmann::json::parse(sampled.out), ss = nlohmann::json::parse(sampled_spec.out);
  EXPECT_EQ(ss["tokens"], s["tokens"]);
  EXPECT_GT(AcceptedDrafts(ss["stats"]), 0) << ss["stats"]["accepted"];
}

// Without --spec goose speculates; without --budget a method sizes its trees by this
// machine's costs (auto); --budget 0 gives it its own default (tr: an 81-node template, which
// the tiny model's prompt leaves room for).
TEST(Cli, SpeculationAndAutoBudgetUnlessTold) {
  const std::string base = "generate -m " + Model() +
                           " -p 'Lily and Tom went to the park. Lily and Tom' -n 24 -t 1 --json";
  const RunResult deflt = Goose(base + " --spec tr");
  const RunResult own = Goose(base + " --spec tr --budget 0");
  const RunResult plain = Goose(base + " --spec none");
  const RunResult given_nothing = Goose(base);
  for (const RunResult* r : {&deflt, &own, &plain, &given_nothing}) {
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  const auto d = nlohmann::json::parse(deflt.out), o = nlohmann::json::parse(own.out);
  const auto p = nlohmann::json::parse(plain.out), g = nlohmann::json::parse(given_nothing.out);
  EXPECT_EQ(d["stats"]["budget"], "auto");
  EXPECT_EQ(o["stats"]["budget"], 81);
  EXPECT_EQ(p["stats"]["budget"], 1);
  EXPECT_EQ(g["stats"]["method"], "goose");
  EXPECT_EQ(g["stats"]["budget"], "auto");
  EXPECT_GT(o["stats"]["mean_tree_nodes"].get<double>(), 40.0);
  EXPECT_GT(AcceptedDrafts(o["stats"]), 0) << o["stats"]["accepted"];
  EXPECT_EQ(d["tokens"], o["tokens"]);
  EXPECT_EQ(p["tokens"], o["tokens"]);
  EXPECT_EQ(g["tokens"], o["tokens"]);
}

// --prediction FILE (or - for stdin): the output is the same, --json counts the prediction's
// tokens the output reproduced, and the drafter drafted from it.
TEST(Cli, PredictionIsDraftedFromAndCounted) {
  const std::string base = "generate -m " + Model() + " -p 'Once upon a time' -n 48 -t 1 --json";
  const RunResult plain = Goose(base + " --spec none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto want = nlohmann::json::parse(plain.out);
  const std::string file = TempPath("prediction.txt");
  std::ofstream(file) << want["text"].get<std::string>();
  // (A fixed budget: on the tiny model's own cost curve auto takes plain steps.)
  const RunResult r = Goose(base + " --budget 16 --prediction " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["tokens"], want["tokens"]);
  const auto& p = got["stats"]["prediction"];
  EXPECT_GE(p["accepted"].get<int>(), 46) << p;
  EXPECT_EQ(p["accepted"].get<int>() + p["rejected"].get<int>(), p["tokens"].get<int>()) << p;
  EXPECT_GT(got["stats"]["accepted"]["prediction"].get<int>(), 20) << got["stats"];
  const RunResult piped = Goose(base + " --budget 16 --prediction - < " + file);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(nlohmann::json::parse(piped.out)["stats"]["prediction"], p);
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["stats"].contains("prediction"));
}

TEST(Cli, SpecJsonHasPerSourceStats) {
  const RunResult r =
      Goose("generate -m " + Model() +
            " -p 'I like cake. I like cake. I like' -n 40 -t 1 --spec goose --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out)["stats"];
  EXPECT_TRUE(s["drafted"].contains("spine"));
  EXPECT_TRUE(s["accepted"].contains("branch"));
  EXPECT_GT(s["mean_accepted_tokens"].get<double>(), 1.0);
}

// --stop-token ends generation right after the first occurrence of that id, for every method.
TEST(Cli, StopTokenEndsGenerationAfterIt) {
  const std::string base =
      "generate -m " + Model() + " -p 'Lily and Tom went to the park.' -n 64 -t 1 --json";
  const RunResult plain = Goose(base + " --spec none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto all = nlohmann::json::parse(plain.out)["tokens"].get<std::vector<int>>();
  const int32_t stop = 426;  // "." in this vocabulary
  const auto first = std::find(all.begin(), all.end(), stop);
  ASSERT_NE(first, all.end()) << "the plain text has no '.' to stop at";
  const std::vector<int> want(all.begin(), first + 1);
  for (const char* spec : {"none", "pld", "tr", "goose", "goose+paper"}) {
    const RunResult r = Goose(base + " --spec " + spec + " --stop-token " + std::to_string(stop));
    ASSERT_EQ(r.exit_code, 0) << spec << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"].get<std::vector<int>>(), want) << spec;
  }
}

// --tr-cache saves the table the method drafts from and loads it back into the same variant
// (paper GOOSE too, whose table is otherwise reset per request); a table of another kind is
// refused with a message.
TEST(Cli, TrCacheRoundTripsPerVariant) {
  const std::string cache = TempPath("table.bin");
  const std::string base =
      "generate -m " + Model() + " -p 'Lily and Tom went to the park. Lily and' -n 40 -t 1";
  const RunResult plain = Goose(base + " --spec none");
  for (int run = 0; run < 2; ++run) {
    const RunResult r = Goose(base + " --spec goose+paper --tr-cache " + cache);
    ASSERT_EQ(r.exit_code, 0) << run << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << run;
    EXPECT_TRUE(std::filesystem::exists(cache));
  }
  const RunResult other = Goose(base + " --spec tr --tr-cache " + cache);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("goose:"), std::string::npos) << other.err;
  std::filesystem::remove(cache);
}

// The learned-state cache as users meet it: a run after a damaged cache file warns once on
// stderr and prints the same text; four processes at once leave files the next run loads
// without a warning; --no-table-cache neither reads nor writes a learned state.
TEST(Cli, TableCacheSurvivesDamageAndConcurrentRuns) {
  std::filesystem::remove_all(CacheHome());
  const std::string args =
      "generate -m " + Model() +
      " -p 'Tom had a big red ball. He liked to play with it.' -n 32 --spec goose";
  const RunResult first = Goose(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err.find("warning"), std::string::npos) << first.err;
  std::string state;
  for (const auto& d : std::filesystem::recursive_directory_iterator(CacheHome())) {
    if (d.path().filename() == "goose+keep.state") state = d.path().string();
  }
  ASSERT_FALSE(state.empty()) << "no learned state under " << CacheHome();
  std::ofstream(state, std::ios::trunc) << "not a state";
  const RunResult damaged = Goose(args);
  ASSERT_EQ(damaged.exit_code, 0) << damaged.err;
  EXPECT_EQ(damaged.out, first.out);
  EXPECT_NE(damaged.err.find("goose: warning: ignored the learned-state cache"), std::string::npos)
      << damaged.err;

  const std::string cmd =
      "XDG_CACHE_HOME='" + CacheHome() + "' '" + GooseBinary() + "' " + args + " > /dev/null 2>&1";
  const std::string four = "(" + cmd + " & " + cmd + " & " + cmd + " & " + cmd + " & wait)";
  ASSERT_EQ(std::system(four.c_str()), 0);
  const RunResult after = Goose(args);
  EXPECT_EQ(after.out, first.out);
  EXPECT_EQ(after.err.find("warning"), std::string::npos) << after.err;

  std::filesystem::remove_all(CacheHome());
  const RunResult off = Goose(args + " --no-table-cache");
  EXPECT_EQ(off.out, first.out);
  // (--budget auto, the default, still caches this machine's cost curve: not a learned state.)
  if (std::filesystem::exists(CacheHome())) {
    for (const auto& d : std::filesystem::recursive_directory_iterator(CacheHome())) {
      EXPECT_NE(d.path().filename().string().rfind("learned-", 0), 0u) << d.path();
    }
  }
}

TEST(Cli, TokenizeMatchesReferencePromptTokens) {
  const nlohmann::json ref = ReferenceRecord(2);
  const RunResult r =
      Goose("tokenize -m " + Model() + " -p '" + ref["prompt"].get<std::string>() + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"], ref["prompt_tokens"]);
  const RunResult plain = Goose("tokenize -m " + Model() + " -p 'Hi' --no-bos");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out.find(" 1 "), std::string::npos);
}

TEST(Cli, SynthesizedModelLoadsWithTheAskedVocabSize) {
  const std::string path = TempPath("synth.gguf");
  const RunResult s = Goose(
      "synth --arch qwen2 --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
      "--ffn 64 --dtype q8_0 --vocab-size 600 --vocab-from " +
      Model() + " -o " + path);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(getpid())));
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config().n_vocab, 600);
  EXPECT_EQ((*m)->tokenizer().n_vocab(), 600);
  EXPECT_EQ((*m)->config().n_embd, 32);
  EXPECT_EQ((*m)->config().n_layer, 1);
  EXPECT_EQ((*m)->config().n_head_kv, 1);
  // Its tokenizer is the tiny model's (padded), so tokenize agrees; and it generates.
  const RunResult t = Goose("tokenize -m " + path + " -p 'Once upon a time' --json");
  const RunResult t_ref = Goose("tokenize -m " + Model() + " -p 'Once upon a time' --json");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out, t_ref.out);
  const RunResult g = Goose("generate -m " + path + " -p hello -n 8 --json --ignore-eos");
  std::filesystem::remove(path);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto tokens = nlohmann::json::parse(g.out)["tokens"].get<std::vector<int>>();
  ASSERT_EQ(tokens.size(), 8u);
  for (int id : tokens) EXPECT_LT(id, 600);
}

TEST(Cli, NoModelFlagUsesTheDefaultModel) {
  const std::string args = " -p 'Once upon a time' -n 24 --ignore-eos -t 1 --json";
  const RunResult def = Goose("generate" + args);
  const RunResult given = Goose("generate -m " + Model() + args);
  ASSERT_EQ(def.exit_code, 0) << def.err;
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(def.out)["tokens"], nlohmann::json::parse(given.out)["tokens"]);
  EXPECT_EQ(nlohmann::json::parse(def.out)["tokens"].size(), 24u);
}

// The default model is found beside the checkout the executable is in (<exe dir>/../../shared),
// so a moved checkout still finds it.
TEST(Cli, DefaultModelIsFoundRelativeToTheExecutable) {
  const std::filesystem::path root = TempPath("moved");
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "checkout" / "build");
  std::filesystem::create_directories(root / "shared" / "models");
  const std::string exe = (root / "checkout" / "build" / "goose").string();
  std::filesystem::copy_file(GooseBinary(), exe);
  const std::filesystem::path model = root / "shared" / "models" / "stories260K.gguf";
  {  // Not a model: the error shows which file the default resolved to.
    std::ofstream out(model, std::ios::binary);
    out << "not a gguf";
  }
  const RunResult bad = Goose("generate -p hi -n 4", exe);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(model.string()), std::string::npos) << bad.err;
  std::filesystem::remove(model);
  std::filesystem::create_symlink(Model(), model);
  const RunResult good = Goose("tokenize -p 'Once upon a time' --json", exe);
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(nlohmann::json::parse(good.out)["tokens"], ReferenceRecord(0)["prompt_tokens"]);
  std::filesystem::remove_all(root);
}

TEST(Cli, PromptFileEqualsPromptFlag) {
  const std::string text = "Lily and Tom went to the park. \"Look!\" said Lily.\nThey";
  const std::string file = TempPath("prompt.txt");
  {
    std::ofstream out(file, std::ios::binary);
    out << text;
  }
  std::string quoted = "'";  // the text as one shell word
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string base = "generate -m " + Model() + " -n 24 --ignore-eos -t 1";
  const RunResult from_file = Goose(base + " -f " + file);
  const RunResult from_flag = Goose(base + " -p " + quoted);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(from_flag.exit_code, 0) << from_flag.err;
  EXPECT_EQ(from_file.out, from_flag.out);  // prompt echoed, then the continuation
  EXPECT_EQ(from_file.out.rfind(text, 0), 0u) << from_file.out;
  const RunResult json_file = Goose(base + " --json -f " + file);
  const RunResult json_flag = Goose(base + " --json -p " + quoted);
  ASSERT_EQ(json_file.exit_code, 0) << json_file.err;
  const auto a = nlohmann::json::parse(json_file.out), b = nlohmann::json::parse(json_flag.out);
  for (const char* key : {"prompt_tokens", "tokens", "text"}) EXPECT_EQ(a[key], b[key]) << key;
  EXPECT_GT(a["prompt_tokens"].size(), 15u);  // the whole file, not its first line
  std::filesystem::remove(file);
}

TEST(Cli, BenchVerifyJson) {
  const RunResult r =
      Goose("bench-verify -m " + Model() + " --nodes 1,4 --reps 1 --prefix 8 --json -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;  // one JSON object
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j["model_bytes"].is_number_integer());
  EXPECT_EQ(j["model_bytes"].get<uint64_t>(), TinyModel().weight_bytes());
  EXPECT_GT(j["bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["decode_tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(j["prefix"].get<int>(), 8);
  ASSERT_TRUE(j["curve"].is_array());
  ASSERT_EQ(j["curve"].size(), 2u);
  EXPECT_EQ(j["curve"][0]["nodes"].get<int>(), 1);
  EXPECT_EQ(j["curve"][1]["nodes"].get<int>(), 4);
  for (const auto& p : j["curve"]) {
    EXPECT_GT(p["seconds"].get<double>(), 0.0);
    // The tiny model's passes are mostly not matmul, but some of each pass is.
    EXPECT_GT(p["matmul_share"].get<double>(), 0.0);
    EXPECT_LE(p["matmul_share"].get<double>(), 1.0);
  }
}

TEST(Cli, HelpPrintsUsageAndExitsZero) {
  const RunResult top = Goose("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("bench-verify"), std::string::npos) << top.out;
  const RunResult sub = Goose("generate --help");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.out.find("--goose-preset"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("at most 64"), std::string::npos) << sub.out;
  // Defaults are shown, and what 0 and auto mean for --budget.
  EXPECT_NE(sub.out.find("=128"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("--spec TEXT=goose"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("goose 60"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("fixed unless given"), std::string::npos) << sub.out;
  const RunResult bench = Goose("bench --help");
  EXPECT_EQ(bench.exit_code, 0);
  EXPECT_NE(bench.out.find("name[:category][:count]"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("spec_bench, mt_bench"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("--n-prompts INT:INT in 1..100000=5"), std::string::npos) << bench.out;
}

TEST(Cli, VersionNamesCommitBuildAndCpuLevel) {
  const RunResult r = Goose("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("goose ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("(commit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" build, CPU level "), std::string::npos) << r.out;
}

TEST(Cli, PromptFromStdinEqualsPromptFlag) {
  const std::string base = "generate -m " + Model() + " -n 16 --ignore-eos -t 1 --json";
  const RunResult piped = Goose(base + " -f -", GooseBinary(), "printf 'Once upon a time' | ");
  const RunResult flag = Goose(base + " -p 'Once upon a time'");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(piped.out)["tokens"], nlohmann::json::parse(flag.out)["tokens"]);
}

TEST(Cli, TokenizeShowsPiecesAndDecodesIdsBack) {
  const std::string text = "Lily saw a big dog.";
  const RunResult enc =
      Goose("tokenize -m " + Model() + " --no-bos --json --pieces -p '" + text + "'");
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  const auto j = nlohmann::json::parse(enc.out);
  ASSERT_EQ(j["pieces"].size(), j["tokens"].size());
  std::string joined, ids;
  for (const auto& p : j["pieces"]) joined += p.get<std::string>();
  for (const auto& t : j["tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
  EXPECT_EQ(joined, " " + text);  // SentencePiece's dummy prefix
  const RunResult with_bos = Goose("tokenize -m " + Model() + " --json -p '" + text + "'");
  ASSERT_EQ(with_bos.exit_code, 0) << with_bos.err;
  ids.clear();
  const auto with_bos_json = nlohmann::json::parse(with_bos.out);
  for (const auto& t : with_bos_json["tokens"]) {
    ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
  }
  const RunResult dec = Goose("tokenize -m " + Model() + " --decode " + ids);
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_EQ(dec.out, " " + text + "\n");  // the dummy prefix's space, as the pieces show
  const RunResult lines = Goose("tokenize -m " + Model() + " --no-bos --pieces -f -", GooseBinary(),
                                "printf '" + text + "' | ");
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(std::count(lines.out.begin(), lines.out.end(), '\n'),
            static_cast<long>(j["tokens"].size()));
}

// Messages that are not errors do not look like errors; -c past the trained context warns.
TEST(Cli, ContextLimitIsANoteAndALongContextAWarning) {
  const RunResult r =
      Goose("generate -m " + Model() + " -c 24 -n 100 --ignore-eos -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("goose: note: stopped at the context limit of 24 tokens (raise -c)"),
            std::string::npos)
      << r.err;
  const RunResult w = Goose("generate -m " + Model() + " -c 1024 -n 2 -p hi");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.err.find("warning: -c 1024 is beyond the 512 tokens the model was trained on"),
            std::string::npos)
      << w.err;
}

TEST(Cli, ModelFromTheEnvironment) {
  const RunResult bad = Goose("tokenize -p hi", GooseBinary(), "GOOSE_MODEL=/nonexistent.gguf ");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("/nonexistent.gguf"), std::string::npos) << bad.err;
  const RunResult good = Goose("tokenize -p hi", GooseBinary(), "GOOSE_MODEL=" + Model() + " ");
  EXPECT_EQ(good.exit_code, 0) << good.err;
}

// goose demo end to end on the smallest inflation shape: it builds its model once, writes the
// same text both ways and says so.
TEST(Cli, DemoWritesTheSameTextBothWays) {
  const std::string args = "demo --like tiny-test --prompts 2 -n 24 -t 1 --budget 8 --json";
  const RunResult r = Goose(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("building the demo model once"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["identical"].get<bool>());
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& run : j["runs"]) {
    EXPECT_TRUE(run["identical"].get<bool>());
    EXPECT_EQ(run["tokens"].get<int>(), 24);
    EXPECT_GT(run["spec_tokens_per_second"].get<double>(), 0.0);
  }
  const RunResult again = Goose(args);  // reuses the built model
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("building the demo model once"), std::string::npos) << again.err;
}

// Asserts the error contract: non-zero exit (not a signal), nothing on stdout, and exactly one
// line "goose: ..." on stderr that contains `expect`.
void ExpectOneLineError(const RunResult& r, const std::string& name, const std::string& expect) {
  EXPECT_GT(r.exit_code, 0) << name << " (killed by a signal if -1)";
  EXPECT_TRUE(r.out.empty()) << name << " printed to stdout: " << r.out;
  EXPECT_EQ(r.err.rfind("goose: ", 0), 0u) << name << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << name << ": " << r.err;
  EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << name << ": " << r.err;
  EXPECT_NE(r.err.find(expect), std::string::npos)
      << name << ": expected \"" << expect << "\" in: " << r.err;
}

TEST(Cli, BadInputGivesOneLineErrorAndNonZeroExit) {
  const std::string garbage = TempPath("garbage.gguf");
  {
    std::ofstream out(garbage, std::ios::binary);
    out << "GGUF\x03\x00\x00\x00 this is not a model";
  }
  const std::string dir = TempPath("a_directory");
  std::filesystem::create_directories(dir);
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Once upon a time ";
  const std::string long_file = TempPath("long_prediction.txt");
  std::ofstream(long_file) << long_prompt;
  const std::string m = " -m " + Model();
  const std::string commands =
      "generate, tokenize, synth, bench, bench-serve, serve, bench-verify, demo";
  struct BadCase {
    const char* name;
    std::string args;
    std::string expect;  // substring of the error message
  };
  const BadCase cases[] = {
      {"unknown flag", "generate --frobnicate",
       "unknown option --frobnicate; goose generate --help"},
      {"misspelt flag", "generate --temperature 0.5",
       "unknown option --temperature (did you mean --temp?)"},
      {"misspelt flag 2", "generate --n-predit 5", "(did you mean --n-predict?)"},
      {"non-numeric temp", "generate --temp abc", "--temp: 'abc' is not a number in 0..100"},
      {"non-numeric n", "generate -n abc", "--n-predict: 'abc' is not an integer in 0..16777216"},
      {"negative n", "generate -n -5", "--n-predict: '-5' is not an integer in 0..16777216"},
      {"negative stop token", "generate --stop-token -1",
       "--stop-token: '-1' is not an integer in 0..2147483647"},
      {"threads above the pool's limit", "generate -t 65",
       "--threads: '65' is not an integer in 0..64"},
      {"budget for plain decoding", "generate" + m + " --spec none --budget 8",
       "--budget applies to speculative methods, and --spec none decodes plainly"},
      {"table file for plain decoding", "generate" + m + " --spec none --tr-cache /tmp/t.bin",
       "--tr-cache applies to speculative methods"},
      {"table file for a method without a table", "generate" + m + " --spec pld --tr-cache x",
       "--tr-cache applies to the methods with a transition table"},
      {"recalibrate without auto", "generate" + m + " --spec goose --budget 8 --recalibrate",
       "--recalibrate applies to --budget auto"},
      {"unwritable table file", "generate" + m + " --spec goose --tr-cache /nonexistent/d/t.bin",
       "--tr-cache '/nonexistent/d/t.bin': folder '/nonexistent/d' does not exist"},
      {"bench output not writable", "bench" + m + " --data tinystories:1 --out /proc/goose",
       "cannot create --out '/proc/goose'"},
      {"auto-cm without a cost model", "bench" + m + " --data tinystories:1 --budgets auto-cm",
       "--budgets auto-cm needs --cost-model MODEL.gguf or --cost-curve FILE"},
      {"zero count", "bench" + m + " --data tinystories:0",
       "count '0' is not a positive integer (name[:category][:count], e.g. tinystories:10)"},
      {"category of a set without", "bench" + m + " --data tinystories:easy",
       "has no categories (name[:count], e.g. tinystories:10)"},
      {"synth without a shape", "synth -o /tmp/x.gguf", "give a shape: --like NAME"},
      {"inflate with a shape flag", "synth --inflate " + Model() + " --hidden 64 -o /tmp/x.gguf",
       "--hidden does not apply to --inflate"},
      {"drop layers without inflate", "synth --like llama-1b --drop-layers 1 -o /tmp/x.gguf",
       "--drop-layers applies to --inflate only"},
      {"tokenize without input", "tokenize" + m, "give exactly one of -p TEXT"},
      {"decode a bad id", "tokenize" + m + " --decode 1,99999",
       "'99999' is not a token id in 0..511"},
      {"unknown spec", "generate" + m + " --spec nope", "--spec: unknown method 'nope'"},
      {"unknown preset", "generate" + m + " --spec goose --goose-preset x",
       "unknown --goose-preset 'x'"},
      {"preset for another method", "generate" + m + " --spec pld --goose-preset paper",
       "--goose-preset applies to --spec goose"},
      {"branch-k for another method", "generate" + m + " --spec goose --branch-k 5",
       "--branch-k applies to --spec balanced"},
      {"missing model", "generate -m /nonexistent/model.gguf -p hi",
       "/nonexistent/model.gguf: cannot open"},
      {"malformed gguf", "generate -m " + garbage + " -p hi", garbage + ": "},
      {"prompt too long", "generate" + m + " -c 16 -p '" + long_prompt + "'",
       "but the context holds 16 (raise -c)"},
      {"missing prompt file", "generate" + m + " -f /nonexistent/prompt.txt",
       "cannot read prompt file '/nonexistent/prompt.txt'"},
      {"prompt file is a directory", "generate" + m + " -f " + dir,
       "prompt file '" + dir + "' is a directory"},
      {"prompt and prompt file", "generate" + m + " -p hi -f " + garbage,
       "with -p or -f, not both"},
      {"missing prediction file", "generate" + m + " -p hi --prediction /nonexistent/p.txt",
       "cannot read prediction file '/nonexistent/p.txt': no such file"},
      {"prompt and prediction from stdin", "generate" + m + " -f - --prediction -",
       "-f - and --prediction - both read stdin"},
      {"prediction longer than the context",
       "generate" + m + " -c 16 -p hi --prediction " + long_file,
       "--prediction: the text is "
       "longer than the context of 16 tokens"},
      {"no command", "", "no command given (" + commands + ")"},
      {"unknown command", "frob", "unknown command 'frob' (" + commands + ")"},
      {"unknown dtype", "synth --hidden 8 --layers 1 --heads 1 --ffn 8 --dtype q9 -o /tmp/x.gguf",
       "unknown --dtype 'q9'"},
      {"synth without -o", "synth --hidden 8", "--output is required"},
      {"budget out of range", "generate --spec goose --budget 1000", "--budget '1000' is neither"},
      {"bench-verify nodes out of range", "bench-verify --nodes 1,500",
       "--nodes: '500' is not an integer in 1..128"},
  };
  for (const BadCase& c : cases) ExpectOneLineError(Goose(c.args), c.name, c.expect);
  std::filesystem::remove(garbage);
  std::filesystem::remove(dir);
}

uint64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

// A context far beyond the machine's memory is a one-line error naming the size, not an abort.
TEST(Cli, HugeContextIsAMemoryError) {
  if (MemAvailableBytes() > (600ull << 30)) GTEST_SKIP() << "this machine has over 600 GiB free";
  // 1024 layers of width 64: a 17 MB model whose f16 KV cache at 2^20 tokens is 256 GiB
  // (512 GiB in f32).
  const std::string path = TempPath("deep.gguf");
  const RunResult s = Goose(
      "synth --arch llama --hidden 64 --layers 1024 --heads 4 --ffn 64 "
      "--dtype q4_0 --vocab-from " +
      Model() + " -o " + path);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const RunResult c = Goose("generate -m " + path + " -c 1048576 -p hi");
  ExpectOneLineError(c, "huge -c", "a context of 1048576 tokens (256.0 GiB KV cache) needs");
  ExpectOneLineError(Goose("generate -m " + path + " -c 1048576 -p hi --kv-type f32"),
                     "huge -c, f32", "a context of 1048576 tokens (512.0 GiB KV cache) needs");
  ExpectOneLineError(c, "huge -c", "use a smaller -c");
  ExpectOneLineError(Goose("bench-verify -m " + path + " --prefix 1048576"), "huge --prefix",
                     "use a smaller --prefix");
  std::filesystem::remove(path);
}

// An allocation failure that no check foresaw (here: an address-space limit below what the
// KV cache takes) is still one line and a non-zero exit, via goose_main's backstop.
TEST(Cli, OutOfMemoryIsOneLineNotAnAbort) {
  if (kSanitized) GTEST_SKIP() << "sanitizers need more address space than the limit allows";
  // -c 2^20 on the tiny model: 1.25 GiB of f32 KV cache, under a 1 GiB address-space limit.
  const RunResult r =
      Goose("generate -m " + Model() + " -c 1048576 -p hi -n 1 -t 1 --spec none --kv-type f32",
            GooseBinary(), "ulimit -v 1048576; ");
  ExpectOneLineError(r, "bad_alloc backstop", "out of memory");
}

}  // namespace
}  // namespace goose
