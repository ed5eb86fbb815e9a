// Integer-dot MatMul for quantized weights (see qmatmul.h for the fixed order).
//
// Weight-stationary: a tile of W rows (16 for AVX-512, 8 for AVX2, 1 scalar) is unpacked once
// into an "IR" - unsigned 8-bit levels interleaved so that one vector holds 4 consecutive
// columns of each of the W rows, plus per-block scales as floats/ints - and then applied to
// every token of the batch. With rows in lanes, VNNI's vpdpbusd (u8 x s8 -> s32, 4 columns per
// lane) needs no horizontal sums, and each lane's float accumulation is the scalar order.
//
// Q8_0 and Q4_K weights stored as tiles (WeightLayout::kTiles: the AVX-512 IR, Q4_K's levels
// still as nibbles, made at load time) are read in place by every batch size. For row-major
// weights and a few tokens (decode) on AVX-512 the unpack is most of the work, so full tiles
// of Q8_0, Q4_0, Q5_0, Q4_K and Q6_K are read straight from the blocks instead ("direct"
// kernels): integer row sums are folded into the same lane layout, and the float code is the
// tile kernel's.
#include "ops/qmatmul.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/check.h"
#include "util/fp16.h"

#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose {

namespace qmm {

Fmt GetFmt(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return {32, 32, 128, false};  // IR level = q + 128
    case DType::kQ4_0:
      return {32, 32, 8, false};
    case DType::kQ5_0:
      return {32, 32, 16, false};
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {256, 32, 0, true};
    case DType::kQ6_K:
      return {256, 16, 0, true};
    default:
      GOOSE_CHECK(false && "not an int-dot dtype");
  }
  return {};
}

}  // namespace qmm

namespace {

using qmm::Act;
using qmm::Fmt;
using qmm::GetFmt;

// Bytes of a Q8_0 tile's scale part (qmatmul.h): 16 f16 per block, padded to 64; the level
// vectors start there.
int64_t Q8ScaleBytes(int64_t cols) { return (32 * (cols / 32) + 63) / 64 * 64; }
int64_t Q8TileBytes(int64_t cols) { return Q8ScaleBytes(cols) + 512 * (cols / 32); }

// A Q4_K tile's super-block (qmatmul.h): d, dmin, sc, m, then the level vectors.
constexpr int kQ4KTileSbBytes = 2368;
constexpr int kQ4KDmin = 32, kQ4KSc = 64, kQ4KMin = 192, kQ4KLevels = 320;
// A Q4_0 / Q5_0 tile's block of 32 columns (qmatmul.h): scales, nibbles (and bit-4 masks).
constexpr int kQ4_0TileBlockBytes = 288, kQ5_0TileBlockBytes = 352;

// One token's activations, quantized (batch-invariant: depends on this row only).
void QuantizeAct(const float* x, int cols, const Fmt& f, int8_t* q, float* dx, int32_t* bs) {
  for (int b = 0; b < cols / f.sb; ++b) {
    const float* xb = x + b * f.sb;
    float amax = 0.0f;
    for (int j = 0; j < f.sb; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    for (int j = 0; j < f.sb; ++j) q[b * f.sb + j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
  for (int g = 0; g < cols / f.g; ++g) {
    int32_t s = 0;
    for (int j = 0; j < f.g; ++j) s += q[g * f.g + j];
    bs[g] = s;
  }
}

// One weight row unpacked: levels q (u8), per scale block d/dmin, per group sc/mn.
struct RowIR {
  std::vector<uint8_t> q;
  std::vector<float> d, dmin;
  std::vector<int32_t> sc, mn;
  void Resize(int cols, const Fmt& f) {
    q.resize(cols);
    d.resize(cols / f.sb);
    dmin.resize(cols / f.sb);
    sc.resize(cols / f.g);
    mn.resize(cols / f.g);
  }
};

void UnpackRow(DType t, const uint8_t* src, int cols, RowIR* r) {
  const float* h = F16Table();
  auto f16 = [h](const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return h[v];
  };
  switch (t) {
    case DType::kQ8_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 34;
        r->d[b] = f16(blk);
        for (int j = 0; j < 32; ++j) r->q[b * 32 + j] = static_cast<uint8_t>(blk[2 + j] ^ 0x80);
      }
      return;
    case DType::kQ4_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 18;
        r->d[b] = f16(blk);
        for (int j = 0; j < 16; ++j) {
          r->q[b * 32 + j] = blk[2 + j] & 0xF;
          r->q[b * 32 + 16 + j] = blk[2 + j] >> 4;
        }
      }
      return;
    case DType::kQ5_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 22;
        r->d[b] = f16(blk);
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        for (int j = 0; j < 16; ++j) {
          r->q[b * 32 + j] = static_cast<uint8_t>((blk[6 + j] & 0xF) | (((qh >> j) & 1) << 4));
          r->q[b * 32 + 16 + j] =
              static_cast<uint8_t>((blk[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const int bytes = five ? 176 : 144;
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * bytes;
        r->d[b] = f16(blk);
        r->dmin[b] = f16(blk + 2);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, m;
          GetScaleMinK4(j, blk + 4, &sc, &m);
          r->sc[b * 8 + j] = sc;
          r->mn[b * 8 + j] = m;
        }
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + (five ? 48 : 16);
        uint8_t* q = r->q.data() + b * 256;
        for (int j = 0; j < 4; ++j) {
          for (int l = 0; l < 32; ++l) {
            int lo = qs[32 * j + l] & 0xF, hi = qs[32 * j + l] >> 4;
            if (five) {
              lo |= ((qh[l] >> (2 * j)) & 1) << 4;
              hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
            }
            q[64 * j + l] = static_cast<uint8_t>(lo);
            q[64 * j + 32 + l] = static_cast<uint8_t>(hi);
          }
        }
      }
      return;
    }
    case DType::kQ6_K:
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * 210;
        r->d[b] = r->dmin[b] = f16(blk + 208);
        const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
        for (int g = 0; g < 16; ++g) {
          r->sc[b * 16 + g] = scales[g];
          r->mn[b * 16 + g] = 32 * scales[g];
        }
        uint8_t* q = r->q.data() + b * 256;
        for (int hf = 0; hf < 2; ++hf) {
          const uint8_t* ql = blk + 64 * hf;
          const uint8_t* qh = blk + 128 + 32 * hf;
          uint8_t* qq = q + 128 * hf;
          for (int l = 0; l < 32; ++l) {
            qq[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
            qq[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            qq[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            qq[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
          }
        }
      }
      return;
    default:
      GOOSE_CHECK(false && "not an int-dot dtype");
  }
}

// A tile of W rows in lane-interleaved form (see the file comment).
struct Tile {
  int w = 1;
  AlignedVector<uint8_t> q;       // [cols / 4][w][4]
  AlignedVector<float> d, dmin;   // [cols / sb][w]
  AlignedVector<int32_t> sc, mn;  // [cols / g][w]
  void Resize(int cols, const Fmt& f, int width) {
    w = width;
    q.resize(static_cast<size_t>(cols) * w);
    d.resize(static_cast<size_t>(cols / f.sb) * w);
    dmin.resize(static_cast<size_t>(cols / f.sb) * w);
    sc.resize(static_cast<size_t>(cols / f.g) * w);
    mn.resize(static_cast<size_t>(cols / f.g) * w);
  }
};

void PackTile(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, int w, RowIR* row,
              Tile* t) {
  const int cols = static_cast<int>(wm.cols);
  const int nsb = cols / f.sb, ng = cols / f.g;
  t->Resize(cols, f, w);
  for (int lane = 0; lane < w; ++lane) {
    if (lane >= nr) {  // padding rows: zero scales, results discarded
      for (int k = 0; k < cols / 4; ++k)
        std::memset(&t->q[(static_cast<size_t>(k) * w + lane) * 4], 0, 4);
      for (int b = 0; b < nsb; ++b) t->d[b * w + lane] = t->dmin[b * w + lane] = 0.0f;
      for (int g = 0; g < ng; ++g) t->sc[g * w + lane] = t->mn[g * w + lane] = 0;
      continue;
    }
    const uint8_t* src = static_cast<const uint8_t*>(wm.data) + (r0 + lane) * wm.row_bytes();
    thread_local std::vector<uint8_t> rebuilt;
    if (wm.layout == WeightLayout::kTiles) {  // (only when a test forces a lower kernel)
      rebuilt.resize(static_cast<size_t>(wm.row_bytes()));
      TiledRow(wm, r0 + lane, rebuilt.data());
      src = rebuilt.data();
    }
    UnpackRow(wm.dtype, src, cols, row);
    uint8_t* dst = t->q.data() + lane * 4;
    for (int k = 0; k < cols / 4; ++k)
      std::memcpy(dst + static_cast<size_t>(k) * w * 4, &row->q[4 * k], 4);
    for (int b = 0; b < nsb; ++b) {
      t->d[b * w + lane] = row->d[b];
      t->dmin[b * w + lane] = row->dmin[b];
    }
    for (int g = 0; g < ng; ++g) {
      t->sc[g * w + lane] = row->sc[g];
      t->mn[g * w + lane] = row->mn[g];
    }
  }
}

// ---- Scalar kernel (w = 1): the defining order. ----
float DotScalar(const Tile& t, const Fmt& f, int cols, const int8_t* xq, const float* dx,
                const int32_t* bs) {
  float acc = 0.0f;
  const uint8_t* q = t.q.data();
  if (!f.k) {
    for (int b = 0; b < cols / 32; ++b) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += q[b * 32 + j] * xq[b * 32 + j];
      const int32_t i = s - f.offset * bs[b];
      acc = acc + (t.d[b] * dx[b]) * static_cast<float>(i);
    }
    return acc;
  }
  const int gpb = f.sb / f.g;
  for (int b = 0; b < cols / f.sb; ++b) {
    int32_t i1 = 0, i2 = 0;
    for (int gg = 0; gg < gpb; ++gg) {
      const int g = b * gpb + gg;
      int32_t s = 0;
      for (int j = 0; j < f.g; ++j) s += q[g * f.g + j] * xq[g * f.g + j];
      i1 += t.sc[g] * s;
      i2 += t.mn[g] * bs[g];
    }
    acc = acc + (t.d[b] * dx[b]) * static_cast<float>(i1);
    acc = acc - (t.dmin[b] * dx[b]) * static_cast<float>(i2);
  }
  return acc;
}

void KernelScalar(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                  int64_t out_stride) {
  const int nsb = cols / f.sb, ng = cols / f.g;
  for (int tok = 0; tok < n_tok; ++tok) {
    out[tok * out_stride] = DotScalar(t, f, cols, a.q.data() + static_cast<size_t>(tok) * cols,
                                      a.dx.data() + static_cast<size_t>(tok) * nsb,
                                      a.bs.data() + static_cast<size_t>(tok) * ng);
  }
}

inline int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

// ---- AVX2 kernel (w = 8). Q8_0 levels (q + 128) exceed maddubs' int16 headroom, so Q8_0
// uses the signed form |w| x sign(x, w); the integers are the same. ----
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace {

template <int NT>
void KernelAvx2T(const Tile& t, const Fmt& f, int cols, const Act& a, int tok0, float* out,
                 int64_t out_stride, int nr) {
  const int nsb = cols / f.sb, ng = cols / f.g;
  const bool q8 = f.offset == 128;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i x80 = _mm256_set1_epi8(static_cast<char>(0x80));
  const int8_t* xq[NT];
  const float* dx[NT];
  const int32_t* bs[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    xq[j] = a.q.data() + static_cast<size_t>(tok0 + j) * cols;
    dx[j] = a.dx.data() + static_cast<size_t>(tok0 + j) * nsb;
    bs[j] = a.bs.data() + static_cast<size_t>(tok0 + j) * ng;
  }
  __m256 acc[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  const __m256i* q = reinterpret_cast<const __m256i*>(t.q.data());
  auto dot4 = [&](__m256i s, __m256i wv, int32_t x4) {
    __m256i xb = _mm256_set1_epi32(x4);
    __m256i p;
    if (q8) {
      const __m256i ws = _mm256_xor_si256(wv, x80);
      p = _mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(xb, ws));
    } else {
      p = _mm256_maddubs_epi16(wv, xb);
    }
    return _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
  };
  if (!f.k) {
    const int off = q8 ? 0 : f.offset;
    for (int b = 0; b < nsb; ++b) {
      __m256i s[NT];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) s[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i wv = _mm256_loadu_si256(q + b * 8 + k);
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j) s[j] = dot4(s[j], wv, Load32(xq[j] + b * 32 + 4 * k));
      }
      const __m256 dv = _mm256_loadu_ps(&t.d[b * 8]);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const __m256i i = _mm256_sub_epi32(s[j], _mm256_set1_epi32(off * bs[j][b]));
        const __m256 dd = _mm256_mul_ps(dv, _mm256_set1_ps(dx[j][b]));
        acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(i)));
      }
    }
  } else {
    const int gpb = f.sb / f.g, kpg = f.g / 4;
    for (int b = 0; b < nsb; ++b) {
      __m256i i1[NT], i2[NT];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) i1[j] = i2[j] = _mm256_setzero_si256();
      for (int gg = 0; gg < gpb; ++gg) {
        const int g = b * gpb + gg;
        __m256i s[NT];
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j) s[j] = _mm256_setzero_si256();
        // (The group size a constant, so that the loop unrolls: rolled, GCC copies the NT
        // accumulators through registers on every step.)
        auto group = [&]<int KPG>() {
#pragma GCC unroll 8
          for (int k = 0; k < KPG; ++k) {
            const __m256i wv = _mm256_loadu_si256(q + g * KPG + k);
#pragma GCC unroll 8
            for (int j = 0; j < NT; ++j) s[j] = dot4(s[j], wv, Load32(xq[j] + g * 4 * KPG + 4 * k));
          }
        };
        if (kpg == 4) {
          group.template operator()<4>();
        } else {
          group.template operator()<8>();
        }
        const __m256i scv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&t.sc[g * 8]));
        const __m256i mnv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&t.mn[g * 8]));
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j) {
          i1[j] = _mm256_add_epi32(i1[j], _mm256_mullo_epi32(scv, s[j]));
          i2[j] = _mm256_add_epi32(i2[j], _mm256_mullo_epi32(mnv, _mm256_set1_epi32(bs[j][g])));
        }
      }
      const __m256 dv = _mm256_loadu_ps(&t.d[b * 8]);
      const __m256 mv = _mm256_loadu_ps(&t.dmin[b * 8]);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const __m256 x = _mm256_set1_ps(dx[j][b]);
        acc[j] =
            _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(dv, x), _mm256_cvtepi32_ps(i1[j])));
        acc[j] =
            _mm256_sub_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(mv, x), _mm256_cvtepi32_ps(i2[j])));
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[j]);
    for (int l = 0; l < nr; ++l) out[(tok0 + j) * out_stride + l] = lanes[l];
  }
}

