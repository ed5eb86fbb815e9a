// Tensor kernels for the forward pass. Plain functions over raw float buffers and weight views.
//
// Contract (the bit-identical rule)
// - Every output element is accumulated in one fixed order that depends only on the reduction
//   length and dtype, never on the batch size, on which tokens are in the batch, or on the
//   thread count. Threads split independent outputs (weight rows, heads), never a reduction.
// - MatMul(W, X) therefore gives each token's row exactly what a one-token call gives.
// - Attention reduces over exactly the keys a query may see, in increasing key order, skipping
//   masked keys (no padding into SIMD lanes), so a tree node equals its sequential counterpart.
#pragma once

#include <cstdint>

#include "util/dtype.h"
#include "util/thread_pool.h"

namespace goose {

// How a weight matrix's bytes are laid out. kRows: GGUF's, row after row of blocks. kTiles
// (the dtypes with tiles, HasTiles: Q8_0, Q4_K, Q4_0, Q5_0): 16-row tiles in the AVX-512
// integer kernel's lane layout (qmatmul.h), made at load time on CPUs that run that kernel,
// so that no forward pass transposes them again.
enum class WeightLayout : uint8_t { kRows, kTiles };

// A read-only weight matrix [rows, cols] in `dtype` (cols contiguous, as GGUF ne[0]); in the
// kRows layout each row is RowBytes(dtype, cols) bytes.
struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  WeightLayout layout = WeightLayout::kRows;
  int64_t row_bytes() const { return RowBytes(dtype, cols); }
};

// out[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens, r < W.rows.
// x: [n_tokens, W.cols] f32; out: [n_tokens, W.rows] f32. Weight-stationary: blocks of rows
// are converted once and applied to every token. pool may be null; small products run on the
// calling thread. F32/F16/BF16: rows converted to f32, Dot's order. Q8_0/Q4_0/Q5_0/Q4_K/Q5_K/Q6_K:
// int8-quantized activations x integer levels with one fixed float order (qmatmul.h).
void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool);

// MatMul(*w[i], x, n_tokens, out[i], pool) for i < n_w <= kMaxMatMulShared (Q, K, V; gate, up):
// the same bits.
// Matrices of one quantized dtype and width share the activation quantization and one thread
// run over all their rows; the others run one MatMul each.
constexpr int kMaxMatMulShared = 4;
void MatMulShared(const WeightMatrix* const* w, int n_w, const float* x, int n_tokens,
                  float* const* out, ThreadPool* pool);

// Profiling (bench-verify's "share of time outside matmuls"): while enabled, MatMul adds its
// wall time to a process-wide counter. Off by default (then it costs one relaxed load).
void EnableMatMulTimer(bool on);
double MatMulSeconds();  // accumulated since the last EnableMatMulTimer(true)

// Row `row` of W converted to f32 (embedding lookup). out: [W.cols].
void GetRow(const WeightMatrix& w, int64_t row, float* out);

// y = x / sqrt(mean(x^2) + eps) * weight, for one vector of length n.
void RmsNorm(const float* x, const float* weight, int n, float eps, float* y);

// Rotary embedding in place on one head vector `v` of length head_dim at position `pos`; the
// first n_rot dims rotate. kNormal rotates adjacent pairs (2i, 2i+1); kNeox rotates (i, i+n_rot/2).
// theta_i = pos * freq_scale * base^(-2i/n_rot).
void Rope(float* v, int head_dim, int n_rot, int pos, float base, float freq_scale, bool neox);
// Rope split in two so a forward pass computes the angles once per position for all heads:
// cos/sin[i] for i < n_rot/2 (theta_i computed as ggml: pos * scale^i by repeated products,
// divided by freq_factors[i] when given: Llama 3.1+ rope_freqs), then the rotation of one head
// vector. Rope() == RopeCosSin (no factors) + RopeApply.
void RopeCosSin(int pos, int n_rot, float base, float freq_scale, const float* freq_factors,
                float* cos_out, float* sin_out);
