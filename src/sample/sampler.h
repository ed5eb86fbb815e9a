// Sampler: picks the next token from a logits row.
//
// Contract
// - temp <= 0: greedy argmax (ties -> lowest id).
// - temp > 0: logits / temp, keep the top_k highest (0 = all), then the smallest prefix of
//   that descending list whose probability mass reaches top_p, renormalize, and pick by inverse
//   CDF with the uniform draw UniformAt(seed, pos) (util/rng.h). `pos` is the absolute position
//   of the token being sampled, so the draw depends only on (seed, pos): speculative decoding
//   that samples each tree node at its position reproduces plain sampling exactly.
// - Deterministic: candidate order is (logit desc, id asc); sums run in that order in double.
// - Stateless and thread-safe (scratch is per call).
#pragma once

#include <cstdint>

namespace goose {

struct SamplingParams {
  float temp = 0.0f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  bool greedy() const { return temp <= 0.0f; }
};

int32_t Argmax(const float* logits, int n_vocab);

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params) {}
  const SamplingParams& params() const { return params_; }
  // Samples the token that will sit at absolute position `pos`.
  int32_t Sample(const float* logits, int n_vocab, int64_t pos) const;
  // The same with an explicit uniform draw u in [0, 1) (tests force RNG streams through this).
  int32_t SampleWithUniform(const float* logits, int n_vocab, double u) const;

 private:
  SamplingParams params_;
};

}  // namespace goose
