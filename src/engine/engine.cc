#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tree/best_first_builder.h"
#include "tree/draft_tree.h"
#include "util/check.h"
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

Engine::Engine(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model), pool_(pool), ctx_(std::make_unique<Context>(model, n_ctx, pool)) {}

Engine::~Engine() = default;

int Engine::n_ctx() const { return ctx_->n_ctx(); }

TransitionTable* Engine::table(SpecMethod m) {
  if (m == SpecMethod::kNone || m == SpecMethod::kPld) return nullptr;
  auto& t = tables_[static_cast<int>(m)];
  if (!t) {
    // TR's reference table is unigram-only; the others carry GOOSE's bigram tier.
    const bool bigram = m != SpecMethod::kTr;
    t = std::make_unique<TransitionTable>(model_.config().n_vocab, kTableK, 16, bigram);
  }
  return t.get();
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
  if (static_cast<int>(prompt.size()) >= ctx_->n_ctx()) {
    return Status::Error(StrFormat("prompt has %zu tokens but the context holds %d (raise -c)",
                                   prompt.size(), ctx_->n_ctx()));
  }
  if (params.n_predict <= 0) return GenerateResult{};

  const SpecParams& spec = params.spec;
  const SpecMethod method = spec.method;
  int budget = spec.budget > 0 ? spec.budget : DefaultBudget(method);
  const bool tuned_goose = method == SpecMethod::kGoose && !spec.paper_preset;
  const bool keep_table =
      spec.keep_table >= 0 ? spec.keep_table != 0
                           : (method == SpecMethod::kTr || tuned_goose);
  TransitionTable* table = this->table(method);
  if (table && !keep_table) table->Clear();

  const Sampler sampler(params.sampling);
  const Tokenizer& tok = model_.tokenizer();
  auto is_stop = [&](int32_t t) { return !params.ignore_eos && tok.IsEog(t); };

  GenerateResult result;
  SpecStats& stats = result.stats;
  std::vector<int32_t> ids(kTableK);
  std::vector<float> scores(kTableK);
  auto harvest_row = [&](const float* logits, int32_t prev, int32_t token) {
    TopK(logits, n_vocab, kTableK, ids.data(), scores.data());
    table->Harvest(prev, token, ids, scores);
  };

  // Prefill: one chain pass over the prompt; its last row gives generated token 1.
  auto t0 = std::chrono::steady_clock::now();
  ctx_->Truncate(0);
  GOOSE_RETURN_IF_ERROR(ctx_->ForwardChain(prompt));
  const int n_prompt = static_cast<int>(prompt.size());
  if (table) {
    // Convention 4: GOOSE-family tables harvest every prompt row, TR only the last one.
    const int first = method == SpecMethod::kTr ? n_prompt - 1 : 0;
    for (int i = first; i < n_prompt; ++i) {
      harvest_row(ctx_->logits(i), i > 0 ? prompt[i - 1] : -1, prompt[i]);
    }
  }
  const int32_t first_token = sampler.Sample(ctx_->logits(n_prompt - 1), n_vocab, n_prompt);
  {
    std::vector<int32_t> all(n_prompt);
    for (int i = 0; i < n_prompt; ++i) all[i] = i;
    ctx_->KeepPath(all);
  }
  result.prefill_seconds = Seconds(t0);
  t0 = std::chrono::steady_clock::now();

  ContextMatcher matcher;
  if (method == SpecMethod::kPld || method == SpecMethod::kGoose) {
    matcher.Append(prompt);
    matcher.Append(first_token);
  }
  std::vector<int32_t>& out = result.tokens;
  out.push_back(first_token);
  bool stopped = is_stop(first_token);
  if (on_tokens && !on_tokens(std::span<const int32_t>(&first_token, 1))) stopped = true;

  int32_t anchor = first_token;
  int32_t anchor_prev = prompt.back();
  double spine_ema = 0.5;  // §1.8
  const SpecStats& method_history = method_stats_[static_cast<int>(method)];
  GooseParams goose;
  goose.base_budget = budget;

  DraftTree tree;
  while (!stopped && static_cast<int>(out.size()) < params.n_predict) {
    const int n_past = ctx_->n_past();
    const int room = ctx_->n_ctx() - n_past;
    if (room < 1) {
      result.hit_context_limit = true;
      break;
    }
    // --- sources propose, a builder shapes the tree ---
    bool root_row_has_prev = true;  // chain route and AR step: row 0's predecessor is known
    int spine_class = -1;           // tuned GOOSE: match class of this cycle's spine
    if (spec.choose_budget) {
      SpecStats history = method_history;
      history.Merge(stats);
      budget = std::clamp(spec.choose_budget(history), 1, 128);
      goose.base_budget = budget;
    }
    tree.Reset(anchor);
    // A chosen budget of 1 means "a plain step pays best": no method may draft then.
    const SpecMethod cycle_method = spec.choose_budget && budget == 1 ? SpecMethod::kNone : method;
    switch (cycle_method) {
      case SpecMethod::kNone:
        break;
      case SpecMethod::kPld: {
        const std::vector<int32_t> s = matcher.ProposePld(3, 1, 10);
        tree = BuildChain(anchor, s, budget);
        break;
      }
      case SpecMethod::kTr:
        tree = BuildTrTree(anchor, *table);
        root_row_has_prev = false;
        break;
      case SpecMethod::kBalanced:
        if (table->HasSuccessors(anchor, anchor_prev)) {
          BalancedParams bp;
          bp.budget = budget;
          bp.k = spec.branch_k;
          tree = BuildBalancedTree(anchor, anchor_prev, *table, bp);
          root_row_has_prev = false;
        }
        break;
      case SpecMethod::kSequoia:
        if (table->HasSuccessors(anchor, anchor_prev)) {
          // Re-solve the DP as the measured per-rank acceptance moves (every 16 cycles).
          const int64_t seen = method_history.cycles + stats.cycles;
          if (sequoia_shape_cycles_ < 0 || seen - sequoia_shape_cycles_ >= 16 ||
              static_cast<int>(sequoia_shape_.paths.size()) + 1 != budget) {
            SpecStats merged = method_history;
            merged.Merge(stats);
            sequoia_shape_ = SequoiaDp(SequoiaAcceptance(merged), budget, 6);
            sequoia_shape_cycles_ = seen;
          }
          tree = BuildFromTemplate(anchor, anchor_prev, sequoia_shape_, *table, 0.0f);
          root_row_has_prev = false;
        }
        break;
      case SpecMethod::kGoose: {
        if (tuned_goose) {
          // Best-first tree over measured acceptance (tree/best_first_builder.h).
          const ContextMatcher::Spine spine = matcher.ProposeSpine();
          if (!spine.tokens.empty() || table->HasSuccessors(anchor, anchor_prev)) {
            BestFirstParams bf;
            bf.budget = budget;
            bf.unigram_extras = spec.unigram_extras;
            bf.spine_class = spine.consensus ? 0 : 1;
            spine_class = bf.spine_class;
            tree = BuildBestFirstTree(anchor, anchor_prev, spine.tokens,
                                      goose_acceptance_.model(), *table, bf);
            root_row_has_prev = false;
          }
          break;
        }
        // §1.6 routing: tree route when the table knows the anchor, else chain, else AR.
        if (table->HasSuccessors(anchor, anchor_prev)) {
          const ContextMatcher::Spine spine = matcher.ProposeSpine();
          tree = BuildSpineTree(anchor, anchor_prev, spine.tokens, spine.confidence, spine_ema,
                                *table, goose);
          root_row_has_prev = false;
          if (tree.size() < 2) tree.Reset(anchor);
        } else {
          const ContextMatch m = matcher.Propose();
          if (!m.tokens.empty()) tree = BuildChain(anchor, m.tokens, 1 + m.tokens.size());
        }
        break;
      }
    }
    tree.Truncate(room);
    if (tree.size() == 1) root_row_has_prev = true;

    // --- the model scores the tree ---
    GOOSE_RETURN_IF_ERROR(ctx_->Forward(tree.tokens, tree.parents));

    // --- the verifier accepts: sample each visited node at its own position ---
    auto target = [&](int node) {
      return sampler.Sample(ctx_->logits(node), n_vocab, n_past + tree.depth[node] + 1);
    };
    const AcceptResult acc = WalkTree(tree, target, is_stop);

    // --- harvest every evaluated row (rejected nodes included), in node order ---
    if (table) {
      for (int i = 0; i < tree.size(); ++i) {
        int32_t prev = -1;
        if (i == 0) {
          prev = root_row_has_prev ? anchor_prev : -1;
        } else {
          prev = tree.tokens[tree.parents[i]];
        }
        harvest_row(ctx_->logits(i), prev, tree.tokens[i]);
      }
    }

    // --- the engine commits: KV keeps root + accepted path ---
    std::vector<int32_t> keep;
    keep.reserve(acc.path.size() + 1);
    keep.push_back(0);
    keep.insert(keep.end(), acc.path.begin(), acc.path.end());
    ctx_->KeepPath(keep);
    AccumulateStats(tree, acc, &stats);

    if (spine_class >= 0) goose_acceptance_.Update(tree, acc, spine_class);
    if (method == SpecMethod::kGoose && InferRoute(tree) == Route::kSpineTree) {
      int spine_nodes = 0, spine_accepted = 0;
      for (int i = 1; i < tree.size(); ++i) spine_nodes += tree.source[i] == NodeSource::kSpine;
      for (int32_t v : acc.path) spine_accepted += tree.source[v] == NodeSource::kSpine;
      if (spine_nodes > 0) {
        spine_ema = 0.3 * (static_cast<double>(spine_accepted) / spine_nodes) + 0.7 * spine_ema;
      }
    }

    const size_t before = out.size();
    for (int32_t t : acc.tokens) {
      if (static_cast<int>(out.size()) >= params.n_predict) break;
      out.push_back(t);
    }
    if (method == SpecMethod::kPld || method == SpecMethod::kGoose) matcher.Append(acc.tokens);
    anchor_prev = acc.path.empty() ? anchor : tree.tokens[acc.path.back()];
    anchor = acc.bonus;
    stopped = acc.stopped;
    if (on_tokens && out.size() > before &&
        !on_tokens(std::span<const int32_t>(out.data() + before, out.size() - before))) {
      stopped = true;
    }
  }
  result.decode_seconds = Seconds(t0);
  method_stats_[static_cast<int>(method)].Merge(stats);
  total_.Merge(stats);
  return result;
}

}  // namespace goose
