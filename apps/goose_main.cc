// goose command-line entry point: parses the subcommand and its flags (CLI11), then runs it.
// Every failure is one line "goose: <message>" on stderr and a non-zero exit: parse errors,
// an unknown command, and (as a backstop) any exception a command lets escape, such as
// std::bad_alloc. --help prints help and exits 0.
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string>

#include "commands.h"

namespace {

// CLI11 messages are one line already; make sure of it.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"goose: lossless speculative decoding for Llama-family GGUF models"};
  app.require_subcommand(1);
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
  add("serve", "OpenAI-compatible HTTP server (completions, chat, streaming)",
      goose::cli::AddServeCommand);
  add("bench-verify", "measure the cost of scoring a tree of N nodes",
      goose::cli::AddBenchVerifyCommand);

  if (argc < 2) {
    return goose::cli::Fail("no command given (" + names + "); goose --help lists them");
  }
  const std::string first = argv[1];
  if (!first.empty() && first[0] != '-' && known.count(first) == 0) {
    return goose::cli::Fail("unknown command '" + first + "' (" + names + ")");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
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
