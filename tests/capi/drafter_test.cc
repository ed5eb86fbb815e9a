// The drafter's contract through the C API: the ancestor mask, a request's states, determinism,
// save and load, and one drafter shared by requests on several threads.
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "host_loop.h"

namespace goose_test {
namespace {

std::string TempDir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("goose_capi_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

DrafterPtr NewDrafter(int n_vocab, const char* method = "goose", uint64_t fingerprint = 7) {
  goose_drafter_params p;
  goose_drafter_default_params(&p);
  p.n_vocab = n_vocab;
  p.method = method;
  p.model_fingerprint = fingerprint;
  goose_drafter* d = nullptr;
  EXPECT_EQ(goose_drafter_new(&p, &d), GOOSE_OK) << goose_last_error();
  return DrafterPtr(d);
}

// A request on a synthetic vocabulary of 64 tokens: a prompt that repeats 1..8 and, per row,
// a made-up top-k in which the next token of the pattern leads.
constexpr int kVocab = 64;
constexpr int kK = 10;

void PatternRows(const int32_t* inputs, int n, std::vector<int32_t>* ids,
                 std::vector<float>* logits) {
  ids->assign(size_t(n) * kK, 0);
  logits->assign(ids->size(), 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < kK; ++j) {
      (*ids)[r * kK + j] = (inputs[r] % 8 + 1 + j * 7) % kVocab;  // distinct for j < 10
      (*logits)[r * kK + j] = 5.0f - j;
    }
  }
}

std::vector<int32_t> PatternPrompt() {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(i % 8 + 1);
  return p;
}

// Begin, prompt rows, the first token.
RequestPtr Start(goose_drafter* d, const std::vector<int32_t>& prompt, int32_t first) {
  goose_drafter_request* r = nullptr;
  EXPECT_EQ(goose_drafter_begin(d, prompt.data(), int32_t(prompt.size()), &r), GOOSE_OK);
  std::vector<int32_t> ids;
  std::vector<float> logits;
  PatternRows(prompt.data(), int(prompt.size()), &ids, &logits);
  EXPECT_EQ(
      goose_drafter_observe_prompt(r, 0, int32_t(prompt.size()), ids.data(), logits.data(), kK),
      GOOSE_OK);
  EXPECT_EQ(goose_drafter_commit(r, nullptr, 0, first), GOOSE_OK) << goose_last_error();
  return RequestPtr(r);
}

// One cycle where the host "model" follows the pattern: accepts the pattern's nodes.
std::vector<int32_t> Cycle(goose_drafter_request* r, int budget) {
  goose_draft_tree t;
  EXPECT_EQ(goose_drafter_propose(r, budget, &t), GOOSE_OK) << goose_last_error();
  std::vector<int32_t> shape(t.tokens, t.tokens + t.n_nodes);
  shape.insert(shape.end(), t.parents, t.parents + t.n_nodes);
  std::vector<int32_t> ids;
  std::vector<float> logits;
  PatternRows(t.tokens, t.n_nodes, &ids, &logits);
  EXPECT_EQ(goose_drafter_observe(r, t.n_nodes, ids.data(), logits.data(), kK), GOOSE_OK);
  std::vector<int32_t> path;
  int v = 0;
  while (true) {
    const int32_t want = t.tokens[v] % 8 + 1;
    int next = -1;
    for (int u = v + 1; u < t.n_nodes; ++u) {
      if (t.parents[u] == v && t.tokens[u] == want) next = u;
    }
    if (next < 0) break;
    path.push_back(next);
    v = next;
  }
  EXPECT_EQ(goose_drafter_commit(r, path.data(), int32_t(path.size()), t.tokens[v] % 8 + 1),
            GOOSE_OK)
      << goose_last_error();
  return shape;
}

TEST(Drafter, AncestorMask) {
  const int32_t parents[] = {-1, 0, 0, 1, 3, 2};
  uint8_t mask[36];
  ASSERT_OK(goose_tree_ancestor_mask(parents, 6, mask));
  const char* want[] = {"100000", "110000", "101000", "110100", "110110", "101001"};
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_EQ(mask[i * 6 + j], want[i][j] - '0') << i << "," << j;
  }
  const int32_t bad[] = {-1, 2, 0};
  EXPECT_STATUS(goose_tree_ancestor_mask(bad, 3, mask), GOOSE_ERROR_INVALID_ARGUMENT);
}

TEST(Drafter, ProposesValidTreesAndLearnsThePattern) {
  DrafterPtr d = NewDrafter(kVocab);
  RequestPtr r = Start(d.get(), PatternPrompt(), 1);
  goose_draft_tree t;
  ASSERT_OK(goose_drafter_propose(r.get(), 12, &t));
  ASSERT_GE(t.n_nodes, 2);  // the prompt's pattern matches
  ASSERT_LE(t.n_nodes, 12);
  EXPECT_EQ(t.tokens[0], 1);
  EXPECT_EQ(t.parents[0], -1);
  EXPECT_EQ(t.depth[0], 0);
  EXPECT_EQ(t.source[0], GOOSE_SOURCE_ROOT);
  for (int u = 1; u < t.n_nodes; ++u) {
    ASSERT_GE(t.parents[u], 0);
    ASSERT_LT(t.parents[u], u);
    EXPECT_EQ(t.depth[u], t.depth[t.parents[u]] + 1);
    EXPECT_LT(t.source[u], GOOSE_SOURCE_COUNT);
    for (int w = 1; w < u; ++w) {
      EXPECT_FALSE(t.parents[w] == t.parents[u] && t.tokens[w] == t.tokens[u]) << "siblings";
    }
  }
  ASSERT_OK(goose_drafter_commit(r.get(), nullptr, 0, 2));  // nothing accepted, bonus 2
  goose_spec_stats s;
  ASSERT_OK(goose_drafter_request_stats(r.get(), &s));
  EXPECT_EQ(s.cycles, 1);
  EXPECT_EQ(s.committed, 1);
  // The pattern is learned: its spine is accepted, 8+ tokens a cycle at 16 nodes.
  for (int i = 0; i < 10; ++i) Cycle(r.get(), 16);
  ASSERT_OK(goose_drafter_request_stats(r.get(), &s));
  EXPECT_GE(s.committed - 1, 10 * 8);
  EXPECT_EQ(s.cycles, 11);
}

TEST(Drafter, ARequestsCallsComeInOrder) {
  DrafterPtr d = NewDrafter(kVocab);
  const std::vector<int32_t> prompt = PatternPrompt();
  goose_drafter_request* r = nullptr;
  ASSERT_OK(goose_drafter_begin(d.get(), prompt.data(), int32_t(prompt.size()), &r));
  RequestPtr owner(r);
  goose_draft_tree t;
  std::vector<int32_t> ids;
  std::vector<float> logits;
  PatternRows(prompt.data(), 4, &ids, &logits);
  EXPECT_STATUS(goose_drafter_propose(r, 8, &t), GOOSE_ERROR_STATE);  // nothing committed
  EXPECT_STATUS(goose_drafter_observe(r, 1, ids.data(), logits.data(), kK), GOOSE_ERROR_STATE);
  EXPECT_STATUS(goose_drafter_commit(r, ids.data(), 1, 1), GOOSE_ERROR_STATE);  // no tree
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 38, 4, ids.data(), logits.data(), kK),
                GOOSE_ERROR_INVALID_ARGUMENT);  // rows 38..41 of a 40-token prompt
  ASSERT_OK(goose_drafter_observe_prompt(r, 36, 4, ids.data(), logits.data(), kK));
  const int32_t bad_prediction[] = {1, kVocab}, prediction[] = {2, 3, 4};
  EXPECT_STATUS(goose_drafter_set_prediction(r, bad_prediction, 2), GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_set_prediction(r, nullptr, 2), GOOSE_ERROR_INVALID_ARGUMENT);
  ASSERT_OK(goose_drafter_set_prediction(r, prediction, 3));
  EXPECT_STATUS(goose_drafter_set_prediction(r, prediction, 3), GOOSE_ERROR_STATE);  // twice
  ASSERT_OK(goose_drafter_commit(r, nullptr, 0, 1));
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 0, 4, ids.data(), logits.data(), kK),
                GOOSE_ERROR_STATE);  // after the first token
  EXPECT_STATUS(goose_drafter_propose(r, 0, &t), GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_propose(r, 129, &t), GOOSE_ERROR_INVALID_ARGUMENT);
  ASSERT_OK(goose_drafter_propose(r, 8, &t));
  ASSERT_GE(t.n_nodes, 2);
  EXPECT_STATUS(goose_drafter_propose(r, 8, &t), GOOSE_ERROR_STATE);  // still open
  EXPECT_STATUS(goose_drafter_observe(r, t.n_nodes + 1, ids.data(), logits.data(), 1),
                GOOSE_ERROR_INVALID_ARGUMENT);
  const int32_t root[] = {0}, beyond[] = {t.n_nodes};
  EXPECT_STATUS(goose_drafter_commit(r, root, 1, 1), GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_commit(r, beyond, 1, 1), GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_commit(r, nullptr, 0, kVocab), GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_commit(r, nullptr, 0, -2), GOOSE_ERROR_INVALID_ARGUMENT);
  // A host that scored only the root (no room): the tree is cut to it.
  ASSERT_OK(goose_drafter_observe(r, 1, ids.data(), logits.data(), kK));
  const int32_t child[] = {1};
  EXPECT_STATUS(goose_drafter_commit(r, child, 1, 1), GOOSE_ERROR_INVALID_ARGUMENT);
  ASSERT_OK(goose_drafter_commit(r, nullptr, 0, -1));  // stopped: the request is over
  EXPECT_STATUS(goose_drafter_propose(r, 8, &t), GOOSE_ERROR_STATE);
  EXPECT_STATUS(goose_drafter_commit(r, nullptr, 0, 1), GOOSE_ERROR_STATE);
}

