// SpecStats: per-cycle speculation counters (docs/methods.md §6, convention 13).
//
// Contract
// - AccumulateStats(tree, route, result, stats) adds one verified cycle: its route (as the
//   method that built the tree reports it), drafted / reached / accepted nodes per source, per depth and per
//   rank, committed and bonus tokens, stops and spine continuations.
// - "Reached" = the node's parent is on the accepted path (the root counts as accepted), so
//   accepted[s] / reached[s] is the per-reached-node acceptance rate of source s.
// - Per-depth buckets clamp at kMaxDepth, per-rank buckets at kMaxRank - 1 (last = "or more").
// - tree_nodes[n]: passes that scored a tree of n nodes (root included; clamped at
//   kMaxTreeNodes), so a cost model can charge every pass the size it actually had.
// - Branch per-rank acceptance p_t(k) (Sequoia's, docs/methods.md §3.5) =
//   accepted_rank[kBranch][k] / branch_parents_reached (path nodes, root included, with at
//   least one branch child).
// - Chain-route / PLD nodes are tagged kChain and so never mix into the spine/branch rates.
// - The spine EMA (docs/methods.md §3.6.3) is not kept here; the paper GOOSE drafter owns it.
// - Plain data; Merge() adds another instance (per request -> global).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tree/draft_tree.h"
#include "verify/verifier.h"

namespace goose {

enum class Route : uint8_t { kAr = 0, kChain = 1, kBranchTree = 2, kSpineTree = 3 };
constexpr int kNumRoutes = 4;
const char* RouteName(Route r);

struct SpecStats {
  static constexpr int kMaxDepth = 128;
  static constexpr int kMaxRank = 16;
  static constexpr int kMaxTreeNodes = 128;

  int64_t cycles = 0;
  int64_t route_cycles[kNumRoutes] = {};
  int64_t committed = 0;  // accepted + bonus tokens
  int64_t bonus = 0;
  int64_t stopped = 0;  // cycles that committed a stop token
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

  void Merge(const SpecStats& other);
  // Every counter times `factor` (rounded down): older evidence counts less (persisted history).
  void Scale(double factor);
  // committed / cycles (0 when no cycle).
  double TokensPerCycle() const;
  // tree_nodes_total / cycles (0 when no cycle).
  double MeanTreeNodes() const;
  // One-line human summary for logs.
  std::string Summary() const;
};

void AccumulateStats(const DraftTree& tree, Route route, const AcceptResult& result,
                     SpecStats* stats);

// What the cycles run at each budget chosen by --budget auto delivered: the cycles, the tokens
// they committed and the sizes their trees came out at (a tree may stop short of its budget).
// Plain data, kept with a variant's learned state and persisted with it.
struct BudgetHistory {
  struct Entry {
    int64_t cycles = 0;
    double committed = 0;
    std::vector<int64_t> tree_nodes;  // [n]: cycles whose tree had n nodes (n <= kMaxTreeNodes)
  };
  std::map<int, Entry> at;  // by budget
  // The chooser's calibration of its acceptance model: over the cycles it predicted, the tokens
  // they committed and the tokens it had predicted.
  double calibration_committed = 0, calibration_predicted = 0;
  int64_t calibration_cycles = 0;

  void Record(int budget, int tree_nodes, int committed);
  void Scale(double factor);
};

}  // namespace goose
