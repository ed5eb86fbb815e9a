// Kernel dispatch and the non-reducing ops. The reducing kernels live in ops_kernels.inc,
// compiled once per CPU level; see that file for the fixed accumulation order.
#include "ops/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/qmatmul.h"
#include "ops/qmatmul_internal.h"
#include "ops/quant.h"
#include "util/aligned.h"
#include "util/check.h"
#include "util/fp16.h"

#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12 false positive inside avx512fintrin.h (_mm512_cvtph_ps).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace goose {

namespace kern_base {
#include "ops/ops_kernels.inc"
static void ToF16(const float* x, int n, uint16_t* out) {
  for (int i = 0; i < n; ++i) out[i] = F32ToF16(x[i]);
}
static void ConvertF16(const uint16_t* src, int64_t n, float* dst) {
  const float* table = F16Table();
  for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}
// A bf16 is the top half of an f32: widening is exact, a shift.
static void ConvertBF16(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}
static int FirstAbove(const float* x, int n, float t) {
  for (int i = 0; i < n; ++i) {
    if (x[i] > t) return i;
  }
  return n;
}
}  // namespace kern_base

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace kern_avx2 {
#define GOOSE_KERNELS_F16C 1  // ops_kernels.inc: f16 loads with vcvtph2ps
#include "ops/ops_kernels.inc"
#undef GOOSE_KERNELS_F16C
// vcvtps2ph rounds to nearest even, as F32ToF16.
static void ToF16(const float* x, int n, uint16_t* out) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  kern_base::ToF16(x + i, n - i, out + i);
}
static void ConvertF16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  const float* table = F16Table();
  for (; i < n; ++i) dst[i] = table[src[i]];
}
// (GCC 12 leaves the scalar loop scalar: BF16 weights decoded at half F16's speed.)
static void ConvertBF16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  kern_base::ConvertBF16(src + i, n - i, dst + i);
}
static int FirstAbove(const float* x, int n, float t) {
  const __m256 tv = _mm256_set1_ps(t);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), tv, _CMP_GT_OQ));
    if (m != 0) return i + __builtin_ctz(static_cast<unsigned>(m));
  }
  return i + kern_base::FirstAbove(x + i, n - i, t);
}
}  // namespace kern_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")
namespace kern_avx512 {
#define GOOSE_KERNELS_AVX512 1  // ops_kernels.inc: masked tail loads and stores
#define GOOSE_KERNELS_F16C 1
#include "ops/ops_kernels.inc"
#undef GOOSE_KERNELS_F16C
#undef GOOSE_KERNELS_AVX512
static void ToF16(const float* x, int n, uint16_t* out) { kern_avx2::ToF16(x, n, out); }
static void ConvertF16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  const float* table = F16Table();
  for (; i < n; ++i) dst[i] = table[src[i]];
}
static void ConvertBF16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  kern_base::ConvertBF16(src + i, n - i, dst + i);
}
static int FirstAbove(const float* x, int n, float t) {
  const __m512 tv = _mm512_set1_ps(t);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), tv, _CMP_GT_OQ);
    if (m != 0) return i + __builtin_ctz(static_cast<unsigned>(m));
  }
  return i + kern_base::FirstAbove(x + i, n - i, t);
}
}  // namespace kern_avx512
#pragma GCC pop_options

