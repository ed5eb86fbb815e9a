/* goose.h: goose as a library. Llama-family GGUF models on the CPU with lossless speculative
 * decoding (every method emits exactly the tokens plain decoding emits), and goose's drafter on
 * its own for engines that verify its trees with their own model.
 *
 * Objects
 *   goose_model    a loaded GGUF: weights, tokenizer, what the methods learned. Immutable.
 *   goose_session  a context (KV cache) on a model: generate, or score token trees yourself.
 *   goose_drafter  goose's drafter without a model: proposes token trees, learns from the top-k
 *                  a host engine reports (state shared by all its requests).
 *   goose_drafter_request  one request of a drafter: its prompt, its context match, its cycle.
 *
 * Errors. Every function that can fail returns a goose_status; GOOSE_OK is 0. On failure the
 * outputs are left as they were and goose_last_error() tells what went wrong (file, argument,
 * offset). Bad input never aborts the process: null pointers, a handle of another kind, a
 * freed handle, a token id outside the vocabulary, a malformed tree or path, a corrupt file.
 *
 * Handles. Handles are pointers to goose objects that carry a tag: a function given a handle of
 * another kind, or not a goose handle at all, returns GOOSE_ERROR_INVALID_HANDLE. A freed
 * handle's memory is kept (its last 1024 frees of any kind) so that a call on it reports
 * GOOSE_ERROR_INVALID_HANDLE ("used after free") rather than touching freed memory; beyond
 * that, as with any C library, a freed handle must not be used.
 *
 * Ownership. The caller owns every handle it gets from a *_load / *_open / *_new / *_begin
 * function and frees it with the matching *_free / *_end. Pointers goose returns into its
 * objects (trees, logits, tokens) stay valid as each function says. goose never keeps a
 * pointer the caller passed in, past the call (callbacks: while the call runs).
 *
 * Threads. Each function says what it allows. In short: a goose_model may be used by any
 * number of threads at once; a goose_session and a goose_drafter_request by one thread at a
 * time (goose_session_cancel excepted); a goose_drafter by any number of threads, one per
 * request. No handle may be freed while another thread uses it.
 */
#ifndef GOOSE_GOOSE_H_
#define GOOSE_GOOSE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GOOSE_API __attribute__((visibility("default")))

/* ---- Status and errors ----------------------------------------------------------------- */

typedef enum goose_status {
  GOOSE_OK = 0,
  GOOSE_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, a value out of range, a bad tree/path */
  GOOSE_ERROR_INVALID_HANDLE = 2,   /* null, not a goose handle, another kind, or freed */
  GOOSE_ERROR_FILE = 3,             /* a file that cannot be read, parsed or written */
  GOOSE_ERROR_STATE = 4,            /* the object is not in a state for this call */
  GOOSE_ERROR_OUT_OF_MEMORY = 5,    /* does not fit in memory */
  GOOSE_ERROR_BUFFER_TOO_SMALL = 6, /* the caller's buffer is too small; the size is returned */
  GOOSE_ERROR_INTERNAL = 7          /* a bug in goose; the message says where */
} goose_status;

/* "GOOSE_OK", "GOOSE_ERROR_INVALID_ARGUMENT", ...; "unknown" for other values. Static string.
 * Thread-safe. */
GOOSE_API const char* goose_status_name(goose_status status);

/* The message of the last call on this thread that failed ("" if none did). Valid until the
 * next goose call on this thread. Thread-safe (the message is per thread). */
GOOSE_API const char* goose_last_error(void);

/* "0.5.0". Static string. Thread-safe. */
GOOSE_API const char* goose_version(void);

/* Where a tree node came from (per-source statistics, goose_draft_tree.source). */
typedef enum goose_source {
  GOOSE_SOURCE_ROOT = 0,          /* the root: the last committed token */
  GOOSE_SOURCE_SPINE = 1,         /* the context match's continuation */
  GOOSE_SOURCE_BRANCH = 2,        /* a transition-table successor */
  GOOSE_SOURCE_CHAIN = 3,         /* a prompt-lookup chain (pld) */
  GOOSE_SOURCE_DRAFT = 4,         /* a draft model's token */
  GOOSE_SOURCE_GRAFT_CONTEXT = 5, /* a context-match token grafted into a draft-model tree */
  GOOSE_SOURCE_GRAFT_TABLE = 6,   /* a table token grafted into a draft-model tree */
  GOOSE_SOURCE_PREDICTION = 7,    /* a token of the request's predicted output */
  GOOSE_SOURCE_COUNT = 8
} goose_source;

