#include "engine/sequence.h"

#include <algorithm>
#include <mutex>

#include "verify/verifier.h"

namespace goose {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

BudgetRequest BudgetRequestFor(const SpecParams& spec) {
  BudgetRequest r;
  r.variant = SpecVariantKey(spec);
  r.auto_budget = spec.auto_budget;
  r.own_sizes = spec.auto_budget && MethodOf(spec).SizesOwnTrees(spec);
  r.fixed_budget = ResolvedBudget(spec);
  return r;
}

}  // namespace

Sequence::Sequence(Context& ctx, Learned& learned, const DrafterEnv& env, BudgetPolicy& policy,
                   std::span<const int32_t> prompt, const GenerateParams& params,
                   TokenCallback on_tokens)
    : ctx_(ctx),
      learned_(learned),
      env_(env),
      prompt_(prompt.begin(), prompt.end()),
      params_(params),
      on_tokens_(std::move(on_tokens)),
      drafter_(MethodOf(params.spec).NewDrafter(params.spec, learned, env)),
      sampler_(params.sampling),
      budget_(policy.Begin(BudgetRequestFor(params.spec))) {
  done_ = params.n_predict <= 0;
}

Sequence::~Sequence() = default;

void Sequence::Propose(BudgetPolicy& policy, int max_prefill_rows) {
  if (prefilling()) return ProposePrefill(max_prefill_rows);
  ProposeTree(policy);
}

const CycleOutcome& Sequence::Accept(double pass_seconds, BudgetPolicy& policy) {
  outcome_ = CycleOutcome();
  if (prefilling()) {
    AcceptPrefill();
  } else {
    AcceptTree(pass_seconds, policy);
  }
  return outcome_;
}

void Sequence::Cut(int nodes) {
  DraftTree& tree = proposal_.tree;
  if (prefilling() || nodes >= tree.size()) return;
  tree.Truncate(std::max(nodes, 1));
  if (tree.size() == 1) proposal_.route = Route::kAr;
  if (proposal_.values.size() > static_cast<size_t>(tree.size())) {
    proposal_.values.resize(tree.size());
  }
  rows_tokens_ = tree.tokens;
  rows_parents_ = tree.parents;
}

void Sequence::Cancel() {
  if (done_) return;
  done_ = true;
  Finish();
}

void Sequence::Finish() {
  result_.budgets_chosen = budget_.chosen();
  if (prefilling()) {
    result_.prefill_seconds = begun_ ? SecondsSince(phase_start_) : 0;
  } else {
    result_.decode_seconds = SecondsSince(phase_start_);
  }
}

bool Sequence::IsStop(int32_t t) const {
  const std::vector<int32_t>& extra = params_.stop_tokens;
  return !params_.ignore_eos && (ctx_.model().tokenizer().IsEog(t) ||
                                 std::find(extra.begin(), extra.end(), t) != extra.end());
}

// A chain over the next prefill_chunk prompt tokens; the first one starts the request.
void Sequence::ProposePrefill(int max_rows) {
  if (!begun_) {
    begun_ = true;
    phase_start_ = Clock::now();
    std::lock_guard<std::mutex> lock(learned_.mu);
    drafter_->Begin(prompt_);
    if (!params_.prediction.empty()) drafter_->SetPrediction(params_.prediction);
    ctx_.Truncate(0);
  }
  const int n_prompt = static_cast<int>(prompt_.size());
  int n = std::min(PrefillPassTokens(params_, n_prompt), n_prompt - prefilled_);
  if (max_rows > 0) n = std::min(n, max_rows);
  while (static_cast<int>(chain_.size()) < n) {
    chain_.push_back(static_cast<int32_t>(chain_.size()) - 1);
  }
  rows_tokens_ = std::span<const int32_t>(prompt_).subspan(prefilled_, n);
  rows_parents_ = std::span<const int32_t>(chain_).first(n);
}

// The drafter sees the chunk's rows; the last chunk's last row samples generated token 1.
void Sequence::AcceptPrefill() {
  const int i0 = prefilled_;
  const int i1 = i0 + static_cast<int>(rows_tokens_.size());
  {
    std::lock_guard<std::mutex> lock(learned_.mu);
    drafter_->ObservePrefill(prompt_, i0, i1, ContextRows(ctx_));
  }
  const int n_prompt = static_cast<int>(prompt_.size());
  int32_t first = -1;
  if (i1 == n_prompt) {
    first = sampler_.Sample(ctx_.logits(i1 - 1 - i0), ctx_.model().config().n_vocab, n_prompt);
  }
  ctx_.KeepAll();
  prefilled_ = i1;
  if (i1 < n_prompt) return;
  result_.prefill_seconds = SecondsSince(phase_start_);
  phase_start_ = Clock::now();
  drafter_->Commit(std::span<const int32_t>(&first, 1));
  in_.anchor = first;
  in_.anchor_prev = prompt_.back();
  Emit(std::span<const int32_t>(&first, 1), IsStop(first));
}

