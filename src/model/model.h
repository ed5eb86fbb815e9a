// Model and Context: a Llama-family transformer loaded from GGUF, and the per-sequence state
// (KV cache, activations) that scores token *trees* in one forward pass.
//
// Contract
// - Model::Load maps the GGUF, validates architecture (`llama`, `qwen2`, `qwen3`, `gemma2`,
//   `gemma3`, `phi3`: llama_config.h), hyper-parameters and every tensor's name, shape and
//   dtype, and builds the tokenizer. Any problem is a Status naming the file and key/tensor. A
//   tensor the forward pass would not use (an attn_output or FFN bias, a gemma2 output.weight,
//   ...) is an error too: ignoring it would silently change the logits. Q/K/V biases load for
//   qwen2 and, when the file has them, for the others. Fused tensors (attn_qkv, phi3's ffn_up
//   holding gate and up) become row ranges of one matrix. A Model is immutable after Load and
//   may be shared by many Contexts.
// - Context::Forward(tokens, parents) evaluates N new tokens at once. parents[i] is -1 (a root:
//   a child of the committed prefix) or an index j < i in the same batch. Token i sits at
//   position n_past() + depth(i) and attends to the committed KV entries [0, n_past()) plus
//   exactly its in-batch ancestors and itself. A chain is parents[i] = i - 1.
// - Bit-identical by construction: the logits of node i equal, bit for bit, the logits of the
//   same token evaluated one at a time after the same prefix, whatever the tree shape, batch
//   size or thread count (fixed summation orders; masked keys skipped, never padded). On a
//   sliding-window layer a node at position p sees the keys at positions > p - n_swa among the
//   committed prefix and its own ancestors, which are exactly the keys a sequential pass sees.
// - After Forward the batch's KV entries are *pending* in slots [n_past, n_past + N).
//   KeepPath(path) commits the root-to-node path `path` (batch indices, path[0] a root, each the
//   parent of the next) by compacting those slots in place and drops the rest; Truncate(n)
//   drops committed entries at positions >= n. Forward without KeepPath leaves nothing committed.
// - ForwardExtend(tokens, parents) scores a further batch *on top of* the pending nodes (a draft
//   model growing its tree pass by pass): pending nodes are numbered across passes (the first
//   pass's rows 0..N1-1, the next pass's N1.., ...), row i of this batch is pending node
//   n_pending() + i, and parents[i] is -1 or any earlier pending node. logits(i) are this
//   batch's rows; KeepPath then takes a path in the numbering of all pending nodes. Forward
//   (not Extend) drops whatever was pending first. The bit-identity holds across passes.
// - Errors: Forward returns a Status if the batch does not fit the context or is malformed.
// - Not thread-safe: one Context per sequence; it owns its scratch buffers.
// - BatchPass::Forward(seqs) scores the rows of several sequences (each a Context with its
//   tokens and parents, as Forward or ForwardExtend take them) in one pass: the matrix
//   multiplies run once over all rows, so each weight is read once per pass; attention runs per
//   row against its own Context's KV cache, positions and ancestors. Each Context then reads as
//   if its own Forward had run: logits(i) bit for bit what the one-sequence pass gives, whatever
//   else shares the pass (sequences, their order and sizes, thread counts), its rows pending in
//   its own slots, KeepPath/KeepAll/Truncate as after Forward. Context::Forward is the
//   one-sequence case of the same code (through a BatchPass the Context owns).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/llama_config.h"
#include "ops/ops.h"
#include "tokenizer/tokenizer.h"
#include "util/large_buffer.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

