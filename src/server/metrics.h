// Metrics: the server's counters and gauges, rendered in Prometheus' text format (GET /metrics).
//
// Contract
// - CountResponse(endpoint, status) after every HTTP response; endpoints outside the API's own
//   paths count as "other" (a client cannot create label values). CountGeneration() after every
//   generation with its statistics; CountCancelled() when a client went away or shutdown cut it.
// - Gauges (queue length, slots busy) are read at render time from the callback given to
//   Render(), so they are never stale.
// - Render() writes goose_* families: requests_total{endpoint,status}, prompt_tokens_total,
//   generated_tokens_total, forward_passes_total, mean_accepted_tokens (generated / passes over
//   all generations), drafted_tokens_total / accepted_tokens_total / acceptance_ratio by source
//   (spine, branch, chain), generation_seconds_total, requests_cancelled_total,
//   requests_rejected_total{reason}, queue_length, slots_busy, slots_total, and what the shared
//   passes held: passes_total, pass_rows_total, pass_sequences_total, pass_prefill_rows_total
//   and pass_cut_nodes_total (tree nodes the budget split left out); rows / passes is the mean
//   rows per pass, sequences / passes the mean requests per pass.
// - Thread-safe (one mutex; every call is a few additions).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/scheduler.h"
#include "verify/spec_stats.h"

namespace goose::server {

struct GaugeValues {
  int queue_length = 0;
  int slots_busy = 0;
  int slots_total = 0;
  PassCounters passes;  // the serving loop's (engine/scheduler.h)
};

class Metrics {
 public:
  void CountResponse(const std::string& endpoint, int status);
  void CountGeneration(int n_prompt, int n_generated, const SpecStats& stats, double seconds);
  void CountCancelled();
  void CountRejected(const std::string& reason);  // "queue_full", "shutting_down"
  std::string Render(const GaugeValues& gauges) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  std::map<std::string, int64_t> rejected_;
  int64_t generations_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0, passes_ = 0;
  int64_t cancelled_ = 0;
  int64_t drafted_[kNumSources] = {}, accepted_[kNumSources] = {}, reached_[kNumSources] = {};
  double generation_seconds_ = 0;
};

}  // namespace goose::server
