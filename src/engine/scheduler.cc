#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>

#include "budget/pass_split.h"
#include "util/thread_pool.h"

namespace goose {

void Scheduler::Remove(Sequence* seq) { std::erase(active_, seq); }

void Scheduler::ProposeAll() {
  int prefilling = 0;
  bool decoding = false;
  for (Sequence* seq : active_) {
    prefilling += seq->prefilling();
    decoding |= !seq->prefilling();
  }
  // Beside decoding sequences, the prompts being prefilled share a bounded number of rows.
  const int prefill_rows =
      decoding && prefilling > 0 ? std::max(16, kPrefillRowsBesideDecode / prefilling) : 0;
  for (Sequence* seq : active_) seq->Propose(policy_, prefill_rows);
}

void Scheduler::SplitTrees() {
  std::vector<PassTree> trees(active_.size());
  bool any_valued = false;
  for (size_t i = 0; i < active_.size(); ++i) {
    const Sequence& seq = *active_[i];
    PassTree& t = trees[i];
    t.rows = static_cast<int>(seq.tokens().size());
    t.fixed = true;
    if (seq.prefilling() || !seq.budget_request().auto_budget || t.rows == 1) continue;
    t.values = seq.proposal().values;
    if (t.values.size() != static_cast<size_t>(t.rows)) {
      t.values = policy_.NodeValues(seq.budget(), t.rows);
    }
    t.fixed = t.values.size() != static_cast<size_t>(t.rows);
    any_valued |= !t.fixed;
  }
  if (!any_valued || !policy_.has_curve()) return;
  int64_t depth = 0;  // (a pass costs what its rows cost at their sequences' mean depth)
  for (const Sequence* seq : active_) depth += seq->context().n_past();
  const std::vector<CostSample> curve =
      policy_.AtDepth(policy_.CostCurve(), static_cast<int>(depth / std::ssize(active_)));
  const std::vector<int> keep = SplitPass(trees, ExpandCostCurve(curve), rate_.TokensPerSecond());
  for (size_t i = 0; i < active_.size(); ++i) {
    counters_.cut_nodes += trees[i].rows - keep[i];
    active_[i]->Cut(keep[i]);
  }
}

StatusOr<double> Scheduler::Score() {
  const auto t = std::chrono::steady_clock::now();
  if (batch_ != nullptr) {
    rows_.clear();
    for (Sequence* seq : active_) rows_.push_back({&seq->context(), seq->tokens(), seq->parents()});
    GOOSE_RETURN_IF_ERROR(batch_->Forward(rows_));
  } else {
    for (Sequence* seq : active_) {
      GOOSE_RETURN_IF_ERROR(seq->context().Forward(seq->tokens(), seq->parents()));
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Status Scheduler::Step() {
  std::erase_if(active_, [](Sequence* s) { return s->done(); });  // (cancelled between steps)
  if (active_.empty()) return Status::Ok();
  ProposeAll();
  if (active_.size() > 1) SplitTrees();
  int rows = 0, committed = 0, prefill_rows = 0;
  double depth_extra = 0;  // what the sequences' depths add to the pass (DepthCost)
  std::vector<bool> decoding(active_.size());
  for (size_t i = 0; i < active_.size(); ++i) {
    const int n = static_cast<int>(active_[i]->tokens().size());
    rows += n;
    depth_extra += policy_.depth_cost().Extra(n, active_[i]->context().n_past());
    decoding[i] = !active_[i]->prefilling();
    if (!decoding[i]) prefill_rows += static_cast<int>(active_[i]->tokens().size());
  }
  counters_.prefill_rows += prefill_rows;
  GOOSE_ASSIGN_OR_RETURN(const double seconds, Score());
  double extra = 0;
  bool decoded = false;
  for (size_t i = 0; i < active_.size(); ++i) {
    Sequence& seq = *active_[i];
    const CycleOutcome& o = seq.Accept(seconds, policy_);
    if (!decoding[i]) continue;
    decoded = true;
    extra += o.ExtraSeconds(seq.budget_request());
    committed += o.committed;
  }
  // A pass of this many rows costs its time and the drafters' work around it. The split's rate
  // is that of decoding alone: a pass that also prefilled a prompt earns few tokens for its
  // time, and counting it made the next passes' trees far too large (8 clients arriving
  // together: 57 rows a pass until the rate recovered).
  if (decoded) {
    policy_.RecordPass(rows, seconds + extra, depth_extra);
    if (prefill_rows == 0) rate_.Add(seconds + extra, committed);
  }
  ++counters_.passes;
  counters_.rows += rows;
  counters_.sequences += static_cast<int64_t>(active_.size());
  std::erase_if(active_, [](Sequence* s) { return s->done(); });
  return Status::Ok();
}

}  // namespace goose
