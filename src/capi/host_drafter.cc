#include "capi/host_drafter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "engine/learned_cache.h"
#include "util/escape.h"

namespace goose::capi {

namespace {

DraftError ArgumentError(std::string message) { return {Misuse::kArgument, std::move(message)}; }
DraftError StateError(std::string message) { return {Misuse::kState, std::move(message)}; }

// TopK's order: logit descending (a NaN below every number), then the lower id; padding last.
bool RanksBefore(int32_t a_id, float a, int32_t b_id, float b) {
  if ((a_id < 0) != (b_id < 0)) return b_id < 0;
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return a_id < b_id;
}

// The rows of a proposal the host did not report: the drafter learns nothing from them.
class NoRows : public ScoredRows {
 public:
  int n_rows() const override { return 0; }
  void TopK(int, int k, int32_t* ids, float* scores) const override {
    std::fill(ids, ids + k, -1);
    std::fill(scores, scores + k, 0.0f);
  }
};

}  // namespace

StatusOr<HostRows> HostRows::Make(const int32_t* ids, const float* logits, int n_rows, int k,
                                  int n_vocab) {
  if (k < 1 || k > kMaxK) {
    return Status::Error(StrFormat("k = %d, expected 1..%d candidates per row", k, kMaxK));
  }
  HostRows rows;
  rows.n_rows_ = n_rows;
  rows.k_ = k;
  rows.ids_.resize(static_cast<size_t>(n_rows) * k);
  rows.logits_.resize(rows.ids_.size());
  rows.kept_.resize(n_rows);
  std::vector<int> order(k);
  std::vector<int32_t> seen(k);
  for (int r = 0; r < n_rows; ++r) {
    const int32_t* row_ids = ids + static_cast<size_t>(r) * k;
    const float* row_logits = logits + static_cast<size_t>(r) * k;
    for (int j = 0; j < k; ++j) {
      if (row_ids[j] < -1 || row_ids[j] >= n_vocab) {
        return Status::Error(
            StrFormat("row %d: id %d is outside the vocabulary [0, %d) (-1 "
                      "pads a row)",
                      r, row_ids[j], n_vocab));
      }
    }
    seen.assign(row_ids, row_ids + k);
    std::sort(seen.begin(), seen.end());
    for (int j = 1; j < k; ++j) {
      if (seen[j] >= 0 && seen[j] == seen[j - 1]) {
        return Status::Error(StrFormat("row %d: token %d appears twice", r, seen[j]));
      }
    }
    for (int j = 0; j < k; ++j) order[j] = j;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return RanksBefore(row_ids[a], row_logits[a], row_ids[b], row_logits[b]);
    });
    int kept = 0;
    for (int j = 0; j < k; ++j) {
      rows.ids_[static_cast<size_t>(r) * k + j] = row_ids[order[j]];
      rows.logits_[static_cast<size_t>(r) * k + j] = row_logits[order[j]];
      kept += row_ids[order[j]] >= 0;
    }
    rows.kept_[r] = kept;
  }
  return rows;
}

void HostRows::TopK(int row, int k, int32_t* ids, float* scores) const {
  const int n = std::min(k, kept_[row]);
  const size_t at = static_cast<size_t>(row) * k_;
  std::copy(ids_.begin() + at, ids_.begin() + at + n, ids);
  RankedSoftmax(logits_.data() + at, n, scores);
  std::fill(ids + n, ids + k, -1);
  std::fill(scores + n, scores + k, 0.0f);
}

StatusOr<std::unique_ptr<HostDrafter>> HostDrafter::Make(int n_vocab, const std::string& method,
                                                         uint64_t fingerprint) {
  if (n_vocab < 1 || n_vocab > kMaxVocab) {
    return Status::Error(StrFormat("n_vocab = %d, expected 1..%d", n_vocab, kMaxVocab));
  }
  std::unique_ptr<HostDrafter> d(new HostDrafter());
  GOOSE_RETURN_IF_ERROR(ParseSpecVariant(method, &d->spec_));
  d->method_ = &MethodOf(d->spec_);
  if (d->method_->needs_draft_model()) {
    return Status::Error("method '" + EscapeForMessage(method) +
                         "' drafts with a draft model, which the drafter on its own has not");
  }
  d->env_.n_vocab = n_vocab;
  d->env_.target_fingerprint = fingerprint;
  d->per_request_learned_ = d->method_->uses_table() && !d->method_->KeepsTable(d->spec_);
  d->learned_ = d->method_->NewLearned(d->spec_, d->env_);
  return d;
}

std::unique_ptr<DraftRequest> HostDrafter::Begin(std::span<const int32_t> prompt,
                                                 DraftError* error) {
  if (prompt.empty()) {
    *error = ArgumentError("empty prompt: the drafter needs at least one token");
    return nullptr;
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= n_vocab()) {
      *error = ArgumentError(
          StrFormat("prompt[%zu] = %d is outside the vocabulary [0, %d)", i, prompt[i], n_vocab()));
      return nullptr;
    }
  }
  return std::unique_ptr<DraftRequest>(new DraftRequest(*this, prompt));
}

