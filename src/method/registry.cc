// The method registry and variant names (method.h). A new method is one file defining its
// Method and Drafter, and one line in kMethods below.
#include <algorithm>

#include "method/method.h"
#include "util/check.h"
#include "util/escape.h"

namespace goose {

// Defined in <name>_method.cc.
const Method& PlainMethod();
const Method& PldMethod();
const Method& TrMethod();
const Method& BalancedMethod();
const Method& SequoiaMethod();
const Method& GooseMethod();
const Method& DraftChainMethod();
const Method& DraftTreeMethod();
const Method& GraftMethod();

const std::vector<const Method*>& Methods() {
  static const std::vector<const Method*> kMethods = {
      &PlainMethod(), &PldMethod(),        &TrMethod(),        &BalancedMethod(), &SequoiaMethod(),
      &GooseMethod(), &DraftChainMethod(), &DraftTreeMethod(), &GraftMethod(),
  };
  return kMethods;
}

const Method* FindMethod(std::string_view name) {
  for (const Method* m : Methods()) {
    if (name == m->name()) return m;
  }
  return nullptr;
}

std::string MethodNames() {
  std::string out;
  for (const Method* m : Methods()) out += (out.empty() ? "" : "|") + std::string(m->name());
  return out;
}

std::vector<std::string> AllVariants() {
  std::vector<std::string> out;
  for (const Method* m : Methods()) {
    for (const std::string& v : m->variants()) out.push_back(v);
  }
  return out;
}

bool SpecParams::Has(std::string_view modifier) const {
  return std::find(modifiers.begin(), modifiers.end(), modifier) != modifiers.end();
}

std::vector<std::string> Method::variants() const {
  std::vector<std::string> out = {name()};
  if (uses_table())
    out.push_back(std::string(name()) + (KeepsTableByDefault({}) ? "+cold" : "+keep"));
  return out;
}

bool Method::KeepsTable(const SpecParams& spec) const {
  if (!uses_table()) return false;
  if (spec.keep_table >= 0) return spec.keep_table != 0;
  return KeepsTableByDefault(spec);
}

std::unique_ptr<Learned> Method::NewLearned(const SpecParams& spec, const DrafterEnv& env) const {
  auto learned = std::make_unique<Learned>();
  if (uses_table()) {
    learned->table =
        std::make_unique<TransitionTable>(env.vocab_size(), 10, 16, true, env.target_fingerprint);
  }
  return learned;
}

Status ParseSpecVariant(std::string_view name, SpecParams* out) {
  SpecParams p;
  const Method* method = nullptr;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('+', start), name.size());
    const std::string part(name.substr(start, end - start));
    start = end + 1;
    if (method == nullptr) {
      method = FindMethod(part);
      if (method == nullptr) {
        return Status::Error("unknown method '" + EscapeForMessage(part) + "' (" + MethodNames() +
                             ")");
      }
      p.method = part;
      continue;
    }
    const std::vector<std::string> mods = method->modifiers();
    if (method->uses_table() && (part == "keep" || part == "cold")) {
      p.keep_table = part == "keep" ? 1 : 0;
    } else if (std::find(mods.begin(), mods.end(), part) != mods.end()) {
      if (!p.Has(part)) p.modifiers.push_back(part);
    } else {
      std::string allowed;
      for (const std::string& m : mods) allowed += (allowed.empty() ? "" : ", ") + m;
      if (method->uses_table()) allowed += std::string(allowed.empty() ? "" : ", ") + "keep, cold";
      return Status::Error("unknown modifier '" + EscapeForMessage(part) + "' in '" +
                           EscapeForMessage(name) + "' (" + method->name() + " takes " +
                           (allowed.empty() ? std::string("none") : allowed) + ")");
    }
  }
  GOOSE_RETURN_IF_ERROR(method->Configure(&p));
  *out = std::move(p);
  return Status::Ok();
}

const Method& MethodOf(const SpecParams& spec) {
  const Method* m = FindMethod(spec.method);
  GOOSE_CHECK(m != nullptr);
  return *m;
}

std::string SpecVariantKey(const SpecParams& spec) {
  const Method& m = MethodOf(spec);
  std::string key = m.name();
  for (const std::string& mod : m.modifiers()) {
    if (spec.Has(mod)) key += "+" + mod;
  }
  if (m.uses_table()) key += m.KeepsTable(spec) ? "+keep" : "+cold";
  return key;
}

std::string LearnedKey(const SpecParams& spec) {
  std::string key = SpecVariantKey(spec);
  if (spec.draft_fingerprint != 0) {
    key += StrFormat("@draft-%016llx", static_cast<unsigned long long>(spec.draft_fingerprint));
  }
  return key;
}

int ResolvedBudget(const SpecParams& spec) {
  return spec.budget > 0 ? spec.budget : MethodOf(spec).DefaultBudget(spec);
}

}  // namespace goose
