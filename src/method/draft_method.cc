// draft: a draft model's greedy chain, as llama.cpp's draft-model speculation (speculative-
// simple) drafts it: the draft's most likely token while its probability is at least p_min
// (0.75, llama.cpp's default), up to budget - 1 tokens, one draft pass per token.

#include "method/draft_model.h"
#include "method/method.h"
#include "util/check.h"

namespace goose {
namespace {

constexpr float kPMin = 0.75f;

class DraftChainDrafter : public Drafter {
 public:
  explicit DraftChainDrafter(const DrafterEnv& env)
      : runner_(*env.draft_ctx, env.draft_shortlist) {}
  void Begin(std::span<const int32_t> prompt) override {
    runner_.Begin(prompt);
    open_ = false;
  }
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1, const ScoredRows&) override {
    runner_.ObservePrefill(prompt, i0, i1, nullptr);
  }
  void Commit(std::span<const int32_t> tokens) override { runner_.Commit(tokens); }

  Proposal Propose(const CycleInput& in) override {
    const double start = NowSeconds();
    Proposal p;
    p.tree.Reset(in.anchor);
    open_ = false;
    if (in.budget <= 1 || !runner_.BeginCycle(&p.work)) return p;
    open_ = true;
    pids_.assign(1, runner_.root_pid());
    int pid = runner_.root_pid();
    while (p.tree.size() < in.budget) {
      runner_.TopK(pid, 1, &top_);
      if (top_.empty() || top_[0].p < kPMin) break;
      const int32_t token = top_[0].token;
      p.tree.Add(token, p.tree.size() - 1, NodeSource::kDraft, 0, top_[0].p);
      pids_.push_back(-1);
      if (p.tree.size() >= in.budget) break;
      const int next = runner_.Score({&token, 1}, {&pid, 1}, &p.work);
      if (next < 0) break;
      pid = pids_.back() = next;
    }
    p.route = p.tree.size() > 1 ? Route::kChain : Route::kAr;
    p.work.pruned_slots = 0;
    p.work.seconds = NowSeconds() - start;
    return p;
  }

  void Observe(const CycleInput&, const Proposal&, const ScoredRows&,
               const AcceptResult& accepted) override {
    if (!open_) return;  // the engine's plain step
    open_ = false;
    std::vector<int32_t> pids;
    for (int32_t v : accepted.path) {
      pids.push_back(v < static_cast<int>(pids_.size()) ? pids_[v] : -1);
    }
    runner_.EndCycle(pids);
  }

 private:
  DraftRunner runner_;
  std::vector<int32_t> pids_;  // tree node -> draft pid (-1: not scored)
  std::vector<DraftToken> top_;
  bool open_ = false;
};

class DraftChain : public Method {
 public:
  const char* name() const override { return "draft"; }
  const char* summary() const override {
    return "a draft model's greedy chain while its probability >= 0.75 (llama.cpp's "
           "draft-model speculation)";
  }
  int DefaultBudget(const SpecParams&) const override { return 17; }  // root + 16 drafted
  bool needs_draft_model() const override { return true; }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams&, Learned&,
                                      const DrafterEnv& env) const override {
    GOOSE_CHECK(env.draft_ctx != nullptr);
    return std::make_unique<DraftChainDrafter>(env);
  }
};

}  // namespace

const Method& DraftChainMethod() {
  static const DraftChain m;
  return m;
}

}  // namespace goose
