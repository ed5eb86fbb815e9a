// goose subcommands. Each Add*Command registers its flags on the CLI11 app and returns the
// function to run once parsing succeeded; it returns the process exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "model/llama_config.h"
#include "util/status.h"

namespace goose::cli {

using Runner = std::function<int()>;

Runner AddGenerateCommand(CLI::App& app);
Runner AddTokenizeCommand(CLI::App& app);
Runner AddSynthCommand(CLI::App& app);
Runner AddBenchVerifyCommand(CLI::App& app);
Runner AddBenchCommand(CLI::App& app);
Runner AddServeCommand(CLI::App& app);

// Model path to use when -m is not given: shared/models/stories260K.gguf next to the checkout
// the executable is in (<exe dir>/../../shared), else next to the source tree it was built from;
// empty if neither exists.
std::string DefaultModelPath();
// Resolves -m (or the default) and explains what to do if there is none. Empty on failure.
std::string ResolveModelPath(const std::string& flag);

// Prints "goose: <message>" to stderr and returns exit code 1.
int Fail(const std::string& message);

// Memory the system can give now (MemAvailable, else free physical pages); 0 if unknown.
uint64_t AvailableMemoryBytes();
// An error naming `what`, the size and `advice` when `bytes` exceed the available memory (a
// request that would otherwise end in std::bad_alloc or the OOM killer).
Status CheckMemory(uint64_t bytes, const std::string& what, const std::string& advice);
// CheckMemory for `n_contexts` Contexts of n_ctx tokens (0 = default) whose largest batch has
// n_batch tokens; the advice is to use a smaller `flag` (e.g. "-c").
Status CheckContextMemory(const LlamaConfig& config, int n_ctx, int n_batch, int n_contexts,
                          const std::string& flag);

}  // namespace goose::cli
