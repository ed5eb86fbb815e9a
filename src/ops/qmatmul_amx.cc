// QMatMul's AMX path: the integer sums of qmatmul.h from AMX tile multiplies (tdpbssd /
// tdpbusd), then the float part with the operations qmatmul.h defines, element by element.
//
// Why it gives the other kernels' bits: the integers S (per group), I1 and I2 are exact in any
// order, and each (row, token) result then goes through exactly
//   acc = acc + (d * dx) * float(i)          (blocks of 32)
//   acc = acc + (d * dx) * float(I1); acc = acc - (dmin * dx) * float(I2)   (K-quants)
// in increasing block order. Only the lane layout differs from the VNNI kernels: C[row][token]
// comes out of the tile with tokens in lanes, so one vector holds one weight row's 16 tokens.
//
// Operands: A = 16 weight rows x K bytes, row-major (Q8_0's signed levels copied straight from
// its blocks; the other formats unpacked to unsigned levels), B = 16 tokens' int8 activations
// in the VNNI layout [K / 4][16 tokens][4] (PackAmxAct, once per MatMul), K = the format's
// group (32, or 16 for Q6_K). Tiles 0-5 take groups of 32 in two sets; for blocks of 32 the
// multiplies of the next two blocks are issued before the float code of these two runs. Tiles
// 6-7 take Q6_K's groups of 16. While a tile of short rows computes, the next tile's rows are
// prefetched in slices, so their DRAM reads overlap the arithmetic.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/check.h"

#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose::qmm {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")

namespace {

// r[i] = 16 dwords of row i -> r[k] = dword k of rows 0..15.
inline __attribute__((always_inline)) void Transpose16x16(__m512i* r) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {  // per 128-bit lane: dword j of rows i..i+3
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4q + j], 128-bit lane L: dword 4L + j of rows 4q..4q+3.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);      // lanes 0, 2 of rows 0-7
    t[4 + j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xDD);  // lanes 1, 3
    t[8 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xDD);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);            // dword j
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xDD);        // dword 8 + j
    r[4 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);   // dword 4 + j
    r[12 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xDD);  // dword 12 + j
  }
}

}  // namespace

void PackAmxAct(const Act& a, const Fmt& f, int cols, int n_tok, AmxAct* out) {
  const int nsb = cols / f.sb, ng = cols / f.g, gpb = f.sb / f.g;
  const int n_chunks = (n_tok + 15) / 16;
  out->n_tok = n_tok;
  out->n_chunks = n_chunks;
  out->xb.resize(static_cast<size_t>(n_chunks) * cols * 16);
  out->dx.resize(static_cast<size_t>(n_chunks) * nsb * 16);
  out->obs.resize(f.k ? 0 : static_cast<size_t>(n_chunks) * nsb * 16);
  out->bsp.resize(f.k ? static_cast<size_t>(n_chunks) * nsb * (gpb / 2) * 16 : 0);
  for (int c = 0; c < n_chunks; ++c) {
    // Lanes past the last token repeat it: only their own (discarded) results depend on them.
    const int8_t* q[16];
    for (int lane = 0; lane < 16; ++lane) {
      q[lane] = a.q.data() + static_cast<size_t>(std::min(16 * c + lane, n_tok - 1)) * cols;
    }
    // Column j's 4-byte group of token `lane` -> xb[j / 4][lane]: 64 columns per transpose.
    int8_t* xb = out->xb.data() + static_cast<size_t>(c) * cols * 16;
    int j = 0;
    for (; j + 64 <= cols; j += 64) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int lane = 0; lane < 16; ++lane) r[lane] = _mm512_loadu_si512(q[lane] + j);
      Transpose16x16(r);
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) _mm512_storeu_si512(xb + (j + 4 * k) * 16, r[k]);
    }
    for (; j < cols; j += 4) {
      for (int lane = 0; lane < 16; ++lane) std::memcpy(xb + j * 16 + 4 * lane, q[lane] + j, 4);
    }
    for (int lane = 0; lane < 16; ++lane) {
      const size_t t = std::min(16 * c + lane, n_tok - 1);
      const float* dx = a.dx.data() + t * nsb;
      const int32_t* bs = a.bs.data() + t * ng;
      for (int b = 0; b < nsb; ++b) {
        const size_t cb = static_cast<size_t>(c) * nsb + b;
        out->dx[cb * 16 + lane] = dx[b];
        if (!f.k) {
          // Q8_0's tiles multiply signed levels (S - 128 * B directly): no offset term.
          out->obs[cb * 16 + lane] = f.offset == 128 ? 0 : f.offset * bs[b];
          continue;
        }
        for (int p = 0; p < gpb / 2; ++p) {
          const uint32_t lo = static_cast<uint16_t>(bs[b * gpb + 2 * p]);
          const uint32_t hi = static_cast<uint16_t>(bs[b * gpb + 2 * p + 1]);
          out->bsp[(cb * (gpb / 2) + p) * 16 + lane] = static_cast<int32_t>(lo | hi << 16);
        }
      }
    }
  }
}

