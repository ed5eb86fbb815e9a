// Scheduler: runs the cycles of its sequences (engine/sequence.h) in shared forward passes.
// Each Step():
//   1. every active sequence proposes its next rows under the budget policy's plan: a prefill
//      chunk, or a draft tree (a prompt being prefilled beside others' decoding gets at most
//      max_prefill_rows_beside_decode rows a pass, so that a long prompt delays the others'
//      next tokens by a fraction of a second, not by its whole prefill);
//   2. with several sequences, one budget for the pass is split by value (budget/pass_split.h):
//      each tree keeps the nodes worth their share of the pass's cost;
//   3. one forward pass scores every sequence's rows (each row's logits are bit-identical to
//      one-token decoding of its own sequence alone, whatever else is in the pass);
//   4. the rows go back to their sequences (Accept); a sequence that is done leaves.
// Every active sequence advances in every pass (at least its root, or a prefill chunk). With
// one sequence this is the decoding loop of docs/methods.md §7, its trees uncut.
// Not thread-safe: one thread steps a scheduler. `batch`: the multi-sequence pass (model.h
// BatchPass) of the model all sequences run on; null: each sequence's Context::Forward in turn
// (one sequence: the same code and bits).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "budget/budget_policy.h"
#include "budget/cycle_rate.h"
#include "engine/sequence.h"
#include "util/status.h"

namespace goose {

// What the passes held, for /metrics and benchmarks.
struct PassCounters {
  int64_t passes = 0;
  int64_t rows = 0;          // scored rows, over all passes
  int64_t sequences = 0;     // sequences served, over all passes
  int64_t prefill_rows = 0;  // of `rows`, prompt rows
  int64_t cut_nodes = 0;     // tree nodes proposed but left out by the budget split
};

class Scheduler {
 public:
  static constexpr int kPrefillRowsBesideDecode = 128;

  explicit Scheduler(BudgetPolicy& policy, BatchPass* batch = nullptr)
      : policy_(policy), batch_(batch) {}

  // `seq` (not done) takes part in the next Step() and every one after until it is done; it
  // must outlive its time here.
  void Add(Sequence* seq) { active_.push_back(seq); }
  // Sequences that are done (or were cancelled) leave at the end of a step; Remove takes one
  // out now (it is not done: its request is dropped).
  void Remove(Sequence* seq);
  // One pass for every active sequence. An error is a pass that failed (rows that do not fit
  // or are malformed, which validated requests never produce): the step stops there.
  Status Step();
  bool idle() const { return active_.empty(); }
  size_t active() const { return active_.size(); }
  const PassCounters& counters() const { return counters_; }

 private:
  void ProposeAll();
  // The budget split of several trees (budget/pass_split.h).
  void SplitTrees();
  // The forward pass over every active sequence's rows: its seconds alone (not the wait for
  // the pool).
  StatusOr<double> Score();

  BudgetPolicy& policy_;
  BatchPass* batch_;
  std::vector<SequenceRows> rows_;  // the pass's rows, by sequence
  std::vector<Sequence*> active_;
  CycleRate rate_;  // tokens per second of the passes (the split's Dinkelbach rate)
  PassCounters counters_;
};

}  // namespace goose
