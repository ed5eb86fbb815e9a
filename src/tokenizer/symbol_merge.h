// Greedy adjacent-pair merging, the core shared by the SPM and BPE encoders (internal header).
//
// `text` starts as one symbol per UTF-8 character. Repeatedly, the adjacent pair with the highest
// priority is merged (ties: the leftmost pair), until no pair can merge. `priority(left, right)`
// returns the pair's priority, or std::nullopt if it cannot merge (SPM: the score of the merged
// token; BPE: minus the merge rank). Returns the final symbols, in order, as views into `text`.
#pragma once

#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_impl.h"

namespace goose {

template <typename Priority>
std::vector<std::string_view> MergeSymbols(std::string_view text, Priority priority) {
  struct Symbol {
    int prev, next;
    size_t start;
    size_t n;  // bytes; 0 once merged into its left neighbour
  };
  struct Pair {
    int left, right;
    double priority;
    size_t size;  // bytes of the merged pair when queued (detects stale entries)
    bool operator<(const Pair& o) const {  // max-heap: higher priority, then leftmost, first
      return priority < o.priority || (priority == o.priority && left > o.left);
    }
  };
  std::vector<Symbol> syms;
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(text.size() - off, Utf8Len(static_cast<unsigned char>(text[off])));
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  auto view = [&](int i) { return text.substr(syms[i].start, syms[i].n); };
  std::priority_queue<Pair> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::optional<double> p = priority(view(left), view(right));
    if (p) queue.push({left, right, *p, syms[left].n + syms[right].n});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Pair b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    // Stale entry: one side was merged away or has grown since the pair was queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  std::vector<std::string_view> out;
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) out.push_back(view(i));
  return out;
}

}  // namespace goose
