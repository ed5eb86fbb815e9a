#include "budget/value_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace goose {
namespace {
constexpr int kStepStarts[ValueCalibration::kSteps] = {1, 2, 4, 8, 12, 16, 24, 32};
bool Sane(double x) { return std::isfinite(x) && x >= 0; }
}  // namespace

int ValueCalibration::Step(int node) {
  int s = 0;
  while (s + 1 < kSteps && node >= kStepStarts[s + 1]) ++s;
  return s;
}

void ValueCalibration::Record(int node, double value, bool accepted) {
  const int s = Step(node);
  predicted_[s] += value;
  accepted_[s] += accepted ? 1.0 : 0.0;
}

std::vector<double> ValueCalibration::NodeScale(int max_nodes) const {
  constexpr double kPrior = 16, kStepPrior = 8;
  double a = 0, p = 0;
  for (int s = 0; s < kSteps; ++s) a += accepted_[s], p += predicted_[s];
  const double overall = (a + kPrior) / (p + kPrior);
  std::vector<double> scale(std::max(max_nodes, 1) + 1, 1.0);
  for (size_t i = 1; i < scale.size(); ++i) {
    const int s = Step(static_cast<int>(i));
    scale[i] =
        std::clamp((accepted_[s] + kStepPrior * overall) / (predicted_[s] + kStepPrior), 0.25, 2.0);
  }
  return scale;
}

void ValueCalibration::Scale(double factor) {
  for (int s = 0; s < kSteps; ++s) accepted_[s] *= factor, predicted_[s] *= factor;
}

std::string ValueCalibration::Save() const {
  std::string out(reinterpret_cast<const char*>(accepted_), sizeof(accepted_));
  out.append(reinterpret_cast<const char*>(predicted_), sizeof(predicted_));
  return out;
}

Status ValueCalibration::Load(std::string_view bytes) {
  if (bytes.size() != kBytes) return Status::Error("value calibration: wrong size");
  double a[kSteps], p[kSteps];
  std::memcpy(a, bytes.data(), sizeof(a));
  std::memcpy(p, bytes.data() + sizeof(a), sizeof(p));
  for (int s = 0; s < kSteps; ++s) {
    if (!Sane(a[s]) || !Sane(p[s])) return Status::Error("value calibration: bad figure");
  }
  std::copy(a, a + kSteps, accepted_);
  std::copy(p, p + kSteps, predicted_);
  return Status::Ok();
}

}  // namespace goose
