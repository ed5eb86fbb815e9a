// Shared helpers for the model tests: locating shared data and loading the tiny model.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "model/model.h"

namespace goose {

#ifndef GOOSE_SHARED_DIR
#define GOOSE_SHARED_DIR ""
#endif

// GOOSE_SHARED (environment) if set, else the build's GOOSE_SHARED_DIR.
inline std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("GOOSE_SHARED");
  const std::string dir = env != nullptr && *env != '\0' ? env : GOOSE_SHARED_DIR;
  return dir + "/" + rel;
}

inline std::string TinyModelPath() { return SharedPath("models/stories260K.gguf"); }

// Loaded once per test binary (a Model is immutable and shareable).
inline const Model& TinyModel() {
  static const std::unique_ptr<Model> model = [] {
    auto m = Model::Load(TinyModelPath());
    if (!m.ok()) {
      std::fprintf(stderr, "cannot load tiny model: %s\n", m.status().message().c_str());
      std::abort();
    }
    return std::move(m).value();
  }();
  return *model;
}

}  // namespace goose
