// Model synthesizer: writes a random-weight Llama-family GGUF of any shape, for speed work on
// realistic sizes without downloading weights, and for tests.
//
// Contract
// - The file is what llama.cpp's converter would write for that architecture: standard metadata
//   keys (general.*, <arch>.context_length / embedding_length / block_count /
//   feed_forward_length / attention.head_count[_kv] / attention.layer_norm_rms_epsilon /
//   rope.freq_base / rope.dimension_count) and tensor names (token_embd, blk.N.attn_norm,
//   attn_q/k/v/output, attn_q/k/v.bias for qwen2, ffn_norm, ffn_gate/up/down, output_norm,
//   output unless tied). GGUF dims: ne[0] = input dim (attn_q.weight {n_embd, n_head*head_dim}).
// - Norm weights and biases are F32; matrices and embeddings use `dtype`
//   (F32/F16/BF16/Q8_0/Q4_0/Q5_0/Q4_K/Q5_K/Q6_K). Rows must be multiples of 32; a K-quant
//   matrix whose rows are not a multiple of 256 falls back as llama.cpp's quantizer does
//   (Q4_K/Q5_K -> Q5_0, Q6_K -> Q8_0), e.g. every n_embd = 896 row of a qwen2.5-0.5b.
// - All `tokenizer.*` metadata is copied from `vocab_from` (default: the tiny stories260K model
//   under $GOOSE_SHARED or the build's shared dir); tokens/scores/token_type arrays are padded up
//   to n_vocab with "<pad_N>" tokens of type UNUSED (5), as llama.cpp's converter pads vocabs.
// - Weights are a pure function of (params, tensor name): each row has its own SplitMix64
//   stream, so output does not depend on thread count. Matrices ~ N(0,1)/sqrt(fan_in), norms
//   ~ 1 + small jitter, biases small: activations stay O(1) and logits have std ~2, so the
//   next-token distribution is neither flat nor one-hot.
// - Tensors are generated one at a time while streaming to disk (memory ~ one tensor).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/dtype.h"
#include "util/status.h"

namespace goose {

struct SynthParams {
  std::string arch = "llama";  // "llama" or "qwen2"
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_ff = 0;
  int n_vocab = 0;  // 0 = size of the source vocab; otherwise >= it (padded)
  DType dtype = DType::kF32;
  uint64_t seed = 1;
  std::string vocab_from;  // GGUF to copy tokenizer.* from; empty = the tiny model
  int context_length = 2048;
  bool tied_output = false;
  float rope_freq_base = 10000;
};

// Known: "qwen2.5-0.5b", "llama-1b". Sets architecture, sizes, vocab size, rope base and tying;
// leaves dtype, seed, vocab_from and context_length alone.
Status ApplyPreset(std::string_view like, SynthParams* p);

Status SynthesizeModel(const SynthParams& p, const std::string& out_path);

}  // namespace goose
