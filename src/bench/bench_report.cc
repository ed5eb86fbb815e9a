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

// "draft 9.00 (0.500), graft_context 5.50 (0.750)": a draft-model row's slots per cycle and
// acceptance per reached node, for every source its trees held.
std::string SlotsBySource(const json& row) {
  std::string out;
  for (const auto& [source, slots] : row["stats"]["draft_model"]["slots_per_cycle"].items()) {
    out += (out.empty() ? "" : ", ") + source + " " + Fmt("%.2f", slots.get<double>()) + " (" +
           SourceRate(row, source.c_str()) + ")";
  }
  return out.empty() ? "-" : out;
}

// The draft-model methods: draft work per cycle, slots and acceptance by source.
std::string DraftMarkdown(const json& r) {
  const std::vector<const json*> rows = DraftRows(r);
  if (rows.empty()) return "";
  std::string md =
      "\n## Draft model: work per cycle, slots and acceptance by source\n\n"
      "| config | MAT | tok/s | draft passes | draft ms | draft share of decode | pruned slots | "
      "slots (acceptance) by source |\n"
      "|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const json* row : rows) {
    const json& d = (*row)["stats"]["draft_model"];
    const double decode = (*row)["decode_seconds"].get<double>();
    md += "| " + (*row)["config"].get<std::string>() + " | " +
          Fmt("%.3f", (*row)["mean_accepted_tokens"].get<double>()) + " | " +
          Fmt("%.1f", (*row)["tokens_per_second"].get<double>()) + " | " +
          Fmt("%.2f", d["passes_per_cycle"].get<double>()) + " | " +
          Fmt("%.2f", 1e3 * d["seconds_per_cycle"].get<double>()) + " | " +
          (decode > 0 ? Fmt("%.1f%%", 100 * d["seconds"].get<double>() / decode) : "-") + " | " +
          Fmt("%.2f", d["pruned_slots_per_cycle"].get<double>()) + " | " + SlotsBySource(*row) +
          " |\n";
  }
  md +=
      "\nPer cycle (cycles the draft model drafted); slots are verify-tree nodes besides the "
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
  md +=
      "\n\\* *Projection, not a measurement*: (MAT / mean c(n)/c(1)) / MAT(none), with c the "
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

// Line styles that read on white and in grey: the Okabe-Ito colours without yellow (each a
// different lightness), and each with its own dash pattern and point type.
std::string LineTypes() {
  const char* colors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                          "#E69F00", "#56B4E9", "#000000", "#7F7F7F"};
  const int points[] = {7, 5, 9, 13, 11, 4, 6, 8};
  const int dashes[] = {1, 2, 4, 5, 1, 2, 4, 5};  // no dotted lines: too faint at lw 2
  std::string s;
  for (int i = 0; i < 8; ++i) {
    s += "set linetype " + std::to_string(i + 1) + " lc rgb '" + colors[i] + "' lw 2 dt " +
         std::to_string(dashes[i]) + " pt " + std::to_string(points[i]) + " ps 1.3\n";
  }
  return s + "set linetype cycle 8\n";
}

