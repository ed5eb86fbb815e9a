// Models and sessions through the C API: the text `goose generate` prints, streaming, cancel,
// tokenization, and scoring trees (bit-identical to generation's logits).
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_util.h"

namespace goose_test {
namespace {

struct Stream {
  std::vector<int32_t> tokens;
  std::string text;
  int calls = 0;
  int stop_after = -1;  // calls before returning 0 (-1: never)
};

int32_t OnTokens(void* user, const int32_t* tokens, int32_t n, const char* text, size_t len) {
  auto* s = static_cast<Stream*>(user);
  s->tokens.insert(s->tokens.end(), tokens, tokens + n);
  s->text.append(text, len);
  ++s->calls;
  return s->stop_after < 0 || s->calls < s->stop_after;
}

std::string Detokenize(goose_model* m, const std::vector<int32_t>& ids) {
  size_t len = 0;
  goose_detokenize(m, ids.data(), int32_t(ids.size()), nullptr, 0, &len);
  std::string out(len + 1, '\0');
  EXPECT_EQ(goose_detokenize(m, ids.data(), int32_t(ids.size()), out.data(), out.size(), &len),
            GOOSE_OK);
  out.resize(len);
  return out;
}

TEST(Session, GeneratesWhatGooseGeneratePrints) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  const std::string prompt_text = "Once upon a time";
  const std::vector<int32_t> prompt = Tokenize(m.get(), prompt_text);
  goose_model_info mi;
  ASSERT_OK(goose_model_info_get(m.get(), &mi));
  EXPECT_EQ(prompt[0], mi.bos);
  for (const char* method : {"none", "goose", "pld"}) {
    goose_generate_params p;
    goose_generate_default_params(&p);
    p.max_tokens = 48;
    p.method = method;
    const bool plain = std::string(method) == "none";
    p.budget = plain ? 0 : 16;
    Stream stream;
    goose_generate_stats st;
    ASSERT_OK(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, OnTokens,
                                     &stream, &st));
    const nlohmann::json j = GenerateJson(
        prompt_text, std::string("-n 48 --spec ") + method + (plain ? "" : " --budget 16"));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(stream.tokens, j["tokens"].get<std::vector<int32_t>>()) << method;
    EXPECT_EQ(stream.text, j["text"].get<std::string>()) << method;
    EXPECT_EQ(Detokenize(m.get(), stream.tokens), stream.text);
    EXPECT_EQ(st.generated_tokens, int64_t(stream.tokens.size()));
    EXPECT_EQ(st.prompt_tokens, int64_t(prompt.size()));
    EXPECT_EQ(st.cancelled, 0);
  }
  // Plain `goose generate` prints the prompt, the text and a newline.
  const std::string printed = RunGoose("generate -m " + Quote(TinyModelPath()) + " -p " +
                                       Quote(prompt_text) + " -n 48 --spec none");
  const int32_t* t = nullptr;
  int32_t n = 0;
  ASSERT_OK(goose_session_tokens(s.get(), &t, &n));
  EXPECT_EQ(printed, prompt_text + Detokenize(m.get(), std::vector<int32_t>(t, t + n)) + "\n");
}

TEST(Session, CallbackAndCancelStopAGeneration) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  const std::vector<int32_t> prompt = Tokenize(m.get(), "Once upon a time");
  goose_generate_params p;
  goose_generate_default_params(&p);
  p.max_tokens = 200;
  p.ignore_eos = 1;
  Stream stream;
  stream.stop_after = 3;
  goose_generate_stats st;
  ASSERT_OK(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, OnTokens,
                                   &stream, &st));
  EXPECT_EQ(st.cancelled, 1);
  EXPECT_EQ(stream.calls, 3);
  EXPECT_EQ(st.generated_tokens, 3);
  // goose_session_cancel from another thread, while the callback holds the generation back.
  struct Slow {
    goose_session* s;
    std::atomic<int> calls{0};
  } slow{s.get()};
  auto on_tokens = [](void* user, const int32_t*, int32_t, const char*, size_t) -> int32_t {
    auto* w = static_cast<Slow*>(user);
    if (++w->calls == 2) {
      std::thread([w] { goose_session_cancel(w->s); }).join();
    }
    return 1;
  };
  ASSERT_OK(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, on_tokens,
                                   &slow, &st));
  EXPECT_EQ(st.cancelled, 1);
  EXPECT_EQ(slow.calls.load(), 2);
  EXPECT_LT(st.generated_tokens, 200);
  // A cancel while nothing runs is forgotten.
  ASSERT_OK(goose_session_cancel(s.get()));
  p.max_tokens = 8;
  ASSERT_OK(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, nullptr,
                                   nullptr, &st));
  EXPECT_EQ(st.cancelled, 0);
  EXPECT_EQ(st.generated_tokens, 8);
}

TEST(Session, TokenizeRoundTrip) {
  ModelPtr m = LoadTiny();
  const std::string text = "Lily and Tom went to the park. They saw a big dog!";
  int32_t n = 0;
  EXPECT_STATUS(goose_tokenize(m.get(), text.data(), text.size(), 0, nullptr, 0, &n),
                GOOSE_ERROR_BUFFER_TOO_SMALL);  // (the count comes back)
  std::vector<int32_t> ids(n);
  ASSERT_OK(goose_tokenize(m.get(), text.data(), text.size(), 0, ids.data(), n, &n));
  EXPECT_EQ(Detokenize(m.get(), ids), " " + text);  // SPM's dummy prefix space
  ASSERT_OK(goose_tokenize(m.get(), "", 0, 0, nullptr, 0, &n));
  EXPECT_EQ(n, 0);
}

