#include "tree/best_first_builder.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <queue>

#include "tree/size_cut.h"

namespace goose {

int EdgeAcceptance::ScoreBin(float score) {
  if (!(score > 0.0f)) return 0;
  return std::min(kScoreBins - 1, static_cast<int>(score * kScoreBins));
}

namespace {

struct Candidate2 {
  double value;
  int64_t seq;  // creation order: deterministic tie-break
  int parent;
  int32_t token;
  NodeSource source;
  int rank;
  float score;
  int spine_index;  // for spine candidates: index into the spine (0-based), else -1
  int tier = 0;
};

struct Lower {
  bool operator()(const Candidate2& a, const Candidate2& b) const {
    return a.value < b.value || (a.value == b.value && a.seq > b.seq);
  }
};

}  // namespace

DraftTree BuildBestFirstTree(int32_t anchor, int32_t anchor_prev, std::span<const int32_t> spine,
                             const EdgeAcceptance& model, const TransitionTable& table,
                             const BestFirstParams& params, std::vector<double>* values) {
  DraftTree tree;
  tree.Reset(anchor);
  std::vector<double> value = {1.0};
  // spine_pos[v] = number of spine tokens on v's path if v is the root or a spine node, else -1.
  std::vector<int> spine_pos = {0};
  std::priority_queue<Candidate2, std::vector<Candidate2>, Lower> heap;
  int64_t seq = 0;
  const int cls = std::clamp(params.spine_class, 0, EdgeAcceptance::kSpineClasses - 1);

  auto expand = [&](int v) {
    if (tree.depth[v] >= params.max_depth) return;
    int32_t spine_next = -1;
    if (spine_pos[v] >= 0 && spine_pos[v] < static_cast<int>(spine.size())) {
      const int d = std::min(tree.depth[v] + 1, EdgeAcceptance::kMaxSpineDepth);
      spine_next = spine[spine_pos[v]];
      heap.push({value[v] * model.spine[cls][d], seq++, v, spine_next, params.spine_source, 0, 1.0f,
                 spine_pos[v]});
    }
    const int32_t prev = v == 0 ? anchor_prev : tree.tokens[tree.parents[v]];
    const bool bigram = table.HasBigram(tree.tokens[v], prev);
    const std::vector<Candidate> primary = table.Successors(tree.tokens[v], prev);
    const std::vector<Candidate> unigram = bigram && params.unigram_extras
                                               ? table.Successors(tree.tokens[v], -1)
                                               : std::vector<Candidate>();
    const int sibling = spine_next >= 0 ? 1 : 0;
    auto push = [&](const Candidate& c, int tier, int pos) {
      const double q = model.branch[sibling][tier][EdgeAcceptance::ScoreBin(c.score)];
      heap.push({value[v] * q, seq++, v, c.token, NodeSource::kBranch, pos, c.score, -1, tier});
    };
    for (size_t r = 0; r < primary.size(); ++r) {
      if (primary[r].token != spine_next) push(primary[r], bigram ? 0 : 2, static_cast<int>(r));
    }
    for (size_t r = 0; r < unigram.size(); ++r) {
      const int32_t t = unigram[r].token;
      if (t == spine_next) continue;
      bool seen = false;
      for (const Candidate& c : primary) seen |= c.token == t;
      if (!seen) push(unigram[r], 1, static_cast<int>(r));
    }
  };

  // Sizing by cost (--budget auto): the tree grows while a larger size may pay.
  std::optional<SizeCut> cut;
  if (params.cost != nullptr) cut.emplace(*params.cost, params.node_scale, params.rate);
  expand(0);
  while (tree.size() < params.budget && !heap.empty()) {
    const Candidate2 c = heap.top();
    if (!(c.value > 0.0)) break;
    if (cut && !cut->MayGrow(c.value)) break;
    heap.pop();
    if (tree.FindChild(c.parent, c.token) >= 0) continue;  // defensive: siblings stay distinct
    const int v = tree.Add(c.token, c.parent, c.source, c.rank, c.score, c.tier);
    value.push_back(c.value);
    spine_pos.push_back(c.spine_index >= 0 ? c.spine_index + 1 : -1);
    expand(v);
    if (cut) cut->Add(c.value);
  }
  if (cut) {
    tree.Truncate(cut->best_size());
    value.resize(cut->best_size());
  }
  if (values) *values = std::move(value);
  return tree;
}

}  // namespace goose
