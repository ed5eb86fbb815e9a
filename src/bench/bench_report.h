// Benchmark outputs: results.md (Spec-Bench-like tables) and PNG plots via gnuplot, both made
// from results.json alone, plus the machine / commit facts that go into results.json.
//
// Contract
// - MachineJson(): {"cpu": /proc/cpuinfo "model name" or "unknown", "cores": logical cores}.
// - GitCommit(dir): `git -C dir rev-parse HEAD`, or "unknown".
// - ResultsMarkdown(results): tables of speedup and MAT per data set for every config, the
//   overall MAT / tokens/s / speedup / per-prompt speedup median [min, max] / projected speedup,
//   the verify-cost curves and the equality check (mismatches printed first and loudly).
// - WritePlots(results, dir, &files): speedup_vs_budget.png (one line per variant: goose and
//   goose+paper apart), mat_by_dataset.png and acceptance_by_depth.png (each variant at its
//   fixed budget with the highest overall MAT; auto only for a variant without fixed budgets).
//   gnuplot is run through popen with the pngcairo terminal (png if cairo is missing). An error when gnuplot is absent or fails (callers warn and go on);
//   the gnuplot scripts and data files stay in dir/plots_src for inspection.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace goose {

nlohmann::json MachineJson();
std::string GitCommit(const std::string& dir);
std::string ResultsMarkdown(const nlohmann::json& results);
bool GnuplotAvailable();
Status WritePlots(const nlohmann::json& results, const std::string& dir,
                  std::vector<std::string>* files);

}  // namespace goose
