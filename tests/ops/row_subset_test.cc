// RowSubset: MatMul over some rows of W gives W's bits at those rows, for tiled and row-major
// matrices, after Assign and after Set.
#include "ops/row_subset.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/qmatmul.h"
#include "ops/quant.h"
#include "util/aligned.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

std::vector<float> Random(SplitMix64& r, int64_t n) {
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(r.Normal());
  return x;
}

// out[t][j] of the subset must equal out[t][rows[j]] of W.
void ExpectRowsOf(const WeightMatrix& w, const RowSubset& sub, const std::vector<int32_t>& rows,
                  const std::string& what) {
  SplitMix64 rng(5);
  ThreadPool pool(2);
  for (int n : {1, 3, 17}) {
    const std::vector<float> x = Random(rng, n * w.cols);
    std::vector<float> full(static_cast<size_t>(n * w.rows)), part(n * rows.size(), -7.0f);
    MatMul(w, x.data(), n, full.data(), &pool);
    MatMul(sub.matrix(), x.data(), n, part.data(), &pool);
    for (int t = 0; t < n; ++t) {
      for (size_t j = 0; j < rows.size(); ++j) {
        const float a = full[t * w.rows + rows[j]], b = part[t * rows.size() + j];
        ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << what << " n " << n << " column " << j;
      }
    }
  }
}

TEST(RowSubset, ProductsEqualTheWholeMatrixsRowsBitwise) {
  SplitMix64 rng(11);
  const int64_t rows = 80, cols = 256;
  const std::vector<float> wf = Random(rng, rows * cols);
  // 20 rows out of order (a partial second tile), then one column replaced in each tile.
  const std::vector<int32_t> pick = {79, 3,  0,  41, 42, 17, 64, 65, 5,  70,
                                     11, 12, 13, 50, 33, 78, 2,  60, 61, 9};
  std::vector<int32_t> changed = pick;
  changed[4] = 77, changed[18] = 1;
  auto check = [&](const WeightMatrix& w, const std::string& what) {
    RowSubset sub;
    sub.Assign(w, pick);
    ASSERT_EQ(sub.rows(), 20);
    EXPECT_EQ(sub.matrix().layout, w.layout) << what;
    ExpectRowsOf(w, sub, pick, what);
    sub.Set(4, 77);
    sub.Set(18, 1);
    ExpectRowsOf(w, sub, changed, what);
  };
  check(WeightMatrix{DType::kF32, wf.data(), rows, cols}, "f32");
  for (DType t : {DType::kQ8_0, DType::kQ5_0, DType::kQ4_K}) {
    const std::string name(GetDTypeInfo(t).name);
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(t, cols) * rows));
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(t, wf.data() + r * cols, cols, q.data() + r * RowBytes(t, cols));
    }
    const WeightMatrix w{t, q.data(), rows, cols};
    check(w, name + " rows");
    AlignedVector<uint8_t> tiles(static_cast<size_t>(TiledBytes(t, rows, cols)));
    RepackTiles(w, tiles.data());
    check(WeightMatrix{t, tiles.data(), rows, cols, WeightLayout::kTiles}, name + " tiles");
  }
}

}  // namespace
}  // namespace goose
