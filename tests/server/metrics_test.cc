#include "server/metrics.h"

#include <gtest/gtest.h>

namespace goose::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Metrics, RendersCountersAndGauges) {
  Metrics m;
  m.CountResponse("/v1/completions", 200);
  m.CountResponse("/v1/completions", 200);
  m.CountResponse("/v1/completions", 400);
  m.CountResponse("/../../etc/passwd", 404);  // arbitrary paths do not become labels
  m.CountRejected("queue_full");
  m.CountCancelled();
  SpecStats s;
  s.cycles = 4;
  s.drafted[static_cast<int>(NodeSource::kSpine)] = 10;
  s.reached[static_cast<int>(NodeSource::kSpine)] = 8;
  s.accepted[static_cast<int>(NodeSource::kSpine)] = 6;
  m.CountGeneration(5, 10, s, 0.5);
  GaugeValues g;
  g.queue_length = 3;
  g.slots_busy = 2;
  g.slots_total = 4;
  const std::string t = m.Render(g);
  EXPECT_TRUE(Has(t, "goose_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2")) << t;
  EXPECT_TRUE(Has(t, "goose_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(Has(t, "goose_requests_total{endpoint=\"other\",status=\"404\"} 1"));
  EXPECT_EQ(t.find("passwd"), std::string::npos);
  EXPECT_TRUE(Has(t, "goose_requests_rejected_total{reason=\"queue_full\"} 1"));
  EXPECT_TRUE(Has(t, "goose_requests_cancelled_total 1"));
  EXPECT_TRUE(Has(t, "goose_prompt_tokens_total 5"));
  EXPECT_TRUE(Has(t, "goose_generated_tokens_total 10"));
  EXPECT_TRUE(Has(t, "goose_forward_passes_total 4"));
  EXPECT_TRUE(Has(t, "goose_mean_accepted_tokens 2.500000"));
  EXPECT_TRUE(Has(t, "goose_drafted_tokens_total{source=\"spine\"} 10"));
  EXPECT_TRUE(Has(t, "goose_accepted_tokens_total{source=\"spine\"} 6"));
  EXPECT_TRUE(Has(t, "goose_acceptance_ratio{source=\"spine\"} 0.750000"));
  EXPECT_TRUE(Has(t, "goose_queue_length 3"));
  EXPECT_TRUE(Has(t, "goose_slots_busy 2"));
  EXPECT_TRUE(Has(t, "goose_slots_total 4"));
  EXPECT_TRUE(Has(t, "# TYPE goose_requests_total counter"));
}

}  // namespace
}  // namespace goose::server
