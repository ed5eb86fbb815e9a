// AcceptanceTracker: online estimates of per-edge acceptance for the best-first GOOSE builder
// (tree/best_first_builder.h), measured from every verified tree of the tuned GOOSE method.
// "Reached" = the node's parent is on the accepted path (root included); the estimate for a
// bucket is (accepted + w * prior) / (reached + w), where the prior of spine depth d is the
// estimate at depth d - 1 (so sparse deep buckets borrow from shallower ones).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tree/best_first_builder.h"
#include "tree/draft_tree.h"
#include "util/status.h"
#include "verify/verifier.h"

namespace goose {

class AcceptanceTracker {
 public:
  AcceptanceTracker();
  void Update(const DraftTree& tree, const AcceptResult& result, int spine_class);
  const EdgeAcceptance& model() const { return model_; }
  // The counts as bytes, and back: Load checks the size and that every count is sane (reached
  // >= accepted >= 0) and leaves the tracker unchanged on error.
  std::string Save() const;
  Status Load(std::string_view bytes);
  // Every count times `factor` (older evidence counts less).
  void Scale(double factor);

 private:
  void Recompute();
  static constexpr int kD = EdgeAcceptance::kMaxSpineDepth;
  static constexpr int kBins = EdgeAcceptance::kScoreBins;
  static constexpr int kC = EdgeAcceptance::kSpineClasses;
  int64_t spine_reached_[kC][kD + 1] = {};
  int64_t spine_accepted_[kC][kD + 1] = {};
  int64_t branch_reached_[2][EdgeAcceptance::kTiers][kBins] = {};
  int64_t branch_accepted_[2][EdgeAcceptance::kTiers][kBins] = {};
  EdgeAcceptance model_;
};

}  // namespace goose
