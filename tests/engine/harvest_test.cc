// Harvest semantics at engine level (docs/methods.md §2.4, conventions 4, 5, 7): after
// the prefill and after the first cycle, the engine's table holds exactly the rows predicted
// from one-token reference logits — every evaluated row (rejected tree nodes included) in node
// order, bigram keyed on the tree parent's token, the root row only into the unigram tier, row 0
// of a chain route or plain step keyed on the previous committed token, every prompt row for
// GOOSE-family tables and only the last one for TR.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace goose {
namespace {

constexpr int kK = 10;

// Top-K ids of the one-token logits after `seq` (the row whose input token is seq.back()).
std::vector<int32_t> ReferenceTopK(const std::vector<int32_t>& seq) {
  static ThreadPool pool(1);
  Context ctx(Tiny(), 512, &pool);
  EXPECT_TRUE(ctx.ForwardChain(seq).ok());
  std::vector<int32_t> ids(kK);
  std::vector<float> scores(kK);
  TopK(ctx.logits(static_cast<int>(seq.size()) - 1), Tiny().config().n_vocab, kK, ids.data(),
       scores.data());
  return ids;
}

std::vector<int32_t> Ids(const std::vector<Candidate>& c) {
  std::vector<int32_t> out;
  for (const Candidate& x : c) out.push_back(x.token);
  return out;
}

// The table an independent reading of the harvest rules predicts: row -> top-K ids.
struct ExpectedTable {
  std::map<int32_t, std::vector<int32_t>> unigram;
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> bigram;  // (prev, tok)

