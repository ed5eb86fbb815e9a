// Shared by the engine tests: the tiny real model from ../shared (GOOSE_SHARED overrides).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "model/model.h"

namespace goose {

inline const Model& Tiny() {
  static const std::unique_ptr<Model> m = [] {
    const char* env = std::getenv("GOOSE_SHARED");
    const std::string dir = env && *env ? env : GOOSE_SHARED_DIR;
    auto r = Model::Load(dir + "/models/stories260K.gguf");
    if (!r.ok()) std::abort();
    return std::move(r).value();
  }();
  return *m;
}

}  // namespace goose
