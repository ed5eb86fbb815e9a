#include "ops/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/check.h"
#include "util/fp16.h"

namespace goose {

namespace {

int NearestInt(float x) { return static_cast<int>(std::lrintf(x)); }

// f16 of v rounded *up* in magnitude (v >= 0), so scale * max_level still covers the range.
uint16_t F16Ceil(float v) {
  uint16_t h = F32ToF16(v);
  if (F16ToF32(h) < v) ++h;
  return h;
}

void QuantizeQ8_0(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 blk;
    blk.d = F32ToF16(d);
    for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeQ4_0(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f, max = 0.0f;  // max: the value of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 blk;
    blk.d = F32ToF16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(xb[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(xb[j + 16] * id + 8.5f)));
      blk.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeQ5_0(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 blk;
    blk.d = F32ToF16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(xb[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(xb[j + 16] * id + 16.5f)));
      blk.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(blk.qh, &qh, 4);
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

// Q4_K / Q5_K: per 32 values an affine fit x ~ d*sc*q - dmin*m with q in [0, max_q], computed
// by min/max, scales rounded up so no value clips. L receives the 256 levels.
void FitK4(const float* x, int max_q, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales,
           uint8_t* L) {
  float scale[8], minv[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float mn = 0.0f, mx = 0.0f;  // the min is <= 0 (ggml stores -min as a positive m)
    for (int l = 0; l < 32; ++l) {
      mn = std::min(mn, x[32 * j + l]);
      mx = std::max(mx, x[32 * j + l]);
    }
    scale[j] = (mx - mn) / static_cast<float>(max_q);
    minv[j] = -mn;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, minv[j]);
  }
  const uint16_t dh = F16Ceil(max_scale / 63.0f), mh = F16Ceil(max_min / 63.0f);
  const float d = F16ToF32(dh), dmin = F16ToF32(mh);
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] =
        static_cast<uint8_t>(d > 0 ? std::min(63, static_cast<int>(std::ceil(scale[j] / d))) : 0);
    lm[j] = static_cast<uint8_t>(dmin > 0 ? std::min(63, NearestInt(minv[j] / dmin)) : 0);
  }
  PackScaleMinK4(ls, lm, scales);
  for (int j = 0; j < 8; ++j) {
    const float d1 = d * ls[j], m1 = dmin * lm[j];
    for (int l = 0; l < 32; ++l) {
      const int q = d1 > 0 ? NearestInt((x[32 * j + l] + m1) / d1) : 0;
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, max_q));
    }
  }
  *d_out = dh;
  *dmin_out = mh;
}

void QuantizeQ4_K(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ4_K blk;
    uint8_t L[256];
    FitK4(x + b * 256, 15, &blk.d, &blk.dmin, blk.scales, L);
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
      }
    }
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeQ5_K(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ5_K blk;
    uint8_t L[256];
    FitK4(x + b * 256, 31, &blk.d, &blk.dmin, blk.scales, L);
    std::memset(blk.qh, 0, sizeof(blk.qh));
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
        blk.qs[32 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        blk.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
      }
    }
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

