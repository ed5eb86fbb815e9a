// Quantized weights x int8-quantized activations (Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K), used by
// MatMul. Internal to ops; tests call it to compare kernel paths with the scalar reference.
//
// The numbers (identical on every CPU level, batch size and thread count):
// - Each token's activation row is quantized on its own (batch-invariant): per block of 32
//   (Q8_0/Q4_0 weights) or 256 (K-quants) a float scale dx = amax / 127 and int8 q =
//   roundf(x / dx), plus the exact integer sums of q per group (32, or 16 for Q6_K).
// - Integer dot products per group are exact, so any order/ISA gives the same integers.
// - The float part of a row has one fixed order, block by block in increasing column order:
//     Q8_0/Q4_0/Q5_0: acc = acc + (d * dx) * float(S - o * B)   (o = 128, 8, 16 on the
//     unsigned levels; S - o * B is the signed-level dot product)
//     K-quants:  acc = acc + (d * dx) * float(I1); acc = acc - (dmin * dx) * float(I2)
//   with I1 = sum_g sc_g * S_g, I2 = sum_g m_g * B_g (Q6_K: m_g = 32 * sc_g, dmin = d).
//   SIMD paths put one weight *row* per lane, so the per-row order is exactly the scalar one
//   (also the AVX-512 few-token kernels, which read rows directly and reduce the integer sums
//   into that lane layout before any float operation; the AMX path puts tokens in lanes and
//   applies the same operations to each element).
#pragma once

#include <cstdint>

#include "ops/cpu_features.h"
#include "ops/ops.h"

namespace goose {

// True for the dtypes QMatMul implements: GetDTypeSupport(t).int_dot (util/dtype.h).
bool IsIntDotType(DType t);

// The integer kernels, narrowest first; each gives the same bits. Which one computes a tile
// also depends on the dtype, the layout and the batch: the dispatch table in qmatmul.cc.
enum class IntKernel : int {
  kScalar = 0,      // one row at a time: the defining order
  kAvx2 = 1,        // AVX2 + FMA + F16C: 8-row tiles, direct kernels for a few tokens
  kAvx512Vnni = 2,  // AVX-512 F/BW/DQ/VL + VNNI: 16-row tiles, direct kernels, load-time tiles
  kAmx = 3,         // AMX-INT8 tile multiplies for batches, kAvx512Vnni's direct kernels below
};
constexpr IntKernel kMaxIntKernel = IntKernel::kAmx;
const char* IntKernelName(IntKernel kernel);  // "scalar", "avx2", "avx512-vnni", "amx"

// Which integer kernel a CPU level runs on a CPU with features f (a pure function; the level
// capped at CpuLevelFor(f)): kAmx at kAmx, kAvx512Vnni at kAvx512 with avx512vnni (without it,
// kAvx2), kAvx2 at kAvx2. The one-argument form uses this CPU's features.
IntKernel IntKernelFor(CpuLevel level, const CpuFeatures& f);
IntKernel IntKernelFor(CpuLevel level);

// out[t * w.rows + r] = row r of W . token t of x (the order above), using `kernel` (at most
// IntKernelFor(DetectCpuLevel())). x: [n_tokens, W.cols].
void QMatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool,
             IntKernel kernel);

// QMatMul of n_w <= kMaxMatMulShared matrices of one dtype and width on the same tokens (Q, K,
// V; gate, up): out[i] gets exactly QMatMul(*w[i], ...)'s bits, but the activations are
// quantized once and the threads share one run over all the matrices' tiles (no wait for
// stragglers in between).
void QMatMulShared(const WeightMatrix* const* w, int n_w, const float* x, int n_tokens,
                   float* const* out, ThreadPool* pool, IntKernel kernel);

// Tiles (WeightLayout::kTiles), for Q8_0, Q4_K, Q4_0 and Q5_0 (HasTiles: util/dtype.h's table):
// tile t (rows 16t .. 16t + 15) at t * TileBytes(dtype, cols) in the AVX-512 kernel's lane
// layout, read by that kernel without a transpose (the other kernels rebuild rows from them,
// TiledRow). The same size as the rows, give or take
// padding; rows past the last one are zero.
// - Q8_0: the rows' f16 scales [block][16] (padded to a multiple of 64 bytes), then per block
//   8 vectors of 64 bytes, vector k = levels 4k .. 4k+3 of each of the 16 rows as unsigned
//   bytes (q ^ 0x80).
// - Q4_K, per super-block (kQ4KTileSbBytes): f16 d [16], f16 dmin [16], the 6-bit scales
//   sc [8][16] and mins m [8][16] as bytes, then 32 vectors of 64 bytes, vector 8j + k = bytes
//   32j + 4k .. 32j + 4k + 3 of each row's qs (low nibbles: levels 4k .. 4k+3 of group 2j,
//   high nibbles: of group 2j + 1).
// - Q4_0 / Q5_0, per block of 32 columns (288 / 352 bytes): f16 d [16], 4 vectors of 64 bytes,
//   vector m = qs bytes 4m .. 4m+3 of each row (low nibbles: levels 4m .., high: 16 + 4m ..),
//   then for Q5_0 8 masks of 64 bits, mask k bit 4r + i = bit 4 of row r's level 4k + i.
bool HasTiles(DType t);
int64_t TileBytes(DType t, int64_t cols);
int64_t TiledBytes(DType t, int64_t rows, int64_t cols);
// Writes the tiles of a row-major matrix (HasTiles(w.dtype)) to out (TiledBytes bytes).
void RepackTiles(const WeightMatrix& w, uint8_t* out);
// Row r of a kTiles matrix as GGUF blocks (RowBytes(w.dtype, w.cols) bytes).
void TiledRow(const WeightMatrix& w, int64_t r, uint8_t* out);

// Reference for one row and one token, straight from the blocks (plain scalar code, no IR).
float QDotReference(DType t, const uint8_t* row, int64_t cols, const float* x);

}  // namespace goose
