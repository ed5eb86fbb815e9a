// TransitionTable: Token Recycling's successor table (TR), with GOOSE's bigram tier
// (docs/methods.md §2.3; what is harvested, and when: §2.4).
//
// Contract
// - Unigram tier: dense [n_vocab x K] successor ids and scores plus an observed bit per row.
//   Bigram tier: bounded open-addressing table keyed by (prev, tok) with K ids/scores per slot
//   (replace on collision), so memory is fixed at construction and reported by memory_bytes().
// - Harvest(prev, tok, ids, scores): overwrite row `tok` (and bigram (prev, tok) when prev >= 0)
//   with the top-K of the row whose *input* token was tok. The caller harvests rows in node
//   order, so the last occurrence of a token in a pass wins.
// - Successors(tok, prev): bigram list if present, else the observed unigram row, else empty;
//   sorted by score descending. UnigramRow(tok) gives the raw row (zeros when never harvested,
//   as TR's zero-initialised matrix).
// - Scores: softmax over the K top logits (TopK helper below); ties go to the lower id.
// - Rows are stored sorted by score descending (stable, so TopK's lower-id-first ties survive);
//   a harvest with fewer than K entries pads with id -1 / score 0, which Successors drops.
// - Bigram tier: 2^bigram_log2_slots slots, a key probes 4 slots from its hash; when all 4 hold
//   other keys the home slot is overwritten (the older bigram is forgotten).
// - Save/Load a binary file (magic, version, model fingerprint, n_vocab, K, bigram setting and
//   slot count, both tiers). Load requires every header field to equal this table's (a table
//   of another model, of a unigram-only TR table into a bigram table, or of another size is an
//   error, never silently adapted), checks the file's exact size before allocating anything and
//   after reading every id and score (in [0, 1], sorted along each row, as Harvest stores
//   TopK's), and leaves the table unchanged on error.
// - model_fingerprint identifies the model the table was harvested from (the engine passes
//   ModelFingerprint(model)); 0 = unspecified, which only matches 0.
// - Not thread-safe; may be shared across requests of one model (hot start).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/large_buffer.h"
#include "util/status.h"

namespace goose {

struct Candidate {
  int32_t token;
  float score;
};

// Top-k of a logits row: ids by logit descending (ties: lower id first) and softmax over those
// k logits only. ids/scores must hold k entries.
void TopK(const float* logits, int n_vocab, int k, int32_t* ids, float* scores);
// TopK's scores of n logits already in its order (a host engine's top-k): the softmax over them.
// scores may be ranked_logits (in place).
void RankedSoftmax(const float* ranked_logits, int n, float* scores);

class TransitionTable {
 public:
  TransitionTable(int n_vocab, int k = 10, int bigram_log2_slots = 16, bool use_bigram = true,
                  uint64_t model_fingerprint = 0);

  void Harvest(int32_t prev, int32_t tok, std::span<const int32_t> ids,
               std::span<const float> scores);
  std::vector<Candidate> Successors(int32_t tok, int32_t prev) const;
  bool HasSuccessors(int32_t tok, int32_t prev) const;
  // True if the bigram tier holds (prev, tok).
  bool HasBigram(int32_t tok, int32_t prev) const;
  bool Observed(int32_t tok) const;
  // Raw unigram row (K entries; all zero ids/scores if never harvested).
  std::span<const int32_t> UnigramIds(int32_t tok) const;
  std::span<const float> UnigramScores(int32_t tok) const;

  void Clear();
  Status Save(const std::string& path) const;
  Status Load(const std::string& path);

  int n_vocab() const { return n_vocab_; }
  int k() const { return k_; }
  bool use_bigram() const { return use_bigram_; }
  uint64_t model_fingerprint() const { return fingerprint_; }
  size_t memory_bytes() const;
  size_t bigram_entries() const;

 private:
  int n_vocab_, k_;
  bool use_bigram_;
  uint64_t fingerprint_;
  std::vector<int32_t> uni_ids_;   // [n_vocab, k]
  std::vector<float> uni_scores_;  // [n_vocab, k]
  std::vector<uint8_t> observed_;  // [n_vocab]
  // The bigram tier (5.8 MB) on huge pages: it is made, and loaded, by every process.
  template <class T>
  using Slots = std::vector<T, HugePageAllocator<T>>;
  Slots<uint64_t> bi_keys_;  // [slots]; 0 = empty, else ((prev+1) << 32) | tok
  Slots<int32_t> bi_ids_;    // [slots, k]
  Slots<float> bi_scores_;   // [slots, k]
  size_t bigram_count_ = 0;  // occupied slots

  static constexpr size_t kNoSlot = ~size_t{0};
  size_t FindSlot(uint64_t key) const;  // slot holding key, or kNoSlot
  // The row Successors reads (bigram, else observed unigram), or nullptr.
  const int32_t* FindRow(int32_t tok, int32_t prev, const float** scores) const;
};

}  // namespace goose
