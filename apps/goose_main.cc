// goose command-line entry point: parses the subcommand and its flags (CLI11), then runs it.
// Every failure is one line "goose: <message>" on stderr and a non-zero exit: parse errors,
// an unknown command, and (as a backstop) any exception a command lets escape, such as
// std::bad_alloc. --help prints help and exits 0.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "ops/cpu_features.h"

namespace {

std::string VersionLine() {
  return std::string("goose ") + GOOSE_VERSION + " (commit " + GOOSE_COMMIT + ", " +
         (*GOOSE_BUILD_TYPE ? GOOSE_BUILD_TYPE : "no build type") + " build, CPU level " +
         goose::CpuLevelName(goose::ActiveCpuLevel()) + ")";
}

// CLI11 messages are one line already; make sure of it.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "unknown option --temperature (did you mean --temp?)" for the first argument of the command
// line that names no option of `cmd`; empty if there is none.
std::string UnknownOptionMessage(const CLI::App& cmd, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.') {
      continue;  // a value (negative numbers too)
    }
    arg = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
    std::string best;
    size_t best_d = 3;  // suggest within 2 edits, or a name that starts the other
    for (const std::string& n : names) {
      if (n.size() < 3) continue;
      const bool prefix = arg.rfind(n, 0) == 0 || n.rfind(arg, 0) == 0;
      const size_t d = prefix ? 1 : EditDistance(arg, n);
      if (d < best_d) best_d = d, best = n;
    }
    return "unknown option " + arg + (best.empty() ? "" : " (did you mean " + best + "?)") +
           "; goose " + cmd.get_name() + " --help lists the options";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"goose: lossless speculative decoding for Llama-family GGUF models"};
  app.require_subcommand(1);
  // Every option's help shows its default (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  std::map<CLI::App*, goose::cli::Runner> runners;
  std::set<std::string> known;
  std::string names;  // "generate, tokenize, ..."
  auto add = [&](const char* name, const char* help, goose::cli::Runner (*fn)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = fn(*sub);
    known.insert(name);
    names += names.empty() ? name : std::string(", ") + name;
  };
  add("generate", "generate text (plain or speculative)", goose::cli::AddGenerateCommand);
  add("tokenize", "print the token ids of a text", goose::cli::AddTokenizeCommand);
  add("synth", "write a random-weight model of a chosen shape", goose::cli::AddSynthCommand);
  add("bench", "Spec-Bench-style evaluation of the methods", goose::cli::AddBenchCommand);
  add("bench-serve", "concurrent clients against the serving loop, speculation off and on",
      goose::cli::AddBenchServeCommand);
  add("serve", "OpenAI-compatible HTTP server (completions, chat, streaming)",
      goose::cli::AddServeCommand);
  add("bench-verify", "measure the cost of scoring a tree of N nodes",
      goose::cli::AddBenchVerifyCommand);
  add("demo", "plain vs speculative tokens/s on a realistic-cost model built from the tiny one",
      goose::cli::AddDemoCommand);
  app.set_version_flag("--version", VersionLine(),
                       "print the version, commit, build and CPU level");

  if (argc < 2) {
    return goose::cli::Fail("no command given (" + names + "); goose --help lists them");
  }
  const std::string first = argv[1];
  if (!first.empty() && first[0] != '-' && known.count(first) == 0) {
    return goose::cli::Fail("unknown command '" + first + "' (" + names + ")");
  }
  // llama.cpp's -md (draft model): CLI11 takes only one-letter short names.
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "-md") argv[i] = const_cast<char*>("--model-draft");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      for (auto& [sub, run] : runners) {
        if (sub->get_name() != first) continue;
        if (std::string msg = UnknownOptionMessage(*sub, argc, argv); !msg.empty()) {
          return goose::cli::Fail(msg);
        }
      }
    }
    return goose::cli::Fail(OneLine(e.what()));
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const std::bad_alloc&) {
    return goose::cli::Fail("out of memory (std::bad_alloc); try a smaller model or -c");
  } catch (const std::exception& e) {
    return goose::cli::Fail(OneLine(e.what()));
  }
  return goose::cli::Fail("no command given (" + names + ")");
}