void WeightTile::Resize(const Fmt& f, int cols, bool levels) {
  q.resize(levels ? static_cast<size_t>(16) * cols : 0);
  d.resize(static_cast<size_t>(cols / f.sb) * 16);
  dmin.resize(d.size());
  sc.resize(static_cast<size_t>(cols / f.g) * 16);
  mnp.resize(static_cast<size_t>(cols / f.sb) * (f.sb / f.g / 2) * 16);
}

namespace {

// 32 levels from 16 packed bytes: low nibbles = levels 0..15, high nibbles = 16..31.
inline __m256i Nibbles32(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i nib = _mm_set1_epi8(0x0F);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, nib)),
                                 _mm_and_si128(_mm_srli_epi16(v, 4), nib), 1);
}

}  // namespace

// The 16 rows at src as A operands: u8 levels (UnpackRow's layout, qmatmul_scalar.cc) to
// q + r * cols and per-row scales to [.][16] + r. Scales of all 16 rows are unpacked at once.
void UnpackTile(DType t, const uint8_t* src, int64_t rb, int cols, WeightTile* w) {
  const __m512i rows = RowOffsets(rb);
  const __m256i nib = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ5_0: {
      const bool five = t == DType::kQ5_0;
      const int bb = five ? 22 : 18;
      for (int b = 0; b < cols / 32; ++b) {
        _mm512_storeu_ps(&w->d[b * 16], GatherF16x16(src + b * bb, rows));
      }
      for (int r = 0; r < 16; ++r) {
        const uint8_t* row = src + r * rb;
        uint8_t* lv = w->q.data() + static_cast<size_t>(r) * cols;
        for (int b = 0; b < cols / 32; ++b) {
          const uint8_t* blk = row + b * bb;
          __m256i y = Nibbles32(blk + (five ? 6 : 2));
          if (five) {
            uint32_t qh;  // bit j: bit 4 of level j
            std::memcpy(&qh, blk + 2, 4);
            y = _mm256_or_si256(y, _mm256_maskz_mov_epi8(qh, bit4));
          }
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(lv + b * 32), y);
        }
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const int bb = five ? 176 : 144;
      const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15);
      const __m512i m3 = _mm512_set1_epi32(3);
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * bb;
        __m512 dv, mv;
        __m512i s0, s1, s2;
        Q4KHeads(blk, rb, &dv, &mv, &s0, &s1, &s2);  // (Q5_K's first 16 bytes are Q4_K's)
        _mm512_storeu_ps(&w->d[b * 16], dv);
        _mm512_storeu_ps(&w->dmin[b * 16], mv);
        // GetScaleMinK4 for 16 rows at once.
        __m512i mn[8];
        for (int j = 0; j < 4; ++j) {
          const __m512i b0 = _mm512_srli_epi32(s0, 8 * j), b1 = _mm512_srli_epi32(s1, 8 * j);
          const __m512i b2 = _mm512_srli_epi32(s2, 8 * j);
          const __m512i hs = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b0, 6), m3), 4);
          const __m512i hm = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b1, 6), m3), 4);
          _mm512_storeu_si512(&w->sc[(b * 8 + j) * 16], _mm512_and_si512(b0, m63));
          _mm512_storeu_si512(&w->sc[(b * 8 + 4 + j) * 16],
                              _mm512_or_si512(_mm512_and_si512(b2, m15), hs));
          mn[j] = _mm512_and_si512(b1, m63);
          mn[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(b2, 4), m15), hm);
        }
        for (int p = 0; p < 4; ++p) {
          _mm512_storeu_si512(&w->mnp[(b * 4 + p) * 16],
                              _mm512_or_si512(mn[2 * p], _mm512_slli_epi32(mn[2 * p + 1], 16)));
        }
      }
      for (int r = 0; r < 16; ++r) {
        const uint8_t* row = src + r * rb;
        uint8_t* lv = w->q.data() + static_cast<size_t>(r) * cols;
        for (int b = 0; b < cols / 256; ++b) {
          const uint8_t* blk = row + b * bb;
          const uint8_t* qs = blk + (five ? 48 : 16);
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
          uint8_t* o = lv + b * 256;
          for (int j = 0; j < 4; ++j) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
            __m256i lo = _mm256_and_si256(v, nib);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
            if (five) {  // bit 2j of qh[l] -> level 64j + l, bit 2j + 1 -> 64j + 32 + l
              const __mmask32 ml = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * j))));
              const __mmask32 mh =
                  _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * j + 1))));
              lo = _mm256_or_si256(lo, _mm256_maskz_mov_epi8(ml, bit4));
              hi = _mm256_or_si256(hi, _mm256_maskz_mov_epi8(mh, bit4));
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * j), lo);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * j + 32), hi);
          }
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const __m512i m16 = _mm512_set1_epi32(0xFFFF);
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * 210;
        const __m512 d = LoadF16x16(blk + 208, rb);  // (a gather would read past the block)
        _mm512_storeu_ps(&w->d[b * 16], d);
        _mm512_storeu_ps(&w->dmin[b * 16], d);
        __m512i sc[16];          // int8 scales, sign-extended
        __m512i scale_words[4];  // the 16 int8 scales of the 16 rows, 4 per dword
        Transpose16x4(blk + 192, rb, scale_words);
        for (int k = 0; k < 4; ++k) {
          const __m512i v = scale_words[k];
          for (int m = 0; m < 4; ++m) {
            sc[4 * k + m] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * m), 24);
            _mm512_storeu_si512(&w->sc[(b * 16 + 4 * k + m) * 16], sc[4 * k + m]);
          }
        }
        for (int p = 0; p < 8; ++p) {  // m = 32 * sc as int16 pairs
          _mm512_storeu_si512(
              &w->mnp[(b * 8 + p) * 16],
              _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(sc[2 * p], 5), m16),
                              _mm512_slli_epi32(sc[2 * p + 1], 21)));
        }
      }
      const __m256i m3 = _mm256_set1_epi8(3);
      for (int r = 0; r < 16; ++r) {
        const uint8_t* row = src + r * rb;
        uint8_t* lv = w->q.data() + static_cast<size_t>(r) * cols;
        for (int b = 0; b < cols / 256; ++b) {
          const uint8_t* blk = row + b * 210;
          for (int hf = 0; hf < 2; ++hf) {
            auto ld = [](const uint8_t* p) {
              return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
            };
            const __m256i qa = ld(blk + 64 * hf), qb = ld(blk + 64 * hf + 32);
            const __m256i h = ld(blk + 128 + 32 * hf);
            // 2 high bits (h >> s) & 3 into bits 4-5 of each level byte.
            auto high = [&](int s) {
              return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, s), m3), 4);
            };
            uint8_t* o = lv + b * 256 + 128 * hf;
            auto st = [&](int off, __m256i v) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + off), v);
            };
            st(0, _mm256_or_si256(_mm256_and_si256(qa, nib), high(0)));
            st(32, _mm256_or_si256(_mm256_and_si256(qb, nib), high(2)));
            st(64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), nib), high(4)));
            st(96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), nib), high(6)));
          }
        }
      }
      return;
    }
    default:
      GOOSE_CHECK(false && "AmxTile: not an int-dot dtype");
  }
}