TEST(Drafter, HostRowsAreChecked) {
  DrafterPtr d = NewDrafter(kVocab);
  const std::vector<int32_t> prompt = {1, 2, 3};
  goose_drafter_request* r = nullptr;
  ASSERT_OK(goose_drafter_begin(d.get(), prompt.data(), 3, &r));
  RequestPtr owner(r);
  const float logits[3] = {1, 2, 3};
  const int32_t out_of_vocab[3] = {1, 2, kVocab}, twice[3] = {1, 2, 1}, padded[3] = {4, -1, -1};
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 0, 1, out_of_vocab, logits, 3),
                GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 0, 1, twice, logits, 3),
                GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 0, 1, padded, logits, 0),
                GOOSE_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(goose_drafter_observe_prompt(r, 0, 1, padded, nullptr, 3),
                GOOSE_ERROR_INVALID_ARGUMENT);
  ASSERT_OK(goose_drafter_observe_prompt(r, 0, 1, padded, logits, 3));  // -1 pads
  // Unsorted rows are put in order: the same trees as sorted ones.
  DrafterPtr e = NewDrafter(kVocab);
  goose_drafter_request* q = nullptr;
  ASSERT_OK(goose_drafter_begin(e.get(), prompt.data(), 3, &q));
  RequestPtr owner_q(q);
  const int32_t ids_sorted[3] = {9, 7, 8}, ids_shuffled[3] = {8, 9, 7};
  const float l_sorted[3] = {3, 2, 2}, l_shuffled[3] = {2, 3, 2};
  for (int row = 0; row < 3; ++row) {
    ASSERT_OK(goose_drafter_observe_prompt(r, row, 1, ids_sorted, l_sorted, 3));
    ASSERT_OK(goose_drafter_observe_prompt(q, row, 1, ids_shuffled, l_shuffled, 3));
  }
  ASSERT_OK(goose_drafter_commit(r, nullptr, 0, 3));
  ASSERT_OK(goose_drafter_commit(q, nullptr, 0, 3));
  goose_draft_tree a, b;
  ASSERT_OK(goose_drafter_propose(r, 8, &a));
  ASSERT_OK(goose_drafter_propose(q, 8, &b));
  ASSERT_EQ(a.n_nodes, b.n_nodes);
  ASSERT_GT(a.n_nodes, 1);
  for (int u = 0; u < a.n_nodes; ++u) {
    EXPECT_EQ(a.tokens[u], b.tokens[u]);
    EXPECT_EQ(a.parents[u], b.parents[u]);
  }
}

