// Losslessness, end to end: every registered method variant (AllVariants(): presets, ablations,
// both table lifetimes), at several budgets, greedy and sampled at two temperatures, on the real
// tiny model and a synthesized qwen2 model, emits exactly the ids of plain decoding — also when
// a stop token ends generation inside an accepted path. No method is named in the sweep: a new
// method's variants join it when it is registered. Every case also accepts at least its
// method's floor of draft tokens, by source (tests/spec_floor.h): a drafter that stops
// proposing, or a verifier that stops accepting, fails the sweep although the output stays
// plain decoding's (CaseFloors names the few cases that have none, and why).
// Methods that draft with a draft model (Method::needs_draft_model) draft with the weak tiny
// drafter on the tiny model (method/weak_drafter.h; where it cannot be made, no python3-numpy,
// their cases skip, saying why) and with a Q4_0 copy of the qwen2 model on that one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "e2e_util.h"
#include "engine/engine.h"
#include "method/weak_drafter.h"
#include "spec_floor.h"

namespace goose {
namespace {

// Every registered speculative variant.
std::vector<std::string> Variants() {
  std::vector<std::string> out;
  for (const std::string& v : AllVariants()) {
    if (v != "none") out.push_back(v);
  }
  return out;
}

struct Case {
  const char* model;    // "tiny" | "qwen2"
  std::string variant;  // ParseSpecVariant name
  float temp = 0;       // 0: greedy; else sampled with top-p 0.95 (top-k off)
  int top_k = 0;        // sampled only; an extra case keeps top-k 40 on
  int threads = 1;
  int shortlist = -1;  // the draft's logit columns (DraftRunner); -1: its default
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  std::string v = info.param.variant;
  for (char& ch : v) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';  // "draft-tree+prune"
  }
  std::string name =
      std::string(info.param.model) + "_" + v +
      (info.param.temp > 0 ? "_sampled_t" + std::to_string(int(info.param.temp * 10)) : "_greedy");
  if (info.param.top_k > 0) name += "_topk" + std::to_string(info.param.top_k);
  if (info.param.threads > 1) name += "_t" + std::to_string(info.param.threads);
  if (info.param.shortlist >= 0) name += "_shortlist" + std::to_string(info.param.shortlist);
  return name;
}

// Gives `engine` a draft model when `variant` needs one (the weak tiny drafter, or `drafter`);
// false (and `why`) when it needs one and none can be made.
bool AttachDrafterIfNeeded(const std::string& variant, Engine& engine, std::string* why,
                           int shortlist = -1, const Model* drafter = nullptr) {
  SpecParams spec;
  if (!ParseSpecVariant(variant, &spec).ok() || !MethodOf(spec).needs_draft_model()) return true;
  const Model* draft = drafter != nullptr ? drafter : WeakDrafter(why);
  if (draft == nullptr) return false;
  const Status st = engine.SetDraftModel(*draft, shortlist);
  if (!st.ok()) *why = st.message();
  return st.ok();
}

const Model& ModelFor(const char* model) {
  return std::string(model) == "tiny" ? TinyModel() : SynthQwen2Model();
}

const Model* DrafterFor(const char* model) {
  return std::string(model) == "tiny" ? nullptr : &SynthQwen2Twin();
}

// The floors a case must meet (tests/spec_floor.h); null when it has none, and `why` says so.
const std::vector<SourceFloor>* CaseFloors(const Case& c, std::string* why) {
  SpecParams spec;
  if (!ParseSpecVariant(c.variant, &spec).ok()) return nullptr;
  const std::string method = MethodOf(spec).name();
  const bool qwen2 = std::string(c.model) == "qwen2";
  if (qwen2 && method == "pld" && c.temp > 0) {
    *why =
        "the random qwen2's sampled text hardly repeats, so PLD's context matches are "
        "rarely continued (0 to 12 accepted tokens of ~3700)";
    return nullptr;
  }
  if (qwen2 && method == "draft") {
    *why =
        "the random qwen2's next-token probabilities stay under draft's p_min: it proposes "
        "nothing";
    return nullptr;
  }
  return MethodFloors(method, c.temp > 0);
}

GenerateParams Params(const Case& c, int n_predict, bool ignore_eos) {
  GenerateParams p;
  p.n_predict = n_predict;
  p.ignore_eos = ignore_eos;
  if (c.temp > 0) {
    p.sampling.temp = c.temp;
    p.sampling.top_p = 0.95f;
    p.sampling.top_k = c.top_k;
    p.sampling.seed = 1234;
  }
  return p;
}

// Position of the first difference, or -1.
int FirstDifference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int>(n);
}

