#include "raw_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

extern char** environ;

namespace goose::server {

namespace {

int Millis(double seconds) { return seconds <= 0 ? 0 : static_cast<int>(seconds * 1000 + 0.5); }

// Waits until fd is ready for `events` or the deadline passes.
bool WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::chrono::steady_clock::time_point After(double seconds) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(Millis(seconds));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// De-chunks a chunked body at the front of `bytes`; nullopt while incomplete.
std::optional<std::string> Dechunk(std::string_view bytes, size_t* used) {
  std::string body;
  size_t pos = 0;
  while (true) {
    const size_t eol = bytes.find("\r\n", pos);
    if (eol == std::string_view::npos) return std::nullopt;
    const size_t size =
        std::strtoul(std::string(bytes.substr(pos, eol - pos)).c_str(), nullptr, 16);
    pos = eol + 2;
    if (size == 0) {  // no trailers from goose: the last chunk ends with an empty line
      if (bytes.size() < pos + 2) return std::nullopt;
      *used = pos + 2;
      return body;
    }
    if (bytes.size() < pos + size + 2) return std::nullopt;
    body.append(bytes.substr(pos, size));
    pos += size + 2;
  }
}

}  // namespace

RawSocket::RawSocket(int port, double connect_timeout_s) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return;
  int err = errno;
  if (err == EINPROGRESS && WaitFd(fd_, POLLOUT, After(connect_timeout_s))) {
    socklen_t len = sizeof err;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) return;
  }
  Close();
}

RawSocket::~RawSocket() { Close(); }

RawSocket::RawSocket(RawSocket&& o) noexcept : fd_(o.fd_), eof_(o.eof_) { o.fd_ = -1; }

void RawSocket::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void RawSocket::ShutdownWrite() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

bool RawSocket::Send(std::string_view data, double timeout_s) {
  const auto deadline = After(timeout_s);
  while (!data.empty()) {
    if (fd_ < 0) return false;
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFd(fd_, POLLOUT, deadline)) {
      continue;
    }
    return false;
  }
  return true;
}

bool RawSocket::Readable(double timeout_s) {
  return fd_ >= 0 && WaitFd(fd_, POLLIN, After(timeout_s));
}

std::string RawSocket::Receive(double timeout_s, size_t max_bytes) {
  if (fd_ < 0 || eof_ || !WaitFd(fd_, POLLIN, After(timeout_s))) return "";
  std::string out(max_bytes, '\0');
  const ssize_t n = recv(fd_, out.data(), out.size(), 0);
  if (n <= 0) {
    eof_ = true;
    return "";
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

bool RawSocket::WaitClosed(double timeout_s, std::string* got) {
  const auto deadline = After(timeout_s);
  while (fd_ >= 0 && !eof_) {
    if (!WaitFd(fd_, POLLIN, deadline)) return false;
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      eof_ = true;
      break;
    }
    if (got) got->append(buf, static_cast<size_t>(n));
  }
  return true;
}

std::optional<RawResponse> ParseResponse(std::string_view bytes, size_t* used) {
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string_view::npos || bytes.substr(0, 9).rfind("HTTP/1.", 0) != 0) {
    return std::nullopt;
  }
  RawResponse r;
  r.status = std::atoi(std::string(bytes.substr(9, 3)).c_str());
  size_t pos = bytes.find("\r\n") + 2;
  while (pos < head_end) {
    const size_t eol = bytes.find("\r\n", pos);
    const std::string_view line = bytes.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      r.headers[Lower(std::string(line.substr(0, colon)))] = std::string(value);
    }
    pos = eol + 2;
  }
  const size_t body_at = head_end + 4;
  if (r.status == 100) {  // an interim answer: the caller reads on
    *used = body_at;
    return r;
  }
  if (r.headers.count("transfer-encoding")) {
    size_t n = 0;
    std::optional<std::string> body = Dechunk(bytes.substr(body_at), &n);
    if (!body) return std::nullopt;
    r.body = std::move(*body);
    *used = body_at + n;
    return r;
  }
  const size_t length = r.headers.count("content-length")
                            ? std::strtoul(r.headers["content-length"].c_str(), nullptr, 10)
                            : bytes.size() - body_at;  // until the close: what is here
  if (bytes.size() < body_at + length) return std::nullopt;
  r.body = std::string(bytes.substr(body_at, length));
  *used = body_at + length;
  return r;
}

std::optional<RawResponse> ReadResponse(RawSocket& s, double timeout_s, std::string* carry) {
  const auto deadline = After(timeout_s);
  while (true) {
    size_t used = 0;
    std::optional<RawResponse> r = ParseResponse(*carry, &used);
    if (r && (r->status == 100 || r->headers.count("content-length") ||
              r->headers.count("transfer-encoding"))) {
      carry->erase(0, used);
      return r;
    }
    if (s.eof()) {  // a response framed by the close is whole now
      if (r) carry->clear();
      return r;
    }
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return std::nullopt;
    carry->append(s.Receive(left));
  }
}

std::string PostRequest(const std::string& path, const std::string& body,
                        const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

ServeProcess::ServeProcess(const std::string& binary, std::vector<std::string> args) {
  int fds[2];
  if (pipe(fds) != 0) return;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<std::string> argv = {binary, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  if (posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  err_ = fdopen(fds[0], "r");
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (err_) fclose(err_);
}

std::string ServeProcess::Line() {
  char buf[4096];
  if (err_ == nullptr || fgets(buf, sizeof buf, err_) == nullptr) return "";
  all_ += buf;
  return buf;
}

bool ServeProcess::WaitFor(const std::string& what, std::string* line) {
  while (true) {
    const std::string l = Line();
    if (l.empty()) return false;
    if (l.find(what) != std::string::npos) {
      if (line) *line = l;
      return true;
    }
  }
}

int ServeProcess::WaitReady() {
  std::string line;
  if (!WaitFor("listening on", &line)) return -1;
  const int port = PortFrom(line);
  return port > 0 && WaitFor("ready") ? port : -1;
}

int ServeProcess::Signal(int sig) { return kill(pid_, sig); }

int ServeProcess::Wait() {
  int st = 0;
  waitpid(pid_, &st, 0);
  reaped_ = true;
  while (!Line().empty()) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool ServeProcess::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == 0) return true;
  reaped_ = true;
  return false;
}

long ServeProcess::StatusKiB(const char* field) const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string key;
  while (in >> key) {
    if (key == std::string(field) + ":") {
      long kib = -1;
      in >> kib;
      return kib;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return -1;
}

int PortFrom(const std::string& line) {
  const size_t at = line.find("127.0.0.1:");
  return at == std::string::npos ? -1 : std::atoi(line.c_str() + at + 10);
}

}  // namespace goose::server