#pragma GCC pop_options

// ---- AMX ----
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,amx-tile,amx-int8")

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: 0 / 3 C (16 x 16 int32), 1 / 4 A (16 rows x 32 bytes), 2 / 5 B (8 x 64 bytes);
// 6 A (16 x 16 bytes) and 7 B (4 x 64 bytes) for groups of 16.
void ConfigureTiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig c;
  for (int t : {0, 3}) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t : {1, 4}) c.rows[t] = 16, c.colsb[t] = 32;
  for (int t : {2, 5}) c.rows[t] = 8, c.colsb[t] = 64;
  c.rows[6] = 16, c.colsb[6] = 16;
  c.rows[7] = 4, c.colsb[7] = 64;
  _tile_loadconfig(&c);
  configured = true;
}

// Stores C tile `t` to the 16 x 16 int32 block at `c`. Unlike _tile_stored (whose asm clobbers
// all memory, so the float accumulators would be spilled around every store) the asm names the
// exact memory it writes.
#define GOOSE_TILE_STORE(t, c)                                   \
  __asm__ volatile("tilestored %%tmm" #t ", (%1,%2,1)"           \
                   : "=m"(*reinterpret_cast<int32_t(*)[256]>(c)) \
                   : "r"(c), "r"(64L))

// One group's integer dot products into a C tile, in two steps so that the multiply of the
// next groups overlaps the float code of the current ones: Issue zeroes C, loads A (16 weight
// rows) and B (16 tokens) and multiplies; Store writes c[row][token]. Tile set 0 (tiles 0-2),
// set 1 (3-5) or set 2 (0, 6, 7: groups of 16). The tile macros are inline asm that names tile
// numbers literally, hence one branch per set. (Tile loads read memory the asm does not
// declare: the buffers they read are written before a compiler barrier, or before the MatMul.)
template <int kSet, bool kSigned>
inline void TileIssue(const uint8_t* a, int64_t a_stride, const int8_t* b) {
  if constexpr (kSet == 0) {
    _tile_zero(0);
    _tile_loadd(1, a, a_stride);
    _tile_loadd(2, b, 64);
    if constexpr (kSigned)
      _tile_dpbssd(0, 1, 2);
    else
      _tile_dpbusd(0, 1, 2);
  } else if constexpr (kSet == 1) {
    _tile_zero(3);
    _tile_loadd(4, a, a_stride);
    _tile_loadd(5, b, 64);
    if constexpr (kSigned)
      _tile_dpbssd(3, 4, 5);
    else
      _tile_dpbusd(3, 4, 5);
  } else {
    _tile_zero(0);
    _tile_loadd(6, a, a_stride);
    _tile_loadd(7, b, 64);
    if constexpr (kSigned)
      _tile_dpbssd(0, 6, 7);
    else
      _tile_dpbusd(0, 6, 7);
  }
}

