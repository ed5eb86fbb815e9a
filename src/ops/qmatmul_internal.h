// Shared by the QMatMul kernels (qmatmul.cc: scalar, AVX2, AVX-512 VNNI; qmatmul_amx.cc: AMX).
// Internal to ops.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/cpu_features.h"
#include "ops/ops.h"
#include "util/aligned.h"

namespace goose::qmm {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,f16c")
// r * stride in lane r = 0..15: the byte offsets of 16 rows, for gathers.
inline __m512i RowOffsets(int64_t stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int32_t>(stride)));
}
// The f16 at p + offset[r] for r = 0..15 as floats, in one gather (cheaper than 16 inserts).
// Reads the 2 bytes after each f16 too (callers keep them inside the block).
inline __m512 GatherF16x16(const uint8_t* p, __m512i offsets) {
  const __m512i v = _mm512_i32gather_epi32(offsets, reinterpret_cast<const int*>(p), 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}
// 16 rows x 4 dwords (16 bytes at p + r * rb) -> out[0..3].
inline void Transpose16x4(const uint8_t* p, int64_t rb, __m512i* out) {
  __m512i z[4];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    auto ld = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + r * rb)); };
    __m512i v = _mm512_castsi128_si512(ld(i));
    v = _mm512_inserti32x4(v, ld(i + 4), 1);
    v = _mm512_inserti32x4(v, ld(i + 8), 2);
    z[i] = _mm512_inserti32x4(v, ld(i + 12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// 16 f16 values at p + r * rb -> floats.
// (Built in registers: 16 narrow stores then one wide load would stall store forwarding.)
inline __m512 LoadF16x16(const uint8_t* p, int64_t rb) {
  auto h = [&](int r) {
    uint16_t v;
    std::memcpy(&v, p + r * rb, 2);
    return static_cast<short>(v);
  };
  const __m256i v = _mm256_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7), h(8), h(9),
                                      h(10), h(11), h(12), h(13), h(14), h(15));
  return _mm512_cvtph_ps(v);
}

// The first 16 bytes of a Q4_K block in each of 16 rows (p + r * rb): d and dmin as floats,
// and the three dwords of packed scales and mins, row r in lane r. One transpose of the 16
// rows' 16 bytes (measured on Zen 5: 5 vpgatherdd cost about 105 cycles, this about 20).
inline void Q4KHeads(const uint8_t* p, int64_t rb, __m512* d, __m512* dmin, __m512i* s0,
                     __m512i* s1, __m512i* s2) {
  __m512i h[4];
  Transpose16x4(p, rb, h);
  *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
  *dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
  *s0 = h[1], *s1 = h[2], *s2 = h[3];
}

// GetScaleMinK4 for 16 rows at once: the 12 scale bytes of each row as dwords s0, s1, s2 (from
// Q4KHeads) -> the 6-bit scale sc[j] and min mn[j] of group j, one row per int32 lane.
inline void Q4KScalesMins(__m512i s0, __m512i s1, __m512i s2, __m512i* sc, __m512i* mn) {
  const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15);
  const __m512i m3 = _mm512_set1_epi32(3);
  for (int j = 0; j < 4; ++j) {
    const int sh = 8 * j;
    const __m512i b0 = _mm512_srli_epi32(s0, sh), b1 = _mm512_srli_epi32(s1, sh);
    const __m512i b2 = _mm512_srli_epi32(s2, sh);
    sc[j] = _mm512_and_si512(b0, m63);
    mn[j] = _mm512_and_si512(b1, m63);
    const __m512i hs = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b0, 6), m3), 4);
    const __m512i hm = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b1, 6), m3), 4);
    sc[4 + j] = _mm512_or_si512(_mm512_and_si512(b2, m15), hs);
    mn[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(b2, 4), m15), hm);
  }
}

#pragma GCC pop_options