/* What speculation did: verified cycles (one tree per forward pass after the prefill) and,
 * per goose_source, nodes drafted, reached (their parent was accepted) and accepted. */
typedef struct goose_spec_stats {
  int64_t cycles;     /* verified trees */
  int64_t committed;  /* tokens they committed: accepted nodes + bonus tokens */
  int64_t bonus;      /* bonus tokens (the target's own token after the accepted path) */
  int64_t tree_nodes; /* nodes scored, over all cycles (root included) */
  int64_t drafted[GOOSE_SOURCE_COUNT];
  int64_t reached[GOOSE_SOURCE_COUNT];
  int64_t accepted[GOOSE_SOURCE_COUNT];
} goose_spec_stats;

/* ---- Models ---------------------------------------------------------------------------- */

typedef struct goose_model goose_model;

typedef struct goose_model_params {
  int32_t n_threads;            /* threads of each session (default); 0: every core */
  int32_t n_ctx;                /* largest context of a session, tokens; 0: min(model's, 4096) */
  const char* draft_model_path; /* a draft model for the methods that need one; NULL: none */
  int32_t learned_cache;        /* 1: load and save what the methods learn, as goose generate
                                   does (per model under cache_dir); 0 (default): neither */
  const char* cache_dir;        /* the caches' root; NULL: $XDG_CACHE_HOME/goose, else
                                   ~/.cache/goose */
  int32_t budget_auto;          /* 1: sessions may generate with budget -1 (auto): loads, or
                                   measures once per machine (~10 s), the verify-cost curve */
} goose_model_params;

/* Fills *params with the defaults. Thread-safe. */
GOOSE_API void goose_model_default_params(goose_model_params* params);

/* Loads the GGUF at `path` (params NULL: the defaults). *out receives a new model the caller
 * frees with goose_model_free. Errors: GOOSE_ERROR_FILE naming the file and what is wrong (an
 * unsupported architecture, a missing tensor, a truncated file, ...), GOOSE_ERROR_OUT_OF_MEMORY
 * when a context of n_ctx tokens does not fit. Thread-safe. */
GOOSE_API goose_status goose_model_load(const char* path, const goose_model_params* params,
                                        goose_model** out);

/* Releases the caller's model. Sessions still open keep the model alive until they are freed.
 * NULL is GOOSE_ERROR_INVALID_HANDLE. Not while another thread uses this handle. */
GOOSE_API goose_status goose_model_free(goose_model* model);

typedef struct goose_model_info {
  int32_t n_vocab;
  int32_t n_ctx_train; /* the context the model was trained for */
  int32_t n_ctx;       /* the largest context a session may have */
  int32_t n_layer;
  int32_t n_embd;
  int32_t bos;          /* -1 if none */
  int32_t eos;          /* -1 if none */
  int32_t n_threads;    /* a session's default thread count */
  uint64_t fingerprint; /* identifies the model (config, tensors, a sample of their bytes) */
} goose_model_info;

/* Fills *out. Thread-safe. */
GOOSE_API goose_status goose_model_info_get(const goose_model* model, goose_model_info* out);

/* *is_eog = 1 if generation stops after `token` (EOS, EOT, ...), else 0. Errors: a token
 * outside [0, n_vocab). Thread-safe. */
GOOSE_API goose_status goose_token_is_eog(const goose_model* model, int32_t token, int32_t* is_eog);

/* Tokenizes text[0, text_len) (any bytes; no special-token parsing), with BOS first if add_bos
 * and the model uses one. Writes at most `capacity` ids to tokens (which may be NULL when
 * capacity is 0) and the count to *n_tokens; GOOSE_ERROR_BUFFER_TOO_SMALL (with *n_tokens the
 * count needed, nothing written) when they do not fit. Thread-safe. */