// The drafter proposes a tree under the policy's plan, cut to the context's room.
void Sequence::ProposeTree(BudgetPolicy& policy) {
  proposal_ = Proposal();
  draft_seconds_ = 0;
  {
    std::lock_guard<std::mutex> lock(learned_.mu);
    const Clock::time_point t = Clock::now();  // (not the wait for another sequence's turn)
    plan_ = policy.Plan(budget_, learned_.stats, learned_.budgets, ctx_.n_past());
    in_.budget = plan_.budget;
    in_.cost = plan_.cost;
    in_.rate = plan_.rate;
    if (plan_.draft) {
      proposal_ = drafter_->Propose(in_);
    } else {
      proposal_.tree.Reset(in_.anchor);
    }
    draft_seconds_ = SecondsSince(t);
  }
  DraftTree& tree = proposal_.tree;
  tree.Truncate(ctx_.n_ctx() - ctx_.n_past());
  if (tree.size() == 1) proposal_.route = Route::kAr;
  rows_tokens_ = tree.tokens;
  rows_parents_ = tree.parents;
}

// The walk accepts, the drafter and the policy learn, the accepted path commits.
void Sequence::AcceptTree(double pass_seconds, BudgetPolicy& policy) {
  const DraftTree& tree = proposal_.tree;
  const int n_past = ctx_.n_past();
  const int n_vocab = ctx_.model().config().n_vocab;
  auto target = [&](int node) {
    return sampler_.Sample(ctx_.logits(node), n_vocab, n_past + tree.depth[node] + 1);
  };
  const AcceptResult acc = WalkTree(tree, target, [this](int32_t t) { return IsStop(t); });
  {
    std::lock_guard<std::mutex> lock(learned_.mu);
    const Clock::time_point t = Clock::now();
    if (plan_.ask) drafter_->Observe(in_, proposal_, ContextRows(ctx_), acc);
    outcome_.tree_nodes = tree.size();
    outcome_.depth = n_past;
    outcome_.committed = static_cast<int>(acc.tokens.size());
    outcome_.pass_seconds = pass_seconds;
    outcome_.draft_seconds = draft_seconds_ + SecondsSince(t);
    outcome_.own_draft_seconds = proposal_.work.seconds;
    AccumulateStats(tree, proposal_.route, acc, &learned_.stats);
    AccumulateDraftWork(proposal_.work, &learned_.stats);
    policy.Record(budget_, plan_, outcome_, &learned_.budgets);
  }
  AccumulateStats(tree, proposal_.route, acc, &result_.stats);
  AccumulateDraftWork(proposal_.work, &result_.stats);
  if (params_.on_cycle) params_.on_cycle(proposal_, acc);
  std::vector<int32_t> keep = {0};
  keep.insert(keep.end(), acc.path.begin(), acc.path.end());
  ctx_.KeepPath(keep);
  drafter_->Commit(acc.tokens);
  in_.anchor_prev = acc.path.empty() ? in_.anchor : tree.tokens[acc.path.back()];
  in_.anchor = acc.bonus;
  Emit(acc.tokens, acc.stopped);
}

void Sequence::Emit(std::span<const int32_t> tokens, bool stopped) {
  std::vector<int32_t>& out = result_.tokens;
  const size_t before = out.size();
  for (int32_t t : tokens) {
    if (static_cast<int>(out.size()) >= params_.n_predict) break;  // convention 2
    out.push_back(t);
  }
  if (on_tokens_ && out.size() > before &&
      !on_tokens_(std::span<const int32_t>(out.data() + before, out.size() - before))) {
    stopped = true;
  }
  if (!stopped && static_cast<int>(out.size()) < params_.n_predict &&
      ctx_.n_past() >= ctx_.n_ctx()) {
    result_.hit_context_limit = true;
    stopped = true;
  }
  done_ = stopped || static_cast<int>(out.size()) >= params_.n_predict;
  if (done_) Finish();
}

}  // namespace goose
