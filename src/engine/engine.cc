#include "engine/engine.h"

#include <algorithm>
#include <chrono>

#include "engine/idle_drafter.h"
#include "method/draft_model.h"
#include "util/check.h"
#include "util/escape.h"
#include "util/rng.h"
#include "verify/verifier.h"

namespace goose {

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

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

Learned& LearnedStore::Get(const SpecParams& spec, const DrafterEnv& env) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& [saved_spec, l] = learned_[LearnedKey(spec)];
  if (!l) {
    saved_spec = spec;
    l = MethodOf(spec).NewLearned(spec, env);
    if (cache_) cache_->Load(spec, l.get());
  }
  return *l;
}

Status LearnedStore::Save() {
  if (!cache_) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  Status status = Status::Ok();
  for (auto& [key, entry] : learned_) {
    std::lock_guard<std::mutex> variant_lock(entry.second->mu);
    if (entry.second->stats.cycles == 0) continue;
    if (Status st = cache_->Save(entry.first, *entry.second); !st.ok()) status = st;
  }
  return status;
}

Engine::Engine(const Model& model, int n_ctx, ThreadPool* pool,
               std::shared_ptr<LearnedStore> shared)
    : model_(model),
      ctx_(std::make_unique<Context>(model, n_ctx, pool)),
      shared_(shared ? std::move(shared) : std::make_shared<LearnedStore>()) {
  env_.target = &model;
  env_.target_fingerprint = ModelFingerprint(model);
  env_.pool = pool;
}

Engine::~Engine() = default;

Status Engine::SetDraftModel(const Model& draft, int shortlist) {
  GOOSE_RETURN_IF_ERROR(CheckDraftModel(model_, draft, ctx_->n_ctx()));
  draft_ctx_ = std::make_unique<Context>(draft, ctx_->n_ctx(), env_.pool);
  env_.draft = &draft;
  env_.draft_fingerprint = ModelFingerprint(draft);
  env_.draft_ctx = draft_ctx_.get();
  env_.draft_shortlist = shortlist;
  return Status::Ok();
}

int Engine::n_ctx() const { return ctx_->n_ctx(); }

Learned& Engine::learned(const SpecParams& request_spec) {
  const Method& m = MethodOf(request_spec);
  SpecParams spec = request_spec;
  if (m.needs_draft_model()) spec.draft_fingerprint = env_.draft_fingerprint;
  if (!m.uses_table() || m.KeepsTable(spec)) return shared_->Get(spec, env_);
  auto& [saved_spec, l] = private_[LearnedKey(spec)];
  if (!l) {
    saved_spec = spec;
    l = m.NewLearned(spec, env_);
    if (shared_->cache()) shared_->cache()->Load(spec, l.get());
  }
  return *l;
}

Status Engine::SaveLearned() {
  Status status = shared_->Save();
  if (!shared_->cache()) return status;
  for (auto& [key, entry] : private_) {
    if (entry.second->stats.cycles == 0) continue;
    if (Status st = shared_->cache()->Save(entry.first, *entry.second); !st.ok()) status = st;
  }
  return status;
}

void Engine::SetCostCurve(const std::vector<CostSample>& curve) {
  cost_curve_ = curve;
  observed_ = ObservedCosts(curve);
  observed_.Seed(prior_costs_);
  choosers_.clear();
}

std::vector<int64_t> Engine::ChosenBudgets(const SpecParams& spec) const {
  const auto it = choosers_.find(SpecVariantKey(spec));
  return it == choosers_.end() ? std::vector<int64_t>{} : it->second.chosen();
}

void Engine::LearnPassCosts(std::vector<CostSample> prior) {
  learn_costs_ = true;
  prior_costs_ = std::move(prior);
  observed_.Seed(prior_costs_);
}

std::vector<CostSample> Engine::CostCurve() const {
  return learn_costs_ ? observed_.Curve(prior_costs_) : cost_curve_;
}

Status Engine::CheckRequest(std::span<const int32_t> prompt, const GenerateParams& params) const {
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
  for (int32_t t : params.stop_tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::Error(StrFormat("stop token id %d is outside the vocabulary (0..%d)", t,
                                     n_vocab - 1));
    }
  }
  const Method* method = FindMethod(params.spec.method);
  if (method == nullptr) {
    return Status::Error("unknown method '" + EscapeForMessage(params.spec.method) + "' (" +
                         MethodNames() + ")");
  }
  if (method->needs_draft_model() && env_.draft == nullptr) {
    return Status::Error("--spec " + params.spec.method +
                         " needs a draft model: give one with -md DRAFT.gguf");
  }
  if (params.spec.auto_budget && cost_curve_.empty()) {
    return Status::Error("--budget auto needs a verify-cost curve (Engine::SetCostCurve)");
  }
  return Status::Ok();
}

