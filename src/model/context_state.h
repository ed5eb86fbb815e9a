// ContextState: what a Context holds besides its sizes (model.h): its KV cache, its pending
// tree and where its last pass's logits are. Internal to src/model: context.cc commits and
// truncates it, forward_pass.cc (BatchPass) fills it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "ops/row_subset.h"
#include "util/large_buffer.h"

namespace goose {

struct ContextState {
  KvType kv_type = KvType::kF16;
  int kv_dim = 0;           // n_head_kv * head_dim
  size_t layer_stride = 0;  // elements per layer of each cache: n_ctx * kv_dim
  size_t row_bytes = 0;     // one slot of one layer: kv_dim elements
  // [n_layer, n_ctx, kv_dim] elements each, in mappings of their own: a slot is always written
  // before it is read, so nothing is zero-filled up front, and the pages of a context's unused
  // tail are never touched (a 4096-token cache costs a short prompt nothing).
  std::unique_ptr<LargeBuffer> k_buf, v_buf;
  uint8_t* k_cache = nullptr;
  uint8_t* v_cache = nullptr;
  uint8_t* k_row(int layer, int slot) const { return k_cache + Offset(layer, slot); }
  uint8_t* v_row(int layer, int slot) const { return v_cache + Offset(layer, slot); }
  size_t Offset(int layer, int slot) const {  // in bytes
    return (layer * layer_stride + static_cast<size_t>(slot) * kv_dim) * KvTypeBytes(kv_type);
  }

  const float* rope_factors = nullptr;  // [n_rot/2] frequency factors for this n_ctx, or null
  // SetLogitTokens: the tokens of the logit columns and the output matrix's rows for them
  // (empty: all).
  std::vector<int32_t> logit_tokens;
  RowSubset output_rows;

  // Per pending node (all passes since the last commit, see ForwardExtend): [n_pending] used.
  std::vector<int32_t> parents, depth;
  bool pending = false;           // KV entries of n_pending nodes are not yet committed
  bool pending_is_chain = false;  // ... and they form one chain (KeepAll may commit it)
  int n_pending = 0;              // pending nodes, in slots [n_past, n_past + n_pending)

  std::vector<int32_t> chain;           // ForwardChain's parents
  std::unique_ptr<BatchPass> own_pass;  // Context::Forward's (made on first use)
  // The last pass's logits: n_batch rows of n_logits, readable while the BatchPass that
  // scored them lives (logits_owner, its pass counter) and has run no other pass since.
  const float* logits = nullptr;
  std::weak_ptr<const uint64_t> logits_owner;
  uint64_t logits_serial = 0;
  bool LogitsReadable() const {
    return !logits_owner.expired() && *logits_owner.lock() == logits_serial;
  }
};

}  // namespace goose
