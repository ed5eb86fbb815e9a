#include "engine/learned_store.h"

namespace goose {

Learned& LearnedStore::Get(const SpecParams& spec, const DrafterEnv& env) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& [saved_spec, l] = learned_[LearnedKey(spec)];
  if (!l) {
    saved_spec = spec;
    l = MethodOf(spec).NewLearned(spec, env);
    if (cache_) cache_->Load(spec, l.get());
  }
  return *l;
}

Status LearnedStore::Save() {
  if (!cache_) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  Status status = Status::Ok();
  for (auto& [key, entry] : learned_) {
    std::lock_guard<std::mutex> variant_lock(entry.second->mu);
    if (entry.second->stats.cycles == 0) continue;
    if (Status st = cache_->Save(entry.first, *entry.second); !st.ok()) status = st;
  }
  return status;
}

}  // namespace goose
