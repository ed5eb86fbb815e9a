// RowSubset: a matrix made of some rows of a weight matrix W, for products that need only those
// rows (a draft model's logits over a vocabulary shortlist: its output matrix is most of what a
// small model reads per token, 32000 x 512 of a 45M-cost drafter's 28 MB).
//
// Contract
// - Row j of matrix() is W's row rows[j], in W's dtype and layout (tiles stay tiles), so MatMul
//   over it gives, bit for bit, MatMul over W at those rows (each row's arithmetic is fixed:
//   qmatmul.h).
// - Set(j, row) replaces one row at the cost of one tile (16 rows); Assign copies them all.
// - matrix() points into this object: it moves with it, and W must outlive neither.
#pragma once

#include <cstdint>
#include <span>

#include "ops/ops.h"
#include "util/aligned.h"

namespace goose {

class RowSubset {
 public:
  void Assign(const WeightMatrix& w, std::span<const int32_t> rows);
  void Set(int64_t j, int32_t row);
  const WeightMatrix& matrix() const { return m_; }
  int64_t rows() const { return m_.rows; }

 private:
  void CopyRow(int64_t j, int32_t row);  // W's row into rows_ at j
  void Retile(int64_t tile);             // tile `tile` of tiles_ from rows_
  WeightMatrix w_;
  WeightMatrix m_;
  AlignedVector<uint8_t> rows_;   // the subset row-major (GGUF blocks)
  AlignedVector<uint8_t> tiles_;  // W tiled: the subset's tiles (matrix() reads these)
};

}  // namespace goose
