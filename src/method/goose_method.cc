// goose: GOOSE's anisotropic spine trees (docs/methods.md §3.6, §3.7). Two drafters:
// - tuned (default): a best-first tree over acceptance measured online per edge kind
//   (AcceptanceTracker), from the context match's spine and the bigram table, table kept across
//   requests (+noextras: without the unigram-row extra candidates);
// - paper (+paper): Algorithm 1 and the routes of docs/methods.md §3.6 exactly as GOOSE's
//   reference code, with its spine-acceptance EMA and a per-request table.
#include "budget/cycle_rate.h"
#include "budget/value_calibration.h"
#include "draft/context_matcher.h"
#include "draft/prediction_matcher.h"
#include "method/acceptance_tracker.h"
#include "method/draft_model.h"
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
    if (IsSpineSource(tree.source[i])) return Route::kSpineTree;
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
      p.tree = BuildSpineTree(in.anchor, in.anchor_prev, spine.tokens, spine.confidence, spine_ema_,
                              table_, goose);
      p.route = TreeRoute(p.tree);
    } else {
      const ContextMatch m = matcher_.Propose();
      p.tree = BuildChain(in.anchor, m.tokens, 1 + static_cast<int>(m.tokens.size()));
      p.route = p.tree.size() > 1 ? Route::kChain : Route::kAr;
    }
    return p;
  }

  // docs/methods.md §3.6.3: the EMA follows the spine acceptance of spine-tree cycles only.
  void Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
               const AcceptResult& accepted) override {
    TableDrafter::Observe(in, p, rows, accepted);
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
  ValueCalibration calibration;  // the tree values against what the walk accepted
  // The rate of the cycles, for the cut under --budget auto. Not persisted: a run learns it in
  // a few cycles, and until then the cut falls back to each cycle's own tokens per second.
  CycleRate rate;

  std::string SaveExtra() const override { return acceptance.Save() + calibration.Save(); }
  Status LoadExtra(std::string_view bytes) override;
  void Decay(double factor) override {
    Learned::Decay(factor);
    acceptance.Scale(factor);
    calibration.Scale(factor);
  }
};

class GooseTunedDrafter : public GooseDrafterBase {
 public:
  GooseTunedDrafter(TunedLearned& learned, bool keep, bool unigram_extras)
      : GooseDrafterBase(*learned.table, keep, /*harvest_whole_prompt=*/true),
        learned_(learned),
        unigram_extras_(unigram_extras) {}

  void SetPrediction(std::span<const int32_t> prediction) override {
    prediction_ = PredictionMatcher(prediction);
  }
  void Commit(std::span<const int32_t> tokens) override {
    GooseDrafterBase::Commit(tokens);
    prediction_.Commit(tokens);
  }

  // The spine is the prediction's while the output follows it, else the context match's.
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree.Reset(in.anchor);
    spine_class_ = -1;
    cycle_start_ = NowSeconds();
    const std::span<const int32_t> predicted =
        prediction_.Continuation(EdgeAcceptance::kMaxSpineDepth);
    const ContextMatcher::Spine spine =
        predicted.empty() ? matcher_.ProposeSpine() : ContextMatcher::Spine{};
    const std::span<const int32_t> spine_tokens = predicted.empty() ? spine.tokens : predicted;
    if (!spine_tokens.empty() || table_.HasSuccessors(in.anchor, in.anchor_prev)) {
      BestFirstParams bf;
      bf.budget = in.budget;
      bf.unigram_extras = unigram_extras_;
      bf.spine_class = spine.consensus ? 0 : 1;
      if (!predicted.empty()) {  // as deep as it pays: the user's text is rarely wrong
        bf.spine_class = EdgeAcceptance::kPredictionClass;
        bf.spine_source = NodeSource::kPrediction;
        bf.max_depth = EdgeAcceptance::kMaxSpineDepth;
      }
      bf.cost = in.cost;
      if (in.cost != nullptr && !in.cost->empty()) {
        node_scale_ = learned_.calibration.NodeScale(in.cost->back().nodes);
        bf.node_scale = node_scale_;
        bf.rate = in.rate > 0 ? in.rate : learned_.rate.TokensPerSecond();
      }
      p.tree = BuildBestFirstTree(in.anchor, in.anchor_prev, spine_tokens,
                                  learned_.acceptance.model(), table_, bf, &values_);
      p.route = TreeRoute(p.tree);
      spine_class_ = bf.spine_class;
      p.values = values_;
      for (size_t i = 1; i < p.values.size() && !node_scale_.empty(); ++i) {
        p.values[i] *= node_scale_[std::min(i, node_scale_.size() - 1)];
      }
    }
    return p;
  }

  void Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
               const AcceptResult& accepted) override {
    TableDrafter::Observe(in, p, rows, accepted);
    if (cycle_start_ >= 0) {
      learned_.rate.Add(NowSeconds() - cycle_start_, static_cast<int>(accepted.tokens.size()));
    }
    cycle_start_ = -1;
    // Not after the engine's plain steps, which this drafter did not propose.
    if (spine_class_ >= 0 && p.route != Route::kAr) {
      learned_.acceptance.Update(p.tree, accepted, spine_class_);
      std::vector<uint8_t> on_path(p.tree.size(), 0);
      for (int32_t v : accepted.path) on_path[v] = 1;
      for (int i = 1; i < p.tree.size() && i < static_cast<int>(values_.size()); ++i) {
        learned_.calibration.Record(i, values_[i], on_path[i]);
      }
    }
    spine_class_ = -1;
  }

 private:
  TunedLearned& learned_;
  PredictionMatcher prediction_;    // empty without a prediction
  std::vector<double> values_;      // of the last proposed tree's nodes (root = 1)
  std::vector<double> node_scale_;  // the value calibration the last tree was sized with
  bool unigram_extras_;
  int spine_class_ = -1;     // match class of the last proposed tree (-1: none)
  double cycle_start_ = -1;  // when the open cycle's Propose began (-1: none open)
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
  // Both drafters read the table and the acceptance model; they learn only in Observe.
  bool propose_reads_only() const override { return true; }
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

// The acceptance counts, then the value calibration.
Status TunedLearned::LoadExtra(std::string_view bytes) {
  AcceptanceTracker tracker;
  ValueCalibration cal;
  const size_t n = bytes.size();
  if (n < ValueCalibration::kBytes) return Status::Error("tuned GOOSE state: too short");
  GOOSE_RETURN_IF_ERROR(tracker.Load(bytes.substr(0, n - ValueCalibration::kBytes)));
  GOOSE_RETURN_IF_ERROR(cal.Load(bytes.substr(n - ValueCalibration::kBytes)));
  acceptance = tracker;
  calibration = cal;
  return Status::Ok();
}

}  // namespace

const Method& GooseMethod() {
  static const Goose m;
  return m;
}

}  // namespace goose
