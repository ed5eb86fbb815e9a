// What the draft-model methods measure online (docs/methods.md §3.9): per-edge acceptance by
// source and confidence (GraftAcceptance), and what drafting and verifying cost (DraftTiming).
//
// GraftAcceptance. "Reached" = the node's parent is on the accepted path (root included); an
// estimate is (accepted + w * prior) / (reached + w), w = 4. Buckets:
// - draft: by the draft model's probability for the token (10 bins), split by whether the
//   context match and whether the table proposed the same token too ("agree");
// - context: by match class (0 = consensus match at the root, 1 = other match at the root, 2 =
//   a match looked up below the root, 3 = the request's prediction at the root) and position in the
//   match's continuation (1..32, deeper positions share the last bucket); a sparse deep bucket
//   borrows its prior from the one before, as tuned GOOSE's spine does;
// - table: by list tier (0 bigram, 1 unigram extra, 2 unigram without bigram) and score bin;
// - context and table apart by whether the draft model scored the parent and left the token
//   out of its top-k ("overruled": the draft's disagreement is evidence) or never scored it;
// - draft_top: the draft's most likely child of a node (for "is another pass worth it").
// Priors: a draft token is accepted about as often as the draft believes it (0.9 p; p with one
// source agreeing, 1.1 p with both, at most 1), a context
// continuation like GOOSE's spine (0.8 / 0.6 / 0.5; a prediction 0.9), a table candidate at half
// its score; an overruled one at a quarter of that.
//
// DraftTiming: what a draft pass costs as a line in the rows it scores, t(r) = a + b r, fitted
// by least squares over exponentially decayed sums (weight 1/32 per new pass; a single row size
// seen so far gives b = 0), and the rate of its cycles (budget/cycle_rate.h).
//
// Both persist (engine/learned_cache.h, through DraftLearned): Save() gives kBytes bytes; Load()
// checks the size and every figure (0 <= accepted <= reached <= 2^50; times finite, >= 0)
// and leaves the object unchanged on error. Scale() weighs the counts down (older evidence).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "budget/cycle_rate.h"
#include "util/status.h"

namespace goose {

class GraftAcceptance {
 public:
  static constexpr int kBins = 10;
  static constexpr int kCtxDepth = 32;
  static constexpr int kTiers = 3;
  static constexpr int kContextClasses = 4;
  static constexpr int kPredictionClass = 3;

  static int Bin(float p);
  double Draft(float p, bool context_agrees, bool table_agrees) const;
  double Context(int cls, int depth, bool overruled) const;
  double Table(int tier, float score, bool overruled) const;
  double DraftTop() const;

  void RecordDraft(float p, bool context_agrees, bool table_agrees, bool accepted);
  void RecordContext(int cls, int depth, bool overruled, bool accepted);
  void RecordTable(int tier, float score, bool overruled, bool accepted);
  void RecordDraftTop(bool accepted);

  static constexpr int kCounts =
      2 * 2 * kBins + 2 * kContextClasses * (kCtxDepth + 1) + 2 * kTiers * kBins + 1;
  static constexpr size_t kBytes = 2 * kCounts * sizeof(int64_t);
  std::string Save() const;
  Status Load(std::string_view bytes);
  void Scale(double factor);

 private:
  struct Count {
    int64_t reached = 0, accepted = 0;
    double Rate(double prior) const;
  };
  // Every count, in the order Save writes them.
  template <class Self, class F>
  static void ForEachCount(Self& self, F f);
  Count draft_[2][2][kBins];
  Count context_[2][kContextClasses][kCtxDepth + 1];
  Count table_[2][kTiers][kBins];
  Count draft_top_;
};

struct DraftTiming {
  CycleRate cycle;
  int64_t passes = 0;

  void AddPass(double seconds, int rows);
  void AddCycle(double seconds, int tokens) { cycle.Add(seconds, tokens); }
  // Predicted seconds of a pass over `rows` rows (0 before any pass).
  double PassSeconds(int rows) const;
  // b of the fit: what one more row adds to a pass.
  double RowSeconds() const;
  double TokensPerSecond() const { return cycle.TokensPerSecond(); }

  static constexpr size_t kBytes = 9 * sizeof(double);
  std::string Save() const;
  Status Load(std::string_view bytes);

 private:
  void Fit(double* a, double* b) const;
  double n_ = 0, sr_ = 0, st_ = 0, srr_ = 0, srt_ = 0;  // decayed sums over passes
};

}  // namespace goose