void RopeApply(float* v, int n_rot, const float* cos_t, const float* sin_t, bool neox);

// out[i] = silu(gate[i]) * up[i].
void SwiGlu(const float* gate, const float* up, int n, float* out);
// out[i] = gelu(gate[i]) * up[i], GELU in its tanh form (Gemma's FFN).
void GeluGlu(const float* gate, const float* up, int n, float* out);
// x[i] = cap * tanh(x[i] / cap) in place (Gemma 2's attention scores and final logits).
// Element-wise with goose's vector tanh: the same bits on every CPU level and for any split.
void SoftCap(float* x, int n, float cap);

// In-place softmax over n values (max-subtracted, fixed order).
void Softmax(float* x, int n);

// Dot product with the fixed accumulation order used everywhere (f32 x f32): 16 lanes, lane l
// sums elements l, l+16, ... in order, then a fixed pairwise reduction (ops_kernels.inc).
// MatMul rows of F32/F16/BF16 weights use exactly this order (after an exact conversion).
float Dot(const float* a, const float* b, int n);

// The first i < n with x[i] > t (an ordered compare: a NaN is never above), or n. Vectorized
// scans for Argmax and TopK over a vocabulary of logits; the same index on every CPU level.
int FirstAbove(const float* x, int n, float t);

// y[i] += a * x[i] (element-wise; attention accumulates values in key order with it).
void Axpy(float a, const float* x, float* y, int n);

// Attention helpers over a run of rows `stride` floats apart, with exactly the operations of
// the per-row calls (one dispatch instead of one per key):
// out[j] = Dot(q, keys + j * stride, n) * scale for j < n_keys.
void DotBatch(const float* q, const float* keys, int64_t stride, int n_keys, int n, float scale,
              float* out);
// out[d] += w[j] * rows[j * stride + d], for j = 0 .. n_rows-1 in order (== Axpy per row).
void AxpyRows(const float* w, const float* rows, int64_t stride, int n_rows, int n, float* out);
// The same two over rows given by pointers (a tree node's ancestors in the KV cache).
void DotGather(const float* q, const float* const* keys, int n_keys, int n, float scale,
               float* out);
void AxpyGather(const float* w, const float* const* rows, int n_rows, int n, float* out);
// The four over an f16 KV cache: each half converted exactly to f32 as it loads, then the f32
// kernels' operations, so a row scores the same whichever level or call reads it.
void DotBatch(const float* q, const uint16_t* keys, int64_t stride, int n_keys, int n, float scale,
              float* out);
void AxpyRows(const float* w, const uint16_t* rows, int64_t stride, int n_rows, int n, float* out);
void DotGather(const float* q, const uint16_t* const* keys, int n_keys, int n, float scale,
               float* out);
void AxpyGather(const float* w, const uint16_t* const* rows, int n_rows, int n, float* out);
// DotBatch and AxpyRows for two heads of a KV group reading the same keys and values: each
// output exactly the one-head call's (out0 with q0 or w0, out1 with q1 or w1), each row loaded
// once for both.
void DotBatch2(const float* q0, const float* q1, const float* keys, int64_t stride, int n_keys,
               int n, float scale, float* out0, float* out1);
void DotBatch2(const float* q0, const float* q1, const uint16_t* keys, int64_t stride, int n_keys,
               int n, float scale, float* out0, float* out1);
void AxpyRows2(const float* w0, const float* w1, const float* rows, int64_t stride, int n_rows,
               int n, float* out0, float* out1);
void AxpyRows2(const float* w0, const float* w1, const uint16_t* rows, int64_t stride, int n_rows,
               int n, float* out0, float* out1);
// out[i] = x[i] rounded to the nearest f16, ties to even (util/fp16.h F32ToF16): the same bits
// on every level.
void ConvertToF16(const float* x, int n, uint16_t* out);

}  // namespace goose
