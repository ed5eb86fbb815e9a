#include "bench/verify_cost.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "ops/cpu_features.h"

#include "util/rng.h"

namespace goose {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

StatusOr<std::vector<VerifyCostPoint>> MeasureVerifyCost(const Model& model, ThreadPool* pool,
                                                         const VerifyCostOptions& opt) {
  if (opt.nodes.empty()) return Status::Error("no node counts to measure");
  const int max_nodes = *std::max_element(opt.nodes.begin(), opt.nodes.end());
  if (max_nodes < 1 || opt.prefix < 1 || opt.reps < 1) {
    return Status::Error("node counts, prefix and reps must be positive");
  }
  // Checked before the KV cache is allocated: an absurd prefix is an error, not a huge buffer.
  const int model_ctx = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096;
  if (static_cast<int64_t>(opt.prefix) + max_nodes > model_ctx) {
    return Status::Error(StrFormat("prefix %d + %d nodes exceed the model's context of %d",
                                   opt.prefix, max_nodes, model_ctx));
  }
  Context ctx(model, opt.prefix + max_nodes + 1, pool);
  SplitMix64 rng(opt.seed);
  const int n_vocab = model.config().n_vocab;
  std::vector<int32_t> prefix(opt.prefix);
  for (int32_t& t : prefix) t = static_cast<int32_t>(rng.Below(n_vocab));
  GOOSE_RETURN_IF_ERROR(ctx.ForwardChain(prefix));
  std::vector<int32_t> keep(opt.prefix);
  for (int i = 0; i < opt.prefix; ++i) keep[i] = i;
  ctx.KeepPath(keep);

  std::vector<VerifyCostPoint> curve;
  for (int n : opt.nodes) {
    std::vector<double> times;
    for (int rep = 0; rep <= opt.reps; ++rep) {  // rep 0 warms up
      if (rep == 1) EnableMatMulTimer(true);
      std::vector<int32_t> tokens(n), parents(n);
      for (int i = 0; i < n; ++i) {
        tokens[i] = static_cast<int32_t>(rng.Below(n_vocab));
        parents[i] = i == 0 ? -1 : static_cast<int32_t>(rng.Below(i));
      }
      const double t0 = Now();
      GOOSE_RETURN_IF_ERROR(ctx.Forward(tokens, parents));
      const double dt = Now() - t0;
      if (rep > 0) times.push_back(dt);
    }
    double total = 0;
    for (double t : times) total += t;
    curve.push_back({n, Median(times), total > 0 ? MatMulSeconds() / total : 0});
    EnableMatMulTimer(false);
  }
  return curve;
}

void MakeMonotone(std::vector<VerifyCostPoint>* curve) {
  auto by_nodes = [](const VerifyCostPoint& a, const VerifyCostPoint& b) {
    return a.nodes < b.nodes;
  };
  std::stable_sort(curve->begin(), curve->end(), by_nodes);
  for (size_t i = curve->size(); i-- > 1;) {
    (*curve)[i - 1].seconds = std::min((*curve)[i - 1].seconds, (*curve)[i].seconds);
  }
}

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
  const double per_layer = c.n_embd * (q_dim + 2 * kv_dim) + q_dim * c.n_embd +
                           3.0 * c.n_embd * c.n_ff;
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
