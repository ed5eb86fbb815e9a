// The benchmark runner on the tiny model: configs, the equality check (with an injected
// mismatch), the results.json schema and the markdown report.
#include "bench/bench_runner.h"

#include <gtest/gtest.h>

#include "bench/bench_report.h"
#include "bench_test_util.h"
#include "budget/cost_cache.h"
#include "model/model.h"

namespace goose {
namespace {

using nlohmann::json;

TEST(MakeConfigs, NoneFirstAndBudgetFreeMethodsOnce) {
  const auto c = MakeConfigs({"pld", "goose", "tr", "none", "goose"}, {16, kAutoBudget}).value();
  std::vector<std::string> labels;
  for (const auto& x : c) labels.push_back(x.Label());
  EXPECT_EQ(labels, (std::vector<std::string>{"none", "pld", "goose@16", "goose@auto", "tr"}));
}

TEST(MeanRelativeCost, ChargesEveryPassItsTreeSize) {
  // Synthetic curve c(n) = 1 + (n - 1) / 10 for n = 1..20.
  std::vector<CostSample> samples;
  for (int n = 1; n <= 20; ++n) samples.push_back({n, 1.0 + (n - 1) / 10.0});
  const std::vector<double> cost = ExpandCostCurve(samples);
  SpecStats s;
  s.cycles = 4;
  s.tree_nodes[1] = 2;   // two plain steps: c(1)/c(1) = 1
  s.tree_nodes[11] = 1;  // c(11)/c(1) = 2
  s.tree_nodes[30] = 1;  // past the curve: charged c(20) = 2.9
  EXPECT_NEAR(MeanRelativeCost(s, cost), (1 + 1 + 2 + 2.9) / 4, 1e-12);
  EXPECT_EQ(MeanRelativeCost(SpecStats{}, cost), 0.0);
  EXPECT_EQ(MeanRelativeCost(s, {}), 0.0);
}

TEST(FirstMismatch, FindsTheFirstDifference) {
  EXPECT_EQ(FirstMismatch({1, 2, 3}, {1, 2, 3}), -1);
  EXPECT_EQ(FirstMismatch({1, 2, 3}, {1, 5, 3}), 1);
  EXPECT_EQ(FirstMismatch({1, 2, 3}, {1, 2}), 2);
  EXPECT_EQ(FirstMismatch({}, {}), -1);
}

class RunBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionOptions so;
    so.model_path = testing::TinyModel();
    so.n_threads = 1;
    so.table_cache = false;
    auto session = Session::Open(so);
    ASSERT_TRUE(session.ok()) << session.status().message();
    session_ = std::move(*session);
    model_ = &session_->model();
    auto sets = ExpandDataSpec({"gsm8k", "", 2}, testing::DataDir(), nullptr, 2);
    ASSERT_TRUE(sets.ok()) << sets.status().message();
    auto stories =
        ExpandDataSpec({"tinystories", "", 1}, testing::DataDir(), &model_->tokenizer(), 1);
    ASSERT_TRUE(stories.ok()) << stories.status().message();
    sets_ = *sets;
    sets_.push_back((*stories)[0]);
    opt_.max_tokens = 16;
    opt_.quiet = true;
    opt_.model_cost = {{1, 1e-4}, {16, 2e-4}, {64, 1e-3}};
    opt_.cost_model_cost = {{1, 1e-2}, {16, 1.2e-2}, {64, 3e-2}};
  }
  std::unique_ptr<Session> session_;
  const Model* model_ = nullptr;
  std::vector<DataSet> sets_;
  BenchOptions opt_;
};