std::string Describe(const std::vector<int32_t>& ref, const std::vector<int32_t>& got, int diff) {
  auto at = [diff](const std::vector<int32_t>& v) {
    return diff < static_cast<int>(v.size()) ? v[diff] : -1;
  };
  return "first difference at generated position " + std::to_string(diff) + " (plain " +
         std::to_string(at(ref)) + ", speculative " + std::to_string(at(got)) + ")";
}

class LosslessTest : public testing::TestWithParam<Case> {};

// budgets x >= 20 prompts, one engine per case: hot tables carry across requests and budgets,
// which is the realistic case and must stay lossless too.
TEST_P(LosslessTest, SpeculativeEqualsPlain) {
  const Case c = GetParam();
  const Model& model = ModelFor(c.model);
  const int n_predict = kSanitized ? 24 : 48;
  const auto prompts = LosslessPrompts(model, kSanitized ? 64 : 160);
  ASSERT_GE(prompts.size(), 20u);
  ThreadPool pool(c.threads);
  Engine spec(model, 512, &pool);
  std::string why;
  if (!AttachDrafterIfNeeded(c.variant, spec, &why, c.shortlist, DrafterFor(c.model))) {
    GTEST_SKIP() << c.variant << ": " << why;
  }
  const int budgets[] = {1, 8, 32, 0};  // 0 = the method's default (paper GOOSE: B0 = 60)
  int64_t passes = 0, generated = 0;
  SpecStats total;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const GenerateParams base = Params(c, n_predict, /*ignore_eos=*/pi % 2 == 0);
    const std::vector<int32_t>& ref = PlainIds(model, prompts[pi], base);
    for (int budget : budgets) {
      GenerateParams p = base;
      ASSERT_TRUE(ParseSpecVariant(c.variant, &p.spec).ok());
      p.spec.budget = budget;
      auto got = spec.Generate(prompts[pi], p);
      ASSERT_TRUE(got.ok()) << got.status().message();
      const int diff = FirstDifference(ref, got->tokens);
      ASSERT_EQ(diff, -1) << c.variant << " budget " << budget << " prompt #" << pi
                          << (c.temp > 0 ? " sampled" : " greedy") << ": "
                          << Describe(ref, got->tokens, diff);
      passes += got->stats.cycles;
      generated += static_cast<int64_t>(got->tokens.size());
      total.Merge(got->stats);
    }
  }
  RecordProperty("mean_accepted_tokens",
                 std::to_string(double(generated) / std::max<int64_t>(1, passes)));
  RecordProperty("accepted_by_source", AcceptedBySource(total));
  std::printf("%lld tokens; accepted / drafted: %s\n", static_cast<long long>(generated),
              AcceptedBySource(total).c_str());
  std::string no_floor;
  const std::vector<SourceFloor>* floors = CaseFloors(c, &no_floor);
  if (floors == nullptr) {
    ASSERT_FALSE(no_floor.empty()) << c.variant << " has no speculation floor: add its method's "
                                   << "to tests/spec_floor.h";
    std::printf("no speculation floor for %s: %s\n", c.variant.c_str(), no_floor.c_str());
    return;
  }
  EXPECT_TRUE(MeetsFloors(total, generated, *floors)) << c.variant;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* m : {"tiny", "qwen2"}) {
    for (const std::string& variant : Variants()) {
      for (float temp : {0.0f, 0.8f, 1.5f}) cases.push_back({m, variant, temp});
    }
  }
  // The sampler's top-k on, and a second thread count.
  cases.push_back({"tiny", "goose", 0.8f, 40, 2});
  // The draft's logits over a shortlist of 128 of the tiny vocabulary's 512 tokens (the default
  // for vocabularies of 4096 tokens or more): the draft proposes fewer tokens, the output is
  // the same.
  for (const char* variant : {"draft", "draft-tree+prune", "graft", "graft+paper"}) {
    for (float temp : {0.0f, 0.8f}) cases.push_back({"tiny", variant, temp, 0, 1, 128});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllMethods, LosslessTest, testing::ValuesIn(AllCases()), CaseName);

