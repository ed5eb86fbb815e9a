// LlamaConfig: hyper-parameters of a Llama-family model, read from GGUF metadata as llama.cpp
// reads them for each supported architecture, and validated (positive sizes, heads divide the
// width, GQA ratio integral). Errors name the file and the key.
//
// Architectures (`general.architecture`) and what each adds to the Llama block:
// - llama (also Mistral files): RoPE on adjacent pairs; Q/K/V biases when the file has them.
// - qwen2: NeoX RoPE (halves), Q/K/V biases.
// - qwen3: NeoX RoPE, an RMS norm of every Q and K head before RoPE (`attn_q_norm`,
//   `attn_k_norm`).
// - gemma2: embeddings times sqrt(n_embd); RMS norms of the attention and FFN outputs before
//   each residual add ("sandwich"); GELU-gated FFN; attention scores and final logits
//   soft-capped (`attn_logit_softcapping`, default 50; `final_logit_softcapping`, default 30);
//   a sliding window (`attention.sliding_window`, default 4096) on the layers the pattern
//   (`attention.sliding_window_pattern`, default 2: every other layer from layer 0) selects;
//   the output head tied to the embeddings.
// - gemma3: as gemma2 with Q/K head norms and no attention soft-capping; the final logits are
//   capped only if the key is set; a window only if `attention.sliding_window` > 0 (pattern
//   default 6), whose layers use their own RoPE base (`rope.freq_base_swa`, default 10000) and
//   no linear RoPE scaling.
// - phi3: NeoX RoPE, Q/K/V fused in `attn_qkv` and gate/up in `ffn_up` (split at load time),
//   LongRoPE frequency factors (`rope_factors_long` / `_short`, chosen by the context size
//   against `rope.scaling.original_context_length`) and `rope.scaling.attn_factor`. Its
//   `attention.sliding_window` key is read and ignored, as llama.cpp does (its SWA is disabled
//   for Phi-3 GGUFs, llama.cpp PR 13676).
// Gemma's attention scale is 1/sqrt(head_dim), except for the 27B sizes (gemma2 with 46 layers,
// gemma3 with 62), where it is 1/sqrt(n_embd / n_head): llama.cpp's rule, by layer count.
// Keys that would change the computation in ways goose does not implement (mixture of experts,
// non-causal attention, YaRN or other RoPE scalings, a per-layer window pattern of the wrong
// length) are errors naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace goose {

enum class RopeStyle : uint8_t { kNormal, kNeox };  // llama: adjacent pairs; others: halves

// The gated FFN's activation: act(gate) * up.
enum class FfnActivation : uint8_t { kSilu, kGeluTanh };

struct LlamaConfig {
  std::string arch;  // "llama", "qwen2", "qwen3", "gemma2", "gemma3" or "phi3"
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // n_embd / n_head unless `attention.key_length` says otherwise
  int n_ff = 0;
  int n_ctx_train = 0;
  int n_rot = 0;  // rotary dims (<= head_dim)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool has_qkv_bias = false;  // qwen2, or another architecture with Q/K/V bias tensors
  bool tied_output = false;

  // Architecture features (all off for llama and qwen2).
  bool qk_norm = false;     // RMS norm of every Q and K head (weights [head_dim]) before RoPE
  bool post_norms = false;  // RMS norms of the attention and FFN outputs before the residual adds
  FfnActivation ffn_act = FfnActivation::kSilu;
  float embd_scale = 1.0f;     // token embeddings are multiplied by it
  float attn_scale = 0.0f;     // q.k is multiplied by it (1/sqrt(head_dim) unless Gemma 27B)
  float attn_softcap = 0.0f;   // > 0: scores = cap * tanh(scores / cap) before the softmax
  float final_softcap = 0.0f;  // > 0: the same on the logits
  // Sliding-window attention: on the layers with swa_layers[l] = 1, a query at position p
  // sees the keys at positions > p - n_swa (itself and the n_swa - 1 before it). 0 = none.
  int n_swa = 0;
  std::vector<uint8_t> swa_layers;      // [n_layer]
  float rope_freq_base_swa = 10000.0f;  // RoPE of the window layers
  float rope_freq_scale_swa = 1.0f;
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: RoPE's cos and sin are scaled by it
  int n_ctx_orig = 0;             // rope.scaling.original_context_length (default n_ctx_train)

  bool is_swa(int layer) const { return n_swa > 0 && swa_layers[layer] != 0; }

  static StatusOr<LlamaConfig> FromGguf(const GgufFile& gguf);
};

}  // namespace goose
