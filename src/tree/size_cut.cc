#include "tree/size_cut.h"

#include <algorithm>

namespace goose {

SizeCut::SizeCut(const std::vector<CostSample>& cost, std::span<const double> node_scale,
                 double rate, double extra_seconds)
    : cost_(cost), node_scale_(node_scale), rate_(rate), extra_seconds_(extra_seconds) {
  scale_sum_.push_back(0.0);
  const int largest = cost.empty() ? 1 : std::max(1, cost.back().nodes);
  for (int i = 0; i < largest; ++i) scale_sum_.push_back(scale_sum_[i] + Scale(i));
  while (next_ < cost_.size() && cost_[next_].nodes < 1) ++next_;
  ScoreIfCurveSize();
}

double SizeCut::Scale(int i) const {
  if (node_scale_.empty()) return 1.0;
  return node_scale_[std::min<size_t>(i, node_scale_.size() - 1)];
}

void SizeCut::ScoreIfCurveSize() {
  for (; next_ < cost_.size() && cost_[next_].nodes <= size_; ++next_) {
    if (cost_[next_].nodes < size_) continue;
    const double s = SizeScore(expected_, cost_[next_].seconds + extra_seconds_, rate_);
    if (s > best_score_) {
      best_score_ = s;
      best_size_ = size_;
    }
  }
}

void SizeCut::Add(double value) {
  expected_ += Scale(size_) * value;
  ++size_;
  ScoreIfCurveSize();
}

bool SizeCut::MayGrow(double top) const {
  for (size_t k = next_; k < cost_.size(); ++k) {
    const double gain = top * (scale_sum_[cost_[k].nodes] - scale_sum_[size_]);
    if (SizeScore(expected_ + gain, cost_[k].seconds + extra_seconds_, rate_) > best_score_) {
      return true;
    }
  }
  return false;
}

}  // namespace goose