// The AVX2 version of PackTileAvx512 (8-row tiles); f16 scales via the table.
bool PackTileAvx2(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, Tile* t) {
  if (wm.layout != WeightLayout::kRows) return false;
  if (nr != 8) return false;
  const DType dt = wm.dtype;
  if (dt != DType::kQ8_0 && dt != DType::kQ4_0 && dt != DType::kQ4_K) return false;
  const int cols = static_cast<int>(wm.cols);
  t->Resize(cols, f, 8);
  const int64_t rb = wm.row_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(wm.data) + r0 * rb;
  const __m256i roff = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(static_cast<int32_t>(rb)));
  __m256i* q = reinterpret_cast<__m256i*>(t->q.data());
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const float* h = F16Table();
  auto gather = [&](const uint8_t* p) {
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(p), roff, 1);
  };
  auto f16 = [&](const uint8_t* p, float* out) {
    for (int r = 0; r < 8; ++r) {
      uint16_t v;
      std::memcpy(&v, p + r * rb, 2);
      out[r] = h[v];
    }
  };
  if (dt == DType::kQ8_0 || dt == DType::kQ4_0) {
    const bool q8 = dt == DType::kQ8_0;
    const __m256i x80 = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = base + b * (q8 ? 34 : 18);
      f16(blk, &t->d[b * 8]);
      for (int k = 0; k < (q8 ? 8 : 4); ++k) {
        const __m256i g = gather(blk + 2 + 4 * k);
        if (q8) {
          _mm256_storeu_si256(q + b * 8 + k, _mm256_xor_si256(g, x80));
        } else {
          _mm256_storeu_si256(q + b * 8 + k, _mm256_and_si256(g, nib));
          _mm256_storeu_si256(q + b * 8 + 4 + k, _mm256_and_si256(_mm256_srli_epi32(g, 4), nib));
        }
      }
    }
    return true;
  }
  thread_local uint8_t sc[8], mn[8];
  for (int b = 0; b < cols / 256; ++b) {
    const uint8_t* blk = base + b * 144;
    f16(blk, &t->d[b * 8]);
    f16(blk + 2, &t->dmin[b * 8]);
    for (int r = 0; r < 8; ++r) {
      for (int j = 0; j < 8; ++j) {
        GetScaleMinK4(j, blk + r * rb + 4, &sc[j], &mn[j]);
        t->sc[(b * 8 + j) * 8 + r] = sc[j];
        t->mn[(b * 8 + j) * 8 + r] = mn[j];
      }
    }
    const uint8_t* qs = blk + 16;
    for (int j = 0; j < 4; ++j) {
      for (int m = 0; m < 8; ++m) {
        const __m256i g = gather(qs + 32 * j + 4 * m);
        _mm256_storeu_si256(q + b * 64 + 16 * j + m, _mm256_and_si256(g, nib));
        _mm256_storeu_si256(q + b * 64 + 16 * j + 8 + m,
                            _mm256_and_si256(_mm256_srli_epi32(g, 4), nib));
      }
    }
  }
  return true;
}

void KernelAvx2(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                int64_t out_stride, int nr) {
  int tok = 0;
  for (; tok + 4 <= n_tok; tok += 4) KernelAvx2T<4>(t, f, cols, a, tok, out, out_stride, nr);
  for (; tok < n_tok; ++tok) KernelAvx2T<1>(t, f, cols, a, tok, out, out_stride, nr);
}

// The f16 values at p + r * rb of 8 rows, as f32 lanes.
inline __m256 LoadF16x8(const uint8_t* p, int64_t rb) {
  uint16_t h[8];
  for (int r = 0; r < 8; ++r) std::memcpy(&h[r], p + r * rb, 2);
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

// 8 rows' hadd tree: z[r] = 8 partial sums of row r -> the sums of each row's low 128-bit half
// (*lo) and of its high half (*hi), 8 rows in row order each.
inline void Reduce8RowHalves(const __m256i* z, __m256i* lo, __m256i* hi) {
  const __m256i t0 = _mm256_hadd_epi32(z[0], z[1]), t1 = _mm256_hadd_epi32(z[2], z[3]);
  const __m256i t2 = _mm256_hadd_epi32(z[4], z[5]), t3 = _mm256_hadd_epi32(z[6], z[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  // u0: rows 0-3 of the low 128-bit halves, then of the high ones; u1 the same for 4-7.
  *lo = _mm256_permute2x128_si256(u0, u1, 0x20);
  *hi = _mm256_permute2x128_si256(u0, u1, 0x31);
}

// The 8 row totals in row order.
inline __m256i Reduce8Rows(const __m256i* z) {
  __m256i lo, hi;
  Reduce8RowHalves(z, &lo, &hi);
  return _mm256_add_epi32(lo, hi);
}

// Direct AVX2 Q4_K kernel for a few tokens, as DirectBlocks32Avx2: per group of 32 columns the 8
// rows' unsigned levels x the token's bytes (maddubs: at most 2 x 15 x 127 per pair), reduced
// into row order, times the rows' scales; then KernelAvx2T's float code.
template <int NT>
void DirectQ4_KAvx2(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                    const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 256, ng = cols / 32;
  const int64_t pf_step = (8 * rb + nsb - 1) / nsb;
  const __m256i ones = _mm256_set1_epi16(1), nib = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    if (pf != nullptr) qmm::PrefetchRange<true>(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * 144;
    const __m256 dv = LoadF16x8(blk, rb), mv = LoadF16x8(blk + 2, rb);
    int32_t head[3][8];  // the 12 scale bytes of each row as 3 dwords
    for (int r = 0; r < 8; ++r) {
      for (int k = 0; k < 3; ++k) std::memcpy(&head[k][r], blk + r * rb + 4 + 4 * k, 4);
    }
    __m256i sc[8], mn[8];  // GetScaleMinK4 for the 8 rows at once (as Q4KScalesMins)
    {
      const __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head[0]));
      const __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head[1]));
      const __m256i s2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head[2]));
      const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15);
      const __m256i m3 = _mm256_set1_epi32(3);
      for (int g = 0; g < 4; ++g) {
        const __m256i b0 = _mm256_srli_epi32(s0, 8 * g), b1 = _mm256_srli_epi32(s1, 8 * g);
        const __m256i b2 = _mm256_srli_epi32(s2, 8 * g);
        sc[g] = _mm256_and_si256(b0, m63);
        mn[g] = _mm256_and_si256(b1, m63);
        const __m256i hs = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b0, 6), m3), 4);
        const __m256i hm = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b1, 6), m3), 4);
        sc[4 + g] = _mm256_or_si256(_mm256_and_si256(b2, m15), hs);
        mn[4 + g] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(b2, 4), m15), hm);
      }
    }
    __m256i i1[NT], i2[NT];
    for (int j = 0; j < NT; ++j) {
      i1[j] = i2[j] = _mm256_setzero_si256();
      const int32_t* bs = a.bs.data() + static_cast<size_t>(tok0 + j) * ng + b * 8;
      for (int g = 0; g < 8; ++g) {
        i2[j] = _mm256_add_epi32(i2[j], _mm256_mullo_epi32(mn[g], _mm256_set1_epi32(bs[g])));
      }
    }
    for (int c = 0; c < 4; ++c) {  // qs bytes 32c .. 32c + 31: groups 2c (low), 2c + 1 (high)
      __m256i lo[8], hi[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        const __m256i z =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + r * rb + 16 + 32 * c));
        lo[r] = _mm256_and_si256(z, nib);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(z, 4), nib);
      }
      const __m256i sc_lo = sc[2 * c], sc_hi = sc[2 * c + 1];
      for (int j = 0; j < NT; ++j) {
        const int8_t* x = a.q.data() + static_cast<size_t>(tok0 + j) * cols + b * 256 + 64 * c;
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
        __m256i zl[8], zh[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
          zl[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[r], xl), ones);
          zh[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[r], xh), ones);
        }
        i1[j] = _mm256_add_epi32(i1[j], _mm256_mullo_epi32(sc_lo, Reduce8Rows(zl)));
        i1[j] = _mm256_add_epi32(i1[j], _mm256_mullo_epi32(sc_hi, Reduce8Rows(zh)));
      }
    }
    for (int j = 0; j < NT; ++j) {  // KernelAvx2T's float code, lane for lane
      const __m256 x = _mm256_set1_ps(a.dx[static_cast<size_t>(tok0 + j) * nsb + b]);
      acc[j] =
          _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(dv, x), _mm256_cvtepi32_ps(i1[j])));
      acc[j] =
          _mm256_sub_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(mv, x), _mm256_cvtepi32_ps(i2[j])));
    }
  }
  for (int j = 0; j < NT; ++j) _mm256_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// Direct AVX2 kernel for blocks of 32 (Q8_0, Q4_0, Q5_0) and a few tokens: 8 full rows straight
// from the blocks (no gathered tile), each row's 32 products by maddubs, the 8 rows' partial
// sums folded by a hadd tree into one vector in row order - KernelAvx2T's lane layout and
// integers - and then its float code. Q8_0 uses the signed form |w| x sign(x, w), whose sum is
// already S - 128 B; Q4_0 / Q5_0 multiply their unsigned levels (low nibbles, then high; Q5_0's
// qh bit j as bit 4 of level j) and subtract offset x B. pf: the next 8 rows, prefetched a slice
// per block, or null.
template <int NT, DType kT>
void DirectBlocks32Avx2(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                        const uint8_t* pf, float* out, int64_t out_stride) {
  constexpr bool kQ8 = kT == DType::kQ8_0, kFive = kT == DType::kQ5_0;
  constexpr int bb = kQ8 ? 34 : kFive ? 22 : 18, qs = kFive ? 6 : 2;
  constexpr int offset = kQ8 ? 0 : kFive ? 16 : 8;
  const int nsb = cols / 32;
  const int64_t pf_step = (8 * rb + nsb - 1) / nsb;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m128i nib = _mm_set1_epi8(0x0F);
  // Byte j of a level vector takes qh bit j: byte j / 8 of qh spread to bytes 8k .. 8k + 7.
  const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                            0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    if (pf != nullptr) qmm::PrefetchRange<true>(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * bb;
    const __m256 dv = LoadF16x8(blk, rb);
    // Q4_0 / Q5_0: maddubs' unsigned operand per row. (Q8_0 reloads its rows per token from
    // L1 instead: holding both of its operands per row measured 6-10% slower at 2-4 tokens.)
    __m256i lv[8];
#pragma GCC unroll 8
    for (int r = 0; r < (kQ8 ? 0 : 8); ++r) {
      const uint8_t* row = blk + r * rb;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + qs));
      lv[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), nib), _mm_and_si128(q, nib));
      if (kFive) {
        uint32_t qh;
        std::memcpy(&qh, row + 2, 4);
        const __m256i hb = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(qh)), spread);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
        lv[r] = _mm256_or_si256(lv[r], _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
      }
    }
    for (int j = 0; j < NT; ++j) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
          a.q.data() + static_cast<size_t>(tok0 + j) * cols + b * 32));
      __m256i z[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        __m256i u = lv[r], x = xv;
        if (kQ8) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + r * rb + 2));
          u = _mm256_abs_epi8(w);
          x = _mm256_sign_epi8(xv, w);
        }
        z[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), ones);
      }
      const size_t tb = static_cast<size_t>(tok0 + j) * nsb + b;
      const __m256i i = _mm256_sub_epi32(Reduce8Rows(z), _mm256_set1_epi32(offset * a.bs[tb]));
      const __m256 dd = _mm256_mul_ps(dv, _mm256_set1_ps(a.dx[tb]));
      acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(i)));
    }
  }
  for (int j = 0; j < NT; ++j) _mm256_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// Direct AVX2 Q6_K kernel for a few tokens: levels rebuilt 32 columns at a time (UnpackRow's
