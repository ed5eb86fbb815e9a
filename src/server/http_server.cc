// HttpServer on Boost.Asio, with Boost.Beast's request parser (the only file that includes
// either: they compile slowly). One I/O thread runs the acceptor and every connection, so a
// connection's state needs no lock; worker threads run the handlers and post back to it.
//
// A connection reads in one loop all its life. Its phase says what the bytes are for:
//   kIdle (kept alive, no request yet) -> kHead -> kBody -> kHandling (a handler has the
//   request; what arrives now is the next pipelined request, or the end of the stream, which
//   tells that the client went) -> kIdle or kHead again, or kFinal (an error answer goes out,
//   then close) -> kClosing (our side shut, the rest of the client's bytes read and dropped for
//   at most kLingerSeconds, so that closing does not reset the connection before the client
//   has read our answer).
#include "server/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "server/http_message.h"

namespace goose::server {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kReadChunk = 64 << 10;
constexpr int kLingerSeconds = 1;
// Reading (and dropping) what a refused client still sends costs no memory, only the second it
// may last: enough to let a client that writes a whole oversized body first (curl, httplib: a
// 10 MB body against the 4 MB limit) read its 413 instead of a reset.
constexpr size_t kLingerBytes = 64u << 20;

class ServerImpl;

// Runs the handlers. The queue holds at most one request per connection.
class WorkerPool {
 public:
  explicit WorkerPool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkerPool() { Stop(); }
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  void Stop() {  // runs what is queued, then joins
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// What a connection and the exchange handed to a handler share.
struct ExchangeState {
  std::mutex mu;
  std::condition_variable cv;  // unsent went down, or the client went
  size_t unsent = 0;           // stream bytes Write queued that are not written yet
  bool gone = false;
  std::function<void()> on_gone;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerImpl& server, tcp::socket socket, std::string client);
  void Start();
  void Refuse(int status, const std::string& message);  // over a connection cap
  // From the exchange, on the I/O thread.
  void SendResponse(HttpResponse r);
  void SendStreamHead(HttpResponse head);
  void SendStreamData(std::string data);
  void SendStreamEnd(bool complete);
  void SendHandlerError(const std::string& message);
  void Drain();  // StopAccepting: close if idle, else after this response
  void CloseNow();
  asio::any_io_executor executor() { return socket_.get_executor(); }

 private:
  enum class Phase { kIdle, kHead, kBody, kHandling, kFinal, kClosing };
  struct Out {
    std::string bytes;
    size_t stream_bytes = 0;  // of a Write, counted in ExchangeState::unsent
  };

  void DoRead();
  void OnReadable(const error_code& ec);
  void OnRead(const error_code& ec, size_t n);
  void OnReadEnd(const error_code& ec);
  void Parse();
  bool OnHead();
  void Dispatch();
  void Fail(int status, const std::string& message);
  void FailParse(const error_code& ec);
  void Queue(std::string bytes, size_t stream_bytes = 0);
  void WriteNext();
  void OnWrite(const error_code& ec);
  void OnResponseWritten();
  void FinishExchange();
  void MarkGone();
  void Linger();
  void NextRequest();
  void ArmRead(int seconds);
  void DisarmRead();
  void OnReadDeadline();

  ServerImpl& server_;
  tcp::socket socket_;
  asio::steady_timer read_timer_, write_timer_;
  uint64_t read_gen_ = 0, write_gen_ = 0;  // a timer's expiry counts only for its own arming
  const std::string client_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::kHead;
  bool got_bytes_ = false;  // some of the current request's head has arrived
  bool reading_ = false, read_ended_ = false, writing_ = false, closed_ = false;
  bool close_after_ = false;  // close once the current response is written
  size_t lingered_ = 0;
  std::deque<Out> out_;
  std::vector<Out> writing_batch_;
  // The request being read, then (its body and headers handed over) the one in flight.
  HttpRequest request_;
  std::shared_ptr<ExchangeState> state_;
  bool response_done_ = false;  // the handler's last word arrived
  bool chunked_ = false;        // the stream being written is chunked
  int status_ = 0;
};

// The handler's side of one request.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Connection> conn, std::shared_ptr<ExchangeState> state,
           HttpRequest request)
      : conn_(std::move(conn)), state_(std::move(state)), request_(std::move(request)) {}
  ~Exchange() override {
    if (finished_) return;
    if (started_) {
      Post([](Connection& c) { c.SendStreamEnd(false); });
    } else {
      Post([](Connection& c) { c.SendHandlerError("the request's handler gave no answer"); });
    }
  }
  const HttpRequest& request() const override { return request_; }
  std::string TakeBody() override { return std::move(request_.body); }
  void Respond(HttpResponse r) override {
    if (finished_ || started_) return;
    finished_ = true;
    Post([r = std::move(r)](Connection& c) mutable { c.SendResponse(std::move(r)); });
  }
  bool StartStream(HttpResponse head) override {
    if (finished_ || started_) return false;
    started_ = true;
    Post([head = std::move(head)](Connection& c) mutable { c.SendStreamHead(std::move(head)); });
    return !client_gone();
  }
  bool Write(std::string data) override {
    if (!started_ || finished_) return false;
    std::unique_lock<std::mutex> lock(state_->mu);
    if (state_->gone) return false;
    state_->unsent += data.size();
    lock.unlock();
    Post([d = std::move(data)](Connection& c) mutable { c.SendStreamData(std::move(d)); });
    lock.lock();
    state_->cv.wait(lock, [&] { return state_->gone || state_->unsent <= kMaxUnsentBytes; });
    return !state_->gone;
  }
  void End() override {
    if (!started_ || finished_) return;
    finished_ = true;
    Post([](Connection& c) { c.SendStreamEnd(true); });
  }
  void OnClientGone(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (!state_->gone) {
      state_->on_gone = std::move(fn);
      return;
    }
    lock.unlock();
    fn();
  }
  bool client_gone() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->gone;
  }

 private:
  template <typename F>
  void Post(F f) {
    asio::post(conn_->executor(), [c = conn_, f = std::move(f)]() mutable { f(*c); });
  }
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<ExchangeState> state_;
  HttpRequest request_;
  bool started_ = false, finished_ = false;  // the handler's thread only
};

