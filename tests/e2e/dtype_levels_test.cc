// Every supported weight dtype end to end, on every CPU level this machine runs and on 1, 2 and
// 3 threads: a random-weight llama per dtype (hidden 256, so that K-quant rows hold whole
// super-blocks; the tiny model's vocabulary padded to 2048 tokens), decoded speculatively by
// `goose generate --json` with GOOSE_CPU set to each level (the level is chosen once per process,
// and the weights are laid out for it at load), emits exactly the ids plain decoding emits in
// this process (one thread, the CPU's best level), greedy and sampled, accepts drafts, and
// scores its prompt to the same bits (--top-logits) on every level and thread count: the
// README's claim, checked on the whole path from the file to the tokens. A random model's text
// repeats only after a while (its greedy output falls into loops), so the runs are long enough
// for GOOSE's trees to be accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "engine/engine.h"
#include "ops/cpu_features.h"
#include "synth/synth.h"
#include "test_temp.h"

namespace goose {
namespace {

// The levels this CPU runs, by their GOOSE_CPU names.
std::vector<std::string> Levels() {
  std::vector<std::string> out;
  for (int l = 0; l <= static_cast<int>(DetectCpuLevel()); ++l) {
    out.push_back(CpuLevelName(static_cast<CpuLevel>(l)));
  }
  return out;
}

std::string Ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// A synthesized model of `dtype` in this process's temp dir; "" (and a failure) if it cannot
// be written.
std::string SynthModel(const std::string& dtype) {
  SynthParams p;
  p.n_embd = 256;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.n_ff = 256;
  p.n_vocab = 2048;
  p.seed = 3;
  p.vocab_from = SharedPath("models/stories260K.gguf");
  EXPECT_TRUE(ParseDType(dtype, &p.dtype)) << dtype;
  const std::string path = ProcessTempPath("levels_" + dtype + ".gguf");
  const Status st = SynthesizeModel(p, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return st.ok() ? path : "";
}

struct Decoded {
  std::vector<int32_t> tokens;
  nlohmann::json stats;
  nlohmann::json top_logits;  // every prompt position's 8 highest logits, [id, logit]
};

// goose generate on `level` with `threads` threads, tuned GOOSE at a fixed budget of 8 nodes
// (the x86-64-v2 kernels are slow: a larger tree costs seconds there).
Decoded Generate(const std::string& model, const std::vector<int32_t>& prompt, int n_predict,
                 const std::string& level, int threads, const std::string& sampling) {
  const RunResult r =
      RunGoose("generate -m '" + model + "' --prompt-ids " + Ids(prompt) + " -n " +
                   std::to_string(n_predict) + " --ignore-eos -t " + std::to_string(threads) +
                   " --spec goose --budget 8 --no-table-cache --json --top-logits 8 " + sampling,
               "GOOSE_CPU=" + level + " ");
  EXPECT_EQ(r.exit_code, 0) << level << " t" << threads << ": " << r.err;
  EXPECT_EQ(r.err.find("ignoring GOOSE_CPU"), std::string::npos) << r.err;
  Decoded run;
  if (r.exit_code != 0) return run;
  const auto j = nlohmann::json::parse(r.out);
  run.tokens = j["tokens"].get<std::vector<int32_t>>();
  run.stats = j["stats"];
  run.top_logits = j["top_logits"];
  return run;
}

int64_t Accepted(const nlohmann::json& stats, const char* source) {
  return stats["accepted"][source].get<int64_t>();
}

const std::vector<std::string> kDtypes = {"f32",  "f16",  "bf16", "q8_0", "q4_0",
                                          "q5_0", "q4_k", "q5_k", "q6_k"};

class DtypeLevelsTest : public testing::TestWithParam<std::string> {};

TEST_P(DtypeLevelsTest, EveryLevelAndThreadCountSpeculatesPlainDecodingsIds) {
  const std::string dtype = GetParam();
  const std::string path = SynthModel(dtype);
  ASSERT_FALSE(path.empty());
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::vector<int32_t> prompt = (*model)->tokenizer().Encode(
      "one, two, three, four, one, two, three, four, one, two, three, four, one, two,", true);
  const int n_predict = kSanitized ? 96 : 160;

  // Plain decoding here: one thread, this CPU's best level.
  GenerateParams greedy;
  greedy.n_predict = n_predict;
  greedy.ignore_eos = true;
  GenerateParams sampled = greedy;
  sampled.sampling.temp = 0.5f;  // (at 0.8 the random text hardly repeats)
  sampled.sampling.top_k = 40;
  sampled.sampling.top_p = 0.95f;
  sampled.sampling.seed = 5;
  ThreadPool pool(1);
  Engine plain(**model, 0, &pool);
  auto want_greedy = plain.Generate(prompt, greedy);
  auto want_sampled = plain.Generate(prompt, sampled);
  ASSERT_TRUE(want_greedy.ok() && want_sampled.ok());
  ASSERT_EQ(want_greedy->tokens.size(), static_cast<size_t>(n_predict));

  // Each level with one thread count, rotating with the dtype (Latin square): every dtype runs
  // on every level and on 1, 2 and 3 threads, and every level on each thread count, for a third
  // of the runs of the whole product. One sampled run per dtype, on a level of its own too.
  const std::vector<std::string> levels = Levels();
  nlohmann::json prefill_logits;  // the first run's: every other run's are the same bits
  const int index =
      static_cast<int>(std::find(kDtypes.begin(), kDtypes.end(), dtype) - kDtypes.begin());
  for (size_t l = 0; l < levels.size(); ++l) {
    const std::string& level = levels[l];
    // The child really runs the level (a name it ignored would test nothing).
    const RunResult v = RunGoose("--version", "GOOSE_CPU=" + level + " ");
    EXPECT_NE(v.out.find("CPU level " + level + ")"), std::string::npos) << v.out;
    const int threads = 1 + (index + static_cast<int>(l)) % 3;
    SCOPED_TRACE(dtype + " on " + level + ", " + std::to_string(threads) + " threads");
    const Decoded g = Generate(path, prompt, n_predict, level, threads, "");
    EXPECT_EQ(g.tokens, want_greedy->tokens) << "greedy";
    if (!g.tokens.empty()) {
      // The prompt's logits, bit for bit (JSON keeps a float's every bit): a level or a thread
      // split that rounded differently would show here first, long before it flips a token.
      if (prefill_logits.is_null()) prefill_logits = g.top_logits;
      EXPECT_EQ(g.top_logits, prefill_logits) << "the prompt's logits differ";
      std::printf("%s on %s, %d threads: accepted %s\n", dtype.c_str(), level.c_str(), threads,
                  g.stats["accepted"].dump().c_str());
      // Both of GOOSE's sources: its spine (context matches) and its branches (the table).
      // How often a random model's text repeats itself depends on the dtype's rounding: with
      // the f16 KV cache q5_k's greedy text continues a context match once in 160 tokens (the
      // others 5-36 times), so the spine only has to be alive here; the sweeps hold its floors.
      const int64_t spine = Accepted(g.stats, "spine"), branch = Accepted(g.stats, "branch");
      EXPECT_GE(spine, 1) << g.stats["accepted"];
      EXPECT_GE(branch, n_predict / 32) << g.stats["accepted"];
      EXPECT_GE(spine + branch, n_predict / 16) << g.stats["accepted"];
    }
    if (static_cast<int>(l) == index % static_cast<int>(levels.size())) {
      // Sampling keyed by (seed, position): the same draws on every level.
      const Decoded s = Generate(path, prompt, n_predict, level, 1 + (index + 1) % 3,
                                 "--temp 0.5 --top-k 40 --seed 5");
      EXPECT_EQ(s.tokens, want_sampled->tokens) << "sampled";
      if (!s.tokens.empty()) {
        EXPECT_GT(Accepted(s.stats, "branch"), 0) << s.stats["accepted"];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DtypeLevelsTest, testing::ValuesIn(kDtypes),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace goose
