#include "server/server.h"

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "server/server_impl.h"
#include "server/utf8.h"
#include "util/escape.h"

namespace goose::server {

namespace {

using nlohmann::json;

// Compares in time that depends only on the lengths, so a wrong key's timing says nothing about
// how much of it was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

ApiError Unavailable(std::string message, std::string code) {
  ApiError e;
  e.status = 503;
  e.type = "unavailable_error";
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

ApiError NotFound() {
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.message =
      "no such endpoint (goose serves /health, /v1/models, /v1/completions, "
      "/v1/chat/completions, /metrics, /tokenize, /detokenize)";
  return e;
}

// The body of an error the HTTP layer answers itself (malformed HTTP, limits, deadlines).
std::string HttpErrorBody(int status, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  switch (status) {
    case 413:
      e.code = "request_too_large";
      break;
    case 408:
      e.code = "request_timeout";
      break;
    case 503:
      e.type = "unavailable_error";
      e.code = "too_many_connections";
      break;
    default:
      if (status >= 500) e.type = "server_error";
      break;
  }
  return Dump(ErrorBody(e));
}

HttpResponse ErrorResponse(const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.body = Dump(ErrorBody(e));
  return r;
}

}  // namespace

ApiError ServerError(const std::string& message) {
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = message;
  return e;
}

StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options) {
  auto impl = std::make_unique<Impl>();
  ServerOptions& o = options;
  if (o.n_parallel < 1 || o.n_parallel > 256) {
    return Status::Error(StrFormat("--parallel %d is outside 1..256", o.n_parallel));
  }
  if (o.max_queue < 0) return Status::Error("--max-queue must not be negative");
  if (o.port < 0 || o.port > 65535) {
    return Status::Error(StrFormat("--port %d is outside 0..65535", o.port));
  }
  if (o.timeout_seconds < 1) return Status::Error("--timeout must be at least 1 second");
  if (o.max_body_bytes < 1024) return Status::Error("the body limit must be at least 1024 bytes");
  if (Status st = ParseSpecVariant(o.spec, &impl->default_spec); !st.ok()) {
    return Status::Error("--spec: " + st.message());
  }
  if (MethodOf(impl->default_spec).needs_draft_model() && o.draft_model_path.empty()) {
    return Status::Error("--spec " + o.spec + " needs a draft model: give one with -md DRAFT.gguf");
  }
  if (o.budget == "auto") {
    impl->default_budget_auto = true;
  } else {
    char* end = nullptr;
    const long b = std::strtol(o.budget.c_str(), &end, 10);
    if (o.budget.empty() || *end || b < 0 || b > kMaxBudget) {
      return Status::Error("--budget '" + o.budget + "' is neither 0..128 nor 'auto'");
    }
    impl->default_spec.budget = static_cast<int>(b);
  }
  if (!o.chat_template.empty() && !ChatFamilyByName(o.chat_template)) {
    return Status::Error("unknown --chat-template '" + o.chat_template + "' (" + ChatFamilyNames() +
                         ")");
  }
  impl->model_name =
      o.alias.empty() ? std::filesystem::path(o.model_path).filename().string() : o.alias;
  if (o.keep_alive_seconds < 1) return Status::Error("--keep-alive must be at least 1 second");
  if (o.max_connections < 1 || o.max_connections_per_client < 1) {
    return Status::Error("--max-connections and --max-client-connections must be at least 1");
  }
  if (o.n_http_threads <= 0) o.n_http_threads = o.n_parallel + o.max_queue + 4;
  impl->opts = std::move(options);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

StatusOr<int> Server::Start() {
  Impl& s = *impl_;
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the process
  s.start_time = static_cast<int64_t>(std::time(nullptr));
  auto http = HttpServer::Start(s.HttpOptions());
  if (!http.ok()) return http.status();
  s.http = std::move(http).value();
  s.load_thread = std::thread([&s] { s.Load(); });
  return s.http->port();
}

Status Server::WaitUntilLoaded() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.load_mu);
  s.load_cv.wait(lock, [&] { return s.phase.load() != Impl::kLoading; });
  return s.load_status;
}

void Server::Shutdown() {
  Impl& s = *impl_;
  std::call_once(s.shutdown_once, [&s] { s.DoShutdown(); });
}

void Server::CancelAll() { impl_->cancel_all.store(true); }

void Server::Impl::SetPhase(Phase p, Status st) {
  {
    std::lock_guard<std::mutex> lock(load_mu);
    load_status = std::move(st);
    phase.store(p, std::memory_order_release);
  }
  load_cv.notify_all();
}

