// TreeGrower (draft-tree, +prune, graft, graft+paper) driven through real cycles: a target
// context scores each tree, the greedy walk accepts, the grower observes and commits. With the
// target itself as the draft model every reached top-1 draft node must be accepted (the draft
// cache follows the commits bit for bit); trees stay valid and within budget; pruning drafts
// fewer passes than the dense tree; graft+paper keeps the pruned draft tree and only fills the
// slots it left; graft fills its budget with retrieved tokens on repetitive text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "method/graft_tree.h"
#include "sample/sampler.h"
#include "util/rng.h"
#include "verify/verifier.h"
#include "weak_drafter.h"

namespace goose {
namespace {

struct CycleLog {
  Proposal proposal;
  AcceptResult accepted;
};

// Runs `cycles` greedy cycles of a grower over `prompt` with `target` scoring; returns them.
std::vector<CycleLog> RunCycles(GrowMode mode, const Model& target, const Model& draft,
                                const std::vector<int32_t>& prompt, int budget, int cycles,
                                DraftLearned* learned, const GrowParams& params = {}) {
  Context tctx(target, 512, nullptr), dctx(draft, 512, nullptr);
  const bool graft = mode == GrowMode::kGraft || mode == GrowMode::kGraftPaper;
  if (graft && !learned->table) {
    learned->table = std::make_unique<TransitionTable>(target.config().n_vocab);
  }
  TreeGrower grower(mode, params, dctx, *learned, graft ? learned->table.get() : nullptr);
  grower.Begin(prompt);
  EXPECT_TRUE(tctx.ForwardChain(prompt).ok());
  grower.ObservePrefill(prompt, 0, static_cast<int>(prompt.size()));
  const int nv = target.config().n_vocab;
  const int32_t first = Argmax(tctx.logits(static_cast<int>(prompt.size()) - 1), nv);
  tctx.KeepAll();
  grower.Commit(std::vector<int32_t>{first});
  CycleInput in;
  in.anchor = first;
  in.anchor_prev = prompt.back();
  in.budget = budget;
  std::vector<CycleLog> log;
  for (int c = 0; c < cycles && tctx.n_past() + budget + 8 < 512; ++c) {
    CycleLog l;
    l.proposal = grower.Propose(in);
    const DraftTree& t = l.proposal.tree;
    EXPECT_EQ(t.CheckInvariants(), "");
    EXPECT_LE(t.size(), budget);
    EXPECT_EQ(t.tokens[0], in.anchor);
    EXPECT_TRUE(tctx.Forward(t.tokens, t.parents).ok());
    l.accepted = WalkTree(
        t, [&](int node) { return Argmax(tctx.logits(node), nv); }, [](int32_t) { return false; });
    grower.Observe(in, l.proposal, l.accepted);
    std::vector<int32_t> keep = {0};
    keep.insert(keep.end(), l.accepted.path.begin(), l.accepted.path.end());
    tctx.KeepPath(keep);
    grower.Commit(l.accepted.tokens);
    in.anchor_prev = l.accepted.path.empty() ? in.anchor : t.tokens[l.accepted.path.back()];
    in.anchor = l.accepted.bonus;
    log.push_back(std::move(l));
  }
  return log;
}

std::vector<int32_t> StoryPrompt(const Model& m) {
  return m.tokenizer().Encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends. One day, Lily saw a big red ball.",
      true);
}

std::vector<int32_t> RepetitivePrompt(const Model& m) {
  return m.tokenizer().Encode(
      "Tom has a red ball and a blue car. Tom has a red ball and a blue car. Tom has a red ball "
      "and a blue car. Tom has a red",
      true);
}

// Same model drafting: its top-1 token at any node is the target's greedy token there.
TEST(TreeGrower, WithTheTargetAsDraftEveryReachedTopDraftNodeIsAccepted) {
  const Model& m = Tiny();
  for (GrowMode mode :
       {GrowMode::kDense, GrowMode::kPrune, GrowMode::kGraft, GrowMode::kGraftPaper}) {
    SCOPED_TRACE(static_cast<int>(mode));
    DraftLearned learned;
    int64_t reached_top = 0, committed = 0;
    const auto log = RunCycles(mode, m, m, StoryPrompt(m), 16, 30, &learned);
    ASSERT_FALSE(log.empty());
    for (const CycleLog& l : log) {
      const DraftTree& t = l.proposal.tree;
      std::vector<uint8_t> on_path(t.size(), 0);
      on_path[0] = 1;
      for (int v : l.accepted.path) on_path[v] = 1;
      for (int i = 1; i < t.size(); ++i) {
        if (t.source[i] != NodeSource::kDraft || t.rank[i] != 0 || !on_path[t.parents[i]]) continue;
        ++reached_top;
        EXPECT_TRUE(on_path[i]) << "a reached top-1 draft token was rejected: the draft cache "
                                   "does not hold what the target committed";
      }
      committed += static_cast<int64_t>(l.accepted.tokens.size());
    }
    EXPECT_GT(reached_top, 30);
    EXPECT_GT(static_cast<double>(committed) / log.size(), 2.0);
  }
}

TEST(TreeGrower, DenseTreeIsFullAndDraftsItsFixedDepth) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  DraftLearned learned;
  GrowParams params;
  const auto log =
      RunCycles(GrowMode::kDense, Tiny(), *weak, StoryPrompt(Tiny()), 24, 20, &learned, params);
  for (const CycleLog& l : log) {
    EXPECT_EQ(l.proposal.tree.size(), 24);
    EXPECT_EQ(l.proposal.work.passes, params.dense_depth);
    EXPECT_EQ(l.proposal.route, Route::kDraftTree);
    EXPECT_EQ(l.proposal.work.pruned_slots, 0);
    EXPECT_GT(l.proposal.work.seconds, 0.0);
  }
}

