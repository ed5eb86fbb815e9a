#include "bench/machine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu_features.h"

namespace goose {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double MeasureReadBandwidth(ThreadPool* pool, size_t bytes) {
  const size_t n = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  pool->ParallelFor(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sinks(pool->size());
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = Now();
    pool->Run([&](int t, int nt) {
      const size_t b = n * t / nt, e = n * (t + 1) / nt;
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        a0 += buf[i];
        a1 += buf[i + 1];
        a2 += buf[i + 2];
        a3 += buf[i + 3];
      }
      for (; i < e; ++i) a0 += buf[i];
      sinks[t] = a0 + a1 + a2 + a3;
    });
    const double dt = Now() - t0;
    if (rep > 0) best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / dt / 1e9);
  }
  volatile uint64_t sink = 0;
  for (uint64_t s : sinks) sink = sink + s;
  (void)sink;
  return best;
}

double PassFlops(const LlamaConfig& c, int nodes, int prefix) {
  const double q_dim = static_cast<double>(c.n_head) * c.head_dim;
  const double kv_dim = static_cast<double>(c.n_head_kv) * c.head_dim;
  const double per_layer =
      c.n_embd * (q_dim + 2 * kv_dim) + q_dim * c.n_embd + 3.0 * c.n_embd * c.n_ff;
  const double weights = per_layer * c.n_layer + static_cast<double>(c.n_vocab) * c.n_embd;
  const double attention = 4.0 * c.n_layer * q_dim * (prefix + 1);  // QK and AV
  return nodes * (2.0 * weights + attention);
}

CpuPeak EstimateCpuPeak(int threads) {
  CpuPeak p;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.cores = std::max(1, std::min(threads, hw));
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double mhz = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) mhz = std::max(mhz, std::atof(line.c_str() + colon + 1));
  }
  p.ghz = mhz / 1000.0;
  const CpuLevel level = ActiveCpuLevel();  // GOOSE_CPU may cap it
  if (level == CpuLevel::kAmx) {
    // AMX: one 16x16x64 int8 tile multiply (32768 ops) per 16 cycles per core.
    p.path = "avx512-amx";
    p.f32_flop_per_cycle = 64;
    p.int8_op_per_cycle = 2048;
  } else if (level == CpuLevel::kAvx512) {
    p.path = HasAvx512Vnni() ? "avx512-vnni" : "avx512";
    p.f32_flop_per_cycle = 64;
    p.int8_op_per_cycle = HasAvx512Vnni() ? 256 : 128;
  } else if (level == CpuLevel::kAvx2) {
    p.path = "avx2";
    p.f32_flop_per_cycle = 32;
    p.int8_op_per_cycle = 128;
  } else {
    p.path = "x86-64-v2";
    p.f32_flop_per_cycle = 16;
    p.int8_op_per_cycle = 32;
  }
  return p;
}

}  // namespace goose