namespace {

struct Kernels {
  float (*dot)(const float*, const float*, int);
  void (*dot_rows_tokens)(const float* const*, int, const float*, int, int, float*, int64_t);
  void (*axpy)(float, const float*, float*, int);
  void (*dot_batch)(const float*, const float*, int64_t, int, int, float, float*);
  void (*axpy_rows)(const float*, const float*, int64_t, int, int, float*);
  void (*dot_gather)(const float*, const float* const*, int, int, float, float*);
  void (*axpy_gather)(const float*, const float* const*, int, int, float*);
  void (*dot_batch_f16)(const float*, const uint16_t*, int64_t, int, int, float, float*);
  void (*axpy_rows_f16)(const float*, const uint16_t*, int64_t, int, int, float*);
  void (*dot_gather_f16)(const float*, const uint16_t* const*, int, int, float, float*);
  void (*axpy_gather_f16)(const float*, const uint16_t* const*, int, int, float*);
  void (*dot_batch2)(const float*, const float*, const float*, int64_t, int, int, float, float*,
                     float*);
  void (*dot_batch2_f16)(const float*, const float*, const uint16_t*, int64_t, int, int, float,
                         float*, float*);
  void (*axpy_rows2)(const float*, const float*, const float*, int64_t, int, int, float*, float*);
  void (*axpy_rows2_f16)(const float*, const float*, const uint16_t*, int64_t, int, int, float*,
                         float*);
  void (*to_f16)(const float*, int, uint16_t*);
  void (*softmax)(float*, int);
  void (*swiglu)(const float*, const float*, int, float*);
  void (*geglu)(const float*, const float*, int, float*);
  void (*softcap)(float*, int, float);
  void (*f16)(const uint16_t*, int64_t, float*);
  void (*bf16)(const uint16_t*, int64_t, float*);
  void (*q8_0)(const uint8_t*, int64_t, const float*, float*);
  int (*first_above)(const float*, int, float);
};

#define GOOSE_KERNELS(ns)                                                                         \
  Kernels {                                                                                       \
    ns::Dot, ns::DotRowsTokens, ns::Axpy, ns::DotBatch, ns::AxpyRows, ns::DotGather,              \
        ns::AxpyGather, ns::DotBatchF16, ns::AxpyRowsF16, ns::DotGatherF16, ns::AxpyGatherF16,    \
        ns::DotBatch2, ns::DotBatch2F16, ns::AxpyRows2, ns::AxpyRows2F16, ns::ToF16, ns::Softmax, \
        ns::SwiGlu, ns::GeluGlu, ns::SoftCap, ns::ConvertF16, ns::ConvertBF16, ns::DequantQ8_0,   \
        ns::FirstAbove                                                                            \
  }
const Kernels kKernels[] = {GOOSE_KERNELS(kern_base), GOOSE_KERNELS(kern_avx2),
                            GOOSE_KERNELS(kern_avx512)};
#undef GOOSE_KERNELS

// The f32 kernels have no AMX code: that level runs their AVX-512 build.
const Kernels& Active() {
  const int level =
      std::min(static_cast<int>(ActiveCpuLevel()), static_cast<int>(CpuLevel::kAvx512));
  return kKernels[level];
}

// Rows converted to f32 per MatMul step: the block's weights are read from memory once and
// reused from L1/L2 for every token of the batch (weight-stationary).
constexpr int kRowBlock = 8;
static_assert(kRowBlock <= kern_base::kMaxRowsTokens, "DotRowsTokens' 16-token path");
// Below this many multiply-adds a MatMul runs on the calling thread: ~10 us of work, less than
// waking and joining the pool costs (and far less under CPU contention).
constexpr int64_t kMinParallelWork = 1 << 17;

void ConvertRow(const Kernels& k, const WeightMatrix& w, int64_t row, float* out) {
  const uint8_t* src = static_cast<const uint8_t*>(w.data) + row * w.row_bytes();
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(w.cols) * 4);
      return;
    case DType::kF16:
      k.f16(reinterpret_cast<const uint16_t*>(src), w.cols, out);
      return;
    case DType::kBF16:
      k.bf16(reinterpret_cast<const uint16_t*>(src), w.cols, out);
      return;
    case DType::kQ8_0:
      k.q8_0(src, w.cols, F16Table(), out);
      return;
    default:  // other quantized types: embedding rows only, the scalar reference is enough
      DequantizeRow(w.dtype, src, w.cols, out);
      return;
  }
}

void MatMulRows(const Kernels& k, const WeightMatrix& w, const float* x, int n_tokens, float* out,
                int64_t r0, int64_t r1) {
  thread_local AlignedVector<float> scratch;
  const int cols = static_cast<int>(w.cols);
  if (w.dtype != DType::kF32 && scratch.size() < static_cast<size_t>(kRowBlock * cols)) {
    scratch.resize(static_cast<size_t>(kRowBlock * cols));
  }
  const float* rows[kRowBlock];
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  const int64_t rb = w.row_bytes();
  for (int64_t r = r0; r < r1; r += kRowBlock) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowBlock, r1 - r));
    for (int j = 0; j < nr; ++j) {
      // Row j of the next block into cache while row j converts: a share of the prefetch per
      // row, so that DRAM reads overlap all the work. F16, 2 threads, one token: 4864x896
      // 0.33 -> 0.22-0.24 ms (26 -> 37-40 GB/s), 896x4864 0.36 -> 0.30 ms; into L2 only, a
      // little less.
      if (w.dtype != DType::kF32 && r + kRowBlock + j < r1) {
        const uint8_t* p = base + (r + kRowBlock + j) * rb;
        for (int64_t o = 0; o < rb; o += 64) PrefetchLine<true>(p + o);
      }
      if (w.dtype == DType::kF32) {
        rows[j] = static_cast<const float*>(w.data) + (r + j) * w.cols;
      } else {
        float* dst = scratch.data() + static_cast<size_t>(j) * cols;
        ConvertRow(k, w, r + j, dst);
        rows[j] = dst;
      }
    }
    k.dot_rows_tokens(rows, nr, x, n_tokens, cols, out + r, w.rows);
  }
}

}  // namespace

