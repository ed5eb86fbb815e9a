// Counter-based randomness for lossless sampling: the uniform draw used to sample the token at
// absolute sequence position `pos` depends only on (seed, pos). Any decoding method that samples
// the same distribution at the same position therefore draws the same token as plain decoding.
#pragma once

#include <cstdint>

namespace goose {

// SplitMix64 finalizer: a bijective 64-bit mixer with good avalanche.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform double in [0, 1) for (seed, pos); 53 random bits.
inline double UniformAt(uint64_t seed, uint64_t pos) {
  const uint64_t bits = Mix64(Mix64(seed) ^ Mix64(pos + 0x632be59bd9b4e019ull));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// A small sequential generator (SplitMix64) for tests, synthesis and random tree shapes.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  // Standard normal (Box-Muller).
  double Normal();

 private:
  uint64_t state_;
};

}  // namespace goose
