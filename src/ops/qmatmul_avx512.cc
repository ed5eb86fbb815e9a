// QMatMul's AVX-512 VNNI tile kernels (w = 16): 16-row tiles in the lane layout
// (qmatmul_internal.h's Tile), unpacked once per pass from row-major blocks (PackTileAvx512)
// or read in place from weights stored as tiles (RunTiled; WeightLayout::kTiles, made at load
// time by qmatmul_layout.cc), for 1, 4 or 8 tokens at a time or two tiles at a time
// (KernelAvx512Pair); and the activations' quantization for every AVX-512 path.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/qmatmul.h"
#include "ops/qmatmul_internal.h"

// GCC 12 flags the AVX-512 intrinsics' _mm512_undefined_* pass-through operands as "maybe
// uninitialized" wherever they inline (false positives from its own headers; the transposes
// trigger them), and a lambda taking __m512 (QuantizeActAvx512) as an ABI change: neither is
// real here.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose::qmm {

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

// Independent dpbusd accumulators per token for a group of NT tokens: a dpbusd waits for the
// previous one on its accumulator (~5 cycles), so one or two tokens alone would leave the unit
// idle most of the time (measured on Zen 4, 0.44B Q8_0, 2 threads: the 5th token of a pass
// cost 9.7 ms, as much as the other four). The integer sums are exact, so splitting them over
// chains (k mod kChains) and adding the chains gives the same integers, hence the same bits.
template <int NT>
constexpr int kChains = NT == 1  ? 4
                        : NT < 4 ? 2
                                 : 1;
template <int NT>
inline void JoinChains(__m512i (&s)[kChains<NT>][NT]) {
#pragma GCC unroll 4
  for (int c = 1; c < kChains<NT>; ++c) {
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) s[0][j] = _mm512_add_epi32(s[0][j], s[c][j]);
  }
}

inline void PrefetchBlock(bool to_l1, const uint8_t* pf, int64_t lo, int64_t hi) {
  if (to_l1) return qmm::PrefetchRange<true>(pf, lo, hi);
  qmm::PrefetchRange<false>(pf, lo, hi);
}

// Blocks of 32, one tile for NT tokens (nr of its rows to out).
template <int NT, class Blocks32>
void KernelBlocks32T(const Blocks32& t, const Fmt& f, int cols, const Act& a, int tok0, float* out,
                     int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_step) {
  const int nsb = cols / 32;
  const TokenRows<NT> x(a, tok0, cols, nsb, nsb);
  const auto& [xq, dx, bs] = x;
  __m512 acc[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < nsb; ++b) {
    // (A one-token pass (NT 1 from token 0): the next tile into L1, as the direct kernels do.
    // Measured on Q4_K tiles, 8192x2048 from DRAM, 2 threads: 0.158 ms against 0.275 into L2.
    // Not for a last token after a group of 4 or 8: there it cost a 5-token pass, 0.44B Q8_0,
    // 27 ms against 21.5 into L2.)
    if (pf != nullptr) PrefetchBlock(NT == 1 && tok0 == 0, pf, b * pf_step, (b + 1) * pf_step);
    __m512i s[kChains<NT>][NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
#pragma GCC unroll 4
      for (int c = 0; c < kChains<NT>; ++c) s[c][j] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i wv = t.Levels(b, k);
      auto& sk = s[k % kChains<NT>];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        sk[j] = _mm512_dpbusd_epi32(sk[j], wv, _mm512_set1_epi32(Load32(xq[j] + b * 32 + 4 * k)));
      }
    }
    JoinChains<NT>(s);
    const __m512 dv = t.Scales(b);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m512i i = _mm512_sub_epi32(s[0][j], _mm512_set1_epi32(f.offset * bs[j][b]));
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

// K-quant super-blocks of groups of G columns (f.g), one tile for NT tokens. (G a template
// argument so that the group's dpbusd loop unrolls: rolled, GCC rotated the NT accumulators
// through register copies, one per dpbusd.)
template <int NT, int G, class KTile>
void KernelSuperBlocksT(const KTile& t, const Fmt& f, int cols, const Act& a, int tok0, float* out,
                        int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_step) {
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
    // (A one-token pass: into L1, as in KernelBlocks32T.)
    if (pf != nullptr) PrefetchBlock(NT == 1 && tok0 == 0, pf, b * pf_step, (b + 1) * pf_step);
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
      __m512i s[kChains<NT>][NT];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
#pragma GCC unroll 4
        for (int c = 0; c < kChains<NT>; ++c) s[c][j] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int k = 0; k < kpg; ++k) {
        const __m512i wv = t.Levels(g, k);
        auto& sk = s[k % kChains<NT>];
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j) {
          sk[j] = _mm512_dpbusd_epi32(sk[j], wv, _mm512_set1_epi32(Load32(xq[j] + g * G + 4 * k)));
        }
      }
      JoinChains<NT>(s);
      const __m512i scv = t.Sc(g);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        i1[j] = _mm512_add_epi32(i1[j], _mm512_mullo_epi32(scv, s[0][j]));
      }
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
    t[i] =
        op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane L: element j = v[4i + j] over lane L
    const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] =
        op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
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

}  // namespace

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

