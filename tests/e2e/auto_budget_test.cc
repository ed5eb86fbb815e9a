// --budget auto, the default of goose generate and goose serve, lossless for every variant (but
// the table-lifetime forms and the draft-model methods: draft_methods_test.cc runs those under
// auto), greedy and sampled, on a session given a made-up cost curve (tests/cost_curves.h), as
// the front ends open one, from nothing learned: on the gentle curve trees pay, so the variants
// draft, and accept at least their floors (tests/spec_floor.h); on the steep one they do not,
// so the chooser takes plain steps and own-sized trees are cut to (nearly) the root. Output is
// plain decoding's on both.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cost_curves.h"
#include "e2e_util.h"
#include "engine/session.h"
#include "spec_floor.h"

namespace goose {
namespace {

std::unique_ptr<Session> OpenSession(const std::vector<CostSample>& curve) {
  SessionOptions so;
  so.model_path = SharedPath("models/stories260K.gguf");
  so.n_threads = 1;
  so.table_cache = false;
  so.budget_auto = true;
  so.cost_curve = curve;
  auto s = Session::Open(std::move(so));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Six prompts: three repetitive texts, alternating with two TinyStories openings and a
// Spec-Bench question. A repetitive one comes first: a fresh variant's chooser probes at once,
// then ever more rarely while its probes find nothing to draft (by design), so a plain first
// prompt can leave it on plain steps for the whole run.
std::vector<std::vector<int32_t>> Prompts() {
  const auto pool = LosslessPrompts(TinyModel(), 96);
  return {pool[16], pool[0], pool[17], pool[8], pool[18], pool[1]};
}

std::string Name(const testing::TestParamInfo<std::string>& info) {
  std::string v = info.param;
  std::replace(v.begin(), v.end(), '+', '_');
  return v;
}

class AutoBudgetTest : public testing::TestWithParam<std::string> {};

TEST_P(AutoBudgetTest, GentleCurveSpeculatesSteepCurveStepsAndBothArePlainDecoding) {
  const std::string variant = GetParam();
  SpecParams parsed;
  ASSERT_TRUE(ParseSpecVariant(variant, &parsed).ok());
  const Method& method = MethodOf(parsed);
  const bool own_sizes = method.SizesOwnTrees(parsed);
  const auto prompts = Prompts();
  for (bool steep : {false, true}) {
    auto session = OpenSession(steep ? SteepCostCurve() : GentleCostCurve());
    ASSERT_NE(session, nullptr);
    Engine& engine = session->NewEngine();
    for (float temp : {0.0f, 0.8f}) {
      SCOPED_TRACE(variant + (steep ? " steep" : " gentle") + (temp > 0 ? " sampled" : " greedy"));
      SpecStats total;
      int64_t generated = 0, chosen_plain = 0, chosen = 0;
      for (size_t pi = 0; pi < prompts.size(); ++pi) {
        GenerateParams p;
        p.n_predict = kSanitized ? 24 : 40;
        p.ignore_eos = pi % 2 == 0;
        if (temp > 0) {
          p.sampling.temp = temp;
          p.sampling.top_p = 0.95f;
          p.sampling.top_k = 0;
          p.sampling.seed = 77;
        }
        const std::vector<int32_t>& want = PlainIds(TinyModel(), prompts[pi], p);
        p.spec = parsed;
        p.spec.auto_budget = true;
        auto got = engine.Generate(prompts[pi], p);
        ASSERT_TRUE(got.ok()) << got.status().message();
        ASSERT_EQ(got->tokens, want) << "prompt #" << pi;
        total.Merge(got->stats);
        generated += static_cast<int64_t>(got->tokens.size());
        for (size_t b = 0; b < got->budgets_chosen.size(); ++b) {
          chosen += got->budgets_chosen[b];
          if (b == 1) chosen_plain += got->budgets_chosen[b];
        }
      }
      std::printf("%s%s%s: %lld tokens, %lld passes, %.2f nodes a pass; accepted / drafted: %s\n",
                  variant.c_str(), steep ? " steep" : " gentle", temp > 0 ? " sampled" : " greedy",
                  static_cast<long long>(generated), static_cast<long long>(total.cycles),
                  total.MeanTreeNodes(), AcceptedBySource(total).c_str());
      // Who chose each cycle's size: the chooser, or (own-sized trees) the drafter.
      if (own_sizes) {
        EXPECT_EQ(chosen, 0);
      } else {
        EXPECT_EQ(chosen, total.cycles);
      }
      if (!steep) {
        const std::vector<SourceFloor>* floors = MethodFloors(method.name(), temp > 0);
        ASSERT_NE(floors, nullptr) << method.name() << " has no floor in tests/spec_floor.h";
        EXPECT_TRUE(MeetsFloors(total, generated, *floors));
        if (!own_sizes) {
          EXPECT_LT(chosen_plain, chosen / 2) << "trees pay on the gentle curve";
        }
      } else if (own_sizes) {
        EXPECT_LT(total.tree_nodes_total, total.cycles * 3 / 2) << "trees cut to the root";
      } else {
        EXPECT_GT(chosen_plain, chosen * 3 / 4) << "plain steps pay best on the steep curve";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, AutoBudgetTest, testing::ValuesIn(SweepVariants(false)), Name);

}  // namespace
}  // namespace goose