template <int kSet>
inline void TileStore(int32_t* c) {
  if constexpr (kSet == 1) {
    GOOSE_TILE_STORE(3, c);
  } else {
    GOOSE_TILE_STORE(0, c);
  }
}

template <int kSet, bool kSigned>
inline void TileDot(const uint8_t* a, int64_t a_stride, const int8_t* b, int32_t* c) {
  TileIssue<kSet, kSigned>(a, a_stride, b);
  TileStore<kSet>(c);
}

// The tile this thread computes next (RunTiles passes one only for short rows), prefetched into
// L2 a slice per block while this tile computes, so that its DRAM reads overlap the arithmetic;
// the slices are spread over all the tile's 16-token chunks (this is chunk `part` of `parts`).
// Null next: nothing ahead.
struct Prefetch {
  const uint8_t* next = nullptr;
  int64_t bytes = 0;  // of the tile
  int part = 0, parts = 1;
  // The share of blocks [b0, b1) of this chunk's n_blocks.
  void Slice(int b0, int b1, int n_blocks) const {
    if (next == nullptr) return;
    const int64_t n = static_cast<int64_t>(parts) * n_blocks;
    const int64_t at = static_cast<int64_t>(part) * n_blocks;
    PrefetchRange<false>(next, bytes * (at + b0) / n, bytes * (at + b1) / n);
  }
};

