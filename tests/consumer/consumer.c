/* A tiny C program on goose's installed C API: load a model, stream a generation, draft a tree
 * with the drafter on its own, and see an error come back as a status and a message.
 * Usage: consumer MODEL.gguf; exit status 0 when everything behaved. */
#include <stdio.h>
#include <string.h>

#include <goose/goose.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    goose_status st_ = (call);                                                            \
    if (st_ != GOOSE_OK) {                                                                \
      fprintf(stderr, "%s: %s: %s\n", #call, goose_status_name(st_), goose_last_error()); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

static int32_t print_piece(void* user, const int32_t* tokens, int32_t n, const char* text,
                           size_t len) {
  (void)tokens;
  *(int*)user += n;
  fwrite(text, 1, len, stdout);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  printf("goose %s\n", goose_version());
  goose_model* bad = NULL;
  if (goose_model_load("/nonexistent.gguf", NULL, &bad) != GOOSE_ERROR_FILE || bad != NULL) {
    fprintf(stderr, "a missing file should be GOOSE_ERROR_FILE\n");
    return 1;
  }
  printf("expected error: %s\n", goose_last_error());

  goose_model_params mp;
  goose_model_default_params(&mp);
  mp.n_threads = 1;
  goose_model* model = NULL;
  CHECK(goose_model_load(argv[1], &mp, &model));
  goose_model_info info;
  CHECK(goose_model_info_get(model, &info));
  goose_session* session = NULL;
  CHECK(goose_session_open(model, NULL, &session));

  const char* text = "Once upon a time";
  int32_t prompt[64];
  int32_t n_prompt = 0;
  CHECK(goose_tokenize(model, text, strlen(text), 1, prompt, 64, &n_prompt));
  goose_generate_params gp;
  goose_generate_default_params(&gp);
  gp.max_tokens = 16;
  gp.method = "goose";
  gp.budget = 8;
  goose_generate_stats stats;
  int streamed = 0;
  printf("%s", text);
  CHECK(goose_session_generate(session, prompt, n_prompt, &gp, print_piece, &streamed, &stats));
  printf("\n%lld tokens in %lld passes (MAT %.2f)\n", (long long)stats.generated_tokens,
         (long long)stats.forward_passes, stats.mean_accepted_tokens);
  if (streamed != stats.generated_tokens || stats.generated_tokens != 16) return 1;

  goose_drafter_params dp;
  goose_drafter_default_params(&dp);
  dp.n_vocab = info.n_vocab;
  dp.model_fingerprint = info.fingerprint;
  goose_drafter* drafter = NULL;
  CHECK(goose_drafter_new(&dp, &drafter));
  goose_drafter_request* request = NULL;
  CHECK(goose_drafter_begin(drafter, prompt, n_prompt, &request));
  CHECK(goose_drafter_commit(request, NULL, 0, prompt[1]));
  goose_draft_tree tree;
  CHECK(goose_drafter_propose(request, 8, &tree));
  uint8_t mask[64];
  CHECK(goose_tree_ancestor_mask(tree.parents, tree.n_nodes, mask));
  printf("a tree of %d nodes rooted at %d\n", tree.n_nodes, tree.tokens[0]);
  CHECK(goose_drafter_commit(request, NULL, 0, 13));
  CHECK(goose_drafter_end(request));
  if (goose_drafter_end(request) != GOOSE_ERROR_INVALID_HANDLE) return 1; /* used after free */

  CHECK(goose_drafter_free(drafter));
  CHECK(goose_session_free(session));
  CHECK(goose_model_free(model));
  printf("ok\n");
  return 0;
}
