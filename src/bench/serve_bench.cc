#include "bench/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "bench/bench_report.h"
#include "engine/report.h"
#include "engine/serving_loop.h"

namespace goose {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct RequestRecord {
  double submit = 0, first = -1, done = 0;  // seconds since the configuration began
  std::vector<int32_t> tokens;
  SpecStats stats;
  Status status;
};

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The p-th percentile (0..100) of `v` (nearest rank); 0 if empty.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::max(0.0, std::ceil(p / 100 * v.size()) - 1));
  return v[std::min(k, v.size() - 1)];
}

// One client: requests from the shared counter, one at a time, until none is left.
void Client(ServingLoop& loop, const std::vector<std::vector<int32_t>>& prompts,
            const GenerateParams& params, Clock::time_point t0, std::atomic<size_t>* next,
            std::vector<RequestRecord>* records) {
  for (size_t i = (*next)++; i < prompts.size(); i = (*next)++) {
    RequestRecord& rec = (*records)[i];
    std::promise<void> done;
    ServingRequest r;
    r.prompt = prompts[i];
    r.params = params;
    r.on_tokens = [&rec, t0](std::span<const int32_t>) {
      if (rec.first < 0) rec.first = Since(t0);
      return true;
    };
    r.on_done = [&rec, &done, t0](int, StatusOr<GenerateResult> result, bool) {
      rec.done = Since(t0);
      if (result.ok()) {
        rec.tokens = std::move(result->tokens);
        rec.stats = result->stats;
      } else {
        rec.status = result.status();
      }
      done.set_value();
    };
    rec.submit = Since(t0);
    if (loop.Submit(std::move(r)) != ServingLoop::Admit::kQueued) {
      rec.status = Status::Error("the serving loop refused a request");
      continue;
    }
    done.get_future().wait();
  }
}

// One configuration: `n_clients` clients against a loop of as many slots.
StatusOr<json> RunConfig(Session& session, const std::vector<std::vector<int32_t>>& prompts,
                         int n_clients, const GenerateParams& params,
                         std::vector<std::vector<int32_t>>* outputs) {
  ServingLoop loop(session, n_clients, static_cast<int>(prompts.size()));
  std::vector<RequestRecord> records(prompts.size());
  std::atomic<size_t> next{0};
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < n_clients; ++c) {
    clients.emplace_back(Client, std::ref(loop), std::cref(prompts), std::cref(params), t0, &next,
                         &records);
  }
  for (std::thread& t : clients) t.join();
  const double wall = Since(t0);
  const PassCounters pc = loop.counters();
  std::vector<double> ttft, latency, per_request;
  int64_t tokens = 0;
  SpecStats stats;
  for (RequestRecord& rec : records) {
    if (!rec.status.ok()) return rec.status;
    ttft.push_back(rec.first - rec.submit);
    latency.push_back(rec.done - rec.submit);
    if (rec.tokens.size() > 1 && rec.done > rec.first) {
      per_request.push_back((rec.tokens.size() - 1) / (rec.done - rec.first));
    }
    tokens += static_cast<int64_t>(rec.tokens.size());
    stats.Merge(rec.stats);
    outputs->push_back(std::move(rec.tokens));
  }
  const double passes = static_cast<double>(std::max<int64_t>(pc.passes, 1));
  return json{{"clients", n_clients},
              {"requests", prompts.size()},
              {"generated_tokens", tokens},
              {"wall_seconds", wall},
              {"aggregate_tokens_per_second", wall > 0 ? tokens / wall : 0.0},
              {"per_request_tokens_per_second", Percentile(per_request, 50)},
              {"ttft_seconds", {{"p50", Percentile(ttft, 50)}, {"p90", Percentile(ttft, 90)}}},
              {"latency_seconds",
               {{"p50", Percentile(latency, 50)},
                {"p90", Percentile(latency, 90)},
                {"p99", Percentile(latency, 99)}}},
              {"mean_accepted_tokens", MeanAcceptedTokens(tokens, stats.cycles)},
              {"rows_per_pass", pc.rows / passes},
              {"sequences_per_pass", pc.sequences / passes},
              {"cut_nodes_per_pass", pc.cut_nodes / passes},
              {"stats", SpecStatsJson(stats, tokens)}};
}

}  // namespace

