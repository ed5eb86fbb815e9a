// TreeGrower: the draft-model tree drafters (draft-tree, draft-tree+prune, graft, graft+paper;
// docs/methods.md §3.9). One candidate pool per cycle: the root (the anchor, scored by the
// catch-up pass), the draft model's top-k children of every node it scored, and for the graft
// modes the retrieved children (the context match's continuation, ContextMatcher, and the
// transition table's successors, TransitionTable) of every node the tree takes. Siblings are
// one node per token: a token several sources propose is one node that remembers each.
//
// Modes
// - kDense (EAGLE-2): value = product of the draft's probabilities along the path; the root
//   pass, then dense_depth - 1 passes each scoring the dense_width best nodes of the newest
//   depth; the tree is the `budget` best nodes.
// - kPrune (dynamic-depth pruning): value = P(path accepted) from acceptance measured online
//   per draft-probability bin (GraftAcceptance), i.e. the draft's confidence calibrated. After
//   each pass the best tree is chosen; a node under `floor` takes no slot (the branch is cut),
//   and a tree node not yet scored is worth scoring only if its expected best child,
//   value x P(top child accepted), beats the weakest node it would displace (and the floor).
//   Drafting stops when no node is worth it, or when the pass's expected gain in tokens is worth
//   less than its measured time at the measured tokens/s.
// - kGraft: kPrune where every node's retrieved children compete with the draft's in one
//   best-first tree over the three sources, valued by acceptance measured per source, depth
//   and confidence, and the tree takes `budget` nodes whatever their value (the floor only
//   decides what is worth drafting). Retrieval thus also decides when drafting stops (a trusted
//   match fills the slots, and no draft pass beats it), and a draft pass may score retrieved nodes
//   (a whole match continuation in one pass) to draft below them. The root pass itself (the draft's
//   catch-up) scores the best retrieved guesses below the root too (up to root_guesses, by the
//   same worth rule), so when the draft agrees with them it has drafted two levels in one pass.
// - kGraftPaper (the paper's sequential prune-then-graft): the kPrune tree first; then the
//   slots it left free are filled best-first, whatever their value, with the retrieved tree
//   rooted at the root (merged where it proposes the draft tree's tokens, going on below them)
//   and retrieved candidates below the leaves where the draft stopped.
// --budget auto (CycleInput::cost set; all modes but kDense, whose values are uncalibrated draft
// probabilities): the pruning modes' values are P(path accepted), so a tree of the best s nodes
// is expected to commit 1 + the sum of their values (each scaled by the ValueCalibration of
// its place in the tree). The tree is cut at the measured verify size
// s that maximises that over (verify cost of s + the draft seconds of the cycle), while drafting
// (what a pass must beat) and at the end; the draft depth follows from the pass rule above,
// which weighs each pass's measured time against the measured tokens per second.
// Node order: selection order (parents first). DraftWork: passes, rows, seconds and
// pruned_slots = budget - 1 - draft nodes kept (under --budget auto: the chosen size's slots).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "budget/value_calibration.h"
#include "draft/context_matcher.h"
#include "draft/prediction_matcher.h"
#include "draft/transition_table.h"
#include "method/draft_model.h"
#include "method/graft_acceptance.h"
#include "method/method.h"
#include "tree/size_cut.h"

namespace goose {

enum class GrowMode : uint8_t { kDense, kPrune, kGraft, kGraftPaper };

struct GrowParams {
  int top_k = 8;        // draft children per scored node
  int dense_depth = 6;  // kDense: draft passes (root pass included)
  int dense_width = 8;  // kDense: nodes scored per pass
  int max_passes = 12;  // pruning modes: draft passes per cycle, root pass included
  int max_rows = 16;    // pruning modes: nodes one pass scores
  double floor = 0.05;  // pruning modes: a node worth less takes no slot
  int max_depth = 32;
  int max_fresh_matches = 6;  // graft modes: context look-ups below the root per cycle
  int root_guesses = 4;       // kGraft: retrieved nodes scored in the root pass
  int shortlist = DraftRunner::kDefaultShortlist;  // the draft's logit columns (DraftRunner)
};

// What a draft-model variant learns across requests besides its statistics (and table), kept
// across runs like tuned GOOSE's (one process per prompt started every run cold: graft --budget
// auto then cut its trees to 4 nodes at 1.85x plain, where one process over the same prompts
// learned to ~2.9 tokens a cycle).
struct DraftLearned : Learned {
  GraftAcceptance acceptance;
  DraftTiming timing;
  ValueCalibration calibration;  // pruning modes: the values against what was accepted