TEST(TreeGrower, PruningDraftsFewerPassesAndReportsTheSlotsItFreed) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  DraftLearned dense_learned, prune_learned;
  const auto dense =
      RunCycles(GrowMode::kDense, Tiny(), *weak, StoryPrompt(Tiny()), 24, 40, &dense_learned);
  const auto pruned =
      RunCycles(GrowMode::kPrune, Tiny(), *weak, StoryPrompt(Tiny()), 24, 40, &prune_learned);
  int64_t dense_passes = 0, pruned_passes = 0, freed = 0;
  for (const CycleLog& l : dense) dense_passes += l.proposal.work.passes;
  for (const CycleLog& l : pruned) {
    pruned_passes += l.proposal.work.passes;
    int draft_nodes = 0;
    for (int i = 1; i < l.proposal.tree.size(); ++i) {
      draft_nodes += l.proposal.tree.source[i] == NodeSource::kDraft;
    }
    EXPECT_EQ(draft_nodes, l.proposal.tree.size() - 1) << "prune grafts nothing";
    EXPECT_EQ(l.proposal.work.pruned_slots, 24 - 1 - draft_nodes);
    freed += l.proposal.work.pruned_slots;
  }
  EXPECT_LT(static_cast<double>(pruned_passes) / pruned.size(),
            static_cast<double>(dense_passes) / dense.size());
  EXPECT_GT(freed, 0) << "the weak drafter's low-confidence branches are cut";
}

// graft+paper = the pruned draft tree, then grafts in the slots left. With the same learned
// state (fresh), its first cycle's draft part is exactly the prune tree.
TEST(TreeGrower, PaperGraftKeepsThePrunedDraftTreeAndFillsTheRest) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  const std::vector<int32_t> prompt = RepetitivePrompt(Tiny());
  DraftLearned prune_learned, paper_learned;
  const auto pruned = RunCycles(GrowMode::kPrune, Tiny(), *weak, prompt, 48, 1, &prune_learned);
  const auto paper = RunCycles(GrowMode::kGraftPaper, Tiny(), *weak, prompt, 48, 1, &paper_learned);
  ASSERT_EQ(pruned.size(), 1u);
  ASSERT_EQ(paper.size(), 1u);
  const DraftTree& a = pruned[0].proposal.tree;
  const DraftTree& b = paper[0].proposal.tree;
  // b's first a.size() nodes are a's (the fixed draft tree comes first, in the same order).
  ASSERT_GE(b.size(), a.size());
  for (int i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b.tokens[i], a.tokens[i]) << i;
    EXPECT_EQ(b.parents[i], a.parents[i]) << i;
    EXPECT_EQ(b.source[i], a.source[i]) << i;
  }
  EXPECT_EQ(pruned[0].proposal.work.passes, paper[0].proposal.work.passes);
  int grafted = 0;
  for (int i = a.size(); i < b.size(); ++i) {
    EXPECT_NE(b.source[i], NodeSource::kDraft);
    ++grafted;
  }
  EXPECT_GT(grafted, 0) << "the repeated sentence's continuation is grafted (draft tree of "
                        << a.size() << " nodes)";
  EXPECT_LT(a.size(), 48) << "the pruned draft tree leaves slots free";
}

