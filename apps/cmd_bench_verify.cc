// goose bench-verify: cost of one tree pass of N nodes after a prefix, next to plain decode
// speed, the model's weight bytes and the machine's measured read bandwidth.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench/verify_cost.h"
#include "commands.h"
#include "model/model.h"

namespace goose::cli {

Runner AddBenchVerifyCommand(CLI::App& app) {
  struct Flags {
    std::string model;
    std::vector<int> nodes = {1, 2, 4, 8, 16, 32, 64, 128};
    int prefix = 256, reps = 5, threads = 0;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("-m,--model", f->model, "GGUF model");
  app.add_option("--nodes", f->nodes, "tree sizes to time")->delimiter(',')->check(CLI::Range(1, 128));
  app.add_option("--prefix", f->prefix, "tokens already in the KV cache")->check(CLI::Range(1, 1 << 20));
  app.add_option("--reps", f->reps, "timed passes per size (median)")->check(CLI::Range(1, 10000));
  app.add_option("-t,--threads", f->threads, "threads (0 = all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--json", f->json, "print one JSON object");
  return [f] {
    const std::string path = ResolveModelPath(f->model);
    if (path.empty()) return 1;
    auto model = Model::Load(path);
    if (!model.ok()) return Fail(model.status().message());
    ThreadPool pool(f->threads > 0 ? f->threads : ThreadPool::DefaultThreads());
    VerifyCostOptions opt;
    opt.nodes = f->nodes;
    opt.prefix = f->prefix;
    opt.reps = f->reps;
    if (!f->json) std::fprintf(stderr, "measuring %zu tree sizes...\n", opt.nodes.size());
    auto curve = MeasureVerifyCost(**model, &pool, opt);
    if (!curve.ok()) return Fail(curve.status().message());
    const double bw = MeasureReadBandwidth(&pool);
    const uint64_t bytes = (*model)->weight_bytes();
    double c1 = 0;
    for (const auto& p : *curve) {
      if (p.nodes == 1) c1 = p.seconds;
    }
    const double decode_tps = c1 > 0 ? 1.0 / c1 : 0.0;
    if (f->json) {
      nlohmann::json j;
      j["model_bytes"] = bytes;
      j["bandwidth_gbps"] = bw;
      j["decode_tokens_per_second"] = decode_tps;
      j["threads"] = pool.size();
      j["prefix"] = opt.prefix;
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : *curve) arr.push_back({{"nodes", p.nodes}, {"seconds", p.seconds}});
      j["curve"] = arr;
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::printf("model: %s\nweights: %.2f MB | read bandwidth: %.1f GB/s | threads: %d\n",
                path.c_str(), bytes / 1e6, bw, pool.size());
    if (c1 > 0) {
      std::printf("plain decode: %.1f tok/s = %.1f GB/s of weights (%.0f%% of measured bandwidth)\n",
                  decode_tps, bytes * decode_tps / 1e9, 100.0 * bytes * decode_tps / 1e9 / bw);
    }
    std::printf("%6s %12s %10s %12s\n", "nodes", "ms/pass", "c(N)/c(1)", "tokens/s");
    for (const auto& p : *curve) {
      std::printf("%6d %12.3f %10.2f %12.1f\n", p.nodes, p.seconds * 1e3,
                  c1 > 0 ? p.seconds / c1 : 0.0, p.nodes / p.seconds);
    }
    return 0;
  };
}

}  // namespace goose::cli