// formulas: 2 groups of 16, one per 128-bit half), each half's 8 row sums by the hadd tree
// split at its last step; then KernelAvx2T's float code (dmin = d, m = 32 sc).
template <int NT>
void DirectQ6_KAvx2(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                    const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 256, ng = cols / 16;
  const int64_t pf_step = (8 * rb + nsb - 1) / nsb;
  const __m256i ones = _mm256_set1_epi16(1), nib = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc[NT];
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    if (pf != nullptr) qmm::PrefetchRange<true>(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * 210;
    const __m256 dv = LoadF16x8(blk + 208, rb);
    int32_t sc[16][8];  // [group][row]
    for (int r = 0; r < 8; ++r) {
      for (int g = 0; g < 16; ++g) sc[g][r] = static_cast<int8_t>(blk[r * rb + 192 + g]);
    }
    __m256i i1[NT], i2[NT];
    for (int j = 0; j < NT; ++j) {
      i1[j] = i2[j] = _mm256_setzero_si256();
      const int32_t* bs = a.bs.data() + static_cast<size_t>(tok0 + j) * ng + b * 16;
      for (int g = 0; g < 16; ++g) {
        const __m256i m = _mm256_slli_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc[g])), 5);
        i2[j] = _mm256_add_epi32(i2[j], _mm256_mullo_epi32(m, _mm256_set1_epi32(bs[g])));
      }
    }
    for (int hf = 0; hf < 2; ++hf) {
      __m256i lv[4][8];  // [c][row]: columns 128 hf + 32 c ..
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        const uint8_t* row = blk + r * rb;
        auto ld = [&](int o) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + o));
        };
        const __m256i qa = ld(64 * hf), qb = ld(64 * hf + 32), h = ld(128 + 32 * hf);
        lv[0][r] = _mm256_or_si256(_mm256_and_si256(qa, nib),
                                   _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
        lv[1][r] = _mm256_or_si256(_mm256_and_si256(qb, nib),
                                   _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
        lv[2][r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), nib),
                                   _mm256_and_si256(h, m30));
        lv[3][r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), nib),
                                   _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
      }
      for (int j = 0; j < NT; ++j) {
        for (int c = 0; c < 4; ++c) {
          const int8_t* x =
              a.q.data() + static_cast<size_t>(tok0 + j) * cols + b * 256 + 128 * hf + 32 * c;
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
          __m256i z[8];
#pragma GCC unroll 8
          for (int r = 0; r < 8; ++r) {
            z[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(lv[c][r], xv), ones);
          }
          const int g = 8 * hf + 2 * c;  // the low 128-bit halves' group, then the next one
          __m256i s0, s1;
          Reduce8RowHalves(z, &s0, &s1);
          const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc[g]));
          const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc[g + 1]));
          i1[j] = _mm256_add_epi32(i1[j], _mm256_mullo_epi32(c0, s0));
          i1[j] = _mm256_add_epi32(i1[j], _mm256_mullo_epi32(c1, s1));
        }
      }
    }
    for (int j = 0; j < NT; ++j) {  // KernelAvx2T's float code, lane for lane
      const __m256 x = _mm256_set1_ps(a.dx[static_cast<size_t>(tok0 + j) * nsb + b]);
      acc[j] =
          _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(dv, x), _mm256_cvtepi32_ps(i1[j])));
      acc[j] =
          _mm256_sub_ps(acc[j], _mm256_mul_ps(_mm256_mul_ps(dv, x), _mm256_cvtepi32_ps(i2[j])));
    }
  }
  for (int j = 0; j < NT; ++j) _mm256_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// The 8 rows at r0 (a full AVX2 tile) for n_tok <= the dtype's DirectAvx2MaxTok.
// The most tokens the direct AVX2 kernels take for dtype t (0: none). Measured from DRAM, 2
// threads, 8192x2048, against the (gathering) tile path: one token Q8_0 2.39 -> 0.34 ms, Q4_K
// 2.38 -> 0.27, Q6_K 4.52 -> 0.43, Q5_0 5.13 -> 0.41, Q4_0 0.96 -> 0.34; even at 16 tokens
// for Q8_0, at 8-16 for the K-quants and Q5_0, at 8 already behind for Q4_0.
int DirectAvx2MaxTok(DType t) {
  switch (t) {
    case DType::kQ8_0: return 16;
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ5_0: return 8;
    case DType::kQ4_0: return 4;
    default: return 0;
  }
}
void RunDirectAvx2(const WeightMatrix& wm, int64_t r0, const Act& a, int n_tok,
                   const uint8_t* pf, float* out) {
  const int64_t rb = wm.row_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(wm.data) + r0 * rb;
  const int cols = static_cast<int>(wm.cols);
  auto run = [&](auto kernel) {
    int tok = 0;
    for (; tok + 2 <= n_tok; tok += 2) kernel.template operator()<2>(tok);
    if (tok < n_tok) kernel.template operator()<1>(tok);
  };
  auto blocks32 = [&]<DType kT>() {
    run([&]<int NT>(int tok) {
      DirectBlocks32Avx2<NT, kT>(base, rb, cols, a, tok, pf, out, wm.rows);
    });
  };
  if (wm.dtype == DType::kQ8_0) {
    blocks32.template operator()<DType::kQ8_0>();
  } else if (wm.dtype == DType::kQ4_0) {
    blocks32.template operator()<DType::kQ4_0>();
  } else if (wm.dtype == DType::kQ5_0) {
    blocks32.template operator()<DType::kQ5_0>();
  } else if (wm.dtype == DType::kQ4_K) {
    run([&]<int NT>(int tok) { DirectQ4_KAvx2<NT>(base, rb, cols, a, tok, pf, out, wm.rows); });
  } else {
    run([&]<int NT>(int tok) { DirectQ6_KAvx2<NT>(base, rb, cols, a, tok, pf, out, wm.rows); });
  }
}

}  // namespace
#pragma GCC pop_options

// ---- AVX-512 VNNI kernel (w = 16). ----
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")
namespace {

// The first nr lanes of v to out[0..nr).
inline void StoreRows(__m512 v, int nr, float* out) {
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << nr) - 1), v);
}

// A 16-row tile's blocks of 32 in the lane layout: block b's 8 level vectors at levels + 512 b
// and its 16 scales, as f32 (PackTileAvx512's tiles) or as f16 (weights stored as Q8_0
// tiles, Q8TileView). The kernels below take either.
struct TileView {
  const uint8_t* levels;
  const float* d;
  __m512i Levels(int b, int k) const { return _mm512_loadu_si512(levels + 512 * b + 64 * k); }
  __m512 Scales(int b) const { return _mm512_loadu_ps(d + 16 * b); }
};
struct Q8TileView {
  const uint8_t* levels;
  const uint16_t* dh;
  __m512i Levels(int b, int k) const { return _mm512_loadu_si512(levels + 512 * b + 64 * k); }
  __m512 Scales(int b) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dh + 16 * b)));
  }
};
// Q4_0 / Q5_0 weights stored as tiles (qmatmul.h), read in place: per block the f16 scales,
// 4 vectors of nibbles (IR vector k < 4 in the low ones of vector k, k >= 4 in the high ones
// of vector k - 4) and, for Q5_0, 8 masks of the levels' bit 4 (IR vector k's 64 bytes).
struct Q45TileView {
  const uint8_t* tile;
  int block_bytes;  // kQ4_0TileBlockBytes or kQ5_0TileBlockBytes
  __m512i Levels(int b, int k) const {
    const uint8_t* blk = tile + static_cast<size_t>(b) * block_bytes;
    const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * (k % 4));
    __m512i l = _mm512_and_si512(k < 4 ? v : _mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
    if (block_bytes == kQ5_0TileBlockBytes) {
      uint64_t m;
      std::memcpy(&m, blk + 288 + 8 * k, 8);
      l = _mm512_or_si512(l, _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(0x10)));
    }
    return l;
  }
  __m512 Scales(int b) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(tile + static_cast<size_t>(b) * block_bytes)));
  }
};

TileView OfTile(const Tile& t) { return {t.q.data(), t.d.data()}; }

// Tokens tok0 .. tok0 + NT - 1 of a: their levels, scales [nsb] and level sums [ng].
template <int NT>
struct TokenRows {
  const int8_t* xq[NT];
  const float* dx[NT];
  const int32_t* bs[NT];
  TokenRows(const Act& a, int tok0, int cols, int nsb, int ng) {
    for (int j = 0; j < NT; ++j) {
      xq[j] = a.q.data() + static_cast<size_t>(tok0 + j) * cols;
      dx[j] = a.dx.data() + static_cast<size_t>(tok0 + j) * nsb;
      bs[j] = a.bs.data() + static_cast<size_t>(tok0 + j) * ng;
    }
  }
};

// Blocks of 32, one tile for NT tokens (nr of its rows to out).
template <int NT, class Blocks32>
void KernelBlocks32T(const Blocks32& t, const Fmt& f, int cols, const Act& a, int tok0,
                     float* out, int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_step) {
  const int nsb = cols / 32;
  const TokenRows<NT> x(a, tok0, cols, nsb, nsb);
  const auto& [xq, dx, bs] = x;
  __m512 acc[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    // (One token: the next tile into L1, as the direct kernels do. Measured on Q4_K tiles,
    // 8192x2048 from DRAM, 2 threads: 0.158 ms against 0.275 into L2.)
    if (pf != nullptr) qmm::PrefetchRange<NT == 1>(pf, b * pf_step, (b + 1) * pf_step);
    __m512i s[NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) s[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i wv = t.Levels(b, k);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        s[j] = _mm512_dpbusd_epi32(s[j], wv, _mm512_set1_epi32(Load32(xq[j] + b * 32 + 4 * k)));
      }
    }
    const __m512 dv = t.Scales(b);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m512i i = _mm512_sub_epi32(s[j], _mm512_set1_epi32(f.offset * bs[j][b]));
      const __m512 dd = _mm512_mul_ps(dv, _mm512_set1_ps(dx[j][b]));
      acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(i)));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) StoreRows(acc[j], nr, out + (tok0 + j) * out_stride);
}

// A 16-row K-quant tile for KernelSuperBlocksT: group g's IR vector k, its sc and m (int32
// per row), block b's d and dmin. PackTileAvx512's tiles (KTileView) or Q4_K weights stored
// as tiles, read in place (Q4KTileView: levels as nibbles, scales as bytes, d as f16).
struct KTileView {
  const Tile& t;
  int kpg;  // IR vectors per group
  __m512i Levels(int g, int k) const {
    return _mm512_loadu_si512(t.q.data() + 64 * static_cast<size_t>(g * kpg + k));
  }
  __m512i Sc(int g) const { return _mm512_loadu_si512(&t.sc[g * 16]); }
  __m512i Mn(int g) const { return _mm512_loadu_si512(&t.mn[g * 16]); }
  __m512 D(int b) const { return _mm512_loadu_ps(&t.d[b * 16]); }
  __m512 Dmin(int b) const { return _mm512_loadu_ps(&t.dmin[b * 16]); }
};
struct Q4KTileView {
  const uint8_t* tile;
  const uint8_t* Sb(int b) const { return tile + static_cast<size_t>(b) * kQ4KTileSbBytes; }
  __m512i Levels(int g, int k) const {  // group 2j in the low nibbles of vector 8j + k, 2j+1 high
    const __m512i v = _mm512_loadu_si512(Sb(g / 8) + kQ4KLevels + 64 * (g % 8 / 2 * 8 + k));
    const __m512i nib = _mm512_set1_epi8(0x0F);
    return _mm512_and_si512(g % 2 == 0 ? v : _mm512_srli_epi16(v, 4), nib);
  }
  __m512i Bytes(int g, int offset) const {
    return _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(Sb(g / 8) + offset + g % 8 * 16)));
  }
  __m512i Sc(int g) const { return Bytes(g, kQ4KSc); }
  __m512i Mn(int g) const { return Bytes(g, kQ4KMin); }
  __m512 Half(int b, int offset) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(Sb(b) + offset)));
  }
  __m512 D(int b) const { return Half(b, 0); }
  __m512 Dmin(int b) const { return Half(b, kQ4KDmin); }
};

// Level sums g[0], g[1] as one dword of int16 pairs (vpdpwssd's operand); each fits int16.
inline int32_t PairI16(const int32_t* g) {
  return static_cast<int32_t>((static_cast<uint32_t>(g[0]) & 0xFFFF) |
                              (static_cast<uint32_t>(g[1]) << 16));
}

// K-quant super-blocks of groups of G columns (f.g), one tile for NT tokens. (G a template
// argument so that the group's dpbusd loop unrolls: rolled, GCC rotated the NT accumulators
// through register copies, one per dpbusd.)
template <int NT, int G, class KTile>
void KernelSuperBlocksT(const KTile& t, const Fmt& f, int cols, const Act& a, int tok0,
                        float* out, int64_t out_stride, int nr, const uint8_t* pf,
                        int64_t pf_step) {
  const int nsb = cols / f.sb, ng = cols / f.g;
  const TokenRows<NT> x(a, tok0, cols, nsb, ng);
  const auto& [xq, dx, bs] = x;
  __m512 acc[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  const int gpb = f.sb / G;
  constexpr int kpg = G / 4;
  const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
  for (int b = 0; b < nsb; ++b) {
    // (One token: into L1, as in KernelBlocks32T.)
    if (pf != nullptr) qmm::PrefetchRange<NT == 1>(pf, b * pf_step, (b + 1) * pf_step);
    __m512i i1[NT], i2[NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) i1[j] = i2[j] = _mm512_setzero_si512();
    // i2 = sum of m * bs over the groups, two groups per vpdpwssd: m and bs fit int16 (|m| <=
    // 4096, |bs| <= 32 * 127), so the int16 pairs' products are the same integers.
    for (int gg = 0; gg < gpb; gg += 2) {
      const int g = b * gpb + gg;
      const __m512i mp =
          _mm512_or_si512(_mm512_and_si512(t.Mn(g), lo16), _mm512_slli_epi32(t.Mn(g + 1), 16));
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        i2[j] = _mm512_dpwssd_epi32(i2[j], mp, _mm512_set1_epi32(PairI16(bs[j] + g)));
      }
    }
    for (int gg = 0; gg < gpb; ++gg) {
      const int g = b * gpb + gg;
      __m512i s[NT];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) s[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < kpg; ++k) {
        const __m512i wv = t.Levels(g, k);
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j) {
          s[j] =
              _mm512_dpbusd_epi32(s[j], wv, _mm512_set1_epi32(Load32(xq[j] + g * G + 4 * k)));
        }
      }
      const __m512i scv = t.Sc(g);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(scv, s[j]));
    }
    const __m512 dv = t.D(b), mv = t.Dmin(b);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m512 x = _mm512_set1_ps(dx[j][b]);
      acc[j] =
          _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(dv, x), _mm512_cvtepi32_ps(i1[j])));
      acc[j] =
          _mm512_sub_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(mv, x), _mm512_cvtepi32_ps(i2[j])));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) StoreRows(acc[j], nr, out + (tok0 + j) * out_stride);
}

