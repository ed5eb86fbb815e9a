// goose: GOOSE's anisotropic spine trees (docs/methods.md §3.6, §3.7). Two drafters:
// - tuned (default): a best-first tree over acceptance measured online per edge kind
//   (AcceptanceTracker), from the context match's spine and the bigram table, table kept across
//   requests (+noextras: without the unigram-row extra candidates);
// - paper (+paper): Algorithm 1 and the routes of docs/methods.md §3.6 exactly as GOOSE's
//   reference code, with its spine-acceptance EMA and a per-request table.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "draft/context_matcher.h"
#include "method/acceptance_tracker.h"
#include "method/table_drafter.h"
#include "tree/best_first_builder.h"
#include "tree/spine_ema.h"
#include "tree/tree_builders.h"

namespace goose {
namespace {

// Route of a built spine or best-first tree: its nodes say which sources it holds.
Route TreeRoute(const DraftTree& tree) {
  if (tree.size() <= 1) return Route::kAr;
  for (int i = 1; i < tree.size(); ++i) {
    if (tree.source[i] == NodeSource::kSpine) return Route::kSpineTree;
  }
  return Route::kBranchTree;
}

// Both drafters keep the context matcher over prompt + committed tokens.
class GooseDrafterBase : public TableDrafter {
 public:
  using TableDrafter::TableDrafter;
  void Begin(std::span<const int32_t> prompt) override {
    TableDrafter::Begin(prompt);
    matcher_.Append(prompt);
  }
  void Commit(std::span<const int32_t> tokens) override { matcher_.Append(tokens); }

 protected:
  ContextMatcher matcher_;
};

class GoosePaperDrafter : public GooseDrafterBase {
 public:
  GoosePaperDrafter(TransitionTable& table, bool keep)
      : GooseDrafterBase(table, keep, /*harvest_whole_prompt=*/true) {}

  // docs/methods.md §3.6.1: tree route when the table knows the anchor, else the match as a
  // chain, else AR.
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    if (table_.HasSuccessors(in.anchor, in.anchor_prev)) {
      const ContextMatcher::Spine spine = matcher_.ProposeSpine();
      GooseParams goose;
      goose.base_budget = in.budget;
      p.tree = BuildSpineTree(in.anchor, in.anchor_prev, spine.tokens, spine.confidence,
                              spine_ema_, table_, goose);
      p.route = TreeRoute(p.tree);
    } else {
      const ContextMatch m = matcher_.Propose();
      p.tree = BuildChain(in.anchor, m.tokens, 1 + static_cast<int>(m.tokens.size()));
      p.route = p.tree.size() > 1 ? Route::kChain : Route::kAr;
    }
    return p;
  }

  // docs/methods.md §3.6.3: the EMA follows the spine acceptance of spine-tree cycles only.
  void Observe(const CycleInput& in, const Proposal& p, const Context& ctx,
               const AcceptResult& accepted) override {
    TableDrafter::Observe(in, p, ctx, accepted);
    if (p.route != Route::kSpineTree) return;
    int spine_nodes = 0, spine_accepted = 0;
    for (int i = 1; i < p.tree.size(); ++i) spine_nodes += p.tree.source[i] == NodeSource::kSpine;
    for (int32_t v : accepted.path) spine_accepted += p.tree.source[v] == NodeSource::kSpine;
    spine_ema_.Update(spine_accepted, spine_nodes);
  }

 private:
  SpineEma spine_ema_;  // per request, as the reference
};

struct TunedLearned : Learned {
  AcceptanceTracker acceptance;  // per-edge acceptance of every tuned-GOOSE tree so far
  // Calibration of the tree values against what the walk accepted, over the cycles so far, per
  // step of node indices (the i-th node added, 1-based; steps start at kStepStarts, the
  // calibrated tree sizes, since a tree is cut between them): drafted nodes accepted, and the
  // sum of their values (the prediction). Why per step: the values of the nodes that decide a
  // cut are calibrated worst by one factor for all (measured, 0.44B, 12 prompts: accepted /
  // predicted 1.02 for node 1, 1.11 for nodes 2-3, 1.29 for nodes 4-7 where the overall factor
  // was 1.09), so trees were cut to 4 nodes where 8 paid.
  static constexpr int kSteps = 8;
  static constexpr int kStepStarts[kSteps] = {1, 2, 4, 8, 12, 16, 24, 32};
  double accepted[kSteps] = {}, predicted[kSteps] = {};

