#include "engine/session.h"

#include <algorithm>
#include <filesystem>

#include "method/draft_model.h"
#include "util/memory.h"

namespace goose {

Status CheckContextMemory(const LlamaConfig& config, int n_ctx, int n_batch, int n_contexts,
                          const std::string& flags, KvType kv_type) {
  const uint64_t kv = KvCacheBytes(config, n_ctx, kv_type);
  const uint64_t per_context = kv + ForwardScratchBytes(config, n_batch);
  const int n = ContextSize(config, n_ctx);
  const std::string what =
      n_contexts == 1
          ? StrFormat("a context of %d tokens (%s KV cache)", n, FormatBytes(kv).c_str())
          : StrFormat("%d contexts of %d tokens (%s KV cache each)", n_contexts, n,
                      FormatBytes(kv).c_str());
  return CheckMemory(per_context * static_cast<uint64_t>(n_contexts), what,
                     "use a smaller " + flags);
}

StatusOr<std::unique_ptr<Session>> Session::Open(SessionOptions options) {
  std::unique_ptr<Session> s(new Session());
  s->opts_ = std::move(options);
  GOOSE_RETURN_IF_ERROR(s->Load());
  return s;
}

Session::~Session() { Close(); }

void Session::Note(const std::string& line) const {
  if (opts_.on_note) opts_.on_note(line);
}

void Session::NoteCacheWarnings() const {
  if (!cache_) return;
  for (const std::string& w : cache_->TakeWarnings()) Note("warning: " + w);
}

Status Session::Load() {
  GOOSE_ASSIGN_OR_RETURN(model_, Model::Load(opts_.model_path));
  if (opts_.check_model) GOOSE_RETURN_IF_ERROR(opts_.check_model(*model_, &opts_));
  const SessionOptions& o = opts_;
  const LlamaConfig& config = model_->config();
  GOOSE_RETURN_IF_ERROR(
      CheckContextMemory(config, o.n_ctx, o.n_batch, o.n_contexts, o.memory_flags, o.kv_type));
  n_ctx_ = ContextSize(config, o.n_ctx);
  if (!o.draft_model_path.empty()) {
    auto draft = Model::Load(o.draft_model_path);
    if (!draft.ok()) return Status::Error("draft model (-md): " + draft.status().message());
    draft_ = std::move(draft).value();
    if (Status st = CheckContextMemory(draft_->config(), n_ctx_, o.n_batch, o.n_contexts,
                                       o.memory_flags, o.kv_type);
        !st.ok()) {
      return Status::Error("draft model (-md): " + st.message());
    }
    if (Status st = CheckDraftModel(*model_, *draft_, n_ctx_); !st.ok()) {
      return Status::Error("draft model '" + o.draft_model_path + "': " + st.message());
    }
    const std::string warning = DraftCostWarning(*model_, *draft_);
    if (!warning.empty()) Note("warning: " + warning);
  }
  pool_ =
      std::make_unique<ThreadPool>(o.n_threads > 0 ? o.n_threads : ThreadPool::DefaultThreads());
  if (o.budget_auto && !o.cost_curve.empty()) {
    cost_ = o.cost_curve;
  } else if (o.budget_auto) {  // measured once per model and machine, then cached
    auto path = CostCachePath(o.model_path, pool_->size(), o.kv_type);
    std::error_code ec;
    if (o.recalibrate || !path.ok() || !std::filesystem::exists(*path, ec)) {
      Note(
          "--budget auto: timing tree passes of 1..128 nodes on this machine (once per model "
          "and thread count, up to ~10 s)...");
    }
    GOOSE_ASSIGN_OR_RETURN(calibration_, LoadOrMeasureCost(*model_, o.model_path, pool_.get(),
                                                           o.recalibrate, nullptr, o.kv_type));
    if (!calibration_.note.empty()) Note("note: " + calibration_.note);
    cost_ = ToCostSamples(calibration_.curve);
  }
  if (o.table_cache) {
    cache_ = std::make_shared<LearnedCache>(o.cache_dir.empty() ? GooseCacheDir() : o.cache_dir,
                                            ModelFingerprint(*model_));
  }
  learned_ = std::make_shared<LearnedStore>(cache_);
  return Status::Ok();
}

std::shared_ptr<BudgetPolicy> Session::NewBudgetPolicy() {
  auto policy = std::make_shared<BudgetPolicy>();
  if (cost_.empty()) return policy;
  policy->SetCostCurve(cost_);
  if (opts_.cost_curve.empty()) {  // this machine's curve: its passes correct it
    policy->LearnPassCosts(calibration_.observed);
    policy->SetDepthCost(calibration_.depth);
    policies_.push_back(policy);
  }
  return policy;
}

Engine& Session::NewEngine(const EngineOptions& options) {
  std::shared_ptr<BudgetPolicy> policy = options.policy;
  if (!policy) policy = options.session_curve ? NewBudgetPolicy() : nullptr;
  auto engine = std::make_unique<Engine>(
      *model_, options.n_ctx > 0 ? std::min(options.n_ctx, n_ctx_) : n_ctx_, pool_.get(),
      options.share_learned ? learned_ : nullptr, std::move(policy), opts_.kv_type);
  // (CheckDraftModel passed at Open for the session's context size, which is the largest.)
  if (draft_) (void)engine->SetDraftModel(*draft_);
  engines_.push_back(std::move(engine));
  return *engines_.back();
}

void Session::Close() {
  if (closed_ || !model_) return;
  closed_ = true;
  // A failed save is a warning (the cache records it): the next run starts colder, that is all.
  for (const std::unique_ptr<Engine>& engine : engines_) (void)engine->SaveLearned();
  NoteCacheWarnings();
  // What the passes took, for the next run's curve (budget/cost_cache.h).
  for (const std::shared_ptr<BudgetPolicy>& policy : policies_) {
    (void)RecordObservedCosts(calibration_, policy->ObservedPassCosts());
  }
}

}  // namespace goose