  void Row(int32_t prev, const std::vector<int32_t>& seq, bool bigram_tier) {
    const std::vector<int32_t> ids = ReferenceTopK(seq);
    unigram[seq.back()] = ids;  // the last occurrence wins
    if (prev >= 0 && bigram_tier) bigram[{prev, seq.back()}] = ids;
  }
  void Check(const TransitionTable& t) const {
    int observed = 0;
    for (int32_t tok = 0; tok < t.n_vocab(); ++tok) observed += t.Observed(tok);
    EXPECT_EQ(observed, static_cast<int>(unigram.size()));
    for (const auto& [tok, ids] : unigram) {
      ASSERT_TRUE(t.Observed(tok)) << "row " << tok << " was not harvested";
      const auto row = t.UnigramIds(tok);
      EXPECT_EQ(std::vector<int32_t>(row.begin(), row.end()), ids) << "unigram row " << tok;
    }
    EXPECT_EQ(t.bigram_entries(), bigram.size());
    for (const auto& [key, ids] : bigram) {
      ASSERT_TRUE(t.HasBigram(key.second, key.first))
          << "bigram (" << key.first << ", " << key.second << ") missing";
      EXPECT_EQ(Ids(t.Successors(key.second, key.first)), ids)
          << "bigram (" << key.first << ", " << key.second << ")";
    }
  }
};

// Prefill harvest of `prompt` into a table with or without the bigram tier.
ExpectedTable PrefillExpectation(const std::vector<int32_t>& prompt, bool all_rows, bool bigram) {
  ExpectedTable e;
  const size_t n = prompt.size();
  for (size_t i = all_rows ? 0 : n - 1; i < n; ++i) {
    e.Row(i > 0 ? prompt[i - 1] : -1, std::vector<int32_t>(prompt.begin(), prompt.begin() + i + 1),
          bigram);
  }
  return e;
}

struct FirstCycle {
  std::vector<int32_t> first_token;  // generated token 1 (from the prefill)
  DraftTree tree;
  Route route = Route::kAr;
  AcceptResult accepted;
  bool ran = false;
};

// Runs `spec` on a fresh engine for the prefill and (if cycles = 1) the first cycle only.
FirstCycle RunFirstCycle(Engine& e, const std::vector<int32_t>& prompt, const SpecParams& spec,
                         int cycles) {
  FirstCycle out;
  GenerateParams p;
  p.n_predict = 64;
  p.ignore_eos = true;
  p.spec = spec;
  p.on_cycle = [&](const Proposal& proposal, const AcceptResult& acc) {
    out.tree = proposal.tree;
    out.route = proposal.route;
    out.accepted = acc;
    out.ran = true;
  };
  int calls = 0;
  auto r = e.Generate(prompt, p, [&](std::span<const int32_t> toks) {
    if (calls == 0) out.first_token.assign(toks.begin(), toks.end());
    return ++calls <= cycles;
  });
  EXPECT_TRUE(r.ok());
  return out;
}

// What the first cycle adds: every row in node order; node i > 0 is keyed on its parent's token,
// the root on the previous committed token only for chain routes and plain steps.
void AddCycleRows(const std::vector<int32_t>& prompt, int32_t anchor, const DraftTree& tree,
                  bool root_has_prev, ExpectedTable* e) {
  std::vector<std::vector<int32_t>> seq(tree.size());
  for (int i = 0; i < tree.size(); ++i) {
    seq[i] = i == 0 ? prompt : seq[tree.parents[i]];
    seq[i].push_back(tree.tokens[i]);
    const int32_t root_prev = root_has_prev ? prompt.back() : -1;
    const int32_t prev = i > 0 ? tree.tokens[tree.parents[i]] : root_prev;
    e->Row(prev, seq[i], /*bigram_tier=*/true);
  }
  ASSERT_EQ(tree.tokens[0], anchor);
}

std::vector<int32_t> Prompt(const std::string& text) {
  return Tiny().tokenizer().Encode(text, true);
}

bool Contains(const std::vector<int32_t>& v, int32_t t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// Prompts whose first generated token does (or does not) occur in the prompt, so the first
// cycle of a per-request table takes the tree route (or a chain route / plain step).
std::vector<std::vector<int32_t>> FindPrompts(bool first_token_in_prompt) {
  ThreadPool pool(1);
  Engine plain(Tiny(), 512, &pool);
  std::vector<std::vector<int32_t>> out;
  for (const char* text :
       {"Once upon a time, there was a little girl named Lily. She loved to play with her ball",
        "Tom and Sam went to the park. Tom saw a big dog. The dog",
        "The sun was hot. Ben wanted to swim in the lake with his", "Mia had a red hat and a blue",
        "One day, a bird flew over the", "Lily and Ben played with the ball. Lily threw the",
        "Max the cat liked to sleep. One day Max", "The little boat sailed on the sea. The boat"}) {
    const std::vector<int32_t> prompt = Prompt(text);
    GenerateParams p;
    p.n_predict = 1;
    auto r = plain.Generate(prompt, p);
    EXPECT_TRUE(r.ok());
    if (Contains(prompt, r->tokens[0]) == first_token_in_prompt) out.push_back(prompt);
  }
  EXPECT_FALSE(out.empty()) << "no prompt with first_token_in_prompt = " << first_token_in_prompt;
  return out;
}

TEST(Harvest, GooseTablesHarvestEveryPromptRowTrOnlyTheLast) {
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = Prompt("Lily and Ben played with the ball. Lily threw the");
  for (const char* variant : {"goose", "goose+paper", "balanced", "tr"}) {
    SCOPED_TRACE(variant);
    Engine e(Tiny(), 512, &pool);
    SpecParams spec;
    ASSERT_TRUE(ParseSpecVariant(variant, &spec).ok());
    const FirstCycle c = RunFirstCycle(e, prompt, spec, /*cycles=*/0);
    EXPECT_FALSE(c.ran);
    const bool tr = spec.method == "tr";
    PrefillExpectation(prompt, /*all_rows=*/!tr, /*bigram=*/!tr).Check(*e.table(spec));
  }
}

TEST(Harvest, TreeCycleHarvestsRejectedNodesKeyedOnTheirParentAndTheRootAsUnigram) {
  ThreadPool pool(1);
  for (const char* variant : {"balanced", "goose+paper", "goose"}) {
    SCOPED_TRACE(variant);
    int root_checks = 0;
    for (const std::vector<int32_t>& prompt : FindPrompts(/*first_token_in_prompt=*/true)) {
      Engine e(Tiny(), 512, &pool);
      SpecParams spec;
      ASSERT_TRUE(ParseSpecVariant(variant, &spec).ok());
      const FirstCycle c = RunFirstCycle(e, prompt, spec, /*cycles=*/1);
      ASSERT_TRUE(c.ran);
      ASSERT_EQ(c.first_token.size(), 1u);
      const int32_t anchor = c.first_token[0];
      const Route route = c.route;
      ASSERT_TRUE(route == Route::kBranchTree || route == Route::kSpineTree) << RouteName(route);
      // The case worth testing: nodes the walk rejected.
      ASSERT_GT(c.tree.size(), static_cast<int>(c.accepted.path.size()) + 2);
      ExpectedTable want = PrefillExpectation(prompt, true, true);
      AddCycleRows(prompt, anchor, c.tree, /*root_has_prev=*/false, &want);
      want.Check(*e.table(spec));
      // Where no prompt pair and no tree edge is (anchor_prev, anchor), that bigram must not
      // exist: the root row went into the unigram tier only.
      if (!want.bigram.count({prompt.back(), anchor})) {
        EXPECT_FALSE(e.table(spec)->HasBigram(anchor, prompt.back()));
        ++root_checks;
      }
    }
    EXPECT_GT(root_checks, 0);
  }
}

TEST(Harvest, ChainRouteAndPlainStepKeyRowZeroOnThePreviousToken) {
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = FindPrompts(/*first_token_in_prompt=*/false).at(0);
  // The anchor's row is unknown to a fresh per-request table: paper GOOSE takes the chain route
  // (or a plain step without a match), balanced a plain step.
  for (const char* variant : {"goose+paper", "balanced"}) {
    SCOPED_TRACE(variant);
    Engine e(Tiny(), 512, &pool);
    SpecParams spec;
    ASSERT_TRUE(ParseSpecVariant(variant, &spec).ok());
    const FirstCycle c = RunFirstCycle(e, prompt, spec, /*cycles=*/1);
    ASSERT_TRUE(c.ran);
    const int32_t anchor = c.first_token[0];
    const Route route = c.route;
    ASSERT_TRUE(route == Route::kChain || route == Route::kAr) << RouteName(route);
    EXPECT_TRUE(e.table(spec)->HasBigram(anchor, prompt.back()));
    ExpectedTable want = PrefillExpectation(prompt, true, true);
    AddCycleRows(prompt, anchor, c.tree, /*root_has_prev=*/true, &want);
    want.Check(*e.table(spec));
  }
}

}  // namespace
}  // namespace goose