StatusOr<json> RunServeBench(Session& session, const std::vector<std::vector<int32_t>>& prompts,
                             const ServeBenchOptions& opt) {
  if (prompts.empty()) return Status::Error("bench-serve needs at least one prompt");
  GenerateParams plain;
  plain.n_predict = opt.max_tokens;
  plain.ignore_eos = opt.ignore_eos;
  plain.sampling.temp = opt.temp;
  plain.sampling.seed = opt.seed;
  GenerateParams spec = plain;
  GOOSE_RETURN_IF_ERROR(ParseSpecVariant(opt.spec, &spec.spec));
  spec.spec.budget = opt.budget;
  spec.spec.auto_budget = opt.budget_auto;
  json rows = json::array(), mismatches = json::array();
  std::vector<std::vector<int32_t>> reference;
  for (int n : opt.clients) {
    for (const GenerateParams* params : {&plain, &spec}) {
      std::vector<std::vector<int32_t>> outputs;
      GOOSE_ASSIGN_OR_RETURN(json row, RunConfig(session, prompts, n, *params, &outputs));
      row["spec"] = params == &plain ? "none" : opt.spec;
      if (reference.empty()) reference = outputs;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (outputs[i] != reference[i]) {
          mismatches.push_back({{"clients", n}, {"spec", row["spec"]}, {"prompt", i}});
        }
      }
      if (!opt.quiet) {
        std::fprintf(stderr, "clients %d, %s: %.1f tok/s aggregate, %.1f per request, MAT %.2f\n",
                     n, row["spec"].get<std::string>().c_str(),
                     row["aggregate_tokens_per_second"].get<double>(),
                     row["per_request_tokens_per_second"].get<double>(),
                     row["mean_accepted_tokens"].get<double>());
      }
      rows.push_back(std::move(row));
    }
  }
  return json{
      {"results", rows},
      {"equality", {{"mismatching_requests", mismatches.size()}, {"mismatches", mismatches}}}};
}

std::string ServeBenchMarkdown(const json& r) {
  std::string md =
      "| clients | spec | aggregate tok/s | x one client | per-request tok/s | TTFT p50 s | "
      "latency p50 / p90 / p99 s | MAT | rows/pass | sequences/pass | nodes cut/pass |\n"
      "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n";
  std::map<std::string, double> one;  // spec -> aggregate at the first client count
  char line[512];
  for (const json& row : r.at("results")) {
    const std::string spec = row["spec"];
    const double agg = row["aggregate_tokens_per_second"].get<double>();
    if (!one.count(spec)) one[spec] = agg;
    const json& l = row["latency_seconds"];
    std::snprintf(line, sizeof(line),
                  "| %d | %s | %.1f | %.2fx | %.1f | %.3f | %.2f / %.2f / %.2f | %.2f | %.1f | "
                  "%.2f | %.2f |\n",
                  row["clients"].get<int>(), spec.c_str(), agg, one[spec] > 0 ? agg / one[spec] : 0,
                  row["per_request_tokens_per_second"].get<double>(),
                  row["ttft_seconds"]["p50"].get<double>(), l["p50"].get<double>(),
                  l["p90"].get<double>(), l["p99"].get<double>(),
                  row["mean_accepted_tokens"].get<double>(), row["rows_per_pass"].get<double>(),
                  row["sequences_per_pass"].get<double>(), row["cut_nodes_per_pass"].get<double>());
    md += line;
  }
  const size_t bad = r.at("equality").at("mismatching_requests").get<size_t>();
  md += bad == 0 ? "\nEvery answer equals plain decoding's (one client, --spec none).\n"
                 : "\n*** " + std::to_string(bad) + " answers differ from plain decoding ***\n";
  return md;
}

Status WriteServePlot(const json& r, const std::string& dir, std::vector<std::string>* files) {
  std::string data;
  for (const char* spec : {"none", "spec"}) {
    data += std::string("# ") + spec + "\n";
    for (const json& row : r.at("results")) {
      if ((row["spec"] == "none") != (std::string(spec) == "none")) continue;
      data += std::to_string(row["clients"].get<int>()) + "\t" +
              std::to_string(row["aggregate_tokens_per_second"].get<double>()) + "\t" +
              std::to_string(row["per_request_tokens_per_second"].get<double>()) + "\n";
    }
    data += "\n\n";
  }
  const std::string png = dir + "/serve_tokens_per_second.png";
  std::string quoted = "'";  // a gnuplot string: a quote is written twice
  for (char c : png) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  const std::string script =
      "set output " + quoted +
      "'\nset title 'goose bench-serve: tokens/s vs concurrent clients'\n"
      "set xlabel 'clients'\nset ylabel 'tokens/s'\nset logscale x 2\nset key top left\n"
      "set grid ytics\nplot DATA index 0 using 1:2 with linespoints lt 1 title 'aggregate, plain', "
      "DATA index 1 using 1:2 with linespoints lt 2 title 'aggregate, speculative', "
      "DATA index 0 using 1:3 with linespoints lt 3 dt 2 title 'per request, plain', "
      "DATA index 1 using 1:3 with linespoints lt 4 dt 2 title 'per request, speculative'\n";
  GOOSE_RETURN_IF_ERROR(RunGnuplot(script, data, dir, "serve"));
  files->push_back(png);
  return Status::Ok();
}

}  // namespace goose
