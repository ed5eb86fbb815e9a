// Verifier: walks a scored DraftTree and decides what is accepted (docs/methods.md §4).
//
// Contract
// - target(node) returns the token the target model emits after node `node`'s path: the argmax
//   (greedy) or the sample drawn at that node's position with the position-keyed RNG. The walk
//   starts at the root; while a child carries the target token it moves there (SPINE child
//   preferred, else the first matching child in node order), and stops otherwise. The token
//   emitted at the stop node is the bonus. target() is called only for nodes on the walk, so
//   sampling cost is O(accepted), and every emitted token is exactly what plain decoding emits.
// - Stop tokens: if an accepted token is a stop token the path ends right after it, no bonus.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tree/draft_tree.h"

namespace goose {

struct AcceptResult {
  std::vector<int32_t> path;        // accepted node indices, root excluded, in order
  std::vector<int32_t> tokens;      // committed tokens: accepted then bonus (if any)
  int32_t bonus = -1;               // -1 if generation stopped inside the path
  bool stopped = false;             // a stop token was committed
  bool spine_continuation = false;  // the path holds both spine and branch nodes
};

AcceptResult WalkTree(const DraftTree& tree, const std::function<int32_t(int node)>& target,
                      const std::function<bool(int32_t token)>& is_stop);

}  // namespace goose
