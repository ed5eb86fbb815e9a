// QMatMul's AVX2 kernels (w = 8): 8-row tiles for batches, and direct kernels that read a few
// tokens' 8 rows straight from the blocks. Q8_0 levels (q + 128) exceed maddubs' int16
// headroom, so Q8_0 uses the signed form |w| x sign(x, w); the integers are the same.
#include <immintrin.h>

#include <cstring>

#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/fp16.h"

namespace goose::qmm {

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

}  // namespace

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

namespace {

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
  const __m256i spread =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
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
        const __m256i m =
            _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc[g])), 5);
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

}  // namespace

// The 8 rows at r0 (a full AVX2 tile) for the few tokens the dispatch table gives them
// (qmatmul.cc: Q8_0, Q4_0, Q5_0, Q4_K, Q6_K); pf: the next rows, to prefetch meanwhile (or null).
void RunDirectAvx2(const WeightMatrix& wm, int64_t r0, const Act& a, int n_tok, const uint8_t* pf,
                   float* out) {
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

#pragma GCC pop_options

}  // namespace goose::qmm