GOOSE_API goose_status goose_tokenize(const goose_model* model, const char* text, size_t text_len,
                                      int32_t add_bos, int32_t* tokens, int32_t capacity,
                                      int32_t* n_tokens);

/* The bytes tokens[0, n_tokens) stand for (control tokens: none), written to buf with a NUL
 * after them; *text_len = their count (without the NUL). GOOSE_ERROR_BUFFER_TOO_SMALL (with
 * *text_len the count, nothing written) when capacity < *text_len + 1. Thread-safe. */
GOOSE_API goose_status goose_detokenize(const goose_model* model, const int32_t* tokens,
                                        int32_t n_tokens, char* buf, size_t capacity,
                                        size_t* text_len);

/* ---- Sessions: generation ---------------------------------------------------------------- */

typedef struct goose_session goose_session;

typedef struct goose_session_params {
  int32_t n_ctx;     /* tokens of its context; 0: the model's n_ctx (goose_model_info) */
  int32_t n_threads; /* 0: the model's n_threads */
} goose_session_params;

GOOSE_API void goose_session_default_params(goose_session_params* params);

/* Opens a session on `model` (params NULL: the defaults): its own KV cache and threads, and
 * the model's learned state, shared with the model's other sessions. *out receives it; free it
 * with goose_session_free. Errors: n_ctx out of range, GOOSE_ERROR_OUT_OF_MEMORY. The model
 * may be used by other threads meanwhile. */
GOOSE_API goose_status goose_session_open(goose_model* model, const goose_session_params* params,
                                          goose_session** out);

/* Frees the session (with learned_cache, saving what its requests learned). Not while another
 * thread uses it. */
GOOSE_API goose_status goose_session_free(goose_session* session);

typedef struct goose_sampling {
  float temperature; /* 0 (default): greedy */
  int32_t top_k;     /* 40; 0: off */
  float top_p;       /* 0.95 */
  uint64_t seed;     /* 0; randomness is keyed by (seed, position), so a run repeats exactly */
} goose_sampling;

typedef struct goose_generate_params {
  int32_t max_tokens; /* tokens to generate (default 128) */
  goose_sampling sampling;
  const char* method;         /* "none" (default, NULL too), "goose", "goose+paper", "pld", "tr",
                                 "balanced", "sequoia", ... as goose generate --spec */
  int32_t budget;             /* tree nodes incl. the root, 1..128; 0 (default): the method's own;
                                 -1: auto (needs a model loaded with budget_auto) */
  int32_t ignore_eos;         /* 1: go on past end-of-generation tokens */
  const int32_t* stop_tokens; /* also stop after these ids; may be NULL when n_stop_tokens is 0 */
  int32_t n_stop_tokens;
  int32_t prefill_chunk;     /* prompt tokens per prefill pass (default 256; 0: one pass) */
  const int32_t* prediction; /* the output the caller expects (OpenAI's Predicted Outputs), as
                                token ids without BOS, at most n_ctx; tuned goose, pld and graft
                                draft from it too. The output never depends on it. NULL: none */
  int32_t n_prediction;
} goose_generate_params;

GOOSE_API void goose_generate_default_params(goose_generate_params* params);

/* Called after every cycle that committed tokens: the new tokens and the text they complete
 * (whole UTF-8 characters; not NUL-terminated). A last call with n_tokens == 0 may carry the
 * rest of the text. Return 0 to stop the generation there, anything else to go on. Runs on
 * the thread that called goose_session_generate; it must not call into the same session. */
typedef int32_t (*goose_token_callback)(void* user_data, const int32_t* tokens, int32_t n_tokens,
                                        const char* text, size_t text_len);

typedef struct goose_generate_stats {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  int64_t forward_passes;      /* after the prefill */
  double mean_accepted_tokens; /* generated_tokens / forward_passes: goose generate's MAT */
  double prompt_seconds;
  double generation_seconds;
  int32_t hit_context_limit; /* 1: stopped because the context was full */
  int32_t cancelled;         /* 1: stopped by the callback or goose_session_cancel */
  goose_spec_stats spec;
} goose_generate_stats;