// QuantizeAct with the same bits: max is order-free, x * id is the same product, and roundf
// (half away from zero) is rebuilt exactly as trunc(v) + sign(v) * (|v - trunc(v)| >= 0.5).
// v[i] lane j -> out lane i = op over v[i]'s 16 lanes (16 horizontal reductions at once; the
// op must be exact and order-free: max, integer add).
template <class Op>
inline __m512 Reduce16(__m512* v, Op op) {
  __m512 t[8], u[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [v2i 0|2, v2i+1 0|2, v2i 1|3, v2i+1 1|3]
    t[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
              _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane L: element j = v[4i + j] over lane L
    const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
              _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 x01 =
      op(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 x23 =
      op(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return op(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xDD));
}

// roundf(v) (halves away from zero) as int8, for |v| <= 127.
inline __m128i RoundToI8(__m512 v) {
  const __m512 sign = _mm512_set1_ps(-0.0f), half = _mm512_set1_ps(0.5f);
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_andnot_ps(sign, _mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
  const __m512 step = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(sign, v));  // +-1
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step)));
}

// QuantizeAct's results, vectorized. Blocks of 32 go 16 at a time: their maxima, scales and
// level sums come out of Reduce16 in one vector each.
void QuantizeActAvx512(const float* x, int cols, const Fmt& f, int8_t* q, float* dx, int32_t* bs) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  auto fmax = [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); };
  auto iadd = [](__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  };
  if (f.sb == 32) {
    const int nb = cols / 32;
    for (int b0 = 0; b0 < nb; b0 += 16) {
      const int m = std::min(16, nb - b0);
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        v[i] = _mm512_setzero_ps();
        if (i >= m) continue;
        const float* xb = x + (b0 + i) * 32;
        v[i] = _mm512_max_ps(_mm512_max_ps(v[i], _mm512_andnot_ps(sign, _mm512_loadu_ps(xb))),
                             _mm512_andnot_ps(sign, _mm512_loadu_ps(xb + 16)));
      }
      const __m512 d = _mm512_div_ps(Reduce16(v, fmax), _mm512_set1_ps(127.0f));
      const __mmask16 nz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ);
      const __m512 id = _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), d);
      const __mmask16 live = static_cast<__mmask16>((1u << m) - 1);
      _mm512_mask_storeu_ps(dx + b0, live, d);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        v[i] = _mm512_setzero_ps();
        if (i >= m) continue;
        const float* xb = x + (b0 + i) * 32;
        const __m512 idv = _mm512_permutexvar_ps(_mm512_set1_epi32(i), id);
        const __m128i lo = RoundToI8(_mm512_mul_ps(_mm512_loadu_ps(xb), idv));
        const __m128i hi = RoundToI8(_mm512_mul_ps(_mm512_loadu_ps(xb + 16), idv));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + (b0 + i) * 32), lo);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + (b0 + i) * 32 + 16), hi);
        v[i] = _mm512_castsi512_ps(
            _mm512_add_epi32(_mm512_cvtepi8_epi32(lo), _mm512_cvtepi8_epi32(hi)));
      }
      _mm512_mask_storeu_epi32(bs + b0, live, _mm512_castps_si512(Reduce16(v, iadd)));
    }
    return;
  }
  for (int b = 0; b < cols / f.sb; ++b) {
    const float* xb = x + b * f.sb;
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < f.sb; j += 16)
      m = _mm512_max_ps(m, _mm512_andnot_ps(sign, _mm512_loadu_ps(xb + j)));
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    const __m512 idv = _mm512_set1_ps(id);
    for (int j = 0; j < f.sb; j += 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * f.sb + j),
                       RoundToI8(_mm512_mul_ps(_mm512_loadu_ps(xb + j), idv)));
    }
  }
  for (int g = 0; g < cols / f.g; ++g) {
    __m512i s = _mm512_setzero_si512();
    for (int j = 0; j < f.g; j += 16) {
      s = _mm512_add_epi32(
          s,
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + g * f.g + j))));
    }
    bs[g] = _mm512_reduce_add_epi32(s);
  }
}

// In-register transposes for full 16-row tiles: IR vector k holds dword k of each of the 16
// rows. (Gathers would do the same in one instruction, but measure ~5x slower here.)
//
// 16 rows x 8 dwords (32 bytes at row_ptr + r * rb) -> out[0..7].
inline void Transpose16x8(const uint8_t* p, int64_t rb, __m512i* out) {
  __m512i z[8], t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i * rb));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + (i + 8) * rb));
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 8
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm512_permutex2var_epi64(u[k], lo_idx, u[k + 4]);
    out[k + 4] = _mm512_permutex2var_epi64(u[k], hi_idx, u[k + 4]);
  }
}

// A Q8_0 block's 32 levels of 16 rows (at p + r * rb) to the 8 lane-layout vectors at dst, as
// unsigned bytes (q ^ 0x80): PackTileAvx512's tiles and RepackTiles' alike.
// (Inlined: as a function of its own, GCC 12 warns about the transpose's intrinsics.)
inline __attribute__((always_inline)) void Q8LevelsToLanes(const uint8_t* p, int64_t rb,
                                                           __m512i* dst) {
  const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i o[8];
  Transpose16x8(p, rb, o);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) _mm512_storeu_si512(dst + k, _mm512_xor_si512(o[k], x80));
}

// A full Q8_0 tile of RepackTiles from the 16 rows at src (rb bytes apart).
void PackQ8TileAvx512(const uint8_t* src, int64_t rb, int nsb, uint8_t* tile) {
  const int64_t level_offset = Q8ScaleBytes(32 * nsb);
  std::memset(tile, 0, static_cast<size_t>(level_offset));  // (the scales' padding)
  __m512i* lv = reinterpret_cast<__m512i*>(tile + level_offset);
  for (int b = 0; b < nsb; ++b) {
    const uint8_t* blk = src + b * 34;
    for (int r = 0; r < 16; ++r) std::memcpy(tile + (b * 16 + r) * 2, blk + r * rb, 2);
    Q8LevelsToLanes(blk + 2, rb, lv + b * 8);
  }
}

// A full Q4_K tile of RepackTiles from the 16 rows at src (rb bytes apart): RepackTiles' byte
// moves, 16 rows at a time (d and dmin as their f16 bits, never through f32).
void PackQ4KTileAvx512(const uint8_t* src, int64_t rb, int nsb, uint8_t* tile) {
  for (int b = 0; b < nsb; ++b) {
    const uint8_t* blk = src + b * 144;
    uint8_t* sb = tile + static_cast<size_t>(b) * kQ4KTileSbBytes;
    __m512i h[4], sc[8], mn[8], o[4];
    qmm::Transpose16x4(blk, rb, h);  // d | dmin << 16, then the 12 scale bytes
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sb), _mm512_cvtepi32_epi16(h[0]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sb + kQ4KDmin),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    qmm::Q4KScalesMins(h[1], h[2], h[3], sc, mn);
    auto store_bytes = [](uint8_t* p, __m512i v) {  // 16 int32 lanes (< 64) as bytes
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
    };
    for (int j = 0; j < 8; ++j) {
      store_bytes(sb + kQ4KSc + 16 * j, sc[j]);
      store_bytes(sb + kQ4KMin + 16 * j, mn[j]);
    }
    for (int c = 0; c < 8; ++c) {  // qs dwords 4c .. 4c + 3 of the 16 rows: vectors 4c ..
      qmm::Transpose16x4(blk + 16 + 16 * c, rb, o);
      for (int m = 0; m < 4; ++m) _mm512_storeu_si512(sb + kQ4KLevels + 64 * (4 * c + m), o[m]);
    }
  }
}

// A full Q4_0 / Q5_0 tile of RepackTiles from the 16 rows at src: the same bytes as its
// per-row moves (d as f16 bits; each row's 4-bit qh slices paired into mask bytes).
void PackQ45TileAvx512(const uint8_t* src, int64_t rb, int nsb, bool five, uint8_t* tile) {
  const int bb = five ? 22 : 18, qs = five ? 6 : 2;
  const int tbb = five ? kQ5_0TileBlockBytes : kQ4_0TileBlockBytes;
  const __m128i lo_hi = _mm_set1_epi16(0x1001);  // byte pairs (a, b) -> a + 16 b
  for (int b = 0; b < nsb; ++b) {
    const uint8_t* blk = src + b * bb;
    uint8_t* t = tile + static_cast<size_t>(b) * tbb;
    for (int r = 0; r < 16; ++r) std::memcpy(t + 2 * r, blk + r * rb, 2);
    __m512i o[4];
    qmm::Transpose16x4(blk + qs, rb, o);
    for (int m = 0; m < 4; ++m) _mm512_storeu_si512(t + 32 + 64 * m, o[m]);
    if (!five) continue;
    int32_t h[16];
    for (int r = 0; r < 16; ++r) std::memcpy(&h[r], blk + 2 + r * rb, 4);
    const __m512i qh = _mm512_loadu_si512(h);
    for (int k = 0; k < 8; ++k) {  // row r's bits 4k .. 4k+3 -> nibble r % 2 of byte r / 2
      const __m512i nib = _mm512_and_si512(_mm512_srli_epi32(qh, 4 * k), _mm512_set1_epi32(15));
      const __m128i pairs = _mm_maddubs_epi16(_mm512_cvtepi32_epi8(nib), lo_hi);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(t + 288 + 8 * k),
                       _mm_packus_epi16(pairs, pairs));
    }
  }
}

