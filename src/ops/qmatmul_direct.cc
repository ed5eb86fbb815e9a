// QMatMul's direct AVX-512 VNNI kernels: a few tokens times full 16-row tiles read straight from
// row-major blocks (no unpacked tile).
//
// For a few tokens (the dispatch table's limits, qmatmul.cc) a tile's unpack and transpose
// cost more than the dot products they serve, so full 16-row tiles are read straight from the
// blocks: one vector holds 32 bytes of two rows, vpdpbusd multiplies it with the token's bytes
// (broadcast to both halves), and Reduce8 folds 8 such vectors into one vector of 16 per-row
// integer sums *in row order* - the tile kernel's lane layout. Integer sums are exact in any
// order, and the float part below is the tile kernel's lane-wise code, so every row's result
// has the same bits.
#include <immintrin.h>

#include <cstring>

#include "ops/qmatmul_internal.h"

// GCC 12 flags the AVX-512 intrinsics' _mm512_undefined_* pass-through operands as "maybe
// uninitialized" wherever they inline (false positives from its own headers; the transposes
// trigger them).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose::qmm {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")

namespace {

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
  const __m512i u0 =
      _mm512_add_epi32(_mm512_unpacklo_epi64(t[0], t[1]), _mm512_unpackhi_epi64(t[0], t[1]));
  const __m512i u1 =
      _mm512_add_epi32(_mm512_unpacklo_epi64(t[2], t[3]), _mm512_unpackhi_epi64(t[2], t[3]));
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
  const __m512i t0 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
  const __m512i t1 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
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
      const __m512i xl =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq[j] + b * 32)));
      const __m512i xh = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq[j] + b * 32 + 16)));
      __m512i s[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        s[q] =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[q], xl), hi[q], xh);
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

}  // namespace

// The 16 rows at r0 (a full tile) for the few tokens the dispatch table gives them (qmatmul.cc:
// Q8_0, Q4_0, Q5_0, Q4_K, Q6_K); pf: the next rows, to prefetch meanwhile (or null).
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

#pragma GCC pop_options

}  // namespace goose::qmm
