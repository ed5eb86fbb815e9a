#include "method/acceptance_tracker.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace goose {

namespace {
constexpr double kPriorWeight = 4.0;
// Before any measurement: a consensus match is trusted more than a plain one, a prediction
// (the user's own expected text) most, and a branch candidate is worth about half its table
// score.
constexpr double kSpinePrior[EdgeAcceptance::kSpineClasses] = {0.8, 0.6, 0.9};
constexpr double kBranchPriorScale = 0.5;
}  // namespace

AcceptanceTracker::AcceptanceTracker() { Recompute(); }

void AcceptanceTracker::Update(const DraftTree& tree, const AcceptResult& result, int cls) {
  const int n = tree.size();
  std::vector<uint8_t> on_path(n, 0), has_spine_child(n, 0);
  on_path[0] = 1;
  for (int32_t v : result.path) on_path[v] = 1;
  for (int i = 1; i < n; ++i) {
    if (IsSpineSource(tree.source[i])) has_spine_child[tree.parents[i]] = 1;
  }
  for (int i = 1; i < n; ++i) {
    if (!on_path[tree.parents[i]]) continue;
    if (IsSpineSource(tree.source[i])) {
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
  for (int c = 0; c < kC; ++c) {
    double prior = kSpinePrior[c];
    model_.spine[c][0] = prior;
    for (int d = 1; d <= kD; ++d) {
      const double p =
          (spine_accepted_[c][d] + kPriorWeight * prior) / (spine_reached_[c][d] + kPriorWeight);
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

namespace {
constexpr size_t kSpineCounts =
    EdgeAcceptance::kSpineClasses * (EdgeAcceptance::kMaxSpineDepth + 1);
constexpr size_t kBranchCounts = 2 * EdgeAcceptance::kTiers * EdgeAcceptance::kScoreBins;
constexpr size_t kTrackerBytes = 2 * (kSpineCounts + kBranchCounts) * sizeof(int64_t);
}  // namespace

std::string AcceptanceTracker::Save() const {
  std::string out;
  auto put = [&out](const int64_t* v, size_t n) {
    out.append(reinterpret_cast<const char*>(v), n * sizeof(int64_t));
  };
  put(&spine_reached_[0][0], kSpineCounts);
  put(&spine_accepted_[0][0], kSpineCounts);
  put(&branch_reached_[0][0][0], kBranchCounts);
  put(&branch_accepted_[0][0][0], kBranchCounts);
  return out;
}

Status AcceptanceTracker::Load(std::string_view bytes) {
  if (bytes.size() != kTrackerBytes) {
    return Status::Error(
        StrFormat("acceptance counts: %zu bytes, expected %zu", bytes.size(), kTrackerBytes));
  }
  std::vector<int64_t> v(kTrackerBytes / sizeof(int64_t));
  std::memcpy(v.data(), bytes.data(), kTrackerBytes);
  const int64_t* sr = v.data();
  const int64_t* sa = sr + kSpineCounts;
  const int64_t* br = sa + kSpineCounts;
  const int64_t* ba = br + kBranchCounts;
  for (size_t i = 0; i < kSpineCounts; ++i) {
    if (sa[i] < 0 || sr[i] < sa[i]) return Status::Error("acceptance counts: bad spine count");
  }
  for (size_t i = 0; i < kBranchCounts; ++i) {
    if (ba[i] < 0 || br[i] < ba[i]) return Status::Error("acceptance counts: bad branch count");
  }
  std::memcpy(&spine_reached_[0][0], sr, kSpineCounts * sizeof(int64_t));
  std::memcpy(&spine_accepted_[0][0], sa, kSpineCounts * sizeof(int64_t));
  std::memcpy(&branch_reached_[0][0][0], br, kBranchCounts * sizeof(int64_t));
  std::memcpy(&branch_accepted_[0][0][0], ba, kBranchCounts * sizeof(int64_t));
  Recompute();
  return Status::Ok();
}

void AcceptanceTracker::Scale(double f) {
  auto scale = [f](int64_t* v, size_t n) {
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(static_cast<double>(v[i]) * f);
  };
  scale(&spine_reached_[0][0], kSpineCounts);
  scale(&spine_accepted_[0][0], kSpineCounts);
  scale(&branch_reached_[0][0][0], kBranchCounts);
  scale(&branch_accepted_[0][0][0], kBranchCounts);
  Recompute();
}

}  // namespace goose