/* Generates from prompt[0, n_prompt) (token ids, BOS included if wanted: goose_tokenize) in an
 * emptied context; params NULL: the defaults; callback and stats may be NULL. The tokens are
 * exactly plain decoding's, whatever the method (the lossless guarantee); a cancelled
 * generation returns GOOSE_OK with stats->cancelled = 1 and the tokens so far. Errors: an
 * empty prompt or one that does not fit the context, ids outside the vocabulary, an unknown
 * method or modifier, a budget out of range, sampling values out of range. One thread at a
 * time per session. */
GOOSE_API goose_status goose_session_generate(goose_session* session, const int32_t* prompt,
                                              int32_t n_prompt, const goose_generate_params* params,
                                              goose_token_callback callback, void* user_data,
                                              goose_generate_stats* stats);

/* The tokens of the session's last generation: *tokens points into the session, valid until
 * its next generate or free. */
GOOSE_API goose_status goose_session_tokens(const goose_session* session, const int32_t** tokens,
                                            int32_t* n_tokens);

/* Asks the running generation of this session to stop before its next forward pass (a call
 * with no generation running is forgotten). The one session function any thread may call
 * while another uses the session. */
GOOSE_API goose_status goose_session_cancel(goose_session* session);

/* Every generation's speculation statistics since the session opened. */
GOOSE_API goose_status goose_session_stats(const goose_session* session, goose_spec_stats* out);

/* ---- Sessions: scoring trees (a host loop, as another engine runs one) ------------------- */
/* The context holds n_past committed tokens. A score call evaluates n new rows after them:
 * row i is tokens[i] with parent parents[i] (-1: a child of the committed tokens, else an
 * earlier row), at position n_past + depth(i); it attends to the committed tokens and exactly
 * its ancestors. Its logits are bit-identical to one-token decoding of the same path. The rows
 * stay pending until goose_session_keep commits one root-to-row path of them. */

/* Scores n rows (1..n_ctx - n_past); drops rows still pending. Errors: a bad token id or
 * parent, too many rows for the context. */
GOOSE_API goose_status goose_session_score(goose_session* session, const int32_t* tokens,
                                           const int32_t* parents, int32_t n);

/* *logits = row `row`'s n_vocab logits of the last score call, valid until the session's next
 * score, generate or free. */
GOOSE_API goose_status goose_session_logits(const goose_session* session, int32_t row,
                                            const float** logits);

/* The k (1..n_vocab) highest logits of row `row`, highest first, ties by lower id: ids[k] and
 * logits[k] (logits may be NULL). */
GOOSE_API goose_status goose_session_top_k(const goose_session* session, int32_t row, int32_t k,
                                           int32_t* ids, float* logits);

/* The greedy token of row `row` (argmax, ties to the lower id): plain greedy decoding's. */
GOOSE_API goose_status goose_session_argmax(const goose_session* session, int32_t row,
                                            int32_t* token);

/* The token sampling draws at row `row` for absolute position `pos` (the row's n_past + depth
 * + 1), as generation with the same sampling draws it there. */
GOOSE_API goose_status goose_session_sample(const goose_session* session, int32_t row,
                                            const goose_sampling* sampling, int64_t pos,
                                            int32_t* token);

/* Commits pending rows path[0, n): path[0] a row whose parent is -1, each next one a child of
 * the one before. n_past grows by n; the other pending rows are dropped (n = 0: all of them).
 * Errors: no rows pending, a row that is not pending, a path that is not a root-to-row chain. */
GOOSE_API goose_status goose_session_keep(goose_session* session, const int32_t* path, int32_t n);

/* Drops the committed tokens from position n_past on (0 <= n_past <= the current n_past) and
 * whatever is pending. */
GOOSE_API goose_status goose_session_truncate(goose_session* session, int32_t n_past);

GOOSE_API goose_status goose_session_n_past(const goose_session* session, int32_t* n_past);

