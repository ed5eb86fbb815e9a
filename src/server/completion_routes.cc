// POST /v1/completions and /v1/chat/completions: request -> prompt tokens and generation
// parameters -> a job on a slot -> one JSON answer, or server-sent events as the slot commits.
#include <chrono>
#include <cstdio>
#include <optional>

#include "server/api_response.h"
#include "server/generation.h"
#include "server/server_impl.h"

namespace goose::server {

namespace {

using nlohmann::json;

// What a request runs, resolved against the loaded model and the server's defaults.
struct PreparedJob {
  GenerationJob job;
  bool budget_auto = false;
  std::string spec_key;  // SpecVariantKey: the "goose.spec" reported back
  json budget;           // "auto" or the node budget
};

ApiError BadRequest(std::string param, std::string message, std::string code = "") {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// A generation the shutdown cancelled (after its grace period).
ApiError CancelledByShutdown() {
  ApiError e;
  e.status = 503;
  e.type = "unavailable_error";
  e.code = "shutting_down";
  e.message = "the server is shutting down; the generation was cancelled";
  return e;
}

ApiError ContextExceeded(const CompletionRequest& r, const std::string& how_long, int n_ctx) {
  return BadRequest(r.kind == ApiKind::kChat ? "messages" : "prompt",
                    StrFormat("the prompt is %s tokens long but the context holds %d; send a "
                              "shorter one (or start goose serve with a larger -c)",
                              how_long.c_str(), n_ctx),
                    "context_length_exceeded");
}

ApiOr<PreparedJob> Prepare(const Server::Impl& s, const CompletionRequest& r) {
  const LoadedModel& l = s.loaded;
  const Tokenizer& tok = l.model->tokenizer();
  PreparedJob p;
  std::vector<int32_t>& prompt = p.job.prompt;
  // Text is tokenized only as far as it can fit (n_ctx - 1 tokens leave room for one more).
  const size_t max_prompt = static_cast<size_t>(l.n_ctx - 1);
  std::optional<std::vector<int32_t>> encoded;
  if (r.kind == ApiKind::kChat) {
    if (!l.chat) {
      return BadRequest("messages",
                        l.chat_missing +
                            ", so goose cannot write a chat prompt for it; start "
                            "goose serve with --chat-template NAME (" +
                            ChatFamilyNames() + "), or send the prompt yourself to /v1/completions",
                        "no_chat_template");
    }
    StatusOr<std::string> text = RenderChat(*l.chat, r.messages);
    if (!text.ok()) return BadRequest("messages", text.status().message());
    encoded = l.specials.EncodeAtMost(tok, *text, /*add_bos=*/true, max_prompt);
    if (!encoded) return ContextExceeded(r, StrFormat("more than %zu", max_prompt), l.n_ctx);
    prompt = std::move(*encoded);
  } else if (r.prompt_is_tokens) {
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
      if (r.prompt_tokens[i] >= tok.n_vocab()) {
        return BadRequest("prompt", StrFormat("'prompt[%zu]' = %d is outside the vocabulary "
                                              "(0..%d)",
                                              i, r.prompt_tokens[i], tok.n_vocab() - 1));
      }
    }
    prompt = r.prompt_tokens;
  } else {
    encoded = tok.EncodeAtMost(r.prompt, /*add_bos=*/true, max_prompt);  // as `goose generate -p`
    if (!encoded) return ContextExceeded(r, StrFormat("more than %zu", max_prompt), l.n_ctx);
    prompt = std::move(*encoded);
  }
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_prompt == 0) {
    return BadRequest("prompt",
                      "the prompt is empty and this vocabulary adds no BOS token: give "
                      "at least one token");
  }
  if (n_prompt >= l.n_ctx) return ContextExceeded(r, std::to_string(n_prompt), l.n_ctx);
  GenerateParams& params = p.job.params;
  if (r.prediction) {  // text the answer is expected to reproduce: no BOS
    encoded = tok.EncodeAtMost(*r.prediction, /*add_bos=*/false, l.n_ctx);
    if (!encoded) {
      return BadRequest(
          "prediction",
          StrFormat("the prediction is more than the context's %d tokens long", l.n_ctx),
          "context_length_exceeded");
    }
    params.prediction = std::move(*encoded);
    p.job.has_prediction = true;
  }
  params.spec = s.default_spec;
  if (!r.spec.empty()) {
    params.spec = SpecParams{};
    (void)ParseSpecVariant(r.spec, &params.spec);  // checked by ParseCompletionRequest
    params.spec.budget = s.default_spec.budget;
  }
  if (MethodOf(params.spec).needs_draft_model() && !l.draft) {
    return BadRequest("goose.spec", "'" + params.spec.method +
                                        "' needs a draft model, and this server has none (start "
                                        "goose serve with -md DRAFT.gguf)");
  }
  p.budget_auto = r.budget_auto || (!r.budget && s.default_budget_auto);
  if (r.budget) params.spec.budget = *r.budget;
  params.spec.auto_budget = p.budget_auto;  // the slot's engine chooses on the cost curve
  if (p.budget_auto && l.cost.empty()) {
    return BadRequest("goose.budget",
                      "\"auto\" needs the cost curve, which goose serve measures at start only "
                      "with --budget auto; give a number instead (0 = the method's default)");
  }
  params.sampling.temp = r.temperature;
  params.sampling.top_p = r.top_p;
  params.sampling.top_k = r.top_k;
  params.sampling.seed = r.seed;
  params.n_predict = r.max_tokens < 0 ? l.n_ctx : r.max_tokens;
  params.prefill_chunk = s.opts.prefill_chunk;
  p.job.stop = r.stop;
  p.spec_key = SpecVariantKey(params.spec);
  p.budget = p.budget_auto ? json("auto") : json(ResolvedBudget(params.spec));
  return p;
}

// A completion whose client went: 499 (nginx's "client closed request"), which no one reads but
// the metrics count.
ApiError ClientGone() {
  ApiError e;
  e.status = 499;
  e.code = "client_gone";
  e.message = "the client went away; the generation was cancelled";
  return e;
}

// Server-sent events as the slot commits text; a failed write (the client left) cancels the
// generation.
void StreamCompletion(HttpExchange& ex, GenerationChannel& channel, const PreparedJob& prep,
                      const ResponseIds& ids, bool chat, bool include_usage) {
  auto write = [&](const std::string& s) {
    if (ex.Write(s)) return true;
    channel.Cancel();  // the client went away: the slot stops at its next cycle
    return false;
  };
  auto chunk = [&](const std::string& text, const char* finish) {
    return SseEvent(chat ? ChatChunkBody(ids, text, false, finish) : ChunkBody(ids, text, finish));
  };
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers.push_back({"Cache-Control", "no-cache"});
  if (!ex.StartStream(std::move(head))) return channel.Cancel();
  if (chat && !write(SseEvent(ChatChunkBody(ids, "", /*role_chunk=*/true, nullptr)))) return;
  while (true) {
    channel.WaitFor(std::chrono::seconds(1));
    const bool done = channel.done();  // before Take: no text can follow done
    const std::string text = channel.Take();
    if (!text.empty()) {
      if (!write(chunk(text, nullptr))) return;
    } else if (!done) {
      // Nothing for a second (queued, or a long prefill): an SSE comment, which clients ignore
      // and proxies take as a sign of life.
      if (!write(": waiting\n\n")) return;
    }
    if (!done) continue;
    const GenerationOutcome& o = channel.outcome();
    if (!o.status.ok() || o.cancelled) {
      write(SseEvent(
          ErrorBody(o.status.ok() ? CancelledByShutdown() : ServerError(o.status.message()))));
    } else {
      json last = chat ? ChatChunkBody(ids, "", false, o.finish_reason.c_str())
                       : ChunkBody(ids, "", o.finish_reason.c_str());
      last["goose"] = GooseStats(o, prep.spec_key, prep.budget);
      if (!write(SseEvent(last))) return;
      if (include_usage && !write(SseEvent(UsageChunk(ids, chat, o)))) {
        return;
      }
    }
    if (!write(kSseDone)) return;
    return ex.End();
  }
}

}  // namespace