// Prefetches the cache line at p into L2 (and L1 with kToL1). An asm statement, not
// _mm_prefetch: GCC 12 deleted the AMX path's whole prefetch loops as dead code (the object
// file had no prefetch instruction at all), which an asm volatile cannot be.
template <bool kToL1>
inline void PrefetchLine(const void* p) {
  if constexpr (kToL1) {
    __asm__ volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
  } else {
    __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
  }
}

// PrefetchLine over the lines of bytes [lo, hi) from p (lo rounded down to a line).
template <bool kToL1>
inline void PrefetchRange(const uint8_t* p, int64_t lo, int64_t hi) {
  for (int64_t o = lo & ~int64_t{63}; o < hi; o += 64) PrefetchLine<kToL1>(p + o);
}

// Weight rows up to this many bytes get the next tile prefetched while a tile computes; longer
// rows are left to the hardware streamer. Measured, Q8_0, 2 threads, weights from DRAM,
// prefetch against none: on Intel (Sapphire Rapids) 896 and 2048 columns 5-24% faster at 1, 4
// and 16 tokens, 4864 and 8192 columns 6-17% slower; on AMD (Zen 5) every length gains
// (4864 columns: 15% at 1 token, 30% at 4), so there is no limit.
inline int64_t MaxPrefetchRowBytes() {
  static const int64_t bytes = IsAmdCpu() ? INT64_MAX : 2304;
  return bytes;
}

// How a dtype's integer dot products are organised (qmatmul.h gives the formulas).
struct Fmt {
  int sb = 32;     // columns per scale block (activation block too)
  int g = 32;      // columns per integer group (sums of activation q kept per group)
  int offset = 0;  // blocks of 32: level offset subtracted (S - offset * B)
  bool k = false;  // K-quant formula
};
Fmt GetFmt(DType t);

// The batch's activations, each token quantized on its own.
struct Act {
  AlignedVector<int8_t> q;    // [n][cols]
  AlignedVector<float> dx;    // [n][cols / sb]
  AlignedVector<int32_t> bs;  // [n][cols / g]
};

// AMX path (qmatmul_amx.cc). The activations are re-laid once per MatMul for the tiles, then
// full 16-row weight tiles are computed for every token; results equal the other kernels' bits.
struct AmxAct {
  int n_tok = 0, n_chunks = 0;  // tokens, and 16-token chunks (the last one zero-padded)
  AlignedVector<int8_t> xb;     // [chunk][group][g / 4][16 tokens][4]: the tiles' B operands
  AlignedVector<float> dx;      // [chunk][block][16]
  AlignedVector<int32_t> obs;   // [chunk][block][16]: offset * B (blocks of 32 with an offset)
  AlignedVector<int32_t> bsp;   // K-quants: [chunk][block][pair][16]: int16 (B_2p, B_2p+1)
};
void PackAmxAct(const Act& a, const Fmt& f, int cols, int n_tok, AmxAct* out);

// One 16-row weight tile as row-major u8 levels (UnpackRow's, qmatmul.cc) plus the rows'
// scales, all 16 rows at once (AVX-512): the AMX path's A operands, and the AVX-512 kernel's
// source for the format it does not transpose straight from the blocks (Q5_K).
struct WeightTile {
  AlignedVector<uint8_t> q;      // [16][cols] u8 levels (formats other than Q8_0)
  AlignedVector<float> d, dmin;  // [block][16]
  AlignedVector<int32_t> sc;     // [group][16] (K-quants)
  AlignedVector<int32_t> mnp;    // [block][pair][16]: int16 (m_2p, m_2p+1) (K-quants)
  void Resize(const Fmt& f, int cols, bool levels);
};
// The 16 rows at src (rb bytes apart) of a dtype other than Q8_0, into w (Resize'd).
void UnpackTile(DType t, const uint8_t* src, int64_t rb, int cols, WeightTile* w);
// Rows [r0, r0 + 16) of W (all inside W) for every token of `a`: out[t * W.rows + r]. `next`:
// the 16-row tile this thread computes next (prefetched meanwhile), or null.
void AmxTile(const WeightMatrix& w, const Fmt& f, const AmxAct& a, int64_t r0,
             const uint8_t* next, float* out);

}  // namespace goose::qmm
