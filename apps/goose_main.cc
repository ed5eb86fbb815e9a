// goose command-line entry point: parses the subcommand and its flags (CLI11), then runs it.
#include <cstdio>
#include <map>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"goose: lossless speculative decoding for Llama-family GGUF models"};
  app.require_subcommand(1);
  std::map<CLI::App*, goose::cli::Runner> runners;
  auto add = [&](const char* name, const char* help, goose::cli::Runner (*fn)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = fn(*sub);
  };
  add("generate", "generate text (plain or speculative)", goose::cli::AddGenerateCommand);
  add("tokenize", "print the token ids of a text", goose::cli::AddTokenizeCommand);
  add("synth", "write a random-weight model of a chosen shape", goose::cli::AddSynthCommand);
  add("bench-verify", "measure the cost of scoring a tree of N nodes",
      goose::cli::AddBenchVerifyCommand);
  add("bench", "Spec-Bench-style evaluation of the methods", goose::cli::AddBenchCommand);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return 1;
}