class ServerImpl final : public HttpServer {
 public:
  explicit ServerImpl(HttpServerOptions o)
      : opts_(std::move(o)),
        workers_(opts_.n_workers),
        work_(asio::make_work_guard(io_)),
        acceptor_(io_),
        retry_(io_) {}
  ~ServerImpl() override { Stop(); }

  Status Listen();
  void Run() {
    io_thread_ = std::thread([this] { io_.run(); });
  }
  int port() const override { return port_; }
  void StopAccepting() override;
  void Stop() override;

  const HttpServerOptions& opts() const { return opts_; }
  bool draining() const { return draining_; }  // the I/O thread only
  std::string ErrorResponse(int status, const std::string& message, bool keep_alive) const;
  void Dispatch(std::shared_ptr<Exchange> ex);
  void Unregister(Connection* c, const std::string& client);
  void BeginExchange();
  void EndExchange(const std::string& path, int status);
  void Count(const std::string& path, int status) {
    if (opts_.on_response) opts_.on_response(path, status);
  }

 private:
  void DoAccept();
  void OnAccept(const error_code& ec, tcp::socket socket);
  // Runs fn on the I/O thread and waits for it.
  void RunOnIo(std::function<void()> fn);
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

  const HttpServerOptions opts_;
  WorkerPool workers_;
  asio::io_context io_;
  // Keeps io_.run() going while no socket waits (after StopAccepting: RunOnIo still runs).
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;  // accept again after running out of descriptors
  std::thread io_thread_;
  int port_ = 0;
  bool draining_ = false;
  bool stopped_ = false;
  std::mutex mu_;  // what follows
  std::condition_variable idle_cv_;
  std::map<Connection*, std::weak_ptr<Connection>> connections_;
  std::map<std::string, int> per_client_;
  int in_flight_ = 0;  // exchanges whose handler or response is not done
};

// ---------------------------------------------------------------------------------------------
// Connection

Connection::Connection(ServerImpl& server, tcp::socket socket, std::string client)
    : server_(server),
      socket_(std::move(socket)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      client_(std::move(client)) {}

void Connection::Start() {
  error_code ignored;
  socket_.non_blocking(true, ignored);
  ArmRead(server_.opts().timeout_seconds);  // the first head's deadline runs from the accept
  DoRead();
}

void Connection::Refuse(int status, const std::string& message) {
  phase_ = Phase::kFinal;
  error_code ignored;
  socket_.non_blocking(true, ignored);
  HttpResponse r;
  r.status = status;
  r.headers.push_back({"Retry-After", "1"});
  r.body = server_.opts().error_body(status, message);
  Queue(ResponseHead(r, BodyFraming::kLength, r.body.size(), false) + r.body);
  server_.Count("", status);
  DoRead();
}

void Connection::ArmRead(int seconds) {
  const uint64_t gen = ++read_gen_;
  read_timer_.expires_after(std::chrono::seconds(seconds));
  read_timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (!ec && gen == self->read_gen_) self->OnReadDeadline();
  });
}