TEST(Drafter, SameCallsSameTrees) {
  DrafterPtr a = NewDrafter(kVocab), b = NewDrafter(kVocab);
  RequestPtr ra = Start(a.get(), PatternPrompt(), 1), rb = Start(b.get(), PatternPrompt(), 1);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(Cycle(ra.get(), 8 + i), Cycle(rb.get(), 8 + i)) << i;
}

TEST(Drafter, SaveAndLoadKeepWhatItLearned) {
  const std::string dir = TempDir("save");
  DrafterPtr a = NewDrafter(kVocab);
  {
    RequestPtr r = Start(a.get(), PatternPrompt(), 1);
    for (int i = 0; i < 6; ++i) Cycle(r.get(), 16);
  }
  ASSERT_OK(goose_drafter_save(a.get(), dir.c_str()));
  DrafterPtr b = NewDrafter(kVocab);
  ASSERT_OK(goose_drafter_load(b.get(), dir.c_str()));
  // A new request with a short prompt: only the table (learned) can draft for it.
  const std::vector<int32_t> prompt = {5};
  goose_drafter_request *ra = nullptr, *rb = nullptr;
  ASSERT_OK(goose_drafter_begin(a.get(), prompt.data(), 1, &ra));
  ASSERT_OK(goose_drafter_begin(b.get(), prompt.data(), 1, &rb));
  RequestPtr pa(ra), pb(rb);
  ASSERT_OK(goose_drafter_commit(ra, nullptr, 0, 6));
  ASSERT_OK(goose_drafter_commit(rb, nullptr, 0, 6));
  const std::vector<int32_t> ta = Cycle(ra, 16), tb = Cycle(rb, 16);
  EXPECT_EQ(ta, tb);
  EXPECT_GT(ta.size(), 2u) << "a loaded table drafts";
  // A fresh drafter without it drafts nothing for that prompt.
  DrafterPtr c = NewDrafter(kVocab);
  goose_drafter_request* rc = nullptr;
  ASSERT_OK(goose_drafter_begin(c.get(), prompt.data(), 1, &rc));
  RequestPtr pc(rc);
  ASSERT_OK(goose_drafter_commit(rc, nullptr, 0, 6));
  EXPECT_EQ(Cycle(rc, 16).size(), 2u);  // the root alone (token + parent)
  std::filesystem::remove_all(dir);
}

