// The serving loop (engine/serving_loop.h) end to end on the tiny model: requests that arrive
// while others decode, a long prompt that joins mid-generation, a cancelled request, mixed
// methods, greedy and sampled, all in shared passes, each request's tokens exactly plain
// decoding's of it alone; on a gentle synthetic cost curve, so that trees pay and several
// requests' trees share (and split) one pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "engine/serving_loop.h"
#include "engine/session.h"

namespace goose {
namespace {

// c(n) = 1 ms + 10 us a node: trees of every size pay on this curve.
std::vector<CostSample> GentleCurve() {
  std::vector<CostSample> c;
  for (int n : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128}) c.push_back({n, 1e-3 + 1e-5 * n});
  return c;
}

std::unique_ptr<Session> OpenSession(int threads) {
  SessionOptions so;
  so.model_path = SharedPath("models/stories260K.gguf");
  so.n_threads = threads;
  so.n_contexts = 4;
  so.table_cache = false;
  so.budget_auto = true;
  so.cost_curve = GentleCurve();
  auto s = Session::Open(std::move(so));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

struct Job {
  std::vector<int32_t> prompt;
  GenerateParams params;
  int start_after = -1;  // submitted once job start_after has this many tokens (-1: at once)
  int start_at_tokens = 0;
  int cancel_after = -1;  // cancelled once it has this many tokens (-1: never)
  // Filled by the loop's thread.
  std::vector<int32_t> seen;  // tokens as on_tokens saw them
  StatusOr<GenerateResult> result = Status::Error("never finished");
  bool cancelled = false;
  bool done = false;
};

// Runs `jobs` through a loop of `slots` slots; the dependent ones are submitted from the
// callbacks of the jobs they wait for, so they arrive while those decode.
void RunJobs(Session& session, int slots, std::vector<Job>& jobs, PassCounters* counters) {
  ServingLoop loop(session, slots, static_cast<int>(jobs.size()));
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::function<void(size_t)> submit = [&](size_t i) {
    Job& j = jobs[i];
    ServingRequest r;
    r.prompt = j.prompt;
    r.params = j.params;
    r.on_tokens = [&, i](std::span<const int32_t> t) {
      Job& me = jobs[i];
      const size_t before = me.seen.size();
      me.seen.insert(me.seen.end(), t.begin(), t.end());
      for (size_t k = 0; k < jobs.size(); ++k) {
        const Job& d = jobs[k];
        if (d.start_after == static_cast<int>(i) &&
            before < static_cast<size_t>(d.start_at_tokens) &&
            me.seen.size() >= static_cast<size_t>(d.start_at_tokens)) {
          submit(k);
        }
      }
      return true;
    };
    r.cancelled = [&, i] {
      const Job& me = jobs[i];
      return me.cancel_after >= 0 && me.seen.size() >= static_cast<size_t>(me.cancel_after);
    };
    r.on_done = [&, i](int, StatusOr<GenerateResult> result, bool cancelled) {
      std::lock_guard<std::mutex> lock(mu);
      jobs[i].result = std::move(result);
      jobs[i].cancelled = cancelled;
      jobs[i].done = true;
      ++finished;
      cv.notify_all();
    };
    ASSERT_EQ(loop.Submit(std::move(r)), ServingLoop::Admit::kQueued);
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].start_after < 0) submit(i);
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::minutes(5),
                          [&] { return finished == static_cast<int>(jobs.size()); }));
  *counters = loop.counters();
}

GenerateParams Params(const std::string& variant, float temp, int n_predict) {
  GenerateParams p;
  p.n_predict = n_predict;
  p.ignore_eos = true;
  EXPECT_TRUE(ParseSpecVariant(variant, &p.spec).ok()) << variant;
  p.spec.auto_budget = variant != "none";
  if (temp > 0) {
    p.sampling.temp = temp;
    p.sampling.top_p = 0.95f;
    p.sampling.seed = 99;
  }
  return p;
}

void ExpectPlain(const Job& j, const std::string& what) {
  ASSERT_TRUE(j.result.ok()) << what << ": " << j.result.status().message();
  const std::vector<int32_t>& ref = PlainIds(TinyModel(), j.prompt, j.params);
  EXPECT_EQ(j.result->tokens, ref) << what;
  EXPECT_EQ(j.seen, j.result->tokens) << what << ": the callback saw what the result holds";
}

int64_t DraftAccepted(const SpecStats& s) {
  int64_t n = 0;
  for (int src = 1; src < kNumSources; ++src) n += s.accepted[src];
  return n;
}

class ServingLoopTest : public testing::TestWithParam<int> {};  // threads

