// The HTTP rules HttpServer applies to a head before reading its body (server/http_message.h),
// and the bytes of its response heads and chunks.
#include "server/http_message.h"

#include <gtest/gtest.h>

namespace goose::server {
namespace {

HttpRequest Head(std::string method, std::vector<std::pair<std::string, std::string>> headers,
                 int version = 11) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = r.path = "/v1/completions";
  r.headers = std::move(headers);
  r.version = version;
  return r;
}

int Refused(const HttpRequest& head) {
  const std::optional<HttpRefusal> r = CheckHead(head);
  return r ? r->status : 0;
}

TEST(HttpMessage, FramingThatCanBeReadTwoWaysIsRefused) {
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}})), 0);
  EXPECT_EQ(Refused(Head("POST", {{"transfer-encoding", "Chunked"}})), 0);
  EXPECT_EQ(Refused(Head("GET", {})), 0);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"content-length", "2"}})), 400);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2, 2"}})), 400);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Transfer-Encoding", "chunked"}})),
            400);
  EXPECT_EQ(
      Refused(Head("POST", {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}})),
      400);
  EXPECT_EQ(Refused(Head("POST", {{"Transfer-Encoding", "chunked"}}, 10)), 400);
  EXPECT_EQ(Refused(Head("POST", {{"Transfer-Encoding", "gzip, chunked"}})), 501);
  EXPECT_EQ(Refused(Head("POST", {{"Transfer-Encoding", "gzip"}})), 501);
  EXPECT_EQ(Refused(Head("POST", {})), 411);
  EXPECT_EQ(Refused(Head("PUT", {})), 411);
}

TEST(HttpMessage, EncodingsAndExpectations) {
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Content-Encoding", "identity"}})), 0);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Content-Encoding", "gzip"}})), 415);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Content-Encoding", "identity, br"}})),
            415);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Expect", "100-Continue"}})), 0);
  EXPECT_EQ(Refused(Head("POST", {{"Content-Length", "2"}, {"Expect", "teapot"}})), 417);
  EXPECT_TRUE(ExpectsContinue(Head("POST", {{"Expect", "100-continue"}})));
  EXPECT_FALSE(ExpectsContinue(Head("POST", {{"Expect", "100-continue"}}, 10)));
}

TEST(HttpMessage, QuotedValuesAreEscaped) {
  const std::optional<HttpRefusal> r =
      CheckHead(Head("POST", {{"Content-Length", "2"}, {"Content-Encoding", "x\x1b[31m\"y"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message.find('\x1b'), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("\\x1B[31m\\\"y"), std::string::npos) << r->message;
}

TEST(HttpMessage, KeepAliveFollowsTheVersion) {
  EXPECT_TRUE(KeepAlive(Head("GET", {})));
  EXPECT_FALSE(KeepAlive(Head("GET", {{"Connection", "Close"}})));
  EXPECT_FALSE(KeepAlive(Head("GET", {}, 10)));
  EXPECT_TRUE(KeepAlive(Head("GET", {{"Connection", "keep-alive"}}, 10)));
  EXPECT_TRUE(KeepAlive(Head("GET", {{"Connection", "TE, keep-alive"}}, 10)));
}

TEST(HttpMessage, ResponseHeadsAndChunks) {
  HttpResponse r;
  r.status = 503;
  r.headers = {{"Retry-After", "1\r\nSet-Cookie: x"}};
  EXPECT_EQ(ResponseHead(r, BodyFraming::kLength, 12, false),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Retry-After: 1Set-Cookie: x\r\nContent-Length: 12\r\nConnection: close\r\n\r\n");
  r.status = 200;
  r.headers.clear();
  r.content_type = "text/event-stream";
  EXPECT_EQ(
      ResponseHead(r, BodyFraming::kChunked, 0, true),
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(Chunk("hello, world!!!!"), "10\r\nhello, world!!!!\r\n");
  EXPECT_EQ(Chunk(""), "");
}

}  // namespace
}  // namespace goose::server