/* ---- The drafter on its own ---------------------------------------------------------------- */
/* The host engine owns the model and the KV cache; goose proposes trees and learns from what
 * the host verified. One request's cycle (docs/library.md):
 *
 *   goose_drafter_begin(prompt)            once per request
 *   (goose_drafter_set_prediction)         the expected output, if the request has one
 *   goose_drafter_observe_prompt(rows)     the top-k of the prompt rows the host scored
 *   goose_drafter_commit(NULL, 0, first)   the token the host generated from the prompt
 *   loop:
 *     goose_drafter_propose(budget)        a tree rooted at the last committed token
 *     (the host scores the tree's rows: ancestor mask, positions root + depth)
 *     goose_drafter_observe(rows)          the top-k of every scored row
 *     goose_drafter_commit(path, bonus)    what the host's walk accepted, and its bonus token
 *   goose_drafter_end()
 *
 * A request's output is the host's own decoding whatever goose proposes: the host accepts a
 * node only where its own token at the parent is the node's token.
 * Locking: the learned state (transition table, acceptance model, statistics) is shared by the
 * drafter's requests behind one reader-writer lock. Propose and a commit without a tree hold it
 * shared, so requests on different threads propose at the same time (methods whose Propose
 * also learns, sequoia, hold it exclusively); begin, observe_prompt and a tree's commit (where
 * the drafter learns) hold it exclusively for their few microseconds. Deterministic: the same
 * calls in the same order give the same trees. */

typedef struct goose_drafter goose_drafter;
typedef struct goose_drafter_request goose_drafter_request;

typedef struct goose_drafter_params {
  int32_t n_vocab;            /* the host model's vocabulary: ids are [0, n_vocab) (required) */
  const char* method;         /* "goose" (default, NULL too): the tuned GOOSE, tables kept
                                 across requests; "goose+paper", "goose+cold", "tr", "pld",
                                 "balanced", "sequoia", "none"; not the draft-model methods */
  uint64_t model_fingerprint; /* the host model's identity, stamped into saved state: a load
                                 refuses state saved for another (0: unspecified) */
} goose_drafter_params;

GOOSE_API void goose_drafter_default_params(goose_drafter_params* params);

/* A new drafter with nothing learned; free it with goose_drafter_free. Errors: n_vocab out of
 * [1, 2^24], an unknown method, a method that needs a draft model. Thread-safe. */
GOOSE_API goose_status goose_drafter_new(const goose_drafter_params* params, goose_drafter** out);

/* Frees the drafter. GOOSE_ERROR_STATE while requests of it are open (end them first). Not
 * while another thread uses it. */
GOOSE_API goose_status goose_drafter_free(goose_drafter* drafter);

typedef struct goose_drafter_info {
  int32_t n_vocab;
  int32_t top_k; /* candidates per row the drafter keeps: report at least this many
                    (0: the method learns nothing from rows, e.g. pld) */
  int32_t open_requests;
  char method[64]; /* the variant, canonical ("goose+keep", "pld", ...) */
} goose_drafter_info;

/* Thread-safe. */
GOOSE_API goose_status goose_drafter_info_get(const goose_drafter* drafter,
                                              goose_drafter_info* out);

/* Begins a request with its prompt[0, n_prompt) (as the host's model sees it, BOS included).
 * *out receives the request; end it with goose_drafter_end. Thread-safe (one call per new
 * request); the request is then used by one thread at a time. */
GOOSE_API goose_status goose_drafter_begin(goose_drafter* drafter, const int32_t* prompt,
                                           int32_t n_prompt, goose_drafter_request** out);

/* Ends the request and frees it (what the drafter learned from it stays). */
GOOSE_API goose_status goose_drafter_end(goose_drafter_request* request);

/* The host scored prompt rows [first_row, first_row + n_rows) (row i's input token is
 * prompt[i]): for each, its k best tokens, top_ids[r * k + j] with their logits
 * top_logits[r * k + j] (any order; id -1 pads a row with fewer). Call before the first
 * commit; chunks in any order. The table methods learn from them. Errors: rows outside the
 * prompt, ids outside [-1, n_vocab), a token twice in a row, k out of [1, 1024]. */
GOOSE_API goose_status goose_drafter_observe_prompt(goose_drafter_request* request,
                                                    int32_t first_row, int32_t n_rows,
                                                    const int32_t* top_ids, const float* top_logits,
                                                    int32_t k);

