// Exact arithmetic for tree budgets (convention 15 of docs/methods.md §7): the spine ratio,
// the branch shares and the 1/(i+1) allocations are floors of rationals, and doubles land on the
// wrong side of integer boundaries (c = 4/5 gives B = 91 instead of 92). The harmonic sums of the
// allocation rule have denominators far beyond 128 bits (lcm(1..100) ~ 7e40), hence BigUint.
// Internal to src/tree.
#pragma once

#include <cstdint>
#include <vector>

namespace goose::tree_internal {

// p / q with q > 0.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;
};

// The rational with the smallest denominator (<= 1e6) within 1e-9 relative of x; parameters
// such as 0.15 or 0.5 are meant as 3/20 and 1/2, not as their nearest doubles.
Rational RationalFromDouble(double x);

// Minimal unsigned big integer (base 2^32, little endian): enough for harmonic-sum comparisons.
class BigUint {
 public:
  explicit BigUint(uint64_t v = 0);
  void MulSmall(uint32_t m);
  // Divides in place; returns the remainder.
  uint32_t DivSmall(uint32_t d);
  void Add(const BigUint& o);
  // -1, 0, +1 as *this <, ==, > o.
  int Compare(const BigUint& o) const;
  // Number of significant bits (0 for zero).
  int Bits() const;
  // a / b as the nearest-ish double (about 60 significant bits of each are used); b != 0.
  static double Ratio(const BigUint& a, const BigUint& b);

 private:
  void Trim();
  std::vector<uint32_t> limbs_;
};

// GOOSE's spine allocations (docs/methods.md §3.6.2 step 6): for i = 0..len-1,
// alloc_i = min(max(1, floor(share * (1/(i+1)) / H(len))), remaining), remaining -= alloc_i,
// with H(len) = sum_{j=1..len} 1/j evaluated exactly.
std::vector<int> HarmonicAllocations(int share, int len);

}  // namespace goose::tree_internal