TEST_F(RunBenchTest, OutputsMatchPlainAndSchemaHolds) {
  const auto configs = MakeConfigs({"pld", "goose"}, {16, kAutoBudget}).value();
  auto r = RunBench(*session_, sets_, configs, opt_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const json& j = *r;
  EXPECT_EQ(j["equality"]["mismatching_prompts"], 0);
  EXPECT_EQ(j["equality"]["checked_generations"], 3 * 3);
  ASSERT_EQ(j["results"].size(), 2u * configs.size());
  ASSERT_EQ(j["summary"].size(), configs.size());
  for (const json& row : j["results"]) {
    for (const char* key : {"dataset", "method", "budget", "config"}) {
      EXPECT_TRUE(row[key].is_string()) << key;
    }
    for (const char* key :
         {"tokens_per_second", "mean_accepted_tokens", "speedup", "decode_seconds",
          "mean_tree_nodes", "relative_cost_model_under_test", "projected_speedup"}) {
      EXPECT_TRUE(row[key].is_number()) << key << " in " << row["config"];
    }
    for (const char* key : {"prompts", "generated_tokens", "mismatching_prompts"}) {
      EXPECT_TRUE(row[key].is_number_integer()) << key;
    }
    EXPECT_TRUE(row["auto_budgets"].is_object());
    EXPECT_TRUE(row["stats"]["acceptance_by_depth"].is_object());
    EXPECT_TRUE(row["stats"]["routes"].is_object());
    EXPECT_EQ(row["generated_tokens"], 16 * row["prompts"].get<int>());  // ignore-EOS
  }
  const json& none = j["summary"][0];
  EXPECT_EQ(none["config"], "none");
  EXPECT_DOUBLE_EQ(none["speedup"].get<double>(), 1.0);
  EXPECT_NEAR(none["mean_accepted_tokens"].get<double>(), 16.0 / 15.0, 1e-9);  // convention 1
  EXPECT_NEAR(none["projected_speedup"].get<double>(), 1.0, 1e-9);
  // Speculation happened: GOOSE's trees at 16 nodes had draft tokens accepted.
  const json& goose16 = j["summary"][2];
  EXPECT_EQ(goose16["config"], "goose@16");
  int64_t accepted = 0;
  for (const auto& [source, count] : goose16["stats"]["accepted"].items()) {
    accepted += count.get<int64_t>();
  }
  EXPECT_GT(accepted, 0) << goose16["stats"]["accepted"];
  EXPECT_GT(goose16["mean_accepted_tokens"].get<double>(),
            none["mean_accepted_tokens"].get<double>());
  const json& autob = j["summary"][3];
  EXPECT_EQ(autob["config"], "goose@auto");
  EXPECT_FALSE(autob["auto_budgets"].empty());
  // The projection charges every pass the tree it scored: sum c(n_i) / c(1) over the passes in
  // the histogram, under the synthetic curve (linear between 1, 16 and 64 nodes).
  const std::vector<double> cm = ExpandCostCurve(ToCostSamples(opt_.cost_model_cost));
  for (const json& row : j["summary"]) {
    double sum = 0;
    int64_t passes = 0;
    for (const auto& [n, count] : row["stats"]["tree_nodes"].items()) {
      sum += count.get<double>() * cm[std::stoi(n)] / cm[1];
      passes += count.get<int64_t>();
    }
    EXPECT_EQ(passes, row["stats"]["forward_passes"].get<int64_t>()) << row["config"];
    EXPECT_NEAR(row["relative_cost_cost_model"].get<double>(), sum / passes, 1e-9) << row["config"];
    EXPECT_NEAR(row["projected_speedup"].get<double>(),
                row["mean_accepted_tokens"].get<double>() / (sum / passes) /
                    none["mean_accepted_tokens"].get<double>(),
                1e-9);
  }
  // PLD's chains are shorter than its budget of 11 nodes, so it is charged less than c(11).
  EXPECT_LT(j["summary"][1]["relative_cost_cost_model"].get<double>(), cm[11] / cm[1]);
  for (const json& row : j["summary"]) {
    const json& spread = row["speedup_per_prompt"];
    ASSERT_TRUE(spread.is_object()) << row["config"];
    EXPECT_LE(spread["min"].get<double>(), spread["median"].get<double>());
    EXPECT_LE(spread["median"].get<double>(), spread["max"].get<double>());
  }
  EXPECT_DOUBLE_EQ(none["speedup_per_prompt"]["max"].get<double>(), 1.0);
  EXPECT_EQ(j["verify_cost"]["model_under_test"].size(), 3u);
  EXPECT_NEAR(j["verify_cost"]["cost_model"][2]["relative"].get<double>(), 3.0, 1e-9);
  const std::string md = ResultsMarkdown(j);
  EXPECT_NE(md.find("Equality check: 0 mismatching prompts"), std::string::npos);
  EXPECT_NE(md.find("| goose@auto |"), std::string::npos);
  EXPECT_NE(md.find("Projection, not a measurement"), std::string::npos);
}

// auto-cm chooses on the cost model's curve, whatever this machine's passes take: where trees
// are nearly free there (c(16) = 1.2 c(1)) it builds larger trees than where they are dear
// (c(2) = 4 c(1)); without a cost model it is an error. (Not against plain auto: that curve
// follows this machine's passes, which a loaded machine makes look flat.)
TEST_F(RunBenchTest, AutoOnTheCostModelFollowsItsCurve) {
  const auto configs = MakeConfigs({"goose"}, {kAutoCostModelBudget}).value();
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[1].Label(), "goose@auto-cm");
  auto run = [&](std::vector<VerifyCostPoint> curve) {
    opt_.cost_model_cost = std::move(curve);
    auto r = RunBench(*session_, sets_, configs, opt_);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return 0.0;
    EXPECT_EQ((*r)["equality"]["mismatching_prompts"], 0);
    return (*r)["summary"][1]["mean_tree_nodes"].get<double>();
  };
  const double gentle = run({{1, 1e-2}, {16, 1.2e-2}, {64, 3e-2}});
  const double steep = run({{1, 1e-4}, {2, 4e-4}, {16, 1e-3}, {64, 1e-2}});
  EXPECT_GT(gentle, steep);
  opt_.cost_model_cost.clear();
  EXPECT_FALSE(RunBench(*session_, sets_, configs, opt_).ok());
}

TEST_F(RunBenchTest, EqualityCheckCatchesAnInjectedMismatch) {
  const auto configs = MakeConfigs({"tr"}, {}).value();
  auto inject = [](int config, const BenchPrompt& p, std::vector<int32_t>* ids) {
    if (config == 1 && p.id == "gsm8k:1") (*ids)[5] ^= 1;
  };
  auto r = RunBench(*session_, sets_, configs, opt_, inject);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const json& eq = (*r)["equality"];
  EXPECT_EQ(eq["mismatching_prompts"], 1);
  ASSERT_EQ(eq["mismatches"].size(), 1u);
  EXPECT_EQ(eq["mismatches"][0]["prompt"], "gsm8k:1");
  EXPECT_EQ(eq["mismatches"][0]["config"], "tr");
  EXPECT_EQ(eq["mismatches"][0]["first_differing_token"], 5);
  EXPECT_EQ((*r)["summary"][1]["mismatching_prompts"], 1);
  EXPECT_NE(ResultsMarkdown(*r).find("EQUALITY CHECK FAILED: 1 prompt(s)"), std::string::npos);
}

TEST_F(RunBenchTest, RejectsAContextTooSmall) {
  opt_.max_tokens = 1 << 20;
  auto r = RunBench(*session_, sets_, MakeConfigs({}, {}).value(), opt_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not fit"), std::string::npos);
}

}  // namespace
}  // namespace goose
