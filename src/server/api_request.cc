#include "server/api_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "method/method.h"
#include "server/utf8.h"
#include "util/escape.h"
#include "util/status.h"

namespace goose::server {

namespace {

using nlohmann::json;

ApiError Invalid(std::string param, std::string message) {
  ApiError e;
  e.status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

ApiError Unsupported(const std::string& param, const std::string& why) {
  ApiError e = Invalid(param, "'" + param + "' " + why + " is not supported by goose");
  e.code = "unsupported_parameter";
  return e;
}

const char* TypeName(const json& v);

// A short rendering of a bad value for messages: one line of valid UTF-8 (JSON escapes the
// control characters but DEL, which gets its JSON escape here; the cut is at a character
// boundary). An array or an object is named, not dumped: its cost would be its size. A string
// is cut before it is escaped, so a 4 MB one costs what a 64-byte one does.
std::string Show(const json& v) {
  if (v.is_array() || v.is_object()) return TypeName(v);
  json shown = v;
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    size_t cut = std::min<size_t>(str.size(), 64);  // more than the 57 characters shown
    while (cut < str.size() && cut > 0 && (static_cast<unsigned char>(str[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    shown = str.substr(0, cut) + (cut < str.size() ? "...." : "");
  }
  std::string s;
  for (char c : shown.dump(-1, ' ', false, json::error_handler_t::replace)) {
    s += c == '\x7f' ? std::string("\\u007f") : std::string(1, c);
  }
  if (s.size() > 60) {
    size_t cut = 57;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unusual value";
  }
}

// The field, or nullptr when absent or null (clients send null for "not set").
const json* Field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> ReadBool(const json& obj, const char* key, bool* out) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    return Invalid(key, StrFormat("'%s' must be true or false, not %s", key, TypeName(*v)));
  }
  *out = v->get<bool>();
  return std::nullopt;
}

// An integer in [lo, hi]; a float with an integral value counts (JavaScript has no integers).
std::optional<ApiError> ReadInt(const json& obj, const char* key, int64_t lo, int64_t hi,
                                int64_t* out) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  auto range_error = [&] {
    return Invalid(
        key, StrFormat("'%s' must be an integer from %lld to %lld, got %s", key,
                       static_cast<long long>(lo), static_cast<long long>(hi), Show(*v).c_str()));
  };
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) return range_error();
    *out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) return range_error();
    *out = i;
    return std::nullopt;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) ||
        d > static_cast<double>(hi)) {
      return range_error();
    }
    *out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return Invalid(key, StrFormat("'%s' must be an integer, not %s", key, TypeName(*v)));
}

std::optional<ApiError> ReadFloat(const json& obj, const char* key, double lo, double hi,
                                  float* out) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    return Invalid(key, StrFormat("'%s' must be a number, not %s", key, TypeName(*v)));
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Invalid(key, StrFormat("'%s' must be a number from %g to %g, got %s", key, lo, hi,
                                  Show(*v).c_str()));
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

// Known OpenAI parameters goose cannot honour: an error unless they ask for the default.
std::optional<ApiError> CheckUnsupported(const json& obj, ApiKind kind) {
  for (const char* key : {"frequency_penalty", "presence_penalty"}) {
    const json* v = Field(obj, key);
    if (v && !(v->is_number() && v->get<double>() == 0.0)) {
      return Unsupported(key, "other than 0");
    }
  }
  if (const json* v = Field(obj, "logit_bias"); v && !(v->is_object() && v->empty())) {
    return Unsupported("logit_bias", "(a non-empty map)");
  }
  if (const json* v = Field(obj, "logprobs");
      v && !((v->is_boolean() && !v->get<bool>()) || (v->is_number() && v->get<double>() == 0))) {
    return Unsupported("logprobs", "(token log-probabilities)");
  }
  if (const json* v = Field(obj, "top_logprobs"); v && !(v->is_number() && v->get<double>() == 0)) {
    return Unsupported("top_logprobs", "(token log-probabilities)");
  }
  for (const char* key : {"tools", "functions"}) {
    if (const json* v = Field(obj, key); v && !(v->is_array() && v->empty())) {
      return Unsupported(key, "(tool calling)");
    }
  }
  if (const json* v = Field(obj, "best_of"); v && !(v->is_number() && v->get<double>() == 1)) {
    return Unsupported("best_of", "other than 1");
  }
  if (const json* v = Field(obj, "echo"); v && !(v->is_boolean() && !v->get<bool>())) {
    return Unsupported("echo", "(echoing the prompt)");
  }
  if (const json* v = Field(obj, "suffix");
      v && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
    return Unsupported("suffix", "(insertion)");
  }
  if (const json* v = Field(obj, "response_format"); v) {
    const bool text = v->is_object() && v->contains("type") && (*v)["type"] == "text";
    if (!text) return Unsupported("response_format", "other than {\"type\": \"text\"}");
  }
  (void)kind;
  return std::nullopt;
}

