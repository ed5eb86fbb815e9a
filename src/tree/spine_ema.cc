// SpineEma: exact rational EMA with a double fallback (see spine_ema.h).
#include "tree/spine_ema.h"

#include <algorithm>

#include "util/check.h"

namespace goose {

using tree_internal::BigUint;

SpineEma::SpineEma(int64_t num, int64_t den)
    : num_(static_cast<uint64_t>(num)), den_(static_cast<uint64_t>(den)) {
  GOOSE_CHECK(den > 0 && den <= UINT32_MAX && num >= 0 && num <= den);
}

void SpineEma::Update(int accepted, int drafted) {
  GOOSE_CHECK(drafted > 0 && accepted >= 0 && accepted <= drafted);
  if (!exact_) {
    approx_ = 0.3 * (static_cast<double>(accepted) / drafted) + 0.7 * approx_;
    return;
  }
  // a/b * 3/10 + p/q * 7/10 = (3 a q + 7 b p) / (10 b q).
  BigUint rate_part = den_;
  rate_part.MulSmall(3u * static_cast<uint32_t>(accepted));
  num_.MulSmall(7u * static_cast<uint32_t>(drafted));
  num_.Add(rate_part);
  den_.MulSmall(10u * static_cast<uint32_t>(drafted));
  if (den_.Bits() > kMaxBits) {
    approx_ = BigUint::Ratio(num_, den_);
    exact_ = false;
    num_ = BigUint(0);
    den_ = BigUint(1);
  }
}

bool SpineEma::Less(int64_t num, int64_t den) const {
  GOOSE_CHECK(den > 0 && den <= UINT32_MAX && num <= UINT32_MAX);
  if (!exact_) return approx_ < static_cast<double>(num) / static_cast<double>(den);
  if (num <= 0) return false;
  // num_ / den_ < num / den  <=>  num_ * den < num * den_.
  BigUint lhs = num_, rhs = den_;
  lhs.MulSmall(static_cast<uint32_t>(den));
  rhs.MulSmall(static_cast<uint32_t>(num));
  return lhs.Compare(rhs) < 0;
}

double SpineEma::value() const { return exact_ ? BigUint::Ratio(num_, den_) : approx_; }

}  // namespace goose
