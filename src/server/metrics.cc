#include "server/metrics.h"

#include "util/status.h"

namespace goose::server {

namespace {

constexpr const char* kEndpoints[] = {
    "/health",  "/v1/models", "/v1/completions", "/v1/chat/completions",
    "/metrics", "/tokenize",  "/detokenize"};

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += StrFormat("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

// What the serving loop's shared forward passes held.
void RenderPasses(const PassCounters& p, std::string* out) {
  const std::pair<const char*, int64_t> rows[] = {{"passes", p.passes},
                                                  {"pass_rows", p.rows},
                                                  {"pass_sequences", p.sequences},
                                                  {"pass_prefill_rows", p.prefill_rows},
                                                  {"pass_cut_nodes", p.cut_nodes}};
  const char* help[] = {"Forward passes of the serving loop.",
                        "Rows those passes scored (all requests).",
                        "Requests those passes served (mean per pass: this / passes).",
                        "Of the rows, prompt rows (prefill chunks).",
                        "Tree nodes proposed but left out by the pass's budget split."};
  for (size_t i = 0; i < std::size(rows); ++i) {
    const std::string name = std::string("goose_") + rows[i].first + "_total";
    Family(out, name.c_str(), "counter", help[i]);
    *out += StrFormat("%s %lld\n", name.c_str(), static_cast<long long>(rows[i].second));
  }
}

}  // namespace

void Metrics::CountResponse(const std::string& endpoint, int status) {
  std::string label = "other";
  for (const char* e : kEndpoints) {
    if (endpoint == e) label = e;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{label, status}];
}

void Metrics::CountGeneration(int n_prompt, int n_generated, const SpecStats& stats,
                              double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generations_;
  prompt_tokens_ += n_prompt;
  generated_tokens_ += n_generated;
  passes_ += stats.cycles;
  for (int s = 0; s < kNumSources; ++s) {
    drafted_[s] += stats.drafted[s];
    accepted_[s] += stats.accepted[s];
    reached_[s] += stats.reached[s];
  }
  generation_seconds_ += seconds;
}

void Metrics::CountCancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  ++cancelled_;
}

void Metrics::CountRejected(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_[reason];
}

std::string Metrics::Render(const GaugeValues& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Family(&out, "goose_requests_total", "counter", "HTTP responses by endpoint and status code.");
  for (const auto& [key, n] : responses_) {
    out += StrFormat("goose_requests_total{endpoint=\"%s\",status=\"%d\"} %lld\n",
                     key.first.c_str(), key.second, static_cast<long long>(n));
  }
  Family(&out, "goose_requests_rejected_total", "counter",
         "Generation requests turned away with 503 (queue full or shutting down).");
  for (const char* reason : {"queue_full", "shutting_down"}) {
    auto it = rejected_.find(reason);
    out += StrFormat("goose_requests_rejected_total{reason=\"%s\"} %lld\n", reason,
                     static_cast<long long>(it == rejected_.end() ? 0 : it->second));
  }
  Family(&out, "goose_requests_cancelled_total", "counter",
         "Generations stopped early because the client went away or the server shut down.");
  out += StrFormat("goose_requests_cancelled_total %lld\n", static_cast<long long>(cancelled_));
  Family(&out, "goose_generations_total", "counter", "Generations run.");
  out += StrFormat("goose_generations_total %lld\n", static_cast<long long>(generations_));
  Family(&out, "goose_prompt_tokens_total", "counter", "Prompt tokens prefilled.");
  out += StrFormat("goose_prompt_tokens_total %lld\n", static_cast<long long>(prompt_tokens_));
  Family(&out, "goose_generated_tokens_total", "counter", "Tokens generated.");
  out +=
      StrFormat("goose_generated_tokens_total %lld\n", static_cast<long long>(generated_tokens_));
  Family(&out, "goose_forward_passes_total", "counter",
         "Target-model forward passes after prefill (one per speculation cycle).");
  out += StrFormat("goose_forward_passes_total %lld\n", static_cast<long long>(passes_));
  Family(&out, "goose_mean_accepted_tokens", "gauge",
         "Generated tokens per forward pass over all generations (MAT).");
  out += StrFormat("goose_mean_accepted_tokens %.6f\n",
                   passes_ > 0 ? static_cast<double>(generated_tokens_) / passes_ : 0.0);
  Family(&out, "goose_drafted_tokens_total", "counter", "Draft tokens scored, by source.");
  for (int s = 1; s < kNumSources; ++s) {
    out +=
        StrFormat("goose_drafted_tokens_total{source=\"%s\"} %lld\n",
                  NodeSourceName(static_cast<NodeSource>(s)), static_cast<long long>(drafted_[s]));
  }
  Family(&out, "goose_accepted_tokens_total", "counter", "Draft tokens accepted, by source.");
  for (int s = 1; s < kNumSources; ++s) {
    out +=
        StrFormat("goose_accepted_tokens_total{source=\"%s\"} %lld\n",
                  NodeSourceName(static_cast<NodeSource>(s)), static_cast<long long>(accepted_[s]));
  }
  Family(&out, "goose_acceptance_ratio", "gauge",
         "Accepted / reached draft tokens by source (reached: the parent was accepted).");
  for (int s = 1; s < kNumSources; ++s) {
    out += StrFormat("goose_acceptance_ratio{source=\"%s\"} %.6f\n",
                     NodeSourceName(static_cast<NodeSource>(s)),
                     reached_[s] > 0 ? static_cast<double>(accepted_[s]) / reached_[s] : 0.0);
  }
  Family(&out, "goose_generation_seconds_total", "counter",
         "Seconds spent generating (prefill and decode).");
  out += StrFormat("goose_generation_seconds_total %.6f\n", generation_seconds_);
  Family(&out, "goose_queue_length", "gauge", "Requests waiting for a slot.");
  out += StrFormat("goose_queue_length %d\n", g.queue_length);
  Family(&out, "goose_slots_busy", "gauge", "Slots generating now.");
  out += StrFormat("goose_slots_busy %d\n", g.slots_busy);
  Family(&out, "goose_slots_total", "gauge", "Slots (--parallel).");
  out += StrFormat("goose_slots_total %d\n", g.slots_total);
  RenderPasses(g.passes, &out);
  return out;
}

}  // namespace goose::server
