#include "method/graft_tree.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <queue>

#include "tree/best_first_builder.h"

namespace goose {

std::string DraftLearned::SaveExtra() const {
  return acceptance.Save() + timing.Save() + calibration.Save();
}

Status DraftLearned::LoadExtra(std::string_view bytes) {
  constexpr size_t kA = GraftAcceptance::kBytes, kT = DraftTiming::kBytes;
  if (bytes.size() != kA + kT + ValueCalibration::kBytes) {
    return Status::Error("draft-model state: " + std::to_string(bytes.size()) + " bytes");
  }
  GraftAcceptance a;
  DraftTiming t;
  ValueCalibration c;
  GOOSE_RETURN_IF_ERROR(a.Load(bytes.substr(0, kA)));
  GOOSE_RETURN_IF_ERROR(t.Load(bytes.substr(kA, kT)));
  GOOSE_RETURN_IF_ERROR(c.Load(bytes.substr(kA + kT)));
  acceptance = a;
  timing = t;
  calibration = c;
  return Status::Ok();
}

void DraftLearned::Decay(double factor) {
  Learned::Decay(factor);
  acceptance.Scale(factor);
  calibration.Scale(factor);
}

namespace {

struct HeapItem {
  double value;
  int64_t seq;  // push order: deterministic ties, a parent before its equal-valued child
  int node;
};

struct Lower {
  bool operator()(const HeapItem& a, const HeapItem& b) const {
    return a.value < b.value || (a.value == b.value && a.seq > b.seq);
  }
};

// Tokens of a match looked up below the root (a draft leaf's continuation).
constexpr int kFreshMatchTokens = 16;
constexpr int kFreshMatchClass = 2;
// Tokens of the prediction offered at the root (its match continues as deep as a tree goes).
constexpr int kPredictedMatchTokens = 128;

}  // namespace

TreeGrower::TreeGrower(GrowMode mode, const GrowParams& params, Context& draft_ctx,
                       DraftLearned& learned, const TransitionTable* table)
    : mode_(mode),
      params_(params),
      runner_(draft_ctx, params.shortlist),
      learned_(learned),
      table_(table) {}

bool TreeGrower::retrieves() const {
  return mode_ == GrowMode::kGraft || mode_ == GrowMode::kGraftPaper;
}

void TreeGrower::Begin(std::span<const int32_t> prompt) {
  runner_.Begin(prompt);
  matcher_.Clear();
  if (retrieves()) matcher_.Append(prompt);
  cycle_open_ = false;
}

void TreeGrower::ObservePrefill(std::span<const int32_t> prompt, int i0, int i1) {
  runner_.ObservePrefill(prompt, i0, i1, nullptr);
}

void TreeGrower::Commit(std::span<const int32_t> tokens) {
  runner_.Commit(tokens);
  if (retrieves()) matcher_.Append(tokens);
  prediction_.Commit(tokens);
}

int TreeGrower::AddChild(int parent, int32_t token) {
  for (int c : pool_[parent].children) {
    if (pool_[c].token == token) return c;
  }
  Node n;
  n.token = token;
  n.parent = parent;
  n.depth = pool_[parent].depth + 1;
  n.cum_p = 0;
  pool_.push_back(n);
  const int id = static_cast<int>(pool_.size()) - 1;
  pool_[parent].children.push_back(id);
  return id;
}

void TreeGrower::AddDraftChildren(int u) {
  if (pool_[u].depth >= params_.max_depth) return;
  runner_.TopK(pool_[u].pid, params_.top_k, &topk_);
  for (int r = 0; r < static_cast<int>(topk_.size()); ++r) {
    const int c = AddChild(u, topk_[r].token);
    Node& n = pool_[c];
    if (n.draft_rank < 0 || r < n.draft_rank) {
      n.draft_rank = r;
      n.draft_p = topk_[r].p;
      n.cum_p = pool_[u].cum_p * topk_[r].p;
    }
  }
}

void TreeGrower::ExpandRetrieval(int u, int32_t anchor_prev) {
  if (pool_[u].retrieval_done || pool_[u].depth >= params_.max_depth) return;
  pool_[u].retrieval_done = true;
  // Context: the root's spine, a node's next match token, or a fresh look-up below the root.
  int match = -1, pos = -1;
  const std::span<const int32_t> predicted =
      u == 0 ? prediction_.Continuation(kPredictedMatchTokens) : std::span<const int32_t>();
  if (!predicted.empty()) {
    matches_.emplace_back(predicted.begin(), predicted.end());
    match_class_.push_back(GraftAcceptance::kPredictionClass);
    match = static_cast<int>(matches_.size()) - 1;
    pos = 0;
  } else if (u == 0) {
    const ContextMatcher::Spine spine = matcher_.ProposeSpine();
    if (!spine.tokens.empty()) {
      matches_.push_back(spine.tokens);
      match_class_.push_back(spine.consensus ? 0 : 1);
      match = static_cast<int>(matches_.size()) - 1;
      pos = 0;
    }
  } else if (pool_[u].match >= 0 &&
             pool_[u].match_pos + 1 < static_cast<int>(matches_[pool_[u].match].size())) {
    match = pool_[u].match;
    pos = pool_[u].match_pos + 1;
  } else if (pool_[u].match < 0 && fresh_matches_ < params_.max_fresh_matches) {
    ++fresh_matches_;
    std::vector<int32_t> path;
    for (int j = u; j > 0; j = pool_[j].parent) path.push_back(pool_[j].token);
    std::reverse(path.begin(), path.end());
    ContextMatch m = matcher_.Propose(path, kFreshMatchTokens);
    if (!m.tokens.empty()) {
      matches_.push_back(std::move(m.tokens));
      match_class_.push_back(kFreshMatchClass);
      match = static_cast<int>(matches_.size()) - 1;
      pos = 0;
    }
  }
  if (match >= 0) {
    const int c = AddChild(u, matches_[match][pos]);
    Node& n = pool_[c];
    if (n.ctx_depth == 0) {
      n.ctx_class = match_class_[match];
      n.ctx_depth = pos + 1;
      n.match = match;
      n.match_pos = pos;
    }
  }
  // Table: the (parent, token) bigram list, else the unigram row; with a bigram list, the
  // unigram row's other tokens as a lower tier (as tuned GOOSE's best-first builder).
  if (table_ == nullptr) return;
  const int32_t tok = pool_[u].token;
  const int32_t prev = u == 0 ? anchor_prev : pool_[pool_[u].parent].token;
  const bool bigram = table_->HasBigram(tok, prev);
  const std::vector<Candidate> primary = table_->Successors(tok, prev);
  const std::vector<Candidate> extras =
      bigram ? table_->Successors(tok, -1) : std::vector<Candidate>();
  auto add = [&](const Candidate& cand, int tier, int rank) {
    const int c = AddChild(u, cand.token);
    Node& n = pool_[c];
    if (n.table_tier < 0) {
      n.table_tier = tier;
      n.table_score = cand.score;
      n.table_rank = rank;
    }
  };
  for (size_t r = 0; r < primary.size(); ++r) add(primary[r], bigram ? 0 : 2, static_cast<int>(r));
  for (size_t r = 0; r < extras.size(); ++r) {
    bool seen = false;
    for (const Candidate& c : primary) seen |= c.token == extras[r].token;
    if (!seen) add(extras[r], 1, static_cast<int>(r));
  }
}

double TreeGrower::Edge(const Node& n) const {
  if (mode_ == GrowMode::kDense) return n.draft_p;
  const GraftAcceptance& a = learned_.acceptance;
  // A token the draft proposed is valued by the draft's probability (with or without a
  // retrieval source agreeing); a retrieved one by its source, apart when the draft scored the
  // parent and left the token out.
  if (n.draft_rank >= 0) return a.Draft(n.draft_p, n.ctx_depth > 0, n.table_tier >= 0);
  const bool overruled = Overruled(n);
  double q = 0;
  if (n.ctx_depth > 0) q = std::max(q, a.Context(n.ctx_class, n.ctx_depth, overruled));
  if (n.table_tier >= 0) q = std::max(q, a.Table(n.table_tier, n.table_score, overruled));
  return q;
}

std::vector<int> TreeGrower::Select(int budget, Pick pick, int32_t anchor_prev,
                                    const std::vector<int>* fixed, bool* cut) {
  if (cut) *cut = false;
  std::vector<int> sel;
  std::vector<uint8_t> in_sel;
  std::priority_queue<HeapItem, std::vector<HeapItem>, Lower> heap;
  int64_t seq = 0;
  // Pruning cuts the draft tree at the floor; grafting fills every slot it can.
  const double floor = mode_ != GrowMode::kDense && pick == Pick::kDraftOnly ? params_.floor : 0.0;
  auto eligible = [&](const Node& n) {
    switch (pick) {
      case Pick::kDraftOnly:
        return n.draft_rank >= 0;
      case Pick::kAll:
        return true;
      case Pick::kGraftFill:
        return Retrieved(n);
    }
    return false;
  };
  auto take = [&](int u, double v, bool push_children) {
    if (pick != Pick::kDraftOnly && push_children) ExpandRetrieval(u, anchor_prev);
    value_.resize(pool_.size(), 0.0);
    in_sel.resize(pool_.size(), 0);
    sel.push_back(u);
    value_[u] = v;
    in_sel[u] = 1;
    if (!push_children) return;
    for (int c : pool_[u].children) {
      if (eligible(pool_[c])) heap.push({v * Edge(pool_[c]), seq++, c});
    }
  };
  if (fixed == nullptr) {
    take(0, 1.0, true);
  } else {
    // The draft tree stays as it is. The retrieved tree rooted at the root merges into it
    // (it goes on below the draft nodes that retrieval proposed too), and grafts hang off the
    // leaves where the draft stopped.
    std::vector<uint8_t> has_child(pool_.size(), 0), on_retrieved(pool_.size(), 0);
    for (int u : *fixed) {
      if (u != 0) has_child[pool_[u].parent] = 1;
    }
    on_retrieved[0] = 1;
    for (int u : *fixed) {
      const double v = u == 0 ? 1.0 : value_[pool_[u].parent] * Edge(pool_[u]);
      if (u != 0) on_retrieved[u] = on_retrieved[pool_[u].parent] && Retrieved(pool_[u]);
      // Expanding may mark a fixed child as retrieved: children come later in `fixed`.
      take(u, v, on_retrieved[u] || !has_child[u]);
    }
  }
  // --budget auto: the selection ends where the cut cannot fall further on (tree/size_cut.h);
  // the whole budget (128) took thousands of retrieved pool nodes a cycle where trees take 4-12,
  // 0.5 ms of graft's ~21 ms cycles on the 0.44B-cost pair.
  const std::vector<double> scale = learned_.calibration.NodeScale(budget);
  std::optional<SizeCut> size_cut;
  if (cut_cost_ != nullptr && fixed == nullptr && cut_rate_ > 0) {
    size_cut.emplace(*cut_cost_, scale, cut_rate_);
  }
  auto may_grow = [&] {
    return !size_cut || size_cut->MayGrow(heap.empty() ? 0.0 : heap.top().value);
  };
  if (!may_grow()) {
    if (cut) *cut = true;
    return sel;
  }
  while (static_cast<int>(sel.size()) < budget && !heap.empty()) {
    const HeapItem top = heap.top();
    heap.pop();
    if (in_sel[top.node]) continue;
    if (!(top.value > floor)) break;
    take(top.node, top.value, true);
    if (size_cut) size_cut->Add(top.value);
    if (!may_grow()) {
      if (cut) *cut = true;
      break;
    }
  }
  return sel;
}

bool TreeGrower::Score(const std::vector<int>& nodes, DraftWork* work) {
  std::vector<int32_t> tokens, parents;
  const int base = runner_.next_pid();
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = pool_[nodes[k]];
    tokens.push_back(n.token);
    parents.push_back(pool_[n.parent].pid);
    n.pid = base + static_cast<int>(k);
  }
  const double seconds = work->seconds;
  if (runner_.Score(tokens, parents, work) < 0) {
    for (int u : nodes) pool_[u].pid = -1;
    return false;
  }
  learned_.timing.AddPass(work->seconds - seconds, static_cast<int>(nodes.size()));
  for (int u : nodes) AddDraftChildren(u);
  return true;
}