int HostDrafter::top_k() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return learned_->table ? learned_->table->k() : 0;
}

SpecStats HostDrafter::stats() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return total_;
}

Status HostDrafter::Save(const std::string& dir) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  LearnedCache cache(dir, env_.target_fingerprint, /*max_bytes=*/UINT64_MAX);
  return cache.Save(spec_, *learned_);
}

Status HostDrafter::Load(const std::string& dir, bool* requests_open) {
  *requests_open = false;
  LearnedCache cache(dir, env_.target_fingerprint, /*max_bytes=*/UINT64_MAX);
  const std::filesystem::path base = std::filesystem::path(cache.model_dir()) / LearnedKey(spec_);
  std::error_code ec;
  if (!std::filesystem::exists(base.string() + ".state", ec) &&
      !std::filesystem::exists(base.string() + ".table", ec)) {
    return Status::Error("nothing saved for " + LearnedKey(spec_) + " under " + cache.model_dir() +
                         " (another model fingerprint, or variant?)");
  }
  std::unique_ptr<Learned> fresh = method_->NewLearned(spec_, env_);
  cache.Load(spec_, fresh.get());
  std::string problems;
  for (const std::string& w : cache.TakeWarnings()) problems += (problems.empty() ? "" : "; ") + w;
  if (!problems.empty()) return Status::Error(problems);
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (open_requests() > 0) {  // (their drafters hold references into learned_)
    *requests_open = true;
    return Status::Error(
        StrFormat("%d requests are open: load before they begin", open_requests()));
  }
  learned_ = std::move(fresh);
  return Status::Ok();
}

DraftRequest::DraftRequest(HostDrafter& d, std::span<const int32_t> prompt)
    : d_(d),
      own_(d.per_request_learned_ ? d.method_->NewLearned(d.spec_, d.env_) : nullptr),
      learned_(own_ ? *own_ : *d.learned_),
      prompt_(prompt.begin(), prompt.end()) {
  std::unique_lock<std::shared_mutex> lock(d_.mu_);
  drafter_ = d_.method_->NewDrafter(d_.spec_, learned_, d_.env_);
  drafter_->Begin(prompt_);
  ++d_.open_;  // last, under the lock: Load sees every request that began before it
}

DraftRequest::~DraftRequest() { --d_.open_; }

std::optional<DraftError> DraftRequest::ObservePrompt(int first_row, const HostRows& rows) {
  if (started_) {
    return StateError("the prompt's rows come before the first commit (the first token)");
  }
  const int n_prompt = static_cast<int>(prompt_.size());
  if (first_row < 0 || rows.n_rows() < 1 || first_row > n_prompt - rows.n_rows()) {
    return ArgumentError(StrFormat("rows [%d, %d) are not within the prompt's %d rows", first_row,
                                   first_row + rows.n_rows(), n_prompt));
  }
  std::unique_lock<std::shared_mutex> lock(d_.mu_);
  drafter_->ObservePrefill(prompt_, first_row, first_row + rows.n_rows(), rows);
  return std::nullopt;
}

std::optional<DraftError> DraftRequest::SetPrediction(std::span<const int32_t> tokens) {
  if (started_) return StateError("the prediction comes before the first commit");
  if (predicted_) return StateError("the request has its prediction already");
  if (tokens.empty()) return ArgumentError("an empty prediction");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab()) {
      return ArgumentError(
          StrFormat("tokens[%zu] = %d is outside the vocabulary [0, %d)", i, tokens[i], n_vocab()));
    }
  }
  drafter_->SetPrediction(tokens);  // (the drafter's own state: no lock)
  predicted_ = true;
  return std::nullopt;
}

std::optional<DraftError> DraftRequest::Propose(int budget, const DraftTree** tree) {
  if (budget < 1 || budget > HostDrafter::kMaxBudget) {
    return ArgumentError(StrFormat("budget = %d, expected 1..%d nodes (root included)", budget,
                                   HostDrafter::kMaxBudget));
  }
  if (!started_) return StateError("nothing committed yet: commit the prompt's token first");
  if (stopped_) return StateError("the request ended on a stop token");
  if (open_) return StateError("the last proposal is still open: commit it first");
  in_.budget = budget;
  if (d_.method_->propose_reads_only()) {
    std::shared_lock<std::shared_mutex> lock(d_.mu_);
    proposal_ = drafter_->Propose(in_);
  } else {
    std::unique_lock<std::shared_mutex> lock(d_.mu_);
    proposal_ = drafter_->Propose(in_);
  }
  // A plain step where a method has nothing to draft (the engine's convention, too).
  if (proposal_.tree.size() == 0) proposal_.tree.Reset(in_.anchor);
  proposal_.tree.Truncate(budget);
  if (proposal_.tree.size() == 1) proposal_.route = Route::kAr;
  const std::string broken = proposal_.tree.CheckInvariants();
  if (!broken.empty() || proposal_.tree.tokens[0] != in_.anchor) {
    return DraftError{Misuse::kInternal, "the method proposed a malformed tree: " + broken};
  }
  open_ = true;
  rows_.reset();
  *tree = &proposal_.tree;
  return std::nullopt;
}