struct LayerWeights {
  WeightMatrix wq, wk, wv, wo;        // [n_head*head_dim, n_embd], [n_head_kv*head_dim, n_embd], ..
  const float* bq = nullptr;          // Q/K/V biases [n_head*head_dim] (null when absent)
  const float* bk = nullptr;          // [n_head_kv*head_dim]
  const float* bv = nullptr;          // [n_head_kv*head_dim]
  WeightMatrix w_gate, w_up, w_down;  // [n_ff, n_embd], [n_ff, n_embd], [n_embd, n_ff]
  const float* attn_norm = nullptr;   // [n_embd]
  const float* ffn_norm = nullptr;    // [n_embd]
  const float* q_norm = nullptr;      // [head_dim] per-head Q / K norms (config.qk_norm)
  const float* k_norm = nullptr;      // [head_dim]
  const float* attn_post_norm = nullptr;  // [n_embd] (config.post_norms)
  const float* ffn_post_norm = nullptr;   // [n_embd]
};

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  // The same from a parsed GGUF (e.g. GgufFile::FromBytes: the GGUF fuzz target).
  static StatusOr<std::unique_ptr<Model>> FromGguf(std::unique_ptr<GgufFile> gguf);

  const LlamaConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *gguf_; }
  // Bytes of weights read per token (all matrices + embeddings row + norms).
  uint64_t weight_bytes() const { return weight_bytes_; }

  const WeightMatrix& token_embd() const { return token_embd_; }  // [n_vocab, n_embd]
  const WeightMatrix& output() const { return output_; }          // [n_vocab, n_embd]
  const float* output_norm() const { return output_norm_; }       // [n_embd]
  // RoPE frequency factors [n_rot / 2] (angles are divided by them) for a context of n_ctx
  // tokens, or null: Llama 3.1+'s rope_freqs.weight; phi3's rope_factors_long.weight when
  // n_ctx exceeds rope.scaling.original_context_length, else rope_factors_short.weight.
  const float* rope_factors(int n_ctx) const;
  const float* rope_freqs() const { return rope_freqs_; }  // Llama 3.1+'s, or null
  const std::vector<LayerWeights>& layers() const { return layers_; }

 private:
  Model() = default;
  // On CPUs whose integer kernel is AVX-512 VNNI (not AMX), the matrices of a dtype with tiles
  // (HasTiles: Q8_0, Q4_K, Q4_0, Q5_0) are repacked into that kernel's tiles
  // (WeightLayout::kTiles, qmatmul.h), owned here: about the same size, and no forward pass
  // transposes them again (qwen0.5B-sized Q8_0 matrices at 16 tokens 17-30% faster).
  void TileMatrices();
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  LlamaConfig config_;
  WeightMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;
  const float* rope_long_ = nullptr;  // phi3 LongRoPE factors
  const float* rope_short_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<std::vector<float>> owned_f32_;  // norms/biases converted to f32 if stored otherwise
  std::unique_ptr<LargeBuffer> tiles_;         // the tiled matrices (TileMatrices), or null
  uint64_t weight_bytes_ = 0;
};

// What a Context's KV cache stores: f16 (the default, as llama.cpp's: half the memory and
// half the bytes a pass reads at depth) or f32. Each K and V row is rounded once, when its
// token is scored, so a tree node and one-token decoding read the same values.
enum class KvType { kF16, kF32 };
const char* KvTypeName(KvType t);  // "f16", "f32"
bool ParseKvType(const std::string& name, KvType* out);
size_t KvTypeBytes(KvType t);

// Memory a Context takes, to check a size before constructing one: the constructor and Forward
// allocate without checking, so an absurd n_ctx or batch would end in std::bad_alloc.
// ContextSize: the capacity Context(model, n_ctx) gets (n_ctx, or min(context length, 4096)
// for 0). KvCacheBytes: its K and V caches, [n_layer, n_ctx, n_head_kv * head_dim] each.
int ContextSize(const LlamaConfig& config, int n_ctx);
uint64_t KvCacheBytes(const LlamaConfig& config, int n_ctx, KvType kv = KvType::kF16);
// The scratch Forward grows to for a batch of n_batch tokens: activations and logits.
uint64_t ForwardScratchBytes(const LlamaConfig& config, int n_batch);

class BatchPass;
struct ContextState;  // context_state.h: the KV cache and pending tree

class Context {
 public:
  // n_ctx: KV capacity in tokens (0 = min(model's context length, 4096)). pool may be null
  // (single-threaded). Allocates the KV cache [n_layer, n_ctx, n_head_kv * head_dim] x 2 of
  // `kv` elements.
  Context(const Model& model, int n_ctx, ThreadPool* pool, KvType kv = KvType::kF16);
  ~Context();

