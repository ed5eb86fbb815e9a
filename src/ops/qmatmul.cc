// QMatMul's dispatch: which kernel computes each tile of W rows, the threads' split of the
// tiles, and the activations' quantization (see qmatmul.h for the fixed order, and
// qmatmul_internal.h for the kernel files).
//
// Q8_0, Q4_K, Q4_0 and Q5_0 weights stored as tiles (WeightLayout::kTiles: the AVX-512 IR,
// Q4_K's levels still as nibbles, made at load time) are read in place by every batch size.
// For row-major weights and a few tokens (decode) on AVX-512 the unpack is most of the work,
// so full tiles of Q8_0, Q4_0, Q5_0, Q4_K and Q6_K are read straight from the blocks instead
// ("direct" kernels): integer row sums are folded into the same lane layout, and the float
// code is the tile kernel's.
#include "ops/qmatmul.h"

#include <algorithm>
#include <atomic>

#include "ops/qmatmul_internal.h"
#include "util/check.h"

namespace goose {

namespace {

using qmm::Act;
using qmm::DirectAvx2MaxTok;
using qmm::DirectMaxTok;
using qmm::Fmt;
using qmm::GetFmt;
using qmm::KernelAvx2;
using qmm::KernelAvx512;
using qmm::KernelAvx512Pairs;
using qmm::KernelScalar;
using qmm::kMinPairTokens;
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
      KernelAvx512Pairs(tile, tile2, f, cols, a, n_tok, out + r0, wm.rows, ahead(ti + 1),
                        2 * w * wm.row_bytes());
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

}  // namespace goose
