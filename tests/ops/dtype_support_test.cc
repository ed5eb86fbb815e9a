// util/dtype.h's support table against the code that implements it: every capability the
// table lists for a dtype must work in every function that claims it (the quantizers, the
// dequantizer, GetRow, MatMul on every CPU level, QMatMul on every integer kernel, the tiles).
// A dtype added to the table but missing from one of their switches fails here - by a wrong
// value, or by the GOOSE_CHECK that the missing case reaches - rather than in a user's run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/ops.h"
#include "ops/qmatmul.h"
#include "ops/quant.h"
#include "util/aligned.h"
#include "util/dtype.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

// Every GGML type id the geometry table knows.
std::vector<DType> KnownDTypes() {
  std::vector<DType> types;
  for (uint32_t id = 0; id < 256; ++id) {
    if (GetDTypeInfo(id).block_size > 0) types.push_back(static_cast<DType>(id));
  }
  return types;
}

TEST(DTypeSupportTest, CapabilitiesImplyTheOnesTheyNeed) {
  int n_compute = 0;
  for (DType t : KnownDTypes()) {
    const DTypeSupport s = GetDTypeSupport(t);
    const std::string name(GetDTypeInfo(t).name);
    EXPECT_TRUE(!s.quantize || s.compute) << name << ": synth would write what no model loads";
    EXPECT_TRUE(!s.int_dot || s.compute) << name;
    EXPECT_TRUE(!s.tiles || s.int_dot) << name << ": tiles are the integer kernel's layout";
    // The message lists read the same table.
    const bool listed =
        (", " + DTypeNamesWith(&DTypeSupport::compute) + ",").find(", " + name + ",") !=
        std::string::npos;
    EXPECT_EQ(listed, s.compute) << name;
    n_compute += s.compute;
  }
  EXPECT_GE(n_compute, 9);
  // A type id outside the table supports nothing.
  const DTypeSupport none = GetDTypeSupport(static_cast<DType>(200));
  EXPECT_FALSE(none.compute || none.quantize || none.int_dot || none.tiles);
}

// Each supported dtype through every function that claims it. Weights: QuantizeRow's of
// Gaussian data where the dtype quantizes, else zero blocks; outputs start as NaN so that a
// function that silently skips a dtype shows.
TEST(DTypeSupportTest, EveryListedCapabilityWorks) {
  SplitMix64 rng(3);
  const int rows = 37, cols = 512, n_tok = 5;
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  ThreadPool pool(2);
  for (DType t : KnownDTypes()) {
    const DTypeSupport s = GetDTypeSupport(t);
    if (!s.compute) continue;
    const std::string name(GetDTypeInfo(t).name);
    SCOPED_TRACE(name);
    std::vector<float> wf(static_cast<size_t>(rows) * cols);
    for (float& v : wf) v = static_cast<float>(rng.Normal() * 0.1);
    const int64_t rb = RowBytes(t, cols);
    std::vector<uint8_t> q(static_cast<size_t>(rb * rows), 0);
    if (s.quantize) {
      for (int r = 0; r < rows; ++r) QuantizeRow(t, wf.data() + r * cols, cols, q.data() + r * rb);
    }
    const WeightMatrix w{t, q.data(), rows, cols};
    // The dequantized rows: near the data (or zero), and what GetRow gives, bit for bit.
    std::vector<float> deq(wf.size(), kNaN), row(cols, kNaN);
    double err = 0, norm = 0;
    for (int r = 0; r < rows; ++r) {
      DequantizeRow(t, q.data() + r * rb, cols, deq.data() + r * cols);
      GetRow(w, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), deq.data() + r * cols, cols * 4), 0) << "row " << r;
    }
    for (size_t i = 0; i < deq.size(); ++i) {
      ASSERT_TRUE(std::isfinite(deq[i])) << i;
      const double want = s.quantize ? wf[i] : 0.0;
      err += (deq[i] - want) * (deq[i] - want);
      norm += want * want;
    }
    EXPECT_LE(err, 0.05 * norm);  // (4-bit formats: about 1% of the energy)
    // MatMul on every CPU level: the dequantized weights' product, up to the activations'
    // int8 quantization on the integer path.
    std::vector<float> x(static_cast<size_t>(n_tok) * cols);
    for (float& v : x) v = static_cast<float>(rng.Normal());
    for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
      SetCpuLevelCap(static_cast<CpuLevel>(level));
      std::vector<float> out(static_cast<size_t>(n_tok) * rows, kNaN);
      MatMul(w, x.data(), n_tok, out.data(), &pool);
      SetCpuLevelCap(kMaxCpuLevel);
      for (int tok = 0; tok < n_tok; ++tok) {
        for (int r = 0; r < rows; ++r) {
          double exact = 0, scale = 0;
          for (int c = 0; c < cols; ++c) {
            exact += static_cast<double>(deq[r * cols + c]) * x[tok * cols + c];
            scale += std::fabs(static_cast<double>(deq[r * cols + c]) * x[tok * cols + c]);
          }
          ASSERT_NEAR(out[tok * rows + r], exact, 0.02 * scale + 1e-6)
              << CpuLevelName(static_cast<CpuLevel>(level)) << " token " << tok << " row " << r;
        }
      }
    }
    if (!s.int_dot) continue;
    // QMatMul on every integer kernel this CPU runs (each is the reference's bits; the kernel
    // tests check them in depth) and, with tiles, from the tiles too.
    AlignedVector<uint8_t> tiles;
    std::vector<WeightMatrix> layouts = {w};
    if (s.tiles) {
      tiles.resize(static_cast<size_t>(TiledBytes(t, rows, cols)));
      RepackTiles(w, tiles.data());
      layouts.push_back({t, tiles.data(), rows, cols, WeightLayout::kTiles});
      std::vector<uint8_t> back(static_cast<size_t>(rb));
      for (int r = 0; r < rows; ++r) {
        TiledRow(layouts[1], r, back.data());
        ASSERT_EQ(std::memcmp(back.data(), q.data() + r * rb, rb), 0) << "tiled row " << r;
      }
    }
    for (const WeightMatrix& wl : layouts) {
      for (int k = 0; k <= static_cast<int>(IntKernelFor(DetectCpuLevel())); ++k) {
        std::vector<float> out(static_cast<size_t>(n_tok) * rows, kNaN);
        QMatMul(wl, x.data(), n_tok, out.data(), &pool, static_cast<IntKernel>(k));
        for (int tok = 0; tok < n_tok; ++tok) {
          for (int r = 0; r < rows; ++r) {
            const float want = QDotReference(t, q.data() + r * rb, cols, x.data() + tok * cols);
            ASSERT_EQ(std::memcmp(&out[tok * rows + r], &want, 4), 0)
                << IntKernelName(static_cast<IntKernel>(k))
                << (wl.layout == WeightLayout::kTiles ? " tiles" : "") << " token " << tok
                << " row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace goose
