#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tree/best_first_builder.h"
#include "tree/draft_tree.h"
#include "util/check.h"
#include "util/rng.h"
#include "verify/verifier.h"

namespace goose {

namespace {

constexpr int kTableK = 10;

struct MethodName {
  SpecMethod method;
  const char* name;
};
constexpr MethodName kMethodNames[] = {
    {SpecMethod::kNone, "none"},         {SpecMethod::kPld, "pld"},
    {SpecMethod::kTr, "tr"},             {SpecMethod::kBalanced, "balanced"},
    {SpecMethod::kSequoia, "sequoia"},   {SpecMethod::kGoose, "goose"},
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Sequoia's per-rank acceptance p_k from measured branch statistics, blended with a prior
// (worth kPriorParents reached parents) so the first trees are sensible.
std::vector<double> SequoiaAcceptance(const SpecStats& s) {
  static constexpr double kPrior[kTableK] = {0.35, 0.12, 0.06, 0.04, 0.03,
                                             0.02, 0.015, 0.01, 0.01, 0.01};
  constexpr double kPriorParents = 20;
  const double n = static_cast<double>(s.branch_parents_reached);
  std::vector<double> p(kTableK);
  for (int k = 0; k < kTableK; ++k) {
    const double hits = static_cast<double>(s.accepted_rank[static_cast<int>(NodeSource::kBranch)][k]);
    p[k] = (hits + kPrior[k] * kPriorParents) / (n + kPriorParents);
  }
  return p;
}

}  // namespace

bool ParseSpecMethod(std::string_view name, SpecMethod* out) {
  for (const MethodName& m : kMethodNames) {
    if (name == m.name) {
      *out = m.method;
      return true;
    }
  }
  return false;
}

const char* SpecMethodName(SpecMethod m) {
  for (const MethodName& e : kMethodNames) {
    if (e.method == m) return e.name;
  }
  return "?";
}

Status ParseSpecVariant(std::string_view name, SpecParams* out) {
  SpecParams p;
  size_t start = 0;
  bool first = true;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('+', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (first) {
      if (!ParseSpecMethod(part, &p.method)) {
        return Status::Error("unknown method '" + std::string(part) +
                             "' (none|pld|tr|balanced|sequoia|goose)");
      }
      first = false;
    } else if (part == "paper" && p.method == SpecMethod::kGoose) {
      p.paper_preset = true;
    } else if (part == "keep" || part == "cold") {
      p.keep_table = part == "keep" ? 1 : 0;
    } else if ((part == "k3" || part == "k5") && p.method == SpecMethod::kBalanced) {
      p.branch_k = part == "k3" ? 3 : 5;
    } else if (part == "noextras" && p.method == SpecMethod::kGoose) {
      p.unigram_extras = false;
    } else {
      return Status::Error("unknown modifier '" + std::string(part) + "' in '" +
                           std::string(name) + "' (paper, keep, cold, k3, k5, noextras)");
    }
    start = end + 1;
  }
  *out = p;
  return Status::Ok();
}

namespace {

bool UsesTable(SpecMethod m) { return m != SpecMethod::kNone && m != SpecMethod::kPld; }
bool TunedGoose(const SpecParams& spec) {
  return spec.method == SpecMethod::kGoose && !spec.paper_preset;
}
bool KeepsTable(const SpecParams& spec) {
  if (spec.keep_table >= 0) return spec.keep_table != 0;
  return spec.method == SpecMethod::kTr || TunedGoose(spec);  // convention 6
}

}  // namespace

std::string SpecVariantKey(const SpecParams& spec) {
  std::string key = SpecMethodName(spec.method);
  if (!UsesTable(spec.method)) return key;
  if (spec.method == SpecMethod::kGoose && spec.paper_preset) key += "+paper";
  if (spec.method == SpecMethod::kBalanced) key += "+k" + std::to_string(spec.branch_k);
  if (TunedGoose(spec) && !spec.unigram_extras) key += "+noextras";
  return key + (KeepsTable(spec) ? "+keep" : "+cold");
}

uint64_t ModelFingerprint(const Model& model) {
  uint64_t h = 0x676f6f7365ull;  // "goose"
  auto mix = [&h](uint64_t v) { h = Mix64(h ^ Mix64(v)); };
  auto mix_bytes = [&mix](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t word = n;
    for (size_t i = 0; i < n; ++i) {
      word = (word << 8) | p[i];
      if (i % 8 == 7) mix(word);
    }
    mix(word);
  };
  const LlamaConfig& c = model.config();
  mix_bytes(c.arch.data(), c.arch.size());
  for (int64_t v : {c.n_vocab, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff,
                    c.n_ctx_train, c.n_rot}) {
    mix(static_cast<uint64_t>(v));
  }
  // The tensor directory and the first bytes of every tensor: two models of one shape (say, two
  // fine-tunes) differ there, and hashing a few KiB costs nothing at load time.
  constexpr uint64_t kSampleBytes = 256;
  for (const GgufTensorInfo& t : model.gguf().tensors()) {
    mix_bytes(t.name.data(), t.name.size());
    for (int64_t d : t.dims) mix(static_cast<uint64_t>(d));
    mix(static_cast<uint64_t>(t.dtype));
    mix(t.offset);
    mix(t.n_bytes);
    if (t.data != nullptr) mix_bytes(t.data, std::min(t.n_bytes, kSampleBytes));
  }
  return h;
}

int DefaultBudget(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone:
      return 1;
    case SpecMethod::kPld:
      return 11;  // root + PLD's 10 tokens
    case SpecMethod::kTr:
      return 81;  // TR's fixed template (convention 16)
    default:
      return 60;  // GOOSE's B0, and the same budget for the balanced/Sequoia controls
  }
}

// Everything a method variant learns across requests.
struct Engine::MethodState {
  std::unique_ptr<TransitionTable> table;  // nullptr for none / pld
  SpecStats stats;  // every cycle so far (Sequoia's per-rank acceptance, the auto budget)
  AcceptanceTracker goose_acceptance;  // tuned GOOSE: per-edge acceptance
  SequoiaShape sequoia_shape;
  int64_t sequoia_shape_cycles = -1;
  int sequoia_budget = 0;
};

Engine::Engine(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model),
      pool_(pool),
      ctx_(std::make_unique<Context>(model, n_ctx, pool)),
      fingerprint_(ModelFingerprint(model)) {}

Engine::~Engine() = default;

int Engine::n_ctx() const { return ctx_->n_ctx(); }

Engine::MethodState& Engine::State(const SpecParams& spec) {
  std::unique_ptr<MethodState>& s = states_[SpecVariantKey(spec)];
  if (!s) {
    s = std::make_unique<MethodState>();
    if (UsesTable(spec.method)) {
      // TR's reference table is unigram-only; the others carry GOOSE's bigram tier.
      const bool bigram = spec.method != SpecMethod::kTr;
      s->table = std::make_unique<TransitionTable>(model_.config().n_vocab, kTableK, 16, bigram,
                                                   fingerprint_);
    }
  }
  return *s;
}

TransitionTable* Engine::table(const SpecParams& spec) { return State(spec).table.get(); }

TransitionTable* Engine::table(SpecMethod m) {
  SpecParams spec;
  spec.method = m;
  spec.keep_table = 1;
  return table(spec);
}

const SpecStats& Engine::variant_stats(const SpecParams& spec) { return State(spec).stats; }

struct Engine::Request {
  Request(const GenerateParams& p, MethodState& s)
      : params(p),
        method(p.spec.method),
        tuned_goose(TunedGoose(p.spec)),
        state(s),
        table(s.table.get()),
        sampler(p.sampling),
        topk_ids(kTableK),
        topk_scores(kTableK) {}

