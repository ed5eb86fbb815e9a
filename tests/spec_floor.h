// Speculation floors for the lossless tests. Equal output alone proves nothing about
// speculation: a drafter that proposes nothing, or a verifier that accepts nothing, emits
// plain decoding's tokens too. So every lossless case also asks for a least number of accepted
// draft tokens, by source where a method drafts from several (GOOSE's spine and branches,
// graft's draft model and retrieval), and fails when speculation silently stopped.
// SweepVariants: the variants the sweeps run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "method/method.h"
#include "tree/draft_tree.h"
#include "verify/spec_stats.h"

namespace goose {

// Draft tokens accepted, over every source (the root is never counted).
inline int64_t AcceptedDrafts(const SpecStats& s) {
  int64_t n = 0;
  for (int src = 1; src < kNumSources; ++src) n += s.accepted[src];
  return n;
}

// "spine 12/40, branch 3/9" (accepted / drafted, for the sources that drafted).
inline std::string AcceptedBySource(const SpecStats& s) {
  std::string out;
  for (int src = 1; src < kNumSources; ++src) {
    if (s.drafted[src] == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(NodeSourceName(static_cast<NodeSource>(src))) +
           " " + std::to_string(s.accepted[src]) + "/" + std::to_string(s.drafted[src]);
  }
  return out.empty() ? "nothing drafted" : out;
}

struct SourceFloor {
  NodeSource source;
  double per_mille;  // accepted draft tokens of this source per 1000 generated tokens, at least
};

// The floors of a method (Method::name()), greedy or sampled (temperature 0.8 to 1.5), for the
// lossless sweeps' workloads (tests/e2e/lossless_test.cc, arch_lossless_test.cc: the tiny model,
// a random qwen2, the reference architectures, ten to twenty prompts at budgets 1, 8, 32 and the
// default): a quarter of the least that any of those cases accepted when they were set (sampled
// at 1.5 on the random qwen2, mostly), so tuning a method does not trip them and a source that
// stops drafting does. Sampled GOOSE's spine and sampled graft's context matches have none:
// they accept a handful of tokens a case, or none. A method missing here has no floors: the
// sweeps then fail, asking for them.
inline const std::vector<SourceFloor>* MethodFloors(const std::string& method, bool sampled) {
  using S = NodeSource;
  struct Entry {
    const char* method;
    std::vector<SourceFloor> greedy, sampled;
  };
  static const std::vector<Entry> table = {
      {"pld", {{S::kChain, 16}}, {{S::kChain, 6}}},
      {"tr", {{S::kBranch, 75}}, {{S::kBranch, 6}}},
      {"balanced", {{S::kBranch, 60}}, {{S::kBranch, 2}}},
      {"sequoia", {{S::kBranch, 60}}, {{S::kBranch, 6}}},
      {"goose", {{S::kSpine, 2}, {S::kBranch, 50}}, {{S::kBranch, 7}}},
      {"draft", {{S::kDraft, 35}}, {{S::kDraft, 20}}},
      {"draft-tree", {{S::kDraft, 60}}, {{S::kDraft, 2}}},
      {"graft",
       // (Greedy graft's context matches: 1, not a quarter of the least: the default budget's
       // trees follow the clock, and the slow sanitizer build accepted 4-8 in 1,920 tokens
       // where the release build accepts ~100 in 3,840.)
       {{S::kDraft, 20}, {S::kGraftContext, 1}, {S::kGraftTable, 20}},
       {{S::kDraft, 4}, {S::kGraftTable, 9}}},
  };
  for (const Entry& e : table) {
    if (method == e.method) return sampled ? &e.sampled : &e.greedy;
  }
  return nullptr;
}

// Whether `s`, over `generated` tokens, accepted at least each floor's share. A source whose
// share of a short run is under one token is not checked on its own (under --budget auto the
// trees depend on the clock, and a run of 240 tokens accepted 0-3 tokens from graft's context
// matches, whose floor there is 0.96), but the run must accept at least one draft token.
inline testing::AssertionResult MeetsFloors(const SpecStats& s, int64_t generated,
                                            const std::vector<SourceFloor>& floors) {
  std::string short_of;
  int64_t accepted = 0;
  for (int src = 0; src < kNumSources; ++src) accepted += s.accepted[src];
  if (accepted == 0) short_of = "nothing accepted";
  for (const SourceFloor& f : floors) {
    const int64_t need =
        static_cast<int64_t>(std::floor(f.per_mille * static_cast<double>(generated) / 1000));
    const int src = static_cast<int>(f.source);
    if (s.accepted[src] < need) {
      short_of += std::string(short_of.empty() ? "" : "; ") + NodeSourceName(f.source) + " " +
                  std::to_string(s.accepted[src]) + " < " + std::to_string(need);
    }
  }
  if (short_of.empty()) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "speculation fell short of its floor over " << generated << " tokens (" << short_of
         << "); accepted / drafted: " << AcceptedBySource(s);
}

// What the sweeps run: every registered variant but plain decoding and the table-lifetime forms
// (+keep / +cold change when the table starts over, not what a tree node computes); the
// draft-model ones only `with_draft`.
inline std::vector<std::string> SweepVariants(bool with_draft) {
  std::vector<std::string> out;
  for (const std::string& v : AllVariants()) {
    const auto ends_with = [&](std::string_view s) {
      return v.size() >= s.size() && v.compare(v.size() - s.size(), s.size(), s) == 0;
    };
    SpecParams spec;
    if (v == "none" || ends_with("+keep") || ends_with("+cold") ||
        !ParseSpecVariant(v, &spec).ok() || (MethodOf(spec).needs_draft_model() && !with_draft)) {
      continue;
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace goose