  // acceptance, timing, calibration.
  std::string SaveExtra() const override;
  Status LoadExtra(std::string_view bytes) override;
  void Decay(double factor) override;
};

class TreeGrower {
 public:
  // `table` may be null (no retrieval then: the non-graft modes).
  TreeGrower(GrowMode mode, const GrowParams& params, Context& draft_ctx, DraftLearned& learned,
             const TransitionTable* table);

  void Begin(std::span<const int32_t> prompt);
  // The request's prediction: while the output follows it, it is the root's context match.
  void SetPrediction(std::span<const int32_t> prediction) {
    prediction_ = PredictionMatcher(prediction);
  }
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1);
  void Commit(std::span<const int32_t> tokens);
  Proposal Propose(const CycleInput& in);
  // Learns from a proposal of its own (any other, such as the engine's plain step, is ignored).
  void Observe(const CycleInput& in, const Proposal& p, const AcceptResult& accepted);

 private:
  struct Node {
    int32_t token = -1;
    int parent = -1;
    int depth = 0;
    int pid = -1;      // draft pending id once the draft scored it
    double cum_p = 1;  // product of draft probabilities on the path (kDense's value)
    float draft_p = 0;
    int draft_rank = -1;               // >= 0: the draft proposed it
    int ctx_class = 0, ctx_depth = 0;  // ctx_depth >= 1: a context match proposed it
    int match = -1, match_pos = -1;    // its match continuation and its index there
    int table_tier = -1;               // >= 0: the table proposed it
    float table_score = 0;
    int table_rank = 0;
    bool retrieval_done = false;  // its retrieved children are in the pool
    std::vector<int> children;
  };
  enum class Pick : uint8_t { kDraftOnly, kAll, kGraftFill };

  bool retrieves() const;  // a graft mode
  int AddChild(int parent, int32_t token);
  void AddDraftChildren(int u);
  void ExpandRetrieval(int u, int32_t anchor_prev);
  double Edge(const Node& n) const;
  bool Retrieved(const Node& n) const { return n.ctx_depth > 0 || n.table_tier >= 0; }
  // The draft scored n's parent and did not propose n.
  bool Overruled(const Node& n) const { return n.draft_rank < 0 && pool_[n.parent].pid >= 0; }
  // Best-first selection of up to `budget` nodes (root first); value_ is filled for them.
  // kGraftFill keeps `fixed` (a kDraftOnly selection) and adds retrieved nodes below the root
  // and its leaves. Under --budget auto (cut_cost_, without `fixed`) it may end earlier, where
  // no larger size of the curve could pay more (CostSize then cuts it as it would the whole
  // selection); `cut`, if given, says whether it did.
  std::vector<int> Select(int budget, Pick pick, int32_t anchor_prev,
                          const std::vector<int>* fixed = nullptr, bool* cut = nullptr);
  // One draft pass over `nodes` (parents first); false when the draft could not score them.
  bool Score(const std::vector<int>& nodes, DraftWork* work);
  // --budget auto (CycleInput::cost): the size of the prefix of `sel` (parents first) among the
  // curve's measured sizes that maximises SizeScore (tree/size_cut.h) of its expected
  // tokens, 1 + the sum of its values, and its seconds, its verify cost + the draft seconds
  // spent this cycle, at the rate of the cycles so far; 1 if none pays.
  size_t CostSize(const std::vector<int>& sel, const std::vector<CostSample>& cost,
                  double draft_seconds) const;
  // kGraft: the retrieved nodes below the root worth scoring in the root pass (parents first).
  std::vector<int> RootGuesses(const CycleInput& in);
  void GrowDense(const CycleInput& in, DraftWork* work);
  void GrowPruned(const CycleInput& in, Pick pick, DraftWork* work);

  GrowMode mode_;
  GrowParams params_;
  DraftRunner runner_;
  DraftLearned& learned_;
  const TransitionTable* table_;
  ContextMatcher matcher_;
  PredictionMatcher prediction_;
  std::vector<Node> pool_;
  std::vector<double> value_;
  std::vector<std::vector<int32_t>> matches_;
  std::vector<int> match_class_;
  int fresh_matches_ = 0;
  const std::vector<CostSample>* cut_cost_ = nullptr;  // this cycle's curve (kPrune, kGraft)
  double cut_rate_ = 0;  // the cut's rate: CycleInput::rate, else the timed cycles'

  // The open cycle: tree node -> pool node, and when Propose began.
  std::vector<int> tree_pool_;
  bool cycle_open_ = false;
  double cycle_start_ = 0;
  std::vector<DraftToken> topk_;
};

}  // namespace goose