  const GenerateParams& params;
  SpecMethod method;
  bool tuned_goose;
  MethodState& state;
  TransitionTable* table;  // nullptr for none / pld
  Sampler sampler;
  ContextMatcher matcher;  // pool = prompt + committed tokens (PLD and GOOSE only)
  int32_t anchor = -1;     // last committed token, not yet in the KV cache
  int32_t anchor_prev = -1;
  SpineEma spine_ema;      // paper GOOSE's spine-acceptance EMA (§1.8), exact
  SpecStats stats;
  std::vector<int32_t> topk_ids;
  std::vector<float> topk_scores;

  bool UsesMatcher() const { return method == SpecMethod::kPld || method == SpecMethod::kGoose; }
  void Harvest(const float* logits, int n_vocab, int32_t prev, int32_t token) {
    TopK(logits, n_vocab, kTableK, topk_ids.data(), topk_scores.data());
    table->Harvest(prev, token, topk_ids, topk_scores);
  }
};

Engine::Draft Engine::ProposeTree(Request& r, int budget) {
  Draft d;
  d.tree.Reset(r.anchor);
  const TransitionTable* table = r.table;
  const SpecParams& spec = r.params.spec;
  // A chosen budget of 1 means "a plain step pays best": no method drafts then.
  const SpecMethod method = spec.choose_budget && budget == 1 ? SpecMethod::kNone : r.method;
  switch (method) {
    case SpecMethod::kNone:
      break;
    case SpecMethod::kPld:
      d.tree = BuildChain(r.anchor, r.matcher.ProposePld(3, 1, 10), budget);
      break;
    case SpecMethod::kTr:
      d.tree = BuildTrTree(r.anchor, *table);
      if (spec.budget > 0) d.tree.Truncate(budget);  // an explicit budget cuts the template
      d.root_row_has_prev = false;
      break;
    case SpecMethod::kBalanced:
      if (table->HasSuccessors(r.anchor, r.anchor_prev)) {
        BalancedParams bp;
        bp.budget = budget;
        bp.k = spec.branch_k;
        d.tree = BuildBalancedTree(r.anchor, r.anchor_prev, *table, bp);
        d.root_row_has_prev = false;
      }
      break;
    case SpecMethod::kSequoia:
      if (table->HasSuccessors(r.anchor, r.anchor_prev)) {
        // Re-solve the DP as the measured per-rank acceptance moves (every 16 cycles).
        MethodState& s = r.state;
        const int64_t seen = s.stats.cycles;
        if (s.sequoia_shape_cycles < 0 || seen - s.sequoia_shape_cycles >= 16 ||
            s.sequoia_budget != budget) {
          s.sequoia_shape = SequoiaDp(SequoiaAcceptance(s.stats), budget, 6);
          s.sequoia_shape_cycles = seen;
          s.sequoia_budget = budget;
        }
        d.tree = BuildFromTemplate(r.anchor, r.anchor_prev, s.sequoia_shape, *table, 0.0f);
        d.root_row_has_prev = false;
      }
      break;
    case SpecMethod::kGoose:
      if (r.tuned_goose) {
        // Best-first tree over measured acceptance (tree/best_first_builder.h).
        const ContextMatcher::Spine spine = r.matcher.ProposeSpine();
        if (!spine.tokens.empty() || table->HasSuccessors(r.anchor, r.anchor_prev)) {
          BestFirstParams bf;
          bf.budget = budget;
          bf.unigram_extras = spec.unigram_extras;
          bf.spine_class = spine.consensus ? 0 : 1;
          d.tree = BuildBestFirstTree(r.anchor, r.anchor_prev, spine.tokens,
                                      r.state.goose_acceptance.model(), *table, bf);
          d.root_row_has_prev = false;
          d.spine_class = bf.spine_class;
        }
      } else if (table->HasSuccessors(r.anchor, r.anchor_prev)) {
        // §1.6 routing: tree route when the table knows the anchor, else chain, else AR.
        const ContextMatcher::Spine spine = r.matcher.ProposeSpine();
        GooseParams goose;
        goose.base_budget = budget;
        d.tree = BuildSpineTree(r.anchor, r.anchor_prev, spine.tokens, spine.confidence,
                                r.spine_ema, *table, goose);
        d.root_row_has_prev = false;
      } else {
        const ContextMatch m = r.matcher.Propose();
        d.tree = BuildChain(r.anchor, m.tokens, 1 + static_cast<int>(m.tokens.size()));
      }
      break;
  }
  if (d.tree.size() == 1) d.root_row_has_prev = true;  // a plain step
  return d;
}

// Every evaluated row, rejected nodes included, in node order (so the last occurrence of a token
// wins); a row's bigram predecessor is its tree parent (conventions 5 and 7).
void Engine::HarvestRows(Request& r, const DraftTree& tree, bool root_row_has_prev) {
  const int n_vocab = model_.config().n_vocab;
  for (int i = 0; i < tree.size(); ++i) {
    const int32_t prev =
        i > 0 ? tree.tokens[tree.parents[i]] : (root_row_has_prev ? r.anchor_prev : -1);
    r.Harvest(ctx_->logits(i), n_vocab, prev, tree.tokens[i]);
  }
}

StatusOr<GenerateResult> Engine::Generate(std::span<const int32_t> prompt,
                                          const GenerateParams& params,
                                          const TokenCallback& on_tokens) {
  const int n_vocab = model_.config().n_vocab;
  if (prompt.empty()) return Status::Error("empty prompt: nothing to condition on");
  for (int32_t t : prompt) {
    if (t < 0 || t >= n_vocab) {
      return Status::Error(StrFormat("prompt token id %d is outside the vocabulary (0..%d)", t,
                                     n_vocab - 1));
    }
  }
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_prompt >= ctx_->n_ctx()) {
    return Status::Error(StrFormat("prompt has %d tokens but the context holds %d (raise -c)",
                                   n_prompt, ctx_->n_ctx()));
  }
  if (params.n_predict <= 0) return GenerateResult{};