TEST(Drafter, LoadRefusesWhatItCannotTrust) {
  const std::string dir = TempDir("load");
  DrafterPtr a = NewDrafter(kVocab);
  {
    RequestPtr r = Start(a.get(), PatternPrompt(), 1);
    Cycle(r.get(), 8);
  }
  ASSERT_OK(goose_drafter_save(a.get(), dir.c_str()));
  EXPECT_STATUS(goose_drafter_save(a.get(), "/proc/goose_cannot_write_here"), GOOSE_ERROR_FILE);
  // Nothing there, another model, another vocabulary, another variant.
  DrafterPtr b = NewDrafter(kVocab);
  EXPECT_STATUS(goose_drafter_load(b.get(), (dir + "/none").c_str()), GOOSE_ERROR_FILE);
  DrafterPtr other_model = NewDrafter(kVocab, "goose", 8);
  EXPECT_STATUS(goose_drafter_load(other_model.get(), dir.c_str()), GOOSE_ERROR_FILE);
  DrafterPtr other_vocab = NewDrafter(kVocab * 2);
  EXPECT_STATUS(goose_drafter_load(other_vocab.get(), dir.c_str()), GOOSE_ERROR_FILE);
  DrafterPtr other_variant = NewDrafter(kVocab, "tr");
  EXPECT_STATUS(goose_drafter_load(other_variant.get(), dir.c_str()), GOOSE_ERROR_FILE);
  // Damaged files: truncated state, flipped table bytes.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string path = e.path().string();
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string broken = bytes.substr(0, bytes.size() / 2);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << broken;
    EXPECT_STATUS(goose_drafter_load(b.get(), dir.c_str()), GOOSE_ERROR_FILE);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  ASSERT_OK(goose_drafter_load(b.get(), dir.c_str()));  // intact again
  // Not with requests open.
  const std::vector<int32_t> prompt = {1, 2};
  goose_drafter_request* r = nullptr;
  ASSERT_OK(goose_drafter_begin(b.get(), prompt.data(), 2, &r));
  EXPECT_STATUS(goose_drafter_load(b.get(), dir.c_str()), GOOSE_ERROR_STATE);
  EXPECT_STATUS(goose_drafter_free(b.get()), GOOSE_ERROR_STATE);
  ASSERT_OK(goose_drafter_end(r));
  std::filesystem::remove_all(dir);
}

