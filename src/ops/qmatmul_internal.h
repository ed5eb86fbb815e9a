// Shared by the QMatMul kernels, one file per kernel family. Internal to ops.
//   qmatmul.cc         the dispatch: which kernel runs a tile (dtype x tokens x layout x ISA),
//                      the threads' split of the tiles, the activations' quantization
//   qmatmul_scalar.cc  the formats (Fmt), QuantizeAct, the row-by-row unpack (PackTile), the
//                      scalar kernel that defines the order, QDotReference
//   qmatmul_avx2.cc    AVX2: 8-row tiles; direct kernels for a few tokens
//   qmatmul_avx512.cc  AVX-512 VNNI: 16-row tiles unpacked per pass, pairs of tiles, tiles
//                      read in place (WeightLayout::kTiles); QuantizeActAvx512
//   qmatmul_direct.cc  AVX-512 VNNI: a few tokens straight from row-major blocks
//   qmatmul_layout.cc  the load-time tiles: HasTiles, TileBytes, RepackTiles, TiledRow
//   qmatmul_amx.cc     AMX tile multiplies for batches
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/ops.h"
#include "util/aligned.h"
#include "util/prefetch.h"

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

// In-register transposes for full 16-row tiles: IR vector k holds dword k of each of the 16
// rows. (Gathers would do the same in one instruction, but measure ~5x slower here.)
//
// 16 rows x 8 dwords (32 bytes at row_ptr + r * rb) -> out[0..7].
// (Where it is not inlined, as at -O1, GCC 12 flags its intrinsics' _mm512_undefined_*
// operands as maybe uninitialized: false positives, silenced here as in the kernel files.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
#pragma GCC diagnostic pop

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

#pragma GCC pop_options

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

// 4 activation bytes as one dword (vpdpbusd's broadcast operand).
inline int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Level sums g[0], g[1] as one dword of int16 pairs (vpdpwssd's operand); each fits int16.
inline int32_t PairI16(const int32_t* g) {
  return static_cast<int32_t>((static_cast<uint32_t>(g[0]) & 0xFFFF) |
                              (static_cast<uint32_t>(g[1]) << 16));
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

// A tile of W rows in lane-interleaved form (qmatmul_scalar.cc).
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

// ---- The load-time tiles' geometry (qmatmul.h, qmatmul_layout.cc). ----
// Bytes of a Q8_0 tile's scale part (qmatmul.h): 16 f16 per block, padded to 64; the level
// vectors start there.
inline int64_t Q8ScaleBytes(int64_t cols) { return (32 * (cols / 32) + 63) / 64 * 64; }
inline int64_t Q8TileBytes(int64_t cols) { return Q8ScaleBytes(cols) + 512 * (cols / 32); }
// A Q4_K tile's super-block (qmatmul.h): d, dmin, sc, m, then the level vectors.
constexpr int kQ4KTileSbBytes = 2368;
constexpr int kQ4KDmin = 32, kQ4KSc = 64, kQ4KMin = 192, kQ4KLevels = 320;
// A Q4_0 / Q5_0 tile's block of 32 columns (qmatmul.h): scales, nibbles (and bit-4 masks).
constexpr int kQ4_0TileBlockBytes = 288, kQ5_0TileBlockBytes = 352;

// ---- The kernels, by file (the dispatch, qmatmul.cc, picks one per tile). ----
// qmatmul_scalar.cc
void QuantizeAct(const float* x, int cols, const Fmt& f, int8_t* q, float* dx, int32_t* bs);
// Rows [r0, r0 + nr) of any matrix into t as a tile of w lanes, row by row (lanes past nr zero).
void PackTile(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, int w, RowIR* row, Tile* t);
void KernelScalar(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                  int64_t out_stride);
// qmatmul_avx2.cc
bool PackTileAvx2(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, Tile* t);
void KernelAvx2(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                int64_t out_stride, int nr);
void RunDirectAvx2(const WeightMatrix& wm, int64_t r0, const Act& a, int n_tok, const uint8_t* pf,
                   float* out);
// qmatmul_avx512.cc
void QuantizeActAvx512(const float* x, int cols, const Fmt& f, int8_t* q, float* dx, int32_t* bs);
bool PackTileAvx512(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, Tile* t, bool cached);
void KernelAvx512(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                  int64_t out_stride, int nr, const uint8_t* pf, int64_t pf_bytes);
void KernelAvx512Pairs(const Tile& t0, const Tile& t1, const Fmt& f, int cols, const Act& a,
                       int n_tok, float* out, int64_t out_stride, const uint8_t* pf,
                       int64_t pf_bytes);
void RunTiled(const WeightMatrix& wm, const Fmt& f, const Act& a, int n_tok, float* out,
              int64_t tile0, int64_t tile1, int64_t follow, bool in_place, bool pairs);
// qmatmul_direct.cc
void RunDirect(const WeightMatrix& wm, int64_t r0, const Act& a, int n_tok, const uint8_t* pf,
               float* out);

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

// One 16-row weight tile as row-major u8 levels (UnpackRow's, qmatmul_scalar.cc) plus the rows'
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
void AmxTile(const WeightMatrix& w, const Fmt& f, const AmxAct& a, int64_t r0, const uint8_t* next,
             float* out);

}  // namespace goose::qmm
