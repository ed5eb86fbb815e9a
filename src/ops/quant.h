// Row conversion between f32 and the weight formats goose computes with: F32, F16, BF16, Q8_0.
//
// Contract
// - QuantizeRow writes RowBytes(dtype, n) bytes; DequantizeRow reads them and writes n floats.
//   n must be a multiple of the dtype's block size and the dtype must be one of the four above
//   (QuantizeSupported); violating either is a programming error (GOOSE_CHECK).
// - Q8_0 is bit-exact with ggml's reference quantize_row_q8_0_ref: per 32 values an f16 scale
//   d = amax / 127 followed by 32 int8 qs = roundf(x * (1/d)) (34 bytes per block); an all-zero
//   block stores d = 0, qs = 0. Dequantization is qs * f32(d).
// - F16 / BF16 round to nearest even (util/fp16.h).
#pragma once

#include <cstdint>

#include "util/dtype.h"

namespace goose {

// ggml's block_q8_0 layout.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

bool QuantizeSupported(DType dtype);
void QuantizeRow(DType dtype, const float* x, int64_t n, void* out);
void DequantizeRow(DType dtype, const void* in, int64_t n, float* out);

}  // namespace goose
