#include "server/http_message.h"

#include <strings.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "util/escape.h"
#include "util/status.h"

namespace goose::server {

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated elements of every field named `name`, trimmed, empty ones left out.
std::vector<std::string_view> ListValues(const HttpRequest& head, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : head.headers) {
    if (!IEquals(n, name)) continue;
    std::string_view rest = v;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = Trim(rest.substr(0, comma));
      if (!item.empty()) out.push_back(item);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return out;
}

int CountFields(const HttpRequest& head, std::string_view name) {
  int n = 0;
  for (const auto& h : head.headers) n += IEquals(h.first, name);
  return n;
}

std::string Quoted(std::string_view value) { return "'" + EscapeForMessage(value, 64) + "'"; }

std::optional<HttpRefusal> CheckFraming(const HttpRequest& head) {
  const int n_length = CountFields(head, "Content-Length");
  const int n_transfer = CountFields(head, "Transfer-Encoding");
  if (n_length > 1 ||
      (n_length == 1 && head.Header("Content-Length")->find(',') != std::string::npos)) {
    return HttpRefusal{400,
                       "the request has more than one Content-Length; send exactly one "
                       "(RFC 9112 section 6.3)"};
  }
  if (n_transfer == 0) return std::nullopt;
  if (n_transfer > 1 || n_length > 0) {
    return HttpRefusal{400, n_length > 0 ? "the request has both Content-Length and "
                                           "Transfer-Encoding; send one (RFC 9112 section 6.3)"
                                         : "the request has more than one Transfer-Encoding "
                                           "field; send one: chunked"};
  }
  if (head.version < 11) {
    return HttpRefusal{400, "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 section 6.1)"};
  }
  const std::string& te = *head.Header("Transfer-Encoding");
  if (!IEquals(Trim(te), "chunked")) {
    return HttpRefusal{501, "Transfer-Encoding " + Quoted(te) +
                                " is not supported; goose reads chunked or Content-Length bodies"};
  }
  return std::nullopt;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (IEquals(n, name)) return &v;
  }
  return nullptr;
}

std::optional<HttpRefusal> CheckHead(const HttpRequest& head) {
  if (auto framing = CheckFraming(head)) return framing;
  for (std::string_view coding : ListValues(head, "Content-Encoding")) {
    if (!IEquals(coding, "identity")) {
      return HttpRefusal{415, "Content-Encoding " + Quoted(coding) +
                                  " is not supported: send the body uncompressed"};
    }
  }
  if (const std::string* expect = head.Header("Expect");
      expect && !IEquals(Trim(*expect), "100-continue")) {
    return HttpRefusal{417, "Expect " + Quoted(*expect) + " is not supported (only 100-continue)"};
  }
  const bool has_body_method =
      head.method == "POST" || head.method == "PUT" || head.method == "PATCH";
  if (has_body_method && CountFields(head, "Content-Length") == 0 &&
      CountFields(head, "Transfer-Encoding") == 0) {
    return HttpRefusal{
        411, "a " + head.method + " needs a Content-Length (or Transfer-Encoding: chunked)"};
  }
  return std::nullopt;
}

bool KeepAlive(const HttpRequest& head) {
  bool close = false, keep = false;
  for (std::string_view token : ListValues(head, "Connection")) {
    close |= IEquals(token, "close");
    keep |= IEquals(token, "keep-alive");
  }
  return head.version >= 11 ? !close : keep && !close;
}

bool ExpectsContinue(const HttpRequest& head) {
  const std::string* expect = head.Header("Expect");
  return head.version >= 11 && expect && IEquals(Trim(*expect), "100-continue");
}

const char* StatusReason(int status) {
  static const std::pair<int, const char*> kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {411, "Length Required"},
      {413, "Content Too Large"},
      {415, "Unsupported Media Type"},
      {417, "Expectation Failed"},
      {431, "Request Header Fields Too Large"},
      {499, "Client Closed Request"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
  };
  for (const auto& [code, reason] : kReasons) {
    if (code == status) return reason;
  }
  return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
}

std::string ResponseHead(const HttpResponse& r, BodyFraming framing, size_t length,
                         bool keep_alive) {
  auto clean = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c != '\r' && c != '\n') out += c;
    }
    return out;
  };
  std::string h = StrFormat("HTTP/1.1 %d %s\r\n", r.status, StatusReason(r.status));
  if (!r.content_type.empty()) h += "Content-Type: " + clean(r.content_type) + "\r\n";
  for (const auto& [name, value] : r.headers) h += clean(name) + ": " + clean(value) + "\r\n";
  switch (framing) {
    case BodyFraming::kLength:
      h += StrFormat("Content-Length: %zu\r\n", length);
      break;
    case BodyFraming::kChunked:
      h += "Transfer-Encoding: chunked\r\n";
      break;
    case BodyFraming::kUntilClose:
      break;
  }
  if (!keep_alive) h += "Connection: close\r\n";
  return h + "\r\n";
}

std::string Chunk(std::string_view data) {
  if (data.empty()) return "";
  std::string out = StrFormat("%zx\r\n", data.size());
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace goose::server
