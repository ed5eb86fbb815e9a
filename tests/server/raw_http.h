// Loopback sockets that speak HTTP by hand, for the probes a well-behaved client library would
// never send (slow heads, pipelining, bad framing, bodies that do not stop), and a `goose serve`
// child process whose memory the tests read from /proc.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace goose::server {

// A connected TCP socket to 127.0.0.1:port (ok() false if the connect failed). Every call has a
// deadline, so a probe cannot hang the test.
class RawSocket {
 public:
  explicit RawSocket(int port, double connect_timeout_s = 5);
  ~RawSocket();
  RawSocket(RawSocket&& o) noexcept;
  RawSocket& operator=(RawSocket&&) = delete;
  RawSocket(const RawSocket&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Sends all of `data` (false: the peer closed or reset, or the deadline passed).
  bool Send(std::string_view data, double timeout_s = 10);
  // What arrived within timeout_s (at most max_bytes); "" at EOF or after the deadline.
  std::string Receive(double timeout_s, size_t max_bytes = 1 << 20);
  // Whether bytes (or the end of the stream) are waiting to be read.
  bool Readable(double timeout_s = 0);
  // Waits for the peer to close the connection (EOF or a reset), reading what comes first.
  bool WaitClosed(double timeout_s, std::string* got = nullptr);
  void ShutdownWrite();
  void Close();
  bool eof() const { return eof_; }  // the peer closed (or reset) the connection

 private:
  int fd_ = -1;
  bool eof_ = false;
};

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked
};

// Parses one response at the front of `bytes`; sets *used to its length. nullopt: incomplete
// (or malformed, which the tests then see as a missing answer).
std::optional<RawResponse> ParseResponse(std::string_view bytes, size_t* used);

// Reads one whole response from s (keeping bytes of the next ones in *carry); nullopt if none
// arrived within timeout_s or the connection closed first.
std::optional<RawResponse> ReadResponse(RawSocket& s, double timeout_s, std::string* carry);

// "POST path HTTP/1.1" with a JSON body and Content-Length (plus `extra` header lines, each
// ending in \r\n).
std::string PostRequest(const std::string& path, const std::string& body,
                        const std::string& extra = "");

// A `goose serve` child (stderr read line by line), killed on destruction.
class ServeProcess {
 public:
  ServeProcess(const std::string& binary, std::vector<std::string> args);
  ~ServeProcess();
  std::string Line();  // the next stderr line ("" at end of output)
  bool WaitFor(const std::string& what, std::string* line = nullptr);
  // The port, once the server said "listening on" it and then "ready"; -1 if it never did.
  int WaitReady();
  int Signal(int sig);
  int Wait();    // exit status, -1 if not a normal exit
  bool Alive();  // not exited (nor killed by a signal); reaps it if it has
  const std::string& output() const { return all_; }
  pid_t pid() const { return pid_; }
  // /proc/PID/status's field ("VmHWM", "VmRSS") in KiB, -1 if unreadable.
  long StatusKiB(const char* field) const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* err_ = nullptr;
  std::string all_;
};

// The port in "listening on http://127.0.0.1:PORT" (-1 if none).
int PortFrom(const std::string& line);

}  // namespace goose::server