// Full 16-row tiles of the integer formats: Q8_0, Q4_0, Q5_0, Q4_K and Q6_K straight from the
// blocks, Q5_K through UnpackTile. Returns false if not handled (partial tiles, tiled
// weights, float dtypes): the caller uses the generic PackTile.
bool PackTileAvx512(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, Tile* t,
                    bool cached) {
  if (nr != 16 || wm.layout != WeightLayout::kRows) return false;
  const DType dt = wm.dtype;
  if (dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16) return false;
  const int cols = static_cast<int>(wm.cols);
  t->Resize(cols, f, 16);
  const int64_t rb = wm.row_bytes();
  // The tile's 16 rows are one contiguous run: copy it first with sequential reads (which the
  // hardware prefetchers stream at full bandwidth), then transpose from cache. Reading 16 rows
  // side by side straight from DRAM stalls on every load. Rows that were prefetched (`cached`)
  // are transposed in place: measured 6-15% faster at 16-64 tokens, 896 columns.
  thread_local AlignedVector<uint8_t> copy;
  const uint8_t* base = static_cast<const uint8_t*>(wm.data) + r0 * rb;
  if (!cached) {
    copy.resize(static_cast<size_t>(16 * rb));
    std::memcpy(copy.data(), base, copy.size());
    base = copy.data();
  }
  __m512i* q = reinterpret_cast<__m512i*>(t->q.data());
  const __m512i nib = _mm512_set1_epi8(0x0F);
  __m512i o[8];
  if (dt == DType::kQ6_K) {
    // Levels straight into the lane layout: each level byte is a byte-wise function of the ql
    // and qh bytes at one index (UnpackTile's formulas), so those are transposed first and
    // combined lane by lane (no row-major levels, no second transpose).
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int b = 0; b < cols / 256; ++b) {
      const uint8_t* blk = base + b * 210;
      const __m512 d = qmm::LoadF16x16(blk + 208, rb);
      _mm512_storeu_ps(&t->d[b * 16], d);
      _mm512_storeu_ps(&t->dmin[b * 16], d);
      __m512i sw[4];  // the 16 int8 scales of each row, 4 per dword
      qmm::Transpose16x4(blk + 192, rb, sw);
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 4; ++m) {
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sw[k], 24 - 8 * m), 24);
          const int g = b * 16 + 4 * k + m;
          _mm512_storeu_si512(&t->sc[g * 16], sc);
          _mm512_storeu_si512(&t->mn[g * 16], _mm512_slli_epi32(sc, 5));  // m = 32 * sc
        }
      }
      for (int hf = 0; hf < 2; ++hf) {
        __m512i qa[8], qb[8], h[8];
        Transpose16x8(blk + 64 * hf, rb, qa);
        Transpose16x8(blk + 64 * hf + 32, rb, qb);
        Transpose16x8(blk + 128 + 32 * hf, rb, h);
        __m512i* o = q + b * 64 + 32 * hf;  // columns 128 hf + 32 s + 4 k: vector 8 s + k
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          auto high = [&](int sh) {  // 2 high bits (h >> sh) & 3 into bits 4-5
            return _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h[k], sh), m3), 4);
          };
          const __m512i a_hi = _mm512_and_si512(_mm512_srli_epi16(qa[k], 4), nib);
          const __m512i b_hi = _mm512_and_si512(_mm512_srli_epi16(qb[k], 4), nib);
          _mm512_storeu_si512(o + k, _mm512_or_si512(_mm512_and_si512(qa[k], nib), high(0)));
          _mm512_storeu_si512(o + 8 + k, _mm512_or_si512(_mm512_and_si512(qb[k], nib), high(2)));
          _mm512_storeu_si512(o + 16 + k, _mm512_or_si512(a_hi, high(4)));
          _mm512_storeu_si512(o + 24 + k, _mm512_or_si512(b_hi, high(6)));
        }
      }
    }
    return true;
  }
  if (dt == DType::kQ5_K) {
    // Unpacked to row-major levels and scales first (the AMX path's code), then transposed.
    thread_local qmm::WeightTile u;
    u.Resize(f, cols, true);
    qmm::UnpackTile(dt, base, rb, cols, &u);
    for (int c = 0; c < cols; c += 32) {
      Transpose16x8(u.q.data() + c, cols, o);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm512_storeu_si512(q + c / 4 + k, o[k]);
    }
    std::memcpy(t->d.data(), u.d.data(), u.d.size() * sizeof(float));
    std::memcpy(t->dmin.data(), u.dmin.data(), u.dmin.size() * sizeof(float));
    std::memcpy(t->sc.data(), u.sc.data(), u.sc.size() * sizeof(int32_t));
    for (size_t p = 0; p < u.mnp.size() / 16; ++p) {  // int16 pairs (m_2p, m_2p+1) -> int32
      const __m512i v = _mm512_loadu_si512(&u.mnp[p * 16]);
      _mm512_storeu_si512(&t->mn[2 * p * 16], _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 16));
      _mm512_storeu_si512(&t->mn[(2 * p + 1) * 16], _mm512_srai_epi32(v, 16));
    }
    return true;
  }
  if (dt == DType::kQ8_0) {
    for (int b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = base + b * 34;
      _mm512_storeu_ps(&t->d[b * 16], qmm::LoadF16x16(blk, rb));
      Q8LevelsToLanes(blk + 2, rb, q + b * 8);
    }
    return true;
  }
  if (dt == DType::kQ4_0) {
    for (int b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = base + b * 18;
      _mm512_storeu_ps(&t->d[b * 16], qmm::LoadF16x16(blk, rb));
      qmm::Transpose16x4(blk + 2, rb, o);
#pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) {
        _mm512_storeu_si512(q + b * 8 + k, _mm512_and_si512(o[k], nib));
        _mm512_storeu_si512(q + b * 8 + 4 + k, _mm512_and_si512(_mm512_srli_epi32(o[k], 4), nib));
      }
    }
    return true;
  }
  if (dt == DType::kQ5_0) {
    const __m512i one = _mm512_set1_epi32(1);
    for (int b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = base + b * 22;
      _mm512_storeu_ps(&t->d[b * 16], qmm::LoadF16x16(blk, rb));
      auto ld = [&](int r) {
        int32_t v;
        std::memcpy(&v, blk + 2 + r * rb, 4);
        return v;
      };
      const __m512i qh =
          _mm512_setr_epi32(ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7), ld(8), ld(9),
                            ld(10), ld(11), ld(12), ld(13), ld(14), ld(15));
      // 5th bits of values 4k .. 4k+3 -> bit 4 of each byte of IR dword k.
      auto high = [&](int k) {
        const __m512i t4 = _mm512_srli_epi32(qh, 4 * k);
        __m512i r = _mm512_slli_epi32(_mm512_and_si512(t4, one), 4);
        r = _mm512_or_si512(r,
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t4, 1), one), 12));
        r = _mm512_or_si512(r,
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t4, 2), one), 20));
        return _mm512_or_si512(
            r, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t4, 3), one), 28));
      };
      qmm::Transpose16x4(blk + 6, rb, o);
      for (int k = 0; k < 4; ++k) {
        _mm512_storeu_si512(q + b * 8 + k, _mm512_or_si512(_mm512_and_si512(o[k], nib), high(k)));
        _mm512_storeu_si512(
            q + b * 8 + 4 + k,
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(o[k], 4), nib), high(4 + k)));
      }
    }
    return true;
  }
  if (dt != DType::kQ4_K) return false;
  for (int b = 0; b < cols / 256; ++b) {
    const uint8_t* blk = base + b * 144;
    __m512 dv, mv;
    __m512i s0, s1, s2, sc[8], mn[8];
    qmm::Q4KHeads(blk, rb, &dv, &mv, &s0, &s1, &s2);
    _mm512_storeu_ps(&t->d[b * 16], dv);
    _mm512_storeu_ps(&t->dmin[b * 16], mv);
    qmm::Q4KScalesMins(s0, s1, s2, sc, mn);
    for (int j = 0; j < 8; ++j) {
      _mm512_storeu_si512(&t->sc[(b * 8 + j) * 16], sc[j]);
      _mm512_storeu_si512(&t->mn[(b * 8 + j) * 16], mn[j]);
    }
    const uint8_t* qs = blk + 16;
    for (int c = 0; c < 8; ++c) {  // 16-byte chunk c: j = c / 2, dwords m = 4 * (c % 2) ..
      qmm::Transpose16x4(qs + 16 * c, rb, o);
      const int j = c / 2, m0 = 4 * (c % 2);
#pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) {
        _mm512_storeu_si512(q + b * 64 + 16 * j + m0 + k, _mm512_and_si512(o[k], nib));
        _mm512_storeu_si512(q + b * 64 + 16 * j + 8 + m0 + k,
                            _mm512_and_si512(_mm512_srli_epi32(o[k], 4), nib));
      }
    }
  }
  return true;
}

// Two full tiles (rows r0 .. r0 + 31) for NT tokens, blocks of 32 only: each token's
// broadcast activation dword serves both tiles and each weight vector all NT tokens, so loads
// stay under the dpbusd rate (one tile x 8 tokens needs more than one load per dpbusd). Each
// lane's operations are KernelBlocks32T's, so the bits are the same. out: row r0 of token tok0.
template <int NT, class Blocks32>
void KernelAvx512Pair(const Blocks32& t0, const Blocks32& t1, const Fmt& f, int cols,
                      const Act& a, int tok0, float* out, int64_t out_stride, const uint8_t* pf,
                      int64_t pf_step) {
  const int nsb = cols / 32;
  const int8_t* xq = a.q.data() + static_cast<size_t>(tok0) * cols;
  const float* dx = a.dx.data() + static_cast<size_t>(tok0) * nsb;
  const int32_t* bs = a.bs.data() + static_cast<size_t>(tok0) * nsb;
  __m512 acc[2][NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) acc[0][j] = acc[1][j] = _mm512_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    if (pf != nullptr) qmm::PrefetchRange<false>(pf, b * pf_step, (b + 1) * pf_step);
    __m512i s[2][NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) s[0][j] = s[1][j] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i w0 = t0.Levels(b, k), w1 = t1.Levels(b, k);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const __m512i xv = _mm512_set1_epi32(Load32(xq + j * cols + b * 32 + 4 * k));
        s[0][j] = _mm512_dpbusd_epi32(s[0][j], w0, xv);
        s[1][j] = _mm512_dpbusd_epi32(s[1][j], w1, xv);
      }
    }
    const __m512 d0 = t0.Scales(b), d1 = t1.Scales(b);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m512i o = _mm512_set1_epi32(f.offset * bs[j * nsb + b]);
      const __m512 x = _mm512_set1_ps(dx[j * nsb + b]);
      const __m512 dd0 = _mm512_mul_ps(d0, x), dd1 = _mm512_mul_ps(d1, x);
      const __m512 f0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[0][j], o));
      const __m512 f1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[1][j], o));
      acc[0][j] = _mm512_add_ps(acc[0][j], _mm512_mul_ps(dd0, f0));
      acc[1][j] = _mm512_add_ps(acc[1][j], _mm512_mul_ps(dd1, f1));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    _mm512_storeu_ps(out + (tok0 + j) * out_stride, acc[0][j]);
    _mm512_storeu_ps(out + (tok0 + j) * out_stride + 16, acc[1][j]);
  }
}

// The next rows (bytes of them at pf, or null) prefetched over a tile's `groups` kernel calls,
// a share per call and a slice of it per block: their DRAM reads then overlap the whole
// computation instead of bunching up in its first part.
struct GroupPrefetch {
  const uint8_t* pf;
  int64_t bytes, share, step;
  GroupPrefetch(const uint8_t* p, int64_t b, int groups, int nsb)
      : pf(p), bytes(b), share((b + groups - 1) / groups), step((share + nsb - 1) / nsb) {}
  const uint8_t* At(int g) const {
    return pf != nullptr && g * share < bytes ? pf + g * share : nullptr;
  }
};

// Two full tiles of blocks of 32 for every token: KernelAvx512Pair on 4 tokens at a time, the
// rest one token per tile. pf / pf_bytes: the rows after both tiles, prefetched meanwhile.
template <class Blocks32>
void KernelAvx512Pairs(const Blocks32& t0, const Blocks32& t1, const Fmt& f, int cols,
                       const Act& a, int n_tok, float* out, int64_t out_stride, const uint8_t* pf,
                       int64_t pf_bytes) {
  const GroupPrefetch gp(pf, pf_bytes, n_tok / 4 + n_tok % 4, cols / 32);
  int tok = 0, g = 0;
  for (; tok + 4 <= n_tok; tok += 4, ++g) {
    KernelAvx512Pair<4>(t0, t1, f, cols, a, tok, out, out_stride, gp.At(g), gp.step);
  }
  for (; tok < n_tok; ++tok, ++g) {
    KernelBlocks32T<1>(t0, f, cols, a, tok, out, out_stride, 16, gp.At(g), gp.step);
    KernelBlocks32T<1>(t1, f, cols, a, tok, out + 16, out_stride, 16, nullptr, 0);
  }
}

// One tile for every token; pf / pf_bytes: the next tile's rows, prefetched meanwhile. 8 tokens
// share each weight vector load and keep 8 independent dpbusd chains in flight.
template <class Kernel>
void RunTokenGroups(int n_tok, int nsb, const uint8_t* pf, int64_t pf_bytes, Kernel kernel) {
  const GroupPrefetch gp(pf, pf_bytes, n_tok / 8 + n_tok % 8 / 4 + n_tok % 4, nsb);
  int tok = 0, g = 0;
  auto run = [&]<int NT>() {
    kernel.template operator()<NT>(tok, gp.At(g++), gp.step);
    tok += NT;
  };
  while (tok + 8 <= n_tok) run.template operator()<8>();
  while (tok + 4 <= n_tok) run.template operator()<4>();
  while (tok < n_tok) run.template operator()<1>();
}

template <class Blocks32>
void KernelBlocks32(const Blocks32& t, const Fmt& f, int cols, const Act& a, int n_tok,
                    float* out, int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_bytes) {
  RunTokenGroups(n_tok, cols / 32, pf, pf_bytes,
                 [&]<int NT>(int tok, const uint8_t* p, int64_t step) {
                   KernelBlocks32T<NT>(t, f, cols, a, tok, out, out_stride, nr, p, step);
                 });
}

void KernelAvx512(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                  int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_bytes) {
  if (!f.k) return KernelBlocks32(OfTile(t), f, cols, a, n_tok, out, out_stride, nr, pf, pf_bytes);
  const KTileView v{t, f.g / 4};
  RunTokenGroups(n_tok, cols / f.sb, pf, pf_bytes,
                 [&]<int NT>(int tok, const uint8_t* p, int64_t step) {
                   if (f.g == 16) {
                     KernelSuperBlocksT<NT, 16>(v, f, cols, a, tok, out, out_stride, nr, p, step);
                   } else {
                     KernelSuperBlocksT<NT, 32>(v, f, cols, a, tok, out, out_stride, nr, p, step);
                   }
                 });
}

// From this many tokens on, pairs of tiles beat single tiles (KernelAvx512Pair).
constexpr int kMinPairTokens = 8;

// Up to this many tokens Q4_K, Q4_0 and Q5_0 tiles are read in place (nibbles unpacked per
// token group); beyond, unpacked once per pass into a plain tile. Measured from DRAM, 2
// threads (4864x896; Q4_K 8192x2048): Q4_0 in place at every size (16 tokens 0.129 ms vs
// 0.157 unpacked); Q4_K in place 0.55 vs 0.65 at 16, within noise from 24 on; Q5_0, whose
// bit-4 masks cost a few more operations per weight vector, unpacked from 12 (0.12 vs 0.14).
int MaxInPlaceTokens(DType t) {
  if (t == DType::kQ4_0) return 1 << 30;
  return t == DType::kQ4_K ? 16 : 8;
}

// A Q4_K tile (kTiles) as PackTileAvx512 would have made it from the rows: levels as bytes,
// scales as int32, d and dmin as f32.
void UnpackQ4KTile(const Q4KTileView& v, int cols, Tile* t) {
  const int nsb = cols / 256;
  t->Resize(cols, GetFmt(DType::kQ4_K), 16);
  __m512i* q = reinterpret_cast<__m512i*>(t->q.data());
  for (int b = 0; b < nsb; ++b) {
    _mm512_storeu_ps(&t->d[b * 16], v.D(b));
    _mm512_storeu_ps(&t->dmin[b * 16], v.Dmin(b));
    for (int gg = 0; gg < 8; ++gg) {
      const int g = b * 8 + gg;
      _mm512_storeu_si512(&t->sc[g * 16], v.Sc(g));
      _mm512_storeu_si512(&t->mn[g * 16], v.Mn(g));
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm512_storeu_si512(q + g * 8 + k, v.Levels(g, k));
    }
  }
}