// Q6_K: per 16 values a symmetric scale d*sc (sc int8 > 0) with q - 32 in [-31, 31].
void QuantizeQ6_K(const float* x, int64_t n, uint8_t* o) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    float scale[16], max_scale = 0;
    for (int g = 0; g < 16; ++g) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(xb[16 * g + l]));
      scale[g] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[g]);
    }
    BlockQ6_K blk;
    blk.d = F16Ceil(max_scale / 127.0f);
    const float d = F16ToF32(blk.d);
    uint8_t L[256];
    for (int g = 0; g < 16; ++g) {
      const int sc = d > 0 ? std::min(127, static_cast<int>(std::ceil(scale[g] / d))) : 0;
      blk.scales[g] = static_cast<int8_t>(sc);
      const float d1 = d * sc;
      for (int l = 0; l < 16; ++l) {
        const int q = d1 > 0 ? NearestInt(xb[16 * g + l] / d1) : 0;
        L[16 * g + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {  // two halves of 128 values: 64 ql bytes, 32 qh bytes each
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      const uint8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
    std::memcpy(o + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void DequantizeQ4_K(const uint8_t* p, int64_t n, float* y, bool five_bit) {
  const size_t bytes = five_bit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = p + b * bytes;
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    const float d = F16ToF32(dh), dmin = F16ToF32(mh);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = five_bit ? blk + 16 : nullptr;
    const uint8_t* qs = blk + (five_bit ? 48 : 16);
    float* yb = y + b * 256;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc0, m0, sc1, m1;
      GetScaleMinK4(2 * j, scales, &sc0, &m0);
      GetScaleMinK4(2 * j + 1, scales, &sc1, &m1);
      const float d1 = d * sc0, mm1 = dmin * m0, d2 = d * sc1, mm2 = dmin * m1;
      for (int l = 0; l < 32; ++l) {
        int lo = qs[32 * j + l] & 0xF, hi = qs[32 * j + l] >> 4;
        if (five_bit) {
          lo += ((qh[l] >> (2 * j)) & 1) << 4;
          hi += ((qh[l] >> (2 * j + 1)) & 1) << 4;
        }
        yb[64 * j + l] = d1 * lo - mm1;
        yb[64 * j + 32 + l] = d2 * hi - mm2;
      }
    }
  }
}

void DequantizeQ6_K(const uint8_t* p, int64_t n, float* y) {
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ6_K blk;
    std::memcpy(&blk, p + b * sizeof(blk), sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      const int8_t* sc = blk.scales + 8 * h;
      float* yh = y + b * 256 + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        yh[l] = d * sc[is] * q1;
        yh[l + 32] = d * sc[is + 2] * q2;
        yh[l + 64] = d * sc[is + 4] * q3;
        yh[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

}  // namespace

void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

void GetScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

bool QuantizeSupported(DType dtype) { return GetDTypeSupport(dtype).quantize; }

void QuantizeRow(DType dtype, const float* x, int64_t n, void* out) {
  GOOSE_CHECK(QuantizeSupported(dtype) && n >= 0);
  GOOSE_CHECK(n % GetDTypeInfo(dtype).block_size == 0);
  uint8_t* o = static_cast<uint8_t*>(out);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    // memcpy per element: `out` need not be 2-byte aligned.
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBF16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    case DType::kQ8_0:
      return QuantizeQ8_0(x, n, o);
    case DType::kQ4_0:
      return QuantizeQ4_0(x, n, o);
    case DType::kQ5_0:
      return QuantizeQ5_0(x, n, o);
    case DType::kQ4_K:
      return QuantizeQ4_K(x, n, o);
    case DType::kQ5_K:
      return QuantizeQ5_K(x, n, o);
    case DType::kQ6_K:
      return QuantizeQ6_K(x, n, o);
    default:  // (a dtype util/dtype.cc's table lists without a quantizer here)
      GOOSE_CHECK(false && "QuantizeRow: no quantizer for this dtype");
  }
}

void DequantizeRow(DType dtype, const void* in, int64_t n, float* out) {
  GOOSE_CHECK(GetDTypeSupport(dtype).compute && n >= 0);
  GOOSE_CHECK(n % GetDTypeInfo(dtype).block_size == 0);
  const uint8_t* p = static_cast<const uint8_t*>(in);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const float* table = F16Table();
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = table[h];
      }
      return;
    }
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = BF16ToF32(h);
      }
      return;
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, p + b * sizeof(blk), sizeof(blk));
        const float d = F16ToF32(blk.d);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<float>(blk.qs[j]) * d;
      }
      return;
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, p + b * sizeof(blk), sizeof(blk));
        const float d = F16ToF32(blk.d);
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = static_cast<float>((blk.qs[j] & 0xF) - 8) * d;
          out[b * 32 + j + 16] = static_cast<float>((blk.qs[j] >> 4) - 8) * d;
        }
      }
      return;
    case DType::kQ5_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ5_0 blk;
        std::memcpy(&blk, p + b * sizeof(blk), sizeof(blk));
        const float d = F16ToF32(blk.d);
        uint32_t qh;
        std::memcpy(&qh, blk.qh, 4);
        for (int j = 0; j < 16; ++j) {
          const int q0 = (blk.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
          const int q1 = (blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
          out[b * 32 + j] = static_cast<float>(q0 - 16) * d;
          out[b * 32 + j + 16] = static_cast<float>(q1 - 16) * d;
        }
      }
      return;
    case DType::kQ4_K:
      return DequantizeQ4_K(p, n, out, false);
    case DType::kQ5_K:
      return DequantizeQ4_K(p, n, out, true);
    case DType::kQ6_K:
      return DequantizeQ6_K(p, n, out);
    default:  // (a dtype util/dtype.cc's table lists without a dequantizer here)
      GOOSE_CHECK(false && "DequantizeRow: no dequantizer for this dtype");
  }
}

}  // namespace goose
