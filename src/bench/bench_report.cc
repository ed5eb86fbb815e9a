#include "bench/bench_report.h"

#include "ops/cpu_features.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace goose {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Fmt(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), fmt, v);
  return b;
}

std::string RunCapture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A gnuplot string literal: single-quoted, where a quote is written twice (no other escapes).
std::string GpString(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// Labels of the data sets in first-seen order.
std::vector<std::string> DataSets(const json& r) {
  std::vector<std::string> out;
  for (const auto& row : r.at("results")) {
    const std::string d = row.at("dataset");
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

const json* Find(const json& r, const std::string& dataset, const std::string& config) {
  const json& arr = dataset == "all" ? r.at("summary") : r.at("results");
  for (const auto& row : arr) {
    if (row.at("dataset") == dataset && row.at("config") == config) return &row;
  }
  return nullptr;
}

// A row's variant ("goose+paper"; older files without "variant" use the method).
std::string Variant(const json& row) {
  return row.contains("variant") ? row.at("variant").get<std::string>()
                                 : row.at("method").get<std::string>();
}

// For each variant (goose and goose+paper are separate lines), the config with the highest
// overall MAT among its fixed budgets; an auto-budget row only for a variant that has no other.
// MAT, not measured speedup: speedup is noisy, and an auto row's low MAT at a cheap budget would
// hide the variant's acceptance curve.
std::vector<std::string> BestPerVariant(const json& r) {
  std::vector<std::string> order;
  struct Best {
    bool fixed = false;
    double mat = -1;
    std::string config;
  };
  std::map<std::string, Best> best;
  for (const auto& row : r.at("summary")) {
    const std::string v = Variant(row);
    const bool fixed = row.at("budget") != "auto" && row.at("budget") != "auto-cm";
    const double mat = row.at("mean_accepted_tokens");
    if (!best.count(v)) order.push_back(v);
    Best& b = best[v];
    if ((fixed && !b.fixed) || (fixed == b.fixed && mat > b.mat)) {
      b = {fixed, mat, row.at("config")};
    }
  }
  std::vector<std::string> out;
  for (const auto& v : order) out.push_back(best[v].config);
  return out;
}

// Summary rows of the draft-model methods (their stats carry "draft_model").
std::vector<const json*> DraftRows(const json& r) {
  std::vector<const json*> out;
  for (const auto& row : r.at("summary")) {
    if (row.contains("stats") && row["stats"].contains("draft_model")) out.push_back(&row);
  }
  return out;
}

// accepted / reached of one source in a row's stats, or "-".
std::string SourceRate(const json& row, const char* source) {
  const json& s = row["stats"];
  if (!s["reached"].contains(source) || s["reached"][source].get<int64_t>() == 0) return "-";
  return Fmt("%.3f", s["accepted"][source].get<double>() / s["reached"][source].get<double>());
}

// The draft-model methods: draft work per cycle, slots by source and acceptance per source.
std::string DraftMarkdown(const json& r) {
  const std::vector<const json*> rows = DraftRows(r);
  if (rows.empty()) return "";
  std::string md =
      "\n## Draft model: work per cycle, slots and acceptance by source\n\n"
      "| config | MAT | tok/s | draft passes | draft ms | draft share of decode | draft slots | "
      "pruned slots | grafted slots | acceptance draft | graft context | graft table |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const json* row : rows) {
    const json& d = (*row)["stats"]["draft_model"];
    const double decode = (*row)["decode_seconds"].get<double>();
    md += "| " + (*row)["config"].get<std::string>() + " | " +
          Fmt("%.3f", (*row)["mean_accepted_tokens"].get<double>()) + " | " +
          Fmt("%.1f", (*row)["tokens_per_second"].get<double>()) + " | " +
          Fmt("%.2f", d["passes_per_cycle"].get<double>()) + " | " +
          Fmt("%.2f", 1e3 * d["seconds_per_cycle"].get<double>()) + " | " +
          (decode > 0 ? Fmt("%.1f%%", 100 * d["seconds"].get<double>() / decode) : "-") + " | " +
          Fmt("%.2f", d["draft_slots_per_cycle"].get<double>()) + " | " +
          Fmt("%.2f", d["pruned_slots_per_cycle"].get<double>()) + " | " +
          Fmt("%.2f", d["grafted_slots_per_cycle"].get<double>()) + " | " +
          SourceRate(*row, "draft") + " | " + SourceRate(*row, "graft_context") + " | " +
          SourceRate(*row, "graft_table") + " |\n";
  }
  md += "\nPer cycle (cycles the draft model drafted); slots are verify-tree nodes besides the "
        "root; acceptance = accepted / reached per source.\n";
  return md;
}

// Tokens/s of every variant at every budget (a budget-free method in its own column).
std::string TokensPerSecondMarkdown(const json& r) {
  std::vector<std::string> budgets, variants;
  for (const auto& row : r.at("summary")) {
    const std::string b = row.at("budget"), v = Variant(row);
    if (std::find(budgets.begin(), budgets.end(), b) == budgets.end()) budgets.push_back(b);
    if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
  }
  std::string md = "\n## Tokens/s by budget (decode phase, all data sets)\n\n| variant |";
  for (const auto& b : budgets) md += " " + b + " |";
  md += "\n|---|";
  for (size_t i = 0; i < budgets.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto& v : variants) {
    md += "| " + v + " |";
    for (const auto& b : budgets) {
      const json* cell = nullptr;
      for (const auto& row : r.at("summary")) {
        if (Variant(row) == v && row.at("budget") == b) cell = &row;
      }
      md += cell ? " " + Fmt("%.1f", (*cell)["tokens_per_second"].get<double>()) + " |" : " - |";
    }
    md += "\n";
  }
  return md;
}

std::string SpreadCell(const json& row) {
  if (!row.contains("speedup_per_prompt") || !row["speedup_per_prompt"].is_object()) return "-";
  const json& s = row["speedup_per_prompt"];
  return Fmt("%.2fx", s["median"].get<double>()) + " [" + Fmt("%.2f", s["min"].get<double>()) +
         ", " + Fmt("%.2f", s["max"].get<double>()) + "]";
}

}  // namespace

json MachineJson() {
  return {{"cpu", CpuModelName()},
          {"cores", static_cast<int>(std::thread::hardware_concurrency())}};
}

std::string GitCommit(const std::string& dir) {
  int rc = 0;
  std::string out = RunCapture("git -C " + Quote(dir) + " rev-parse HEAD 2>/dev/null", &rc);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return rc == 0 && out.size() == 40 ? out : "unknown";
}

std::string ResultsMarkdown(const json& r) {
  std::string md;
  const std::vector<std::string> sets = DataSets(r);
  const json& eq = r.at("equality");
  const int bad = eq.at("mismatching_prompts").get<int>();
  md += "# goose bench\n\n";
  if (bad > 0) {
    md += "**EQUALITY CHECK FAILED: " + std::to_string(bad) +
          " prompt(s) where a method's output differs from `none`** (details in results.json)\n\n";
  } else {
    md += "**Equality check: 0 mismatching prompts** (" +
          std::to_string(eq.at("checked_generations").get<int64_t>()) +
          " generations compared token by token with `none`)\n\n";
  }
  if (r.contains("model")) {
    md += "- model: `" + r["model"].value("path", "?") + "` (" +
          Fmt("%.2f MB", r["model"].value("file_bytes", 0.0) / 1e6) + ")\n";
  }
  if (r.contains("machine")) {
    md += "- machine: " + r["machine"].value("cpu", "?") + ", " +
          std::to_string(r["machine"].value("cores", 0)) + " cores\n";
  }
  if (r.contains("commit")) md += "- commit: `" + r["commit"].get<std::string>() + "`\n";
  if (r.contains("settings")) md += "- settings: `" + r["settings"].dump() + "`\n";
  md += "\n## Measured speedup over `none` (tokens/s ratio, decode phase)\n\n| config |";
  for (const auto& s : sets) md += " " + s + " |";
  md += " MAT | tok/s | speedup | per-prompt median [min, max] | projected speedup* |\n|---|";
  for (size_t i = 0; i < sets.size() + 5; ++i) md += "---:|";
  md += "\n";
  for (const auto& row : r.at("summary")) {
    const std::string cfg = row.at("config");
    md += "| " + cfg + " |";
    for (const auto& s : sets) {
      const json* c = Find(r, s, cfg);
      md += c ? " " + Fmt("%.2fx", (*c)["speedup"].get<double>()) + " |" : " - |";
    }
    md += " " + Fmt("%.3f", row["mean_accepted_tokens"].get<double>()) + " | " +
          Fmt("%.1f", row["tokens_per_second"].get<double>()) + " | " +
          Fmt("%.2fx", row["speedup"].get<double>()) + " | " + SpreadCell(row) + " | " +
          (row["projected_speedup"].is_null()
               ? std::string("-")
               : Fmt("%.2fx", row["projected_speedup"].get<double>())) +
          " |\n";
  }
  md += "\n\\* *Projection, not a measurement*: (MAT / mean c(n)/c(1)) / MAT(none), with c the "
        "verify-cost curve of the cost model (`--cost-model`) and n the node count of every tree "
        "pass actually scored.\n";
  md += "\n## Mean accepted tokens per target pass (MAT)\n\n| config |";
  for (const auto& s : sets) md += " " + s + " |";
  md += " all |\n|---|";
  for (size_t i = 0; i <= sets.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto& row : r.at("summary")) {
    const std::string cfg = row.at("config");
    md += "| " + cfg + " |";
    for (const auto& s : sets) {
      const json* c = Find(r, s, cfg);
      md += c ? " " + Fmt("%.3f", (*c)["mean_accepted_tokens"].get<double>()) + " |" : " - |";
    }
    md += " " + Fmt("%.3f", row["mean_accepted_tokens"].get<double>()) + " |\n";
  }
  md += TokensPerSecondMarkdown(r);
  md += DraftMarkdown(r);
  const json& vc = r.at("verify_cost");
  md += "\n## Verify cost c(B)/c(1)\n\n| nodes | model under test (ms) | c(B)/c(1) |";
  const bool has_cm = !vc.at("cost_model").is_null();
  md += has_cm ? " cost model (ms) | c(B)/c(1) |\n|---:|---:|---:|---:|---:|\n"
               : "\n|---:|---:|---:|\n";
  const json& mc = vc.at("model_under_test");
  for (size_t i = 0; i < mc.size(); ++i) {
    md += "| " + std::to_string(mc[i]["nodes"].get<int>()) + " | " +
          Fmt("%.3f", mc[i]["seconds"].get<double>() * 1e3) + " | " +
          Fmt("%.2f", mc[i]["relative"].get<double>()) + " |";
    if (has_cm) {
      const json* p = nullptr;
      for (const auto& q : vc["cost_model"]) {
        if (q["nodes"] == mc[i]["nodes"]) p = &q;
      }
      md += p ? " " + Fmt("%.3f", (*p)["seconds"].get<double>() * 1e3) + " | " +
                    Fmt("%.2f", (*p)["relative"].get<double>()) + " |"
              : " - | - |";
    }
    md += "\n";
  }
  return md;
}

bool GnuplotAvailable() {
  int rc = 0;
  RunCapture("command -v gnuplot >/dev/null 2>&1", &rc);
  return rc == 0;
}

Status WritePlots(const json& r, const std::string& dir, std::vector<std::string>* files) {
  if (!GnuplotAvailable()) return Status::Error("gnuplot not found on PATH; plots skipped");
  int rc = 0;
  RunCapture("gnuplot -e 'set terminal pngcairo' 2>&1", &rc);
  const std::string term = rc == 0 ? "pngcairo size 1000,600 noenhanced font ',10'"
                                   : "png size 1000,600 noenhanced";
  const fs::path src = fs::path(dir) / "plots_src";
  std::error_code ec;
  fs::create_directories(src, ec);
  if (ec) return Status::Error("cannot create '" + src.string() + "': " + ec.message());

  std::string script = "set terminal " + term + "\nset datafile missing 'NaN'\nset key outside\n"
                       "set grid ytics\n";
  // 1. Speedup vs budget, one line per variant (budget-free methods are flat lines).
  std::vector<std::string> budgets;
  std::vector<std::string> methods;  // variants
  for (const auto& row : r.at("summary")) {
    const std::string b = row.at("budget"), m = Variant(row);
    if (b != "default" && std::find(budgets.begin(), budgets.end(), b) == budgets.end()) {
      budgets.push_back(b);
    }
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  }
  if (budgets.empty()) budgets.push_back("default");
  // One column per variant, one row per budget, of summary field `key`.
  auto by_budget = [&](const char* key, const std::string& file) {
    std::ofstream f(src / file);
    f << "budget";
    for (const auto& m : methods) f << "\t\"" << m << "\"";
    f << "\n";
    for (const auto& b : budgets) {
      f << "\"" << b << "\"";
      for (const auto& m : methods) {
        double v = NAN;
        for (const auto& row : r.at("summary")) {
          if (Variant(row) == m && (row["budget"] == b || row["budget"] == "default") &&
              row[key].is_number()) {
            v = row[key];
          }
        }
        f << "\t" << (std::isnan(v) ? std::string("NaN") : Fmt("%.4f", v));
      }
      f << "\n";
    }
  };
  auto plot_by_budget = [&](const std::string& file, const std::string& png,
                            const std::string& title) {
    const std::string ylabel = file == "tokens_per_second.dat" ? "tokens/s" : "speedup";
    script += "set output " + GpString((fs::path(dir) / png).string()) + "\n"
              "set title " + GpString(title) + "\n"
              "set xlabel 'budget (nodes incl. root)'\nset ylabel " + GpString(ylabel) + "\n"
              "plot for [i=2:" + std::to_string(methods.size() + 1) + "] " +
              GpString((src / file).string()) +
              " using i:xtic(1) with linespoints lw 2 title columnheader(i)\n";
  };
  by_budget("speedup", "speedup.dat");
  plot_by_budget("speedup.dat", "speedup_vs_budget.png",
                 "Measured speedup over none vs node budget (all data sets)");
  by_budget("tokens_per_second", "tokens_per_second.dat");
  plot_by_budget("tokens_per_second.dat", "tokens_per_second_vs_budget.png",
                 "Measured tokens/s vs node budget (decode phase, all data sets)");

  // 1b. With a cost model: the projected speedup (clearly labelled as such).
  const bool projected = r.at("summary").size() > 0 &&
                         r.at("summary")[0]["projected_speedup"].is_number();
  if (projected) {
    by_budget("projected_speedup", "projected.dat");
    plot_by_budget("projected.dat", "projected_speedup_vs_budget.png",
                   "PROJECTED speedup on the cost model (MAT / mean c(n)/c(1)), not measured");
  }
  // 2. MAT per data set, each variant at its best fixed budget (by MAT).
  const std::vector<std::string> sets = DataSets(r);
  const std::vector<std::string> best = BestPerVariant(r);
  {
    std::ofstream f(src / "mat.dat");
    f << "dataset";
    for (const auto& c : best) f << "\t\"" << c << "\"";
    f << "\n";
    for (const auto& s : sets) {
      f << "\"" << s << "\"";
      for (const auto& c : best) {
        const json* row = Find(r, s, c);
        f << "\t" << (row ? Fmt("%.4f", (*row)["mean_accepted_tokens"].get<double>()) : "NaN");
      }
      f << "\n";
    }
  }
  script += "set output " + GpString((fs::path(dir) / "mat_by_dataset.png").string()) + "\n"
            "set title 'Mean accepted tokens per pass by data set (each variant at its best "
            "budget by MAT)'\nset xlabel ''\nset ylabel 'MAT'\nset style data histograms\n"
            "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
            "set xtics rotate by -30\nset yrange [0:*]\n"
            "plot for [i=2:" + std::to_string(best.size() + 1) + "] " +
            GpString((src / "mat.dat").string()) + " using i:xtic(1) title columnheader(i)\n"
            "unset style data\nset xtics norotate\nset style data linespoints\n"
            "set autoscale y\n";
  // 3. Acceptance per reached node by depth, split by source, per variant (best budget by MAT).
  constexpr int kDepths = 16;
  std::vector<std::string> cols;
  std::vector<std::vector<double>> values;
  for (const auto& c : best) {
    const json* row = Find(r, "all", c);
    if (!row) continue;
    const json& by_depth = (*row)["stats"]["acceptance_by_depth"];
    for (auto it = by_depth.begin(); it != by_depth.end(); ++it) {
      std::vector<double> v(kDepths + 1, NAN);
      for (const auto& d : it.value()) {
        const int depth = d["depth"];
        const double reached = d["reached"].get<double>();
        if (depth <= kDepths && reached >= 5) v[depth] = d["accepted"].get<double>() / reached;
      }
      cols.push_back(c + " " + it.key());
      values.push_back(v);
    }
  }
  {
    std::ofstream f(src / "depth.dat");
    f << "depth";
    for (const auto& c : cols) f << "\t\"" << c << "\"";
    if (cols.empty()) f << "\t\"none\"";
    f << "\n";
    for (int d = 1; d <= kDepths; ++d) {
      f << d;
      for (const auto& v : values) f << "\t" << (std::isnan(v[d]) ? "NaN" : Fmt("%.4f", v[d]));
      if (cols.empty()) f << "\tNaN";
      f << "\n";
    }
  }
  script += "set output " + GpString((fs::path(dir) / "acceptance_by_depth.png").string()) +
            "\n"
            "set title 'Acceptance per reached node by depth, split by source (best budget by MAT "
            "per variant)'\nset xlabel 'depth'\nset ylabel 'accepted / reached'\nset yrange [0:1]\n"
            "set xrange [0.5:" + std::to_string(kDepths) + ".5]\nset xtics 1\n"
            "plot for [i=2:" + std::to_string(std::max<size_t>(cols.size(), 1) + 1) + "] " +
            GpString((src / "depth.dat").string()) +
            " using 1:i with linespoints lw 2 title columnheader(i)\n";
  // 4. The draft-model methods: acceptance per reached node by depth for each source (draft,
  //    graft_context, graft_table), each variant at its best fixed budget by MAT.
  std::vector<std::string> draft_cols;
  std::vector<std::vector<double>> draft_values;
  for (const auto& c : best) {
    const json* row = Find(r, "all", c);
    if (!row || !(*row)["stats"].contains("draft_model")) continue;
    const json& by_depth = (*row)["stats"]["acceptance_by_depth"];
    for (const char* source : {"draft", "graft_context", "graft_table"}) {
      if (!by_depth.contains(source)) continue;
      std::vector<double> v(kDepths + 1, NAN);
      for (const auto& d : by_depth[source]) {
        const int depth = d["depth"];
        const double reached = d["reached"].get<double>();
        if (depth <= kDepths && reached >= 5) v[depth] = d["accepted"].get<double>() / reached;
      }
      draft_cols.push_back(c + " " + source);
      draft_values.push_back(v);
    }
  }
  const bool draft_plot = !draft_cols.empty();
  if (draft_plot) {
    std::ofstream f(src / "draft_depth.dat");
    f << "depth";
    for (const auto& c : draft_cols) f << "\t\"" << c << "\"";
    f << "\n";
    for (int d = 1; d <= kDepths; ++d) {
      f << d;
      for (const auto& v : draft_values) {
        f << "\t" << (std::isnan(v[d]) ? "NaN" : Fmt("%.4f", v[d]));
      }
      f << "\n";
    }
    script += "set output " +
              GpString((fs::path(dir) / "draft_acceptance_by_source.png").string()) +
              "\nset title 'Draft-model methods: acceptance per reached node by source and "
              "depth (best budget by MAT per variant)'\n"
              "plot for [i=2:" + std::to_string(draft_cols.size() + 1) + "] " +
              GpString((src / "draft_depth.dat").string()) +
              " using 1:i with linespoints lw 2 title columnheader(i)\n";
  }
  {
    std::ofstream f(src / "plots.gp");
    f << script;
    if (!f) return Status::Error("cannot write '" + (src / "plots.gp").string() + "'");
  }
  const std::string out = RunCapture("gnuplot " + Quote((src / "plots.gp").string()) + " 2>&1", &rc);
  if (rc != 0) return Status::Error("gnuplot failed on " + (src / "plots.gp").string() + ": " + out);
  std::vector<std::string> pngs = {"speedup_vs_budget.png", "tokens_per_second_vs_budget.png",
                                    "mat_by_dataset.png", "acceptance_by_depth.png"};
  if (projected) pngs.push_back("projected_speedup_vs_budget.png");
  if (draft_plot) pngs.push_back("draft_acceptance_by_source.png");
  for (const std::string& name : pngs) {
    const fs::path p = fs::path(dir) / name;
    if (!fs::exists(p, ec) || fs::file_size(p, ec) == 0) {
      return Status::Error("gnuplot did not write " + p.string() + ": " + out);
    }
    files->push_back(p.string());
  }
  return Status::Ok();
}

}  // namespace goose
