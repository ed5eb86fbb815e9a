// Byte-level BPE encoding as llama.cpp's llm_tokenizer_bpe: pre-tokenize, map each word's bytes
// to the GPT-2 alphabet, then repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) and look the resulting symbols up in the vocabulary.
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
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
  int32_t rank;
  size_t size;
};

struct BigramGreater {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::EncodeBpe(std::string_view raw, std::vector<int32_t>* out) const {
  std::vector<Symbol> syms;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
  for (std::string_view word : pre_tokenizer->Split(raw)) {
    const std::string text = ByteLevelEncode(word);
    // Llama 3 style vocabularies take a whole word that is already a token as is.
    if (ignore_merges) {
      const int32_t id = Find(text);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
    }
    syms.clear();
    for (size_t off = 0; off < text.size();) {
      const size_t len =
          std::min(text.size() - off, Utf8Len(static_cast<unsigned char>(text[off])));
      const int idx = static_cast<int>(syms.size());
      syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
      off += len;
    }
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      auto it = merge_rank.find(MergeKey(std::string_view(text).substr(syms[left].start, syms[left].n),
                                         std::string_view(text).substr(syms[right].start, syms[right].n)));
      if (it == merge_rank.end()) return;
      queue.push({left, right, it->second, syms[left].n + syms[right].n});
    };
    for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = syms[b.left];
      Symbol& r = syms[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
      const std::string_view piece = std::string_view(text).substr(syms[i].start, syms[i].n);
      const int32_t id = Find(piece);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      // Not in the vocabulary (should not happen with a complete byte alphabet): fall back to
      // single-byte tokens where they exist, as llama.cpp does.
      for (char c : piece) {
        const int32_t byte_id = Find(std::string_view(&c, 1));
        if (byte_id >= 0) out->push_back(byte_id);
      }
    }
  }
}

}  // namespace goose
