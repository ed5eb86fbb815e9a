// The load-time layout of quantized weights (WeightLayout::kTiles, qmatmul.h): the AVX-512
// kernel's 16-row tiles, written once by RepackTiles (16 rows transposed at once on AVX-512,
// row by row otherwise: the same bytes) and read back a row at a time by TiledRow.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/qmatmul.h"
#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/check.h"

// GCC 12 flags the AVX-512 intrinsics' _mm512_undefined_* pass-through operands as "maybe
// uninitialized" wherever they inline (false positives from its own headers; the transposes
// trigger them).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose {

namespace {
using qmm::kQ4_0TileBlockBytes;
using qmm::kQ4KDmin;
using qmm::kQ4KLevels;
using qmm::kQ4KMin;
using qmm::kQ4KSc;
using qmm::kQ4KTileSbBytes;
using qmm::kQ5_0TileBlockBytes;
using qmm::Q8LevelsToLanes;
using qmm::Q8ScaleBytes;
using qmm::Q8TileBytes;
}  // namespace

bool HasTiles(DType t) { return GetDTypeSupport(t).tiles; }

int64_t TileBytes(DType t, int64_t cols) {
  GOOSE_CHECK(HasTiles(t));
  switch (t) {
    case DType::kQ8_0:
      return Q8TileBytes(cols);
    case DType::kQ4_K:
      return kQ4KTileSbBytes * (cols / 256);
    case DType::kQ4_0:
      return kQ4_0TileBlockBytes * (cols / 32);
    default:
      return kQ5_0TileBlockBytes * (cols / 32);
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

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")

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
      _mm_storel_epi64(reinterpret_cast<__m128i*>(t + 288 + 8 * k), _mm_packus_epi16(pairs, pairs));
    }
  }
}

#pragma GCC pop_options

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
        PackQ45TileAvx512(src, rb, static_cast<int>(w.cols / 32), w.dtype == DType::kQ5_0, tile);
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

}  // namespace goose
