#include "draft/prediction_matcher.h"

#include <algorithm>
#include <cstdlib>

namespace goose {

PredictionMatcher::PredictionMatcher(std::span<const int32_t> prediction)
    : pred_(prediction.begin(), prediction.end()) {
  for (size_t i = 0; i < pred_.size(); ++i) where_[pred_[i]].push_back(static_cast<int32_t>(i));
}

void PredictionMatcher::Commit(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) Step(t);
}

std::span<const int32_t> PredictionMatcher::Continuation(int max_tokens) const {
  if (cursor_ < 0 || cursor_ >= static_cast<int>(pred_.size()) || max_tokens <= 0) return {};
  const bool trusted =
      run_ >= kTrustedRun || 2 * (reproduced_ + kPriorTokens) >= committed_ + kPriorTokens;
  if (!trusted) return {};
  const size_t n = std::min<size_t>(max_tokens, pred_.size() - cursor_);
  return std::span<const int32_t>(pred_.data() + cursor_, n);
}

void PredictionMatcher::Step(int32_t token) {
  if (static_cast<int>(tail_.size()) == kMaxSuffix) tail_.erase(tail_.begin());
  tail_.push_back(token);
  ++committed_;
  const int n = static_cast<int>(pred_.size());
  if (cursor_ >= 0 && cursor_ < n && pred_[cursor_] == token) {
    Count(cursor_++);
    guessed_ = false;
    ++run_;
    return;
  }
  run_ = 0;
  if (cursor_ >= 0 && cursor_ < n && !guessed_) {  // it departs here: a deletion or a replacement
    lost_at_ = cursor_;
    for (int j = 1; j <= kSkip && cursor_ + j < n; ++j) {
      if (pred_[cursor_ + j] == token) {
        Count(cursor_ + j);
        cursor_ += j + 1;
        return;
      }
    }
    cursor_ = lost_at_ + 1;
    guessed_ = true;
    return;
  }
  if (cursor_ >= 0 && !guessed_) lost_at_ = cursor_;  // (past the prediction's end)
  guessed_ = false;
  cursor_ = Resync();
  if (cursor_ > 0) Count(cursor_ - 1);
}

void PredictionMatcher::Count(int pos) {
  if (pos < counted_to_) return;
  ++reproduced_;
  counted_to_ = pos + 1;
}

int PredictionMatcher::SuffixMatch(int p) const {
  const int m = static_cast<int>(tail_.size());
  int len = 0;
  while (len < m && p - len >= 0 && pred_[p - len] == tail_[m - 1 - len]) ++len;
  return len;
}

// Candidates are the positions of the output's last token, visited outwards from where the
// matcher lost its way, so the nearest of equally long matches wins.
int PredictionMatcher::Resync() const {
  const auto it = where_.find(tail_.back());
  if (it == where_.end()) return -1;
  const std::vector<int32_t>& pos = it->second;
  const auto mid = std::lower_bound(pos.begin(), pos.end(), lost_at_) - pos.begin();
  int best = -1, best_len = 0, best_dist = 0;
  ptrdiff_t lo = mid - 1, hi = mid;
  for (int seen = 0; seen < kMaxCandidates && (lo >= 0 || hi < std::ssize(pos)); ++seen) {
    const bool up = hi < std::ssize(pos) && (lo < 0 || pos[hi] - lost_at_ <= lost_at_ - pos[lo]);
    const int p = up ? pos[hi++] : pos[lo--];
    const int dist = std::abs(p - lost_at_);
    const int len = SuffixMatch(p);
    if (len < 2 && dist > kNear) continue;
    if (len > best_len || (len == best_len && dist < best_dist)) {
      best = p;
      best_len = len;
      best_dist = dist;
    }
  }
  return best < 0 ? -1 : best + 1;
}

int64_t ReproducedPredictionTokens(std::span<const int32_t> prediction,
                                   std::span<const int32_t> output) {
  PredictionMatcher m(prediction);
  m.Commit(output);
  return m.reproduced();
}

}  // namespace goose