// Chain passes over the prompt, prefill_chunk tokens each, each observed by the drafter; the
// last row gives generated token 1.
StatusOr<int32_t> Engine::Prefill(std::span<const int32_t> prompt, const GenerateParams& params,
                                  Drafter& drafter, std::mutex& learned_mu, Sampler& sampler) {
  const int n_prompt = static_cast<int>(prompt.size());
  {
    std::lock_guard<std::mutex> lock(learned_mu);
    drafter.Begin(prompt);
  }
  ctx_->Truncate(0);
  const int chunk = PrefillPassTokens(params, n_prompt);
  int32_t first = -1;
  for (int i0 = 0; i0 < n_prompt; i0 += chunk) {
    const int i1 = std::min(n_prompt, i0 + chunk);
    {
      std::unique_lock<std::mutex> turn = PoolTurn(env_.pool_mu);
      GOOSE_RETURN_IF_ERROR(ctx_->ForwardChain(prompt.subspan(i0, i1 - i0)));
    }
    {
      std::lock_guard<std::mutex> lock(learned_mu);
      drafter.ObservePrefill(prompt, i0, i1, *ctx_);
    }
    if (i1 == n_prompt) {
      first = sampler.Sample(ctx_->logits(i1 - 1 - i0), model_.config().n_vocab, n_prompt);
    }
    ctx_->KeepAll();
  }
  return first;
}

