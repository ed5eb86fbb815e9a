// SpecStats accumulation (see spec_stats.h).
#include "verify/spec_stats.h"

#include <algorithm>
#include <vector>

#include "util/check.h"
#include "util/status.h"

namespace goose {

const char* RouteName(Route r) {
  switch (r) {
    case Route::kAr:
      return "ar";
    case Route::kChain:
      return "chain";
    case Route::kBranchTree:
      return "branch_tree";
    case Route::kSpineTree:
      return "spine_tree";
    case Route::kDraftTree:
      return "draft_tree";
  }
  return "?";
}

void AccumulateStats(const DraftTree& tree, Route route, const AcceptResult& result,
                     SpecStats* stats) {
  const int n = tree.size();
  GOOSE_CHECK(stats != nullptr && n >= 1);
  ++stats->cycles;
  ++stats->route_cycles[static_cast<int>(route)];
  stats->committed += static_cast<int64_t>(result.tokens.size());
  if (result.bonus >= 0) ++stats->bonus;
  if (result.stopped) ++stats->stopped;
  ++stats->tree_nodes[std::min(n, SpecStats::kMaxTreeNodes)];
  stats->tree_nodes_total += n;

  std::vector<uint8_t> on_path(n, 0);
  on_path[0] = 1;
  for (int v : result.path) {
    GOOSE_CHECK(v > 0 && v < n);
    on_path[v] = 1;
  }
  std::vector<uint8_t> has_branch_child(n, 0);
  const bool have_rank = static_cast<int>(tree.rank.size()) == n;
  for (int i = 1; i < n; ++i) {
    const int s = static_cast<int>(tree.source[i]);
    const int d = std::clamp(tree.depth[i], 0, SpecStats::kMaxDepth);
    const int r = std::clamp(have_rank ? tree.rank[i] : 0, 0, SpecStats::kMaxRank - 1);
    const int p = tree.parents[i];
    ++stats->drafted[s];
    ++stats->drafted_depth[s][d];
    if (tree.source[i] == NodeSource::kBranch) has_branch_child[p] = 1;
    if (!on_path[p]) continue;
    ++stats->reached[s];
    ++stats->reached_depth[s][d];
    ++stats->reached_rank[s][r];
    if (!on_path[i]) continue;
    ++stats->accepted[s];
    ++stats->accepted_depth[s][d];
    ++stats->accepted_rank[s][r];
  }
  for (int i = 0; i < n; ++i) stats->branch_parents_reached += on_path[i] && has_branch_child[i];
  if (result.spine_continuation) {
    ++stats->spine_continuation_cycles;
    for (int v : result.path) {
      stats->spine_continuation_tokens += tree.source[v] == NodeSource::kBranch;
    }
  }
}

void AccumulateDraftWork(const DraftWork& work, SpecStats* stats) {
  if (work.passes <= 0) return;
  ++stats->draft_cycles;
  stats->draft_passes += work.passes;
  stats->draft_rows += work.rows;
  stats->draft_seconds += work.seconds;
  stats->pruned_slots += work.pruned_slots;
  ++stats->draft_passes_cycles[std::min(work.passes, SpecStats::kMaxDraftPasses)];
}

void SpecStats::Merge(const SpecStats& o) {
  auto add = [](int64_t* dst, const int64_t* src, int count) {
    for (int i = 0; i < count; ++i) dst[i] += src[i];
  };
  cycles += o.cycles;
  add(route_cycles, o.route_cycles, kNumRoutes);
  committed += o.committed;
  bonus += o.bonus;
  stopped += o.stopped;
  add(tree_nodes, o.tree_nodes, kMaxTreeNodes + 1);
  tree_nodes_total += o.tree_nodes_total;
  add(drafted, o.drafted, kNumSources);
  add(reached, o.reached, kNumSources);
  add(accepted, o.accepted, kNumSources);
  add(&drafted_depth[0][0], &o.drafted_depth[0][0], kNumSources * (kMaxDepth + 1));
  add(&reached_depth[0][0], &o.reached_depth[0][0], kNumSources * (kMaxDepth + 1));
  add(&accepted_depth[0][0], &o.accepted_depth[0][0], kNumSources * (kMaxDepth + 1));
  add(&reached_rank[0][0], &o.reached_rank[0][0], kNumSources * kMaxRank);
  add(&accepted_rank[0][0], &o.accepted_rank[0][0], kNumSources * kMaxRank);
  branch_parents_reached += o.branch_parents_reached;
  spine_continuation_cycles += o.spine_continuation_cycles;
  spine_continuation_tokens += o.spine_continuation_tokens;
  draft_cycles += o.draft_cycles;
  draft_passes += o.draft_passes;
  draft_rows += o.draft_rows;
  draft_seconds += o.draft_seconds;
  pruned_slots += o.pruned_slots;
  add(draft_passes_cycles, o.draft_passes_cycles, kMaxDraftPasses + 1);
}

void SpecStats::Scale(double f) {
  auto scale = [f](int64_t* v, int count) {
    for (int i = 0; i < count; ++i) v[i] = static_cast<int64_t>(static_cast<double>(v[i]) * f);
  };
  scale(&cycles, 1);
  scale(route_cycles, kNumRoutes);
  scale(&committed, 1);
  scale(&bonus, 1);
  scale(&stopped, 1);
  scale(tree_nodes, kMaxTreeNodes + 1);
  scale(&tree_nodes_total, 1);
  scale(drafted, kNumSources);
  scale(reached, kNumSources);
  scale(accepted, kNumSources);
  scale(&drafted_depth[0][0], kNumSources * (kMaxDepth + 1));
  scale(&reached_depth[0][0], kNumSources * (kMaxDepth + 1));
  scale(&accepted_depth[0][0], kNumSources * (kMaxDepth + 1));
  scale(&reached_rank[0][0], kNumSources * kMaxRank);
  scale(&accepted_rank[0][0], kNumSources * kMaxRank);
  scale(&branch_parents_reached, 1);
  scale(&spine_continuation_cycles, 1);
  scale(&spine_continuation_tokens, 1);
}

double SpecStats::TokensPerCycle() const {
  return cycles > 0 ? static_cast<double>(committed) / static_cast<double>(cycles) : 0.0;
}

double SpecStats::MeanTreeNodes() const {
  return cycles > 0 ? static_cast<double>(tree_nodes_total) / static_cast<double>(cycles) : 0.0;
}

std::string SpecStats::Summary() const {
  std::string out = StrFormat("cycles %lld, tokens/cycle %.3f, routes",
                              static_cast<long long>(cycles), TokensPerCycle());
  for (int r = 0; r < kNumRoutes; ++r) {
    if (route_cycles[r] == 0) continue;
    out += StrFormat(" %s %lld", RouteName(static_cast<Route>(r)),
                     static_cast<long long>(route_cycles[r]));
  }
  out += " | accepted/reached/drafted:";
  for (int src = 1; src < kNumSources; ++src) {
    if (drafted[src] == 0) continue;
    out += StrFormat(" %s %lld/%lld/%lld (%.3f)", NodeSourceName(static_cast<NodeSource>(src)),
                     static_cast<long long>(accepted[src]), static_cast<long long>(reached[src]),
                     static_cast<long long>(drafted[src]),
                     reached[src] > 0 ? static_cast<double>(accepted[src]) / reached[src] : 0.0);
  }
  out += StrFormat(" | spine continuations %lld (+%lld tokens)",
                   static_cast<long long>(spine_continuation_cycles),
                   static_cast<long long>(spine_continuation_tokens));
  if (draft_cycles > 0) {
    const double n = static_cast<double>(draft_cycles);
    out += StrFormat(" | draft passes/cycle %.2f, %.2f ms/cycle, pruned slots/cycle %.2f",
                     draft_passes / n, 1e3 * draft_seconds / n, pruned_slots / n);
  }
  return out;
}

}  // namespace goose
