// results.md and the plot data from a synthetic results.json: variants are kept apart (goose vs
// goose+paper), plotted rows are picked by MAT among fixed budgets (not by noisy speedup), and
// the per-prompt speedup spread is reported next to the aggregate.
#include "bench/bench_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_test_util.h"

namespace goose {
namespace {

using nlohmann::json;

json Row(const std::string& method, const std::string& variant, const std::string& budget,
         double mat, double speedup, const std::string& dataset) {
  const std::string config = budget == "default" ? variant : variant + "@" + budget;
  json depth = json::array();
  depth.push_back({{"depth", 1}, {"drafted", 100}, {"reached", 100}, {"accepted", 50}});
  return {{"dataset", dataset},
          {"method", method},
          {"variant", variant},
          {"budget", budget},
          {"config", config},
          {"mean_accepted_tokens", mat},
          {"tokens_per_second", 100 * speedup},
          {"speedup", speedup},
          {"speedup_per_prompt", {{"median", speedup}, {"min", speedup / 2}, {"max", 2 * speedup}}},
          {"projected_speedup", nullptr},
          {"stats", {{"acceptance_by_depth", {{"spine", depth}}}}}};
}

json Results() {
  json r;
  r["results"] = json::array();
  r["summary"] = json::array();
  const std::vector<std::tuple<std::string, std::string, std::string, double, double>> rows = {
      {"none", "none", "default", 1.008, 1.0},
      {"goose", "goose", "16", 1.80, 1.10},
      {"goose", "goose", "60", 2.40, 0.90},
      {"goose", "goose", "auto", 1.02, 1.30},  // the fastest, by noise, and barely drafting
      {"goose", "goose+paper", "16", 1.50, 1.05},
      {"goose", "goose+paper", "60", 1.90, 0.80},
      {"tr", "tr", "default", 2.1, 0.95}};
  for (const auto& [m, v, b, mat, sp] : rows) {
    r["results"].push_back(Row(m, v, b, mat, sp, "tinystories"));
    r["summary"].push_back(Row(m, v, b, mat, sp, "all"));
  }
  r["equality"] = {{"mismatching_prompts", 0}, {"checked_generations", 6}};
  r["verify_cost"] = {{"model_under_test", json::array()}, {"cost_model", nullptr}};
  return r;
}

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string HeaderLine(const std::string& text) { return text.substr(0, text.find('\n')); }

TEST(BenchReport, PlotsKeepVariantsApartAndPickRowsByMat) {
  ASSERT_TRUE(GnuplotAvailable()) << "gnuplot is required for the plots (apt install gnuplot-nox)";
  const std::string dir = testing::TempDir("report");
  std::vector<std::string> files;
  const Status st = WritePlots(Results(), dir, &files);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::filesystem::path src = std::filesystem::path(dir) / "plots_src";
  // One speedup line per variant.
  EXPECT_EQ(HeaderLine(Read(src / "speedup.dat")),
            "budget\t\"none\"\t\"goose\"\t\"goose+paper\"\t\"tr\"");
  // MAT and depth plots: each variant's fixed budget with the highest MAT, never goose@auto.
  EXPECT_EQ(HeaderLine(Read(src / "mat.dat")),
            "dataset\t\"none\"\t\"goose@60\"\t\"goose+paper@60\"\t\"tr\"");
  const std::string depth = HeaderLine(Read(src / "depth.dat"));
  EXPECT_NE(depth.find("\"goose@60 spine\""), std::string::npos) << depth;
  EXPECT_NE(depth.find("\"goose+paper@60 spine\""), std::string::npos) << depth;
  EXPECT_EQ(depth.find("auto"), std::string::npos) << depth;
  std::filesystem::remove_all(dir);
}

// Paths go into the gnuplot script as string literals: a folder with quotes, spaces and a
// backslash still gets its plots.
TEST(BenchReport, PlotsInAFolderWithQuotesInItsName) {
  ASSERT_TRUE(GnuplotAvailable());
  const std::string dir = testing::TempDir("report") + "/it's \"odd\" \\ dir";
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  const Status st = WritePlots(Results(), dir, &files);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const char* png : {"speedup_vs_budget.png", "mat_by_dataset.png", "acceptance_by_depth.png"}) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / png)) << png;
  }
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST(BenchReport, MarkdownShowsThePerPromptSpread) {
  const std::string md = ResultsMarkdown(Results());
  EXPECT_NE(md.find("per-prompt median [min, max]"), std::string::npos);
  EXPECT_NE(md.find("| goose@auto | 1.30x | 1.020 | 130.0 | 1.30x | 1.30x [0.65, 2.60] | - |"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace goose
