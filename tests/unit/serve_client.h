// Raw-socket HTTP clients for the tprof serve tests (serve_test.cc,
// serve_load_test.cc): exchanges bounded by one deadline each, so a server
// that hangs fails a test instead of hanging it, and that tell a clean close
// (FIN) from a reset.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tprof::internal::serve_test {

// The traces both serve tests open: a small plain one and a gzip one.
inline const std::string kTrace = std::string(TPROF_TEST_DATA) + "/public/kineto/docs/traces/after_fix_trace.json";
inline const std::string kGzTrace = std::string(TPROF_TEST_DATA) +
                                    "/public/kineto/tb_plugin/samples/resnet50_num_workers_4/"
                                    "worker0.1623213129365.excerpt.pt.trace.json.gz";

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Connects to 127.0.0.1:port, from `source` (another loopback address such
// as "127.0.0.2") when given. rcvbuf_bytes > 0 fixes the receive buffer
// (before connect, so the window is small from the start). -1 on failure.
inline int connect_to(int port, int rcvbuf_bytes = 0, const char* source = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf_bytes > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `bytes` (blocking); false when the server closed or reset.
inline bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// What arrived on a connection until the server closed it or time ran out.
struct Received {
  std::string bytes;
  bool eof = false;        // the server closed cleanly (recv returned 0)
  bool reset = false;      // recv failed (ECONNRESET): the connection was reset
  bool timed_out = false;  // neither within the limit
};

// Reads until the server closes the connection, for at most `limit`.
inline Received read_until_close(int fd, milliseconds limit) {
  Received r;
  const Clock::time_point end = Clock::now() + limit;
  char buf[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      return r;
    }
    pollfd p{fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;  // the deadline check above ends it
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      r.eof = true;
      return r;
    }
    if (n < 0) {
      r.reset = true;
      return r;
    }
    r.bytes.append(buf, static_cast<std::size_t>(n));
  }
}

struct Response {
  int status = -1;  // -1: no complete answer (none, cut short, or reset)
  std::string head;
  std::string body;
  Received raw;
  bool has_header(const std::string& line) const { return head.find("\r\n" + line + "\r\n") != std::string::npos; }
};

// Splits an answer into status, head and body; status stays -1 unless the
// head is complete and the body has the Content-Length it announced.
inline Response parse_response(Received raw, bool head_request = false) {
  Response r;
  r.raw = std::move(raw);
  const std::string& bytes = r.raw.bytes;
  const std::size_t end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
  r.head = bytes.substr(0, end + 2);
  r.body = bytes.substr(end + 4);
  const std::size_t cl = r.head.find("\r\nContent-Length: ");
  if (cl == std::string::npos) return r;
  const std::uint64_t length = std::strtoull(r.head.c_str() + cl + 18, nullptr, 10);
  if (!head_request && r.body.size() != length) return r;
  r.status = std::atoi(bytes.c_str() + 9);
  return r;
}

// Sends `request` as is on a new connection and reads until the server
// closes it, all within `limit`.
inline Response http_exchange(int port, std::string_view request, milliseconds limit = milliseconds(10'000)) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  const Clock::time_point start = Clock::now();
  const timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  // The server may answer and stop reading before all of it is sent.
  send_all(fd, request);
  const auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  Received raw = read_until_close(fd, limit > spent ? limit - spent : milliseconds(0));
  ::close(fd);
  return parse_response(std::move(raw), request.rfind("HEAD ", 0) == 0);
}

inline Response get(int port, const std::string& target, const std::string& method = "GET",
                    milliseconds limit = milliseconds(10'000)) {
  return http_exchange(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", limit);
}

}  // namespace tprof::internal::serve_test
