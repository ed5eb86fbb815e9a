// Row conversion between f32 and the weight formats goose computes with: F32, F16, BF16, Q8_0,
// Q4_0, Q5_0, Q4_K, Q5_K, Q6_K (ggml's block layouts, byte for byte).
//
// Contract
// - QuantizeRow writes RowBytes(dtype, n) bytes; DequantizeRow reads them and writes n floats.
//   n must be a multiple of the dtype's block size, and the dtype QuantizeSupported
//   (QuantizeRow) or DTypeSupported (DequantizeRow): util/dtype.h's table. Violating either is
//   a programming error (GOOSE_CHECK).
// - Q8_0 is bit-exact with ggml's quantize_row_q8_0_ref: per 32 values an f16 scale
//   d = amax / 127 followed by 32 int8 qs = roundf(x * (1/d)); dequantization is qs * f32(d).
// - Q4_0 follows ggml's reference: d = (value of largest magnitude) / -8, q = min(15,
//   trunc(x / d + 8.5)); dequantization (q - 8) * d. Error <= |d| per element. Q5_0 likewise
//   with -16, 16.5 and 31 (5-bit levels).
// - K-quants (256-value super-blocks) dequantize exactly as ggml (Q4_K/Q5_K: d * sc * q - dmin *
//   m per 32 values; Q6_K: d * sc * (q - 32) per 16). The quantizers are goose's own simple
//   min/max fits (not ggml's iterative search): every sub-block's range is covered, so the
//   error is at most half a step plus half a min step (Q4_K/Q5_K) or half a step (Q6_K).
// - F16 / BF16 round to nearest even (util/fp16.h).
#pragma once

#include <cstdint>

#include "util/dtype.h"

namespace goose {

// ggml's block layouts.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // value j in the low nibble of qs[j], value j+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

struct BlockQ5_0 {
  uint16_t d;      // f16 scale
  uint8_t qh[4];   // 5th bits: bit j -> value j (j < 32), little-endian uint32
  uint8_t qs[16];  // low 4 bits as Q4_0
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");

struct BlockQ4_K {
  uint16_t d;          // f16 super-block scale for the 6-bit scales
  uint16_t dmin;       // f16 super-block scale for the 6-bit mins
  uint8_t scales[12];  // 8 scales + 8 mins, 6 bits each (packed as ggml's get_scale_min_k4)
  uint8_t qs[128];     // per 64 values: 32 bytes, low nibbles = first 32, high = next 32
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // 5th bits: bit 2k of qh[l] -> value 64k + l, bit 2k+1 -> 64k + 32 + l
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");

struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// GetDTypeSupport(dtype).quantize (util/dtype.h).
bool QuantizeSupported(DType dtype);
void QuantizeRow(DType dtype, const float* x, int64_t n, void* out);
void DequantizeRow(DType dtype, const void* in, int64_t n, float* out);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (ggml layout).
void GetScaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);
// The inverse: 8 six-bit scales ls and mins lm packed into the 12 bytes at s.
void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* s);

}  // namespace goose
