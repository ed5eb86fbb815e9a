#include "engine/engine.h"

#include <algorithm>

#include "engine/scheduler.h"
#include "method/draft_model.h"
#include "util/escape.h"
#include "util/rng.h"

namespace goose {

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

Engine::Engine(const Model& model, int n_ctx, ThreadPool* pool,
               std::shared_ptr<LearnedStore> shared, std::shared_ptr<BudgetPolicy> policy,
               KvType kv)
    : model_(model),
      ctx_(std::make_unique<Context>(model, n_ctx, pool, kv)),
      shared_(shared ? std::move(shared) : std::make_shared<LearnedStore>()),
      policy_(policy ? std::move(policy) : std::make_shared<BudgetPolicy>()) {
  env_.target = &model;
  env_.target_fingerprint = ModelFingerprint(model);
  env_.pool = pool;
}

Engine::~Engine() = default;

Status Engine::SetDraftModel(const Model& draft, int shortlist) {
  GOOSE_RETURN_IF_ERROR(CheckDraftModel(model_, draft, ctx_->n_ctx()));
  draft_ctx_ = std::make_unique<Context>(draft, ctx_->n_ctx(), env_.pool, ctx_->kv_type());
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

namespace {

Status CheckIds(std::span<const int32_t> ids, int n_vocab, const char* what) {
  for (int32_t t : ids) {
    if (t < 0 || t >= n_vocab) {
      return Status::Error(
          StrFormat("%s token id %d is outside the vocabulary (0..%d)", what, t, n_vocab - 1));
    }
  }
  return Status::Ok();
}

}  // namespace

Status Engine::CheckRequest(std::span<const int32_t> prompt, const GenerateParams& params) const {
  const int n_vocab = model_.config().n_vocab;
  if (prompt.empty()) return Status::Error("empty prompt: nothing to condition on");
  GOOSE_RETURN_IF_ERROR(CheckIds(prompt, n_vocab, "prompt"));
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_prompt >= ctx_->n_ctx()) {
    return Status::Error(StrFormat("prompt has %d tokens but the context holds %d (raise -c)",
                                   n_prompt, ctx_->n_ctx()));
  }
  GOOSE_RETURN_IF_ERROR(CheckIds(params.stop_tokens, n_vocab, "stop"));
  GOOSE_RETURN_IF_ERROR(CheckIds(params.prediction, n_vocab, "prediction"));
  if (params.prediction.size() > static_cast<size_t>(ctx_->n_ctx())) {
    return Status::Error(StrFormat("the prediction has %zu tokens but the context holds %d",
                                   params.prediction.size(), ctx_->n_ctx()));
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
  if (params.spec.auto_budget && !policy_->has_curve()) {
    return Status::Error("--budget auto needs a verify-cost curve (Engine::SetCostCurve)");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Sequence>> Engine::Start(std::span<const int32_t> prompt,
                                                  const GenerateParams& params,
                                                  TokenCallback on_tokens) {
  GOOSE_RETURN_IF_ERROR(CheckRequest(prompt, params));
  return std::make_unique<Sequence>(*ctx_, learned(params.spec), env_, *policy_, prompt, params,
                                    std::move(on_tokens));
}

StatusOr<GenerateResult> Engine::Generate(std::span<const int32_t> prompt,
                                          const GenerateParams& params,
                                          const TokenCallback& on_tokens) {
  GOOSE_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, Start(prompt, params, on_tokens));
  Scheduler scheduler(*policy_);
  if (!seq->done()) scheduler.Add(seq.get());
  while (!scheduler.idle()) GOOSE_RETURN_IF_ERROR(scheduler.Step());
  GenerateResult result = seq->TakeResult();
  total_.Merge(result.stats);
  return result;
}

}  // namespace goose
