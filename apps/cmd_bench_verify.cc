// goose bench-verify: cost of one tree pass of N nodes after a prefix, next to plain decode
// speed, the model's weight bytes, the machine's measured read bandwidth and the CPU's nominal
// peak: per pass, achieved GB/s (weight bytes / pass time: weights are read once per pass) and
// GFLOP/s (PassFlops / pass time) and the share of pass time spent in MatMul, and for plain
// decode the share of time spent outside MatMul (norms, RoPE, attention, threading overhead).
// With --sequences S: one pass over S sequences' trees (BatchPass) against one pass each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "budget/verify_cost.h"
#include "commands.h"
#include "engine/session.h"
#include "model/model.h"
#include "ops/ops.h"
#include "util/rng.h"

namespace goose::cli {

namespace {

struct DecodeProfile {
  double seconds_per_token = 0;
  double matmul_share = 0;
};

// Plain one-token passes after `prefix` tokens, with MatMul's timer on.
StatusOr<DecodeProfile> ProfileDecode(const Model& model, ThreadPool* pool, int prefix, int tokens,
                                      KvType kv) {
  Context ctx(model, prefix + tokens + 1, pool, kv);
  SplitMix64 rng(3);
  const int n_vocab = model.config().n_vocab;
  std::vector<int32_t> prompt(prefix);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.Below(n_vocab));
  GOOSE_RETURN_IF_ERROR(ctx.ForwardChain(prompt));
  ctx.KeepAll();
  EnableMatMulTimer(true);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < tokens; ++i) {
    const int32_t tok = static_cast<int32_t>(rng.Below(n_vocab));
    GOOSE_RETURN_IF_ERROR(ctx.ForwardChain({&tok, 1}));
    ctx.KeepAll();
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DecodeProfile p;
  p.seconds_per_token = total / tokens;
  p.matmul_share = total > 0 ? MatMulSeconds() / total : 0;
  EnableMatMulTimer(false);
  return p;
}

// --sequences S: one pass over S sequences of N rows each (BatchPass) against S passes of N
// rows, one per sequence; each sequence has its own `prefix` tokens in its own cache.
struct SequencesPoint {
  int nodes = 0;
  double batched = 0, separate = 0;  // median seconds: the one pass, the S passes
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rounds over the sizes in rotated orders (round 0 warms up); within a round the batched and
// the separate passes of a size run back to back, which goes first alternating by round, so a
// burst of load from another process hits both alike.
StatusOr<std::vector<SequencesPoint>> MeasureSequences(const Model& model, ThreadPool* pool,
                                                       int n_seqs, int prefix,
                                                       const std::vector<int>& nodes, int reps,
                                                       KvType kv) {
  const int max_nodes = *std::max_element(nodes.begin(), nodes.end());
  const int n_vocab = model.config().n_vocab;
  SplitMix64 rng(5);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng.Below(n_vocab));
    return t;
  };
  std::vector<std::unique_ptr<Context>> ctxs;
  for (int s = 0; s < n_seqs; ++s) {
    ctxs.push_back(std::make_unique<Context>(model, prefix + max_nodes + 1, pool, kv));
    GOOSE_RETURN_IF_ERROR(ctxs.back()->ForwardChain(random_tokens(prefix)));
    ctxs.back()->KeepAll();
  }
  BatchPass pass(model, pool);
  const int n_sizes = static_cast<int>(nodes.size());
  std::vector<std::vector<double>> batched(n_sizes), separate(n_sizes);
  std::vector<std::vector<int32_t>> tokens(n_seqs), parents(n_seqs);
  std::vector<SequenceRows> rows(n_seqs);
  for (int round = 0; round <= reps; ++round) {
    for (int k = 0; k < n_sizes; ++k) {
      const int z = (k + round) % n_sizes, n = nodes[z];
      for (int s = 0; s < n_seqs; ++s) {
        tokens[s] = random_tokens(n);
        parents[s].resize(n);
        for (int i = 0; i < n; ++i) {
          parents[s][i] = i == 0 ? -1 : static_cast<int32_t>(rng.Below(i));
        }
        rows[s] = {ctxs[s].get(), tokens[s], parents[s]};
      }
      for (int order = 0; order < 2; ++order) {
        const auto t0 = std::chrono::steady_clock::now();
        if ((order + round) % 2 == 0) {
          GOOSE_RETURN_IF_ERROR(pass.Forward(rows));
          if (round > 0) batched[z].push_back(Seconds(t0));
        } else {
          for (int s = 0; s < n_seqs; ++s) {
            GOOSE_RETURN_IF_ERROR(ctxs[s]->Forward(tokens[s], parents[s]));
          }
          if (round > 0) separate[z].push_back(Seconds(t0));
        }
      }
    }
  }
  std::vector<SequencesPoint> out;
  for (int z = 0; z < n_sizes; ++z) {
    out.push_back({nodes[z], Median(batched[z]), Median(separate[z])});
  }
  return out;
}

