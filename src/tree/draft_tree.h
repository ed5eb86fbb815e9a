// DraftTree: a tree of drafted tokens, node 0 = the anchor (root), in structure-of-arrays form.
// Invariants (CheckInvariants): parents[0] == -1; 0 <= parents[i] < i for i > 0;
// depth[i] == depth[parents[i]] + 1; sibling tokens are distinct. Node order is creation order
// (convention 9, docs/methods.md §7): root, spine, root branches, spine branches, BFS extension.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace goose {

// kDraft: a draft model's token; kGraftContext / kGraftTable: a context-match / transition-table
// token grafted into a draft-model tree (Graft, docs/methods.md §3.9); kPrediction: a token of
// the request's predicted output (draft/prediction_matcher.h), drafted as a spine (goose), a
// chain (pld) or a grafted match (graft).
enum class NodeSource : uint8_t {
  kRoot = 0,
  kSpine = 1,
  kBranch = 2,
  kChain = 3,
  kDraft = 4,
  kGraftContext = 5,
  kGraftTable = 6,
  kPrediction = 7,
};
constexpr int kNumSources = 8;
const char* NodeSourceName(NodeSource s);
// A spine node: the context match's (kSpine) or the prediction's, which a spine tree lays the
// same way and the walk prefers alike.
inline bool IsSpineSource(NodeSource s) {
  return s == NodeSource::kSpine || s == NodeSource::kPrediction;
}

// What verifying a tree of `nodes` nodes costs: seconds of one target pass (a point of the
// measured verify-cost curve, budget/verify_cost.h), for sizing trees by cost.
struct CostSample {
  int nodes = 0;
  double seconds = 0;
};

struct DraftTree {
  std::vector<int32_t> tokens;     // [n]
  std::vector<int32_t> parents;    // [n], -1 for the root
  std::vector<int32_t> depth;      // [n], root = 0
  std::vector<NodeSource> source;  // [n]
  std::vector<int32_t> rank;       // [n], position in the source's candidate list (0-based)
  std::vector<float> score;        // [n], table score the node was drafted with (1 for spine)
  std::vector<uint8_t> tier;       // [n], which list of its source the node came from (builder-
                                   // specific; the best-first builder's table tiers), else 0

  int size() const { return static_cast<int>(tokens.size()); }
  void Clear();
  // Starts a tree with the anchor as root.
  void Reset(int32_t anchor);
  // Appends a child of `parent`; returns its index. Does not check sibling distinctness.
  int Add(int32_t token, int parent, NodeSource src, int rank = 0, float score = 1.0f,
          int tier = 0);
  // Keeps the first n nodes (parents come first, so the prefix is a valid tree).
  void Truncate(int n);
  // Index of the child of `node` carrying `token`, or -1 (O(n); trees are small).
  int FindChild(int node, int32_t token) const;
  // Empty string if all invariants hold, else a description of the first violation.
  std::string CheckInvariants() const;
};

}  // namespace goose