// Blocks of 32 (Q8_0, Q4_0, Q5_0) for one 16-token chunk: res[r] = row r's 16 tokens.
// kSigned: Q8_0's signed levels (no offset term).
template <bool kSigned>
void ChunkBlocks32(WeightTile& w, const uint8_t* a0, int64_t a_stride, int64_t a_step, int nsb,
                   const AmxAct& x, int chunk, const Prefetch& pf, const uint8_t* scales,
                   float (*res)[16]) {
  alignas(64) int32_t c[2][256];
  // (Every loop over acc is fully unrolled, so the 16 accumulators stay in registers.)
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  const int8_t* xb = x.xb.data() + static_cast<size_t>(chunk) * nsb * 512;
  const float* dx = x.dx.data() + static_cast<size_t>(chunk) * nsb * 16;
  const int32_t* obs = x.obs.data() + static_cast<size_t>(chunk) * nsb * 16;
  float* dv = w.d.data();
  const __m512i rows = RowOffsets(a_stride);
  // Blocks b, b + 1 on tile sets 0 and 1; the multiplies of b + 2, b + 3 are issued before
  // the float code of b, b + 1 runs.
  auto issue = [&](int b) {
    TileIssue<0, kSigned>(a0 + b * a_step, a_stride, xb + b * 512);
    if (b + 1 < nsb) TileIssue<1, kSigned>(a0 + (b + 1) * a_step, a_stride, xb + (b + 1) * 512);
  };
  issue(0);
  for (int b = 0; b < nsb; b += 2) {
    const int nb = std::min(2, nsb - b);
    pf.Slice(b, b + nb, nsb);
    TileStore<0>(c[0]);
    if (nb == 2) TileStore<1>(c[1]);
    if (b + 2 < nsb) issue(b + 2);
    for (int h = 0; h < nb; ++h) {
      if (scales != nullptr) {  // the blocks' f16 scales, read here rather than all up front
        _mm512_storeu_ps(dv + (b + h) * 16, GatherF16x16(scales + (b + h) * a_step, rows));
      }
      const __m512 dxv = _mm512_loadu_ps(dx + (b + h) * 16);
      const __m512i ov = kSigned ? _mm512_setzero_si512() : _mm512_loadu_si512(obs + (b + h) * 16);
      const float* d = dv + (b + h) * 16;
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        __m512i i = _mm512_load_si512(c[h] + r * 16);
        if (!kSigned) i = _mm512_sub_epi32(i, ov);
        const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(d[r]), dxv);
        acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(i)));
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) _mm512_store_ps(res[r], acc[r]);
}