void Connection::DisarmRead() {
  ++read_gen_;
  read_timer_.cancel();
}

void Connection::OnReadDeadline() {
  const int t = server_.opts().timeout_seconds;
  switch (phase_) {
    case Phase::kHead:
      if (got_bytes_) return Fail(408, StrFormat("the request head did not arrive within %d s", t));
      return CloseNow();
    case Phase::kBody:
      return Fail(408, StrFormat("the request body did not arrive within %d s", t));
    case Phase::kHandling:
    case Phase::kFinal:
      return;  // no read deadline there
    case Phase::kIdle:
    case Phase::kClosing:
      return CloseNow();
  }
}

void Connection::DoRead() {
  if (reading_ || read_ended_ || closed_) return;
  // While a request is handled the reads only watch for the end of the stream and keep what
  // the client pipelined; beyond kMaxReadAhead they wait for the response.
  if (phase_ == Phase::kHandling && buffer_.size() >= kMaxReadAhead) return;
  // Wait for bytes without a buffer, then read what is there: a waiting connection holds no
  // buffer (an idle one's is freed).
  reading_ = true;
  socket_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this()](const error_code& ec) { self->OnReadable(ec); });
}

void Connection::OnReadable(const error_code& ec) {
  reading_ = false;
  if (closed_) return;
  if (ec) return OnReadEnd(ec);
  // As much as has arrived (at most kReadChunk): a socket that sends a byte at a time grows its
  // buffer a byte at a time.
  error_code read_ec;
  const size_t ready = std::clamp<size_t>(socket_.available(read_ec), 1, kReadChunk);
  const size_t n = socket_.read_some(buffer_.prepare(ready), read_ec);
  if (read_ec == asio::error::would_block || read_ec == asio::error::try_again) return DoRead();
  OnRead(read_ec, n);
}

void Connection::OnRead(const error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) return OnReadEnd(ec);
  buffer_.commit(n);
  switch (phase_) {
    case Phase::kFinal:
    case Phase::kClosing:  // what follows a refused request is dropped
      lingered_ += buffer_.size();
      buffer_.clear();
      if (lingered_ > kLingerBytes) return CloseNow();
      break;
    case Phase::kIdle:
      phase_ = Phase::kHead;
      ArmRead(server_.opts().timeout_seconds);
      [[fallthrough]];
    case Phase::kHead:
    case Phase::kBody:
      got_bytes_ = true;
      Parse();
      break;
    case Phase::kHandling:
      break;  // the next request, parsed once this one is answered
  }
  DoRead();
}

void Connection::OnReadEnd(const error_code& ec) {
  read_ended_ = true;
  const bool eof = ec == asio::error::eof;
  if (phase_ == Phase::kHandling) {
    MarkGone();  // the client closed its socket, or its sending side: either way it left
    if (!eof) CloseNow();
    return;  // on EOF the answer is still written, for a client that only half-closed
  }
  if (phase_ == Phase::kFinal && eof) return;  // the refusal goes out, then the close
  CloseNow();
}

void Connection::Parse() {
  while (phase_ == Phase::kHead || phase_ == Phase::kBody) {
    if (!parser_) {
      request_ = HttpRequest();
      parser_.emplace();
      parser_->header_limit(static_cast<std::uint32_t>(kMaxHeadBytes));
      parser_->body_limit(server_.opts().max_body_bytes);
    }
    if (buffer_.size() == 0) return;
    error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      // A chunk-size line or a trailer the parser waits to see whole: bounded like a head.
      if (buffer_.size() > kMaxHeadBytes) {
        return Fail(400, "a chunk header or trailer of the request body is too long");
      }
      return;
    }
    if (ec) return FailParse(ec);
    if (phase_ == Phase::kHead && parser_->is_header_done() && !OnHead()) return;
    if (parser_->is_done()) return Dispatch();
    if (used == 0) return;
  }
}