  for (int32_t t : params.stop_tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::Error(StrFormat("stop token id %d is outside the vocabulary (0..%d)", t,
                                     n_vocab - 1));
    }
  }

  const SpecParams& spec = params.spec;
  const SpecMethod method = spec.method;
  MethodState& state = State(spec);
  Request r(params, state);
  if (r.table && !KeepsTable(spec)) r.table->Clear();
  const Tokenizer& tok = model_.tokenizer();
  const std::vector<int32_t>& extra_stops = params.stop_tokens;
  auto is_stop = [&](int32_t t) {
    return !params.ignore_eos &&
           (tok.IsEog(t) || std::find(extra_stops.begin(), extra_stops.end(), t) !=
                                extra_stops.end());
  };

  // Prefill: chain passes over the prompt, prefill_chunk tokens each; the last row gives
  // generated token 1.
  GenerateResult result;
  auto t0 = std::chrono::steady_clock::now();
  ctx_->Truncate(0);
  const int chunk = PrefillPassTokens(params, n_prompt);
  int32_t first = -1;
  for (int i0 = 0; i0 < n_prompt; i0 += chunk) {
    const int i1 = std::min(n_prompt, i0 + chunk);
    GOOSE_RETURN_IF_ERROR(ctx_->ForwardChain(prompt.subspan(i0, i1 - i0)));
    if (r.table) {
      // Convention 4: GOOSE-family tables harvest every prompt row, TR only the last one.
      for (int i = std::max(i0, method == SpecMethod::kTr ? n_prompt - 1 : 0); i < i1; ++i) {
        r.Harvest(ctx_->logits(i - i0), n_vocab, i > 0 ? prompt[i - 1] : -1, prompt[i]);
      }
    }
    if (i1 == n_prompt) first = r.sampler.Sample(ctx_->logits(i1 - 1 - i0), n_vocab, n_prompt);
    ctx_->KeepAll();
  }
  result.prefill_seconds = Seconds(t0);
  t0 = std::chrono::steady_clock::now();

  if (r.UsesMatcher()) {
    r.matcher.Append(prompt);
    r.matcher.Append(first);
  }
  std::vector<int32_t>& out = result.tokens;
  out.push_back(first);
  bool stopped = is_stop(first);
  if (on_tokens && !on_tokens(std::span<const int32_t>(&first, 1))) stopped = true;
  r.anchor = first;
  r.anchor_prev = prompt.back();
  SpecStats& history = state.stats;  // updated every cycle

  while (!stopped && static_cast<int>(out.size()) < params.n_predict) {
    const int n_past = ctx_->n_past();
    if (n_past >= ctx_->n_ctx()) {
      result.hit_context_limit = true;
      break;
    }
    int budget = spec.budget > 0 ? spec.budget : DefaultBudget(method);
    if (spec.choose_budget) budget = std::clamp(spec.choose_budget(history), 1, 128);
    // Sources propose, a builder shapes the tree ...
    Draft d = ProposeTree(r, budget);
    DraftTree& tree = d.tree;
    tree.Truncate(ctx_->n_ctx() - n_past);
    // ... the model scores it ...
    GOOSE_RETURN_IF_ERROR(ctx_->Forward(tree.tokens, tree.parents));
    // ... the verifier accepts, sampling each visited node at its own position ...
    auto target = [&](int node) {
      return r.sampler.Sample(ctx_->logits(node), n_vocab, n_past + tree.depth[node] + 1);
    };
    const AcceptResult acc = WalkTree(tree, target, is_stop);
    // ... and the engine commits: KV keeps the root and the accepted path.
    if (r.table) HarvestRows(r, tree, d.root_row_has_prev);
    if (params.on_cycle) params.on_cycle(tree, acc);
    std::vector<int32_t> keep = {0};
    keep.insert(keep.end(), acc.path.begin(), acc.path.end());
    ctx_->KeepPath(keep);

    AccumulateStats(tree, acc, &r.stats);
    AccumulateStats(tree, acc, &history);
    if (d.spine_class >= 0) state.goose_acceptance.Update(tree, acc, d.spine_class);
    if (method == SpecMethod::kGoose && !r.tuned_goose && InferRoute(tree) == Route::kSpineTree) {
      int spine_nodes = 0, spine_accepted = 0;
      for (int i = 1; i < tree.size(); ++i) spine_nodes += tree.source[i] == NodeSource::kSpine;
      for (int32_t v : acc.path) spine_accepted += tree.source[v] == NodeSource::kSpine;
      r.spine_ema.Update(spine_accepted, spine_nodes);
    }

    const size_t before = out.size();
    for (int32_t t : acc.tokens) {
      if (static_cast<int>(out.size()) >= params.n_predict) break;  // convention 2
      out.push_back(t);
    }
    if (r.UsesMatcher()) r.matcher.Append(acc.tokens);
    r.anchor_prev = acc.path.empty() ? r.anchor : tree.tokens[acc.path.back()];
    r.anchor = acc.bonus;
    stopped = acc.stopped;
    if (on_tokens && out.size() > before &&
        !on_tokens(std::span<const int32_t>(out.data() + before, out.size() - before))) {
      stopped = true;
    }
  }
  result.decode_seconds = Seconds(t0);
  result.stats = r.stats;
  total_.Merge(r.stats);
  return result;
}

}  // namespace goose