// A Q4_0 / Q5_0 tile (kTiles) as PackTileAvx512 would have made it from the rows.
void UnpackQ45Tile(const Q45TileView& v, int cols, Tile* t) {
  t->Resize(cols, GetFmt(DType::kQ4_0), 16);
  __m512i* q = reinterpret_cast<__m512i*>(t->q.data());
  for (int b = 0; b < cols / 32; ++b) {
    _mm512_storeu_ps(&t->d[b * 16], v.Scales(b));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) _mm512_storeu_si512(q + b * 8 + k, v.Levels(b, k));
  }
}

// Tiles [tile0, tile1) of a kTiles matrix for every token, read in place (no transpose, no
// copy: the layout is the kernels' own). follow: as RunTiles'.
void RunTiled(const WeightMatrix& wm, const Fmt& f, const Act& a, int n_tok, float* out,
              int64_t tile0, int64_t tile1, int64_t follow) {
  const int cols = static_cast<int>(wm.cols);
  const int64_t tb = TileBytes(wm.dtype, cols), n_tiles = (wm.rows + 15) / 16;
  const uint8_t* base = static_cast<const uint8_t*>(wm.data);
  auto ahead = [&](int64_t t) -> const uint8_t* {  // the tile after t in this thread's order
    t = t + 1 < tile1 ? t + 1 : follow;
    return t < 0 || t >= n_tiles ? nullptr : base + t * tb;
  };
  if (wm.dtype == DType::kQ4_K) {
    thread_local Tile unpacked;
    for (int64_t ti = tile0; ti < tile1; ++ti) {
      const int64_t r0 = ti * 16;
      const int nr = static_cast<int>(std::min<int64_t>(16, wm.rows - r0));
      const Q4KTileView v{base + ti * tb};
      if (n_tok > MaxInPlaceTokens(wm.dtype)) {
        // Many tokens: the nibbles and byte scales once into a plain tile (sequential work,
        // no transposes), then the kernel without per-token-group unpacking.
        UnpackQ4KTile(v, cols, &unpacked);
        KernelAvx512(unpacked, f, cols, a, n_tok, out + r0, wm.rows, nr, ahead(ti), tb);
        continue;
      }
      RunTokenGroups(n_tok, cols / 256, ahead(ti), tb,
                     [&]<int NT>(int tok, const uint8_t* p, int64_t step) {
                       KernelSuperBlocksT<NT, 32>(v, f, cols, a, tok, out + r0, wm.rows, nr, p,
                                                  step);
                     });
    }
    return;
  }
  // Blocks of 32: view(t, slot) is tile t's view (slot 0 or 1: the two tiles of a pair).
  auto blocks32 = [&](auto view) {
    for (int64_t ti = tile0; ti < tile1; ++ti) {
      const int64_t r0 = ti * 16;
      if (n_tok >= kMinPairTokens && ti + 1 < tile1 && r0 + 32 <= wm.rows) {
        KernelAvx512Pairs(view(ti, 0), view(ti + 1, 1), f, cols, a, n_tok, out + r0, wm.rows,
                          ahead(ti + 1), 2 * tb);
        ++ti;
        continue;
      }
      const int nr = static_cast<int>(std::min<int64_t>(16, wm.rows - r0));
      KernelBlocks32(view(ti, 0), f, cols, a, n_tok, out + r0, wm.rows, nr, ahead(ti), tb);
    }
  };
  if (wm.dtype == DType::kQ8_0) {
    const int64_t level_offset = Q8ScaleBytes(cols);
    return blocks32([&](int64_t t, int) {
      const uint8_t* p = base + t * tb;
      return Q8TileView{p + level_offset, reinterpret_cast<const uint16_t*>(p)};
    });
  }
  const int block_bytes = static_cast<int>(TileBytes(wm.dtype, 32));
  if (n_tok <= MaxInPlaceTokens(wm.dtype)) {
    return blocks32([&](int64_t t, int) { return Q45TileView{base + t * tb, block_bytes}; });
  }
  thread_local Tile unpacked[2];
  blocks32([&](int64_t t, int slot) {
    UnpackQ45Tile(Q45TileView{base + t * tb, block_bytes}, cols, &unpacked[slot]);
    return OfTile(unpacked[slot]);
  });
}

// ---- Direct (row-major) AVX-512 kernel for a few tokens. ----
// For B <= DirectMaxTok(dtype) the tile's unpack + transpose costs more than the dot products it
// serves, so full 16-row tiles are read straight from the blocks: one vector holds 32 bytes of
// two rows, vpdpbusd multiplies it with the token's bytes (broadcast to both halves), and
// Reduce8 folds 8 such vectors into one vector of 16 per-row integer sums *in row order* - the
// tile kernel's lane layout. Integer sums are exact in any order, and the float part below is
// the tile kernel's lane-wise code, so every row's result has the same bits.

// Rows (a, a + 4), a = 8 * (p / 4) + p % 4, 32 bytes each at p + row * rb: the pairing that
// makes Reduce8's output come out in row order.
inline __m512i LoadRowPair(const uint8_t* p, int64_t rb, int pair) {
  const int a = 8 * (pair >> 2) + (pair & 3);
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + a * rb));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + (a + 4) * rb));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// z[p] = (row a's 8 partial sums, row a + 4's) as LoadRowPair pairs them -> the 16 row totals.
inline __m512i Reduce8(const __m512i* z) {
  __m512i t[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    t[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2 * m], z[2 * m + 1]),
                            _mm512_unpackhi_epi32(z[2 * m], z[2 * m + 1]));
  }
  // u0's 128-bit lane k holds the lane-k sums of z0..z3, u1 those of z4..z7.
  const __m512i u0 = _mm512_add_epi32(_mm512_unpacklo_epi64(t[0], t[1]),
                                      _mm512_unpackhi_epi64(t[0], t[1]));
  const __m512i u1 = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2], t[3]),
                                      _mm512_unpackhi_epi64(t[2], t[3]));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(u0, u1, 0x88), _mm512_shuffle_i32x4(u0, u1, 0xDD));
}

// Pulls the bytes [lo, hi) of the upcoming rows into cache, a slice per block, so that 16
// side-by-side row reads hit cache instead of stalling on DRAM (null: nothing ahead).
inline void PrefetchSlice(const uint8_t* pf, int64_t lo, int64_t hi) {
  if (pf != nullptr) qmm::PrefetchRange<true>(pf, lo, hi);
}

inline __m512i Broadcast32(const int8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q8_0: IR level = q ^ 0x80 = q + 128, i = S - 128 * B as in the tile kernel.
template <int NT>
void DirectQ8_0(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 32;
  const int64_t pf_step = (16 * rb + nsb - 1) / nsb;

  const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* xq[NT];
  const float* dx[NT];
  const int32_t* bs[NT];
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) {
    xq[j] = a.q.data() + static_cast<size_t>(tok0 + j) * cols;
    dx[j] = a.dx.data() + static_cast<size_t>(tok0 + j) * nsb;
    bs[j] = a.bs.data() + static_cast<size_t>(tok0 + j) * nsb;
    acc[j] = _mm512_setzero_ps();
  }
  for (int b = 0; b < nsb; ++b) {
    PrefetchSlice(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * 34;
    __m512i z[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) z[p] = _mm512_xor_si512(LoadRowPair(blk + 2, rb, p), x80);
    const __m512 dv = qmm::LoadF16x16(blk, rb);
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) {
      const __m512i xv = Broadcast32(xq[j] + b * 32);
      __m512i s[8];
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) s[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z[p], xv);
      const __m512i i = _mm512_sub_epi32(Reduce8(s), _mm512_set1_epi32(128 * bs[j][b]));
      const __m512 dd = _mm512_mul_ps(dv, _mm512_set1_ps(dx[j][b]));
      acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(i)));
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) _mm512_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// Q4_K: 32 bytes of qs per row hold group 2c (low nibbles) and 2c + 1 (high nibbles).
template <int NT>
void DirectQ4_K(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 256, ng = cols / 32;
  const int64_t pf_step = (16 * rb + nsb - 1) / nsb;

  const __m512i nib = _mm512_set1_epi8(0x0F);
  const int8_t* xq[NT];
  const float* dx[NT];
  const int32_t* bs[NT];
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) {
    xq[j] = a.q.data() + static_cast<size_t>(tok0 + j) * cols;
    dx[j] = a.dx.data() + static_cast<size_t>(tok0 + j) * nsb;
    bs[j] = a.bs.data() + static_cast<size_t>(tok0 + j) * ng;
    acc[j] = _mm512_setzero_ps();
  }
  for (int b = 0; b < nsb; ++b) {
    PrefetchSlice(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * 144;
    __m512 dv, mv;
    __m512i s0, s1, s2;
    qmm::Q4KHeads(blk, rb, &dv, &mv, &s0, &s1, &s2);
    __m512i sc[8], mn[8];
    qmm::Q4KScalesMins(s0, s1, s2, sc, mn);
    __m512i mp[4];  // (m 2c, m 2c+1) as int16 pairs, for vpdpwssd (m <= 63)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      mp[c] = _mm512_or_si512(mn[2 * c], _mm512_slli_epi32(mn[2 * c + 1], 16));
    }
    __m512i i1[NT], i2[NT];
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) i1[j] = i2[j] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i lo[8], hi[8];
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        const __m512i z = LoadRowPair(blk + 16 + 32 * c, rb, p);
        lo[p] = _mm512_and_si512(z, nib);
        hi[p] = _mm512_and_si512(_mm512_srli_epi16(z, 4), nib);
      }
#pragma GCC unroll 4
      for (int j = 0; j < NT; ++j) {
        const int8_t* xg = xq[j] + b * 256 + 64 * c;
        const __m512i xl = Broadcast32(xg), xh = Broadcast32(xg + 32);
        __m512i sl[8], sh[8];
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) {
          sl[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[p], xl);
          sh[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[p], xh);
        }
        const int g = b * 8 + 2 * c;
        i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(sc[2 * c], Reduce8(sl)));
        i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(sc[2 * c + 1], Reduce8(sh)));
        i2[j] = _mm512_dpwssd_epi32(i2[j], mp[c], _mm512_set1_epi32(PairI16(bs[j] + g)));
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) {  // the tile kernel's float code, lane for lane
      const __m512 x = _mm512_set1_ps(dx[j][b]);
      acc[j] =
          _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(dv, x), _mm512_cvtepi32_ps(i1[j])));
      acc[j] =
          _mm512_sub_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(mv, x), _mm512_cvtepi32_ps(i2[j])));
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) _mm512_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// Rows (q, q + 4, q + 8, q + 12), 16 bytes each at p + row * rb: Reduce4's pairing.
inline __m512i LoadRowQuad(const uint8_t* p, int64_t rb, int q) {
  auto ld = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + r * rb)); };
  __m512i v = _mm512_castsi128_si512(ld(q));
  v = _mm512_inserti32x4(v, ld(q + 4), 1);
  v = _mm512_inserti32x4(v, ld(q + 8), 2);
  return _mm512_inserti32x4(v, ld(q + 12), 3);
}