// Where the body's arrays and objects first nest deeper than `max_depth` (npos: nowhere). One
// pass over the bytes, strings skipped, nothing recursive: the parser and everything after it
// (the values' destructors, dumps into messages) then recurse at most max_depth levels.
size_t FirstTooDeep(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Parses the body as a JSON object; errors for invalid UTF-8, too deep nesting, invalid JSON,
// other types.
ApiOr<json> ParseObject(std::string_view body) {
  if (!IsValidUtf8(body)) {
    size_t at = 0;
    while (at < body.size() && ValidUtf8SequenceLength(body, at) > 0) {
      at += ValidUtf8SequenceLength(body, at);
    }
    return Invalid("", StrFormat("request body is not valid UTF-8 (byte %zu)", at));
  }
  if (const size_t at = FirstTooDeep(body, kMaxJsonDepth); at != std::string_view::npos) {
    return Invalid("", StrFormat("request body nests arrays and objects more than %d deep (byte "
                                 "%zu); goose's requests nest a few levels",
                                 kMaxJsonDepth, at));
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    // The parser quotes what it last read, which may end inside a character or hold a control
    // byte: escaped, the message stays one line of UTF-8.
    return Invalid("", "request body is not valid JSON: " + EscapeForMessage(e.what(), 240));
  }
  if (!j.is_object()) {
    return Invalid("", std::string("request body must be a JSON object, not ") + TypeName(j));
  }
  return j;
}

// The prompt's text is moved out of `obj` (a 4 MB prompt is not copied).
std::optional<ApiError> ReadPrompt(json& obj, CompletionRequest* r) {
  auto it = obj.find("prompt");
  json* p = it == obj.end() || it->is_null() ? nullptr : &*it;
  if (p == nullptr) return Invalid("prompt", "'prompt' is required (a string)");
  if (p->is_string()) {
    r->prompt = std::move(p->get_ref<std::string&>());
    return std::nullopt;
  }
  if (!p->is_array()) {
    return Invalid("prompt", StrFormat("'prompt' must be a string or an array of token ids, not %s",
                                       TypeName(*p)));
  }
  if (p->empty()) return Invalid("prompt", "'prompt' is an empty array");
  if (p->size() == 1 && (*p)[0].is_string()) {
    r->prompt = (*p)[0].get<std::string>();
    return std::nullopt;
  }
  if ((*p)[0].is_string() || (*p)[0].is_array()) {
    return Invalid("prompt",
                   "'prompt' holds several prompts; goose answers one prompt per request");
  }
  r->prompt_is_tokens = true;
  for (size_t i = 0; i < p->size(); ++i) {
    const json& t = (*p)[i];
    if (!t.is_number_integer() && !t.is_number_unsigned()) {
      return Invalid("prompt", StrFormat("'prompt[%zu]' must be a token id (an integer), not %s", i,
                                         TypeName(t)));
    }
    if (t.is_number_unsigned() ? t.get<uint64_t>() > INT32_MAX
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)) {
      return Invalid("prompt",
                     StrFormat("'prompt[%zu]' = %s is not a token id", i, Show(t).c_str()));
    }
    r->prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const json& obj, CompletionRequest* r) {
  const json* m = Field(obj, "messages");
  if (m == nullptr) return Invalid("messages", "'messages' is required (an array of messages)");
  if (!m->is_array()) {
    return Invalid("messages", StrFormat("'messages' must be an array, not %s", TypeName(*m)));
  }
  if (m->empty()) {
    return Invalid("messages", "'messages' is empty: a chat needs at least one message");
  }
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = StrFormat("messages[%zu]", i);
    if (!msg.is_object()) {
      return Invalid("messages",
                     where + " must be an object {role, content}, not " + TypeName(msg));
    }
    const json* role = Field(msg, "role");
    if (role == nullptr || !role->is_string()) {
      return Invalid("messages", where + ".role is required (system, user or assistant)");
    }
    ChatMessage out;
    out.role = role->get<std::string>();
    if (out.role == "tool" || out.role == "function") {
      return Unsupported("messages", "with role '" + out.role + "' (tool calling)");
    }
    if (out.role != "system" && out.role != "user" && out.role != "assistant" &&
        out.role != "developer") {
      return Invalid("messages", where + ".role is " + Show(*role) +
                                     "; the roles are system, user, assistant (and developer)");
    }
    if (Field(msg, "tool_calls") != nullptr) {
      return Unsupported("messages", "with tool_calls (tool calling)");
    }
    const json* content = Field(msg, "content");
    if (content == nullptr) {
      if (out.role != "assistant") return Invalid("messages", where + ".content is required");
    } else if (content->is_string()) {
      out.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const json* type = part.is_object() ? Field(part, "type") : nullptr;
        const json* text = part.is_object() ? Field(part, "text") : nullptr;
        if (type == nullptr || *type != "text" || text == nullptr || !text->is_string()) {
          return Invalid("messages", StrFormat("%s.content[%zu] must be {\"type\": \"text\", "
                                               "\"text\": \"...\"} (goose reads text only)",
                                               where.c_str(), k));
        }
        out.content += text->get<std::string>();
      }
    } else {
      return Invalid(
          "messages",
          where + ".content must be a string or an array of text parts, not " + TypeName(*content));
    }
    r->messages.push_back(std::move(out));
  }
  return std::nullopt;
}

