// QMatMul's formats (Fmt), the activations' quantization and the scalar kernel (w = 1), whose
// order defines every other kernel's bits (qmatmul.h); QDotReference, the tests' reference.
//
// A tile of W weight rows (16 for AVX-512, 8 for AVX2, 1 scalar) is unpacked once into an
// "IR" - unsigned 8-bit levels interleaved so that one vector holds 4 consecutive columns of
// each of the W rows, plus per-block scales as floats/ints (Tile, qmatmul_internal.h) - and
// then applied to every token of the batch. With rows in lanes, VNNI's vpdpbusd (u8 x s8 ->
// s32, 4 columns per lane) needs no horizontal sums, and each lane's float accumulation is the
// scalar order. PackTile below builds that IR row by row for any dtype, layout and width: the
// scalar kernel's tiles, and the wider kernels' partial tiles.
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/qmatmul.h"
#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/check.h"
#include "util/fp16.h"

namespace goose {

namespace qmm {

Fmt GetFmt(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return {32, 32, 128, false};  // IR level = q + 128
    case DType::kQ4_0:
      return {32, 32, 8, false};
    case DType::kQ5_0:
      return {32, 32, 16, false};
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {256, 32, 0, true};
    case DType::kQ6_K:
      return {256, 16, 0, true};
    default:
      GOOSE_CHECK(false && "not an int-dot dtype");
  }
  return {};
}

// One token's activations, quantized (batch-invariant: depends on this row only).
void QuantizeAct(const float* x, int cols, const Fmt& f, int8_t* q, float* dx, int32_t* bs) {
  for (int b = 0; b < cols / f.sb; ++b) {
    const float* xb = x + b * f.sb;
    float amax = 0.0f;
    for (int j = 0; j < f.sb; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    for (int j = 0; j < f.sb; ++j) q[b * f.sb + j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
  for (int g = 0; g < cols / f.g; ++g) {
    int32_t s = 0;
    for (int j = 0; j < f.g; ++j) s += q[g * f.g + j];
    bs[g] = s;
  }
}

namespace {

void UnpackRow(DType t, const uint8_t* src, int cols, RowIR* r) {
  const float* h = F16Table();
  auto f16 = [h](const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return h[v];
  };
  switch (t) {
    case DType::kQ8_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 34;
        r->d[b] = f16(blk);
        for (int j = 0; j < 32; ++j) r->q[b * 32 + j] = static_cast<uint8_t>(blk[2 + j] ^ 0x80);
      }
      return;
    case DType::kQ4_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 18;
        r->d[b] = f16(blk);
        for (int j = 0; j < 16; ++j) {
          r->q[b * 32 + j] = blk[2 + j] & 0xF;
          r->q[b * 32 + 16 + j] = blk[2 + j] >> 4;
        }
      }
      return;
    case DType::kQ5_0:
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * 22;
        r->d[b] = f16(blk);
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        for (int j = 0; j < 16; ++j) {
          r->q[b * 32 + j] = static_cast<uint8_t>((blk[6 + j] & 0xF) | (((qh >> j) & 1) << 4));
          r->q[b * 32 + 16 + j] =
              static_cast<uint8_t>((blk[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const int bytes = five ? 176 : 144;
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * bytes;
        r->d[b] = f16(blk);
        r->dmin[b] = f16(blk + 2);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, m;
          GetScaleMinK4(j, blk + 4, &sc, &m);
          r->sc[b * 8 + j] = sc;
          r->mn[b * 8 + j] = m;
        }
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + (five ? 48 : 16);
        uint8_t* q = r->q.data() + b * 256;
        for (int j = 0; j < 4; ++j) {
          for (int l = 0; l < 32; ++l) {
            int lo = qs[32 * j + l] & 0xF, hi = qs[32 * j + l] >> 4;
            if (five) {
              lo |= ((qh[l] >> (2 * j)) & 1) << 4;
              hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
            }
            q[64 * j + l] = static_cast<uint8_t>(lo);
            q[64 * j + 32 + l] = static_cast<uint8_t>(hi);
          }
        }
      }
      return;
    }
    case DType::kQ6_K:
      for (int b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * 210;
        r->d[b] = r->dmin[b] = f16(blk + 208);
        const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
        for (int g = 0; g < 16; ++g) {
          r->sc[b * 16 + g] = scales[g];
          r->mn[b * 16 + g] = 32 * scales[g];
        }
        uint8_t* q = r->q.data() + b * 256;
        for (int hf = 0; hf < 2; ++hf) {
          const uint8_t* ql = blk + 64 * hf;
          const uint8_t* qh = blk + 128 + 32 * hf;
          uint8_t* qq = q + 128 * hf;
          for (int l = 0; l < 32; ++l) {
            qq[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
            qq[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            qq[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            qq[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
          }
        }
      }
      return;
    default:
      GOOSE_CHECK(false && "not an int-dot dtype");
  }
}

}  // namespace

void PackTile(const WeightMatrix& wm, const Fmt& f, int64_t r0, int nr, int w, RowIR* row,
              Tile* t) {
  const int cols = static_cast<int>(wm.cols);
  const int nsb = cols / f.sb, ng = cols / f.g;
  t->Resize(cols, f, w);
  for (int lane = 0; lane < w; ++lane) {
    if (lane >= nr) {  // padding rows: zero scales, results discarded
      for (int k = 0; k < cols / 4; ++k)
        std::memset(&t->q[(static_cast<size_t>(k) * w + lane) * 4], 0, 4);
      for (int b = 0; b < nsb; ++b) t->d[b * w + lane] = t->dmin[b * w + lane] = 0.0f;
      for (int g = 0; g < ng; ++g) t->sc[g * w + lane] = t->mn[g * w + lane] = 0;
      continue;
    }
    const uint8_t* src = static_cast<const uint8_t*>(wm.data) + (r0 + lane) * wm.row_bytes();
    thread_local std::vector<uint8_t> rebuilt;
    if (wm.layout == WeightLayout::kTiles) {  // (only when a test forces a lower kernel)
      rebuilt.resize(static_cast<size_t>(wm.row_bytes()));
      TiledRow(wm, r0 + lane, rebuilt.data());
      src = rebuilt.data();
    }
    UnpackRow(wm.dtype, src, cols, row);
    uint8_t* dst = t->q.data() + lane * 4;
    for (int k = 0; k < cols / 4; ++k)
      std::memcpy(dst + static_cast<size_t>(k) * w * 4, &row->q[4 * k], 4);
    for (int b = 0; b < nsb; ++b) {
      t->d[b * w + lane] = row->d[b];
      t->dmin[b * w + lane] = row->dmin[b];
    }
    for (int g = 0; g < ng; ++g) {
      t->sc[g * w + lane] = row->sc[g];
      t->mn[g * w + lane] = row->mn[g];
    }
  }
}

namespace {

// ---- Scalar kernel (w = 1): the defining order. ----
float DotScalar(const Tile& t, const Fmt& f, int cols, const int8_t* xq, const float* dx,
                const int32_t* bs) {
  float acc = 0.0f;
  const uint8_t* q = t.q.data();
  if (!f.k) {
    for (int b = 0; b < cols / 32; ++b) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += q[b * 32 + j] * xq[b * 32 + j];
      const int32_t i = s - f.offset * bs[b];
      acc = acc + (t.d[b] * dx[b]) * static_cast<float>(i);
    }
    return acc;
  }
  const int gpb = f.sb / f.g;
  for (int b = 0; b < cols / f.sb; ++b) {
    int32_t i1 = 0, i2 = 0;
    for (int gg = 0; gg < gpb; ++gg) {
      const int g = b * gpb + gg;
      int32_t s = 0;
      for (int j = 0; j < f.g; ++j) s += q[g * f.g + j] * xq[g * f.g + j];
      i1 += t.sc[g] * s;
      i2 += t.mn[g] * bs[g];
    }
    acc = acc + (t.d[b] * dx[b]) * static_cast<float>(i1);
    acc = acc - (t.dmin[b] * dx[b]) * static_cast<float>(i2);
  }
  return acc;
}

}  // namespace

void KernelScalar(const Tile& t, const Fmt& f, int cols, const Act& a, int n_tok, float* out,
                  int64_t out_stride) {
  const int nsb = cols / f.sb, ng = cols / f.g;
  for (int tok = 0; tok < n_tok; ++tok) {
    out[tok * out_stride] = DotScalar(t, f, cols, a.q.data() + static_cast<size_t>(tok) * cols,
                                      a.dx.data() + static_cast<size_t>(tok) * nsb,
                                      a.bs.data() + static_cast<size_t>(tok) * ng);
  }
}

}  // namespace qmm

float QDotReference(DType t, const uint8_t* row, int64_t cols, const float* x) {
  using qmm::Fmt;
  using qmm::RowIR;
  const Fmt f = qmm::GetFmt(t);
  const int n = static_cast<int>(cols);
  std::vector<int8_t> q(n);
  std::vector<float> dx(n / f.sb);
  std::vector<int32_t> bs(n / f.g);
  qmm::QuantizeAct(x, n, f, q.data(), dx.data(), bs.data());
  RowIR r;
  r.Resize(n, f);
  qmm::UnpackRow(t, row, n, &r);
  // The defining order (qmatmul.h), written out directly on the unpacked row.
  float acc = 0.0f;
  for (int b = 0; b < n / f.sb; ++b) {
    if (!f.k) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += (r.q[b * 32 + j] - f.offset) * q[b * 32 + j];
      acc = acc + (r.d[b] * dx[b]) * static_cast<float>(s);
      continue;
    }
    int32_t i1 = 0, i2 = 0;
    for (int g = b * (f.sb / f.g); g < (b + 1) * (f.sb / f.g); ++g) {
      int32_t s = 0;
      for (int j = 0; j < f.g; ++j) s += r.q[g * f.g + j] * q[g * f.g + j];
      i1 += r.sc[g] * s;
      i2 += r.mn[g] * bs[g];
    }
    acc = acc + (r.d[b] * dx[b]) * static_cast<float>(i1);
    acc = acc - (r.dmin[b] * dx[b]) * static_cast<float>(i2);
  }
  return acc;
}

}  // namespace goose
