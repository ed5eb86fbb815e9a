// SizeCut: where --budget auto cuts a best-first tree (tuned GOOSE's builder, the draft-model
// pruning modes, method/graft_tree.h). Plain data in, a size out: the builders get the measured
// verify costs, their node calibration and the run's rate, never the budget policy itself.
//
// Nodes arrive in best-first order, parents first, so every prefix is a tree and values never
// rise. The first s nodes are expected to commit E(s) = 1 + sum over node indices 0 < i < s of
// scale(i) * value(i) tokens and cost c(s), the curve's seconds at size s (+ extra_seconds, the
// cycle's other work), for the curve's sizes only (between them a cost is a guess). The cut is
// the size maximising SizeScore(E(s), c(s), rate); ties go to the smaller size.
// MayGrow(top): whether a size above the current one could still beat the best cut so far if
// every further node were worth `top` (the best candidate left bounds them all); when it says
// no, growth can stop and the cut is where the whole selection would have put it. A cycle whose
// best candidate cannot pay so builds nothing but the root.
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "tree/draft_tree.h"

namespace goose {

// What a cycle of `seconds` expected to commit `tokens` is worth: with the run's rate known,
// tokens - rate * seconds, the tokens it earns beyond what that time earns on average; which
// maximises the run's tokens per second (Dinkelbach), where the cycle's own tokens / seconds
// does not: it cuts rich cycles too short (1.5B-cost model: auto's trees averaged 7.3 nodes and
// committed 2.32 tokens, 8-node trees 2.52). With no rate yet, tokens / seconds.
inline double SizeScore(double tokens, double seconds, double rate) {
  return rate > 0 ? tokens - rate * seconds : tokens / seconds;
}

class SizeCut {
 public:
  // cost: sorted by nodes, non-decreasing; node_scale[i] for node index i (beyond its end the
  // last entry; empty: 1); rate: the run's tokens per second (budget/cycle_rate.h), 0: unknown.
  // The tree starts as the root alone (size 1).
  SizeCut(const std::vector<CostSample>& cost, std::span<const double> node_scale, double rate,
          double extra_seconds = 0);
  // The next node joined the tree, valued `value`.
  void Add(double value);
  bool MayGrow(double top) const;
  int size() const { return size_; }
  int best_size() const { return best_size_; }

 private:
  double Scale(int i) const;
  void ScoreIfCurveSize();
  const std::vector<CostSample>& cost_;
  std::span<const double> node_scale_;
  double rate_, extra_seconds_;
  std::vector<double> scale_sum_;  // [i]: the sum of Scale(j) for 0 <= j < i, to the largest size
  size_t next_ = 0;                // the first curve size above size_
  int size_ = 1, best_size_ = 1;
  double expected_ = 1, best_score_ = -HUGE_VAL;
};

}  // namespace goose