TEST_P(ServingLoopTest, StaggeredMixedRequestsEqualPlainDecodingAlone) {
  auto session = OpenSession(GetParam());
  ASSERT_NE(session, nullptr);
  const auto prompts = LosslessPrompts(TinyModel(), 64);
  const std::vector<std::string> variants = {"goose", "pld",      "tr",      "goose+paper",
                                             "none",  "balanced", "sequoia", "goose+cold"};
  std::vector<Job> jobs;
  for (size_t i = 0; i < 10; ++i) {
    Job j;
    j.prompt = prompts[(3 * i) % prompts.size()];
    j.params = Params(variants[i % variants.size()], i % 3 == 2 ? 0.8f : 0.0f, 40);
    if (i >= 3) {  // arrive while the earlier ones decode
      j.start_after = static_cast<int>(i % 3);
      j.start_at_tokens = 4 + static_cast<int>(i);
    }
    jobs.push_back(std::move(j));
  }
  PassCounters counters;
  RunJobs(*session, 3, jobs, &counters);
  int64_t accepted = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ExpectPlain(jobs[i], "job " + std::to_string(i) + " (" + variants[i % variants.size()] + ")");
    if (jobs[i].result.ok()) accepted += DraftAccepted(jobs[i].result->stats);
  }
  EXPECT_GT(counters.sequences, counters.passes + 20) << "requests shared passes";
  EXPECT_GT(accepted, 40) << "speculation happened in the shared passes";
}

TEST_P(ServingLoopTest, LongPromptJoinsMidGenerationInChunks) {
  auto session = OpenSession(GetParam());
  ASSERT_NE(session, nullptr);
  const Tokenizer& tok = TinyModel().tokenizer();
  std::string story;
  while (tok.Encode(story, true).size() < 400) {
    story +=
        "Once upon a time, there was a little girl named Lily. She loved to play in the "
        "park with her dog Max. One day, they found a big red ball under a tree. ";
  }
  std::vector<int32_t> long_prompt = tok.Encode(story, true);
  long_prompt.resize(400);
  const auto prompts = LosslessPrompts(TinyModel(), 48);
  std::vector<Job> jobs(4);
  for (int i = 0; i < 3; ++i) {
    jobs[i].prompt = prompts[i];
    jobs[i].params = Params(i == 1 ? "pld" : "goose", i == 2 ? 0.8f : 0.0f, 80);
  }
  jobs[3].prompt = long_prompt;
  jobs[3].params = Params("goose", 0.0f, 24);
  jobs[3].start_after = 0;
  jobs[3].start_at_tokens = 8;
  PassCounters counters;
  RunJobs(*session, 4, jobs, &counters);
  int64_t accepted = 0;
  for (int i = 0; i < 4; ++i) {
    ExpectPlain(jobs[i], "job " + std::to_string(i));
    if (jobs[i].result.ok()) accepted += DraftAccepted(jobs[i].result->stats);
  }
  EXPECT_GT(accepted, 20) << "speculation happened beside the chunked prefill";
  EXPECT_GE(counters.prefill_rows, 400);
  // Its 400 prompt rows went in chunks of at most 128 while the others decoded: they got tokens
  // in the passes that prefilled it.
  ASSERT_TRUE(jobs[3].result.ok());
  EXPECT_GT(jobs[3].result->prefill_seconds, 0);
  EXPECT_GE(counters.passes, 4 + 80 / 4) << "the long prompt did not take one pass";
}

TEST_P(ServingLoopTest, CancelledAndInvalidRequestsEndAloneAndTheOthersGoOn) {
  auto session = OpenSession(GetParam());
  ASSERT_NE(session, nullptr);
  const auto prompts = LosslessPrompts(TinyModel(), 48);
  std::vector<Job> jobs(4);
  for (int i = 0; i < 4; ++i) {
    jobs[i].prompt = prompts[i + 4];
    jobs[i].params = Params("goose", i == 1 ? 0.8f : 0.0f, 48);
  }
  jobs[0].cancel_after = 5;
  jobs[2].prompt = {};  // invalid: an empty prompt
  PassCounters counters;
  RunJobs(*session, 2, jobs, &counters);
  ASSERT_TRUE(jobs[0].result.ok());
  EXPECT_TRUE(jobs[0].cancelled);
  const std::vector<int32_t>& ref = PlainIds(TinyModel(), jobs[0].prompt, jobs[0].params);
  const std::vector<int32_t>& got = jobs[0].result->tokens;
  ASSERT_LT(got.size(), ref.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), ref.begin())) << "a prefix of plain decoding";
  EXPECT_FALSE(jobs[2].result.ok());
  EXPECT_NE(jobs[2].result.status().message().find("empty prompt"), std::string::npos)
      << jobs[2].result.status().message();
  ExpectPlain(jobs[1], "job 1");
  ExpectPlain(jobs[3], "job 3");
  for (int i : {1, 3}) {
    if (jobs[i].result.ok()) {
      EXPECT_GT(DraftAccepted(jobs[i].result->stats), 0) << "job " << i << " speculated";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ServingLoopTest, testing::Values(1, 2),
                         [](const testing::TestParamInfo<int>& i) {
                           return "t" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace goose
