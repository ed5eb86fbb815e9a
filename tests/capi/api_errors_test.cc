// Bad input through the C API is a status and a message, never a crash: NULL pointers, handles
// of another kind, foreign pointers, handles used after their free, bad ids and sizes, files
// that are not models.
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capi_test_util.h"

namespace goose_test {
namespace {

// The call fails with `want` and a message that mentions `words`.
#define EXPECT_FAILS(call, want, words)                                                    \
  do {                                                                                     \
    const goose_status st_ = (call);                                                       \
    EXPECT_EQ(st_, want) << #call << " gave " << goose_status_name(st_);                   \
    EXPECT_NE(std::string(goose_last_error()).find(words), std::string::npos)              \
        << #call << ": '" << goose_last_error() << "' does not mention '" << words << "'"; \
  } while (0)

DrafterPtr SmallDrafter() {
  goose_drafter_params p;
  goose_drafter_default_params(&p);
  p.n_vocab = 100;
  goose_drafter* d = nullptr;
  EXPECT_EQ(goose_drafter_new(&p, &d), GOOSE_OK);
  return DrafterPtr(d);
}

TEST(ApiErrors, NullPointers) {
  goose_model* m = nullptr;
  EXPECT_FAILS(goose_model_load(nullptr, nullptr, &m), GOOSE_ERROR_INVALID_ARGUMENT, "path");
  EXPECT_FAILS(goose_model_load(TinyModelPath().c_str(), nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_FAILS(goose_model_free(nullptr), GOOSE_ERROR_INVALID_HANDLE, "NULL");
  EXPECT_FAILS(goose_session_open(nullptr, nullptr, nullptr), GOOSE_ERROR_INVALID_HANDLE, "model");
  EXPECT_FAILS(goose_session_generate(nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_HANDLE, "session");
  EXPECT_FAILS(goose_drafter_new(nullptr, nullptr), GOOSE_ERROR_INVALID_ARGUMENT, "params");
  EXPECT_FAILS(goose_drafter_propose(nullptr, 8, nullptr), GOOSE_ERROR_INVALID_HANDLE, "request");
  EXPECT_FAILS(goose_tree_ancestor_mask(nullptr, 3, nullptr), GOOSE_ERROR_INVALID_ARGUMENT,
               "parents");
  DrafterPtr d = SmallDrafter();
  EXPECT_FAILS(goose_drafter_info_get(d.get(), nullptr), GOOSE_ERROR_INVALID_ARGUMENT, "out");
  const int32_t prompt[] = {1, 2};
  EXPECT_FAILS(goose_drafter_begin(d.get(), nullptr, 2, nullptr), GOOSE_ERROR_INVALID_ARGUMENT,
               "out");
  goose_drafter_request* r = nullptr;
  EXPECT_FAILS(goose_drafter_begin(d.get(), nullptr, 2, &r), GOOSE_ERROR_INVALID_ARGUMENT,
               "prompt");
  ASSERT_OK(goose_drafter_begin(d.get(), prompt, 2, &r));
  EXPECT_FAILS(goose_drafter_commit(r, nullptr, 2, 1), GOOSE_ERROR_INVALID_ARGUMENT, "accepted");
  EXPECT_FAILS(goose_drafter_observe_prompt(r, 0, 1, nullptr, nullptr, 10),
               GOOSE_ERROR_INVALID_ARGUMENT, "top_ids");
  ASSERT_OK(goose_drafter_end(r));
  EXPECT_STREQ(goose_status_name(GOOSE_ERROR_STATE), "GOOSE_ERROR_STATE");
  EXPECT_STREQ(goose_status_name(static_cast<goose_status>(99)), "unknown");
}

TEST(ApiErrors, HandlesOfAnotherKindAndForeignPointers) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  DrafterPtr d = SmallDrafter();
  goose_model_info info;
  EXPECT_FAILS(goose_model_info_get(reinterpret_cast<goose_model*>(s.get()), &info),
               GOOSE_ERROR_INVALID_HANDLE, "is a goose_session, not a goose_model");
  EXPECT_FAILS(goose_session_free(reinterpret_cast<goose_session*>(d.get())),
               GOOSE_ERROR_INVALID_HANDLE, "is a goose_drafter, not a goose_session");
  goose_draft_tree t;
  EXPECT_FAILS(goose_drafter_propose(reinterpret_cast<goose_drafter_request*>(d.get()), 8, &t),
               GOOSE_ERROR_INVALID_HANDLE, "not a goose_drafter_request");
  uint64_t junk[4] = {0x1234567890abcdefull, 1, 2, 3};
  EXPECT_FAILS(goose_drafter_free(reinterpret_cast<goose_drafter*>(junk)),
               GOOSE_ERROR_INVALID_HANDLE, "not a goose handle");
  EXPECT_FAILS(goose_session_cancel(reinterpret_cast<goose_session*>(junk)),
               GOOSE_ERROR_INVALID_HANDLE, "not a goose handle");
}

TEST(ApiErrors, UseAfterFree) {
  goose_drafter_params p;
  goose_drafter_default_params(&p);
  p.n_vocab = 100;
  goose_drafter* d = nullptr;
  ASSERT_OK(goose_drafter_new(&p, &d));
  const int32_t prompt[] = {1, 2, 3};
  goose_drafter_request* r = nullptr;
  ASSERT_OK(goose_drafter_begin(d, prompt, 3, &r));
  ASSERT_OK(goose_drafter_end(r));
  EXPECT_FAILS(goose_drafter_commit(r, nullptr, 0, 1), GOOSE_ERROR_INVALID_HANDLE,
               "used after it was freed");
  EXPECT_FAILS(goose_drafter_end(r), GOOSE_ERROR_INVALID_HANDLE, "used after it was freed");
  ASSERT_OK(goose_drafter_free(d));
  goose_drafter_info info;
  EXPECT_FAILS(goose_drafter_info_get(d, &info), GOOSE_ERROR_INVALID_HANDLE,
               "used after it was freed");
  EXPECT_FAILS(goose_drafter_begin(d, prompt, 3, &r), GOOSE_ERROR_INVALID_HANDLE,
               "used after it was freed");
  EXPECT_FAILS(goose_drafter_free(d), GOOSE_ERROR_INVALID_HANDLE, "used after it was freed");
  EXPECT_FAILS(goose_session_free(reinterpret_cast<goose_session*>(d)), GOOSE_ERROR_INVALID_HANDLE,
               "a freed goose_drafter, not a goose_session");

  ModelPtr m = LoadTiny();
  goose_session* s = nullptr;
  ASSERT_OK(goose_session_open(m.get(), nullptr, &s));
  ASSERT_OK(goose_session_free(s));
  const int32_t ids[] = {1};
  EXPECT_FAILS(goose_session_score(s, ids, ids, 1), GOOSE_ERROR_INVALID_HANDLE, "used after");
  // A model freed before its session: the session keeps it alive.
  goose_model* m2 = m.release();
  ASSERT_OK(goose_session_open(m2, nullptr, &s));
  ASSERT_OK(goose_model_free(m2));
  EXPECT_FAILS(goose_model_info_get(m2, nullptr), GOOSE_ERROR_INVALID_HANDLE, "used after");
  goose_generate_params gp;
  goose_generate_default_params(&gp);
  gp.max_tokens = 4;
  ASSERT_OK(goose_session_generate(s, ids, 1, &gp, nullptr, nullptr, nullptr));
  ASSERT_OK(goose_session_free(s));
}

TEST(ApiErrors, BadIdsAndValues) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  goose_model_info mi;
  ASSERT_OK(goose_model_info_get(m.get(), &mi));
  const int32_t bad_prompt[] = {1, mi.n_vocab};
  goose_generate_params p;
  goose_generate_default_params(&p);
  EXPECT_FAILS(goose_session_generate(s.get(), bad_prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "outside the vocabulary");
  const int32_t prompt[] = {1, 403};
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 0, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "n_prompt");
  p.method = "nonsense";
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "unknown method");
  p.method = "goose+bogus";
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "unknown modifier");
  p.method = "goose";
  p.budget = -1;
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "budget_auto");
  p.budget = 500;
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "budget");
  goose_generate_default_params(&p);
  p.sampling.top_p = 2;
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "top_p");
  goose_generate_default_params(&p);
  p.n_stop_tokens = 1;
  EXPECT_FAILS(goose_session_generate(s.get(), prompt, 2, &p, nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "stop_tokens");
  std::vector<int32_t> long_prompt(mi.n_ctx, 1);
  goose_generate_default_params(&p);
  EXPECT_FAILS(goose_session_generate(s.get(), long_prompt.data(), int32_t(long_prompt.size()), &p,
                                      nullptr, nullptr, nullptr),
               GOOSE_ERROR_INVALID_ARGUMENT, "context");
  // Scoring: rows that are not there, malformed trees, paths that are not chains.
  int32_t tok = 0;
  EXPECT_FAILS(goose_session_argmax(s.get(), 0, &tok), GOOSE_ERROR_STATE, "no rows");
  const int32_t tokens[] = {1, 403, 407}, parents[] = {-1, 0, 0}, bad_parents[] = {-1, 1, 0};
  EXPECT_FAILS(goose_session_score(s.get(), tokens, bad_parents, 3), GOOSE_ERROR_INVALID_ARGUMENT,
               "parents[1]");
  const int32_t bad_tokens[] = {1, -5, 2};
  EXPECT_FAILS(goose_session_score(s.get(), bad_tokens, parents, 3), GOOSE_ERROR_INVALID_ARGUMENT,
               "outside the vocabulary");
  ASSERT_OK(goose_session_score(s.get(), tokens, parents, 3));
  EXPECT_FAILS(goose_session_argmax(s.get(), 3, &tok), GOOSE_ERROR_INVALID_ARGUMENT, "row 3");
  int32_t ids[4];
  EXPECT_FAILS(goose_session_top_k(s.get(), 0, 0, ids, nullptr), GOOSE_ERROR_INVALID_ARGUMENT, "k");
  const int32_t not_chain[] = {0, 1, 2}, not_root[] = {1}, out_of_range[] = {0, 7};
  EXPECT_FAILS(goose_session_keep(s.get(), not_chain, 3), GOOSE_ERROR_INVALID_ARGUMENT, "path[2]");
  EXPECT_FAILS(goose_session_keep(s.get(), not_root, 1), GOOSE_ERROR_INVALID_ARGUMENT, "path[0]");
  EXPECT_FAILS(goose_session_keep(s.get(), out_of_range, 2), GOOSE_ERROR_INVALID_ARGUMENT,
               "path[1]");
  const int32_t path[] = {0, 2};
  ASSERT_OK(goose_session_keep(s.get(), path, 2));
  EXPECT_FAILS(goose_session_keep(s.get(), path, 2), GOOSE_ERROR_STATE, "pending");
  EXPECT_FAILS(goose_session_truncate(s.get(), 3), GOOSE_ERROR_INVALID_ARGUMENT, "n_past");
  goose_session_params sp;
  goose_session_default_params(&sp);
  sp.n_ctx = mi.n_ctx + 1;
  goose_session* s2 = nullptr;
  EXPECT_FAILS(goose_session_open(m.get(), &sp, &s2), GOOSE_ERROR_INVALID_ARGUMENT, "n_ctx");
  // Tokenizer buffers.
  int32_t n = 0;
  EXPECT_FAILS(goose_tokenize(m.get(), "Once upon a time", 16, 1, ids, 2, &n),
               GOOSE_ERROR_BUFFER_TOO_SMALL, "do not fit");
  EXPECT_GT(n, 2);
  size_t len = 0;
  char small[2];
  EXPECT_FAILS(goose_detokenize(m.get(), tokens, 3, small, sizeof(small), &len),
               GOOSE_ERROR_BUFFER_TOO_SMALL, "do not fit");
  EXPECT_FAILS(goose_detokenize(m.get(), bad_tokens, 3, small, sizeof(small), &len),
               GOOSE_ERROR_INVALID_ARGUMENT, "tokens[1]");
  EXPECT_FAILS(goose_token_is_eog(m.get(), mi.n_vocab, &tok), GOOSE_ERROR_INVALID_ARGUMENT,
               "outside");
  // Drafters.
  goose_drafter_params dp;
  goose_drafter_default_params(&dp);
  goose_drafter* d = nullptr;
  EXPECT_FAILS(goose_drafter_new(&dp, &d), GOOSE_ERROR_INVALID_ARGUMENT, "n_vocab");
  dp.n_vocab = mi.n_vocab;
  dp.method = "graft";
  EXPECT_FAILS(goose_drafter_new(&dp, &d), GOOSE_ERROR_INVALID_ARGUMENT, "draft model");
  dp.method = "goose+nonsense";
  EXPECT_FAILS(goose_drafter_new(&dp, &d), GOOSE_ERROR_INVALID_ARGUMENT, "unknown modifier");
  dp.method = "goose";
  ASSERT_OK(goose_drafter_new(&dp, &d));
  DrafterPtr owner(d);
  goose_drafter_request* r = nullptr;
  EXPECT_FAILS(goose_drafter_begin(d, bad_prompt, 2, &r), GOOSE_ERROR_INVALID_ARGUMENT,
               "prompt[1]");
  EXPECT_FAILS(goose_drafter_begin(d, prompt, 0, &r), GOOSE_ERROR_INVALID_ARGUMENT, "n_prompt");
}

TEST(ApiErrors, FilesThatAreNotModels) {
  goose_model* m = nullptr;
  EXPECT_FAILS(goose_model_load("/nonexistent/model.gguf", nullptr, &m), GOOSE_ERROR_FILE,
               "/nonexistent/model.gguf");
  EXPECT_FAILS(goose_model_load("/tmp", nullptr, &m), GOOSE_ERROR_FILE, "/tmp");
  // The tiny model cut short, and with its header's magic flipped.
  std::string bytes;
  {
    std::ifstream in(TinyModelPath(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("goose_capi_bad_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 3);
  EXPECT_EQ(goose_model_load(path.c_str(), nullptr, &m), GOOSE_ERROR_FILE);
  bytes[0] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(goose_model_load(path.c_str(), nullptr, &m), GOOSE_ERROR_FILE);
  EXPECT_EQ(m, nullptr);
  std::filesystem::remove(path);
  goose_model_params p;
  goose_model_default_params(&p);
  p.n_threads = -1;
  EXPECT_FAILS(goose_model_load(TinyModelPath().c_str(), &p, &m), GOOSE_ERROR_INVALID_ARGUMENT,
               "n_threads");
}

}  // namespace
}  // namespace goose_test