// OpenAI's Predicted Outputs: {"type": "content", "content": "..." or [{"type": "text", ...}]}.
std::optional<ApiError> ReadPrediction(json& obj, CompletionRequest* r) {
  const auto p = obj.find("prediction");
  if (p == obj.end() || p->is_null()) return std::nullopt;
  const char* shape = "{\"type\": \"content\", \"content\": a string or an array of text parts}";
  if (!p->is_object()) {
    return Invalid("prediction", StrFormat("'prediction' must be %s, not %s", shape, TypeName(*p)));
  }
  const json* type = Field(*p, "type");
  if (type == nullptr || *type != "content") {
    return Invalid("prediction", StrFormat("prediction.type must be \"content\"%s",
                                           type ? (", not " + Show(*type)).c_str() : ""));
  }
  const auto c = p->find("content");
  if (c == p->end())
    return Invalid("prediction", std::string("prediction.content is required: ") + shape);
  if (c->is_string()) {
    r->prediction = std::move(c->get_ref<std::string&>());  // not copied
    return std::nullopt;
  }
  if (!c->is_array()) {
    return Invalid("prediction", StrFormat("prediction.content must be a string or an array of "
                                           "text parts, not %s",
                                           TypeName(*c)));
  }
  std::string text;
  for (size_t k = 0; k < c->size(); ++k) {
    const json& part = (*c)[k];
    const json* t = part.is_object() ? Field(part, "type") : nullptr;
    const json* s = part.is_object() ? Field(part, "text") : nullptr;
    if (t == nullptr || *t != "text" || s == nullptr || !s->is_string()) {
      return Invalid("prediction", StrFormat("prediction.content[%zu] must be {\"type\": "
                                             "\"text\", \"text\": \"...\"}",
                                             k));
    }
    text += s->get<std::string>();
  }
  r->prediction = std::move(text);
  return std::nullopt;
}

