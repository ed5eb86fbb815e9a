// DraftTree methods (see draft_tree.h for the invariants).
#include "tree/draft_tree.h"

#include <unordered_set>

#include "util/check.h"

namespace goose {

const char* NodeSourceName(NodeSource s) {
  switch (s) {
    case NodeSource::kRoot:
      return "root";
    case NodeSource::kSpine:
      return "spine";
    case NodeSource::kBranch:
      return "branch";
    case NodeSource::kChain:
      return "chain";
    case NodeSource::kDraft:
      return "draft";
    case NodeSource::kGraftContext:
      return "graft_context";
    case NodeSource::kGraftTable:
      return "graft_table";
    case NodeSource::kPrediction:
      return "prediction";
  }
  return "unknown";
}

void DraftTree::Clear() {
  tokens.clear();
  parents.clear();
  depth.clear();
  source.clear();
  rank.clear();
  score.clear();
  tier.clear();
}

void DraftTree::Truncate(int n) {
  if (n >= size()) return;
  tokens.resize(n);
  parents.resize(n);
  depth.resize(n);
  source.resize(n);
  rank.resize(n);
  score.resize(n);
  tier.resize(n);
}

void DraftTree::Reset(int32_t anchor) {
  Clear();
  tokens.push_back(anchor);
  parents.push_back(-1);
  depth.push_back(0);
  source.push_back(NodeSource::kRoot);
  rank.push_back(0);
  score.push_back(1.0f);
  tier.push_back(0);
}

int DraftTree::Add(int32_t token, int parent, NodeSource src, int node_rank, float node_score,
                   int node_tier) {
  // A bad parent is a builder bug, not user input.
  GOOSE_CHECK(parent >= 0 && parent < size());
  tokens.push_back(token);
  parents.push_back(parent);
  depth.push_back(depth[parent] + 1);
  source.push_back(src);
  rank.push_back(node_rank);
  score.push_back(node_score);
  tier.push_back(static_cast<uint8_t>(node_tier));
  return size() - 1;
}

int DraftTree::FindChild(int node, int32_t token) const {
  // Children always follow their parent, so the scan can start after it.
  for (int i = node + 1; i < size(); ++i) {
    if (parents[i] == node && tokens[i] == token) return i;
  }
  return -1;
}

std::string DraftTree::CheckInvariants() const {
  const size_t n = tokens.size();
  if (parents.size() != n || depth.size() != n || source.size() != n || rank.size() != n ||
      score.size() != n || tier.size() != n) {
    return "array sizes differ: tokens " + std::to_string(n) + ", parents " +
           std::to_string(parents.size()) + ", depth " + std::to_string(depth.size()) +
           ", source " + std::to_string(source.size()) + ", rank " + std::to_string(rank.size()) +
           ", score " + std::to_string(score.size()) + ", tier " + std::to_string(tier.size());
  }
  if (n == 0) return "";  // Cleared tree.
  if (parents[0] != -1) return "node 0: parent " + std::to_string(parents[0]) + ", want -1";
  if (depth[0] != 0) return "node 0: depth " + std::to_string(depth[0]) + ", want 0";
  if (source[0] != NodeSource::kRoot) return "node 0: source is not root";
  // Sibling distinctness: (parent, token) pairs must be unique.
  std::unordered_set<uint64_t> seen;
  seen.reserve(n);
  for (size_t i = 1; i < n; ++i) {
    const std::string at = "node " + std::to_string(i) + ": ";
    const int p = parents[i];
    if (p < 0 || static_cast<size_t>(p) >= i) {
      return at + "parent " + std::to_string(p) + " not in [0, " + std::to_string(i) + ")";
    }
    if (depth[i] != depth[p] + 1) {
      return at + "depth " + std::to_string(depth[i]) + ", parent depth " +
             std::to_string(depth[p]);
    }
    if (source[i] == NodeSource::kRoot) return at + "source root on a non-root node";
    const uint64_t key = (static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(tokens[i]);
    if (!seen.insert(key).second) {
      return at + "token " + std::to_string(tokens[i]) + " repeats a sibling under parent " +
             std::to_string(p);
    }
  }
  return "";
}

}  // namespace goose