int PrintSequences(const std::vector<SequencesPoint>& points, int n_seqs, int prefix, int threads,
                   bool json) {
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : points) {
      arr.push_back(
          {{"nodes", p.nodes}, {"batched_seconds", p.batched}, {"separate_seconds", p.separate}});
    }
    nlohmann::json j = {
        {"sequences", n_seqs}, {"prefix", prefix}, {"threads", threads}, {"curve", arr}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "%d sequences, each %d tokens in its cache, %d threads: one pass over all their "
      "rows vs one pass per sequence\n",
      n_seqs, prefix, threads);
  std::printf("%6s %6s %13s %15s %9s %14s %16s\n", "nodes", "rows", "one pass ms", "S passes ms",
              "speedup", "rows/s (one)", "rows/s (S passes)");
  for (const auto& p : points) {
    const int rows = p.nodes * n_seqs;
    std::printf("%6d %6d %13.3f %15.3f %8.2fx %14.1f %16.1f\n", p.nodes, rows, p.batched * 1e3,
                p.separate * 1e3, p.separate / p.batched, rows / p.batched, rows / p.separate);
  }
  return 0;
}

struct BenchVerifyFlags {
  std::string model;
  std::vector<int> nodes = {1, 2, 4, 8, 16, 32, 64, 128};
  int prefix = 256, reps = 5, threads = 0, sequences = 1;
  KvType kv = KvType::kF16;
  bool json = false;
};

int PrintCurve(const BenchVerifyFlags& f, const std::string& path, const Model& model,
               ThreadPool& pool, const std::vector<VerifyCostPoint>& curve,
               const DecodeProfile& decode, double c1) {
  const double bw = MeasureReadBandwidth(&pool);
  const uint64_t bytes = model.weight_bytes();
  const LlamaConfig& cfg = model.config();
  // What a pass reads besides the weights: the KV cache of the prefix.
  const uint64_t kv_bytes = KvCacheBytes(cfg, f.prefix, f.kv);
  const CpuPeak peak = EstimateCpuPeak(pool.size());
  const double decode_tps = 1.0 / decode.seconds_per_token;
  if (f.json) {
    nlohmann::json j;
    j["model_bytes"] = bytes;
    j["kv_type"] = KvTypeName(f.kv);
    j["kv_bytes_at_prefix"] = kv_bytes;
    j["bandwidth_gbps"] = bw;
    j["decode_tokens_per_second"] = decode_tps;
    j["decode_matmul_share"] = decode.matmul_share;
    j["peak_f32_gflops"] = peak.f32_gflops();
    j["peak_int8_gops"] = peak.int8_gops();
    j["threads"] = pool.size();
    j["prefix"] = f.prefix;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : curve) {
      arr.push_back({{"nodes", p.nodes},
                     {"seconds", p.seconds},
                     {"matmul_share", p.matmul_share},
                     {"gbps", (bytes + kv_bytes) / p.seconds / 1e9},
                     {"gflops", PassFlops(cfg, p.nodes, f.prefix) / p.seconds / 1e9}});
    }
    j["curve"] = arr;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "model: %s\nweights: %.2f MB | %s KV cache at %d tokens: %.2f MB | read "
      "bandwidth: %.1f GB/s | threads: %d\n",
      path.c_str(), bytes / 1e6, KvTypeName(f.kv), f.prefix, kv_bytes / 1e6, bw, pool.size());
  std::printf(
      "nominal peak (%d cores x %.2f GHz, %s; assumes 2 vector pipes/core): "
      "%.0f GFLOP/s f32, %.0f GOP/s int8\n",
      peak.cores, peak.ghz, peak.path, peak.f32_gflops(), peak.int8_gops());
  const double read = (bytes + kv_bytes) * decode_tps / 1e9;
  std::printf(
      "plain decode: %.1f tok/s = %.1f GB/s of weights and KV cache (%.0f%% of measured "
      "bandwidth; the limit is %.1f tok/s); %.0f%% of decode time outside matmuls\n",
      decode_tps, read, 100.0 * read / bw, bw * 1e9 / (bytes + kv_bytes),
      100.0 * (1.0 - decode.matmul_share));
  std::printf("%6s %12s %10s %12s %8s %9s %8s\n", "nodes", "ms/pass", "c(N)/c(1)", "tokens/s",
              "GB/s", "GFLOP/s", "matmul");
  for (const auto& p : curve) {
    std::printf("%6d %12.3f %10.2f %12.1f %8.1f %9.1f %7.0f%%\n", p.nodes, p.seconds * 1e3,
                c1 > 0 ? p.seconds / c1 : 0.0, p.nodes / p.seconds,
                (bytes + kv_bytes) / p.seconds / 1e9,
                PassFlops(cfg, p.nodes, f.prefix) / p.seconds / 1e9, 100.0 * p.matmul_share);
  }
  return 0;
}

