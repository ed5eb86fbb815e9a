#include "budget/verify_cost.h"

#include <algorithm>
#include <chrono>

#include "util/rng.h"

namespace goose {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
  Context ctx(model, opt.prefix + max_nodes + 1, pool, opt.kv_type);
  SplitMix64 rng(opt.seed);
  const int n_vocab = model.config().n_vocab;
  std::vector<int32_t> prefix(opt.prefix);
  for (int32_t& t : prefix) t = static_cast<int32_t>(rng.Below(n_vocab));
  GOOSE_RETURN_IF_ERROR(ctx.ForwardChain(prefix));
  std::vector<int32_t> keep(opt.prefix);
  for (int i = 0; i < opt.prefix; ++i) keep[i] = i;
  ctx.KeepPath(keep);

  // Interleaved rounds: every size once per round, in an order rotated per round, so a burst of
  // load from another process hits all sizes alike instead of one size's run of repetitions.
  // Round 0 warms up. A short pass (weights that sit in the caches) is timed after a few untimed
  // ones of its own size: right after a big pass it runs up to twice as slow for a couple of
  // passes, which decoding, a run of small passes, never sees (the tiny model's c(1) measured
  // 0.17 ms that way against 0.065 ms warm, and --budget auto chose trees that lost to plain
  // steps).
  constexpr double kShortPass = 0.002;
  constexpr int kWarmPasses = 4;
  const int n_sizes = static_cast<int>(opt.nodes.size());
  std::vector<std::vector<double>> times(n_sizes);
  std::vector<double> matmul(n_sizes, 0.0), total(n_sizes, 0.0), last(n_sizes, 0.0);
  EnableMatMulTimer(true);
  for (int round = 0; round <= opt.reps; ++round) {
    for (int k = 0; k < n_sizes; ++k) {
      const int s = (k + round) % n_sizes;
      const int n = opt.nodes[s];
      std::vector<int32_t> tokens(n), parents(n);
      for (int i = 0; i < n; ++i) {
        tokens[i] = static_cast<int32_t>(rng.Below(n_vocab));
        parents[i] = i == 0 ? -1 : static_cast<int32_t>(rng.Below(i));
      }
      const int warm = round > 0 && last[s] < kShortPass ? kWarmPasses : 0;
      for (int w = 0; w < warm; ++w) GOOSE_RETURN_IF_ERROR(ctx.Forward(tokens, parents));
      const double mm0 = MatMulSeconds();
      const double t0 = Now();
      GOOSE_RETURN_IF_ERROR(ctx.Forward(tokens, parents));
      const double dt = Now() - t0;
      last[s] = dt;
      if (round == 0) continue;
      times[s].push_back(dt);
      total[s] += dt;
      matmul[s] += MatMulSeconds() - mm0;
    }
  }
  EnableMatMulTimer(false);
  std::vector<VerifyCostPoint> curve;
  for (int s = 0; s < n_sizes; ++s) {
    curve.push_back({opt.nodes[s], Median(times[s]),
                     *std::min_element(times[s].begin(), times[s].end()),
                     total[s] > 0 ? matmul[s] / total[s] : 0});
  }
  return curve;
}

DepthCost DepthCostFrom(int shallow, int deep, double c1_shallow, double c1_deep, int n,
                        double cn_shallow, double cn_deep) {
  DepthCost d;
  d.depth = shallow;
  if (deep <= shallow || n <= 1) return d;
  const double span = deep - shallow;
  const double a1 = std::max(0.0, (c1_deep - c1_shallow) / span);  // per_key + per_row_key
  const double an = std::max(0.0, (cn_deep - cn_shallow) / span);  // per_key + n per_row_key
  d.per_row_key = std::max(0.0, (an - a1) / (n - 1));
  d.per_key = std::max(0.0, a1 - d.per_row_key);
  return d;
}

}  // namespace goose
