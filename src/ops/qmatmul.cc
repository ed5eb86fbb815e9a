// QMatMul's dispatch: which kernel computes each tile of W rows (the table below), the
// threads' split of the tiles, and the activations' quantization. qmatmul.h gives the fixed
// order that makes every path's bits the same; qmatmul_internal.h lists the kernel files.
//
// In short: weights stored as tiles (WeightLayout::kTiles: Q8_0, Q4_K, Q4_0 and Q5_0, made at
// load time on AVX-512 VNNI CPUs without AMX) are read without a transpose by every batch size.
// For row-major weights and a few tokens (decode) the unpack is most of the work, so full
// tiles are read straight from the blocks instead ("direct" kernels, AVX-512 and AVX2):
// integer row sums are folded into the tile kernel's lane layout, and the float code is the
// tile kernel's.
#include "ops/qmatmul.h"

#include <algorithm>
#include <atomic>

#include "ops/qmatmul_internal.h"
#include "util/check.h"

namespace goose {

namespace {

using qmm::Act;
using qmm::Fmt;
using qmm::GetFmt;
using qmm::KernelAvx2;
using qmm::KernelAvx512;
using qmm::KernelAvx512Pairs;
using qmm::KernelScalar;
using qmm::PackTile;
using qmm::PackTileAvx2;
using qmm::PackTileAvx512;
using qmm::QuantizeAct;
using qmm::QuantizeActAvx512;
using qmm::RowIR;
using qmm::RunDirect;
using qmm::RunDirectAvx2;
using qmm::RunTiled;
using qmm::Tile;

// ---- The dispatch table: which code computes a tile of W rows. ----
//
// By kernel (the ISA), weight layout and batch size n, for a full tile; the limits are per
// dtype (kIntPaths below). A partial last tile (rows % tile rows) is unpacked row by row
// (PackTile) for the kernel's tile code, AMX's for the AVX-512 one.
//
//   kernel       rows/tile  layout  path
//   kScalar      1          any     PackTile (rows rebuilt from tiles), KernelScalar
//   kAvx2        8          rows    n <= avx2_direct: RunDirectAvx2 (8 rows from the blocks)
//                                   else PackTileAvx2 (Q8_0, Q4_0, Q4_K; others PackTile),
//                                   KernelAvx2
//                           tiles   PackTile (rows rebuilt from tiles), KernelAvx2
//   kAvx512Vnni  16         rows    n <= vnni_direct: RunDirect (16 rows from the blocks)
//                                   else PackTileAvx512, KernelAvx512; from pairs_from tokens
//                                   on, two tiles at a time (KernelAvx512Pairs)
//                           tiles   RunTiled: n <= in_place: read in place, else unpacked once
//                                   per pass; pairs as above
//   kAmx         16         rows    n <= amx_direct: RunDirect, else AmxTile (qmatmul_amx.cc)
//                           tiles   as kAvx512Vnni (the tiles are its layout)

// Rows per tile, by kernel: the unit the threads claim.
constexpr int kTileRows[] = {1, 8, 16, 16};

// The per-dtype limits of the table above (0: never).
// - avx2_direct: measured from DRAM, 2 threads, 8192x2048, against the (gathering) tile path:
//   one token Q8_0 2.39 -> 0.34 ms, Q4_K 2.38 -> 0.27, Q6_K 4.52 -> 0.43, Q5_0 5.13 -> 0.41,
//   Q4_0 0.96 -> 0.34; even at 16 tokens for Q8_0, at 8-16 for the K-quants and Q5_0, at 8
//   already behind for Q4_0.
// - vnni_direct: beyond it the tile's unpack, amortized over the batch, is cheaper than a
//   reduction per token (measured break-even: Q8_0 and Q4_K about 4-8 tokens; Q4_0 / Q5_0,
//   whose tiles cost more to unpack, beyond 8). Q6_K: 8192x2048 from DRAM, 2 threads: 0.37 ms
//   direct vs 0.71 tiled at 1 token; at 2 tokens the tiles already win (llama-1B Q6_K c(2):
//   45 ms direct, 42 tiled).
// - amx_direct: against AMX, whose cost is about that of a full 16-token chunk, the direct
//   kernel pays up to 4 tokens for Q8_0 and 8 for Q4_K (its tiles cost more to unpack).
//   Measured, Q8_0 from DRAM, 2 threads: 4864x896 direct 0.25 ms at 4 tokens, 0.32-0.50 at
//   5-8; AMX 0.30-0.32.
// - in_place (dtypes with tiles, HasTiles): Q8_0's tiles are already what the kernel reads.
//   Measured from DRAM, 2 threads (4864x896; Q4_K 8192x2048): Q4_0 in place at every size
//   (16 tokens 0.129 ms vs 0.157 unpacked); Q4_K in place 0.55 vs 0.65 at 16, within noise
//   from 24 on; Q5_0, whose bit-4 masks cost a few more operations per weight vector,
//   unpacked from 12 (0.12 vs 0.14).
// - pairs_from: from this many tokens on, pairs of tiles beat single tiles (KernelAvx512Pair:
//   blocks of 32 only).
struct IntDTypePaths {
  DType dtype;
  int avx2_direct, vnni_direct, amx_direct, in_place, pairs_from;
};
constexpr int kAll = 1 << 30;
constexpr IntDTypePaths kIntPaths[] = {
    // dtype       avx2_direct vnni_direct amx_direct in_place pairs_from
    {DType::kQ8_0, 16, 4, 4, kAll, 8}, {DType::kQ4_0, 4, 8, 8, kAll, 8},
    {DType::kQ5_0, 8, 8, 8, 8, 8},     {DType::kQ4_K, 8, 4, 8, 16, 0},
    {DType::kQ5_K, 0, 0, 0, 0, 0},     {DType::kQ6_K, 8, 1, 1, 0, 0},
};

const IntDTypePaths& PathsOf(DType t) {
  for (const IntDTypePaths& p : kIntPaths) {
    if (p.dtype == t) return p;
  }
  GOOSE_CHECK(false && "not an int-dot dtype");
  return kIntPaths[0];
}

// A full tile's path (the table's last column).
enum class TilePath : uint8_t {
  kScalar,        // PackTile, KernelScalar
  kAvx2,          // PackTileAvx2 or PackTile, KernelAvx2
  kAvx2Direct,    // RunDirectAvx2
  kAvx512,        // PackTileAvx512, KernelAvx512 or KernelAvx512Pairs
  kAvx512Direct,  // RunDirect
  kAvx512Tiles,   // RunTiled (WeightLayout::kTiles)
  kAmx,           // AmxTile
};

// One QMatMul's row of the table.
struct IntPlan {
  IntKernel kernel;  // the kernel that runs (weights stored as tiles: at most kAvx512Vnni)
  int tile_rows;     // kTileRows[kernel]
  TilePath path;     // of full tiles
  bool pairs;        // kAvx512, kAvx512Tiles: two full tiles at a time
  bool in_place;     // kAvx512Tiles: read in place (else unpacked once per pass)
};

IntPlan PlanFor(IntKernel kernel, DType dtype, WeightLayout layout, int n) {
  const IntDTypePaths& p = PathsOf(dtype);
  const bool rows = layout == WeightLayout::kRows;
  // Tiles are the AVX-512 kernel's layout (AMX multiplies row-major tiles).
  if (!rows) kernel = std::min(kernel, IntKernel::kAvx512Vnni);
  IntPlan plan{kernel, kTileRows[static_cast<int>(kernel)], TilePath::kScalar, false, false};
  switch (kernel) {
    case IntKernel::kScalar:
      break;
    case IntKernel::kAvx2:
      plan.path = rows && n <= p.avx2_direct ? TilePath::kAvx2Direct : TilePath::kAvx2;
      break;
    case IntKernel::kAvx512Vnni:
      plan.path = !rows                ? TilePath::kAvx512Tiles
                  : n <= p.vnni_direct ? TilePath::kAvx512Direct
                                       : TilePath::kAvx512;
      plan.pairs = plan.path != TilePath::kAvx512Direct && p.pairs_from > 0 && n >= p.pairs_from;
      plan.in_place = !rows && n <= p.in_place;
      break;
    case IntKernel::kAmx:
      plan.path = n <= p.amx_direct ? TilePath::kAvx512Direct : TilePath::kAmx;
      break;
  }
  return plan;
}

// Row tiles [tile0, tile1) as the plan says: unpack once, apply to all tokens (or, for a few
// tokens, the direct kernels on full tiles; with AMX, the tile multiplies on full tiles; amx:
// the activations packed for them). `follow`: the first tile of this thread's next run (-1:
// none), so that the prefetch ahead continues into it.
void RunTiles(const WeightMatrix& wm, const Fmt& f, const Act& a, const qmm::AmxAct* amx, int n_tok,
              float* out, const IntPlan& plan, int64_t tile0, int64_t tile1, int64_t follow) {
  if (plan.path == TilePath::kAvx512Tiles) {
    return RunTiled(wm, f, a, n_tok, out, tile0, tile1, follow, plan.in_place, plan.pairs);
  }
  const int w = plan.tile_rows;
  const IntKernel kernel = plan.kernel;
  const int cols = static_cast<int>(wm.cols);
  thread_local RowIR row;
  thread_local Tile tile, tile2;
  row.Resize(cols, f);
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
    const bool full = nr == w;
    const bool prefetched = prefetch && ti != tile0;  // by the previous tile's kernel
    if (full && plan.path == TilePath::kAvx512Direct) {
      // One tile ahead measured best here: two tiles plus the current one overflow L1.
      RunDirect(wm, r0, a, n_tok, ahead(ti), out + r0);
      continue;
    }
    if (full && plan.path == TilePath::kAvx2Direct) {
      RunDirectAvx2(wm, r0, a, n_tok, ahead(ti), out + r0);
      continue;
    }
    if (full && plan.path == TilePath::kAmx) {
      qmm::AmxTile(wm, f, *amx, r0, ahead(ti), out);
      continue;
    }
    // Pairs of full tiles share the activation loads (KernelAvx512Pair).
    if (plan.pairs && full && ti + 1 < tile1 && r0 + 32 <= wm.rows &&
        PackTileAvx512(wm, f, r0, 16, &tile, prefetched) &&
        PackTileAvx512(wm, f, r0 + 16, 16, &tile2, prefetched)) {
      KernelAvx512Pairs(tile, tile2, f, cols, a, n_tok, out + r0, wm.rows, ahead(ti + 1),
                        2 * w * wm.row_bytes());
      ++ti;
      continue;
    }
    // The kernel's tile code, on a tile from its own packer where it has one, else unpacked row
    // by row. (A partial tile under AMX runs the AVX-512 tile kernel: the same bits.)
    const bool avx512 = kernel >= IntKernel::kAvx512Vnni;
    if (!(avx512 && PackTileAvx512(wm, f, r0, nr, &tile, prefetched)) &&
        !(kernel == IntKernel::kAvx2 && PackTileAvx2(wm, f, r0, nr, &tile))) {
      PackTile(wm, f, r0, nr, w, &row, &tile);
    }
    float* o = out + r0;
    if (avx512) {
      KernelAvx512(tile, f, cols, a, n_tok, o, wm.rows, nr, ahead(ti), w * wm.row_bytes());
    } else if (kernel == IntKernel::kAvx2) {
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

bool IsIntDotType(DType t) { return GetDTypeSupport(t).int_dot; }

const char* IntKernelName(IntKernel kernel) {
  switch (kernel) {
    case IntKernel::kScalar:
      return "scalar";
    case IntKernel::kAvx2:
      return "avx2";
    case IntKernel::kAvx512Vnni:
      return "avx512-vnni";
    case IntKernel::kAmx:
      return "amx";
  }
  return "?";
}

IntKernel IntKernelFor(CpuLevel level, const CpuFeatures& f) {
  level = std::min(level, CpuLevelFor(f));
  if (level == CpuLevel::kAmx) return IntKernel::kAmx;  // implies VNNI (CpuLevelFor)
  if (level == CpuLevel::kAvx512 && f.avx512vnni) return IntKernel::kAvx512Vnni;
  if (level >= CpuLevel::kAvx2) return IntKernel::kAvx2;
  return IntKernel::kScalar;
}

IntKernel IntKernelFor(CpuLevel level) { return IntKernelFor(level, DetectCpuFeatures()); }

void QMatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool,
             IntKernel kernel) {
  const WeightMatrix* ws[] = {&w};
  float* outs[] = {out};
  QMatMulShared(ws, 1, x, n_tokens, outs, pool, kernel);
}

void QMatMulShared(const WeightMatrix* const* ws, int n_w, const float* x, int n_tokens,
                   float* const* outs, ThreadPool* pool, IntKernel kernel) {
  GOOSE_CHECK(n_w >= 1 && n_w <= kMaxMatMulShared);
  const DType dtype = ws[0]->dtype;
  const Fmt f = GetFmt(dtype);
  const int cols = static_cast<int>(ws[0]->cols);
  GOOSE_CHECK(cols % f.sb == 0);
  GOOSE_CHECK(kernel >= IntKernel::kScalar && kernel <= IntKernelFor(DetectCpuLevel()));
  const WeightLayout layout = ws[0]->layout;
  for (int i = 0; i < n_w; ++i) {
    GOOSE_CHECK(ws[i]->dtype == dtype && ws[i]->cols == cols && ws[i]->layout == layout);
  }
  if (layout == WeightLayout::kTiles) GOOSE_CHECK(HasTiles(dtype));
  const IntPlan plan = PlanFor(kernel, dtype, layout, n_tokens);
  // (thread_local: the lambdas below, which run on other threads too, use the reference.)
  thread_local Act a_buf;
  Act& a = a_buf;
  a.q.resize(static_cast<size_t>(n_tokens) * cols);
  a.dx.resize(static_cast<size_t>(n_tokens) * (cols / f.sb));
  a.bs.resize(static_cast<size_t>(n_tokens) * (cols / f.g));
  // Each token's activations on their own (any split over threads gives the same bits).
  auto prepare = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      (plan.kernel >= IntKernel::kAvx512Vnni ? QuantizeActAvx512 : QuantizeAct)(
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
  const bool use_amx = plan.path == TilePath::kAmx;
  if (use_amx) qmm::PackAmxAct(a, f, cols, n_tokens, &amx);
  const qmm::AmxAct* amx_act = use_amx ? &amx : nullptr;
  // The matrices' tiles as one index space: matrix i owns [first[i], first[i + 1]).
  const int tw = plan.tile_rows;
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
      const int64_t f_local =
          e == g1 && follow >= first[i] && follow < first[i + 1] ? follow - first[i] : -1;
      RunTiles(*ws[i], f, a, amx_act, n_tokens, outs[i], plan, g0 - first[i], e - first[i],
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

}  // namespace goose