namespace {

// Two full tiles (rows r0 .. r0 + 31) for NT tokens, blocks of 32 only: each token's
// broadcast activation dword serves both tiles and each weight vector all NT tokens, so loads
// stay under the dpbusd rate (one tile x 8 tokens needs more than one load per dpbusd). Each
// lane's operations are KernelBlocks32T's, so the bits are the same. out: row r0 of token tok0.
template <int NT, class Blocks32>
void KernelAvx512Pair(const Blocks32& t0, const Blocks32& t1, const Fmt& f, int cols, const Act& a,
                      int tok0, float* out, int64_t out_stride, const uint8_t* pf,
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
    __m512i s0[kChains<NT>][NT], s1[kChains<NT>][NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
#pragma GCC unroll 4
      for (int c = 0; c < kChains<NT>; ++c) s0[c][j] = s1[c][j] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i w0 = t0.Levels(b, k), w1 = t1.Levels(b, k);
      auto &s0k = s0[k % kChains<NT>], &s1k = s1[k % kChains<NT>];
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const __m512i xv = _mm512_set1_epi32(Load32(xq + j * cols + b * 32 + 4 * k));
        s0k[j] = _mm512_dpbusd_epi32(s0k[j], w0, xv);
        s1k[j] = _mm512_dpbusd_epi32(s1k[j], w1, xv);
      }
    }
    JoinChains<NT>(s0);
    JoinChains<NT>(s1);
    const __m512 d0 = t0.Scales(b), d1 = t1.Scales(b);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m512i o = _mm512_set1_epi32(f.offset * bs[j * nsb + b]);
      const __m512 x = _mm512_set1_ps(dx[j * nsb + b]);
      const __m512 dd0 = _mm512_mul_ps(d0, x), dd1 = _mm512_mul_ps(d1, x);
      const __m512 f0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(s0[0][j], o));
      const __m512 f1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(s1[0][j], o));
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

// Two full tiles of blocks of 32 for every token: KernelAvx512Pair on 4 tokens at a time, then
// on the last 1-3 together. pf / pf_bytes: the rows after both tiles, prefetched meanwhile.
template <class Blocks32>
void KernelAvx512Pairs(const Blocks32& t0, const Blocks32& t1, const Fmt& f, int cols, const Act& a,
                       int n_tok, float* out, int64_t out_stride, const uint8_t* pf,
                       int64_t pf_bytes) {
  const GroupPrefetch gp(pf, pf_bytes, n_tok / 4 + (n_tok % 4 != 0), cols / 32);
  int tok = 0, g = 0;
  for (; tok + 4 <= n_tok; tok += 4, ++g) {
    KernelAvx512Pair<4>(t0, t1, f, cols, a, tok, out, out_stride, gp.At(g), gp.step);
  }
  switch (n_tok - tok) {  // the last 1-3 tokens in one group
    case 3:
      KernelAvx512Pair<3>(t0, t1, f, cols, a, tok, out, out_stride, gp.At(g), gp.step);
      break;
    case 2:
      KernelAvx512Pair<2>(t0, t1, f, cols, a, tok, out, out_stride, gp.At(g), gp.step);
      break;
    case 1:
      KernelAvx512Pair<1>(t0, t1, f, cols, a, tok, out, out_stride, gp.At(g), gp.step);
      break;
  }
}

