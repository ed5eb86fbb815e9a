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

// A read-only weight matrix [rows, cols] stored row-major in `dtype` (cols contiguous, as GGUF
// ne[0]); each row is RowBytes(dtype, cols) bytes.
struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes() const { return RowBytes(dtype, cols); }
};

// out[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens, r < W.rows.
// x: [n_tokens, W.cols] f32; out: [n_tokens, W.rows] f32.
void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool);

// Row `row` of W converted to f32 (embedding lookup). out: [W.cols].
void GetRow(const WeightMatrix& w, int64_t row, float* out);

// y = x / sqrt(mean(x^2) + eps) * weight, for one vector of length n.
void RmsNorm(const float* x, const float* weight, int n, float eps, float* y);

// Rotary embedding in place on one head vector `v` of length head_dim at position `pos`; the
// first n_rot dims rotate. kNormal rotates adjacent pairs (2i, 2i+1); kNeox rotates (i, i+n_rot/2).
// theta_i = pos * freq_scale * base^(-2i/n_rot).
void Rope(float* v, int head_dim, int n_rot, int pos, float base, float freq_scale, bool neox);

// out[i] = silu(gate[i]) * up[i].
void SwiGlu(const float* gate, const float* up, int n, float* out);

// In-place softmax over n values (max-subtracted, fixed order).
void Softmax(float* x, int n);

// Dot product with the fixed accumulation order used everywhere (f32 x f32).
float Dot(const float* a, const float* b, int n);

}  // namespace goose