// Scoring a tree's rows gives generation's logits bit for bit, whatever the tree; keep commits.
TEST(Session, ScoringMatchesGeneration) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  const std::vector<int32_t> prompt = Tokenize(m.get(), "Once upon a time");
  goose_generate_params p;
  goose_generate_default_params(&p);
  p.max_tokens = 6;
  ASSERT_OK(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, nullptr,
                                   nullptr, nullptr));
  const int32_t* t = nullptr;
  int32_t n = 0;
  ASSERT_OK(goose_session_tokens(s.get(), &t, &n));
  const std::vector<int32_t> gen(t, t + n);
  ASSERT_EQ(gen.size(), 6u);
  // The prompt as a chain in the emptied context: its last row's argmax is the first token.
  ASSERT_OK(goose_session_truncate(s.get(), 0));
  const int np = int(prompt.size());
  std::vector<int32_t> chain(np);
  for (int i = 0; i < np; ++i) chain[i] = i - 1;
  ASSERT_OK(goose_session_score(s.get(), prompt.data(), chain.data(), np));
  int32_t tok = -1;
  ASSERT_OK(goose_session_argmax(s.get(), np - 1, &tok));
  EXPECT_EQ(tok, gen[0]);
  for (int i = 0; i < np; ++i) chain[i] = i;
  ASSERT_OK(goose_session_keep(s.get(), chain.data(), np));
  // A tree: root gen[0] with a decoy child and the true continuation gen[1] -> gen[2].
  const int32_t tokens[] = {gen[0], (gen[1] + 1) % 100 + 5, gen[1], gen[2]};
  const int32_t parents[] = {-1, 0, 0, 2};
  ASSERT_OK(goose_session_score(s.get(), tokens, parents, 4));
  const float* tree_row = nullptr;
  ASSERT_OK(goose_session_logits(s.get(), 3, &tree_row));
  goose_model_info mi;
  ASSERT_OK(goose_model_info_get(m.get(), &mi));
  const std::vector<float> from_tree(tree_row, tree_row + mi.n_vocab);
  int32_t ids[3];
  float top[3];
  ASSERT_OK(goose_session_top_k(s.get(), 0, 3, ids, top));
  EXPECT_EQ(ids[0], gen[1]);
  EXPECT_GE(top[0], top[1]);
  ASSERT_OK(goose_session_argmax(s.get(), 2, &tok));
  EXPECT_EQ(tok, gen[2]);
  const int32_t path[] = {0, 2, 3};
  ASSERT_OK(goose_session_keep(s.get(), path, 3));
  int32_t n_past = 0;
  ASSERT_OK(goose_session_n_past(s.get(), &n_past));
  EXPECT_EQ(n_past, np + 3);
  // The same row one token at a time: identical bits.
  ASSERT_OK(goose_session_truncate(s.get(), np + 2));
  const int32_t one[] = {gen[2]}, root[] = {-1};
  ASSERT_OK(goose_session_score(s.get(), one, root, 1));
  const float* seq_row = nullptr;
  ASSERT_OK(goose_session_logits(s.get(), 0, &seq_row));
  EXPECT_EQ(std::memcmp(seq_row, from_tree.data(), from_tree.size() * sizeof(float)), 0);
  ASSERT_OK(goose_session_argmax(s.get(), 0, &tok));
  EXPECT_EQ(tok, gen[3]);
  // Sampling at temperature 0 is the argmax; at 1 it is deterministic in (seed, pos).
  goose_sampling greedy{0.0f, 40, 0.95f, 0}, warm{1.0f, 40, 0.95f, 3};
  int32_t a = -1, b = -1, c = -1;
  ASSERT_OK(goose_session_sample(s.get(), 0, &greedy, np + 3, &a));
  EXPECT_EQ(a, gen[3]);
  ASSERT_OK(goose_session_sample(s.get(), 0, &warm, np + 3, &b));
  ASSERT_OK(goose_session_sample(s.get(), 0, &warm, np + 3, &c));
  EXPECT_EQ(b, c);
}

TEST(Session, SessionsOfOneModelRunOnThreads) {
  ModelPtr m = LoadTiny();
  const std::vector<int32_t> prompt = Tokenize(m.get(), "One day, a little bird");
  std::vector<std::vector<int32_t>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      SessionPtr s = OpenSession(m.get());
      goose_generate_params p;
      goose_generate_default_params(&p);
      p.max_tokens = 40;
      p.method = i == 0 ? "none" : "goose";
      p.budget = 12;
      EXPECT_EQ(goose_session_generate(s.get(), prompt.data(), int32_t(prompt.size()), &p, nullptr,
                                       nullptr, nullptr),
                GOOSE_OK);
      const int32_t* t = nullptr;
      int32_t n = 0;
      EXPECT_EQ(goose_session_tokens(s.get(), &t, &n), GOOSE_OK);
      got[i].assign(t, t + n);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got[1], got[0]);
  EXPECT_EQ(got[2], got[0]);
  EXPECT_EQ(got[0].size(), 40u);
}

}  // namespace
}  // namespace goose_test