/* The request's predicted output (OpenAI's Predicted Outputs: text the generation is expected
 * to reproduce), as token ids without BOS: tuned goose and pld draft from it while the output
 * follows it. Once, before the first commit. Errors: ids outside the vocabulary, n < 1. */
GOOSE_API goose_status goose_drafter_set_prediction(goose_drafter_request* request,
                                                    const int32_t* tokens, int32_t n_tokens);

/* A proposed tree: node 0 is the root (the last committed token, which the host has not yet
 * scored), nodes in parents-first order, siblings' tokens distinct. */
typedef struct goose_draft_tree {
  int32_t n_nodes;        /* 1..budget */
  const int32_t* tokens;  /* [n_nodes] */
  const int32_t* parents; /* [n_nodes]: -1 for the root, else an earlier node */
  const int32_t* depth;   /* [n_nodes]: root 0; node i sits at the root's position + depth */
  const uint8_t* source;  /* [n_nodes]: goose_source */
} goose_draft_tree;

/* Proposes a tree of at most `budget` nodes (1..128, root included) rooted at the last
 * committed token. The arrays point into the request, valid until its next propose, commit or
 * end. Errors (GOOSE_ERROR_STATE): nothing committed yet, a proposal still open, a request that
 * ended on a stop token. */
GOOSE_API goose_status goose_drafter_propose(goose_drafter_request* request, int32_t budget,
                                             goose_draft_tree* out);

/* The host scored the open tree's first n_rows nodes (all of them, or fewer when its context
 * had no room: the rest are dropped; a prefix of the tree is a tree): each row's k best tokens
 * as goose_drafter_observe_prompt takes them, row r = node r. Optional, once per proposal; a
 * drafter not told learns nothing from the rows. */
GOOSE_API goose_status goose_drafter_observe(goose_drafter_request* request, int32_t n_rows,
                                             const int32_t* top_ids, const float* top_logits,
                                             int32_t k);

/* Commits what the host accepted. With an open tree: `accepted` holds the accepted nodes
 * (root excluded), each the child of the one before, the first a child of the root, all
 * within the scored rows; `bonus` is the host's token after the last of them (-1: the host
 * stopped on a stop token inside the path, and the request is over). Without one (the first
 * token after the prompt, or a token the host decoded without a goose tree): n_accepted 0 and
 * the token as `bonus`. The tree's statistics count per source. */
GOOSE_API goose_status goose_drafter_commit(goose_drafter_request* request, const int32_t* accepted,
                                            int32_t n_accepted, int32_t bonus);

/* The statistics of the trees the request committed. */
GOOSE_API goose_status goose_drafter_request_stats(const goose_drafter_request* request,
                                                   goose_spec_stats* out);

/* The statistics of every tree committed through this drafter since goose_drafter_new.
 * Thread-safe. */
GOOSE_API goose_status goose_drafter_stats(const goose_drafter* drafter, goose_spec_stats* out);

/* Saves what the drafter learned under the directory `dir` (created if needed), in goose's own
 * learned-state format (the files `goose generate` keeps per model): dir/learned-<fingerprint>/
 * <variant>.table and .state, each written atomically. Thread-safe (a shared lock). */
GOOSE_API goose_status goose_drafter_save(goose_drafter* drafter, const char* dir);

/* Loads what goose_drafter_save wrote under `dir` for this drafter's variant and fingerprint,
 * replacing what it learned. GOOSE_ERROR_FILE, with nothing changed, for a missing, corrupt,
 * truncated or foreign file (another model, variant or vocabulary); GOOSE_ERROR_STATE while
 * requests are open. */
GOOSE_API goose_status goose_drafter_load(goose_drafter* drafter, const char* dir);

/* The ancestor mask of a tree of n nodes (what a host's attention takes): mask[i * n + j] = 1
 * when j is i or an ancestor of i, else 0; mask holds n * n bytes. parents[i] is -1 or in
 * [0, i). Thread-safe. */
GOOSE_API goose_status goose_tree_ancestor_mask(const int32_t* parents, int32_t n, uint8_t* mask);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GOOSE_GOOSE_H_ */