void TreeGrower::GrowDense(const CycleInput& in, DraftWork* work) {
  for (int depth = 1; depth < params_.dense_depth; ++depth) {
    std::vector<int> layer;
    for (int i = 0; i < static_cast<int>(pool_.size()); ++i) {
      if (pool_[i].depth == depth && pool_[i].draft_rank >= 0 && pool_[i].pid < 0) {
        layer.push_back(i);
      }
    }
    std::stable_sort(layer.begin(), layer.end(),
                     [&](int a, int b) { return pool_[a].cum_p > pool_[b].cum_p; });
    if (static_cast<int>(layer.size()) > params_.dense_width) layer.resize(params_.dense_width);
    if (layer.empty() || !Score(layer, work)) break;
  }
}

void TreeGrower::GrowPruned(const CycleInput& in, Pick pick, DraftWork* work) {
  const double a_top = learned_.acceptance.DraftTop();
  const DraftTiming& timing = learned_.timing;
  const double rate = timing.TokensPerSecond();
  // Tokens a draft row, and a pass, must earn to pay for their time (0: nothing measured yet).
  const double row_tokens = rate * timing.RowSeconds();
  while (work->passes < params_.max_passes) {
    bool cut = false;
    std::vector<int> sel = Select(in.budget, pick, in.anchor_prev, nullptr, &cut);
    bool full = static_cast<int>(sel.size()) >= in.budget;
    if (in.cost != nullptr) {  // --budget auto: the tree is as large as pays, not as allowed
      const size_t size = CostSize(sel, *in.cost, work->seconds);
      full = cut || size < sel.size();
      sel.resize(size);
    }
    const double cutoff = full ? std::max(params_.floor, value_[sel.back()]) : params_.floor;
    // Tree nodes the draft has not scored whose best child would earn a slot; a node and its
    // parent may be scored in the same pass.
    std::vector<int> batch;
    std::vector<uint8_t> in_batch(pool_.size(), 0);
    double gain = 0;
    for (int u : sel) {
      const Node& n = pool_[u];
      if (u == 0 || n.pid >= 0 || n.depth >= params_.max_depth) continue;
      if (pool_[n.parent].pid < 0 && !in_batch[n.parent]) continue;
      const double g = value_[u] * a_top - cutoff;
      if (g <= row_tokens) continue;
      batch.push_back(u);
      in_batch[u] = 1;
      gain += g;
      if (static_cast<int>(batch.size()) >= params_.max_rows) break;
    }
    if (batch.empty()) break;
    // A pass is worth its time if it adds more tokens than that time would produce.
    if (gain < rate * timing.PassSeconds(static_cast<int>(batch.size()))) break;
    if (!Score(batch, work)) break;
  }
}