// z[q] = 4 partial sums of rows q, q + 4, q + 8, q + 12 (128-bit lanes) -> 16 row totals.
inline __m512i Reduce4(const __m512i* z) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]),
                                      _mm512_unpackhi_epi32(z[0], z[1]));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]),
                                      _mm512_unpackhi_epi32(z[2], z[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

// Q4_0 / Q5_0: 16 bytes of qs per row, low nibbles = columns 0..15, high = 16..31; Q5_0's bit j
// of qh is bit 4 of column j's level. i = S - offset * B as in the tile kernel.
template <int NT, bool kFive>
void DirectQ4Q5_0(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                  const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 32, bb = kFive ? 22 : 18, qs = kFive ? 6 : 2, offset = kFive ? 16 : 8;
  const int64_t pf_step = (16 * rb + nsb - 1) / nsb;

  const __m512i nib = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const int8_t* xq[NT];
  const float* dx[NT];
  const int32_t* bs[NT];
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) {
    xq[j] = a.q.data() + static_cast<size_t>(tok0 + j) * cols;
    dx[j] = a.dx.data() + static_cast<size_t>(tok0 + j) * nsb;
    bs[j] = a.bs.data() + static_cast<size_t>(tok0 + j) * nsb;
    acc[j] = _mm512_setzero_ps();
  }
  for (int b = 0; b < nsb; ++b) {
    PrefetchSlice(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * bb;
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i z = LoadRowQuad(blk + qs, rb, q);
      lo[q] = _mm512_and_si512(z, nib);
      hi[q] = _mm512_and_si512(_mm512_srli_epi16(z, 4), nib);
      if (kFive) {
        uint64_t mlo = 0, mhi = 0;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          uint32_t h;
          std::memcpy(&h, blk + 2 + (q + 4 * k) * rb, 4);
          mlo |= static_cast<uint64_t>(h & 0xFFFF) << (16 * k);
          mhi |= static_cast<uint64_t>(h >> 16) << (16 * k);
        }
        lo[q] = _mm512_or_si512(lo[q], _mm512_maskz_mov_epi8(mlo, bit4));
        hi[q] = _mm512_or_si512(hi[q], _mm512_maskz_mov_epi8(mhi, bit4));
      }
    }
    const __m512 dv = qmm::LoadF16x16(blk, rb);
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) {
      const __m512i xl = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq[j] + b * 32)));
      const __m512i xh = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq[j] + b * 32 + 16)));
      __m512i s[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        s[q] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[q], xl), hi[q],
                                   xh);
      }
      const __m512i i = _mm512_sub_epi32(Reduce4(s), _mm512_set1_epi32(offset * bs[j][b]));
      const __m512 dd = _mm512_mul_ps(dv, _mm512_set1_ps(dx[j][b]));
      acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(i)));
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) _mm512_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// Q6_K: 16-column groups. Half hf of a block, bytes l = 0..31 of its ql / qh runs, give columns
// 128 hf + 32 c + l (c = 0..3): the low nibbles of ql[l] and ql[l + 32], then their high
// nibbles, each with 2 bits of qh[l] (UnpackRow's formulas). A LoadRowPair vector's 128-bit
// lanes are then (row a, row a + 4) x (group 8 hf + 2 c, the next one), so Reduce4 over four
// pairs gives 8 rows x 2 groups, and two such results shuffle into one group's 16 rows.
template <int NT>
void DirectQ6_K(const uint8_t* base, int64_t rb, int cols, const Act& a, int tok0,
                const uint8_t* pf, float* out, int64_t out_stride) {
  const int nsb = cols / 256, ng = cols / 16;
  const int64_t pf_step = (16 * rb + nsb - 1) / nsb;

  const __m512i nib = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const TokenRows<NT> x(a, tok0, cols, nsb, ng);
  const auto& [xq, dx, bs] = x;
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    PrefetchSlice(pf, b * pf_step, (b + 1) * pf_step);
    const uint8_t* blk = base + b * 210;
    const __m512 dv = qmm::LoadF16x16(blk + 208, rb);
    __m512i sw[4];  // the 16 int8 scales of each row, 4 per dword
    qmm::Transpose16x4(blk + 192, rb, sw);
    auto scale = [&](int g) {  // group g's scales of the 16 rows, sign-extended
      return _mm512_srai_epi32(_mm512_slli_epi32(sw[g / 4], 24 - 8 * (g % 4)), 24);
    };
    __m512i i1[NT], i2[NT];
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) {
      // i2 = sum over groups of m * bs, m = 32 sc: the int16 pairs (sc 4k, sc 4k+2) and
      // (sc 4k+1, sc 4k+3) of dword k times the matching pairs of level sums (|bs| <= 2032).
      const int32_t* g = bs[j] + b * 16;
      auto pair = [&](int u, int v) {
        const int32_t uv[2] = {g[u], g[v]};
        return _mm512_set1_epi32(PairI16(uv));
      };
      __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i even = _mm512_srai_epi16(_mm512_slli_epi16(sw[k], 8), 8);
        const __m512i odd = _mm512_srai_epi16(sw[k], 8);
        t = _mm512_dpwssd_epi32(t, even, pair(4 * k, 4 * k + 2));
        t = _mm512_dpwssd_epi32(t, odd, pair(4 * k + 1, 4 * k + 3));
      }
      i1[j] = _mm512_setzero_si512();
      i2[j] = _mm512_slli_epi32(t, 5);
    }
    for (int hf = 0; hf < 2; ++hf) {
      const uint8_t* ql = blk + 64 * hf;
      const uint8_t* qh = blk + 128 + 32 * hf;
      __m512i half[NT][4];  // Reduce4 of pairs 0..3 (rows 0..7) per token and c
#pragma GCC unroll 2
      for (int ph = 0; ph < 2; ++ph) {
        __m512i lv[4][4];  // [c][pair]
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int p = 4 * ph + q;
          const __m512i qa = LoadRowPair(ql, rb, p), qb = LoadRowPair(ql + 32, rb, p);
          const __m512i h = LoadRowPair(qh, rb, p);
          lv[0][q] = _mm512_or_si512(_mm512_and_si512(qa, nib),
                                     _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
          lv[1][q] = _mm512_or_si512(_mm512_and_si512(qb, nib),
                                     _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
          lv[2][q] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qa, 4), nib),
                                     _mm512_and_si512(h, m30));
          lv[3][q] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qb, 4), nib),
                                     _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
        }
#pragma GCC unroll 4
        for (int j = 0; j < NT; ++j) {
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m512i xv = Broadcast32(xq[j] + b * 256 + 128 * hf + 32 * c);
            __m512i z[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
              z[q] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lv[c][q], xv);
            }
            const __m512i r = Reduce4(z);  // lanes: rows 8ph + (0..3 | 4..7) x groups (2c, 2c+1)
            if (ph == 0) {
              half[j][c] = r;
              continue;
            }
            const int g = 8 * hf + 2 * c;
            const __m512i s0 = _mm512_shuffle_i32x4(half[j][c], r, 0x88);  // group g, rows 0..15
            const __m512i s1 = _mm512_shuffle_i32x4(half[j][c], r, 0xDD);  // group g + 1
            i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(scale(g), s0));
            i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(scale(g + 1), s1));
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NT; ++j) {  // the tile kernel's float code, lane for lane (dmin = d)
      const __m512 xd = _mm512_mul_ps(dv, _mm512_set1_ps(dx[j][b]));
      acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(xd, _mm512_cvtepi32_ps(i1[j])));
      acc[j] = _mm512_sub_ps(acc[j], _mm512_mul_ps(xd, _mm512_cvtepi32_ps(i2[j])));
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) _mm512_storeu_ps(out + (tok0 + j) * out_stride, acc[j]);
}

// The most tokens the direct kernel takes for dtype t (0: none). Beyond it the tile's unpack,
// amortized over the batch, is cheaper than a reduction per token (measured break-even: Q8_0
// and Q4_K about 4-8 tokens; Q4_0 / Q5_0, whose tiles cost more to unpack, beyond 8).
int DirectMaxTok(DType t, int kernel) {
  if (t == DType::kQ4_0 || t == DType::kQ5_0) return 8;
  // Against AMX, whose cost is about that of a full 16-token chunk, the direct kernel pays up
  // to 4 tokens for Q8_0 and 8 for Q4_K (its tiles cost more to unpack). Measured, Q8_0 from
  // DRAM, 2 threads: 4864x896 direct 0.25 ms at 4 tokens, 0.32-0.50 at 5-8; AMX 0.30-0.32.
  if (t == DType::kQ8_0) return 4;
  if (t == DType::kQ4_K) return kernel == 3 ? 8 : 4;
  // Q6_K: 8192x2048 from DRAM, 2 threads: 0.37 ms direct vs 0.71 tiled at 1 token; at 2 tokens
  // the tiles already win (llama-1B Q6_K c(2): 45 ms direct, 42 tiled).
  if (t == DType::kQ6_K) return 1;
  return 0;
}

// The 16 rows at r0 (a full tile) for n_tok <= DirectMaxTok tokens; pf: the next rows, to
// prefetch meanwhile (or null).
void RunDirect(const WeightMatrix& wm, int64_t r0, const Act& a, int n_tok, const uint8_t* pf,
               float* out) {
  const int64_t rb = wm.row_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(wm.data) + r0 * rb;
  const int cols = static_cast<int>(wm.cols);
  auto run = [&](auto kernel) {
    int tok = 0;
    for (; tok + 4 <= n_tok; tok += 4) kernel.template operator()<4>(tok);
    for (; tok + 2 <= n_tok; tok += 2) kernel.template operator()<2>(tok);
    for (; tok < n_tok; ++tok) kernel.template operator()<1>(tok);
  };
  if (wm.dtype == DType::kQ8_0) {
    run([&]<int NT>(int tok) { DirectQ8_0<NT>(base, rb, cols, a, tok, pf, out, wm.rows); });
  } else if (wm.dtype == DType::kQ4_0) {
    run([&]<int NT>(int tok) {
      DirectQ4Q5_0<NT, false>(base, rb, cols, a, tok, pf, out, wm.rows);
    });
  } else if (wm.dtype == DType::kQ5_0) {
    run([&]<int NT>(int tok) { DirectQ4Q5_0<NT, true>(base, rb, cols, a, tok, pf, out, wm.rows); });
  } else if (wm.dtype == DType::kQ4_K) {
    run([&]<int NT>(int tok) { DirectQ4_K<NT>(base, rb, cols, a, tok, pf, out, wm.rows); });
  } else {
    run([&]<int NT>(int tok) { DirectQ6_K<NT>(base, rb, cols, a, tok, pf, out, wm.rows); });
  }
}

}  // namespace
#pragma GCC pop_options

namespace {

// Row tiles [tile0, tile1) of width w: unpack once, apply to all tokens (or, for a few tokens,
// the direct kernels on full tiles; with AMX, the tile multiplies on full tiles). `follow`: the
// first tile of this thread's next run (-1: none), so that the prefetch ahead continues into it.
void RunTiles(const WeightMatrix& wm, const Fmt& f, const Act& a, const qmm::AmxAct* amx,
              int n_tok, float* out, int kernel, int64_t tile0, int64_t tile1, int64_t follow) {
  if (wm.layout == WeightLayout::kTiles && kernel == 2) {
    return RunTiled(wm, f, a, n_tok, out, tile0, tile1, follow);
  }
  const int w = kernel >= 2 ? 16 : kernel == 1 ? 8 : 1;
  const int cols = static_cast<int>(wm.cols);
  thread_local RowIR row;
  thread_local Tile tile, tile2;
  row.Resize(cols, f);
  // Pairs of full tiles share the activation loads (KernelAvx512Pair).
  const bool pairs = kernel == 2 && !f.k && n_tok >= kMinPairTokens;
  const bool direct = kernel >= 2 && n_tok <= DirectMaxTok(wm.dtype, kernel);
  const bool direct_avx2 = kernel == 1 && wm.layout == WeightLayout::kRows &&
                           n_tok <= DirectAvx2MaxTok(wm.dtype);
  // The rows of the tile after ti in this thread's order, to prefetch: while it is full and
  // its rows are short (else null).
  const bool prefetch = wm.row_bytes() <= qmm::MaxPrefetchRowBytes();
  auto ahead = [&](int64_t ti) -> const uint8_t* {
    if (!prefetch) return nullptr;
    int64_t t = ti + 1;
    if (t >= tile1) t = follow < 0 ? -1 : follow;
    if (t < 0 || (t + 1) * w > wm.rows) return nullptr;
    return static_cast<const uint8_t*>(wm.data) + t * w * wm.row_bytes();
  };
  for (int64_t ti = tile0; ti < tile1; ++ti) {
    const int64_t r0 = ti * w;
    const int nr = static_cast<int>(std::min<int64_t>(w, wm.rows - r0));
    const bool prefetched = prefetch && ti != tile0;  // by the previous tile's kernel
    if (direct && nr == 16) {
      // One tile ahead measured best here: two tiles plus the current one overflow L1.
      RunDirect(wm, r0, a, n_tok, ahead(ti), out + r0);
      continue;
    }
    if (direct_avx2 && nr == 8) {
      RunDirectAvx2(wm, r0, a, n_tok, ahead(ti), out + r0);
      continue;
    }
    if (amx != nullptr && nr == 16) {
      qmm::AmxTile(wm, f, *amx, r0, ahead(ti), out);
      continue;
    }
    if (pairs && nr == 16 && ti + 1 < tile1 && r0 + 32 <= wm.rows &&
        PackTileAvx512(wm, f, r0, 16, &tile, prefetched) &&
        PackTileAvx512(wm, f, r0 + 16, 16, &tile2, prefetched)) {
      KernelAvx512Pairs(OfTile(tile), OfTile(tile2), f, cols, a, n_tok, out + r0, wm.rows,
                        ahead(ti + 1), 2 * w * wm.row_bytes());
      ++ti;
      continue;
    }
    // (A partial tile under AMX runs the AVX-512 tile kernel: the same bits.)
    if (!(kernel >= 2 && PackTileAvx512(wm, f, r0, nr, &tile, prefetched)) &&
        !(kernel == 1 && PackTileAvx2(wm, f, r0, nr, &tile))) {
      PackTile(wm, f, r0, nr, w, &row, &tile);
    }
    float* o = out + r0;
    if (kernel >= 2) {
      KernelAvx512(tile, f, cols, a, n_tok, o, wm.rows, nr, ahead(ti), w * wm.row_bytes());
    } else if (kernel == 1) {
      KernelAvx2(tile, f, cols, a, n_tok, o, wm.rows, nr);
    } else {
      KernelScalar(tile, f, cols, a, n_tok, o, wm.rows);
    }
  }
}

// Below this many multiply-adds a product runs on the calling thread.
constexpr int64_t kMinParallelWork = 1 << 17;
// Below this many activations a batch is quantized on the calling thread: quantizing 32k takes
// ~10 us, several times what a pool dispatch and its wait cost.
constexpr int64_t kMinParallelQuantize = 1 << 15;

}  // namespace

bool IsIntDotType(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ5_0 || t == DType::kQ4_K ||
         t == DType::kQ5_K || t == DType::kQ6_K;
}

int IntKernelFor(CpuLevel level) {
  if (level == CpuLevel::kAmx) return 3;  // implies VNNI (cpu_features.cc)
  if (level == CpuLevel::kAvx512 && HasAvx512Vnni()) return 2;
  if (level >= CpuLevel::kAvx2) return 1;
  return 0;
}

void QMatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool,
             int kernel) {
  const WeightMatrix* ws[] = {&w};
  float* outs[] = {out};
  QMatMulShared(ws, 1, x, n_tokens, outs, pool, kernel);
}

