// LearnedStore: what the variants that keep their state across requests have learned (their
// Learned: table, statistics, budget history, method extras), by LearnedKey, shared by every
// Engine of one model (server slots, a Session's engines). With a cache, a variant starts from
// what earlier runs saved (engine/learned_cache.h). Thread-safe; each Learned has its own mutex,
// which the Sequence holds around every drafter call.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "engine/learned_cache.h"
#include "method/method.h"

namespace goose {

class LearnedStore {
 public:
  explicit LearnedStore(std::shared_ptr<LearnedCache> cache = nullptr) : cache_(std::move(cache)) {}
  // The variant's Learned, created on first use (loaded from the cache). Never removed.
  Learned& Get(const SpecParams& spec, const DrafterEnv& env);
  // Saves every variant that ran a cycle to the cache (none: Ok). Not while requests run.
  Status Save();
  LearnedCache* cache() const { return cache_.get(); }

 private:
  std::shared_ptr<LearnedCache> cache_;
  std::mutex mu_;
  std::map<std::string, std::pair<SpecParams, std::unique_ptr<Learned>>> learned_;
};

}  // namespace goose
