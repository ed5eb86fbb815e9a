#include "ops/row_subset.h"

#include <algorithm>
#include <cstring>

#include "ops/qmatmul.h"
#include "util/check.h"

namespace goose {

void RowSubset::Assign(const WeightMatrix& w, std::span<const int32_t> rows) {
  w_ = w;
  const int64_t n = static_cast<int64_t>(rows.size());
  rows_.assign(static_cast<size_t>(n * w.row_bytes()), 0);
  for (int64_t j = 0; j < n; ++j) CopyRow(j, rows[j]);
  m_ = {w.dtype, rows_.data(), n, w.cols, WeightLayout::kRows};
  if (w.layout == WeightLayout::kTiles) {
    tiles_.assign(static_cast<size_t>(TiledBytes(w.dtype, n, w.cols)), 0);
    RepackTiles(m_, tiles_.data());
    m_.data = tiles_.data();
    m_.layout = WeightLayout::kTiles;
  }
}

void RowSubset::Set(int64_t j, int32_t row) {
  GOOSE_CHECK(j >= 0 && j < m_.rows);
  CopyRow(j, row);
  if (m_.layout == WeightLayout::kTiles) Retile(j / 16);
}

void RowSubset::CopyRow(int64_t j, int32_t row) {
  GOOSE_CHECK(row >= 0 && row < w_.rows);
  const int64_t rb = w_.row_bytes();
  uint8_t* dst = rows_.data() + j * rb;
  if (w_.layout == WeightLayout::kTiles) {
    TiledRow(w_, row, dst);
  } else {
    std::memcpy(dst, static_cast<const uint8_t*>(w_.data) + row * rb, static_cast<size_t>(rb));
  }
}

void RowSubset::Retile(int64_t tile) {
  const int64_t r0 = tile * 16;
  const WeightMatrix part = {m_.dtype, rows_.data() + r0 * w_.row_bytes(),
                             std::min<int64_t>(16, m_.rows - r0), m_.cols, WeightLayout::kRows};
  RepackTiles(part, tiles_.data() + tile * TileBytes(m_.dtype, m_.cols));
}

}  // namespace goose
