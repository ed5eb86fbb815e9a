// Attention of one layer over the rows of a pass (internal to src/model; BatchPass runs it).
//
// Every row attends to its own sequence's KV cache: the committed keys [first, n_past) and then
// exactly its pending ancestors and itself, in increasing position order - the keys a
// sequential pass sees, in the order they occupy a sequential cache (model.h's contract). Work
// is split into tasks of (sequence, KV head, block of queries); threads take whole tasks, a
// task computes whole rows, so no reduction depends on the split, the batch or its other
// sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/llama_config.h"
#include "model/model.h"
#include "util/aligned.h"
#include "util/thread_pool.h"

namespace goose {

// One sequence of the pass as attention sees it.
struct AttentionSequence {
  const void* k_cache = nullptr;  // [n_layer, n_ctx, kv_dim]: layer l at l * layer_stride
  const void* v_cache = nullptr;
  KvType kv_type = KvType::kF16;     // their elements
  size_t layer_stride = 0;           // in elements
  const int32_t* parents = nullptr;  // its pending nodes [base + n]: parent, depth
  const int32_t* depth = nullptr;
  int n_past = 0;  // committed keys
  int base = 0;    // pending nodes of earlier passes; its row i is pending node base + i
  int n = 0;       // its rows in this pass
  int row0 = 0;    // ... which are the pass's rows [row0, row0 + n)
  // Its pending nodes [0, base + n) form one chain (a prompt's prefill, a verified chain): a
  // row's ancestors are then the cache rows right after the committed ones, read as one run.
  bool chain = false;
};

class PassAttention {
 public:
  explicit PassAttention(const LlamaConfig& config) : c_(config) {}
  // Tasks and scratch for a pass over `seqs` (kept by pointer until the next Plan) on
  // n_threads (the pool's size, or 1).
  void Plan(std::span<const AttentionSequence> seqs, int n_threads);
  // out[r] = attention of q[r] for every row r of the pass (q, out: [rows, n_head * head_dim])
  // at `layer`, whose sliding window is `window` keys (0: none).
  void Run(int layer, int window, const float* q, float* out, ThreadPool* pool);

 private:
  struct Task {
    int seq, i0, i1, g;  // rows [i0, i1) of sequence seq, KV head g
  };
  void SplitByCost(int n_threads);
  void RunTasks(int layer, int window, const float* q, float* out, int t0, int t1, int thread);

  const LlamaConfig& c_;
  std::span<const AttentionSequence> seqs_;
  std::vector<Task> tasks_;
  std::vector<int64_t> costs_;    // per task: the keys its queries see
  std::vector<int> split_;        // thread t runs tasks [split_[t], split_[t + 1])
  int64_t work_ = 0;              // multiply-adds of the whole pass (below a bound: one thread)
  int width_ = 0;                 // scores per row: the most keys a row of the pass may see
  int anc_width_ = 0;             // ancestors per row at most
  AlignedVector<float> scores_;   // [n_threads, block * group, width_]
  std::vector<const void*> anc_;  // [n_threads, anc_width_]
};

}  // namespace goose
