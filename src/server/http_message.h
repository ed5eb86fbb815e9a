// HTTP/1.1 message rules of HttpServer that need no socket (internal header; pure functions, so
// the tests check them directly): which request heads are refused before their body, whether a
// connection stays open, and the bytes of a response head and of a chunk.
//
// Contract
// - CheckHead(head): the refusal a head gets before its body is read, or nullopt. In order:
//   more than one Content-Length field, or one that lists values (400); more than one
//   Transfer-Encoding field, one beside Content-Length, or one in HTTP/1.0 (400); a transfer
//   coding other than chunked (501); a Content-Encoding other than identity (415); an Expect
//   other than 100-continue (417); a POST, PUT or PATCH with neither Content-Length nor
//   Transfer-Encoding (411). Messages quote header values escaped (EscapeForMessage).
// - KeepAlive(head): HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "keep-alive".
// - ResponseHead(r, framing, keep_alive): "HTTP/1.1 <status> <reason>", Content-Type, r.headers
//   (CR and LF removed from names and values), the framing header (Content-Length: n,
//   Transfer-Encoding: chunked, or none: the body ends when the connection closes), and
//   "Connection: close" unless keep_alive.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_server.h"

namespace goose::server {

struct HttpRefusal {
  int status = 400;
  std::string message;
};

std::optional<HttpRefusal> CheckHead(const HttpRequest& head);
bool KeepAlive(const HttpRequest& head);
bool ExpectsContinue(const HttpRequest& head);

const char* StatusReason(int status);

enum class BodyFraming { kLength, kChunked, kUntilClose };
std::string ResponseHead(const HttpResponse& r, BodyFraming framing, size_t length,
                         bool keep_alive);
// One chunk of a chunked body ("" gives nothing: an empty chunk would end the body).
std::string Chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace goose::server