// One plotted series of a "vs budget" plot: a variant's fixed budgets as a line, or one point
// (an auto budget or a method without a budget) at its mean tree size.
struct Series {
  std::string title;
  int linetype = 1;
  bool line = false;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// The "vs budget" series of summary field `key`: x is the node budget for fixed budgets and the
// mean tree size for auto budgets and budget-less methods (their tree size is what they chose,
// not a setting). Plain decoding is the baseline, returned in *baseline (NaN if absent).
std::vector<Series> BudgetSeries(const json& r, const char* key, double* baseline) {
  std::vector<std::string> variants;
  for (const auto& row : r.at("summary")) {
    const std::string v = Variant(row);
    if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
  }
  *baseline = NAN;
  std::vector<Series> out;
  // Line type i + 1 for the i-th variant in summary order, none included (it is the reference
  // line here), so that a variant has the same colour as its bar in mat_by_dataset.png.
  for (size_t i = 0; i < variants.size(); ++i) {
    if (variants[i] == "none") continue;
    Series fixed{variants[i], static_cast<int>(i % 8) + 1, true, {}};
    std::vector<Series> points;
    for (const auto& row : r.at("summary")) {
      if (Variant(row) != variants[i] || !row.contains(key) || !row[key].is_number()) continue;
      const double y = row[key];
      const std::string b = row.at("budget");
      if (b != "default" && b != "auto" && b != "auto-cm") {
        fixed.points.emplace_back(std::stod(b), y);
        continue;
      }
      if (!row.contains("mean_tree_nodes") || !row["mean_tree_nodes"].is_number()) continue;
      const double nodes = row["mean_tree_nodes"];
      const std::string name = b == "default" ? variants[i] : variants[i] + " " + b;
      points.push_back(
          {name + Fmt(" (mean tree %.1f)", nodes), fixed.linetype, false, {{nodes, y}}});
    }
    std::sort(fixed.points.begin(), fixed.points.end());
    if (!fixed.points.empty()) out.push_back(fixed);
    out.insert(out.end(), points.begin(), points.end());
  }
  for (const auto& row : r.at("summary")) {
    if (Variant(row) == "none" && row.contains(key) && row[key].is_number()) *baseline = row[key];
  }
  return out;
}

// Acceptance per reached node by depth, one curve per (config, source); depths reached fewer
// than 5 times are left out (NaN) rather than drawn as 0 or 1 from a handful of nodes.
struct DepthCurves {
  static constexpr int kMaxDepth = 64;
  std::vector<std::string> names;
  std::vector<std::vector<double>> rates;  // [curve][depth], index 0 unused

  void Add(const std::string& name, const json& per_depth) {
    std::vector<double> v(kMaxDepth + 1, NAN);
    for (const auto& d : per_depth) {
      const int depth = d["depth"];
      const double reached = d["reached"].get<double>();
      if (depth >= 1 && depth <= kMaxDepth && reached >= 5) {
        v[depth] = d["accepted"].get<double>() / reached;
      }
    }
    names.push_back(name);
    rates.push_back(std::move(v));
  }

