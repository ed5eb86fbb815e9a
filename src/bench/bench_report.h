// Benchmark outputs: results.md (Spec-Bench-like tables) and PNG plots via gnuplot, both made
// from results.json alone, plus the machine / commit facts that go into results.json.
//
// Contract
// - MachineJson(): {"cpu": /proc/cpuinfo "model name" or "unknown", "cores": logical cores}.
// - GitCommit(dir): `git -C dir rev-parse HEAD`, or "unknown".
// - ResultsMarkdown(results): tables of speedup and MAT per data set for every config, the
//   overall MAT / tokens/s / speedup / per-prompt speedup median [min, max] / projected speedup,
//   tokens/s per variant and budget, for the draft-model methods their draft work per cycle
//   (passes, ms, share of decode time), pruned slots, and slots and acceptance per
//   source, the verify-cost curves and the equality check (mismatches printed first and loudly).
// - WritePlots(results, dir, &files): speedup_vs_budget.png and tokens_per_second_vs_budget.png
//   on a log2 tree-size axis (a line per variant over its fixed budgets, goose and goose+paper
//   apart; an auto budget and a budget-less method as one marker at its mean tree size; plain
//   decoding as a dashed reference), mat_by_dataset.png and
//   acceptance_by_depth.png (each variant at its fixed budget with the highest overall MAT; auto
//   only for a variant without fixed budgets), and with draft-model methods
//   draft_acceptance_by_source.png (their draft / graft_context / graft_table acceptance by
//   depth, same choice of budget); depth axes end at the deepest depth reached >= 5 times.
//   Line types read on white and in grey (no light yellow; each has its own dashes and points).
//   gnuplot is run through popen with the pngcairo terminal (png if cairo is missing). An error
//   when gnuplot is absent or fails (callers warn and go on); the gnuplot scripts and data files
//   stay in dir/plots_src for inspection.
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
// Runs a gnuplot `script` (after the terminal and DATA = the path of `data`, both written to
// dir/plots_src/<name>.gp and .dat); an error when gnuplot is absent or fails.
Status RunGnuplot(const std::string& script, const std::string& data, const std::string& dir,
                  const std::string& name);
Status WritePlots(const nlohmann::json& results, const std::string& dir,
                  std::vector<std::string>* files);

}  // namespace goose