// Chat prompts: the model's template (or --chat-template), with its vocabulary's turn markers.
void Server::Impl::LoadChatTemplate() {
  LoadedModel& l = loaded;
  const Model& model = *l.model;
  if (!opts.chat_template.empty()) {
    l.chat.emplace();
    l.chat->family = *ChatFamilyByName(opts.chat_template);
  } else if (auto jinja = model.gguf().GetString("tokenizer.chat_template")) {
    l.chat = DetectChatTemplate(*jinja);
    if (!l.chat) {
      l.chat_missing =
          "the model's chat template (tokenizer.chat_template) is not one goose recognises";
    }
  } else {
    l.chat_missing = "the model has no chat template (tokenizer.chat_template)";
  }
  if (l.chat) {  // the turn markers Llama-2 and Mistral prompts write, as this vocabulary has them
    const Tokenizer& tok = model.tokenizer();
    const std::string& bos = l.specials.TokenText(tok.bos());
    const std::string& eos = l.specials.TokenText(tok.eos());
    if (!bos.empty()) l.chat->bos_text = bos;
    if (!eos.empty()) l.chat->eos_text = eos;
  }
}

SessionOptions Server::Impl::SessionFor() const {
  SessionOptions so;
  so.model_path = opts.model_path;
  so.draft_model_path = opts.draft_model_path;
  so.n_threads = opts.n_threads;
  so.n_ctx = opts.n_ctx;
  so.kv_type = opts.kv_type;
  so.n_contexts = opts.n_parallel;
  so.memory_flags = "-c or --parallel";
  so.table_cache = opts.table_cache;
  so.cache_dir = opts.cache_dir;
  so.budget_auto = default_budget_auto;  // the curve is measured once per model and machine
  so.recalibrate = opts.recalibrate;
  so.cost_curve = opts.cost_curve;
  so.on_note = [](const std::string& line) { std::fprintf(stderr, "goose: %s\n", line.c_str()); };
  so.check_model = [this](const Model& model, SessionOptions* o) {
    // The largest batch is a prefill pass or a tree of at most 128 nodes.
    const int chunk = opts.prefill_chunk;
    o->n_batch = std::max(chunk > 0 ? chunk : ContextSize(model.config(), opts.n_ctx), 128);
    return opts.check_model ? opts.check_model(model) : Status::Ok();
  };
  return so;
}

void Server::Impl::Load() {
  LoadedModel& l = loaded;
  auto session = Session::Open(SessionFor());
  if (!session.ok()) return SetPhase(kFailed, session.status());
  l.session = std::move(session).value();
  Session& ss = *l.session;
  l.model = &ss.model();
  l.draft = ss.draft_model();
  l.specials = SpecialTokens::FromGguf(l.model->gguf());
  LoadChatTemplate();
  l.n_ctx = ss.n_ctx();
  l.cost = ss.cost_curve();
  l.loop = std::make_unique<ServingLoop>(ss, opts.n_parallel, opts.max_queue);
  // The default variant loads now, so that a corrupt cache is reported at start.
  (void)l.loop->engine(0).learned(default_spec);
  ss.NoteCacheWarnings();
  l.created = static_cast<int64_t>(std::time(nullptr));
  SetPhase(kReady, Status::Ok());
}

void Server::Impl::DoShutdown() {
  draining.store(true);
  // No new connections; idle ones close, the others after their current response.
  if (http) http->StopAccepting();
  if (load_thread.joinable()) load_thread.join();
  if (phase.load(std::memory_order_acquire) == kReady) {
    ServingLoop& slots = *loaded.loop;
    const auto grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(opts.shutdown_grace_seconds));
    if (!slots.WaitIdle(std::chrono::steady_clock::now() + grace)) {
      cancel_all.store(true);  // each generation stops within one forward pass
    }
    slots.Stop();
  }
  if (http) http->Stop();  // every handler returned, every response written
  // What the slots learned goes to the table cache, what their passes took to the cost cache.
  if (phase.load(std::memory_order_acquire) == kReady) loaded.session->Close();
}

