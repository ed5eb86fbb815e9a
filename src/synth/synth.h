// Model synthesizer: writes a random-weight Llama-family GGUF of any shape, for speed work on
// realistic sizes without downloading weights, and for tests.
//
// Contract
// - The file is what llama.cpp's converter would write for that architecture (llama, qwen2,
//   qwen3, gemma2, gemma3, phi3): standard metadata keys (general.*, <arch>.context_length /
//   embedding_length / block_count / feed_forward_length / attention.head_count[_kv] /
//   attention.layer_norm_rms_epsilon / rope.freq_base / rope.dimension_count, and
//   attention.key_length / value_length when the head size is not n_embd / n_head) and tensor
//   names (token_embd, blk.N.attn_norm, attn_q/k/v/output, attn_q/k/v.bias for qwen2, ffn_norm,
//   ffn_gate/up/down, output_norm, output unless tied). The other architectures add: qwen3
//   attn_q_norm / attn_k_norm; gemma2 post_attention_norm / post_ffw_norm, the soft-capping and
//   window keys, never an output.weight; gemma3 both of those sets of tensors, the window, its
//   pattern and rope.freq_base_swa; phi3 attn_qkv (Q, K, V rows) and ffn_up holding gate then
//   up, and its attention.sliding_window key. GGUF dims: ne[0] = input dim (attn_q.weight
//   {n_embd, n_head*head_dim}).
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
  std::string arch = "llama";  // llama, qwen2, qwen3, gemma2, gemma3 or phi3
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // 0 = n_embd / n_head
  int n_ff = 0;
  int n_vocab = 0;  // 0 = size of the source vocab; otherwise >= it (padded)
  DType dtype = DType::kF32;
  uint64_t seed = 1;
  std::string vocab_from;  // GGUF to copy tokenizer.* from; empty = the tiny model
  int context_length = 2048;
  bool tied_output = false;  // gemma2: always (its files have no output.weight)
  float rope_freq_base = 10000;
  // gemma2 / gemma3 (phi3 writes the window key only, which llama.cpp ignores for it).
  int sliding_window = 0;        // attention.sliding_window; 0 = gemma2's 4096, gemma3: none
  int swa_pattern = 0;           // attention.sliding_window_pattern, written when > 0
  float rope_freq_base_swa = 0;  // gemma3 rope.freq_base_swa, written when > 0
  float attn_softcap = 50;       // gemma2 attn_logit_softcapping
  float final_softcap = 30;      // gemma2 final_logit_softcapping (gemma3: none)
  // phi3 LongRoPE (as Phi-3-128k): > 0 writes rope.scaling.original_context_length = this,
  // rope.scaling.attn_factor = sqrt(1 + ln(context_length / this) / ln(this)) as llama.cpp's
  // converter computes it, and rope_factors_long / _short.weight [n_rot / 2] (long: 1 to 8,
  // short: 1 to 1.5, rising linearly with the frequency index).
  int rope_orig_context = 0;
};

// Known: "qwen2.5-0.5b", "llama-1b", "qwen3-0.6b", "gemma2-2b", "gemma3-1b", "phi3-mini",
// "mistral-7b" (PresetNames()). Sets architecture, sizes, vocab size, rope base, window and
// tying; leaves dtype, seed and context_length alone, and vocab_from too unless it is empty and
// the shared vocabularies have the preset's own tokenizer (phi3-mini: vocab/ggml-vocab-phi-3).
Status ApplyPreset(std::string_view like, SynthParams* p);
// The preset names, "a | b | ..." (for help texts and errors).
std::string PresetNames();

Status SynthesizeModel(const SynthParams& p, const std::string& out_path);

}  // namespace goose
