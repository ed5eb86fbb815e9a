#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "util/rng.h"

namespace goose {

int32_t Argmax(const float* logits, int n_vocab) {
  // The loop `if (logits[i] > logits[best]) best = i`, jumping from one new maximum to the next
  // with a vectorized scan (a vocabulary scan per tree node was a visible part of a pass).
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab;) {
    i += FirstAbove(logits + i, n_vocab - i, logits[best]);
    if (i == n_vocab) break;
    best = i++;
  }
  return best;
}

int32_t Sampler::Sample(const float* logits, int n_vocab, int64_t pos) const {
  if (params_.greedy()) return Argmax(logits, n_vocab);
  return SampleWithUniform(logits, n_vocab, UniformAt(params_.seed, static_cast<uint64_t>(pos)));
}

int32_t Sampler::SampleWithUniform(const float* logits, int n_vocab, double u) const {
  if (params_.greedy()) return Argmax(logits, n_vocab);
  // Candidates ordered by (logit desc, id asc): a total order, so the result is deterministic.
  std::vector<std::pair<float, int32_t>> cand(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) cand[i] = {logits[i], i};
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  int k = params_.top_k > 0 ? std::min(params_.top_k, n_vocab) : n_vocab;
  std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), better);
  cand.resize(k);

  const double inv_temp = 1.0 / params_.temp;
  const double max_logit = cand[0].first;
  std::vector<double> prob(k);
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    prob[i] = std::exp((static_cast<double>(cand[i].first) - max_logit) * inv_temp);
    sum += prob[i];
  }
  // top-p: smallest prefix whose mass reaches top_p (at least one token).
  int keep = k;
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (int i = 0; i < k; ++i) {
      mass += prob[i] / sum;
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int i = 0; i < keep; ++i) kept += prob[i];
  const double target = u * kept;
  double acc = 0;
  for (int i = 0; i < keep; ++i) {
    acc += prob[i];
    if (target < acc) return cand[i].second;
  }
  return cand[keep - 1].second;
}

}  // namespace goose