bool Server::Impl::CheckReady(HttpExchange& ex, bool generation) {
  const int p = phase.load(std::memory_order_acquire);
  if (p == kLoading) {
    HttpResponse res;
    res.headers.push_back({"Retry-After", "1"});
    SendError(ex, Unavailable("the model is still loading; retry in a moment", "model_loading"),
              res);
    return false;
  }
  if (p == kFailed) {
    SendError(
        ex, Unavailable("the model failed to load: " + load_status.message(), "model_load_failed"));
    return false;
  }
  if (generation && draining.load()) {
    metrics.CountRejected("shutting_down");
    SendError(ex, Unavailable("the server is shutting down", "shutting_down"));
    return false;
  }
  return true;
}

void Server::Impl::SendError(HttpExchange& ex, const ApiError& e, HttpResponse res) {
  res.status = e.status;
  res.body = Dump(ErrorBody(e));
  ex.Respond(std::move(res));
}

void Server::Impl::SendJson(HttpExchange& ex, const json& j) {
  HttpResponse res;
  res.body = Dump(j);
  ex.Respond(std::move(res));
}

const std::vector<Server::Impl::Route>& Server::Impl::Routes() {
  static const std::vector<Route> routes = {
      {"GET", "/health", &Impl::HandleHealth},
      {"GET", "/v1/models", &Impl::HandleModels},
      {"GET", "/metrics", &Impl::HandleMetrics},
      {"POST", "/v1/completions", &Impl::HandleCompletion},
      {"POST", "/v1/chat/completions", &Impl::HandleChat},
      {"POST", "/tokenize", &Impl::HandleTokenize},
      {"POST", "/detokenize", &Impl::HandleDetokenize},
  };
  return routes;
}

namespace {

const Server::Impl::Route* FindRoute(const HttpRequest& req, bool* wrong_method) {
  *wrong_method = false;
  std::string_view method = req.method;
  if (method == "HEAD") method = "GET";  // GET's head
  for (const Server::Impl::Route& r : Server::Impl::Routes()) {
    if (req.path != r.path) continue;
    if (method == r.method) return &r;
    *wrong_method = true;
  }
  return nullptr;
}

}  // namespace

std::optional<HttpResponse> Server::Impl::CheckHead(const HttpRequest& head) const {
  bool wrong_method = false;
  const Route* route = FindRoute(head, &wrong_method);
  if (route == nullptr && !wrong_method) return ErrorResponse(NotFound());
  if (route == nullptr) {
    ApiError e;
    e.status = 405;
    e.message = "'" + EscapeForMessage(head.method, 32) + "' is not a method of " + head.path;
    HttpResponse res = ErrorResponse(e);
    for (const Route& r : Routes()) {
      if (head.path == r.path) res.headers.push_back({"Allow", r.method});
    }
    return res;
  }
  if (opts.api_key.empty() || head.path == "/health") return std::nullopt;
  const std::string* auth = head.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  const bool ok = auth && auth->size() >= kBearer.size() &&
                  auth->compare(0, kBearer.size(), kBearer) == 0 &&
                  ConstantTimeEquals(std::string_view(*auth).substr(kBearer.size()), opts.api_key);
  if (ok) return std::nullopt;
  ApiError e;
  e.status = 401;
  e.type = "authentication_error";
  e.code = "invalid_api_key";
  e.message = auth == nullptr || auth->empty()
                  ? "missing API key: send the header 'Authorization: Bearer KEY'"
                  : "invalid API key";
  return ErrorResponse(e);
}

void Server::Impl::Handle(HttpExchange& ex) {
  bool wrong_method = false;
  const Route* route = FindRoute(ex.request(), &wrong_method);
  if (route == nullptr) return SendError(ex, NotFound());  // CheckHead answered it already
  try {
    (this->*route->handle)(ex);
  } catch (const std::bad_alloc&) {
    SendError(ex, ServerError("out of memory"));
  } catch (const std::exception& e) {
    SendError(ex, ServerError(std::string("internal error: ") + e.what()));
  }
}

HttpServerOptions Server::Impl::HttpOptions() {
  HttpServerOptions h;
  h.host = opts.host;
  h.port = opts.port;
  h.n_workers = opts.n_http_threads;
  h.max_body_bytes = opts.max_body_bytes;
  h.timeout_seconds = opts.timeout_seconds;
  h.keep_alive_seconds = opts.keep_alive_seconds;
  h.max_connections = opts.max_connections;
  h.max_connections_per_client = opts.max_connections_per_client;
  h.handler = [this](std::shared_ptr<HttpExchange> ex) { Handle(*ex); };
  h.head_check = [this](const HttpRequest& head) { return CheckHead(head); };
  h.error_body = HttpErrorBody;
  h.on_response = [this](const std::string& path, int status) {
    metrics.CountResponse(path, status);
  };
  return h;
}

