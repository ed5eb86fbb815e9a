// Engine: the decoding loop. Plain decoding and every speculative method run through one cycle:
//   a source proposes -> a builder shapes a DraftTree rooted at the anchor -> Context::Forward
//   scores it -> WalkTree accepts (greedy or position-keyed sampling) -> KeepPath commits the
//   accepted KV entries -> every evaluated row is harvested into the transition table.
// A plain step is the one-node tree, so every method emits exactly the tokens plain decoding
// emits (the model's tree logits are bit-identical to one-token logits).
//
// Conventions follow docs/algorithms.md §9: the prompt is prefilled in one pass whose last row
// yields generated token 1; forward passes are counted after prefill (MAT = generated / passes);
// the last cycle may overshoot n_predict and is cut; stop tokens (the model's end-of-generation
// tokens and GenerateParams::stop_tokens) end generation unless ignore_eos, right after the
// first one committed, even inside an accepted path.
//
// Not thread-safe: one Engine per thread. What a method learns across requests (transition
// table, statistics, builder state) belongs to its variant (SpecVariantKey: method, preset,
// branching, extras, table lifetime), so interleaved variants never feed each other's drafts.
// Tables persist across Generate() calls where the variant keeps them (TR, and the tuned GOOSE,
// by default), which is the point (hot start).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
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
// The canonical variant name of what `spec` learns across requests, table lifetime resolved:
// "none", "pld", "tr+keep", "balanced+k3+cold", "sequoia+cold", "goose+keep",
// "goose+noextras+keep", "goose+paper+cold", ... (budget and choose_budget are not part of it).
// ParseSpecVariant reads it back.
std::string SpecVariantKey(const SpecParams& spec);

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

// Called after every verified cycle (after the harvest, before the commit) with the scored tree
// and what the walk accepted; for tests and tracing.
using CycleCallback = std::function<void(const DraftTree& tree, const AcceptResult& accepted)>;

struct GenerateParams {
  int n_predict = 128;
  // The prompt is scored in passes of at most this many tokens (0: one pass). A pass keeps the
  // logits of every row it scores, n x n_vocab floats (2.5 GB for 4096 tokens of a 152k
  // vocabulary); every row's logits equal a one-token pass's, so the split changes no bit.
  int prefill_chunk = 256;
  SamplingParams sampling;
  bool ignore_eos = false;
  // Extra stop tokens, honoured like the model's end-of-generation tokens (unless ignore_eos).
  std::vector<int32_t> stop_tokens;
  SpecParams spec;
  CycleCallback on_cycle;
};

// Tokens in the largest prefill pass over a prompt of n_prompt tokens.
inline int PrefillPassTokens(const GenerateParams& p, int n_prompt) {
  return p.prefill_chunk > 0 ? std::min(p.prefill_chunk, n_prompt) : n_prompt;
}

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
  // The transition table requests with `spec` draft from (nullptr for none/pld); for
  // --tr-cache save/load. Load it, then run with keep_table = 1 (or a variant that keeps):
  // a variant that does not keep its table clears it at the start of every request.
  TransitionTable* table(const SpecParams& spec);
  // The table of `m` with keep_table = 1 and otherwise default modifiers (the tuned GOOSE for
  // kGoose, not the paper preset).
  TransitionTable* table(SpecMethod m);
  // Statistics of every request of the variant of `spec` so far (see SpecVariantKey).
  const SpecStats& variant_stats(const SpecParams& spec);
  // Identity of the model (config, tensor directory, a sample of every tensor's bytes); stored
  // in saved tables so a table never loads into another model's engine.
  uint64_t model_fingerprint() const { return fingerprint_; }

 private:
  struct Request;       // per-request decoding state (engine.cc)
  struct MethodState;   // what a variant learns across requests (engine.cc)
  struct Draft {    // one cycle's tree and how to harvest/learn from it
    DraftTree tree;
    bool root_row_has_prev = true;  // chain route / plain step: row 0's predecessor is known
    int spine_class = -1;           // tuned GOOSE: match class of the spine, else -1
  };
  Draft ProposeTree(Request& r, int budget);
  void HarvestRows(Request& r, const DraftTree& tree, bool root_row_has_prev);
  MethodState& State(const SpecParams& spec);
  const Model& model_;
  ThreadPool* pool_;
  std::unique_ptr<Context> ctx_;
  uint64_t fingerprint_;
  std::map<std::string, std::unique_ptr<MethodState>> states_;  // by SpecVariantKey
  SpecStats total_;
};

// See Engine::model_fingerprint().
uint64_t ModelFingerprint(const Model& model);

// Default node budget of a method (root included).
int DefaultBudget(SpecMethod m);

}  // namespace goose