StatusOr<GenerateResult> Engine::Generate(std::span<const int32_t> prompt,
                                          const GenerateParams& params,
                                          const TokenCallback& on_tokens) {
  GOOSE_RETURN_IF_ERROR(CheckRequest(prompt, params));
  if (params.n_predict <= 0) return GenerateResult{};
  const int n_vocab = model_.config().n_vocab;
  const SpecParams& spec = params.spec;
  Learned& learned = this->learned(spec);
  std::unique_ptr<Drafter> drafter = MethodOf(spec).NewDrafter(spec, learned, env_);
  // --budget auto: the engine's chooser picks each cycle's budget, or the drafter sizes its own
  // trees on the cost curve.
  BudgetChooser* chooser = nullptr;
  const bool own_sizes = spec.auto_budget && MethodOf(spec).SizesOwnTrees(spec);
  if (spec.auto_budget) {
    chooser = &choosers_.try_emplace(SpecVariantKey(spec), cost_curve_).first->second;
    if (learn_costs_) chooser->SetCost(CostCurve());
  }
  Sampler sampler(params.sampling);
  const Tokenizer& tok = model_.tokenizer();
  auto is_stop = [&](int32_t t) {
    const std::vector<int32_t>& extra = params.stop_tokens;
    return !params.ignore_eos &&
           (tok.IsEog(t) || std::find(extra.begin(), extra.end(), t) != extra.end());
  };

  GenerateResult result;
  auto t0 = std::chrono::steady_clock::now();
  auto first_or = Prefill(prompt, params, *drafter, learned.mu, sampler);
  if (!first_or.ok()) return first_or.status();
  const int32_t first = *first_or;
  result.prefill_seconds = Seconds(t0);
  t0 = std::chrono::steady_clock::now();

  drafter->Commit(std::span<const int32_t>(&first, 1));
  std::vector<int32_t>& out = result.tokens;
  out.push_back(first);
  bool stopped = is_stop(first);
  if (on_tokens && !on_tokens(std::span<const int32_t>(&first, 1))) stopped = true;
  CycleInput in;
  in.anchor = first;
  in.anchor_prev = prompt.back();
  IdleDrafter idle;
  // Drafters that cut their own trees try a neighbouring size now and then
  // (ObservedCosts::ExploreCurve): one cycle in kExploreEvery, above and below in turn.
  constexpr int kExploreEvery = 8;
  int own_cycles = 0, last_size = 1;
  std::vector<CostSample> explore;
  size_t cost_cycles = 0;
  auto t_cost = std::chrono::steady_clock::now();

  while (!stopped && static_cast<int>(out.size()) < params.n_predict) {
    const int n_past = ctx_->n_past();
    if (n_past >= ctx_->n_ctx()) {
      result.hit_context_limit = true;
      break;
    }
    // The drafter proposes a tree ...
    Proposal proposal;
    // (Not on another model's curve, `goose bench --budgets auto-cm`: there a pass of this
    // machine says nothing about what the drafter's time is worth.)
    const bool ask = !(spec.auto_budget && learn_costs_ && idle.Skip());
    bool exploring = false;
    auto t_draft = std::chrono::steady_clock::now();
    if (!ask) {
      in.budget = 1;
      proposal.tree.Reset(in.anchor);
      if (chooser && !own_sizes) chooser->CountPlainStep();
    } else {
      std::lock_guard<std::mutex> lock(learned.mu);
      t_draft = std::chrono::steady_clock::now();  // (not the wait for another slot's turn)
      in.budget = ResolvedBudget(spec);
      if (own_sizes) {
        in.budget = chooser->max_budget();
        in.cost = &chooser->samples();
        if (++own_cycles % kExploreEvery == 0) {
          const bool up = own_cycles / kExploreEvery % 2 == 1;
          explore = ObservedCosts::ExploreCurve(chooser->samples(), last_size, up);
          in.cost = &explore;
          exploring = true;
        }
      } else if (chooser) {
        in.budget = chooser->Choose(learned.stats, learned.budgets);
      }
      if (chooser && !own_sizes && in.budget == 1) {
        proposal.tree.Reset(in.anchor);  // a plain step pays best: nobody drafts
      } else {
        proposal = drafter->Propose(in);
      }
    }
    double draft_seconds = Seconds(t_draft);
    DraftTree& tree = proposal.tree;
    tree.Truncate(ctx_->n_ctx() - n_past);
    if (tree.size() == 1) proposal.route = Route::kAr;
    // ... the model scores it ...
    double pass_seconds = 0;
    {
      // The pass time is the forward pass alone: a wait for another slot's turn on the shared
      // pool is not what a tree of this size costs.
      std::unique_lock<std::mutex> turn = PoolTurn(env_.pool_mu);
      const auto t_pass = std::chrono::steady_clock::now();
      GOOSE_RETURN_IF_ERROR(ctx_->Forward(tree.tokens, tree.parents));
      pass_seconds = Seconds(t_pass);
    }
    // ... the verifier accepts, sampling each visited node at its own position ...
    auto target = [&](int node) {
      return sampler.Sample(ctx_->logits(node), n_vocab, n_past + tree.depth[node] + 1);
    };
    const AcceptResult acc = WalkTree(tree, target, is_stop);
    // ... the drafter learns from every scored row, and the engine commits: KV keeps the root
    // and the accepted path.
    {
      std::lock_guard<std::mutex> lock(learned.mu);
      t_draft = std::chrono::steady_clock::now();
      if (ask) drafter->Observe(in, proposal, *ctx_, acc);
      draft_seconds += Seconds(t_draft);
      // What a cycle of this size costs: its pass, and the drafter's work around it (building
      // the tree, learning from its rows), which grows with the tree too. On the tiny model a
      // cycle's drafting is a sizeable share of an 86 us pass, and auto built 2-node trees
      // that paid by the pass times alone (0.92-0.96x plain decoding). Not the draft model's
      // work, though, for the drafters that size their own trees: they add what it took this
      // cycle themselves (TreeGrower::CostSize), and counted it twice.
      const double own_drafting = own_sizes ? proposal.work.seconds : 0.0;
      observed_.Record(tree.size(), pass_seconds + std::max(0.0, draft_seconds - own_drafting));
      AccumulateStats(tree, proposal.route, acc, &learned.stats);
      AccumulateDraftWork(proposal.work, &learned.stats);
      if (chooser && !own_sizes) {
        chooser->Observe(in.budget, tree.size(), static_cast<int>(acc.tokens.size()),
                         &learned.budgets);
      }
    }
    // Every few passes, and at most every kCostUpdateSeconds, the curve follows what the cycles
    // take: medians of <= 16 times, ~3 us, which on the tiny model was 1% of its 70 us cycles.
    constexpr size_t kCostUpdateEvery = 4;
    constexpr double kCostUpdateSeconds = 0.01;
    if (chooser && learn_costs_ && observed_.cycles() >= cost_cycles + kCostUpdateEvery &&
        Seconds(t_cost) >= kCostUpdateSeconds) {
      chooser->SetCost(CostCurve());
      cost_cycles = observed_.cycles();
      t_cost = std::chrono::steady_clock::now();
    }
    // An explored size is the engine's doing, not a sign that the drafter has something now:
    // on the tiny model every eighth asked cycle explored a 2-node tree, which restarted the idle
    // drafter's streak each time.
    if (ask && tree.size() == 1) {
      idle.RootOnly(draft_seconds, pass_seconds);
    } else if (ask && !exploring) {
      idle.Drafted();
    }
    if (ask) last_size = tree.size();
    AccumulateStats(tree, proposal.route, acc, &result.stats);
    AccumulateDraftWork(proposal.work, &result.stats);
    if (params.on_cycle) params.on_cycle(proposal, acc);
    std::vector<int32_t> keep = {0};
    keep.insert(keep.end(), acc.path.begin(), acc.path.end());
    ctx_->KeepPath(keep);

    const size_t before = out.size();
    for (int32_t t : acc.tokens) {
      if (static_cast<int>(out.size()) >= params.n_predict) break;  // convention 2
      out.push_back(t);
    }
    drafter->Commit(acc.tokens);
    in.anchor_prev = acc.path.empty() ? in.anchor : tree.tokens[acc.path.back()];
    in.anchor = acc.bonus;
    stopped = acc.stopped;
    if (on_tokens && out.size() > before &&
        !on_tokens(std::span<const int32_t>(out.data() + before, out.size() - before))) {
      stopped = true;
    }
  }
  result.decode_seconds = Seconds(t0);
  total_.Merge(result.stats);
  return result;
}

}  // namespace goose