// The id the tokenizer gives a sentence-ending "." (not the byte-fallback token 0x2E).
int32_t FullStop(const Model& model) {
  const std::vector<int32_t> ids = model.tokenizer().Encode("He ran.", false);
  return !ids.empty() && model.tokenizer().TokenToPiece(ids.back()) == "." ? ids.back() : -1;
}

// A frequent token (".") as an extra stop token: every variant stops exactly where plain
// decoding stops, right after the first ".", and for the methods that draft several tokens per
// pass the stop is found inside a multi-token accepted path (the walk must cut it there and
// drop the rest of the path and the bonus).
TEST(LosslessStops, StopTokenEndsGenerationLikePlainEvenInsideAnAcceptedPath) {
  const Model& model = TinyModel();
  const int32_t dot = FullStop(model);
  ASSERT_GE(dot, 0);
  const auto prompts = LosslessPrompts(model, 160);
  ThreadPool pool(1);
  int inside_path_total = 0;
  for (const std::string& variant : Variants()) {
    int inside_path_variant = 0;
    bool skipped = false;
    for (float temp : {0.0f, 0.8f}) {
      SCOPED_TRACE(variant + (temp > 0 ? " sampled" : " greedy"));
      Engine spec(model, 512, &pool);
      std::string why;
      if (!AttachDrafterIfNeeded(variant, spec, &why)) {
        std::fprintf(stderr, "*** SKIPPED %s (no draft model): %s\n", variant.c_str(), why.c_str());
        skipped = true;
        break;
      }
      int stopped_prompts = 0, inside_path = 0;
      for (size_t pi = 0; pi < prompts.size(); pi += kSanitized ? 3 : 1) {
        GenerateParams base = Params({"tiny", variant, temp}, 96, /*ignore_eos=*/false);
        base.stop_tokens = {dot};
        const std::vector<int32_t>& ref = PlainIds(model, prompts[pi], base);
        ASSERT_FALSE(ref.empty());
        GenerateParams p = base;
        ASSERT_TRUE(ParseSpecVariant(variant, &p.spec).ok());
        AcceptResult last;
        p.on_cycle = [&](const Proposal&, const AcceptResult& acc) { last = acc; };
        auto got = spec.Generate(prompts[pi], p);
        ASSERT_TRUE(got.ok()) << got.status().message();
        const int diff = FirstDifference(ref, got->tokens);
        ASSERT_EQ(diff, -1) << "prompt #" << pi << ": " << Describe(ref, got->tokens, diff);
        if (ref.back() != dot) {
          EXPECT_EQ(std::count(ref.begin(), ref.end(), dot), 0);  // ran to n_predict instead
          continue;
        }
        ++stopped_prompts;
        EXPECT_EQ(std::count(got->tokens.begin(), got->tokens.end(), dot), 1)
            << "generation must end right after the first stop token";
        EXPECT_LE(got->stats.stopped, 1);
        // The stop was an accepted draft (no bonus) behind at least one other accepted token.
        if (got->tokens.size() > 1 && last.stopped && last.bonus < 0 && last.path.size() >= 2) {
          ++inside_path;
        }
      }
      EXPECT_GE(stopped_prompts, kSanitized ? 4 : 10);
      inside_path_variant += inside_path;
    }
    if (skipped) continue;
    if (!kSanitized) {
      EXPECT_GT(inside_path_variant, 0)
          << variant << ": no stop token inside a multi-token accepted path";
    }
    inside_path_total += inside_path_variant;
  }
  EXPECT_GT(inside_path_total, 0);
}

}  // namespace
}  // namespace goose
