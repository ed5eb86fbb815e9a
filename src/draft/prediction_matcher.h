// PredictionMatcher: the user's expected output (OpenAI's "Predicted Outputs", `goose generate
// --prediction`) as a draft source: an editor or agent that asks for a rewrite already has most
// of the answer.
//
// Contract
// - The matcher follows the generated tokens (Commit, prompt excluded) with a cursor into the
//   prediction. While the output reproduces the prediction, the cursor moves one token per
//   token and Continuation() is the rest of the prediction from there.
// - Where the output departs from it (an edit), the departing token is taken as one of the next
//   kSkip prediction tokens (the ones before it were deleted), else as replacing the expected
//   one (the cursor steps over it). If the next token does not confirm that guess, or while the
//   matcher is lost, it finds its place from the output's last tokens: the longest suffix (up
//   to kMaxSuffix tokens; at least 2, or 1 within kNear tokens of where it lost its way) that
//   ends at a prediction token, the nearest of equally long ones. A replaced, inserted or
//   deleted token so costs at most one token drafted from the wrong place.
// - Trust: Continuation() is empty while less than half of the output so far (with a prior of
//   kPriorTokens reproduced ones) reproduced the prediction, unless the last kTrustedRun tokens
//   did. A prediction that shares only common words with the output (another story, a wrong
//   file) resyncs by chance on short suffixes; without this it would replace the context
//   match's spine with its own, deep and mostly wrong, every few tokens.
// - Reproduced(): prediction tokens the output reproduced in order (each counted once, where the
//   matcher was in step); the rest of the prediction counts as rejected. It depends only on the
//   prediction and the output, never on how they were drafted.
// - Commit costs O(1) while in step; a resync examines at most kMaxCandidates positions.
//   Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace goose {

class PredictionMatcher {
 public:
  static constexpr int kMaxSuffix = 8;
  static constexpr int kNear = 32;
  static constexpr int kMaxCandidates = 256;
  static constexpr int kSkip = 4;
  static constexpr int kPriorTokens = 4;
  static constexpr int kTrustedRun = 8;

  explicit PredictionMatcher(std::span<const int32_t> prediction = {});

  // The next generated tokens.
  void Commit(std::span<const int32_t> tokens);
  // Up to max_tokens prediction tokens expected next; empty while lost, at its end, or not
  // trusted (above).
  std::span<const int32_t> Continuation(int max_tokens) const;
  bool empty() const { return pred_.empty(); }
  int64_t size() const { return static_cast<int64_t>(pred_.size()); }
  int64_t reproduced() const { return reproduced_; }

 private:
  void Step(int32_t token);
  void Count(int pos);  // the output reproduced prediction token `pos` (each counts once)
  // The position after the best place of the output's suffix in the prediction, or -1.
  int Resync() const;
  int SuffixMatch(int p) const;  // output tokens ending at prediction position p that match

  std::vector<int32_t> pred_;
  std::unordered_map<int32_t, std::vector<int32_t>> where_;  // token -> its positions, ascending
  std::vector<int32_t> tail_;                                // the output's last kMaxSuffix tokens
  int cursor_ = 0;        // the prediction index expected next; -1: lost
  int lost_at_ = 0;       // where the cursor was when it lost its way
  bool guessed_ = false;  // the cursor is a replacement guess, not yet confirmed
  int counted_to_ = 0;    // prediction positions below this were counted as reproduced
  int64_t reproduced_ = 0;
  int64_t committed_ = 0;  // output tokens seen
  int run_ = 0;            // of them the last ones the cursor followed in step
};

// Prediction tokens that `output` reproduces (PredictionMatcher::reproduced), for usage reports.
int64_t ReproducedPredictionTokens(std::span<const int32_t> prediction,
                                   std::span<const int32_t> output);

}  // namespace goose