  static int Step(int node) {
    int s = 0;
    while (s + 1 < kSteps && node >= kStepStarts[s + 1]) ++s;
    return s;
  }
  // Per node index (0 unused) up to `max_nodes`: the step's accepted / predicted, shrunk
  // towards the overall ratio by kStepPrior tokens' worth of prediction; the overall ratio
  // shrunk towards 1 by kPrior tokens.
  std::vector<double> NodeScale(int max_nodes) const {
    constexpr double kPrior = 16, kStepPrior = 8;
    double a = 0, p = 0;
    for (int s = 0; s < kSteps; ++s) a += accepted[s], p += predicted[s];
    const double overall = (a + kPrior) / (p + kPrior);
    std::vector<double> scale(std::max(max_nodes, 1) + 1, 1.0);
    for (size_t i = 1; i < scale.size(); ++i) {
      const int s = Step(static_cast<int>(i));
      scale[i] = std::clamp((accepted[s] + kStepPrior * overall) / (predicted[s] + kStepPrior),
                            0.25, 2.0);
    }
    return scale;
  }
  std::string SaveExtra() const override;
  Status LoadExtra(std::string_view bytes) override;
  void Decay(double factor) override {
    Learned::Decay(factor);
    acceptance.Scale(factor);
    for (int s = 0; s < kSteps; ++s) {
      accepted[s] *= factor;
      predicted[s] *= factor;
    }
  }
};

class GooseTunedDrafter : public GooseDrafterBase {
 public:
  GooseTunedDrafter(TunedLearned& learned, bool keep, bool unigram_extras)
      : GooseDrafterBase(*learned.table, keep, /*harvest_whole_prompt=*/true),
        learned_(learned),
        unigram_extras_(unigram_extras) {}

  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree.Reset(in.anchor);
    spine_class_ = -1;
    const ContextMatcher::Spine spine = matcher_.ProposeSpine();
    if (!spine.tokens.empty() || table_.HasSuccessors(in.anchor, in.anchor_prev)) {
      BestFirstParams bf;
      bf.budget = in.budget;
      bf.unigram_extras = unigram_extras_;
      bf.spine_class = spine.consensus ? 0 : 1;
      bf.cost = in.cost;
      if (in.cost != nullptr && !in.cost->empty()) {
        node_scale_ = learned_.NodeScale(in.cost->back().nodes);
        bf.node_scale = node_scale_;
      }
      p.tree = BuildBestFirstTree(in.anchor, in.anchor_prev, spine.tokens,
                                  learned_.acceptance.model(), table_, bf, &values_);
      p.route = TreeRoute(p.tree);
      spine_class_ = bf.spine_class;
    }
    return p;
  }

  void Observe(const CycleInput& in, const Proposal& p, const Context& ctx,
               const AcceptResult& accepted) override {
    TableDrafter::Observe(in, p, ctx, accepted);
    // Not after the engine's plain steps, which this drafter did not propose.
    if (spine_class_ >= 0 && p.route != Route::kAr) {
      learned_.acceptance.Update(p.tree, accepted, spine_class_);
      for (int i = 1; i < p.tree.size() && i < static_cast<int>(values_.size()); ++i) {
        learned_.predicted[TunedLearned::Step(i)] += values_[i];
      }
      for (int32_t v : accepted.path) learned_.accepted[TunedLearned::Step(v)] += 1;
    }
    spine_class_ = -1;
  }