// The head has arrived: refuse it, answer it early (head_check), or read its body.
bool Connection::OnHead() {
  const auto& msg = parser_->get();
  request_ = HttpRequest();
  request_.method.assign(msg.method_string().data(), msg.method_string().size());
  request_.target.assign(msg.target().data(), msg.target().size());
  request_.path = request_.target.substr(0, request_.target.find('?'));
  request_.version = msg.version() >= 11 ? 11 : 10;
  request_.client = client_;
  for (const auto& f : msg) {
    request_.headers.emplace_back(std::string(f.name_string().data(), f.name_string().size()),
                                  std::string(f.value().data(), f.value().size()));
  }
  if (std::optional<HttpRefusal> refusal = CheckHead(request_)) {
    Fail(refusal->status, refusal->message);
    return false;
  }
  if (server_.opts().head_check) {
    if (std::optional<HttpResponse> early = server_.opts().head_check(request_)) {
      phase_ = Phase::kFinal;  // the body, if any, is not read: the connection cannot go on
      DisarmRead();
      server_.Count(request_.path, early->status);
      Queue(ResponseHead(*early, BodyFraming::kLength, early->body.size(), false) + early->body);
      return false;
    }
  }
  if (!parser_->is_done()) {
    phase_ = Phase::kBody;
    ArmRead(server_.opts().timeout_seconds);  // the body's own deadline
    if (ExpectsContinue(request_)) Queue(std::string(kContinue));
  }
  parser_->eager(true);
  return true;
}

void Connection::Dispatch() {
  DisarmRead();
  request_.body = std::move(parser_->get().body());
  parser_.reset();
  phase_ = Phase::kHandling;
  got_bytes_ = false;
  response_done_ = false;
  chunked_ = false;
  status_ = 0;
  close_after_ = close_after_ || !KeepAlive(request_) || server_.draining();
  state_ = std::make_shared<ExchangeState>();
  state_->gone = read_ended_;  // pipelined before the client closed its sending side
  server_.BeginExchange();
  HttpRequest handed;  // what the connection still needs of it stays: method, path, version
  handed.method = request_.method;
  handed.path = request_.path;
  handed.version = request_.version;
  std::swap(handed, request_);
  if (buffer_.size() == 0) buffer_.shrink_to_fit();  // one waiting for its answer holds none
  server_.Dispatch(std::make_shared<Exchange>(shared_from_this(), state_, std::move(handed)));
}

void Connection::FailParse(const error_code& ec) {
  const size_t max_body = server_.opts().max_body_bytes;
  if (ec == http::error::header_limit) {
    return Fail(431, StrFormat("the request head is larger than %zu bytes", kMaxHeadBytes));
  }
  if (ec == http::error::body_limit) {
    return Fail(413,
                StrFormat("request body is larger than the server's limit of %zu bytes", max_body));
  }
  if (ec == http::error::bad_content_length) {
    return Fail(400,
                "the request's Content-Length is not a number, or it has several that "
                "disagree (RFC 9112 section 6.3)");
  }
  if (ec == http::error::bad_transfer_encoding) {
    return Fail(400,
                "the request's Transfer-Encoding conflicts with its other framing (chunked "
                "twice, or beside Content-Length)");
  }
  if (ec == http::error::bad_chunk || ec == http::error::bad_chunk_extension) {
    return Fail(400, "the request's chunked body is malformed");
  }
  return Fail(400, "malformed HTTP request (" + ec.message() + ")");
}

// An error answer of the layer itself; the connection then closes.
void Connection::Fail(int status, const std::string& message) {
  phase_ = Phase::kFinal;
  parser_.reset();
  DisarmRead();
  HttpResponse r;
  r.status = status;
  r.body = server_.opts().error_body(status, message);
  server_.Count(request_.path, status);
  Queue(ResponseHead(r, BodyFraming::kLength, r.body.size(), false) + r.body);
}

void Connection::SendResponse(HttpResponse r) {
  response_done_ = true;
  status_ = r.status;
  if (closed_) return FinishExchange();
  const bool keep = !close_after_ && !server_.draining();
  close_after_ = !keep;
  if (keep && request_.version < 11) r.headers.push_back({"Connection", "keep-alive"});
  std::string bytes = ResponseHead(r, BodyFraming::kLength, r.body.size(), keep);
  if (request_.method != "HEAD") bytes += r.body;
  Queue(std::move(bytes));
}

void Connection::SendHandlerError(const std::string& message) {
  HttpResponse r;
  r.status = 500;
  r.body = server_.opts().error_body(500, message);
  SendResponse(std::move(r));
}

