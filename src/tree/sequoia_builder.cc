// SequoiaDp / BuildFromTemplate: optimal static tree shapes for per-rank acceptance
// (docs/methods.md §3.5).
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>

#include "tree/tree_builders.h"

namespace goose {

SequoiaShape SequoiaDp(std::span<const double> p_rank, int budget, int max_depth) {
  const int m_max = std::max(budget, 1);
  const int levels = std::max(max_depth, 0) + 1;  // l counts levels, root included.
  const int w = static_cast<int>(p_rank.size());
  std::vector<double> p(w);
  for (int i = 0; i < w; ++i) {
    const double v = p_rank[i];
    p[i] = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
  }
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  // G[m][l][b]: best F with exactly m nodes, at most l levels, b root children.
  auto idx = [&](int m, int l, int b) {
    return (static_cast<size_t>(m) * (levels + 1) + l) * (w + 1) + b;
  };
  const size_t cells = static_cast<size_t>(m_max + 1) * (levels + 1) * (w + 1);
  std::vector<double> g(cells, kNone);
  std::vector<int> split(cells, 0);  // for b >= 2: nodes used by the root and first b-1 children
  std::vector<double> best((m_max + 1) * (levels + 1), kNone);  // C[m][l]
  std::vector<int> best_b((m_max + 1) * (levels + 1), 0);
  auto cidx = [&](int m, int l) { return static_cast<size_t>(m) * (levels + 1) + l; };

  for (int l = 1; l <= levels; ++l) {
    g[idx(1, l, 0)] = 1.0;
    for (int m = 1; m <= m_max; ++m) {
      if (l >= 2 && m >= 2) {
        for (int b = 1; b <= std::min(w, m - 1); ++b) {
          double val = kNone;
          int arg = 0;
          if (b == 1) {
            const double sub = best[cidx(m - 1, l - 1)];
            if (sub != kNone) val = 1.0 + p[0] * sub;
          } else {
            for (int y = b; y < m; ++y) {
              const double head = g[idx(y, l, b - 1)];
              const double sub = best[cidx(m - y, l - 1)];
              if (head == kNone || sub == kNone) continue;
              const double cand = head + p[b - 1] * sub;
              if (cand > val) {
                val = cand;
                arg = y;
              }
            }
          }
          g[idx(m, l, b)] = val;
          split[idx(m, l, b)] = arg;
        }
      }
      for (int b = 0; b <= std::min(w, m - 1); ++b) {
        if (g[idx(m, l, b)] > best[cidx(m, l)]) {
          best[cidx(m, l)] = g[idx(m, l, b)];
          best_b[cidx(m, l)] = b;
        }
      }
    }
  }

  // Fewest nodes reaching the best F (a zero-probability rank adds nodes but no value).
  int m_best = 1;
  for (int m = 2; m <= m_max; ++m) {
    if (best[cidx(m, levels)] > best[cidx(m_best, levels)] + 1e-12) m_best = m;
  }
  SequoiaShape shape;
  shape.expected_tokens = best[cidx(m_best, levels)];

  // Reconstruct breadth-first so parents precede children.
  struct Pending {
    std::vector<int> path;
    int m, l;
  };
  std::deque<Pending> queue = {{{}, m_best, levels}};
  while (!queue.empty()) {
    Pending cur = std::move(queue.front());
    queue.pop_front();
    const int b = best_b[cidx(cur.m, cur.l)];
    std::vector<int> child_size(b, 0);
    int m = cur.m;
    for (int bb = b; bb >= 2; --bb) {
      const int y = split[idx(m, cur.l, bb)];
      child_size[bb - 1] = m - y;
      m = y;
    }
    if (b >= 1) child_size[0] = m - 1;
    for (int r = 0; r < b; ++r) {
      std::vector<int> child = cur.path;
      child.push_back(r);
      shape.paths.push_back(child);
      queue.push_back({std::move(child), child_size[r], cur.l - 1});
    }
  }
  return shape;
}

DraftTree BuildFromTemplate(int32_t anchor, int32_t anchor_prev, const SequoiaShape& shape,
                            const TransitionTable& table, float min_score) {
  DraftTree tree;
  tree.Reset(anchor);
  std::map<std::vector<int>, int> node_of = {{{}, 0}};
  std::unordered_map<int, std::vector<Candidate>> succ_of;  // per parent node, fetched once
  for (const auto& path : shape.paths) {
    if (path.empty()) continue;
    int node = -1;
    auto it = node_of.find(std::vector<int>(path.begin(), path.end() - 1));
    const int parent = it == node_of.end() ? -1 : it->second;
    const int rank = path.back();
    if (parent >= 0 && rank >= 0) {
      auto s = succ_of.find(parent);
      if (s == succ_of.end()) {
        const int32_t prev = parent == 0 ? anchor_prev : tree.tokens[tree.parents[parent]];
        s = succ_of.emplace(parent, table.Successors(tree.tokens[parent], prev)).first;
      }
      const std::vector<Candidate>& succ = s->second;
      // `score >= min_score` is false for NaN as well.
      if (rank < static_cast<int>(succ.size()) && succ[rank].score >= min_score &&
          tree.FindChild(parent, succ[rank].token) < 0) {
        node = tree.Add(succ[rank].token, parent, NodeSource::kBranch, rank, succ[rank].score);
      }
    }
    node_of[path] = node;
  }
  return tree;
}

}  // namespace goose
