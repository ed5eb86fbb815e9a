// ContextMatcher: the context-match (PLD / GOOSE spine) draft source, docs/methods.md §2.1, §2.2.
//
// Contract
// - The pool is every token appended so far (prompt incl. BOS, then committed tokens).
//   Append() is O(1) amortized: it indexes, for each n of `ngram_sizes`, the n-gram whose
//   successor just became known (the n-gram at the very end of the pool is never indexed, so a
//   query never matches itself). Other sizes are found by a scan of the pool (ProposePld's
//   sizes: give them as `ngram_sizes` when they are what the matcher is for). Why only these:
//   Append runs for every committed token, also in the plain steps of --budget auto, and on
//   the tiny model 5 indexed sizes took ~1% of its plain decoding time.
// - Propose(): for n in `ngram_sizes` (longest first) look up the last n tokens of
//   pool + `extra` (extra = tokens drafted but not committed, for chain extension); on the first
//   hit take the earliest occurrence j and return up to `max_chain` tokens that follow it in
//   pool + extra. Returns ngram = matched n (0 if no match).
// - Consensus: for the longest n whose n-gram occurred before, at least 2 occurrences and all of
//   them followed by the same token.
// - Confidence (exact rational arithmetic, convention 15): see Confidence().
// - ProposeSpine (§2.1 steps 1-5): c = MatchConfidence(|S|, Consensus()); if c > 3/5, limit =
//   floor(max_extended_chain * c) and, while |chain| < limit, Propose(extra = chain) and append
//   the whole continuation (up to max_chain). Convention 10: the chain is NOT cut back to the
//   limit (it may end up to max_chain - 1 tokens past it); the tree builder cuts it at
//   floor(B * r). Saturated cycles (c == 1): a continuation whose own confidence, evaluated on
//   pool + chain before appending, is below 1 is appended and then extension stops.
// - ProposePld follows the reference PLD code (§2.2): for n = max_n..min_n, the earliest window
//   j equal to the last n pool tokens with j + n < |pool| - n (continuation starts before the
//   query window) and j + n + num_tokens <= |pool| (the FULL continuation must exist; shorter
//   ones are not returned). Because both are upper bounds on j, the earliest occurrence decides.
// - Not thread-safe; one per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace goose {

struct MatcherParams {
  std::vector<int> ngram_sizes = {5, 4, 3};  // longest first
  int max_chain = 20;                        // tokens returned per match
  int long_match = 8;                        // long-match threshold of docs/methods.md §2.1 step 4
  int max_extended_chain = 100;              // chain-extension cap of docs/methods.md §2.1 step 5
};

// A confidence value c = num / den in [0, 1], kept exact so budget arithmetic never rounds
// (14-token match: c = 4/5 exactly, not 0.7999999999999999).
struct Confidence {
  int64_t num = 0;
  int64_t den = 1;
  double value() const { return static_cast<double>(num) / static_cast<double>(den); }
  // floor(x * c) for integer x.
  int64_t FloorTimes(int64_t x) const { return x * num / den; }
  bool GreaterThan(int64_t n, int64_t d) const { return num * d > n * den; }
  bool IsOne() const { return num == den && den != 0; }
};

// docs/methods.md §2.1 step 4: len 0 -> 0; consensus -> 1;
// len >= long_match -> min(0.9, 0.7 + 0.2(len-8)/12); else 0.6 * len / 8.
Confidence MatchConfidence(int chain_len, bool consensus, int long_match = 8);

struct ContextMatch {
  std::vector<int32_t> tokens;  // continuation (empty if no match)
  int ngram = 0;                // n of the matching n-gram (0 = none)
  int64_t start = -1;           // pool index where the continuation starts
};

class ContextMatcher {
 public:
  explicit ContextMatcher(MatcherParams params = {});

  void Append(int32_t token);
  void Append(std::span<const int32_t> tokens);
  void Clear();
  const std::vector<int32_t>& pool() const { return pool_; }
  const MatcherParams& params() const { return params_; }

  // Longest-first, earliest-occurrence match on pool + extra, continuation up to `max_tokens`
  // (default params.max_chain).
  ContextMatch Propose(std::span<const int32_t> extra = {}, int max_tokens = -1) const;
  // Consensus of the longest n-gram (of pool + extra) that occurred before.
  bool Consensus(std::span<const int32_t> extra = {}) const;
  // §2.1 steps 1-5: match, confidence, and chain extension while c > 0.6. Returns the spine
  // chain and its confidence (confidence of the initial match).
  struct Spine {
    std::vector<int32_t> tokens;
    Confidence confidence;
    int ngram = 0;
    bool consensus = false;
  };
  Spine ProposeSpine() const;

  // PLD baseline (§2.2): n = max_n..min_n, earliest match, `num_tokens` continuation.
  std::vector<int32_t> ProposePld(int max_n = 3, int min_n = 1, int num_tokens = 10) const;

  size_t memory_bytes() const;

 private:
  struct Entry {
    int64_t first_pos = -1;     // start index of the earliest occurrence
    int32_t count = 0;          // occurrences with a known successor
    int32_t next_token = -1;    // successor of the first occurrence
    bool all_next_same = true;  // all occurrences followed by next_token
  };
  // One n's occurrences by n-gram hash: open addressing, linear probing, at most half full; a
  // slot is verified against the pool, so n-grams with one hash get separate slots. (An
  // unordered_multimap allocated a node per new n-gram: ~1 us per appended token over five
  // sizes, 1.5% of a tiny-model plain step.)
  struct Index {
    struct Slot {
      uint64_t hash = 0;
      Entry entry;  // entry.count == 0: empty
    };
    std::vector<Slot> slots;  // a power of two, or none
    size_t used = 0;
    // The entry of hash h whose n-gram starts where same(first_pos) says; null if none.
    template <class Same>
    const Entry* Find(uint64_t h, Same same) const {
      if (slots.empty()) return nullptr;
      const size_t mask = slots.size() - 1;
      for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& s = slots[i];
        if (s.entry.count == 0) return nullptr;
        if (s.hash == h && same(s.entry.first_pos)) return &s.entry;
      }
    }
    void Insert(uint64_t h, const Entry& e);
  };
  struct Match {
    int n = 0;  // 0 = no n-gram of ngram_sizes occurred before
    Entry entry;
  };
  // Occurrences (with a known successor) of the last n tokens of pool + extra: the pool index,
  // plus a scan of the few windows whose successor lies in `extra` (or a full scan when n is
  // not indexed).
  Entry Lookup(int n, std::span<const int32_t> extra) const;
  // Longest n of params_.ngram_sizes that occurred before.
  Match LongestMatch(std::span<const int32_t> extra) const;
  // The continuation of match m in pool + extra (what Propose returns for it).
  ContextMatch Continuation(const Match& m, std::span<const int32_t> extra, int max_tokens) const;
  static bool IsConsensus(const Match& m);
  const Index* IndexFor(int n) const;

  MatcherParams params_;
  std::vector<int32_t> pool_;
  // One index per n in indexed_ns_ (params_.ngram_sizes, sorted).
  std::vector<int> indexed_ns_;
  std::vector<Index> index_;
};

}  // namespace goose
