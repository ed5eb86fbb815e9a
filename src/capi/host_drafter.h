// HostDrafter: goose's drafter without a model, for an engine that verifies goose's trees with
// its own model and KV cache (the goose_drafter_* functions of include/goose/goose.h).
//
// Contract
// - A HostDrafter holds one method variant (ParseSpecVariant) and what it learns across
//   requests (its Learned: table, acceptance model, statistics); a variant that does not keep
//   its table (+cold, goose+paper) gets a Learned per request instead, as in the engine.
// - DraftRequest is one request: the method's per-request Drafter (context matcher, ...) and
//   the open cycle. It runs the engine's cycle (engine/sequence.h) with the host in the
//   engine's place: Begin(prompt) -> (SetPrediction) -> ObservePrompt (prefill rows) ->
//   Commit(first token) -> [Propose -> (host scores, walks) -> Observe(rows) -> Commit(path,
//   bonus)]*. Given the same rows (each row's top-k logits, in any order) it proposes the
//   trees the engine would.
// - HostRows: a host's top-k rows, checked (ids in [-1, n_vocab), no token twice in a row) and
//   put in TopK's order (logit descending, lower id first, NaN last), scored by RankedSoftmax:
//   the ids and scores a Context's TopK gives for the same logits.
// - Locking: one std::shared_mutex guards the shared Learned and the drafter's statistics.
//   Propose (and a commit without a tree) hold it shared when the method's Propose only reads
//   its Learned (Method::propose_reads_only), else exclusively; Begin, ObservePrompt and a
//   tree's Commit (Observe, statistics, Commit: where the drafter learns) hold it exclusively.
//   A DraftRequest is used by one thread at a time; its HostDrafter must outlive it.
// - Errors are Status (the C layer maps them): bad arguments and calls out of order, never a
//   GOOSE_CHECK.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "method/method.h"
#include "util/status.h"

namespace goose::capi {

class HostRows : public ScoredRows {
 public:
  static constexpr int kMaxK = 1024;
  // rows x k entries of ids and logits (row-major).
  static StatusOr<HostRows> Make(const int32_t* ids, const float* logits, int n_rows, int k,
                                 int n_vocab);
  int n_rows() const override { return n_rows_; }
  void TopK(int row, int k, int32_t* ids, float* scores) const override;

 private:
  int n_rows_ = 0, k_ = 0;
  std::vector<int32_t> ids_;   // [n_rows, k], each row in TopK's order, padding (-1) last
  std::vector<int32_t> kept_;  // [n_rows]: entries of each row that are not padding
  std::vector<float> logits_;  // [n_rows, k]
};

// The error kinds the C layer distinguishes.
enum class Misuse { kArgument, kState, kInternal };
struct DraftError {
  Misuse kind;
  std::string message;
};

class DraftRequest;

class HostDrafter {
 public:
  static constexpr int kMaxVocab = 1 << 24;
  static constexpr int kMaxBudget = 128;

  static StatusOr<std::unique_ptr<HostDrafter>> Make(int n_vocab, const std::string& method,
                                                     uint64_t fingerprint);
  // Null and *error when the prompt is bad (empty, ids outside the vocabulary).
  std::unique_ptr<DraftRequest> Begin(std::span<const int32_t> prompt, DraftError* error);

  // Save: goose's learned-state files under dir (engine/learned_cache.h). Load: the same back,
  // replacing what was learned, or an error and nothing changed; not while requests are open.
  Status Save(const std::string& dir) const;
  Status Load(const std::string& dir, bool* requests_open);

  SpecStats stats() const;
  int n_vocab() const { return env_.n_vocab; }
  int top_k() const;  // candidates per row the method keeps (0: it learns nothing from rows)
  std::string variant() const { return SpecVariantKey(spec_); }
  int open_requests() const { return open_.load(); }

 private:
  friend class DraftRequest;
  HostDrafter() = default;

  SpecParams spec_;
  const Method* method_ = nullptr;
  DrafterEnv env_;
  bool per_request_learned_ = false;
  std::unique_ptr<Learned> learned_;  // shared by the requests (unless per_request_learned_)
  mutable std::shared_mutex mu_;      // guards learned_ (its contents) and total_
  SpecStats total_;                   // every tree committed through this drafter
  std::atomic<int> open_{0};
};

class DraftRequest {
 public:
  ~DraftRequest();

  std::optional<DraftError> ObservePrompt(int first_row, const HostRows& rows);
  // The request's predicted output (Drafter::SetPrediction): once, before the first commit.
  std::optional<DraftError> SetPrediction(std::span<const int32_t> tokens);
  // The tree, valid until the next Propose, Commit or the request's end.
  std::optional<DraftError> Propose(int budget, const DraftTree** tree);
  std::optional<DraftError> Observe(HostRows rows);
  std::optional<DraftError> Commit(std::span<const int32_t> accepted, int32_t bonus);
  const SpecStats& stats() const { return stats_; }
  HostDrafter& drafter() { return d_; }
  int n_vocab() const { return d_.n_vocab(); }

 private:
  friend class HostDrafter;
  DraftRequest(HostDrafter& d, std::span<const int32_t> prompt);
  std::optional<DraftError> CheckPath(std::span<const int32_t> accepted, int32_t bonus) const;
  void CommitTree(std::span<const int32_t> accepted, int32_t bonus);
  void CommitToken(int32_t token);

  HostDrafter& d_;
  std::unique_ptr<Learned> own_;  // the request's Learned, for variants without a kept table
  Learned& learned_;
  std::unique_ptr<Drafter> drafter_;
  std::vector<int32_t> prompt_;
  CycleInput in_;
  Proposal proposal_;
  bool open_ = false;             // a proposal awaits its commit
  bool started_ = false;          // the first token is committed
  bool stopped_ = false;          // a commit ended on a stop token
  bool predicted_ = false;        // SetPrediction ran
  std::optional<HostRows> rows_;  // the open proposal's scored rows, if the host gave them
  SpecStats stats_;
};

}  // namespace goose::capi