void Connection::SendStreamHead(HttpResponse head) {
  status_ = head.status;
  if (closed_) return;
  chunked_ = request_.version >= 11;
  if (!chunked_) close_after_ = true;  // HTTP/1.0: the body ends with the connection
  const bool keep = !close_after_ && !server_.draining();
  close_after_ = !keep;
  Queue(ResponseHead(head, chunked_ ? BodyFraming::kChunked : BodyFraming::kUntilClose, 0, keep));
}

void Connection::SendStreamData(std::string data) {
  if (closed_) return;  // the writer saw `gone` already, or will
  const size_t n = data.size();
  Queue(chunked_ ? Chunk(data) : std::move(data), n);
}

void Connection::SendStreamEnd(bool complete) {
  response_done_ = true;
  if (closed_) return FinishExchange();
  if (!complete) close_after_ = true;  // an unfinished stream must not look finished
  if (complete && chunked_) return Queue(std::string(kLastChunk));
  if (!writing_ && out_.empty()) OnResponseWritten();
}

void Connection::Queue(std::string bytes, size_t stream_bytes) {
  out_.push_back({std::move(bytes), stream_bytes});
  if (!writing_) WriteNext();
}

void Connection::WriteNext() {
  if (closed_) return;
  if (out_.empty()) {
    ++write_gen_;
    write_timer_.cancel();
    if (phase_ == Phase::kFinal) return Linger();
    if (phase_ == Phase::kHandling && response_done_) OnResponseWritten();
    return;
  }
  writing_batch_.assign(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
  out_.clear();
  std::vector<asio::const_buffer> buffers;
  for (const Out& o : writing_batch_) buffers.push_back(asio::buffer(o.bytes));
  writing_ = true;
  const uint64_t gen = ++write_gen_;
  write_timer_.expires_after(std::chrono::seconds(server_.opts().timeout_seconds));
  write_timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (!ec && gen == self->write_gen_) self->CloseNow();  // the client stopped reading
  });
  asio::async_write(socket_, buffers, [self = shared_from_this()](const error_code& ec, size_t) {
    self->OnWrite(ec);
  });
}

void Connection::OnWrite(const error_code& ec) {
  writing_ = false;
  size_t written = 0;
  for (const Out& o : writing_batch_) written += o.stream_bytes;
  writing_batch_.clear();
  if (written > 0 && state_) {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->unsent -= written;
    }
    state_->cv.notify_all();
  }
  if (ec) return CloseNow();
  WriteNext();
}

// The whole response of the request in flight is written.
void Connection::OnResponseWritten() {
  FinishExchange();
  if (close_after_) return Linger();
  NextRequest();
}

void Connection::NextRequest() {
  phase_ = Phase::kIdle;
  got_bytes_ = false;
  if (buffer_.size() > 0) {  // pipelined
    phase_ = Phase::kHead;
    got_bytes_ = true;
    ArmRead(server_.opts().timeout_seconds);
    Parse();
  } else if (read_ended_) {
    return CloseNow();
  } else {
    buffer_.shrink_to_fit();  // an idle connection keeps no buffer
    ArmRead(server_.opts().keep_alive_seconds);
  }
  if (phase_ == Phase::kHead && read_ended_) return CloseNow();  // half a request, then EOF
  DoRead();
}

void Connection::FinishExchange() {
  if (!state_) return;
  state_.reset();
  server_.EndExchange(request_.path, status_);
}

void Connection::MarkGone() {
  if (!state_) return;
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->gone) return;
    state_->gone = true;
    fn = std::move(state_->on_gone);
  }
  state_->cv.notify_all();
  if (fn) fn();
}

// Our side is done: shut it, drop what the client still sends for a moment, then close.
void Connection::Linger() {
  if (read_ended_) return CloseNow();
  phase_ = Phase::kClosing;
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  ArmRead(kLingerSeconds);
  buffer_.clear();
  DoRead();
}

void Connection::Drain() {
  if (closed_) return;
  if (phase_ == Phase::kIdle || (phase_ == Phase::kHead && !got_bytes_)) return CloseNow();
  close_after_ = true;
}

void Connection::CloseNow() {
  if (closed_) return;
  closed_ = true;
  DisarmRead();
  ++write_gen_;
  write_timer_.cancel();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
  MarkGone();  // and a Write that waits for room returns
  // The exchange ends now if its handler is done, else when the handler's last word comes.
  if (state_ && response_done_) FinishExchange();
  server_.Unregister(this, client_);
}

