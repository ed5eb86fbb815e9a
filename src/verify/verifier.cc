// WalkTree: the source-priority walk of docs/methods.md §4.2-§4.3 over a DraftTree.
#include "verify/verifier.h"

#include "util/check.h"

namespace goose {

AcceptResult WalkTree(const DraftTree& tree, const std::function<int32_t(int node)>& target,
                      const std::function<bool(int32_t token)>& is_stop) {
  AcceptResult out;
  const int n = tree.size();
  GOOSE_CHECK(n >= 1);
  GOOSE_CHECK(static_cast<int>(tree.parents.size()) == n &&
              static_cast<int>(tree.source.size()) == n);
  // Children lists in node order (parents[i] < i, so one forward pass builds them in order).
  std::vector<int> first_child(n, -1), next_sibling(n, -1), last_child(n, -1);
  for (int i = 1; i < n; ++i) {
    const int p = tree.parents[i];
    GOOSE_CHECK(p >= 0 && p < i);
    if (last_child[p] < 0) {
      first_child[p] = i;
    } else {
      next_sibling[last_child[p]] = i;
    }
    last_child[p] = i;
  }
  bool has_spine = false, has_branch = false;
  int v = 0;
  while (true) {
    const int32_t tok = target(v);
    int next = -1;
    for (int u = first_child[v]; u >= 0; u = next_sibling[u]) {
      if (tree.tokens[u] != tok) continue;
      if (IsSpineSource(tree.source[u])) {  // spine wins a (dedup-impossible) duplicate
        next = u;
        break;
      }
      if (next < 0) next = u;
    }
    out.tokens.push_back(tok);
    if (next < 0) {  // rejected: tok is the bonus drawn at the stop node
      out.bonus = tok;
      out.stopped = is_stop && is_stop(tok);
      break;
    }
    out.path.push_back(next);
    has_spine |= IsSpineSource(tree.source[next]);
    has_branch |= tree.source[next] == NodeSource::kBranch;
    if (is_stop && is_stop(tok)) {  // generation ends on this accepted token: no bonus
      out.stopped = true;
      break;
    }
    v = next;
  }
  out.spine_continuation = has_spine && has_branch;
  return out;
}

}  // namespace goose
