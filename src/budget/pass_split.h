// SplitPass: one forward pass shared by several sequences (engine/scheduler.h), and how many
// nodes of each one's proposed tree it scores.
//
// Decoding is memory-bound: a pass over 8 rows of a 0.44B model costs ~1.15x one row, 16 rows
// ~2x, so the rows of one pass are worth most where their expected tokens are highest. Each
// sequence brings its tree in tree order (parents first) with the tokens each node is expected
// to add (`values`, root first, the root always in: every active sequence advances in every
// pass), or rows that must all go in (`fixed`: a prefill chunk, a tree whose budget the request
// fixed). The pass takes the roots and fixed rows, then nodes one at a time, always the most
// valuable next node of any tree (so each tree keeps a prefix, a tree), and stops at the count
// of nodes that maximises SizeScore(expected tokens, cost(rows), rate) (tree/size_cut.h): the
// tokens the pass earns beyond what its time earns at the server's rate, or with no rate yet
// its tokens per second. With many sequences the trees shrink towards plain steps; with one, a
// tree is cut only where its own values say.
// cost: the expanded verify-cost curve ([rows], budget_chooser.h ExpandCostCurve); a pass larger
// than its last entry is priced linearly beyond it. Deterministic.
#pragma once

#include <span>
#include <vector>

namespace goose {

struct PassTree {
  std::vector<double> values;  // [n] tokens each node adds, in tree order ([0]: the root)
  int rows = 1;                // nodes offered (values.size() unless fixed)
  bool fixed = false;          // all `rows` go in
};

// keep[i]: the nodes (root included) of tree i the pass scores.
std::vector<int> SplitPass(std::span<const PassTree> trees, const std::vector<double>& cost,
                           double rate);

}  // namespace goose