// K-quant super-blocks (groups of kG = 32 or 16) for one 16-token chunk.
template <int kG>
void ChunkSuperBlocks(const WeightTile& w, int cols, const AmxAct& x, int chunk, const Prefetch& pf,
                      float (*res)[16]) {
  // (Every loop over acc is fully unrolled, so the 16 accumulators stay in registers.)
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int kGpb = 256 / kG, kPairs = kGpb / 2;
  const int nsb = cols / 256;
  alignas(64) int32_t c[kGpb][256];
  const int8_t* xb = x.xb.data() + static_cast<size_t>(chunk) * cols * 16;
  const float* dx = x.dx.data() + static_cast<size_t>(chunk) * nsb * 16;
  const int32_t* bsp = x.bsp.data() + static_cast<size_t>(chunk) * nsb * kPairs * 16;
  for (int b = 0; b < nsb; ++b) {
    pf.Slice(b, b + 1, nsb);
    const uint8_t* a = w.q.data() + b * 256;
    const int8_t* xg = xb + static_cast<size_t>(b) * 256 * 16;
    if constexpr (kG == 32) {
      for (int g = 0; g < kGpb; g += 2) {
        TileDot<0, false>(a + g * kG, cols, xg + g * kG * 16, c[g]);
        TileDot<1, false>(a + (g + 1) * kG, cols, xg + (g + 1) * kG * 16, c[g + 1]);
      }
    } else {
      for (int g = 0; g < kGpb; ++g) TileDot<2, false>(a + g * kG, cols, xg + g * kG * 16, c[g]);
    }
    const __m512 dxv = _mm512_loadu_ps(dx + b * 16);
    __m512i bp[kPairs];
    for (int p = 0; p < kPairs; ++p) bp[p] = _mm512_loadu_si512(bsp + (b * kPairs + p) * 16);
    const int32_t* sc = w.sc.data() + static_cast<size_t>(b) * kGpb * 16;
    const int32_t* mnp = w.mnp.data() + static_cast<size_t>(b) * kPairs * 16;
#pragma GCC unroll 2
    for (int r = 0; r < 16; ++r) {
      __m512i i1 = _mm512_setzero_si512(), i2 = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int g = 0; g < kGpb; ++g) {
        const __m512i s = _mm512_load_si512(c[g] + r * 16);
        i1 = _mm512_add_epi32(i1, _mm512_mullo_epi32(_mm512_set1_epi32(sc[g * 16 + r]), s));
      }
#pragma GCC unroll 8
      for (int p = 0; p < kPairs; ++p) {
        i2 = _mm512_add_epi32(i2, _mm512_madd_epi16(_mm512_set1_epi32(mnp[p * 16 + r]), bp[p]));
      }
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(w.d[b * 16 + r]), dxv);
      const __m512 dm = _mm512_mul_ps(_mm512_set1_ps(w.dmin[b * 16 + r]), dxv);
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(i1)));
      acc[r] = _mm512_sub_ps(acc[r], _mm512_mul_ps(dm, _mm512_cvtepi32_ps(i2)));
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) _mm512_store_ps(res[r], acc[r]);
}

}  // namespace

void AmxTile(const WeightMatrix& wm, const Fmt& f, const AmxAct& x, int64_t r0, const uint8_t* next,
             float* out) {
  GOOSE_CHECK(r0 >= 0 && r0 + 16 <= wm.rows);
  ConfigureTiles();
  const int cols = static_cast<int>(wm.cols);
  const int nsb = cols / f.sb;
  const int64_t rb = wm.row_bytes();
  const uint8_t* src = static_cast<const uint8_t*>(wm.data) + r0 * rb;
  thread_local WeightTile w;
  const bool q8 = wm.dtype == DType::kQ8_0;
  w.Resize(f, cols, !q8);
  if (!q8) UnpackTile(wm.dtype, src, rb, cols, &w);
  __asm__ volatile("" ::: "memory");  // tile loads are asm without a memory clobber

  for (int chunk = 0; chunk < x.n_chunks; ++chunk) {
    alignas(64) float res[16][16];
    const Prefetch pf{next, 16 * rb, chunk, x.n_chunks};
    if (q8) {
      // Chunk 0 gathers the scales as it goes (the first touch of each block's lines then
      // overlaps the tile multiplies in flight); later chunks reuse them.
      ChunkBlocks32<true>(w, src + 2, rb, 34, nsb, x, chunk, pf, chunk == 0 ? src : nullptr, res);
    } else if (!f.k) {
      ChunkBlocks32<false>(w, w.q.data(), cols, 32, nsb, x, chunk, pf, nullptr, res);
    } else if (f.g == 32) {
      ChunkSuperBlocks<32>(w, cols, x, chunk, pf, res);
    } else {
      ChunkSuperBlocks<16>(w, cols, x, chunk, pf, res);
    }
    // res[r][t] -> out[t][r0 + r]: one register transpose (16 gathers of a column each
    // measured slower: 256 loads per chunk against about 1800 for the whole of 896 columns).
    __m512i v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) v[r] = _mm512_load_si512(res[r]);
    Transpose16x16(v);
    const int n = std::min(16, x.n_tok - chunk * 16);
    for (int t = 0; t < n; ++t) {
      _mm512_storeu_si512(out + static_cast<int64_t>(chunk * 16 + t) * wm.rows + r0, v[t]);
    }
  }
}

#pragma GCC pop_options

}  // namespace goose::qmm
