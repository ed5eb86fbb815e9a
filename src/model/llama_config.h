// LlamaConfig: hyper-parameters of a Llama-family model, read from GGUF metadata
// (`<arch>.embedding_length`, `.block_count`, `.attention.head_count[_kv]`, `.feed_forward_length`,
// `.context_length`, `.rope.freq_base`, `.rope.scaling.*`, `.attention.layer_norm_rms_epsilon`,
// `.rope.dimension_count`) and validated (positive sizes, heads divide the width, GQA ratio
// integral). Errors name the file and the key.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace goose {

enum class RopeStyle : uint8_t { kNormal, kNeox };  // llama: adjacent pairs; qwen2: halves

struct LlamaConfig {
  std::string arch;  // "llama" or "qwen2"
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;   // n_embd / n_head unless `attention.key_length` says otherwise
  int n_ff = 0;
  int n_ctx_train = 0;
  int n_rot = 0;      // rotary dims (<= head_dim)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool has_qkv_bias = false;  // qwen2, or llama with blk.N.attn_{q,k,v}.bias tensors
  bool tied_output = false;

  static StatusOr<LlamaConfig> FromGguf(const GgufFile& gguf);
};

}  // namespace goose
