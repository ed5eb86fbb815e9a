// Engine: the decoding loop. Plain decoding and every speculative method run through one cycle:
//   a source proposes -> a builder shapes a DraftTree rooted at the anchor -> Context::Forward
//   scores it -> WalkTree accepts (greedy or position-keyed sampling) -> KeepPath commits the
//   accepted KV entries -> every evaluated row is harvested into the transition table.
// A plain step is the one-node tree, so every method emits exactly the tokens plain decoding
// emits (the model's tree logits are bit-identical to one-token logits).
//
// Conventions follow docs/algorithms.md §9: the prompt is prefilled in one pass whose last row
// yields generated token 1; forward passes are counted after prefill (MAT = generated / passes);
// the last cycle may overshoot n_predict and is cut; stop tokens end generation unless
// ignore_eos.
//
// Not thread-safe: one Engine per thread. Transition tables persist across Generate() calls
// where the method keeps them (TR, and the tuned GOOSE), which is the point (hot start).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "draft/context_matcher.h"
#include "draft/transition_table.h"
#include "engine/acceptance_tracker.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "tree/tree_builders.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "verify/spec_stats.h"

namespace goose {

enum class SpecMethod { kNone, kPld, kTr, kBalanced, kSequoia, kGoose };
bool ParseSpecMethod(std::string_view name, SpecMethod* out);
const char* SpecMethodName(SpecMethod m);
struct SpecParams;
// A method with modifiers, for ablations and baselines by name: METHOD[+MOD...], MOD one of
// paper (GOOSE reference preset), keep / cold (tables kept across requests or reset),
// k3 / k5 (balanced branching), noextras (tuned GOOSE without unigram-row extra candidates).
// E.g. "goose+paper+keep", "balanced+k5", "goose+cold". Leaves the budget alone.
Status ParseSpecVariant(std::string_view name, SpecParams* out);

struct SpecParams {
  SpecMethod method = SpecMethod::kNone;
  int budget = 0;  // node budget incl. root; 0 = the method's default. TR: cuts its template.
  int branch_k = 3;            // balanced: children per node
  bool paper_preset = false;   // GOOSE: reference defaults and conventions (§1.9, §9) exactly
  // Keep transition tables across requests (hot start). -1 = method default (TR and tuned GOOSE
  // keep; paper GOOSE, balanced and Sequoia reset per request, as their references).
  int keep_table = -1;
  // Tuned GOOSE: also draft unigram-row tokens missing from a known bigram list.
  bool unigram_extras = true;
  // Cost-aware budget (--budget auto): if set, called before every cycle with the statistics
  // measured so far for this method (across requests, up to the previous cycle) and returns the
  // node budget to use.
  std::function<int(const SpecStats& history)> choose_budget;
};

struct GenerateParams {
  int n_predict = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  SpecParams spec;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (prompt excluded)
  SpecStats stats;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool hit_context_limit = false;
};

// Called with the newly committed tokens after every cycle; return false to stop early.
using TokenCallback = std::function<bool(std::span<const int32_t>)>;

class Engine {
 public:
  // n_ctx = 0: min(model context, 4096).
  Engine(const Model& model, int n_ctx, ThreadPool* pool);
  ~Engine();

  StatusOr<GenerateResult> Generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                    const TokenCallback& on_tokens = {});

  const Model& model() const { return model_; }
  int n_ctx() const;
  // Cumulative statistics over all requests since construction.
  const SpecStats& total_stats() const { return total_; }
  // The persistent table of a method (nullptr for none/pld); for --tr-cache save/load.
  TransitionTable* table(SpecMethod m);

 private:
  struct Request;   // per-request decoding state (engine.cc)
  struct Draft {    // one cycle's tree and how to harvest/learn from it
    DraftTree tree;
    bool root_row_has_prev = true;  // chain route / plain step: row 0's predecessor is known
    int spine_class = -1;           // tuned GOOSE: match class of the spine, else -1
  };
  Draft ProposeTree(Request& r, int budget);
  void HarvestRows(Request& r, const DraftTree& tree, bool root_row_has_prev);
  const Model& model_;
  ThreadPool* pool_;
  std::unique_ptr<Context> ctx_;
  // One table per method, so interleaved methods never feed each other's drafts.
  std::unique_ptr<TransitionTable> tables_[6];
  // Per-method statistics across requests (Sequoia's per-rank acceptance, the auto budget).
  SpecStats method_stats_[6];
  AcceptanceTracker goose_acceptance_;  // tuned GOOSE: per-edge acceptance across requests
  SequoiaShape sequoia_shape_;
  int64_t sequoia_shape_cycles_ = -1;
  int sequoia_budget_ = 0;
  SpecStats total_;
};

// Default node budget of a method (root included).
int DefaultBudget(SpecMethod m);

}  // namespace goose
