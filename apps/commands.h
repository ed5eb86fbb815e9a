// goose subcommands. Each Add*Command registers its flags on the CLI11 app and returns the
// function to run once parsing succeeded; it returns the process exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "method/method.h"
#include "model/llama_config.h"
#include "model/model.h"
#include "util/status.h"

namespace goose::cli {

using Runner = std::function<int()>;

Runner AddGenerateCommand(CLI::App& app);
Runner AddTokenizeCommand(CLI::App& app);
Runner AddSynthCommand(CLI::App& app);
Runner AddBenchVerifyCommand(CLI::App& app);
Runner AddBenchCommand(CLI::App& app);
Runner AddBenchServeCommand(CLI::App& app);
Runner AddDemoCommand(CLI::App& app);
Runner AddServeCommand(CLI::App& app);

// Model path to use when -m is not given: $GOOSE_MODEL if set, else
// shared/models/stories260K.gguf next to the checkout the executable is in
// (<exe dir>/../../shared), else next to the source tree it was built from; empty if none exists.
std::string DefaultModelPath();
// Resolves -m (or the default) and explains what to do if there is none. Empty on failure.
std::string ResolveModelPath(const std::string& flag);

// The prompt sets: $GOOSE_SHARED/data, else ../shared/data beside the source tree.
std::string DefaultDataDir();

// Prints "goose: <message>" to stderr and returns exit code 1.
int Fail(const std::string& message);

// Errors naming `flag` unless `path` can be written (an existing regular file we may write, or a
// new file in a writable folder): checked before any work so a long run cannot fail at its end.
Status CheckWritableFile(const std::string& path, const std::string& flag);
// The same for an output folder, created if missing.
Status CheckWritableDir(const std::string& dir, const std::string& flag);

// CLI11 validators whose messages name the bad value and the range: "'abc' is not an integer
// in 0..16777216".
CLI::Validator IntIn(int64_t lo, int64_t hi);
CLI::Validator NumberIn(double lo, double hi);

// --kv-type f16|f32: the KV cache's elements (model.h KvType; f16 unless given).
void AddKvTypeFlag(CLI::App& app, KvType* kv);

// --budget: 0..128 sets spec->budget (0 = the method's default); "auto" is accepted and left to
// the caller, which sets spec->auto_budget once the cost curve is loaded.
Status ParseBudgetFlag(const std::string& text, SpecParams* spec);
// "small-0.5b, llama-1b, ..., keep": the shapes of goose synth --inflate and goose demo.
std::string InflateShapeNames();
// All of standard input (-f -).
std::string ReadStdin();

}  // namespace goose::cli