void Server::Impl::HandleHealth(HttpExchange& ex) {
  const int p = phase.load(std::memory_order_acquire);
  if (p == kReady) return SendJson(ex, {{"status", "ok"}});
  json body = {{"status", p == kLoading ? "loading model" : "error"}};
  if (p == kFailed) body["message"] = load_status.message();
  HttpResponse res;
  res.status = 503;
  res.body = Dump(body);
  ex.Respond(std::move(res));
}

void Server::Impl::HandleModels(HttpExchange& ex) {
  if (!CheckReady(ex, false)) return;
  const LlamaConfig& c = loaded.model->config();
  json model = {{"id", model_name},
                {"object", "model"},
                {"created", loaded.created},
                {"owned_by", "goose"},
                {"meta",
                 {{"n_vocab", c.n_vocab},
                  {"n_ctx_train", c.n_ctx_train},
                  {"n_ctx", loaded.n_ctx},
                  {"n_embd", c.n_embd},
                  {"n_layer", c.n_layer},
                  {"slots", opts.n_parallel},
                  {"spec", SpecVariantKey(default_spec)},
                  {"chat_template", loaded.chat ? ChatFamilyName(loaded.chat->family) : ""}}}};
  SendJson(ex, {{"object", "list"}, {"data", json::array({model})}});
}

void Server::Impl::HandleMetrics(HttpExchange& ex) {
  GaugeValues g;
  g.slots_total = opts.n_parallel;
  if (phase.load(std::memory_order_acquire) == kReady) {
    g.queue_length = loaded.loop->queued();
    g.slots_busy = loaded.loop->busy();
    g.passes = loaded.loop->counters();
  }
  HttpResponse res;
  res.content_type = "text/plain; version=0.0.4";
  res.body = metrics.Render(g);
  ex.Respond(std::move(res));
}

// A text beyond the context is refused as soon as that is certain (SpecialTokens::EncodeAtMost),
// as a prompt is: what /tokenize costs is bounded by the context too.
void Server::Impl::HandleTokenize(HttpExchange& ex) {
  if (!CheckReady(ex, false)) return;
  ApiOr<TokenizeRequest> r = ParseTokenizeRequest(ex.TakeBody());
  if (!r.ok()) return SendError(ex, r.error());
  const Tokenizer& tok = loaded.model->tokenizer();
  const TokenizeRequest& t = r.value();
  const size_t limit = static_cast<size_t>(loaded.n_ctx);
  const std::optional<std::vector<int32_t>> ids =
      t.parse_special ? loaded.specials.EncodeAtMost(tok, t.content, t.add_special, limit)
                      : tok.EncodeAtMost(t.content, t.add_special, limit);
  if (!ids) {
    ApiError e;
    e.param = "content";
    e.code = "context_length_exceeded";
    e.message = StrFormat(
        "the text is more than %zu tokens long; /tokenize answers up to the "
        "context size (%zu tokens): send it in parts",
        limit, limit);
    return SendError(ex, e);
  }
  json tokens = json::array();
  for (int32_t id : *ids) {
    if (!t.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    std::string piece = tok.TokenToPiece(id);
    if (piece.empty()) piece = loaded.specials.TokenText(id);  // control tokens: their text
    json p;
    if (IsValidUtf8(piece)) {
      p = piece;
    } else {  // llama-server's form for a piece that is not text: its bytes
      p = json::array();
      for (unsigned char c : piece) p.push_back(static_cast<int>(c));
    }
    tokens.push_back({{"id", id}, {"piece", p}});
  }
  SendJson(ex, {{"tokens", tokens}});
}

void Server::Impl::HandleDetokenize(HttpExchange& ex) {
  if (!CheckReady(ex, false)) return;
  ApiOr<DetokenizeRequest> r = ParseDetokenizeRequest(ex.TakeBody());
  if (!r.ok()) return SendError(ex, r.error());
  const Tokenizer& tok = loaded.model->tokenizer();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < r.value().tokens.size(); ++i) {
    const int64_t id = r.value().tokens[i];
    if (id < 0 || id >= tok.n_vocab()) {
      ApiError e;
      e.param = "tokens";
      e.message = StrFormat("'tokens[%zu]' = %lld is outside the vocabulary (0..%d)", i,
                            static_cast<long long>(id), tok.n_vocab() - 1);
      return SendError(ex, e);
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  SendJson(ex, {{"content", ToValidUtf8(tok.Decode(ids))}});
}

}  // namespace goose::server