std::optional<ApiError> ReadStop(const json& obj, CompletionRequest* r) {
  const json* s = Field(obj, "stop");
  if (s == nullptr) return std::nullopt;
  std::vector<std::string> all;
  if (s->is_string()) {
    all.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    for (const json& e : *s) {
      if (!e.is_string()) {
        return Invalid("stop", std::string("'stop' must be a string or an array of strings; it "
                                           "holds ") +
                                   TypeName(e));
      }
      all.push_back(e.get<std::string>());
    }
  } else {
    return Invalid(
        "stop", std::string("'stop' must be a string or an array of strings, not ") + TypeName(*s));
  }
  for (std::string& str : all) {
    if (str.empty()) continue;  // matches everywhere: clients mean "no stop string"
    if (str.size() > kMaxStopBytes) {
      return Invalid("stop", StrFormat("a stop string is %zu bytes long; the limit is %zu",
                                       str.size(), kMaxStopBytes));
    }
    r->stop.push_back(std::move(str));
  }
  if (static_cast<int>(r->stop.size()) > kMaxStopStrings) {
    return Invalid("stop", StrFormat("'stop' holds %zu strings; the limit is %d", r->stop.size(),
                                     kMaxStopStrings));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadGooseExtension(const json& obj, CompletionRequest* r) {
  const json* g = Field(obj, "goose");
  if (g == nullptr) return std::nullopt;
  if (!g->is_object()) {
    return Invalid("goose", std::string("'goose' must be an object {\"spec\", \"budget\"}, not ") +
                                TypeName(*g));
  }
  for (const auto& [key, value] : g->items()) {
    if (key != "spec" && key != "budget") {
      return Invalid("goose", "unknown field 'goose." + Show(json(key)) +
                                  "' (the fields are spec and budget)");
    }
  }
  if (const json* spec = Field(*g, "spec")) {
    if (!spec->is_string()) {
      return Invalid("goose.spec", std::string("'goose.spec' must be a method name (") +
                                       MethodNames() + "), not " + TypeName(*spec));
    }
    SpecParams parsed;
    if (Status st = ParseSpecVariant(spec->get<std::string>(), &parsed); !st.ok()) {
      return Invalid("goose.spec", "'goose.spec': " + st.message());
    }
    r->spec = spec->get<std::string>();
  }
  if (const json* b = Field(*g, "budget")) {
    if (b->is_string() && *b == "auto") {
      r->budget_auto = true;
    } else {
      int64_t v = 0;
      if (auto e = ReadInt(*g, "budget", 0, kMaxBudget, &v)) {
        e->param = "goose.budget";
        e->message = StrFormat("'goose.budget' must be an integer from 0 to %d or \"auto\", got %s",
                               kMaxBudget, Show(*b).c_str());
        return e;
      }
      r->budget = static_cast<int>(v);
    }
  }
  return std::nullopt;
}

}  // namespace

ApiOr<CompletionRequest> ParseCompletionRequest(std::string_view body, ApiKind kind) {
  ApiOr<json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.error();
  json& j = parsed.value();  // the prompt's text is moved out
  CompletionRequest r;
  r.kind = kind;
  if (auto e = CheckUnsupported(j, kind)) return *e;
  if (auto e = kind == ApiKind::kChat ? ReadMessages(j, &r) : ReadPrompt(j, &r)) return *e;

  int64_t n = 1;
  if (auto e = ReadInt(j, "n", 1, 1, &n)) {
    e->message =
        "'n' must be 1: goose answers one choice per request (got " + Show(j.at("n")) + ")";
    return *e;
  }
  int64_t max_tokens = -1;
  if (auto e = ReadInt(j, "max_tokens", 0, kMaxTokensLimit, &max_tokens)) return *e;
  if (auto e = ReadInt(j, "max_completion_tokens", 0, kMaxTokensLimit, &max_tokens)) return *e;
  r.max_tokens = static_cast<int>(max_tokens);
  if (auto e = ReadFloat(j, "temperature", 0.0, kMaxTemperature, &r.temperature)) return *e;
  if (auto e = ReadFloat(j, "top_p", 0.0, 1.0, &r.top_p)) return *e;
  int64_t top_k = r.top_k;
  if (auto e = ReadInt(j, "top_k", 0, 1 << 24, &top_k)) return *e;
  r.top_k = static_cast<int>(top_k);
  if (const json* s = Field(j, "seed")) {
    if (s->is_number_unsigned()) {
      r.seed = s->get<uint64_t>();
    } else if (s->is_number_integer()) {
      r.seed = static_cast<uint64_t>(s->get<int64_t>());
    } else {
      int64_t v = 0;
      if (auto e = ReadInt(j, "seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), &v)) {
        return *e;
      }
      r.seed = static_cast<uint64_t>(v);
    }
  }
  if (auto e = ReadStop(j, &r)) return *e;
  if (auto e = ReadPrediction(j, &r)) return *e;
  if (auto e = ReadBool(j, "stream", &r.stream)) return *e;
  if (const json* so = Field(j, "stream_options")) {
    if (!so->is_object()) {
      return Invalid("stream_options",
                     std::string("'stream_options' must be an object, not ") + TypeName(*so));
    }
    if (auto e = ReadBool(*so, "include_usage", &r.include_usage)) {
      e->param = "stream_options.include_usage";
      return *e;
    }
  }
  if (const json* m = Field(j, "model"); m && m->is_string()) r.model = m->get<std::string>();
  if (auto e = ReadGooseExtension(j, &r)) return *e;
  return r;
}

ApiOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body) {
  ApiOr<json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.error();
  json& j = parsed.value();  // the content is moved out
  TokenizeRequest r;
  auto c = j.find("content");
  if (c == j.end() || !c->is_string()) {
    return Invalid("content",
                   std::string("'content' is required (the text to tokenize)") +
                       (c != j.end() && !c->is_null() ? std::string(", not ") + TypeName(*c) : ""));
  }
  r.content = std::move(c->get_ref<std::string&>());  // not copied
  if (auto e = ReadBool(j, "add_special", &r.add_special)) return *e;
  if (auto e = ReadBool(j, "parse_special", &r.parse_special)) return *e;
  if (auto e = ReadBool(j, "with_pieces", &r.with_pieces)) return *e;
  return r;
}

ApiOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body) {
  ApiOr<json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  const json* t = Field(j, "tokens");
  if (t == nullptr || !t->is_array()) {
    return Invalid("tokens", std::string("'tokens' is required (an array of token ids)") +
                                 (t ? std::string(", not ") + TypeName(*t) : ""));
  }
  DetokenizeRequest r;
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (v.is_number_unsigned() && v.get<uint64_t>() <= INT32_MAX) {
      r.tokens.push_back(static_cast<int64_t>(v.get<uint64_t>()));
    } else if (v.is_number_integer()) {
      r.tokens.push_back(v.get<int64_t>());
    } else {
      return Invalid("tokens", StrFormat("'tokens[%zu]' must be a token id (an integer), not %s", i,
                                         TypeName(v)));
    }
  }
  return r;
}

}  // namespace goose::server