int RunBenchVerify(const BenchVerifyFlags& f) {
  const std::string path = ResolveModelPath(f.model);
  if (path.empty()) return 1;
  auto model = Model::Load(path);
  if (!model.ok()) return Fail(model.status().message());
  // One context at a time: the tree passes' (prefix + nodes), then plain decoding's (prefix +
  // at most 128 tokens); the prefix is one batch.
  const int max_nodes = *std::max_element(f.nodes.begin(), f.nodes.end());
  const int n_ctx = f.prefix + std::max(max_nodes, 128) + 1;
  if (Status st = CheckContextMemory((*model)->config(), n_ctx, std::max(f.prefix, max_nodes),
                                     f.sequences, "--prefix or --sequences", f.kv);
      !st.ok()) {
    return Fail(st.message());
  }
  ThreadPool pool(f.threads > 0 ? f.threads : ThreadPool::DefaultThreads());
  if (f.sequences > 1) {
    if (!f.json) std::fprintf(stderr, "measuring %zu sizes...\n", f.nodes.size());
    auto points = MeasureSequences(**model, &pool, f.sequences, f.prefix, f.nodes, f.reps, f.kv);
    if (!points.ok()) return Fail(points.status().message());
    return PrintSequences(*points, f.sequences, f.prefix, pool.size(), f.json);
  }
  VerifyCostOptions opt;
  opt.nodes = f.nodes;
  opt.prefix = f.prefix;
  opt.reps = f.reps;
  opt.kv_type = f.kv;
  if (!f.json) std::fprintf(stderr, "measuring %zu tree sizes...\n", opt.nodes.size());
  auto curve = MeasureVerifyCost(**model, &pool, opt);
  if (!curve.ok()) return Fail(curve.status().message());
  // One-token passes for ~0.5 s of decoding, at least `reps` and at most 128 (so the
  // context, and with it attention's cost, stays close to the prefix).
  double c1 = 0;
  for (const auto& p : *curve) {
    if (p.nodes == 1) c1 = p.seconds;
  }
  const int decode_tokens =
      std::max(opt.reps, std::min(128, c1 > 0 ? static_cast<int>(0.5 / c1) : opt.reps));
  auto decode = ProfileDecode(**model, &pool, opt.prefix, decode_tokens, f.kv);
  if (!decode.ok()) return Fail(decode.status().message());
  return PrintCurve(f, path, **model, pool, *curve, *decode, c1);
}

}  // namespace

Runner AddBenchVerifyCommand(CLI::App& app) {
  auto f = std::make_shared<BenchVerifyFlags>();
  app.add_option("-m,--model", f->model, "GGUF model");
  app.add_option("--nodes", f->nodes, "tree sizes to time")->delimiter(',')->check(IntIn(1, 128));
  app.add_option("--prefix", f->prefix, "tokens already in the KV cache")->check(IntIn(1, 1 << 20));
  app.add_option("--reps", f->reps, "timed passes per size (median)")->check(IntIn(1, 10000));
  app.add_option("-t,--threads", f->threads, "threads, at most 64 (0 = all cores)")
      ->check(IntIn(0, 64));
  app.add_option("--sequences", f->sequences,
                 "S > 1: one pass over S sequences of N nodes each vs S passes of N nodes")
      ->check(IntIn(1, 64));
  AddKvTypeFlag(app, &f->kv);
  app.add_flag("--json", f->json, "print one JSON object");
  return [f] { return RunBenchVerify(*f); };
}

}  // namespace goose::cli
