// A host engine's decoding loop around goose's drafter, written against the C API alone: the
// host owns the "model" (a goose session, scored row by row as an outside engine would use its
// own model and KV cache) and asks the drafter for trees. Greedy, like plain greedy decoding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "capi_test_util.h"

namespace goose_test {

struct HostLoopResult {
  std::vector<int32_t> tokens;  // generated, the first (from the prompt's pass) included
  int64_t passes = 0;           // forward passes after the prompt's
  double Mat() const { return passes > 0 ? double(tokens.size()) / passes : tokens.size(); }
};

// Each scored row's k best tokens and logits, as a host reports them.
inline void TopKRows(goose_session* s, int n_rows, int k, std::vector<int32_t>* ids,
                     std::vector<float>* logits) {
  ids->assign(static_cast<size_t>(n_rows) * k, -1);
  logits->assign(ids->size(), 0.0f);
  for (int r = 0; r < n_rows; ++r) {
    ASSERT_OK(goose_session_top_k(s, r, k, ids->data() + r * k, logits->data() + r * k));
  }
}

inline bool IsEog(goose_model* m, int32_t token) {
  int32_t eog = 0;
  EXPECT_EQ(goose_token_is_eog(m, token, &eog), GOOSE_OK);
  return eog != 0;
}

// The walk of the tree's first n nodes with the host's greedy tokens (the verifier's rule: go to
// the child carrying the target's token; siblings' tokens are distinct). Returns the accepted
// nodes; *bonus = the token at the stop node, or -1 when an accepted token ends generation.
inline std::vector<int32_t> Walk(goose_model* m, goose_session* s, const goose_draft_tree& t, int n,
                                 int32_t* bonus) {
  std::vector<int32_t> path;
  int v = 0;
  while (true) {
    int32_t tok = -1;
    EXPECT_EQ(goose_session_argmax(s, v, &tok), GOOSE_OK);
    int next = -1;
    for (int u = v + 1; u < n && next < 0; ++u) {
      if (t.parents[u] == v && t.tokens[u] == tok) next = u;
    }
    if (next < 0) {
      *bonus = tok;
      return path;
    }
    path.push_back(next);
    if (IsEog(m, tok)) {
      *bonus = -1;
      return path;
    }
    v = next;
  }
}

// One request: the prompt's pass (the drafter observes its rows), then a tree per pass.
// prediction: the request's expected output (tokens without BOS), or empty.
inline HostLoopResult RunHostLoop(goose_model* m, goose_session* s, goose_drafter* d,
                                  const std::vector<int32_t>& prompt, int n_predict, int budget,
                                  const std::vector<int32_t>& prediction = {}) {
  HostLoopResult out;
  goose_drafter_info info;
  EXPECT_EQ(goose_drafter_info_get(d, &info), GOOSE_OK);
  const int k = std::max(info.top_k, 1);
  goose_drafter_request* req = nullptr;
  EXPECT_EQ(goose_drafter_begin(d, prompt.data(), int32_t(prompt.size()), &req), GOOSE_OK);
  RequestPtr request(req);
  if (!prediction.empty()) {
    EXPECT_EQ(goose_drafter_set_prediction(req, prediction.data(), int32_t(prediction.size())),
              GOOSE_OK);
  }
  const int n = int(prompt.size());
  std::vector<int32_t> chain(n), ids;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) chain[i] = i - 1;
  EXPECT_EQ(goose_session_truncate(s, 0), GOOSE_OK);
  EXPECT_EQ(goose_session_score(s, prompt.data(), chain.data(), n), GOOSE_OK);
  TopKRows(s, n, k, &ids, &logits);
  EXPECT_EQ(goose_drafter_observe_prompt(req, 0, n, ids.data(), logits.data(), k), GOOSE_OK);
  int32_t token = -1;
  EXPECT_EQ(goose_session_argmax(s, n - 1, &token), GOOSE_OK);
  for (int i = 0; i < n; ++i) chain[i] = i;
  EXPECT_EQ(goose_session_keep(s, chain.data(), n), GOOSE_OK);
  EXPECT_EQ(goose_drafter_commit(req, nullptr, 0, token), GOOSE_OK);
  out.tokens.push_back(token);
  goose_model_info mi;
  EXPECT_EQ(goose_model_info_get(m, &mi), GOOSE_OK);
  bool stopped = IsEog(m, token);
  while (!stopped && int(out.tokens.size()) < n_predict) {
    int32_t n_past = 0;
    EXPECT_EQ(goose_session_n_past(s, &n_past), GOOSE_OK);
    // (The session's context is the model's n_ctx here.)
    if (n_past >= mi.n_ctx) break;
    goose_draft_tree tree;
    EXPECT_EQ(goose_drafter_propose(req, budget, &tree), GOOSE_OK);
    const int rows = std::min(tree.n_nodes, mi.n_ctx - n_past);  // the room left
    EXPECT_EQ(goose_session_score(s, tree.tokens, tree.parents, rows), GOOSE_OK);
    TopKRows(s, rows, k, &ids, &logits);
    EXPECT_EQ(goose_drafter_observe(req, rows, ids.data(), logits.data(), k), GOOSE_OK);
    int32_t bonus = -1;
    const std::vector<int32_t> path = Walk(m, s, tree, rows, &bonus);
    std::vector<int32_t> keep = {0};
    keep.insert(keep.end(), path.begin(), path.end());
    std::vector<int32_t> committed;
    for (int32_t v : path) committed.push_back(tree.tokens[v]);  // (before the commit: the
    if (bonus >= 0) committed.push_back(bonus);                  //  tree's arrays go then)
    EXPECT_EQ(goose_session_keep(s, keep.data(), int32_t(keep.size())), GOOSE_OK);
    EXPECT_EQ(goose_drafter_commit(req, path.data(), int32_t(path.size()), bonus), GOOSE_OK);
    ++out.passes;
    for (int32_t t : committed) {
      if (int(out.tokens.size()) >= n_predict) break;
      out.tokens.push_back(t);
    }
    stopped = bonus < 0 || IsEog(m, committed.back());
  }
  return out;
}

}  // namespace goose_test
