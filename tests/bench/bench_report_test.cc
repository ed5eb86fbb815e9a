// results.md and the plot data from a synthetic results.json: variants are kept apart (goose vs
// goose+paper), plotted rows are picked by MAT among fixed budgets (not by noisy speedup), and
// the per-prompt speedup spread is reported next to the aggregate.
#include "bench/bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  depth.push_back({{"depth", 2}, {"drafted", 50}, {"reached", 50}, {"accepted", 20}});
  depth.push_back({{"depth", 3}, {"drafted", 20}, {"reached", 3}, {"accepted", 1}});  // too few
  const double tree = budget == "auto"      ? 3.5
                      : budget == "default" ? (variant == "tr" ? 40 : 1)
                                            : std::stod(budget) - 0.5;
  return {{"dataset", dataset},
          {"method", method},
          {"variant", variant},
          {"budget", budget},
          {"config", config},
          {"mean_accepted_tokens", mat},
          {"mean_tree_nodes", tree},
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
  // Speedup vs tree size: a line per variant over its fixed budgets (x = budget), one point for
  // an auto budget and one for a budget-less method at their mean tree size; none is the
  // baseline, not a series.
  EXPECT_EQ(Read(src / "speedup.dat"),
            "# goose\n16.0000\t1.1000\n60.0000\t0.9000\n\n\n"
            "# goose auto (mean tree 3.5)\n3.5000\t1.3000\n\n\n"
            "# goose+paper\n16.0000\t1.0500\n60.0000\t0.8000\n\n\n"
            "# tr (mean tree 40.0)\n40.0000\t0.9500\n\n\n");
  const std::string gp = Read(src / "plots.gp");
  EXPECT_NE(gp.find("index 0 using 1:2 with linespoints lt 2 title 'goose'"), std::string::npos);
  EXPECT_NE(gp.find("index 1 using 1:2 with points lt 2 ps 2.5 title 'goose auto (mean tree "
                    "3.5)'"),
            std::string::npos);
  EXPECT_NE(gp.find("index 3 using 1:2 with points lt 4 ps 2.5 title 'tr (mean tree 40.0)'"),
            std::string::npos);
  EXPECT_NE(gp.find("1 with lines dt 2 lw 1.5 lc rgb '#404040' title 'none (plain decoding)'"),
            std::string::npos);
  // Every line type has a dash pattern and point type of its own (reads in grey), and none is
  // the light yellow that vanishes on white.
  for (int lt = 1; lt <= 8; ++lt) {
    EXPECT_NE(gp.find("set linetype " + std::to_string(lt) + " lc rgb"), std::string::npos);
  }
  EXPECT_EQ(gp.find("#F0E442"), std::string::npos);
  // MAT and depth plots: each variant's fixed budget with the highest MAT, never goose@auto.
  EXPECT_EQ(HeaderLine(Read(src / "mat.dat")),
            "dataset\t\"none\"\t\"goose@60\"\t\"goose+paper@60\"\t\"tr\"");
  const std::string depth = HeaderLine(Read(src / "depth.dat"));
  EXPECT_NE(depth.find("\"goose@60 spine\""), std::string::npos) << depth;
  EXPECT_NE(depth.find("\"goose+paper@60 spine\""), std::string::npos) << depth;
  EXPECT_EQ(depth.find("auto"), std::string::npos) << depth;
  // The depth axis ends with the data: depth 3 was reached 3 times (too few to plot).
  const std::string depth_file = Read(src / "depth.dat");
  EXPECT_EQ(std::count(depth_file.begin(), depth_file.end(), '\n'), 3) << depth_file;
  EXPECT_NE(gp.find("set xrange [0.5:2.5]"), std::string::npos);
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
  for (const char* png :
       {"speedup_vs_budget.png", "mat_by_dataset.png", "acceptance_by_depth.png"}) {
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