  Status Forward(std::span<const int32_t> tokens, std::span<const int32_t> parents);
  // See the contract: extends the pending tree (with nothing pending it is Forward).
  Status ForwardExtend(std::span<const int32_t> tokens, std::span<const int32_t> parents);
  // Convenience: Forward with parents[i] = i - 1 (a causal chain continuing the committed
  // prefix). Like Forward it commits nothing; KeepAll() (or KeepPath) commits.
  Status ForwardChain(std::span<const int32_t> tokens);

  // Logits of batch row i of the last Forward (or BatchPass::Forward that scored this
  // Context): [n_logits()], column j scoring token logit_token(j). After a BatchPass they live
  // in its buffer until its next Forward or its destruction: then n_batch() is 0 and logits()
  // a check failure.
  const float* logits(int i) const;
  // Logits over part of the vocabulary (a drafter's shortlist, which needs no others): column j
  // scores token tokens[j], with the bits the whole vocabulary's column for it has; empty:
  // the whole vocabulary (column j is token j). Applies from the next Forward. SetLogitToken
  // changes one column at the cost of 16 (a tile of the output matrix).
  void SetLogitTokens(std::span<const int32_t> tokens);
  void SetLogitToken(int j, int32_t token);
  int n_logits() const;
  int32_t logit_token(int j) const;
  int n_batch() const;  // rows whose logits(i) are readable (0 once they are gone)
  // Nodes scored since the last commit (all passes of a ForwardExtend series), 0 after a commit.
  int n_pending() const;

  // KeepPath/KeepAll/Truncate take engine-computed arguments: misuse (no pending batch, a path
  // that is not a root-to-node path, n_past out of range) is a GOOSE_CHECK failure.
  void KeepPath(std::span<const int32_t> path);
  // Commits every pending node, which must form one chain (e.g. a prefill).
  void KeepAll();
  void Truncate(int n_past);

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  KvType kv_type() const;
  const Model& model() const { return model_; }

 private:
  friend class BatchPass;
  Status ForwardOwn(std::span<const int32_t> tokens, std::span<const int32_t> parents, bool extend);
  const Model& model_;
  ThreadPool* pool_;
  int n_ctx_ = 0;
  int n_past_ = 0;
  int n_batch_ = 0;
  std::unique_ptr<ContextState> state_;
};

// One sequence's rows in a BatchPass: its Context and the batch that Context::Forward (or,
// with extend, ForwardExtend) would take. A prefill chunk is a chain (parents[i] = i - 1)
// continuing the committed prefix.
struct SequenceRows {
  Context* ctx = nullptr;
  std::span<const int32_t> tokens, parents;
  bool extend = false;
};

// The scratch of multi-sequence passes (activations and the logits of every row), one per
// scheduler; see the contract at the top. Forward's rules:
// - Every Context is of this BatchPass's Model and appears at most once; each sequence's batch
//   must be one its Context's Forward (or ForwardExtend) would accept. Otherwise a Status
//   error naming the sequence, and no Context changes.
// - Threads: this BatchPass's pool (null: the calling thread), not the Contexts' own. Attention
//   tasks are (sequence, KV head, block of queries); threads split tasks, never a reduction.
// - The Contexts' logits(i) point into this object until its next Forward or its destruction
//   (then their n_batch() reads 0). Not thread-safe, nor are the Contexts while it runs.
class BatchPass {
 public:
  BatchPass(const Model& model, ThreadPool* pool);
  ~BatchPass();
  BatchPass(const BatchPass&) = delete;
  BatchPass& operator=(const BatchPass&) = delete;

  Status Forward(std::span<const SequenceRows> seqs);
  int n_rows() const { return n_rows_; }  // rows of the last pass, all sequences
  const Model& model() const { return model_; }

 private:
  friend class Context;  // its Forward is a one-sequence Run
  struct Impl;
  // Forward; `single` names the Context method of a one-sequence pass in its errors.
  Status Run(std::span<const SequenceRows> seqs, const char* single);
  Status Validate(std::span<const SequenceRows> seqs, const char* single) const;
  void Plan(std::span<const SequenceRows> seqs);
  void Publish();
  const Model& model_;
  int n_rows_ = 0;
  // Passes run; a Context's logits are readable while this is alive and still says the pass
  // that scored it.
  std::shared_ptr<uint64_t> serial_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace goose
