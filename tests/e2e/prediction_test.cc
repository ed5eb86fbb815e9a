// Predicted outputs (GenerateParams::prediction): whatever the prediction (the output itself,
// the output with every tenth token replaced, another prompt's output, nothing, more than the
// output), the tokens are plain decoding's, greedy and sampled, at a fixed budget and under
// --budget auto; and where the prediction is right, the drafters really draft from it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "draft/prediction_matcher.h"
#include "e2e_util.h"
#include "engine/engine.h"

namespace goose {
namespace {

constexpr int kTokens = 64;

std::vector<CostSample> GentleCurve() {
  std::vector<CostSample> c;
  for (int n : {1, 2, 4, 8, 16, 32, 64, 128}) c.push_back({n, 1e-3 + 1e-5 * n});
  return c;
}

GenerateParams Params(float temp, int n_predict = kTokens) {
  GenerateParams p;
  p.n_predict = n_predict;
  p.ignore_eos = true;
  p.sampling.temp = temp;
  p.sampling.seed = 5;
  return p;
}

// The predictions a request may bring, given its own output and another prompt's.
std::vector<std::pair<std::string, std::vector<int32_t>>> Predictions(
    const std::vector<int32_t>& own, const std::vector<int32_t>& other, int n_vocab) {
  std::vector<int32_t> edited = own;
  for (size_t i = 5; i < edited.size(); i += 10) edited[i] = (edited[i] + 1) % n_vocab;
  std::vector<int32_t> longer = own;
  longer.insert(longer.end(), other.begin(), other.end());
  return {
      {"right", own}, {"edited", edited}, {"unrelated", other}, {"empty", {}}, {"longer", longer}};
}

struct Case {
  std::string spec;
  bool auto_budget;
};

class PredictionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PredictionTest, OutputIsPlainDecodingsWhateverThePrediction) {
  const Case& c = GetParam();
  const Model& m = TinyModel();
  const auto prompts = LosslessPrompts(m, 64);
  ThreadPool pool(1);
  for (float temp : {0.0f, 0.8f}) {
    Engine engine(m, 512, &pool);
    if (c.auto_budget) engine.SetCostCurve(GentleCurve());
    const std::vector<int32_t>& other = PlainIds(m, prompts[1], Params(temp, 2 * kTokens));
    for (size_t pi : {0, 2, 3}) {
      const std::vector<int32_t>& want = PlainIds(m, prompts[pi], Params(temp));
      for (const auto& [name, prediction] : Predictions(want, other, m.config().n_vocab)) {
        SCOPED_TRACE(c.spec + (c.auto_budget ? "@auto" : "@16") + " temp " + std::to_string(temp) +
                     " prompt " + std::to_string(pi) + " " + name);
        GenerateParams p = Params(temp);
        ASSERT_TRUE(ParseSpecVariant(c.spec, &p.spec).ok());
        p.spec.auto_budget = c.auto_budget;
        p.spec.budget = c.auto_budget ? 0 : 16;
        p.prediction = prediction;
        auto got = engine.Generate(prompts[pi], p);
        ASSERT_TRUE(got.ok()) << got.status().message();
        ASSERT_EQ(got->tokens, want);
        const int64_t from_prediction = got->stats.accepted[int(NodeSource::kPrediction)];
        if (name == "right" || name == "longer") {
          // The prediction drafts nearly everything: all but the first token (the prefill's)
          // and the bonus tokens of the cycles it spans.
          EXPECT_GE(from_prediction, kTokens / 2) << "drafted from the prediction";
        }
        if (name == "empty") {
          EXPECT_EQ(from_prediction, 0);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, PredictionTest,
                         ::testing::Values(Case{"goose", false}, Case{"goose", true},
                                           Case{"pld", false}, Case{"pld", true}),
                         [](const auto& info) {
                           return info.param.spec + (info.param.auto_budget ? "_auto" : "_16");
                         });

// With the right prediction a tree takes many tokens a pass; an edited one costs a little.
TEST(Prediction, ARightPredictionIsAcceptedInLongRuns) {
  const Model& m = TinyModel();
  const auto prompts = LosslessPrompts(m, 64);
  ThreadPool pool(1);
  Engine engine(m, 512, &pool);
  const std::vector<int32_t>& want = PlainIds(m, prompts[0], Params(0));
  GenerateParams p = Params(0);
  ASSERT_TRUE(ParseSpecVariant("goose", &p.spec).ok());
  p.spec.budget = 32;
  p.prediction = want;
  auto right = engine.Generate(prompts[0], p);
  ASSERT_TRUE(right.ok());
  EXPECT_GT(right->stats.TokensPerCycle(), 8.0);
  EXPECT_EQ(ReproducedPredictionTokens(want, right->tokens), kTokens);
  std::vector<int32_t> edited = want;
  for (size_t i = 5; i < edited.size(); i += 10) edited[i] = (edited[i] + 1) % m.config().n_vocab;
  p.prediction = edited;
  auto got = engine.Generate(prompts[0], p);
  ASSERT_TRUE(got.ok());
  EXPECT_GT(got->stats.TokensPerCycle(), 4.0);
  EXPECT_EQ(ReproducedPredictionTokens(edited, got->tokens), kTokens - (kTokens - 5 + 9) / 10);
}

TEST(Prediction, APredictionOutsideTheVocabularyOrLongerThanTheContextIsRefused) {
  const Model& m = TinyModel();
  ThreadPool pool(1);
  Engine engine(m, 64, &pool);
  GenerateParams p = Params(0, 4);
  ASSERT_TRUE(ParseSpecVariant("goose", &p.spec).ok());
  p.prediction = {1, m.config().n_vocab};
  auto r = engine.Generate(std::vector<int32_t>{1, 403}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prediction token id"), std::string::npos);
  p.prediction.assign(65, 403);
  r = engine.Generate(std::vector<int32_t>{1, 403}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the prediction has 65 tokens"), std::string::npos);
}

}  // namespace
}  // namespace goose
