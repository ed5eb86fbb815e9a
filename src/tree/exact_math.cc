// Exact arithmetic helpers for tree budgets (see exact_math.h).
#include "tree/exact_math.h"

#include <algorithm>
#include <cmath>

namespace goose::tree_internal {

Rational RationalFromDouble(double x) {
  if (!std::isfinite(x)) return {0, 1};
  constexpr int64_t kMaxDen = 1000000;
  for (int64_t den = 1; den <= kMaxDen; ++den) {
    const double scaled = x * static_cast<double>(den);
    const double rounded = std::round(scaled);
    if (std::fabs(scaled - rounded) <= 1e-9 * std::max(1.0, std::fabs(scaled))) {
      return {static_cast<int64_t>(rounded), den};
    }
  }
  return {static_cast<int64_t>(std::llround(x * kMaxDen)), kMaxDen};
}

BigUint::BigUint(uint64_t v) {
  limbs_.push_back(static_cast<uint32_t>(v));
  limbs_.push_back(static_cast<uint32_t>(v >> 32));
  Trim();
}

void BigUint::Trim() {
  while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
}

void BigUint::MulSmall(uint32_t m) {
  uint64_t carry = 0;
  for (uint32_t& limb : limbs_) {
    const uint64_t t = static_cast<uint64_t>(limb) * m + carry;
    limb = static_cast<uint32_t>(t);
    carry = t >> 32;
  }
  if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
  Trim();
}

uint32_t BigUint::DivSmall(uint32_t d) {
  uint64_t rem = 0;
  for (size_t i = limbs_.size(); i-- > 0;) {
    const uint64_t cur = (rem << 32) | limbs_[i];
    limbs_[i] = static_cast<uint32_t>(cur / d);
    rem = cur % d;
  }
  Trim();
  return static_cast<uint32_t>(rem);
}

void BigUint::Add(const BigUint& o) {
  if (limbs_.size() < o.limbs_.size()) limbs_.resize(o.limbs_.size(), 0);
  uint64_t carry = 0;
  for (size_t i = 0; i < limbs_.size(); ++i) {
    const uint64_t t =
        static_cast<uint64_t>(limbs_[i]) + (i < o.limbs_.size() ? o.limbs_[i] : 0u) + carry;
    limbs_[i] = static_cast<uint32_t>(t);
    carry = t >> 32;
  }
  if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
}

int BigUint::Compare(const BigUint& o) const {
  if (limbs_.size() != o.limbs_.size()) return limbs_.size() < o.limbs_.size() ? -1 : 1;
  for (size_t i = limbs_.size(); i-- > 0;) {
    if (limbs_[i] != o.limbs_[i]) return limbs_[i] < o.limbs_[i] ? -1 : 1;
  }
  return 0;
}

int BigUint::Bits() const {
  if (limbs_.empty()) return 0;
  int top = 0;
  for (uint32_t x = limbs_.back(); x != 0; x >>= 1) ++top;
  return static_cast<int>(32 * (limbs_.size() - 1)) + top;
}

double BigUint::Ratio(const BigUint& a, const BigUint& b) {
  // Drop the same number of low bits from both so the kept parts fit a double's range.
  const int shift = std::max(0, std::max(a.Bits(), b.Bits()) - 64);
  auto scaled = [shift](const BigUint& x) {
    double v = 0;
    for (size_t i = 0; i < x.limbs_.size(); ++i) {
      const int e = static_cast<int>(32 * i) - shift;
      if (e > -64) v += std::ldexp(static_cast<double>(x.limbs_[i]), e);
    }
    return v;
  };
  return scaled(a) / scaled(b);
}

std::vector<int> HarmonicAllocations(int share, int len) {
  std::vector<int> alloc(std::max(len, 0), 0);
  if (len <= 0 || share <= 0) return alloc;
  // H(len) = N / D with D = len!, N = sum D / j.
  BigUint d(1);
  for (int j = 2; j <= len; ++j) d.MulSmall(static_cast<uint32_t>(j));
  BigUint n(0);
  double h = 0;
  for (int j = 1; j <= len; ++j) {
    BigUint term = d;
    term.DivSmall(static_cast<uint32_t>(j));
    n.Add(term);
    h += 1.0 / j;
  }
  BigUint rhs = d;  // share * D
  rhs.MulSmall(static_cast<uint32_t>(share));
  // lhs(q) = q * (i + 1) * N; floor(share / ((i + 1) H)) is the largest q with lhs(q) <= rhs.
  auto fits = [&](int64_t q, int i) {
    BigUint lhs = n;
    lhs.MulSmall(static_cast<uint32_t>(q));
    lhs.MulSmall(static_cast<uint32_t>(i + 1));
    return lhs.Compare(rhs) <= 0;
  };
  int remaining = share;
  for (int i = 0; i < len && remaining > 0; ++i) {
    // The double estimate is off by at most one; the exact comparisons settle it.
    int64_t q = static_cast<int64_t>(std::floor(share / ((i + 1) * h)));
    q = std::clamp<int64_t>(q, 0, share);
    while (q < share && fits(q + 1, i)) ++q;
    while (q > 0 && !fits(q, i)) --q;
    const int a = std::min(std::max(1, static_cast<int>(q)), remaining);
    alloc[i] = a;
    remaining -= a;
  }
  return alloc;
}

}  // namespace goose::tree_internal
