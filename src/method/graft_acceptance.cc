#include "method/graft_acceptance.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace goose {

namespace {
constexpr double kPriorWeight = 4.0;
constexpr double kContextPrior[GraftAcceptance::kContextClasses] = {0.8, 0.6, 0.5, 0.9};
// Prior factor for a retrieved token the draft model saw and did not rank in its top-k.
constexpr double kOverruled = 0.25;

double BinMid(int bin) { return (bin + 0.5) / GraftAcceptance::kBins; }
}  // namespace

double GraftAcceptance::Count::Rate(double prior) const {
  return (static_cast<double>(accepted) + kPriorWeight * prior) /
         (static_cast<double>(reached) + kPriorWeight);
}

int GraftAcceptance::Bin(float p) {
  if (!(p > 0.0f)) return 0;
  return std::min(kBins - 1, static_cast<int>(p * kBins));
}

double GraftAcceptance::Draft(float p, bool context_agrees, bool table_agrees) const {
  const int b = Bin(p);
  const double f = 0.9 + 0.1 * context_agrees + 0.1 * table_agrees;
  return draft_[context_agrees][table_agrees][b].Rate(std::min(1.0, f * BinMid(b)));
}

double GraftAcceptance::Context(int cls, int depth, bool overruled) const {
  cls = std::clamp(cls, 0, kContextClasses - 1);
  depth = std::clamp(depth, 1, kCtxDepth);
  double prior = kContextPrior[cls] * (overruled ? kOverruled : 1.0);
  for (int d = 1; d <= depth; ++d) prior = context_[overruled][cls][d].Rate(prior);
  return prior;
}

double GraftAcceptance::Table(int tier, float score, bool overruled) const {
  tier = std::clamp(tier, 0, kTiers - 1);
  const int b = Bin(score);
  return table_[overruled][tier][b].Rate(0.5 * BinMid(b) * (overruled ? kOverruled : 1.0));
}

double GraftAcceptance::DraftTop() const { return draft_top_.Rate(0.6); }

void GraftAcceptance::RecordDraft(float p, bool context_agrees, bool table_agrees, bool accepted) {
  Count& c = draft_[context_agrees][table_agrees][Bin(p)];
  ++c.reached;
  c.accepted += accepted;
}

void GraftAcceptance::RecordContext(int cls, int depth, bool overruled, bool accepted) {
  Count& c =
      context_[overruled][std::clamp(cls, 0, kContextClasses - 1)][std::clamp(depth, 1, kCtxDepth)];
  ++c.reached;
  c.accepted += accepted;
}

void GraftAcceptance::RecordTable(int tier, float score, bool overruled, bool accepted) {
  Count& c = table_[overruled][std::clamp(tier, 0, kTiers - 1)][Bin(score)];
  ++c.reached;
  c.accepted += accepted;
}

void GraftAcceptance::RecordDraftTop(bool accepted) {
  ++draft_top_.reached;
  draft_top_.accepted += accepted;
}

void DraftTiming::AddPass(double seconds, int rows) {
  constexpr double kKeep = 1.0 - 1.0 / 32;
  ++passes;
  n_ = kKeep * n_ + 1;
  sr_ = kKeep * sr_ + rows;
  st_ = kKeep * st_ + seconds;
  srr_ = kKeep * srr_ + static_cast<double>(rows) * rows;
  srt_ = kKeep * srt_ + rows * seconds;
}

void DraftTiming::Fit(double* a, double* b) const {
  *a = *b = 0;
  if (n_ <= 0) return;
  const double var = srr_ - sr_ * sr_ / n_;
  // Rows of (nearly) one size: no slope to be had; the mean pass.
  if (var <= 1e-9 * std::max(1.0, srr_)) {
    *a = st_ / n_;
    return;
  }
  *b = std::max(0.0, (srt_ - sr_ * st_ / n_) / var);
  *a = std::max(0.0, (st_ - *b * sr_) / n_);
}

double DraftTiming::PassSeconds(int rows) const {
  double a, b;
  Fit(&a, &b);
  return a + b * rows;
}

double DraftTiming::RowSeconds() const {
  double a, b;
  Fit(&a, &b);
  return b;
}

template <class Self, class F>
void GraftAcceptance::ForEachCount(Self& self, F f) {
  auto each = [&f](auto& counts) {  // a [][][] array of counts, in memory order
    for (auto& a : counts) {
      for (auto& b : a) {
        for (auto& c : b) f(c);
      }
    }
  };
  each(self.draft_);
  each(self.context_);
  each(self.table_);
  f(self.draft_top_);
}

std::string GraftAcceptance::Save() const {
  std::string out;
  ForEachCount(*this, [&out](const Count& c) {
    out.append(reinterpret_cast<const char*>(&c.reached), sizeof(int64_t));
    out.append(reinterpret_cast<const char*>(&c.accepted), sizeof(int64_t));
  });
  return out;
}

Status GraftAcceptance::Load(std::string_view bytes) {
  if (bytes.size() != kBytes) {
    return Status::Error("draft acceptance counts: " + std::to_string(bytes.size()) +
                         " bytes, expected " + std::to_string(kBytes));
  }
  // (A bound far above any real count, so that counting on can never overflow.)
  constexpr int64_t kMaxCount = int64_t{1} << 50;
  GraftAcceptance loaded;
  const char* at = bytes.data();
  bool sane = true;
  ForEachCount(loaded, [&](Count& c) {
    std::memcpy(&c.reached, at, sizeof(int64_t));
    std::memcpy(&c.accepted, at + sizeof(int64_t), sizeof(int64_t));
    at += 2 * sizeof(int64_t);
    sane = sane && c.accepted >= 0 && c.reached >= c.accepted && c.reached <= kMaxCount;
  });
  if (!sane) return Status::Error("draft acceptance counts: a count out of range");
  *this = loaded;
  return Status::Ok();
}

void GraftAcceptance::Scale(double factor) {
  auto scaled = [factor](int64_t v) {
    return static_cast<int64_t>(static_cast<double>(v) * factor);
  };
  ForEachCount(*this, [&](Count& c) {
    c.reached = scaled(c.reached);
    c.accepted = std::min(c.reached, scaled(c.accepted));
  });
}

std::string DraftTiming::Save() const {
  const double v[9] = {cycle.seconds,
                       cycle.tokens,
                       static_cast<double>(passes),
                       static_cast<double>(cycle.cycles),
                       n_,
                       sr_,
                       st_,
                       srr_,
                       srt_};
  return std::string(reinterpret_cast<const char*>(v), sizeof(v));
}

Status DraftTiming::Load(std::string_view bytes) {
  if (bytes.size() != kBytes) return Status::Error("draft timing: wrong size");
  double v[9];
  std::memcpy(v, bytes.data(), sizeof(v));
  for (double x : v) {
    if (!std::isfinite(x) || x < 0 || x > 1e15) return Status::Error("draft timing: bad figure");
  }
  DraftTiming t;
  t.cycle.seconds = v[0], t.cycle.tokens = v[1];
  t.passes = static_cast<int64_t>(v[2]), t.cycle.cycles = static_cast<int64_t>(v[3]);
  t.n_ = v[4], t.sr_ = v[5], t.st_ = v[6], t.srr_ = v[7], t.srt_ = v[8];
  *this = t;
  return Status::Ok();
}

}  // namespace goose