void Server::Impl::HandleCompletion(HttpExchange& ex, ApiKind kind) {
  if (!CheckReady(ex, /*generation=*/true)) return;
  ApiOr<CompletionRequest> parsed = ParseCompletionRequest(ex.TakeBody(), kind);
  if (!parsed.ok()) return SendError(ex, parsed.error());
  const CompletionRequest& r = parsed.value();
  ApiOr<PreparedJob> prepared = Prepare(*this, r);
  if (!prepared.ok()) return SendError(ex, prepared.error());
  auto prep = std::make_shared<PreparedJob>(std::move(prepared.value()));
  const bool chat = kind == ApiKind::kChat;

  auto channel = std::make_shared<GenerationChannel>();
  auto on_finished = [this](const GenerationOutcome& o) {
    if (o.cancelled) {
      metrics.CountCancelled();
    } else if (o.status.ok()) {
      metrics.CountGeneration(o.n_prompt, o.n_generated, o.result.stats,
                              o.result.prefill_seconds + o.result.decode_seconds);
    }
  };
  const ServingLoop::Admit admit = loaded.loop->Submit(ServingRequestFor(
      prep->job, channel, loaded.model->tokenizer(), cancel_all, opts.on_cycle, on_finished));
  if (admit != ServingLoop::Admit::kQueued) {
    const bool full = admit == ServingLoop::Admit::kQueueFull;
    metrics.CountRejected(full ? "queue_full" : "shutting_down");
    ApiError e;
    e.status = 503;
    e.type = "unavailable_error";
    e.code = full ? "queue_full" : "shutting_down";
    e.message = full ? StrFormat("all %d slots are busy and %d requests are waiting; retry later",
                                 opts.n_parallel, opts.max_queue)
                     : "the server is shutting down";
    HttpResponse res;
    if (full) res.headers.push_back({"Retry-After", "1"});
    return SendError(ex, e, res);
  }
  // The client leaving, streamed or not, ends its request before the next pass.
  ex.OnClientGone([channel] { channel->Cancel(); });

  ResponseIds ids;
  ids.id = StrFormat("%s-%llx%04llx", chat ? "chatcmpl" : "cmpl",
                     static_cast<unsigned long long>(start_time),
                     static_cast<unsigned long long>(next_id.fetch_add(1)));
  ids.created = static_cast<int64_t>(std::time(nullptr));
  ids.model = model_name;

  if (!r.stream) {
    channel->WaitDone();
    const GenerationOutcome& o = channel->outcome();
    if (!o.status.ok()) return SendError(ex, ServerError(o.status.message()));
    if (o.cancelled) return SendError(ex, ex.client_gone() ? ClientGone() : CancelledByShutdown());
    const std::string text = channel->Take();
    const json goose = GooseStats(o, prep->spec_key, prep->budget);
    return SendJson(ex, chat ? ChatBody(ids, text, o, goose) : CompletionBody(ids, text, o, goose));
  }
  StreamCompletion(ex, *channel, *prep, ids, chat, r.include_usage);
}

}  // namespace goose::server
