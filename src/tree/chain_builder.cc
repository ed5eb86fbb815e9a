// BuildChain: a linear draft (PLD / GOOSE chain route), see tree_builders.h.
#include <algorithm>

#include "tree/tree_builders.h"

namespace goose {

DraftTree BuildChain(int32_t anchor, std::span<const int32_t> tokens, int max_nodes,
                     NodeSource source) {
  DraftTree tree;
  tree.Reset(anchor);
  const size_t n = std::min(tokens.size(), static_cast<size_t>(std::max(max_nodes - 1, 0)));
  for (size_t i = 0; i < n; ++i) {
    tree.Add(tokens[i], static_cast<int>(i), source, 0, 1.0f);
  }
  return tree;
}

}  // namespace goose