size_t TreeGrower::CostSize(const std::vector<int>& sel, const std::vector<CostSample>& cost,
                            double draft_seconds) const {
  const std::vector<double> scale = learned_.calibration.NodeScale(static_cast<int>(sel.size()));
  SizeCut size_cut(cost, scale, cut_rate_, draft_seconds);
  for (size_t k = 1; k < sel.size(); ++k) size_cut.Add(value_[sel[k]]);
  return size_cut.best_size();
}

std::vector<int> TreeGrower::RootGuesses(const CycleInput& in) {
  const std::vector<int> root = {0};
  const std::vector<int> sel =
      Select(params_.root_guesses + 1, Pick::kGraftFill, in.anchor_prev, &root);
  const DraftTiming& timing = learned_.timing;
  const double row_tokens = timing.TokensPerSecond() * timing.RowSeconds();
  const double a_top = learned_.acceptance.DraftTop();
  std::vector<int> out;
  for (size_t k = 1; k < sel.size(); ++k) {
    const int u = sel[k];
    const bool parent_in =
        pool_[u].parent == 0 || std::find(out.begin(), out.end(), pool_[u].parent) != out.end();
    if (parent_in && value_[u] * a_top - params_.floor > row_tokens) out.push_back(u);
  }
  return out;
}

Proposal TreeGrower::Propose(const CycleInput& in) {
  cycle_start_ = NowSeconds();
  Proposal p;
  p.tree.Reset(in.anchor);
  cycle_open_ = false;
  if (in.budget <= 1) return p;
  cut_cost_ = in.cost != nullptr && (mode_ == GrowMode::kPrune || mode_ == GrowMode::kGraft)
                  ? in.cost
                  : nullptr;
  cut_rate_ = in.rate > 0 ? in.rate : learned_.timing.TokensPerSecond();
  pool_.clear();
  matches_.clear();
  match_class_.clear();
  fresh_matches_ = 0;
  Node root;
  root.token = in.anchor;
  pool_.push_back(root);
  // kGraft: the best retrieved guesses below the root ride along in the root pass, so the draft
  // can draft below them before it has said anything about the root.
  std::vector<int> guesses;
  if (mode_ == GrowMode::kGraft) guesses = RootGuesses(in);
  std::vector<int32_t> guess_tokens, guess_parents;
  for (size_t k = 0; k < guesses.size(); ++k) {
    const Node& n = pool_[guesses[k]];
    guess_tokens.push_back(n.token);
    const auto it = std::find(guesses.begin(), guesses.end(), n.parent);
    guess_parents.push_back(it == guesses.end() ? -1 : static_cast<int32_t>(it - guesses.begin()));
  }
  if (runner_.BeginCycle(&p.work, guess_tokens, guess_parents)) {
    pool_[0].pid = runner_.root_pid();
    if (p.work.passes == 1) learned_.timing.AddPass(p.work.seconds, p.work.rows);
    AddDraftChildren(0);
    for (int k = 0; k < runner_.n_extra(); ++k) {
      pool_[guesses[k]].pid = runner_.root_pid() + 1 + k;
      AddDraftChildren(guesses[k]);
    }
    if (mode_ == GrowMode::kDense) {
      GrowDense(in, &p.work);
    } else {
      GrowPruned(in, mode_ == GrowMode::kGraft ? Pick::kAll : Pick::kDraftOnly, &p.work);
    }
  }
  std::vector<int> sel;
  size_t fixed = 0;  // kGraftPaper: the draft tree's nodes come first; the rest are grafts
  switch (mode_) {
    case GrowMode::kDense:
    case GrowMode::kPrune:
      sel = Select(in.budget, Pick::kDraftOnly, in.anchor_prev);
      break;
    case GrowMode::kGraft:
      sel = Select(in.budget, Pick::kAll, in.anchor_prev);
      break;
    case GrowMode::kGraftPaper: {
      const std::vector<int> drafted = Select(in.budget, Pick::kDraftOnly, in.anchor_prev);
      sel = Select(in.budget, Pick::kGraftFill, in.anchor_prev, &drafted);
      fixed = drafted.size();
      break;
    }
  }
  if (in.cost != nullptr && mode_ != GrowMode::kDense) {
    sel.resize(CostSize(sel, *in.cost, p.work.seconds));
    fixed = std::min(fixed, sel.size());
  }
  std::vector<int> tree_index(pool_.size(), -1);
  tree_index[0] = 0;
  tree_pool_.assign(1, 0);
  int draft_nodes = 0;
  for (size_t k = 1; k < sel.size(); ++k) {
    const Node& n = pool_[sel[k]];
    NodeSource src = NodeSource::kGraftTable;
    int rank = n.table_rank;
    float score = n.table_score;
    // A node is the draft's if the draft put it there (a graft the draft proposed as well,
    // pruned and brought back by retrieval, counts as a graft).
    const bool grafted = mode_ == GrowMode::kGraftPaper && k >= fixed;
    if (n.draft_rank >= 0 && !grafted) {
      src = NodeSource::kDraft, rank = n.draft_rank, score = n.draft_p;
      ++draft_nodes;
    } else if (n.ctx_depth > 0) {
      src = n.ctx_class == GraftAcceptance::kPredictionClass ? NodeSource::kPrediction
                                                             : NodeSource::kGraftContext;
      rank = 0, score = 1.0f;
    }
    tree_index[sel[k]] = p.tree.Add(n.token, tree_index[n.parent], src, rank, score);
    tree_pool_.push_back(sel[k]);
  }
  p.route = p.tree.size() > 1 ? Route::kDraftTree : Route::kAr;
  if (mode_ != GrowMode::kDense) {  // (the dense tree's values are the draft's raw products)
    const std::vector<double> scale =
        learned_.calibration.NodeScale(static_cast<int>(tree_pool_.size()));
    p.values.assign(1, 1.0);
    for (size_t k = 1; k < tree_pool_.size(); ++k) {
      p.values.push_back(scale[k] * value_[tree_pool_[k]]);
    }
  }
  // Under --budget auto the slots are those of the size the cost curve chose.
  const int slots =
      in.cost != nullptr && mode_ != GrowMode::kDense ? static_cast<int>(sel.size()) : in.budget;
  p.work.pruned_slots = std::max(0, slots - 1 - draft_nodes);
  p.work.seconds = NowSeconds() - cycle_start_;
  cycle_open_ = true;
  return p;
}