  // Writes a column per curve and a row per depth up to the deepest with data (at least 1);
  // returns that depth.
  int Write(const fs::path& path) const {
    int max_depth = 1;
    for (const auto& v : rates) {
      for (int d = 1; d <= kMaxDepth; ++d) {
        if (!std::isnan(v[d])) max_depth = std::max(max_depth, d);
      }
    }
    std::ofstream f(path);
    f << "depth";
    for (const auto& n : names) f << "\t\"" << n << "\"";
    if (names.empty()) f << "\t\"none\"";
    f << "\n";
    for (int d = 1; d <= max_depth; ++d) {
      f << d;
      for (const auto& v : rates) f << "\t" << (std::isnan(v[d]) ? "NaN" : Fmt("%.4f", v[d]));
      if (names.empty()) f << "\tNaN";
      f << "\n";
    }
    return max_depth;
  }
};

// The terminal line of every plot: pngcairo where gnuplot has it.
std::string PngTerminal() {
  int rc = 0;
  RunCapture("gnuplot -e 'set terminal pngcairo' 2>&1", &rc);
  return rc == 0 ? "pngcairo size 1000,600 noenhanced font ',10'" : "png size 1000,600 noenhanced";
}

Status RunGnuplot(const std::string& script, const std::string& data, const std::string& dir,
                  const std::string& name) {
  if (!GnuplotAvailable()) return Status::Error("gnuplot not found on PATH; plots skipped");
  const fs::path src = fs::path(dir) / "plots_src";
  std::error_code ec;
  fs::create_directories(src, ec);
  if (ec) return Status::Error("cannot create '" + src.string() + "': " + ec.message());
  const fs::path dat = src / (name + ".dat"), gp = src / (name + ".gp");
  std::ofstream(dat) << data;
  {
    std::ofstream f(gp);
    f << "set terminal " << PngTerminal() << "\nDATA = " << GpString(dat.string()) << "\n"
      << script;
    if (!f) return Status::Error("cannot write '" + gp.string() + "'");
  }
  int rc = 0;
  const std::string out = RunCapture("gnuplot " + Quote(gp.string()) + " 2>&1", &rc);
  if (rc != 0) return Status::Error("gnuplot failed on " + gp.string() + ": " + out);
  return Status::Ok();
}

Status WritePlots(const json& r, const std::string& dir, std::vector<std::string>* files) {
  if (!GnuplotAvailable()) return Status::Error("gnuplot not found on PATH; plots skipped");
  const std::string term = PngTerminal();
  const fs::path src = fs::path(dir) / "plots_src";
  std::error_code ec;
  fs::create_directories(src, ec);
  if (ec) return Status::Error("cannot create '" + src.string() + "': " + ec.message());

  std::string script = "set terminal " + term +
                       "\nset datafile missing 'NaN'\nset key outside\n"
                       "set grid ytics\n" +
                       LineTypes();
  // 1. Speedup (tokens/s, projected speedup) vs budget: a line per variant over its fixed
  //    budgets, a marker for each auto budget and budget-less method at its mean tree size,
  //    plain decoding as a dashed reference. x is log2: budgets double.
  auto plot_vs_budget = [&](const char* key, const std::string& file, const std::string& png,
                            const std::string& title, const std::string& ylabel) {
    double baseline = NAN;
    const std::vector<Series> series = BudgetSeries(r, key, &baseline);
    std::ofstream f(src / file);
    double lo = 1, hi = 2, top = std::isnan(baseline) ? 0 : baseline;
    for (const Series& s : series) {
      f << "# " << s.title << "\n";
      for (const auto& [x, y] : s.points) {
        f << Fmt("%.4f", x) << "\t" << Fmt("%.4f", y) << "\n";
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        top = std::max(top, y);
      }
      f << "\n\n";
    }
    script += "set output " + GpString((fs::path(dir) / png).string()) +
              "\n"
              "set title " +
              GpString(title) +
              "\n"
              "set xlabel 'tree size in nodes incl. root (fixed budgets: the budget; auto and "
              "budget-less methods: their mean tree)'\nset ylabel " +
              GpString(ylabel) +
              "\n"
              "set logscale x 2\nset xrange [" +
              Fmt("%.3f", lo / 1.25) + ":" + Fmt("%.3f", hi * 1.25) +
              "]\nset yrange [0:" + Fmt("%.6g", top > 0 ? top * 1.1 : 1) + "]\n";
    std::string plot;
    for (size_t i = 0; i < series.size(); ++i) {
      const Series& s = series[i];
      plot += (plot.empty() ? "plot " : ", \\\n     ") + GpString((src / file).string()) +
              " index " + std::to_string(i) + " using 1:2 with " +
              (s.line ? "linespoints lt " + std::to_string(s.linetype)
                      : "points lt " + std::to_string(s.linetype) + " ps 2.5") +
              " title " + GpString(s.title);
    }
    if (!std::isnan(baseline)) {
      plot += (plot.empty() ? "plot " : ", \\\n     ") + Fmt("%.6g", baseline) +
              " with lines dt 2 lw 1.5 lc rgb '#404040' title 'none (plain decoding)'";
    }
    script += (plot.empty() ? "plot NaN notitle" : plot) +
              "\nunset logscale x\nset autoscale x\nset autoscale y\n";
  };
  plot_vs_budget("speedup", "speedup.dat", "speedup_vs_budget.png",
                 "Measured speedup over none vs tree size (all data sets)", "speedup");
  plot_vs_budget("tokens_per_second", "tokens_per_second.dat", "tokens_per_second_vs_budget.png",
                 "Measured tokens/s vs tree size (decode phase, all data sets)", "tokens/s");

  // 1b. With a cost model: the projected speedup (clearly labelled as such).
  const bool projected =
      r.at("summary").size() > 0 && r.at("summary")[0]["projected_speedup"].is_number();
  if (projected) {
    plot_vs_budget("projected_speedup", "projected.dat", "projected_speedup_vs_budget.png",
                   "PROJECTED speedup on the cost model (MAT / mean c(n)/c(1)), not measured",
                   "projected speedup");
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
  script += "set output " + GpString((fs::path(dir) / "mat_by_dataset.png").string()) +
            "\n"
            "set title 'Mean accepted tokens per pass by data set (each variant at its best "
            "budget by MAT)'\nset xlabel ''\nset ylabel 'MAT'\nset style data histograms\n"
            "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
            "set xtics rotate by -30\nset yrange [0:*]\n"
            "plot for [i=2:" +
            std::to_string(best.size() + 1) + "] " + GpString((src / "mat.dat").string()) +
            " using i:xtic(1) lt i-1 dt 1 title columnheader(i)\n"
            "unset style data\nset xtics norotate\nset style data linespoints\n"
            "set autoscale y\n";
  // 3. Acceptance per reached node by depth, split by source, per variant (best budget by MAT);
  // 4. for the draft-model methods, the same for their draft / graft_context / graft_table
  //    sources. The depth axis ends where the data does.
  DepthCurves all_sources, draft_sources;
  for (const auto& c : best) {
    const json* row = Find(r, "all", c);
    if (!row) continue;
    const json& by_depth = (*row)["stats"]["acceptance_by_depth"];
    for (auto it = by_depth.begin(); it != by_depth.end(); ++it) {
      all_sources.Add(c + " " + it.key(), it.value());
    }
    if (!(*row)["stats"].contains("draft_model")) continue;
    for (const char* source : {"draft", "graft_context", "graft_table"}) {
      if (by_depth.contains(source)) draft_sources.Add(c + " " + source, by_depth[source]);
    }
  }
  auto plot_depth = [&](const DepthCurves& curves, const std::string& file, const std::string& png,
                        const std::string& title) {
    const int max_depth = curves.Write(src / file);
    script += "set output " + GpString((fs::path(dir) / png).string()) +
              "\n"
              "set title " +
              GpString(title) +
              "\n"
              "set xlabel 'depth'\nset ylabel 'accepted / reached'\nset yrange [0:1]\n"
              "set xrange [0.5:" +
              std::to_string(max_depth) +
              ".5]\nset xtics 1\n"
              "plot for [i=2:" +
              std::to_string(std::max<size_t>(curves.names.size(), 1) + 1) + "] " +
              GpString((src / file).string()) +
              " using 1:i with linespoints title columnheader(i)\n";
  };
  plot_depth(all_sources, "depth.dat", "acceptance_by_depth.png",
             "Acceptance per reached node by depth, split by source (best budget by MAT per "
             "variant)");
  const bool draft_plot = !draft_sources.names.empty();
  if (draft_plot) {
    plot_depth(draft_sources, "draft_depth.dat", "draft_acceptance_by_source.png",
               "Draft-model methods: acceptance per reached node by source and depth (best "
               "budget by MAT per variant)");
  }
  {
    std::ofstream f(src / "plots.gp");
    f << script;
    if (!f) return Status::Error("cannot write '" + (src / "plots.gp").string() + "'");
  }
  int rc = 0;
  const std::string out =
      RunCapture("gnuplot " + Quote((src / "plots.gp").string()) + " 2>&1", &rc);
  if (rc != 0)
    return Status::Error("gnuplot failed on " + (src / "plots.gp").string() + ": " + out);
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
