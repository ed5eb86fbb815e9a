// SpineEma: paper GOOSE's spine-acceptance EMA (docs/methods.md §3.6.3), kept exact.
//
// e starts at 1/2; after every spine-tree cycle e <- 3/10 * accepted / drafted + 7/10 * e. It only
// selects the spine-ratio tier of docs/methods.md §3.6.2 step 2 (e < 1/5, e < 2/5), and
// convention 15 wants that test exact: in doubles a first cycle accepting 1 of 6 spine nodes
// gives e = 0.39999999999999997 (tier 0.30) where exactly e = 2/5 (tier 0.50).
//
// Representation: e = num / den with den = 2 * prod(10 * drafted_i), both BigUint, so Update
// and Less are exact. A cycle adds about log2(10 * drafted) <= 10 bits; past kMaxBits (more
// than 6000 spine cycles in one request, beyond any context goose runs by default) e continues
// as a double, whose rounding error stays below 1e-15 because the EMA contracts errors by 7/10
// per step: a tier decision can then differ from exact arithmetic only when e is that close to
// 1/5 or 2/5.
#pragma once

#include <cstdint>

#include "tree/exact_math.h"

namespace goose {

class SpineEma {
 public:
  static constexpr int kMaxBits = 1 << 16;
  SpineEma() : SpineEma(1, 2) {}  // GOOSE's initial value
  // The initial value num / den (0 < den < 2^32, 0 <= num <= den).
  SpineEma(int64_t num, int64_t den);
  // One spine-tree cycle: `accepted` of `drafted` spine nodes were accepted (drafted > 0).
  void Update(int accepted, int drafted);
  // e < num / den, exactly while exact() (0 < den < 2^32, num < 2^32).
  bool Less(int64_t num, int64_t den) const;
  double value() const;
  bool exact() const { return exact_; }

 private:
  tree_internal::BigUint num_, den_;
  bool exact_ = true;
  double approx_ = 0;  // the value once !exact_
};

}  // namespace goose