namespace {
std::atomic<bool> g_timer_on{false};
std::atomic<int64_t> g_timer_ns{0};

void MatMulImpl(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool);
}  // namespace

void EnableMatMulTimer(bool on) {
  g_timer_ns.store(0);
  g_timer_on.store(on);
}

double MatMulSeconds() { return static_cast<double>(g_timer_ns.load()) * 1e-9; }

namespace {
// f(), its wall time added to the MatMul timer while that is on.
template <class F>
void Timed(F&& f) {
  if (!g_timer_on.load(std::memory_order_relaxed)) return f();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  g_timer_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count(),
      std::memory_order_relaxed);
}
}  // namespace

void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool) {
  Timed([&] { MatMulImpl(w, x, n_tokens, out, pool); });
}

void MatMulShared(const WeightMatrix* const* w, int n_w, const float* x, int n_tokens,
                  float* const* out, ThreadPool* pool) {
  GOOSE_CHECK(n_w >= 1 && n_w <= kMaxMatMulShared);
  if (n_tokens <= 0) return;
  // Matrices of one quantized dtype, width and layout run together (a Q4_K_M file's Q and K,
  // say, while its Q6_K V runs on its own); the rest one MatMul each.
  bool done[kMaxMatMulShared] = {};
  for (int i = 0; i < n_w; ++i) {
    if (done[i]) continue;
    if (!IsIntDotType(w[i]->dtype)) {
      MatMul(*w[i], x, n_tokens, out[i], pool);
      continue;
    }
    const WeightMatrix* group[kMaxMatMulShared];
    float* group_out[kMaxMatMulShared];
    int n = 0;
    for (int j = i; j < n_w; ++j) {
      if (!done[j] && w[j]->dtype == w[i]->dtype && w[j]->cols == w[i]->cols &&
          w[j]->layout == w[i]->layout) {
        group[n] = w[j];
        group_out[n++] = out[j];
        done[j] = true;
      }
    }
    Timed([&] {
      QMatMulShared(group, n, x, n_tokens, group_out, pool, IntKernelFor(ActiveCpuLevel()));
    });
  }
}

namespace {
void MatMulImpl(const WeightMatrix& w, const float* x, int n_tokens, float* out, ThreadPool* pool) {
  if (n_tokens <= 0 || w.rows <= 0) return;
  if (IsIntDotType(w.dtype)) {
    QMatMul(w, x, n_tokens, out, pool, IntKernelFor(ActiveCpuLevel()));
    return;
  }
  const Kernels& k = Active();
  const int64_t work = w.rows * w.cols * n_tokens;
  if (pool == nullptr || pool->size() == 1 || work < kMinParallelWork) {
    MatMulRows(k, w, x, n_tokens, out, 0, w.rows);
    return;
  }
  // Threads split output rows only; each row's reduction is the same whatever the split.
  pool->ParallelFor(w.rows,
                    [&](int64_t r0, int64_t r1) { MatMulRows(k, w, x, n_tokens, out, r0, r1); });
}
}  // namespace

void GetRow(const WeightMatrix& w, int64_t row, float* out) {
  GOOSE_CHECK(row >= 0 && row < w.rows);
  if (w.layout == WeightLayout::kTiles) {  // the row rebuilt from its tile first
    thread_local std::vector<uint8_t> blocks;
    blocks.resize(static_cast<size_t>(w.row_bytes()));
    TiledRow(w, row, blocks.data());
    DequantizeRow(w.dtype, blocks.data(), w.cols, out);
    return;
  }
  ConvertRow(Active(), w, row, out);
}

float Dot(const float* a, const float* b, int n) { return Active().dot(a, b, n); }

int FirstAbove(const float* x, int n, float t) { return Active().first_above(x, n, t); }

void Axpy(float a, const float* x, float* y, int n) { Active().axpy(a, x, y, n); }

void DotBatch(const float* q, const float* keys, int64_t stride, int n_keys, int n, float scale,
              float* out) {
  Active().dot_batch(q, keys, stride, n_keys, n, scale, out);
}