// One tile for every token; pf / pf_bytes: the next tile's rows, prefetched meanwhile. 8 tokens
// share each weight vector load and keep 8 independent dpbusd chains in flight.
template <class Kernel>
void RunTokenGroups(int n_tok, int nsb, const uint8_t* pf, int64_t pf_bytes, Kernel kernel) {
  const GroupPrefetch gp(pf, pf_bytes, n_tok / 8 + n_tok % 8 / 4 + (n_tok % 4 != 0), nsb);
  int tok = 0, g = 0;
  auto run = [&]<int NT>() {
    kernel.template operator()<NT>(tok, gp.At(g++), gp.step);
    tok += NT;
  };
  while (tok + 8 <= n_tok) run.template operator()<8>();
  while (tok + 4 <= n_tok) run.template operator()<4>();
  // The last 1-3 tokens in one group: one tile read for them all.
  switch (n_tok - tok) {
    case 3:
      run.template operator()<3>();
      break;
    case 2:
      run.template operator()<2>();
      break;
    case 1:
      run.template operator()<1>();
      break;
  }
}

template <class Blocks32>
void KernelBlocks32(const Blocks32& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                    int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_bytes) {
  RunTokenGroups(n_tok, cols / 32, pf, pf_bytes,
                 [&]<int NT>(int tok, const uint8_t* p, int64_t step) {
                   KernelBlocks32T<NT>(t, f, cols, a, tok, out, out_stride, nr, p, step);
                 });
}

}  // namespace

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

// KernelAvx512Pairs on two unpacked tiles (PackTileAvx512's).
void KernelAvx512Pairs(const Tile& t0, const Tile& t1, const Fmt& f, int cols, const Act& a,
                       int n_tok, float* out, int64_t out_stride, const uint8_t* pf,
                       int64_t pf_bytes) {
  KernelAvx512Pairs(OfTile(t0), OfTile(t1), f, cols, a, n_tok, out, out_stride, pf, pf_bytes);
}

namespace {

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

}  // namespace

// Tiles [tile0, tile1) of a kTiles matrix for every token, read in place (no transpose, no
// copy: the layout is the kernels' own), or (!in_place: Q4_K, Q4_0, Q5_0 for many tokens)
// unpacked once per pass; pairs: two tiles at a time (blocks of 32). follow: as RunTiles'.
void RunTiled(const WeightMatrix& wm, const Fmt& f, const Act& a, int n_tok, float* out,
              int64_t tile0, int64_t tile1, int64_t follow, bool in_place, bool pairs) {
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
      if (!in_place) {
        // Many tokens: the nibbles and byte scales once into a plain tile (sequential work,
        // no transposes), then the kernel without per-token-group unpacking.
        UnpackQ4KTile(v, cols, &unpacked);
        KernelAvx512(unpacked, f, cols, a, n_tok, out + r0, wm.rows, nr, ahead(ti), tb);
        continue;
      }
      RunTokenGroups(
          n_tok, cols / 256, ahead(ti), tb, [&]<int NT>(int tok, const uint8_t* p, int64_t step) {
            KernelSuperBlocksT<NT, 32>(v, f, cols, a, tok, out + r0, wm.rows, nr, p, step);
          });
    }
    return;
  }
  // Blocks of 32: view(t, slot) is tile t's view (slot 0 or 1: the two tiles of a pair).
  auto blocks32 = [&](auto view) {
    for (int64_t ti = tile0; ti < tile1; ++ti) {
      const int64_t r0 = ti * 16;
      if (pairs && ti + 1 < tile1 && r0 + 32 <= wm.rows) {
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
  if (in_place) {
    return blocks32([&](int64_t t, int) { return Q45TileView{base + t * tb, block_bytes}; });
  }
  thread_local Tile unpacked[2];
  blocks32([&](int64_t t, int slot) {
    UnpackQ45Tile(Q45TileView{base + t * tb, block_bytes}, cols, &unpacked[slot]);
    return OfTile(unpacked[slot]);
  });
}

#pragma GCC pop_options

}  // namespace goose::qmm
