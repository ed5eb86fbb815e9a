// Best-first spine tree: goose's tuned GOOSE builder (`--spec goose` without the paper preset).
//
// Idea. Algorithm 1 (docs/methods.md §3.6.2) fixes the spine/branch split by a confidence
// formula; on the tiny model that formula lays 90-node spines of which 1-2 tokens are accepted
// (docs/methods.md §8). The method: docs/methods.md §3.7.
// Here every candidate node gets a value = P(its whole root path is accepted), the product of
// per-edge acceptance probabilities *measured online* (EdgeAcceptance), and the tree is the
// `budget` highest-value candidates. Because a child's value never exceeds its parent's, the
// top-B set is always a connected tree, and under the independence model it maximizes the
// expected accepted tokens 1 + sum(values) (the same argument as Sequoia's DP, but per cycle,
// per source and per depth). Anisotropy then emerges from measurement: a trusted match gets a
// deep spine, a doubtful one a short spine with wide branch fans.
//
// Candidates of a node: the next spine token (a spine node, or the root, continuing the match),
// the table successors of the node's (parent, token) bigram, and the unigram row's other tokens
// (minus the spine token; each token once).
// Node order: best-first (parents before children); ties broken by creation order. Branch
// nodes carry rank = position in their list and tier = EdgeAcceptance's list tier.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "draft/transition_table.h"
#include "tree/draft_tree.h"

namespace goose {

struct EdgeAcceptance {
  static constexpr int kMaxSpineDepth = 128;
  static constexpr int kScoreBins = 10;
  // Spine classes: a consensus match, another match, the request's prediction.
  static constexpr int kSpineClasses = 3;
  static constexpr int kPredictionClass = 2;
  // spine[cls][d]: P(spine node at depth d accepted | parent reached) for spine class cls,
  // d = 1..kMaxSpineDepth (index 0 unused).
  double spine[kSpineClasses][kMaxSpineDepth + 1];
  // branch[has_spine_sibling][tier][bin]: P(branch candidate accepted | parent reached), by table
  // score bin (score in [bin/10, (bin+1)/10)), split by whether the parent also drafts a spine
  // child and by list tier: 0 = the (prev, tok) bigram list, 1 = unigram-row tokens missing
  // from that bigram list, 2 = the unigram row when no bigram is known.
  static constexpr int kTiers = 3;
  double branch[2][kTiers][kScoreBins];

  static int ScoreBin(float score);
};

struct BestFirstParams {
  int budget = 60;                               // nodes incl. root
  int max_depth = 64;                            // deepest node depth
  int spine_class = 1;                           // EdgeAcceptance class of this cycle's spine
  NodeSource spine_source = NodeSource::kSpine;  // kPrediction: the spine is the prediction's
  bool unigram_extras = true;  // draft tier-1 candidates (unigram tokens missing from the bigram)
  // Sizing by cost (--budget auto): the verify cost of the sizes the tree may take, the
  // calibration of the values of the i-th node added against what such nodes were accepted,
  // and the run's rate; the tree is cut as tree/size_cut.h says. Null: grow to `budget`.
  const std::vector<CostSample>* cost = nullptr;
  std::span<const double> node_scale;
  double rate = 0;  // tokens per second the run achieves (budget/cycle_rate.h); 0: not known
};

// `values` (optional) receives each node's value (root = 1), in node order.
DraftTree BuildBestFirstTree(int32_t anchor, int32_t anchor_prev, std::span<const int32_t> spine,
                             const EdgeAcceptance& model, const TransitionTable& table,
                             const BestFirstParams& params, std::vector<double>* values = nullptr);

}  // namespace goose
