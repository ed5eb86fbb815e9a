// goose bench-serve: a server's workload in one process. For each client count N and with
// speculation off (--spec none) and on, N client threads send the prompt set's requests, one
// at a time each, to a ServingLoop of N slots (engine/serving_loop.h) and wait for the answers,
// as N users of `goose serve` would. It reports per configuration the aggregate tokens/s (all
// generated tokens over the wall time), per-request tokens/s (decode phase), time to first
// token and latency percentiles, MAT, what the passes held (rows and sequences per pass, nodes
// the budget split cut), and whether every answer equals plain decoding's alone (the first
// configuration, --spec none with one client, is the reference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "util/status.h"

namespace goose {

struct ServeBenchOptions {
  std::vector<int> clients = {1, 2, 4, 8};
  std::string spec = "goose";  // the speculative configuration (ParseSpecVariant)
  bool budget_auto = true;     // its budget: auto, else `budget` (0: the method's)
  int budget = 0;
  int max_tokens = 128;
  bool ignore_eos = true;
  float temp = 0;
  uint64_t seed = 0;
  bool quiet = false;
};

// "results": a row per (clients, spec); "equality": mismatches against the reference.
StatusOr<nlohmann::json> RunServeBench(Session& session,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       const ServeBenchOptions& opt);
std::string ServeBenchMarkdown(const nlohmann::json& results);
// serve_tokens_per_second.png: aggregate and per-request tokens/s against clients, spec off and
// on (gnuplot; an error when it is missing or fails).
Status WriteServePlot(const nlohmann::json& results, const std::string& dir,
                      std::vector<std::string>* files);

}  // namespace goose