void AxpyRows(const float* w, const float* rows, int64_t stride, int n_rows, int n, float* out) {
  Active().axpy_rows(w, rows, stride, n_rows, n, out);
}

void DotGather(const float* q, const float* const* keys, int n_keys, int n, float scale,
               float* out) {
  Active().dot_gather(q, keys, n_keys, n, scale, out);
}

void AxpyGather(const float* w, const float* const* rows, int n_rows, int n, float* out) {
  Active().axpy_gather(w, rows, n_rows, n, out);
}

void DotBatch(const float* q, const uint16_t* keys, int64_t stride, int n_keys, int n, float scale,
              float* out) {
  Active().dot_batch_f16(q, keys, stride, n_keys, n, scale, out);
}

void AxpyRows(const float* w, const uint16_t* rows, int64_t stride, int n_rows, int n, float* out) {
  Active().axpy_rows_f16(w, rows, stride, n_rows, n, out);
}

void DotGather(const float* q, const uint16_t* const* keys, int n_keys, int n, float scale,
               float* out) {
  Active().dot_gather_f16(q, keys, n_keys, n, scale, out);
}

void AxpyGather(const float* w, const uint16_t* const* rows, int n_rows, int n, float* out) {
  Active().axpy_gather_f16(w, rows, n_rows, n, out);
}

void DotBatch2(const float* q0, const float* q1, const float* keys, int64_t stride, int n_keys,
               int n, float scale, float* out0, float* out1) {
  Active().dot_batch2(q0, q1, keys, stride, n_keys, n, scale, out0, out1);
}

void DotBatch2(const float* q0, const float* q1, const uint16_t* keys, int64_t stride, int n_keys,
               int n, float scale, float* out0, float* out1) {
  Active().dot_batch2_f16(q0, q1, keys, stride, n_keys, n, scale, out0, out1);
}

void AxpyRows2(const float* w0, const float* w1, const float* rows, int64_t stride, int n_rows,
               int n, float* out0, float* out1) {
  Active().axpy_rows2(w0, w1, rows, stride, n_rows, n, out0, out1);
}

void AxpyRows2(const float* w0, const float* w1, const uint16_t* rows, int64_t stride, int n_rows,
               int n, float* out0, float* out1) {
  Active().axpy_rows2_f16(w0, w1, rows, stride, n_rows, n, out0, out1);
}

void ConvertToF16(const float* x, int n, uint16_t* out) { Active().to_f16(x, n, out); }

void RmsNorm(const float* x, const float* weight, int n, float eps, float* y) {
  const float mean = Dot(x, x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
}

void RopeCosSin(int pos, int n_rot, float base, float freq_scale, const float* freq_factors,
                float* cos_out, float* sin_out) {
  // As ggml: theta_i = pos * theta_scale^i by repeated multiplication, divided by the frequency
  // factor, then linear scaling.
  const float theta_scale = powf(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < n_rot / 2; ++i) {
    const float t = freq_scale * (freq_factors ? theta / freq_factors[i] : theta);
    cos_out[i] = cosf(t);
    sin_out[i] = sinf(t);
    theta *= theta_scale;
  }
}

void RopeApply(float* v, int n_rot, const float* cos_t, const float* sin_t, bool neox) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const int i0 = neox ? i : 2 * i;
    const int i1 = neox ? i + half : 2 * i + 1;
    const float x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * cos_t[i] - x1 * sin_t[i];
    v[i1] = x0 * sin_t[i] + x1 * cos_t[i];
  }
}

void Rope(float* v, int head_dim, int n_rot, int pos, float base, float freq_scale, bool neox) {
  GOOSE_CHECK(n_rot <= head_dim && n_rot % 2 == 0);
  std::vector<float> cs(static_cast<size_t>(n_rot));
  RopeCosSin(pos, n_rot, base, freq_scale, nullptr, cs.data(), cs.data() + n_rot / 2);
  RopeApply(v, n_rot, cs.data(), cs.data() + n_rot / 2, neox);
}

void SwiGlu(const float* gate, const float* up, int n, float* out) {
  Active().swiglu(gate, up, n, out);
}

void GeluGlu(const float* gate, const float* up, int n, float* out) {
  Active().geglu(gate, up, n, out);
}

void SoftCap(float* x, int n, float cap) { Active().softcap(x, n, cap); }

void Softmax(float* x, int n) { Active().softmax(x, n); }

}  // namespace goose