// ---------------------------------------------------------------------------------------------
// ServerImpl

Status ServerImpl::Listen() {
  // Every connection is a descriptor: allow as many as the hard limit does.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &lim);
  }
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(opts_.host, ec);
  const auto fail = [&](const error_code& why) {
    return Status::Error(StrFormat("cannot listen on %s:%d: %s", opts_.host.c_str(), opts_.port,
                                   why.message().c_str()));
  };
  if (ec) return fail(ec);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(opts_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) return fail(ec);
  acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  acceptor_.bind(endpoint, ec);
  if (ec) return fail(ec);
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec);
  port_ = acceptor_.local_endpoint(ec).port();
  DoAccept();
  return Status::Ok();
}

void ServerImpl::DoAccept() {
  acceptor_.async_accept(
      io_, [this](const error_code& ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void ServerImpl::OnAccept(const error_code& ec, tcp::socket socket) {
  if (!acceptor_.is_open()) return;
  if (ec) {  // out of descriptors (the connection waits in the backlog), or a reset: retry soon
    retry_.expires_after(std::chrono::milliseconds(50));
    retry_.async_wait([this](const error_code& e) {
      if (!e && acceptor_.is_open()) DoAccept();
    });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  const tcp::endpoint peer = socket.remote_endpoint(ignored);
  const std::string client = peer.address().to_string();
  auto conn = std::make_shared<Connection>(*this, std::move(socket), client);
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(connections_.size()) >= opts_.max_connections) {
      refusal = StrFormat("the server has %d connections open, its limit; retry later",
                          opts_.max_connections);
    } else if (per_client_[client] >= opts_.max_connections_per_client) {
      refusal = StrFormat(
          "%d connections from this address are open, the limit per client; "
          "retry later (or reuse one: they are kept alive)",
          opts_.max_connections_per_client);
    } else {
      connections_[conn.get()] = conn;
      ++per_client_[client];
    }
    if (per_client_[client] == 0) per_client_.erase(client);
  }
  if (refusal.empty()) {
    conn->Start();
  } else {
    conn->Refuse(503, refusal);
  }
  DoAccept();
}

void ServerImpl::Unregister(Connection* c, const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connections_.erase(c) == 0) return;  // a refused one was never counted
  if (--per_client_[client] <= 0) per_client_.erase(client);
}

void ServerImpl::Dispatch(std::shared_ptr<Exchange> ex) {
  workers_.Post([this, ex = std::move(ex)]() mutable {
    try {
      opts_.handler(ex);
    } catch (const std::exception& e) {
      ex->Respond({500,
                   "application/json",
                   {},
                   opts_.error_body(500, std::string("internal error: ") + e.what())});
    } catch (...) {
      ex->Respond({500, "application/json", {}, opts_.error_body(500, "internal error")});
    }
    ex.reset();  // on this thread: an unanswered exchange answers 500 as it goes
  });
}

void ServerImpl::BeginExchange() {
  std::lock_guard<std::mutex> lock(mu_);
  ++in_flight_;
}

void ServerImpl::EndExchange(const std::string& path, int status) {
  Count(path, status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
  }
  idle_cv_.notify_all();
}

void ServerImpl::RunOnIo(std::function<void()> fn) {
  std::promise<void> done;
  asio::post(io_, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

void ServerImpl::StopAccepting() {
  if (!io_thread_.joinable()) return;
  RunOnIo([this] {
    if (draining_) return;
    draining_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [ptr, weak] : connections_) {
        if (auto c = weak.lock()) open.push_back(std::move(c));
      }
    }
    for (const auto& c : open) c->Drain();
  });
}

void ServerImpl::Stop() {
  if (stopped_ || !io_thread_.joinable()) return;
  StopAccepting();
  WaitIdle();
  RunOnIo([this] {
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [ptr, weak] : connections_) {
        if (auto c = weak.lock()) open.push_back(std::move(c));
      }
    }
    for (const auto& c : open) c->CloseNow();
  });
  WaitIdle();  // what a connection still read and dispatched before it closed
  workers_.Stop();
  io_.stop();
  io_thread_.join();
  stopped_ = true;
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  auto s = std::make_unique<ServerImpl>(std::move(options));
  if (Status st = s->Listen(); !st.ok()) return st;
  s->Run();
  return std::unique_ptr<HttpServer>(std::move(s));
}

}  // namespace goose::server
