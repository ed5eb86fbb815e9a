// goose subcommands. Each Add*Command registers its flags on the CLI11 app and returns the
// function to run once parsing succeeded; it returns the process exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace goose::cli {

using Runner = std::function<int()>;

Runner AddGenerateCommand(CLI::App& app);
Runner AddTokenizeCommand(CLI::App& app);
Runner AddSynthCommand(CLI::App& app);
Runner AddBenchVerifyCommand(CLI::App& app);
Runner AddBenchCommand(CLI::App& app);

// Model path to use when -m is not given: ../shared/models/stories260K.gguf beside the source
// tree, if it exists; otherwise empty.
std::string DefaultModelPath();
// Resolves -m (or the default) and explains what to do if there is none. Empty on failure.
std::string ResolveModelPath(const std::string& flag);

// Prints "goose: <message>" to stderr and returns exit code 1.
int Fail(const std::string& message);

}  // namespace goose::cli
