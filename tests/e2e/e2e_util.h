// Shared fixtures for end-to-end tests: the tiny real model, a small synthesized qwen2 model,
// and a prompt set mixing TinyStories, Spec-Bench and self-repeating texts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace goose {

std::string SharedPath(const std::string& rel);
const Model& TinyModel();
// hidden 64, 2 layers, 4/2 heads, ffn 128, q8_0 weights, NeoX RoPE, QKV biases, the tiny
// model's vocabulary; written once per test binary into a temp dir.
const Model& SynthQwen2Model();
// The same weights in Q4_0: a draft model of SynthQwen2Model() that agrees with it often, as a
// quantized copy of a target does (the weak tiny drafter is no draft of a random model).
const Model& SynthQwen2Twin();

// `n` prompts tokenized for `model` (BOS included), each at most `max_tokens` long:
// TinyStories (BOS + first 48 tokens), Spec-Bench first turns, and repetitive texts that make
// the context matcher fire.
std::vector<std::vector<int32_t>> LosslessPrompts(const Model& model, int max_tokens);

// Plain decoding's ids for a prompt (one thread, a 512-token context), computed once per
// (model, prompt, sampling parameters, n_predict, eos, stop tokens) and shared by every case of
// the process that asks.
const std::vector<int32_t>& PlainIds(const Model& model, const std::vector<int32_t>& prompt,
                                     const GenerateParams& base);

// The goose binary run through the shell: `shell_prefix` first (e.g. "ulimit -v N; " or
// "VAR=value "), then `binary args`, stdout and stderr captured.
struct RunResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string out, err;
};
RunResult RunGoose(const std::string& args, const std::string& shell_prefix = "",
                   const std::string& binary = std::string(GOOSE_BINARY_DIR) + "/goose");
std::string ReadAll(const std::string& path);

// True when built with ASan/UBSan: tests then use smaller workloads.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#else
    false;
#endif

}  // namespace goose