// Requests on four threads share one drafter and one model (a session each): every request
// is lossless, and the drafter counts every cycle.
TEST(Drafter, SharedByRequestsOnSeveralThreads) {
  ModelPtr m = LoadTiny();
  goose_model_info mi;
  ASSERT_OK(goose_model_info_get(m.get(), &mi));
  DrafterPtr d = NewDrafter(mi.n_vocab, "goose", mi.fingerprint);
  const std::vector<std::string> texts = {"Once upon a time", "The cat sat on the mat. The cat",
                                          "Lily liked to play", "One day, a little bird"};
  std::vector<std::vector<int32_t>> prompts, plain(texts.size());
  for (const std::string& t : texts) prompts.push_back(Tokenize(m.get(), t));
  {
    SessionPtr s = OpenSession(m.get());
    for (size_t i = 0; i < prompts.size(); ++i) {
      goose_generate_params p;
      goose_generate_default_params(&p);
      p.max_tokens = 48;
      ASSERT_OK(goose_session_generate(s.get(), prompts[i].data(), int32_t(prompts[i].size()), &p,
                                       nullptr, nullptr, nullptr));
      const int32_t* t = nullptr;
      int32_t n = 0;
      ASSERT_OK(goose_session_tokens(s.get(), &t, &n));
      plain[i].assign(t, t + n);
    }
  }
  std::vector<HostLoopResult> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      SessionPtr s = OpenSession(m.get());
      for (int round = 0; round < 3; ++round) {
        got[i] = RunHostLoop(m.get(), s.get(), d.get(), prompts[i], 48, 16);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t passes = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, plain[i]) << texts[i];
    passes += got[i].passes;
  }
  goose_spec_stats s;
  ASSERT_OK(goose_drafter_stats(d.get(), &s));
  EXPECT_GE(s.cycles, passes);  // (the last round's; three rounds ran)
  goose_drafter_info info;
  ASSERT_OK(goose_drafter_info_get(d.get(), &info));
  EXPECT_EQ(info.open_requests, 0);
  EXPECT_STREQ(info.method, "goose+keep");
  EXPECT_EQ(info.top_k, 10);
}

}  // namespace
}  // namespace goose_test