std::optional<DraftError> DraftRequest::Observe(HostRows rows) {
  if (!open_) return StateError("no proposal is open");
  if (rows_) return StateError("the open proposal's rows were already observed");
  DraftTree& tree = proposal_.tree;
  if (rows.n_rows() < 1 || rows.n_rows() > tree.size()) {
    return ArgumentError(
        StrFormat("n_rows = %d, expected 1..%d (the tree's nodes)", rows.n_rows(), tree.size()));
  }
  if (rows.n_rows() < tree.size()) {  // the host scored a prefix: the tree it verified
    tree.Truncate(rows.n_rows());
    if (tree.size() == 1) proposal_.route = Route::kAr;
    if (proposal_.values.size() > static_cast<size_t>(tree.size())) {
      proposal_.values.resize(tree.size());
    }
  }
  rows_ = std::move(rows);
  return std::nullopt;
}

std::optional<DraftError> DraftRequest::CheckPath(std::span<const int32_t> accepted,
                                                  int32_t bonus) const {
  const DraftTree& tree = proposal_.tree;
  int parent = 0;
  for (size_t j = 0; j < accepted.size(); ++j) {
    const int32_t v = accepted[j];
    if (v < 1 || v >= tree.size()) {
      return ArgumentError(
          StrFormat("accepted[%zu] = %d is not a node of the %d-node tree "
                    "(besides the root, 0)",
                    j, v, tree.size()));
    }
    if (tree.parents[v] != parent) {
      return ArgumentError(StrFormat("accepted[%zu] = %d is not a child of %s %d", j, v,
                                     j == 0 ? "the root" : "the node before it,", parent));
    }
    parent = v;
  }
  if (bonus < -1 || bonus >= n_vocab()) {
    return ArgumentError(
        StrFormat("bonus = %d, expected a token in [0, %d) or -1 (stopped)", bonus, n_vocab()));
  }
  return std::nullopt;
}

std::optional<DraftError> DraftRequest::Commit(std::span<const int32_t> accepted, int32_t bonus) {
  if (stopped_) return StateError("the request ended on a stop token");
  if (open_) {
    if (auto error = CheckPath(accepted, bonus)) return error;
    CommitTree(accepted, bonus);
    return std::nullopt;
  }
  if (!accepted.empty()) {
    return StateError("no proposal is open: commit a token alone (as bonus, no accepted nodes)");
  }
  if (bonus < 0 || bonus >= n_vocab()) {
    return ArgumentError(StrFormat("bonus = %d, expected a token in [0, %d)", bonus, n_vocab()));
  }
  CommitToken(bonus);
  return std::nullopt;
}

// What the engine's Sequence does after its walk: the drafter observes the rows and the
// accepted path, the statistics count the tree, the committed tokens join the context.
void DraftRequest::CommitTree(std::span<const int32_t> accepted, int32_t bonus) {
  const DraftTree& tree = proposal_.tree;
  AcceptResult acc;
  bool has_spine = false, has_branch = false;
  for (int32_t v : accepted) {
    acc.path.push_back(v);
    acc.tokens.push_back(tree.tokens[v]);
    has_spine |= IsSpineSource(tree.source[v]);
    has_branch |= tree.source[v] == NodeSource::kBranch;
  }
  acc.spine_continuation = has_spine && has_branch;
  acc.bonus = bonus;
  acc.stopped = bonus < 0;
  if (bonus >= 0) acc.tokens.push_back(bonus);
  {
    std::unique_lock<std::shared_mutex> lock(d_.mu_);
    static const NoRows kNoRows;
    drafter_->Observe(in_, proposal_, rows_ ? static_cast<const ScoredRows&>(*rows_) : kNoRows,
                      acc);
    AccumulateStats(tree, proposal_.route, acc, &learned_.stats);
    AccumulateStats(tree, proposal_.route, acc, &d_.total_);
    drafter_->Commit(acc.tokens);
  }
  AccumulateStats(tree, proposal_.route, acc, &stats_);
  in_.anchor_prev = acc.path.empty() ? in_.anchor : tree.tokens[acc.path.back()];
  in_.anchor = bonus;
  stopped_ = bonus < 0;
  open_ = false;
  rows_.reset();
}

void DraftRequest::CommitToken(int32_t token) {
  {
    const int32_t t[1] = {token};
    if (d_.method_->propose_reads_only()) {
      std::shared_lock<std::shared_mutex> lock(d_.mu_);
      drafter_->Commit(t);
    } else {
      std::unique_lock<std::shared_mutex> lock(d_.mu_);
      drafter_->Commit(t);
    }
  }
  in_.anchor_prev = started_ ? in_.anchor : prompt_.back();
  in_.anchor = token;
  started_ = true;
}

}  // namespace goose::capi
