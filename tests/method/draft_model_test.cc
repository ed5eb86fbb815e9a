// DraftRunner keeps the draft model's cache in step with the target's commits: whatever was
// drafted, accepted, grafted or skipped, the root the draft scores at the start of a cycle has
// the logits of one-token decoding over every committed token, bit for bit. DraftTopK gives the
// draft's real probabilities; CheckDraftModel accepts the same or a prefix vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "method/draft_model.h"
#include "util/rng.h"
#include "util/thread_pool.h"
#include "weak_drafter.h"

namespace goose {
namespace {

// Logits after `seq`, scored as one chain in a fresh context (a chain equals one-token decoding
// bitwise: tests/model/tree_test.cc).
std::vector<float> Reference(const Model& m, const std::vector<int32_t>& seq) {
  Context ctx(m, 512, nullptr);
  EXPECT_TRUE(ctx.ForwardChain(seq).ok());
  const float* row = ctx.logits(static_cast<int>(seq.size()) - 1);
  return std::vector<float>(row, row + m.config().n_vocab);
}

bool BitwiseEqual(const float* a, const float* b, int n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

TEST(DraftTopK, ProbabilitiesAreTheSoftmaxOfTheWholeRow) {
  const Model& m = Tiny();
  const int nv = m.config().n_vocab;
  const std::vector<float> logits = Reference(m, {1, 403, 407, 261});
  double sum = 0;
  float top = logits[0];
  for (float l : logits) top = std::max(top, l);
  for (float l : logits) sum += std::exp(static_cast<double>(l) - top);
  std::vector<DraftToken> out;
  DraftTopK(logits.data(), nv, 5, &out);
  ASSERT_EQ(out.size(), 5u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NEAR(out[i].p, std::exp(static_cast<double>(logits[out[i].token]) - top) / sum, 1e-6);
    if (i > 0) {
      EXPECT_GE(out[i - 1].p, out[i].p);
    }
  }
  for (int v = 0; v < nv; ++v) EXPECT_LE(logits[v], logits[out[0].token]);
  DraftTopK(logits.data(), nv, 0, &out);
  EXPECT_TRUE(out.empty());
}

TEST(CheckDraftModel, SameOrPrefixVocabularyPasses) {
  EXPECT_TRUE(CheckDraftModel(Tiny(), Tiny(), 512).ok());
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  EXPECT_TRUE(CheckDraftModel(Tiny(), *weak, 512).ok());
  // The tiny model's trained context is 512 tokens (it is the target's too): a request for
  // more than the target's own context only needs the draft to match the target's.
  EXPECT_TRUE(CheckDraftModel(Tiny(), *weak, 4096).ok());
  EXPECT_TRUE(DraftCostWarning(Tiny(), *weak).empty());
  EXPECT_FALSE(DraftCostWarning(*weak, Tiny()).empty()) << "a draft larger than its target";
}

// Cycles as the engine runs them, with random drafts, random accepted paths (scored nodes,
// then maybe a node the draft never scored), bonus tokens, and plain steps the drafter never
// sees: at every BeginCycle the root's logits equal one-token decoding over all commits.
// With a shortlist, the columns must be the whole vocabulary's at their tokens, and every token
// committed so far must have one while a column of an unseen token is left.
void CheckRunnerFollowsCommits(int n_threads, uint64_t seed, int shortlist = 0) {
  const Model& m = Tiny();
  const int nv = m.config().n_vocab;
  ThreadPool pool(n_threads);
  Context ctx(m, 512, &pool);
  DraftRunner runner(ctx, shortlist);
  ASSERT_EQ(runner.shortlist(), shortlist);
  const int n_logits = shortlist > 0 ? shortlist : nv;
  // Reference logits at the columns' tokens.
  auto columns = [&](const std::vector<float>& all) {
    std::vector<float> out(n_logits);
    for (int j = 0; j < n_logits; ++j) out[j] = all[ctx.logit_token(j)];
    return out;
  };
  auto seen_listed = [&](const std::vector<int32_t>& seq) {
    std::vector<uint8_t> seen(nv, 0);
    int distinct = 0, listed = 0;
    for (int32_t t : seq) distinct += !seen[t]++;
    for (int j = 0; j < n_logits; ++j) listed += seen[ctx.logit_token(j)] != 0;
    return listed == std::min(distinct, n_logits);
  };
  SplitMix64 rng(seed);
  auto token = [&] { return static_cast<int32_t>(1 + rng.Below(static_cast<uint64_t>(nv - 1))); };
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 20; ++i) prompt.push_back(token());
  runner.Begin(prompt);
  DraftWork prefill;
  runner.ObservePrefill(prompt, 0, 12, &prefill);
  runner.ObservePrefill(prompt, 12, 21, &prefill);
  EXPECT_EQ(prefill.passes, 2);
  EXPECT_EQ(prefill.rows, 21);
  std::vector<int32_t> seq = prompt;
  auto commit = [&](const std::vector<int32_t>& t) {
    runner.Commit(t);
    seq.insert(seq.end(), t.begin(), t.end());
  };
  commit({token()});
  int checked = 0;
  for (int cycle = 0; cycle < 40 && seq.size() < 400; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    if (rng.Below(5) == 0) {  // the engine's plain step: the drafter is not asked
      commit({token()});
      continue;
    }
    // Guesses below the root that ride along in the root pass (graft's root guesses).
    std::vector<int32_t> extra, extra_parents;
    const int n_extra = static_cast<int>(rng.Below(4));
    for (int i = 0; i < n_extra; ++i) {
      extra.push_back(token());
      extra_parents.push_back(static_cast<int32_t>(rng.Below(i + 1)) - 1);
    }
    DraftWork work;
    ASSERT_TRUE(runner.BeginCycle(&work, extra, extra_parents));
    ASSERT_GE(work.passes, 1);
    ASSERT_EQ(runner.n_extra(), n_extra);
    ASSERT_EQ(ctx.n_logits(), n_logits);
    ASSERT_TRUE(seen_listed(seq)) << "a committed token lacks a column while unseen ones are left";
    ASSERT_TRUE(
        BitwiseEqual(runner.logits(runner.root_pid()), columns(Reference(m, seq)).data(), n_logits))
        << "root logits differ from one-token decoding over " << seq.size() << " tokens";
    std::vector<DraftToken> top;
    runner.TopK(runner.root_pid(), 4, &top);
    ASSERT_EQ(top.size(), 4u);
    for (const DraftToken& d : top) {
      bool listed = false;
      for (int j = 0; j < n_logits; ++j) listed |= ctx.logit_token(j) == d.token;
      ASSERT_TRUE(listed) << "the draft proposed token " << d.token << ", which has no column";
    }
    ++checked;
    // A random tree over a few passes: (token, parent pid) per node; the extras first.
    std::vector<int32_t> node_token = {seq.back()}, node_pid = {runner.root_pid()},
                         node_parent = {-1};
    for (int i = 0; i < n_extra; ++i) {
      node_token.push_back(extra[i]);
      node_pid.push_back(runner.root_pid() + 1 + i);
      node_parent.push_back(extra_parents[i] + 1);
      std::vector<int32_t> context = seq, below;
      for (int j = i + 1; j > 0; j = node_parent[j]) below.insert(below.begin(), node_token[j]);
      context.insert(context.end(), below.begin(), below.end());
      ASSERT_TRUE(BitwiseEqual(runner.logits(node_pid.back()),
                               columns(Reference(m, context)).data(), n_logits))
          << "root-pass guess " << i << " differs from one-token decoding";
    }
    const int passes = static_cast<int>(rng.Below(4));
    for (int p = 0; p < passes; ++p) {
      std::vector<int32_t> toks, parents, idx;
      const int rows = 1 + static_cast<int>(rng.Below(5));
      for (int r = 0; r < rows; ++r) {
        const int parent = static_cast<int>(rng.Below(node_token.size()));
        toks.push_back(token());
        parents.push_back(node_pid[parent] >= 0 ? node_pid[parent] : runner.root_pid());
        node_parent.push_back(node_pid[parent] >= 0 ? parent : 0);
        node_token.push_back(toks.back());
        node_pid.push_back(runner.next_pid() + r);
      }
      ASSERT_GE(runner.Score(toks, parents, &work), 0);
    }
    // Accept the root path of a random node, plus maybe one token the draft never scored.
    const int leaf = static_cast<int>(rng.Below(node_token.size()));
    std::vector<int32_t> path;
    for (int j = leaf; j > 0; j = node_parent[j]) path.insert(path.begin(), j);
    std::vector<int32_t> pids, committed;
    for (int32_t j : path) {
      pids.push_back(node_pid[j]);
      committed.push_back(node_token[j]);
    }
    if (rng.Below(2) == 0) {
      pids.push_back(-1);
      committed.push_back(token());
    }
    runner.EndCycle(pids);
    committed.push_back(token());  // the bonus
    commit(committed);
  }
  EXPECT_GE(checked, 20);
}

TEST(DraftRunner, RootLogitsFollowCommitsBitwise) {
  CheckRunnerFollowsCommits(1, 21);
  CheckRunnerFollowsCommits(2, 22);
}

TEST(DraftRunner, ShortlistColumnsFollowCommitsBitwise) {
  CheckRunnerFollowsCommits(2, 23, 128);
  CheckRunnerFollowsCommits(1, 24, 496);  // (more columns than the run sees tokens)
}

TEST(DraftRunner, ShortlistDefaultsToAQuarterOfALargeVocabulary) {
  Context ctx(Tiny(), 64, nullptr);
  EXPECT_EQ(DraftRunner(ctx).shortlist(), 0) << "512 tokens: the whole vocabulary";
  EXPECT_EQ(DraftRunner(ctx, 100).shortlist(), 112) << "whole tiles of 16";
  EXPECT_EQ(DraftRunner(ctx, 512).shortlist(), 0);
  EXPECT_EQ(DraftRunner(ctx, 0).shortlist(), 0);
}

TEST(DraftRunner, NoRoomMeansNoPassNotAnError) {
  const Model& m = Tiny();
  Context ctx(m, 32, nullptr);
  DraftRunner runner(ctx);
  std::vector<int32_t> prompt(30, 5);
  prompt[0] = 1;
  runner.Begin(prompt);
  runner.ObservePrefill(prompt, 0, 30, nullptr);
  runner.Commit(std::vector<int32_t>{7});
  DraftWork work;
  ASSERT_TRUE(runner.BeginCycle(&work));
  EXPECT_EQ(runner.room(), 1);
  const std::vector<int32_t> two = {8, 9}, parents = {runner.root_pid(), runner.root_pid()};
  EXPECT_EQ(runner.Score(two, parents, &work), -1);
  EXPECT_EQ(work.passes, 1);
  EXPECT_EQ(runner.Score(std::span<const int32_t>(two.data(), 1),
                         std::span<const int32_t>(parents.data(), 1), &work),
            runner.root_pid() + 1);
  runner.EndCycle(std::vector<int32_t>{runner.root_pid() + 1});
  EXPECT_EQ(ctx.n_past(), 32);
}

}  // namespace
}  // namespace goose