TEST(TreeGrower, GraftFillsItsBudgetWithRetrievedTokensOnRepetitiveText) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  DraftLearned learned;
  const auto log =
      RunCycles(GrowMode::kGraft, Tiny(), *weak, RepetitivePrompt(Tiny()), 16, 30, &learned);
  std::map<NodeSource, int64_t> drafted, accepted;
  for (const CycleLog& l : log) {
    const DraftTree& t = l.proposal.tree;
    for (int i = 1; i < t.size(); ++i) ++drafted[t.source[i]];
    for (int v : l.accepted.path) ++accepted[t.source[v]];
  }
  EXPECT_GT(drafted[NodeSource::kGraftContext], 0);
  EXPECT_GT(accepted[NodeSource::kGraftContext], 0);
  EXPECT_GT(drafted[NodeSource::kDraft], 0);
}

// What a draft-model variant learned survives a save and load bit for bit (the next process
// starts where this one stopped), and a damaged state is refused whole.
TEST(DraftLearned, StateRoundTripsAndDamageIsRefused) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  DraftLearned learned;
  RunCycles(GrowMode::kGraft, Tiny(), *weak, RepetitivePrompt(Tiny()), 8, 20, &learned);
  const std::string saved = learned.SaveExtra();
  ASSERT_EQ(saved.size(), GraftAcceptance::kBytes + DraftTiming::kBytes + ValueCalibration::kBytes);
  EXPECT_NE(saved, DraftLearned().SaveExtra()) << "20 cycles learned nothing";
  DraftLearned loaded;
  ASSERT_TRUE(loaded.LoadExtra(saved).ok());
  EXPECT_EQ(loaded.SaveExtra(), saved);
  EXPECT_EQ(loaded.acceptance.DraftTop(), learned.acceptance.DraftTop());
  EXPECT_EQ(loaded.timing.TokensPerSecond(), learned.timing.TokensPerSecond());
  // An empty state (the learned cache's format version 2 always writes one): an error.
  DraftLearned fresh;
  EXPECT_FALSE(fresh.LoadExtra("").ok());
  EXPECT_EQ(fresh.SaveExtra(), DraftLearned().SaveExtra());
  // Truncated, a count above its reached count or near overflow, a NaN time: errors, the state
  // as it was.
  std::string accepted_above = saved;
  const int64_t big = int64_t{1} << 40;
  std::memcpy(accepted_above.data() + sizeof(int64_t), &big, sizeof(big));  // first accepted
  std::string huge_reached = saved;
  const int64_t huge = INT64_MAX;  // one more reached node would overflow
  std::memcpy(huge_reached.data(), &huge, sizeof(huge));
  std::string nan_time = saved;
  const double nan = std::nan("");
  std::memcpy(nan_time.data() + GraftAcceptance::kBytes, &nan, sizeof(nan));
  for (const std::string& bad :
       {saved.substr(0, saved.size() - 1), accepted_above, huge_reached, nan_time}) {
    DraftLearned d;
    EXPECT_FALSE(d.LoadExtra(bad).ok());
    EXPECT_EQ(d.SaveExtra(), DraftLearned().SaveExtra());
  }
  // Decay weighs the counts down, never an accepted count above its reached one.
  loaded.Decay(0.5);
  EXPECT_NE(loaded.SaveExtra(), saved);
  DraftLearned again;
  EXPECT_TRUE(again.LoadExtra(loaded.SaveExtra()).ok());
}

TEST(TreeGrower, BudgetOneDraftsNothingAndForeignProposalsAreIgnored) {
  const Model& m = Tiny();
  Context dctx(m, 128, nullptr);
  DraftLearned learned;
  TreeGrower grower(GrowMode::kPrune, GrowParams{}, dctx, learned, nullptr);
  const std::vector<int32_t> prompt = StoryPrompt(m);
  grower.Begin(prompt);
  grower.ObservePrefill(prompt, 0, static_cast<int>(prompt.size()));
  grower.Commit(std::vector<int32_t>{42});
  CycleInput in;
  in.anchor = 42;
  in.anchor_prev = prompt.back();
  in.budget = 1;
  const Proposal p = grower.Propose(in);
  EXPECT_EQ(p.tree.size(), 1);
  EXPECT_EQ(p.work.passes, 0);
  AcceptResult acc;
  acc.bonus = 7;
  acc.tokens = {7};
  grower.Observe(in, p, acc);  // nothing open: no-op
  EXPECT_EQ(dctx.n_past(), static_cast<int>(prompt.size()));
}

}  // namespace
}  // namespace goose
