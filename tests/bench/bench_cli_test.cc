// End to end: the built `goose bench` binary on the tiny model writes every output file
// (plots included), and bad SPECs fail with a message naming the problem.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/bench_report.h"
#include "bench_test_util.h"

namespace goose {
namespace {

namespace fs = std::filesystem;

std::string RunCmd(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string Goose() { return std::string(GOOSE_BINARY_DIR) + "/goose"; }

TEST(BenchCli, TinyRunWritesResultsTableAndPlots) {
  ASSERT_TRUE(fs::exists(Goose())) << "build the goose target first: " << Goose();
  ASSERT_TRUE(GnuplotAvailable()) << "gnuplot is required for the plots (apt install gnuplot-nox)";
  const std::string dir = testing::TempDir("cli");
  int rc = -1;
  const std::string out =
      RunCmd("XDG_CACHE_HOME=" + dir + "/cache " + Goose() + " bench -m " + testing::TinyModel() +
                 " --data-dir " + testing::DataDir() +
                 " --data tinystories:2 --methods none,goose --budgets 16 --max-tokens 16 -t 1"
                 " --quiet --out " +
                 dir + "/out",
             &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("equality check: 0 mismatching prompts"), std::string::npos) << out;
  for (const char* f : {"results.json", "results.md", "speedup_vs_budget.png", "mat_by_dataset.png",
                        "acceptance_by_depth.png"}) {
    const fs::path p = fs::path(dir) / "out" / f;
    ASSERT_TRUE(fs::exists(p)) << p;
    EXPECT_GT(fs::file_size(p), 100u) << p;
  }
  EXPECT_FALSE(fs::exists(fs::path(dir) / "out" / "projected_speedup_vs_budget.png"));
  std::ifstream png(dir + "/out/mat_by_dataset.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  std::ifstream in(dir + "/out/results.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const char* key : {"schema", "machine", "model", "commit", "settings", "datasets", "results",
                          "summary", "equality", "verify_cost", "wall_seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["machine"]["cpu"].is_string());
  EXPECT_TRUE(j["machine"]["cores"].is_number_integer());
  EXPECT_GT(j["model"]["file_bytes"].get<double>(), 1e6);
  EXPECT_EQ(j["settings"]["ignore_eos"], true);
  EXPECT_EQ(j["summary"].size(), 2u);
  // The calibration was cached where XDG_CACHE_HOME points.
  EXPECT_TRUE(fs::exists(j["settings"]["cost_cache"].get<std::string>()));
  EXPECT_EQ(j["settings"]["cost_cache"].get<std::string>().rfind(dir + "/cache/goose/cost-", 0),
            0u);
  fs::remove_all(dir);
}

// --budgets 8,auto with a cost model: the projection and the auto rows are in results.json, and
// a forced mismatch (the runner's fault injection) makes the command exit with code 2.
TEST(BenchCli, AutoBudgetProjectionAndMismatchExitCode) {
  ASSERT_TRUE(fs::exists(Goose())) << Goose();
  const std::string dir = testing::TempDir("cli_auto");
  const std::string cmd = Goose() + " bench -m " + testing::TinyModel() + " --data-dir " +
                          testing::DataDir() +
                          " --data tinystories:2 --methods pld,goose --budgets 8,auto,auto-cm"
                          " --max-tokens 16 -t 1 --quiet --cost-model " +
                          testing::TinyModel() + " --out " + dir + "/out";
  const std::string env = "XDG_CACHE_HOME=" + dir + "/cache ";
  int rc = -1;
  std::string out = RunCmd(env + cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream in(dir + "/out/results.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::string> configs;
  for (const auto& row : j["summary"]) {
    configs.push_back(row["config"]);
    EXPECT_TRUE(row["projected_speedup"].is_number()) << row["config"];
    EXPECT_TRUE(row["relative_cost_cost_model"].is_number()) << row["config"];
    EXPECT_TRUE(row["speedup_per_prompt"].is_object()) << row["config"];
  }
  EXPECT_EQ(configs,
            (std::vector<std::string>{"none", "pld", "goose@8", "goose@auto", "goose@auto-cm"}));
  // With a cost model the projection has its own plot (the measured one stays separate).
  const fs::path projected = fs::path(dir) / "out" / "projected_speedup_vs_budget.png";
  ASSERT_TRUE(fs::exists(projected));
  EXPECT_GT(fs::file_size(projected), 100u);
  const nlohmann::json& autob = j["summary"][3];
  EXPECT_FALSE(autob["auto_budgets"].empty());
  EXPECT_TRUE(j["verify_cost"]["cost_model"].is_array());
  EXPECT_GE(j["verify_cost"]["cost_model"].size(), 2u);
  EXPECT_EQ(j["settings"]["cost_model"], testing::TinyModel());
  EXPECT_EQ(j["equality"]["mismatching_prompts"], 0);

  out = RunCmd(env + "GOOSE_BENCH_INJECT_MISMATCH=goose@8 " + cmd, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("EQUALITY CHECK FAILED"), std::string::npos) << out;
  std::ifstream in2(dir + "/out/results.json");
  const nlohmann::json bad = nlohmann::json::parse(in2);
  EXPECT_EQ(bad["equality"]["mismatching_prompts"], 2);
  EXPECT_EQ(bad["equality"]["mismatches"][0]["config"], "goose@8");
  fs::remove_all(dir);
}

TEST(BenchCli, BadSpecsFailClearly) {
  ASSERT_TRUE(fs::exists(Goose())) << Goose();
  int rc = 0;
  std::string out = RunCmd(Goose() + " bench --quiet --data wikitext:3", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown data set 'wikitext'"), std::string::npos) << out;
  out = RunCmd(Goose() + " bench --quiet --data gsm8k:1 --budgets 16,big", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("'big'"), std::string::npos) << out;
}

}  // namespace
}  // namespace goose