void TreeGrower::Observe(const CycleInput& in, const Proposal& p, const AcceptResult& accepted) {
  if (!cycle_open_) return;
  cycle_open_ = false;
  learned_.timing.AddCycle(NowSeconds() - cycle_start_, static_cast<int>(accepted.tokens.size()));
  const DraftTree& tree = p.tree;
  const int n = std::min(tree.size(), static_cast<int>(tree_pool_.size()));
  std::vector<uint8_t> on_path(tree.size(), 0);
  on_path[0] = 1;
  for (int32_t v : accepted.path) on_path[v] = 1;
  GraftAcceptance& a = learned_.acceptance;
  if (mode_ != GrowMode::kDense) {
    for (int i = 1; i < n; ++i) learned_.calibration.Record(i, value_[tree_pool_[i]], on_path[i]);
  }
  for (int i = 1; i < n; ++i) {
    if (!on_path[tree.parents[i]]) continue;
    const Node& u = pool_[tree_pool_[i]];
    const bool ok = on_path[i];
    if (u.draft_rank >= 0) {
      a.RecordDraft(u.draft_p, u.ctx_depth > 0, u.table_tier >= 0, ok);
      if (u.draft_rank == 0) a.RecordDraftTop(ok);
    }
    if (u.draft_rank >= 0) continue;  // valued by the draft alone
    if (u.ctx_depth > 0) a.RecordContext(u.ctx_class, u.ctx_depth, Overruled(u), ok);
    if (u.table_tier >= 0) a.RecordTable(u.table_tier, u.table_score, Overruled(u), ok);
  }
  std::vector<int32_t> pids;
  for (int32_t v : accepted.path) pids.push_back(v < n ? pool_[tree_pool_[v]].pid : -1);
  runner_.EndCycle(pids);
}

}  // namespace goose
