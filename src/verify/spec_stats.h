// SpecStats: per-cycle speculation counters (docs/methods.md §6, convention 13).
//
// Contract
// - AccumulateStats(tree, route, result, stats) adds one verified cycle: its route (as the
//   method that built the tree reports it), drafted / reached / accepted nodes per source, per
//   depth and per rank, committed and bonus tokens, stops and spine continuations.
// - "Reached" = the node's parent is on the accepted path (the root counts as accepted), so
//   accepted[s] / reached[s] is the per-reached-node acceptance rate of source s.
// - Per-depth buckets clamp at kMaxDepth, per-rank buckets at kMaxRank - 1 (last = "or more").
// - tree_nodes[n]: passes that scored a tree of n nodes (root included; clamped at
//   kMaxTreeNodes), so a cost model can charge every pass the size it actually had.
// - Branch per-rank acceptance p_t(k) (Sequoia's, docs/methods.md §3.5) =
//   accepted_rank[kBranch][k] / branch_parents_reached (path nodes, root included, with at
//   least one branch child).
// - Chain-route / PLD nodes are tagged kChain and so never mix into the spine/branch rates.
// - Draft-model methods also report what drafting cost: per cycle a DraftWork (draft passes,
//   rows they scored, seconds, verify slots the pruned draft tree left free), added by
//   AccumulateDraftWork. What their trees hold is in drafted / reached / accepted by source.
// - The spine EMA (docs/methods.md §3.6.3) is not kept here; the paper GOOSE drafter owns it.
// - Plain data; Merge() adds another instance (per request -> global).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tree/draft_tree.h"
#include "verify/verifier.h"

namespace goose {

// kDraftTree: a draft model's tree (with grafted retrieval nodes, if any).
enum class Route : uint8_t {
  kAr = 0,
  kChain = 1,
  kBranchTree = 2,
  kSpineTree = 3,
  kDraftTree = 4,
};
constexpr int kNumRoutes = 5;
const char* RouteName(Route r);

// What a draft-model drafter spent on one cycle (Proposal::work); all zero for other methods.
struct DraftWork {
  int passes = 0;        // draft-model forward passes (the catch-up pass included)
  int rows = 0;          // tokens those passes scored
  double seconds = 0;    // wall time of drafting: the passes and choosing what to draft
  int pruned_slots = 0;  // verify slots the pruned draft tree left free (budget - 1 - its nodes)
};

struct SpecStats {
  static constexpr int kMaxDepth = 128;
  static constexpr int kMaxRank = 16;
  static constexpr int kMaxTreeNodes = 128;
  static constexpr int kMaxDraftPasses = 32;

  int64_t cycles = 0;
  int64_t route_cycles[kNumRoutes] = {};
  int64_t committed = 0;  // accepted + bonus tokens
  int64_t bonus = 0;
  int64_t stopped = 0;                         // cycles that committed a stop token
  int64_t tree_nodes[kMaxTreeNodes + 1] = {};  // passes by scored tree size (see above)
  int64_t tree_nodes_total = 0;                // sum of scored tree sizes

  // Indexed by NodeSource; the root is never counted as drafted.
  int64_t drafted[kNumSources] = {};
  int64_t reached[kNumSources] = {};
  int64_t accepted[kNumSources] = {};
  int64_t drafted_depth[kNumSources][kMaxDepth + 1] = {};
  int64_t reached_depth[kNumSources][kMaxDepth + 1] = {};
  int64_t accepted_depth[kNumSources][kMaxDepth + 1] = {};
  int64_t reached_rank[kNumSources][kMaxRank] = {};
  int64_t accepted_rank[kNumSources][kMaxRank] = {};
  int64_t branch_parents_reached = 0;

  // Cycles whose accepted path holds spine and branch nodes, and the branch tokens they won.
  int64_t spine_continuation_cycles = 0;
  int64_t spine_continuation_tokens = 0;

  // Draft-model work (DraftWork), over the cycles a draft model drafted (draft_cycles).
  int64_t draft_cycles = 0;
  int64_t draft_passes = 0;
  int64_t draft_rows = 0;
  double draft_seconds = 0;
  int64_t pruned_slots = 0;
  int64_t draft_passes_cycles[kMaxDraftPasses + 1] = {};  // cycles by draft passes (clamped)

  void Merge(const SpecStats& other);
  // Every counter times `factor` (rounded down): older evidence counts less (persisted history).
  void Scale(double factor);
  // committed / cycles (0 when no cycle).
  double TokensPerCycle() const;
  // tree_nodes_total / cycles (0 when no cycle).
  double MeanTreeNodes() const;
  // One-line human summary for logs: routes, and accepted / reached / drafted per source.
  std::string Summary() const;
};

void AccumulateStats(const DraftTree& tree, Route route, const AcceptResult& result,
                     SpecStats* stats);
// Adds one cycle's draft-model work; a cycle without draft passes adds nothing.
void AccumulateDraftWork(const DraftWork& work, SpecStats* stats);

}  // namespace goose
