// ValueCalibration: how the values a drafter gives its tree nodes (P(root path accepted) under
// its acceptance model) compare with what verification accepted, per step of node counts, for
// the methods that cut their own trees under --budget auto (tuned GOOSE, the draft-model
// pruning modes). Node i is the i-th node the builder added (1-based, parents first); the steps
// start at the calibrated tree sizes (1, 2, 4, 8, 12, 16, 24, 32), since a tree is cut between
// them, so what decides a cut is how well the next step's nodes are valued.
// Why per step and not one factor: measured on the 0.44B-cost model (12 prompts), accepted /
// predicted was 1.02 for node 1, 1.11 for nodes 2-3 and 1.29 for nodes 4-7 where the overall
// factor was 1.09, so trees were cut to 4 nodes where 8 paid (graft: 1.02, 1.16, 1.15).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace goose {

class ValueCalibration {
 public:
  static constexpr int kSteps = 8;
  static constexpr size_t kBytes = 2 * kSteps * sizeof(double);

  // Node `node` (>= 1) of a verified tree was valued `value`; `accepted`: on the accepted path.
  void Record(int node, double value, bool accepted);
  // scale[i] for node indices 0..max_nodes (0 unused): the step's accepted / predicted, shrunk
  // towards the overall ratio by 8 tokens' worth of prediction, the overall ratio shrunk towards
  // 1 by 16; clamped to [0.25, 2].
  std::vector<double> NodeScale(int max_nodes) const;
  // Every sum times `factor` (older evidence counts less).
  void Scale(double factor);
  // kBytes; Load checks the size and that every figure is finite and >= 0, and leaves the
  // calibration unchanged on error.
  std::string Save() const;
  Status Load(std::string_view bytes);

 private:
  static int Step(int node);
  double accepted_[kSteps] = {}, predicted_[kSteps] = {};
};

}  // namespace goose
