#include "method/acceptance_tracker.h"

#include <algorithm>
#include <vector>

namespace goose {

namespace {
constexpr double kPriorWeight = 4.0;
// Before any measurement: a consensus match is trusted more than a plain one, and a branch
// candidate is worth about half its table score.
constexpr double kSpinePrior[2] = {0.8, 0.6};
constexpr double kBranchPriorScale = 0.5;
}  // namespace

AcceptanceTracker::AcceptanceTracker() { Recompute(); }

void AcceptanceTracker::Update(const DraftTree& tree, const AcceptResult& result, int cls) {
  const int n = tree.size();
  std::vector<uint8_t> on_path(n, 0), has_spine_child(n, 0);
  on_path[0] = 1;
  for (int32_t v : result.path) on_path[v] = 1;
  for (int i = 1; i < n; ++i) {
    if (tree.source[i] == NodeSource::kSpine) has_spine_child[tree.parents[i]] = 1;
  }
  for (int i = 1; i < n; ++i) {
    if (!on_path[tree.parents[i]]) continue;
    if (tree.source[i] == NodeSource::kSpine) {
      const int d = tree.depth[i] < kD ? tree.depth[i] : kD;
      ++spine_reached_[cls][d];
      spine_accepted_[cls][d] += on_path[i];
    } else if (tree.source[i] == NodeSource::kBranch) {
      const int s = has_spine_child[tree.parents[i]];
      const int b = EdgeAcceptance::ScoreBin(tree.score[i]);
      const int tier = std::min<int>(tree.tier[i], EdgeAcceptance::kTiers - 1);
      ++branch_reached_[s][tier][b];
      branch_accepted_[s][tier][b] += on_path[i];
    }
  }
  Recompute();
}

void AcceptanceTracker::Recompute() {
  for (int c = 0; c < 2; ++c) {
    double prior = kSpinePrior[c];
    model_.spine[c][0] = prior;
    for (int d = 1; d <= kD; ++d) {
      const double p = (spine_accepted_[c][d] + kPriorWeight * prior) /
                       (spine_reached_[c][d] + kPriorWeight);
      model_.spine[c][d] = p;
      prior = p;
    }
  }
  for (int s = 0; s < 2; ++s) {
    for (int t = 0; t < EdgeAcceptance::kTiers; ++t) {
      for (int b = 0; b < kBins; ++b) {
        const double prior = kBranchPriorScale * (b + 0.5) / kBins;
        model_.branch[s][t][b] = (branch_accepted_[s][t][b] + kPriorWeight * prior) /
                                 (branch_reached_[s][t][b] + kPriorWeight);
      }
    }
  }
}

}  // namespace goose
