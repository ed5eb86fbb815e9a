// results.md for the draft-model methods: their draft work, slots and acceptance per source in
// one table, and tokens/s per variant and budget; the draft plot shows their sources by depth.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_report.h"
#include "bench_test_util.h"

namespace goose {
namespace {

using nlohmann::json;

json Row(const std::string& variant, const std::string& budget, double tps, bool draft) {
  json depth = json::array();
  depth.push_back({{"depth", 1}, {"drafted", 100}, {"reached", 80}, {"accepted", 40}});
  json stats = {{"acceptance_by_depth", {{draft ? "draft" : "spine", depth}}},
                {"reached", {{"draft", 80}, {"graft_context", 20}, {"graft_table", 0}}},
                {"accepted", {{"draft", 40}, {"graft_context", 15}, {"graft_table", 0}}}};
  if (draft) {
    stats["acceptance_by_depth"]["graft_context"] = depth;
    stats["draft_model"] = {{"passes_per_cycle", 2.5},
                            {"seconds_per_cycle", 0.002},
                            {"seconds", 0.5},
                            {"pruned_slots_per_cycle", 6.0},
                            {"slots_per_cycle", {{"draft", 9.0}, {"graft_context", 5.5}}}};
  }
  return {{"dataset", "all"},
          {"method", variant.substr(0, variant.find('+'))},
          {"variant", variant},
          {"budget", budget},
          {"config", budget == "default" ? variant : variant + "@" + budget},
          {"mean_accepted_tokens", 2.5},
          {"tokens_per_second", tps},
          {"decode_seconds", 2.0},
          {"speedup", tps / 50},
          {"projected_speedup", nullptr},
          {"stats", stats}};
}

json Results() {
  json r;
  r["summary"] = json::array({Row("none", "default", 50, false), Row("graft", "16", 110, true),
                              Row("graft", "32", 100, true), Row("goose", "16", 80, false)});
  r["results"] = json::array();
  for (json row : r["summary"]) {
    row["dataset"] = "tinystories";
    r["results"].push_back(row);
  }
  r["equality"] = {{"mismatching_prompts", 0}, {"checked_generations", 3}};
  r["verify_cost"] = {{"model_under_test", json::array()}, {"cost_model", nullptr}};
  return r;
}

TEST(DraftReport, MarkdownTabulatesDraftWorkAndTokensPerSecondByBudget) {
  const std::string md = ResultsMarkdown(Results());
  EXPECT_NE(md.find("| graft@16 | 2.500 | 110.0 | 2.50 | 2.00 | 25.0% | 6.00 | draft 9.00 (0.500), "
                    "graft_context 5.50 (0.750) |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("| goose@16 | 2.500 | 80.0 | 2."), std::string::npos) << "not a draft method";
  EXPECT_NE(md.find("| graft | - | 110.0 | 100.0 |"), std::string::npos) << md;
}

TEST(DraftReport, PlotShowsTheDraftMethodsSources) {
  ASSERT_TRUE(GnuplotAvailable());
  const std::string dir = testing::TempDir("draft_report");
  std::vector<std::string> files;
  const Status st = WritePlots(Results(), dir, &files);
  ASSERT_TRUE(st.ok()) << st.message();
  std::ifstream in(std::filesystem::path(dir) / "plots_src" / "draft_depth.dat");
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "depth\t\"graft@16 draft\"\t\"graft@16 graft_context\"");
  EXPECT_TRUE(
      std::filesystem::exists(std::filesystem::path(dir) / "draft_acceptance_by_source.png"));
  EXPECT_TRUE(
      std::filesystem::exists(std::filesystem::path(dir) / "tokens_per_second_vs_budget.png"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace goose