 private:
  TunedLearned& learned_;
  std::vector<double> values_;  // of the last proposed tree's nodes (root = 1)
  std::vector<double> node_scale_;  // the value calibration the last tree was sized with
  bool unigram_extras_;
  int spine_class_ = -1;  // match class of the last proposed tree (-1: none)
};

class Goose : public Method {
 public:
  const char* name() const override { return "goose"; }
  const char* summary() const override {
    return "context-match spine + table branches, best-first over measured acceptance "
           "(+paper: GOOSE's Algorithm 1)";
  }
  std::vector<std::string> modifiers() const override { return {"paper", "noextras"}; }
  std::vector<std::string> variants() const override {
    return {"goose", "goose+cold", "goose+noextras", "goose+paper", "goose+paper+keep"};
  }
  Status Configure(SpecParams* spec) const override {
    if (spec->Has("paper") && spec->Has("noextras")) {
      return Status::Error("+noextras applies to the tuned GOOSE, not to +paper");
    }
    return Status::Ok();
  }
  bool uses_table() const override { return true; }
  // The tuned builder values every node, so under --budget auto it cuts its own trees.
  bool SizesOwnTrees(const SpecParams& spec) const override { return !spec.Has("paper"); }
  // Convention 6: the paper preset's table is per request, as GOOSE's reference.
  bool KeepsTableByDefault(const SpecParams& spec) const override { return !spec.Has("paper"); }
  std::unique_ptr<Learned> NewLearned(const SpecParams& spec,
                                      const DrafterEnv& env) const override {
    auto learned = std::make_unique<TunedLearned>();
    learned->table = std::move(Method::NewLearned(spec, env)->table);
    return learned;
  }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv&) const override {
    if (spec.Has("paper")) {
      return std::make_unique<GoosePaperDrafter>(*learned.table, KeepsTable(spec));
    }
    return std::make_unique<GooseTunedDrafter>(static_cast<TunedLearned&>(learned),
                                               KeepsTable(spec), !spec.Has("noextras"));
  }
};

std::string TunedLearned::SaveExtra() const {
  std::string out = acceptance.Save();
  out.append(reinterpret_cast<const char*>(accepted), sizeof(accepted));
  out.append(reinterpret_cast<const char*>(predicted), sizeof(predicted));
  return out;
}

// The acceptance counts, then the calibration per step (or, from goose builds before the
// steps, one accepted and one predicted figure, kept as the first step's).
Status TunedLearned::LoadExtra(std::string_view bytes) {
  constexpr size_t kTail = 2 * sizeof(accepted), kOldTail = 2 * sizeof(double);
  std::vector<double> a(kSteps, 0.0), p(kSteps, 0.0);
  AcceptanceTracker loaded;
  if (bytes.size() >= kTail && loaded.Load(bytes.substr(0, bytes.size() - kTail)).ok()) {
    std::memcpy(a.data(), bytes.data() + bytes.size() - kTail, sizeof(accepted));
    std::memcpy(p.data(), bytes.data() + bytes.size() - kTail / 2, sizeof(predicted));
  } else {
    if (bytes.size() < kOldTail) return Status::Error("tuned GOOSE state: too short");
    GOOSE_RETURN_IF_ERROR(loaded.Load(bytes.substr(0, bytes.size() - kOldTail)));
    std::memcpy(&a[0], bytes.data() + bytes.size() - kOldTail, sizeof(double));
    std::memcpy(&p[0], bytes.data() + bytes.size() - sizeof(double), sizeof(double));
  }
  for (int s = 0; s < kSteps; ++s) {
    if (!(a[s] >= 0) || !(p[s] >= 0) || !std::isfinite(a[s]) || !std::isfinite(p[s])) {
      return Status::Error("tuned GOOSE state: bad calibration");
    }
  }
  acceptance = loaded;
  std::copy(a.begin(), a.end(), accepted);
  std::copy(p.begin(), p.end(), predicted);
  return Status::Ok();
}

}  // namespace

const Method& GooseMethod() {
  static const Goose m;
  return m;
}

}  // namespace goose