void QMatMulShared(const WeightMatrix* const* ws, int n_w, const float* x, int n_tokens,
                   float* const* outs, ThreadPool* pool, int kernel) {
  GOOSE_CHECK(n_w >= 1 && n_w <= kMaxMatMulShared);
  const DType dtype = ws[0]->dtype;
  const Fmt f = GetFmt(dtype);
  const int cols = static_cast<int>(ws[0]->cols);
  GOOSE_CHECK(cols % f.sb == 0);
  GOOSE_CHECK(kernel >= 0 && kernel <= IntKernelFor(DetectCpuLevel()));
  const WeightLayout layout = ws[0]->layout;
  for (int i = 0; i < n_w; ++i) {
    GOOSE_CHECK(ws[i]->dtype == dtype && ws[i]->cols == cols && ws[i]->layout == layout);
  }
  // Tiles are the AVX-512 kernel's layout (AMX multiplies row-major tiles): at most kernel 2.
  if (layout == WeightLayout::kTiles) {
    GOOSE_CHECK(HasTiles(dtype));
    kernel = std::min(kernel, 2);
  }
  // (thread_local: the lambdas below, which run on other threads too, use the reference.)
  thread_local Act a_buf;
  Act& a = a_buf;
  a.q.resize(static_cast<size_t>(n_tokens) * cols);
  a.dx.resize(static_cast<size_t>(n_tokens) * (cols / f.sb));
  a.bs.resize(static_cast<size_t>(n_tokens) * (cols / f.g));
  // Each token's activations on their own (any split over threads gives the same bits).
  auto prepare = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      (kernel >= 2 ? QuantizeActAvx512 : QuantizeAct)(
          x + t * cols, cols, f, a.q.data() + t * cols, a.dx.data() + t * (cols / f.sb),
          a.bs.data() + t * (cols / f.g));
    }
  };
  if (pool != nullptr && pool->size() > 1 && n_tokens >= 2 &&
      static_cast<int64_t>(n_tokens) * cols >= kMinParallelQuantize) {
    pool->ParallelFor(n_tokens, prepare);
  } else {
    prepare(0, n_tokens);
  }
  thread_local qmm::AmxAct amx;
  const bool use_amx = kernel == 3 && n_tokens > DirectMaxTok(dtype, kernel);
  if (use_amx) qmm::PackAmxAct(a, f, cols, n_tokens, &amx);
  const qmm::AmxAct* amx_act = use_amx ? &amx : nullptr;
  // The matrices' tiles as one index space: matrix i owns [first[i], first[i + 1]).
  const int tw = kernel >= 2 ? 16 : kernel == 1 ? 8 : 1;
  int64_t first[kMaxMatMulShared + 1] = {0};
  int64_t work = 0;
  for (int i = 0; i < n_w; ++i) {
    first[i + 1] = first[i] + (ws[i]->rows + tw - 1) / tw;
    work += ws[i]->rows * cols * n_tokens;
  }
  const int64_t n_tiles = first[n_w];
  // Tiles [g0, g1) of the index space; follow: the first tile this thread runs next (-1: none).
  auto run = [&](int64_t g0, int64_t g1, int64_t follow) {
    for (int i = 0; i < n_w && g0 < g1; ++i) {
      if (g0 >= first[i + 1]) continue;
      const int64_t e = std::min(g1, first[i + 1]);
      // The prefetch continues into `follow` only inside the same matrix.
      const int64_t f_local = e == g1 && follow >= first[i] && follow < first[i + 1]
                                  ? follow - first[i]
                                  : -1;
      RunTiles(*ws[i], f, a, amx_act, n_tokens, outs[i], kernel, g0 - first[i], e - first[i],
               f_local);
      g0 = e;
    }
  };
  if (pool == nullptr || pool->size() == 1 || work < kMinParallelWork) {
    run(0, n_tiles, -1);
    return;
  }
  // Threads claim chunks of tiles as they go rather than a fixed half each: on a shared machine
  // one thread is often descheduled for a while, and with a static split the other then waits
  // for it (measured: 2 threads slower than 1 for one token under load). Rows are independent,
  // so who computes which row does not change any bits. A thread claims its next run before
  // it computes the current one, so that it can prefetch into it.
  // Runs of about 1/8 of a thread's share, shorter as tiles get heavier with more tokens (the
  // last run of one thread is what the other waits for at the end); even, so that runs split
  // into pairs of tiles (KernelAvx512Pair).
  const int64_t chunk =
      std::max<int64_t>(2, n_tiles / (8 * pool->size() * ((n_tokens + 15) / 16))) & ~int64_t{1};
  std::atomic<int64_t> next{0};
  pool->ParallelFor(pool->size(), [&](int64_t, int64_t) {
    int64_t t0 = next.fetch_add(chunk, std::memory_order_relaxed);
    while (t0 < n_tiles) {
      const int64_t t1 = next.fetch_add(chunk, std::memory_order_relaxed);
      run(t0, std::min(t0 + chunk, n_tiles), t1 < n_tiles ? t1 : -1);
      t0 = t1;
    }
  });
}

bool HasTiles(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_K || t == DType::kQ4_0 || t == DType::kQ5_0;
}

int64_t TileBytes(DType t, int64_t cols) {
  GOOSE_CHECK(HasTiles(t));
  switch (t) {
    case DType::kQ8_0: return Q8TileBytes(cols);
    case DType::kQ4_K: return kQ4KTileSbBytes * (cols / 256);
    case DType::kQ4_0: return kQ4_0TileBlockBytes * (cols / 32);
    default: return kQ5_0TileBlockBytes * (cols / 32);
  }
}

int64_t TiledBytes(DType t, int64_t rows, int64_t cols) {
  return (rows + 15) / 16 * TileBytes(t, cols);
}

namespace {
// Row r's place in the tiles: its lane of tile r / 16.
struct TileSlot {
  uint8_t* tile;
  int lane;
  TileSlot(const WeightMatrix& w, int64_t r, const uint8_t* base)
      : tile(const_cast<uint8_t*>(base) + r / 16 * TileBytes(w.dtype, w.cols)),
        lane(static_cast<int>(r % 16)) {}
  // Q8_0: the f16 scale of block b, levels 4k .. 4k+3 of block b.
  uint8_t* q8_scale(int64_t b) const { return tile + (b * 16 + lane) * 2; }
  uint8_t* q8_level(int64_t cols, int64_t b, int k) const {
    return tile + Q8ScaleBytes(cols) + b * 512 + k * 64 + lane * 4;
  }
  // Q4_K: super-block b's part of the tile, and this row's byte of a [..][16] array in it.
  uint8_t* q4k(int64_t b, int offset) const { return tile + b * kQ4KTileSbBytes + offset; }
};
constexpr uint32_t kSignBits = 0x80808080u;  // q ^ 0x80 in each byte: signed <-> unsigned levels

// Row `row` (GGUF blocks) into its slot, or (to_row) back: the byte moves of both directions.
void MoveRow(const WeightMatrix& w, const TileSlot& slot, uint8_t* row, bool to_row) {
  auto move = [&](uint8_t* tile_bytes, uint8_t* row_bytes, int n) {
    if (to_row) {
      std::memcpy(row_bytes, tile_bytes, n);
    } else {
      std::memcpy(tile_bytes, row_bytes, n);
    }
  };
  if (w.dtype == DType::kQ8_0) {
    for (int64_t b = 0; b < w.cols / 32; ++b) {
      uint8_t* blk = row + b * 34;
      move(slot.q8_scale(b), blk, 2);
      for (int k = 0; k < 8; ++k) {
        uint32_t v;
        std::memcpy(&v, to_row ? slot.q8_level(w.cols, b, k) : blk + 2 + 4 * k, 4);
        v ^= kSignBits;
        std::memcpy(to_row ? blk + 2 + 4 * k : slot.q8_level(w.cols, b, k), &v, 4);
      }
    }
    return;
  }
  if (w.dtype == DType::kQ4_0 || w.dtype == DType::kQ5_0) {
    const bool five = w.dtype == DType::kQ5_0;
    const int bb = five ? 22 : 18, qs = five ? 6 : 2;
    const int tbb = five ? kQ5_0TileBlockBytes : kQ4_0TileBlockBytes;
    for (int64_t b = 0; b < w.cols / 32; ++b) {
      uint8_t* blk = row + b * bb;
      uint8_t* t = slot.tile + b * tbb;
      move(t + 2 * slot.lane, blk, 2);
      for (int m = 0; m < 4; ++m) move(t + 32 + 64 * m + 4 * slot.lane, blk + qs + 4 * m, 4);
      if (!five) continue;
      // Mask k, bits 4r .. 4r + 3 = qh bits 4k .. 4k + 3 of row r: a nibble of byte r / 2.
      uint32_t qh = 0;
      if (!to_row) std::memcpy(&qh, blk + 2, 4);
      const int shift = 4 * (slot.lane % 2);
      for (int k = 0; k < 8; ++k) {
        uint8_t& byte = t[288 + 8 * k + slot.lane / 2];
        if (to_row) {
          qh |= static_cast<uint32_t>((byte >> shift) & 0xF) << (4 * k);
        } else {
          byte = static_cast<uint8_t>(byte | ((qh >> (4 * k)) & 0xF) << shift);
        }
      }
      if (to_row) std::memcpy(blk + 2, &qh, 4);
    }
    return;
  }
  for (int64_t b = 0; b < w.cols / 256; ++b) {
    uint8_t* blk = row + b * 144;
    move(slot.q4k(b, 2 * slot.lane), blk, 2);
    move(slot.q4k(b, kQ4KDmin + 2 * slot.lane), blk + 2, 2);
    uint8_t sc[8], mn[8];
    if (!to_row) {
      for (int j = 0; j < 8; ++j) GetScaleMinK4(j, blk + 4, &sc[j], &mn[j]);
    }
    for (int j = 0; j < 8; ++j) {
      move(slot.q4k(b, kQ4KSc + 16 * j + slot.lane), &sc[j], 1);
      move(slot.q4k(b, kQ4KMin + 16 * j + slot.lane), &mn[j], 1);
    }
    if (to_row) PackScaleMinK4(sc, mn, blk + 4);
    for (int v = 0; v < 32; ++v) {  // vector 8j + k: qs bytes 32j + 4k .. (= 4v)
      move(slot.q4k(b, kQ4KLevels + 64 * v + 4 * slot.lane), blk + 16 + 4 * v, 4);
    }
  }
}
}  // namespace

void RepackTiles(const WeightMatrix& w, uint8_t* out) {
  GOOSE_CHECK(HasTiles(w.dtype) && w.layout == WeightLayout::kRows);
  const int64_t rb = w.row_bytes(), tb = TileBytes(w.dtype, w.cols);
  const bool avx512 = ActiveCpuLevel() >= CpuLevel::kAvx512;
  for (int64_t r0 = 0; r0 < w.rows; r0 += 16) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + r0 * rb;
    uint8_t* tile = out + r0 / 16 * tb;
    if (avx512 && r0 + 16 <= w.rows) {  // a full tile: 16 rows transposed at once
      if (w.dtype == DType::kQ8_0) {
        PackQ8TileAvx512(src, rb, static_cast<int>(w.cols / 32), tile);
      } else if (w.dtype == DType::kQ4_K) {
        PackQ4KTileAvx512(src, rb, static_cast<int>(w.cols / 256), tile);
      } else {
        PackQ45TileAvx512(src, rb, static_cast<int>(w.cols / 32), w.dtype == DType::kQ5_0,
                          tile);
      }
      continue;
    }
    std::memset(tile, 0, static_cast<size_t>(tb));  // (rows past the last stay zero)
    for (int64_t r = r0; r < std::min(r0 + 16, w.rows); ++r) {
      uint8_t* row = const_cast<uint8_t*>(static_cast<const uint8_t*>(w.data)) + r * rb;
      MoveRow(w, TileSlot(w, r, out), row, false);  // (reads row only)
    }
  }
}

void TiledRow(const WeightMatrix& w, int64_t r, uint8_t* out) {
  GOOSE_CHECK(HasTiles(w.dtype) && w.layout == WeightLayout::kTiles);
  GOOSE_CHECK(r >= 0 && r < w.rows);
  MoveRow(w, TileSlot(w, r, static_cast<const uint8_t*>(w.data)), out, true);
}

float QDotReference(DType t, const uint8_t* row, int64_t cols, const float* x) {
  const Fmt f = GetFmt(t);
  const int n = static_cast<int>(cols);
  std::vector<int8_t> q(n);
  std::vector<float> dx(n / f.sb);
  std::vector<int32_t> bs(n / f.g);
  QuantizeAct(x, n, f, q.data(), dx.data(), bs.data());
  RowIR r;
  r.Resize(n, f);
  UnpackRow(t, row, n, &r);
  // The defining order (qmatmul.h), written out directly on the unpacked row.
  float acc = 0.0f;
  for (int b = 0; b < n / f.sb; ++b) {
    if (!f.k) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += (r.q[b * 32 + j] - f.offset) * q[b * 32 + j];
      acc = acc + (r.d[b] * dx[b]) * static_cast<float>(s);
      continue;
    }
    int32_t i1 = 0, i2 = 0;
    for (int g = b * (f.sb / f.g); g < (b + 1) * (f.sb / f.g); ++g) {
      int32_t s = 0;
      for (int j = 0; j < f.g; ++j) s += r.q[g * f.g + j] * q[g * f.g + j];
      i1 += r.sc[g] * s;
      i2 += r.mn[g] * bs[g];
    }
    acc = acc + (r.d[b] * dx[b]) * static_cast<float>(i1);
    acc = acc - (r.dmin[b] * dx[b]) * static_cast<float>(i2);
  }
  return acc;
}

}  // namespace goose
