// IEEE half (f16) and bfloat16 <-> float conversions, exact and portable (no F16C needed).
// f32 -> f16/bf16 rounds to nearest even; NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace goose {

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Table-driven f16 -> f32 (a 256 KiB table built on first use; thread-safe static init).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

inline float BF16ToF32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }
inline uint16_t F32ToBF16(float f) {
  uint32_t u = FloatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The table itself, for kernels that convert in bulk.
const float* F16Table();

}  // namespace goose
