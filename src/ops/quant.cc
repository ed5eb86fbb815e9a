#include "ops/quant.h"

#include <cmath>
#include <cstring>

#include "util/check.h"
#include "util/fp16.h"

namespace goose {

bool QuantizeSupported(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kQ8_0;
}

void QuantizeRow(DType dtype, const float* x, int64_t n, void* out) {
  GOOSE_CHECK(QuantizeSupported(dtype) && n >= 0);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    // memcpy per element: `out` need not be 2-byte aligned.
    case DType::kF16: {
      uint8_t* o = static_cast<uint8_t*>(out);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    }
    case DType::kBF16: {
      uint8_t* o = static_cast<uint8_t*>(out);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBF16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    }
    case DType::kQ8_0: {
      GOOSE_CHECK(n % 32 == 0);
      uint8_t* o = static_cast<uint8_t*>(out);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_0 blk;
        blk.d = F32ToF16(d);
        for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
        std::memcpy(o + b * sizeof(BlockQ8_0), &blk, sizeof(BlockQ8_0));
      }
      return;
    }
    default:
      return;
  }
}

void DequantizeRow(DType dtype, const void* in, int64_t n, float* out) {
  GOOSE_CHECK(QuantizeSupported(dtype) && n >= 0);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const uint8_t* p = static_cast<const uint8_t*>(in);
      const float* table = F16Table();
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = table[h];
      }
      return;
    }
    case DType::kBF16: {
      const uint8_t* p = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = BF16ToF32(h);
      }
      return;
    }
    case DType::kQ8_0: {
      GOOSE_CHECK(n % 32 == 0);
      const uint8_t* p = static_cast<const uint8_t*>(in);
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, p + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
        const float d = F16ToF32(blk.d);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<float>(blk.qs[j]) * d;
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace goose
