// SentencePiece-style encoding as llama.cpp's llm_tokenizer_spm: start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring vocabulary token
// (ties: leftmost), then map leftover characters that are not tokens to <0xXX> byte tokens.
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_impl.h"

namespace goose {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t n;  // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::EncodeSpm(std::string_view raw, std::vector<int32_t>* out) const {
  // Spaces are spelled U+2581 in SentencePiece vocabularies.
  std::string text;
  text.reserve(raw.size() + 8);
  for (char c : raw) {
    if (c == ' ') {
      text += "\xe2\x96\x81";
    } else {
      text.push_back(c);
    }
  }

  std::vector<Symbol> syms;
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(text.size() - off, Utf8Len(static_cast<unsigned char>(text[off])));
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = syms[left].n + syms[right].n;
    const int32_t id = Find(std::string_view(text).substr(syms[left].start, size));
    if (id < 0) return;
    queue.push({left, right, scores[id], size});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
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

  // Merged symbols are always tokens; only single characters can miss the vocabulary.
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = std::string_view(text).substr(syms[i].start, syms[i].n);
    const int32_t id = Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      static const char kHex[] = "0123456789ABCDEF";
      const unsigned char b = static_cast<unsigned char>(c);
      const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      int32_t byte_id = Find(name);
      if (byte_id < 0) byte_id = Find(std::string_view(&c, 1));
      if (byte_id < 0) byte_id = unk;
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

}  // namespace goose
