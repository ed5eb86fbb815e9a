// HttpServer: goose serve's HTTP/1.1 transport, behind types of goose's own (the routes never see
// Boost.Beast or Asio, which only http_server.cc includes).
//
// Contract
// - Threads: one I/O thread serves every connection asynchronously, so an idle keep-alive
//   connection or a slow socket costs a few KB and no thread. A complete request goes to
//   `handler` on one of `n_workers` threads, which may block (waiting for a generation); what it
//   answers is written back by the I/O thread, in order, one request at a time per connection
//   (pipelined requests are answered in order; while one is handled, up to kMaxReadAhead bytes
//   of the next ones are read, then reading pauses).
// - Deadlines, per phase, never per byte: a request head must be complete within
//   `timeout_seconds` of its first byte (a new connection: of its accept), then its body within
//   `timeout_seconds` of the head (else 408 and close); one write may take `timeout_seconds`;
//   an idle kept-alive connection is closed after `keep_alive_seconds`.
// - Limits: a head over kMaxHeadBytes is 431; a body over max_body_bytes is 413 in every
//   framing (Content-Length: before any of it is read; chunked: as it arrives). A request with
//   neither has no body (RFC 9112); a POST without one is 411. Two Content-Length fields, more
//   than one Transfer-Encoding, both together, or chunked in HTTP/1.0: 400; a transfer coding
//   other than chunked: 501; a Content-Encoding other than identity: 415 (bodies are never
//   decoded). Range and conditional headers are ignored. After such an error the connection
//   closes (its bytes cannot be trusted to frame another request).
// - Connections: at most max_connections, at most max_connections_per_client from one address;
//   a connection beyond either gets 503 with Retry-After and is closed. The listen backlog is
//   the system's maximum (SOMAXCONN).
// - head_check runs on the I/O thread once a head has arrived, before its body is read; a
//   response it returns is sent instead of reading on (authentication, unknown routes). It must
//   not block.
// - Client gone: while a request is handled its connection keeps reading, so the end of the
//   client's stream (it closed its socket, or its sending side) or an error marks the exchange
//   gone and runs its OnClientGone callback once, on the I/O thread (it must not block). A
//   response to a gone client is dropped.
// - The layer's own errors get `error_body(status, message)` as an application/json body;
//   on_response(path, status) runs after each response is written or dropped.
// - StopAccepting() closes the listener and every connection without a request in flight; the
//   others close after their current response. Stop() then waits for every handler to return
//   and every response to be written (a write is bounded by its deadline), and ends the
//   threads. The destructor calls both.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace goose::server {

inline constexpr size_t kMaxHeadBytes = 32 << 10;
inline constexpr size_t kMaxReadAhead = 64 << 10;
// Bytes a streaming handler may have queued unsent before HttpExchange::Write waits.
inline constexpr size_t kMaxUnsentBytes = 256 << 10;

struct HttpRequest {
  std::string method;                                        // as sent ("GET", "POST", ...)
  std::string target;                                        // as sent ("/v1/models?x=1")
  std::string path;                                          // target up to '?'
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;
  std::string client;  // the peer's address
  int version = 11;    // 10 or 11

  // The first header named `name` (case-insensitive), or nullptr.
  const std::string* Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
  std::string body;
};

// One request being handled: answered once (Respond), or streamed (StartStream, Write..., End).
// Thread-safe; the handler keeps it as long as it needs. One dropped unanswered gets a 500 (a
// stream, its end).
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // The body, moved out (a handler that keeps running need not keep it): request().body is
  // empty after.
  virtual std::string TakeBody() = 0;
  virtual void Respond(HttpResponse response) = 0;
  // A response of unknown length (HTTP/1.1: chunked; 1.0: until the connection closes). Each
  // returns false once the client is gone; Write waits while kMaxUnsentBytes are unsent.
  virtual bool StartStream(HttpResponse head) = 0;
  virtual bool Write(std::string data) = 0;
  virtual void End() = 0;
  // Runs `fn` once when the client goes (at once if it already has).
  virtual void OnClientGone(std::function<void()> fn) = 0;
  virtual bool client_gone() const = 0;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int n_workers = 4;
  size_t max_body_bytes = 4u << 20;
  int timeout_seconds = 30;
  int keep_alive_seconds = 30;
  int max_connections = 1024;
  int max_connections_per_client = 256;
  std::function<void(std::shared_ptr<HttpExchange>)> handler;
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> head_check;  // may be null
  std::function<std::string(int status, const std::string& message)> error_body;
  std::function<void(const std::string& path, int status)> on_response;  // may be null
};

class HttpServer {
 public:
  // Binds host:port and starts the threads; the bound port is port().
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options);
  virtual ~HttpServer() = default;
  virtual int port() const = 0;
  virtual void StopAccepting() = 0;
  virtual void Stop() = 0;
};

}  // namespace goose::server
