#include "src/serve/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unordered_map>

#include "src/base/ascii.h"
#include "src/base/url.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof::internal {

namespace {

// Limits on what a client may send before it is answered (docs/serve.md).
constexpr std::size_t kMaxRequestLine = 8 * 1024;
constexpr std::size_t kMaxHead = 16 * 1024;
constexpr int kMaxHeaderFields = 100;
// Requests read and waiting for a worker; beyond this a new one is answered
// 503 at once instead of waiting behind a slow index page.
constexpr std::size_t kMaxQueuedRequests = 64;
// Connections refused with 503 (a limit was reached) that are held for their
// lingering close. Beyond this a refusal is sent without waiting and the
// connection closed at once, which can reach the client as a reset.
constexpr int kMaxRefusing = 64;
// After an answer, what the client still sends is read and dropped, up to
// this much (see Loop::linger_read).
constexpr std::size_t kMaxDrain = 1 << 20;
// Bytes one connection may write in one turn, so that a fast reader of a
// large trace does not hold up the others.
constexpr std::size_t kMaxWriteTurn = 4 << 20;
// Connections accepted in one turn of the loop.
constexpr int kMaxAcceptsPerTurn = 64;
// After stop(), answers under way have this long to finish.
constexpr int kStopGraceMs = 1000;
// Descriptors left to the rest of the process when max_open_connections is
// fitted to RLIMIT_NOFILE (each connection may hold a socket and a file).
constexpr long kReservedFds = 64;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_token_char(char c) {
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= 'a' && c <= 'z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

// Host's value: host [":" port] (RFC 9110 7.2, RFC 3986 3.2.2), where host is
// an IP literal in brackets or a registered name / IPv4 address, and port a
// TCP port (1..65535).
bool is_valid_host(std::string_view host) {
  std::string_view port;
  bool has_port = false;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (const char c : host.substr(1, close - 1)) {
      if (!is_hex(c) && c != ':' && c != '.') return false;
    }
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    has_port = !rest.empty();
    port = rest.empty() ? rest : rest.substr(1);
  } else {
    const std::size_t colon = host.find(':');
    const std::string_view name = host.substr(0, colon);
    for (std::size_t i = 0; i < name.size(); ++i) {
      const char c = name[i];
      const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                         (c != '\0' && std::strchr("-._~!$&'()*+,;=", c) != nullptr);
      if (c == '%' && i + 2 < name.size() && is_hex(name[i + 1]) && is_hex(name[i + 2])) {
        i += 2;  // pct-encoded
      } else if (!plain) {
        return false;
      }
    }
    has_port = colon != std::string_view::npos;
    port = has_port ? host.substr(colon + 1) : std::string_view();
  }
  if (!has_port) return true;
  // A port is 1..65535 in at most 5 digits ("00080" is 80); "host:" with no
  // digits, which RFC 3986 allows, is refused too: no client sends it.
  if (port.empty() || port.size() > 5) return false;
  std::uint32_t value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return value >= 1 && value <= 65535;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

bool is_loopback_host(std::string_view host) {
  // Host header value: name or address, an optional ":port".
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    return host.substr(1, close - 1) == "::1";
  }
  const std::size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  const std::string h = ascii_lower(host);
  return h == "localhost" || h == "127.0.0.1";
}

// Every trace file under `root` (its realpath), hidden entries skipped,
// directory links not followed, file links kept only when they resolve
// inside root. Sorted by path.
std::vector<ServedTrace> find_traces(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<ServedTrace> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  const fs::recursive_directory_iterator end;
  const std::string prefix = root == "/" ? root : root + "/";
  for (; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (!name.empty() && name.front() == '.') {
      std::error_code dir_ec;
      if (entry.is_directory(dir_ec) && !entry.is_symlink(dir_ec)) it.disable_recursion_pending();
      continue;
    }
    if (!is_trace_name(name)) continue;
    char resolved[PATH_MAX];
    if (::realpath(entry.path().c_str(), resolved) == nullptr) continue;
    if (std::string_view(resolved).substr(0, prefix.size()) != prefix) continue;
    struct stat st {};
    if (::stat(resolved, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ServedTrace t;
    t.rel_path = entry.path().string().substr(prefix.size());
    t.url_path = "/" + percent_encode_path(t.rel_path);
    t.size_bytes = static_cast<std::uint64_t>(st.st_size);
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const ServedTrace& a, const ServedTrace& b) { return a.rel_path < b.rel_path; });
  return out;
}

std::string format_size(std::uint64_t bytes) {
  char buf[32];
  if (bytes >= 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(bytes) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

// How long an answer of `bytes` may take as a whole: the base deadline plus
// one second per min_send_rate bytes.
milliseconds send_allowance(std::uint64_t bytes, const ServeOptions& o) {
  const std::uint64_t rate = o.min_send_rate_bytes_per_s;
  const std::uint64_t extra_ms = bytes / rate * 1000 + bytes % rate * 1000 / rate;  // rate <= 2^40 (start())
  return milliseconds(o.response_timeout_ms) + milliseconds(std::min<std::uint64_t>(extra_ms, INT_MAX));
}

}  // namespace

std::string peer_key(const sockaddr_storage& addr) {
  // A tag, then the bytes that count: "L" for loopback, "4" and 4 bytes,
  // "6" and 8 bytes.
  static constexpr std::string_view kLoopback = "L";
  // An IPv4 address, the 4 bytes of a mapped one included.
  auto v4 = [](const unsigned char* a) {
    if (a[0] == 127) return std::string(kLoopback);  // 127.0.0.0/8: every one reaches this host
    return "4" + std::string(reinterpret_cast<const char*>(a), 4);
  };
  if (addr.ss_family == AF_INET) {
    const auto* a4 = reinterpret_cast<const sockaddr_in*>(&addr);
    return v4(reinterpret_cast<const unsigned char*>(&a4->sin_addr));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&a6->sin6_addr);
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) return v4(bytes + 12);
    if (IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) return std::string(kLoopback);
    // A /64 is one site's subnet: a host there picks its own interface
    // identifier, so each of its addresses must not count as a client.
    return "6" + std::string(reinterpret_cast<const char*>(bytes), 8);
  }
  return {};
}

namespace {

// The headers every answer carries: CORS for Perfetto UI (and Chrome's
// private network access preflight), no caching of files that change.
std::string common_headers(const std::string& allow_origin) {
  return "Access-Control-Allow-Origin: " + allow_origin +
         "\r\n"
         "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
         "Access-Control-Allow-Headers: *\r\n"
         "Access-Control-Allow-Private-Network: true\r\n"
         "Access-Control-Max-Age: 600\r\n"
         "Vary: Origin\r\n"
         "X-Content-Type-Options: nosniff\r\n"
         "Cache-Control: no-store\r\n"
         "Connection: close\r\n";
}

}  // namespace

DecodedPath decode_request_path(std::string_view path) {
  DecodedPath out;
  if (path.empty() || path.front() != '/') {
    out.check = PathCheck::kForbidden;
    return out;
  }
  path.remove_prefix(1);
  // Split before decoding: an encoded '/' (%2f) must not become a separator.
  while (true) {
    const std::size_t slash = path.find('/');
    const std::string_view raw = path.substr(0, slash);
    std::string segment;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      char c = raw[i];
      if (c == '%') {
        if (i + 2 >= raw.size() || !is_hex(raw[i + 1]) || !is_hex(raw[i + 2])) {
          out.check = PathCheck::kBadRequest;
          return out;
        }
        c = static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
        i += 2;
      }
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f || c == '/' || c == '\\') {
        out.check = PathCheck::kForbidden;
        return out;
      }
      segment.push_back(c);
    }
    // Empty ("//x", trailing '/'), ".", ".." and hidden names are refused.
    if (segment.empty() || segment.front() == '.') {
      out.check = PathCheck::kForbidden;
      return out;
    }
    if (!out.rel_path.empty()) out.rel_path.push_back('/');
    out.rel_path += segment;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

std::string percent_encode_path(std::string_view rel_path) { return internal::percent_encode(rel_path, true); }

bool is_trace_name(std::string_view name) { return ends_with(name, ".json") || ends_with(name, ".json.gz"); }

RequestHead parse_request_head(std::string_view head) {
  RequestHead req;
  const std::size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  if (line.size() > kMaxRequestLine) {
    req.status = 414;
    return req;
  }
  if (head.size() > kMaxHead) {
    req.status = 431;
    return req;
  }
  // Lines end in CRLF and nowhere else: a lone CR or LF is refused rather
  // than guessed at, since another parser on the way might split the head
  // differently (request smuggling).
  for (std::size_t i = 0; i < head.size(); ++i) {
    if ((head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) ||
        (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n'))) {
      req.status = 400;
      return req;
    }
  }
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != line.npos) {
    req.status = 400;
    return req;
  }
  req.method = std::string(line.substr(0, sp1));
  req.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  const bool method_ok = !req.method.empty() && std::all_of(req.method.begin(), req.method.end(), is_token_char);
  const bool target_ok = !req.target.empty() && std::all_of(req.target.begin(), req.target.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (!method_ok || !target_ok || version.substr(0, 5) != "HTTP/") {
    req.status = 400;
    return req;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    req.status = 505;
    return req;
  }
  // Header fields: "name: value" lines; folded lines (obsolete) are refused.
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  int fields = 0;
  while (!rest.empty()) {
    const std::size_t eol = rest.find("\r\n");
    const std::string_view field = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
    const std::size_t colon = field.find(':');
    if (++fields > kMaxHeaderFields) {
      req.status = 431;
      return req;
    }
    // The name is a token right up to the colon: " Host:" (folded) and
    // "Host :" are malformed (RFC 9112 5.1).
    if (colon == 0 || colon == std::string_view::npos ||
        !std::all_of(field.begin(), field.begin() + static_cast<std::ptrdiff_t>(colon), is_token_char)) {
      req.status = 400;
      return req;
    }
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    // NUL, CR, LF and the other control bytes (tab aside) have no place in
    // a value (RFC 9110 5.5); bytes from 0x80 up (obs-text) are let through.
    const bool value_ok = std::all_of(value.begin(), value.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return (u >= 0x20 && u != 0x7f) || c == '\t';
    });
    if (!value_ok) {
      req.status = 400;
      return req;
    }
    if (ascii_lower(field.substr(0, colon)) == "host") {
      // Two Hosts would leave it to each reader which one counts (and the
      // DNS-rebinding check to the last one): 400, as RFC 9112 3.2 asks.
      if (req.has_host || !is_valid_host(value)) {
        req.status = 400;
        return req;
      }
      req.host = std::string(value);
      req.has_host = true;
    }
  }
  if (version == "HTTP/1.1" && !req.has_host) req.status = 400;  // RFC 9112 3.2
  return req;
}

Result<std::unique_ptr<TraceServer>> TraceServer::start(const ServeOptions& options) {
  std::unique_ptr<TraceServer> s(new TraceServer(options));
  ServeOptions& o = s->options_;
  o.request_timeout_ms = std::max(1, o.request_timeout_ms);
  o.response_timeout_ms = std::max(1, o.response_timeout_ms);
  o.min_send_rate_bytes_per_s = std::clamp<std::uint64_t>(o.min_send_rate_bytes_per_s, 1, std::uint64_t{1} << 40);
  o.linger_ms = std::max(0, o.linger_ms);
  o.max_connections_per_client = std::max(1, o.max_connections_per_client);
  o.max_open_connections = std::max(1, o.max_open_connections);
  // Each connection may hold a socket and a file: fit the limit to the
  // descriptors this process may open (tprof serve raises its soft limit).
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    const long fit = (static_cast<long>(files.rlim_cur) - kReservedFds - kMaxRefusing) / 2;
    o.max_open_connections = static_cast<int>(std::clamp<long>(fit, 1, o.max_open_connections));
  }
  struct stat st {};
  if (::stat(options.dir.c_str(), &st) != 0) {
    return Error(ErrorCode::kInvalidArgument, std::string("cannot open directory: ") + std::strerror(errno),
                 options.dir);
  }
  if (!S_ISDIR(st.st_mode)) return Error(ErrorCode::kInvalidArgument, "not a directory", options.dir);
  char resolved[PATH_MAX];
  if (::realpath(options.dir.c_str(), resolved) == nullptr) {
    return Error(ErrorCode::kInvalidArgument, std::string("cannot resolve directory: ") + std::strerror(errno),
                 options.dir);
  }
  s->root_ = resolved;
  if (options.port < 0 || options.port > 65535) {
    return Error(ErrorCode::kInvalidArgument, "port out of range: " + std::to_string(options.port));
  }

  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  const std::string port_text = std::to_string(options.port);
  if (const int rc = ::getaddrinfo(options.bind_address.c_str(), port_text.c_str(), &hints, &ai); rc != 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "not a numeric IP address: " + options.bind_address + " (" + ::gai_strerror(rc) + ")");
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> ai_guard(ai, &::freeaddrinfo);
  const std::string where = options.bind_address + ":" + port_text;
  s->listen_fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (s->listen_fd_ < 0) return Error(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  // Lets a restarted server bind while old connections sit in TIME_WAIT; on
  // Linux it never allows two listeners on one port.
  const int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s->listen_fd_, ai->ai_addr, ai->ai_addrlen) != 0) {
    return Error(ErrorCode::kIo, "cannot listen on " + where + ": " + std::strerror(errno));
  }
  if (::listen(s->listen_fd_, SOMAXCONN) != 0) {
    return Error(ErrorCode::kIo, "cannot listen on " + where + ": " + std::strerror(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  std::string host = options.bind_address;
  if (bound.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&bound);
    s->port_ = ntohs(a6->sin6_port);
    s->loopback_ = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    host = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ? "[::1]" : "[" + host + "]";
  } else {
    const auto* a4 = reinterpret_cast<const sockaddr_in*>(&bound);
    s->port_ = ntohs(a4->sin_port);
    s->loopback_ = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    if (a4->sin_addr.s_addr == htonl(INADDR_ANY)) host = "127.0.0.1";
  }
  s->base_url_ = "http://" + host + ":" + std::to_string(s->port_);
  if (::pipe2(s->wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Error(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  }
  s->traces_ = find_traces(s->root_);
  return s;
}

TraceServer::~TraceServer() {
  stop();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    workers_done_ = true;
  }
  jobs_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  for (const Answer& a : answers_) {
    if (a.file_fd >= 0) ::close(a.file_fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (const int fd : wake_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::string TraceServer::perfetto_link(const ServedTrace& trace) const {
  // The one Perfetto link builder (src/base/url.h), as tprof report's.
  return internal::perfetto_link(base_url_ + trace.url_path);
}

void TraceServer::stop() noexcept {
  stopping_.store(true, std::memory_order_relaxed);
  wake();
}

void TraceServer::wake() noexcept {
  if (wake_fds_[1] >= 0) {
    const char byte = 1;
    // Async-signal-safe; a full pipe already holds a wake-up.
    [[maybe_unused]] const ssize_t n = ::write(wake_fds_[1], &byte, 1);
  }
}

ServeStats TraceServer::stats() const {
  ServeStats s;
  // closed first (acquire, paired with the release in close_connection):
  // every connection seen closed is then seen accepted too, so
  // open_connections never goes below zero.
  s.closed = closed_.load(std::memory_order_acquire);
  s.accepted = accepted_.load(std::memory_order_relaxed);
  s.open_connections = s.accepted - s.closed;
  s.busy = busy_.load(std::memory_order_relaxed);
  s.request_timeouts = request_timeouts_.load(std::memory_order_relaxed);
  s.response_timeouts = response_timeouts_.load(std::memory_order_relaxed);
  return s;
}

// run()'s event loop. It alone touches the sockets, never blocks on one
// (they are non-blocking), and gives each connection a deadline for the
// phase it is in:
//
//   accept ── kHead: read the head ─┬─ malformed, too large, 408 ──────┐
//      │       (request_timeout_ms) └─ complete: a worker builds the   │
//      │                               answer (kWaiting, no deadline)  │
//      ├─ a limit reached: 503 ────────────────────────────────────────┤
//      ▼                                                               ▼
//   kWriting: send head and body (response_timeout_ms + size / min_send_rate,
//      │      else aborted with a reset)
//      ▼ all sent: shutdown(SHUT_WR), a FIN after the answer
//   kLingering: read and drop until the client closes (linger_ms), close
//
// Closing only after the client's FIN (or the linger time) keeps close()
// from finding unread bytes, which would make the kernel send a reset
// instead of a FIN; a client that gets a reset reports an error, and may
// drop the part of the answer it has not read yet. SO_LINGER stays off
// (with a zero timeout close() resets), except to abort an answer that
// overran its deadline.
struct TraceServer::Loop {
  enum class Phase : std::uint8_t { kHead, kWaiting, kWriting, kLingering };
  struct Connection {
    std::uint64_t id = 0;
    int fd = -1;  // -1: closed, erased at the end of the turn
    std::string peer;
    bool holds_slot = true;  // false: refused, in the 503 lane
    Phase phase = Phase::kHead;
    Clock::time_point deadline = Clock::time_point::max();
    std::string in;            // the head so far
    std::size_t scanned = 0;   // in[0, scanned) has no lone CR or LF
    std::size_t searched = 0;  // in[0, searched) holds no CRLFCRLF
    std::string out;           // head and in-memory body
    std::size_t out_sent = 0;
    int file_fd = -1;
    off_t file_offset = 0;
    std::uint64_t file_size = 0;
    std::size_t drained = 0;
  };

  explicit Loop(TraceServer& s) : server(s), options(s.options_) {}
  ~Loop() {
    for (auto& [id, c] : conns) close_connection(c);
  }

  Status run();
  void begin_stop(Clock::time_point now);
  void take_answers();
  void accept_some(Clock::time_point now);
  void on_ready(Connection& c, Clock::time_point now);
  void read_head(Connection& c, Clock::time_point now);
  void answer(Connection& c, int status, Clock::time_point now, bool head_only = false);
  void start_writing(Connection& c, std::string bytes, int file_fd, std::uint64_t file_size,
                     Clock::time_point now);
  void write_some(Connection& c, Clock::time_point now);
  void linger_read(Connection& c);
  void drain_and_close(Connection& c);
  void close_connection(Connection& c);
  void expire(Clock::time_point now);

  TraceServer& server;
  const ServeOptions& options;
  std::unordered_map<std::uint64_t, Connection> conns;
  std::unordered_map<std::string, int> per_client;  // slots held per address
  int holding = 0;                                   // connections holding a slot
  int refusing = 0;                                  // connections in the 503 lane
  std::uint64_t next_id = 1;
  std::uint64_t accepted = 0;
  Clock::time_point accept_resume = Clock::time_point::min();
  bool stop_seen = false;
  Clock::time_point stop_deadline = Clock::time_point::max();
};

Status TraceServer::Loop::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (true) {
    Clock::time_point now = Clock::now();
    if (server.stopping_.load(std::memory_order_relaxed) && !stop_seen) begin_stop(now);
    const std::uint64_t limit = options.exit_after_connections;
    const bool accepting = !stop_seen && (limit == 0 || accepted < limit);
    if (!accepting && conns.empty()) break;
    if (stop_seen && now >= stop_deadline) break;

    fds.clear();
    ids.clear();
    const bool listen_now = accepting && now >= accept_resume;
    fds.push_back({server.wake_fds_[0], POLLIN, 0});
    fds.push_back({listen_now ? server.listen_fd_ : -1, POLLIN, 0});  // poll() skips a negative fd
    Clock::time_point next = stop_deadline;
    if (accepting && !listen_now) next = std::min(next, accept_resume);
    for (auto& [id, c] : conns) {
      if (c.phase == Phase::kWaiting) continue;  // a worker has it
      fds.push_back({c.fd, static_cast<short>(c.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
      ids.push_back(id);
      next = std::min(next, c.deadline);
    }
    int timeout_ms = -1;
    if (next != Clock::time_point::max()) {
      // Rounded up: waking a little early would only poll again.
      const auto left = std::chrono::ceil<milliseconds>(next - now).count();
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, INT_MAX));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorCode::kIo, std::string("poll: ") + std::strerror(errno));
    }
    now = Clock::now();
    if (fds[0].revents != 0) {
      char buf[256];
      while (::read(server.wake_fds_[0], buf, sizeof buf) > 0) {
      }
      take_answers();
    }
    if (fds[1].revents != 0) accept_some(now);
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const auto it = conns.find(ids[i - 2]);
      if (it != conns.end() && it->second.fd >= 0) on_ready(it->second, now);
    }
    expire(now);
    std::erase_if(conns, [](const auto& entry) { return entry.second.fd < 0; });
  }
  return {};
}

// On stop(): no more accepting; connections still sending their head are
// closed unanswered, and requests no worker has taken yet are dropped; the
// rest have kStopGraceMs to finish.
void TraceServer::Loop::begin_stop(Clock::time_point now) {
  stop_seen = true;
  stop_deadline = now + milliseconds(kStopGraceMs);
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(server.jobs_mu_);
    dropped.swap(server.jobs_);
  }
  for (const Job& job : dropped) {
    const auto it = conns.find(job.conn_id);
    if (it != conns.end()) close_connection(it->second);
  }
  for (auto& [id, c] : conns) {
    if (c.fd >= 0 && c.phase == Phase::kHead) close_connection(c);
  }
}

void TraceServer::Loop::take_answers() {
  std::deque<Answer> ready;
  {
    std::lock_guard<std::mutex> lock(server.answers_mu_);
    ready.swap(server.answers_);
  }
  const Clock::time_point now = Clock::now();
  for (Answer& a : ready) {
    const auto it = conns.find(a.conn_id);
    if (it == conns.end() || it->second.fd < 0) {
      if (a.file_fd >= 0) ::close(a.file_fd);
      continue;
    }
    start_writing(it->second, std::move(a.bytes), a.file_fd, a.file_size, now);
  }
}

void TraceServer::Loop::accept_some(Clock::time_point now) {
  for (int i = 0; i < kMaxAcceptsPerTurn; ++i) {
    if (options.exit_after_connections != 0 && accepted >= options.exit_after_connections) return;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(server.listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;  // the peer left already
      // Out of descriptors or memory for a moment: try again shortly rather
      // than spin on a listening socket that stays readable.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_resume = now + milliseconds(50);
      }
      return;
    }
    ++accepted;
    server.accepted_.fetch_add(1, std::memory_order_relaxed);
    Connection c;
    c.id = next_id++;
    c.fd = fd;
    c.peer = peer_key(addr);
    const auto held = per_client.find(c.peer);
    const int by_peer = held == per_client.end() ? 0 : held->second;
    const std::uint64_t id = c.id;
    if (holding < options.max_open_connections && by_peer < options.max_connections_per_client) {
      ++holding;
      ++per_client[c.peer];
      c.deadline = now + milliseconds(options.request_timeout_ms);
      // Bytes the client sent already are reported by the next poll.
      conns.emplace(id, std::move(c));
    } else if (refusing < kMaxRefusing) {
      c.holds_slot = false;
      ++refusing;
      answer(conns.emplace(id, std::move(c)).first->second, 503, now);
    } else {
      // Even the 503 lane is full: answer without waiting and close; the
      // answer may then arrive as a reset, but accepting goes on, so that
      // clients within the limits are not kept waiting behind the others.
      const std::string busy = server.plain_answer(503, false);
      [[maybe_unused]] const ssize_t n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(fd, SHUT_WR);
      c.holds_slot = false;
      ++refusing;
      server.busy_.fetch_add(1, std::memory_order_relaxed);
      drain_and_close(c);
    }
  }
}

void TraceServer::Loop::on_ready(Connection& c, Clock::time_point now) {
  switch (c.phase) {
    case Phase::kHead: return read_head(c, now);
    case Phase::kWriting: return write_some(c, now);
    case Phase::kLingering: return linger_read(c);
    case Phase::kWaiting: return;
  }
}

void TraceServer::Loop::read_head(Connection& c, Clock::time_point now) {
  char chunk[4096];
  const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) return close_connection(c);  // the client left (or reset) before sending a request
  c.in.append(chunk, static_cast<std::size_t>(n));
  // A lone CR or LF is refused at once (a head ending in "\n\n" would
  // otherwise wait for its deadline); a CR at the very end may yet be
  // followed by its LF.
  for (; c.scanned < c.in.size(); ++c.scanned) {
    const char ch = c.in[c.scanned];
    if (ch == '\n' && (c.scanned == 0 || c.in[c.scanned - 1] != '\r')) return answer(c, 400, now);
    if (ch == '\r') {
      if (c.scanned + 1 == c.in.size()) break;
      if (c.in[c.scanned + 1] != '\n') return answer(c, 400, now);
    }
  }
  const std::size_t from = c.searched >= 3 ? c.searched - 3 : 0;
  const std::size_t end = c.in.find("\r\n\r\n", from);
  if (end == std::string::npos) {
    c.searched = c.in.size();
    if (c.in.size() > kMaxRequestLine && c.in.find("\r\n") == std::string::npos) return answer(c, 414, now);
    if (c.in.size() > kMaxHead + 4) return answer(c, 431, now);
    return;
  }
  RequestHead req = parse_request_head(std::string_view(c.in).substr(0, end));
  std::string().swap(c.in);
  if (req.status != 0) return answer(c, req.status, now, req.method == "HEAD");
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(server.jobs_mu_);
    if (server.jobs_.size() < kMaxQueuedRequests) {
      server.jobs_.push_back({c.id, std::move(req)});
      queued = true;
    }
  }
  if (!queued) return answer(c, 503, now);
  server.jobs_cv_.notify_one();
  c.phase = Phase::kWaiting;
  c.deadline = Clock::time_point::max();
}

void TraceServer::Loop::answer(Connection& c, int status, Clock::time_point now, bool head_only) {
  if (status == 503) server.busy_.fetch_add(1, std::memory_order_relaxed);
  if (status == 408) server.request_timeouts_.fetch_add(1, std::memory_order_relaxed);
  start_writing(c, server.plain_answer(status, head_only), -1, 0, now);
}

void TraceServer::Loop::start_writing(Connection& c, std::string bytes, int file_fd, std::uint64_t file_size,
                                      Clock::time_point now) {
  c.phase = Phase::kWriting;
  c.out = std::move(bytes);
  c.out_sent = 0;
  c.file_fd = file_fd;
  c.file_offset = 0;
  c.file_size = file_fd >= 0 ? file_size : 0;
  c.deadline = now + send_allowance(c.out.size() + c.file_size, options);
  write_some(c, now);  // the socket is most likely writable already
}

void TraceServer::Loop::write_some(Connection& c, Clock::time_point now) {
  std::size_t turn = 0;
  while (c.out_sent < c.out.size()) {
    // MSG_MORE: the head and the file's first bytes may share a packet.
    const int more = c.file_size > 0 ? MSG_MORE : 0;
    const ssize_t n =
        ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT | more);
    if (n > 0) {
      c.out_sent += static_cast<std::size_t>(n);
      turn += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // poll() says when there is room again
    } else {
      return close_connection(c);  // the client went away
    }
  }
  while (static_cast<std::uint64_t>(c.file_offset) < c.file_size) {
    if (turn >= kMaxWriteTurn) return;  // the others' turn; POLLOUT brings it back
    const std::uint64_t left = c.file_size - static_cast<std::uint64_t>(c.file_offset);
    const ssize_t n = ::sendfile(c.fd, c.file_fd, &c.file_offset, std::min<std::uint64_t>(left, kMaxWriteTurn));
    if (n > 0) {
      turn += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      // The client went away, or the file shrank under us (n == 0): the
      // promised Content-Length cannot be kept, so the connection ends here.
      return close_connection(c);
    }
  }
  if (c.file_fd >= 0) {
    ::close(c.file_fd);
    c.file_fd = -1;
  }
  std::string().swap(c.out);
  // All sent: FIN after the answer, then wait for the client's.
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Phase::kLingering;
  c.deadline = now + milliseconds(options.linger_ms);
  c.drained = 0;
  linger_read(c);
}

// Reads and drops what the client still sends (a body, a second request)
// until it closes; too much of it, and the connection is closed anyway.
void TraceServer::Loop::linger_read(Connection& c) {
  char buf[16384];
  while (true) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.drained += static_cast<std::size_t>(n);
      if (c.drained > kMaxDrain) return close_connection(c);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      return close_connection(c);  // 0: the client closed after reading its answer
    }
  }
}

// Closes after reading what is already there, so that close() finds no
// unread bytes and ends the connection with a FIN rather than a reset.
void TraceServer::Loop::drain_and_close(Connection& c) {
  char buf[16384];
  for (std::size_t total = 0; total < kMaxDrain;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
  }
  close_connection(c);
}

void TraceServer::Loop::close_connection(Connection& c) {
  if (c.fd < 0) return;
  if (c.file_fd >= 0) ::close(c.file_fd);
  c.file_fd = -1;
  ::close(c.fd);
  c.fd = -1;
  if (c.holds_slot) {
    --holding;
    const auto it = per_client.find(c.peer);
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
  } else {
    --refusing;
  }
  server.closed_.fetch_add(1, std::memory_order_release);
}

void TraceServer::Loop::expire(Clock::time_point now) {
  for (auto& [id, c] : conns) {
    if (c.fd < 0 || now < c.deadline) continue;
    switch (c.phase) {
      case Phase::kHead:
        answer(c, 408, now);  // no whole head within request_timeout_ms
        break;
      case Phase::kWriting: {
        // The whole answer took too long: abort. A plain close() would
        // leave the kernel sending what the socket buffer still holds (up
        // to megabytes) at the slow reader's pace; SO_LINGER with a zero
        // timeout makes close() drop it and reset the connection instead.
        server.response_timeouts_.fetch_add(1, std::memory_order_relaxed);
        const linger abort{.l_onoff = 1, .l_linger = 0};
        ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
        close_connection(c);
        break;
      }
      case Phase::kLingering:
        drain_and_close(c);
        break;
      case Phase::kWaiting:
        break;
    }
  }
}

Status TraceServer::run() {
  // sendfile() to a closed peer raises SIGPIPE (send() has MSG_NOSIGNAL):
  // blocked on this thread while it serves, and taken before unblocking.
  sigset_t pipe_set;
  sigset_t old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);

  const int workers = std::max(1, options_.workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  Status status;
  {
    Loop loop(*this);
    status = loop.run();
  }
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    workers_done_ = true;
    jobs_.clear();
  }
  jobs_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  {
    std::lock_guard<std::mutex> lock(answers_mu_);
    for (const Answer& a : answers_) {
      if (a.file_fd >= 0) ::close(a.file_fd);
    }
    answers_.clear();
  }
  ::close(listen_fd_);
  listen_fd_ = -1;

  if (!sigismember(&old_set, SIGPIPE)) {
    const timespec zero{};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return status;
}

void TraceServer::worker_loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(jobs_mu_);
      jobs_cv_.wait(lock, [this] { return !jobs_.empty() || workers_done_; });
      if (workers_done_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Answer a = answer_request(job.request);
    a.conn_id = job.conn_id;
    {
      std::lock_guard<std::mutex> lock(answers_mu_);
      answers_.push_back(std::move(a));
    }
    wake();
  }
}

std::string TraceServer::plain_answer(int status, bool head_only, std::string_view extra_headers) const {
  const std::string body = std::to_string(status) + " " + reason_phrase(status) + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  out += common_headers(options_.allow_origin);
  out += extra_headers;
  if (status == 503) out += "Retry-After: 1\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

TraceServer::Answer TraceServer::answer_request(const RequestHead& req) {
  const bool is_get = req.method == "GET";
  const bool is_head = req.method == "HEAD";
  const bool is_options = req.method == "OPTIONS";
  const std::string no_content = "HTTP/1.1 204 No Content\r\n" + common_headers(options_.allow_origin) +
                                 "Allow: GET, HEAD, OPTIONS\r\nContent-Length: 0\r\n\r\n";
  if (!is_get && !is_head && !is_options) {
    return {.bytes = plain_answer(405, false, "Allow: GET, HEAD, OPTIONS\r\n")};
  }
  // Only origin-form targets ("/path"); absolute-form ("http://host/path")
  // is for proxies, which this is not. "OPTIONS *" asks about the server.
  if (is_options && req.target == "*") return {.bytes = no_content};
  if (req.target.front() != '/') return {.bytes = plain_answer(400, is_head)};
  // DNS rebinding: a page whose name resolves to 127.0.0.1 is same-origin
  // with this server, so a loopback server answers only loopback names.
  if (loopback_ && req.has_host && !is_loopback_host(req.host)) return {.bytes = plain_answer(403, is_head)};
  const std::string path = req.target.substr(0, req.target.find_first_of("?#"));
  if (is_options) return {.bytes = no_content};
  if (path == "/" || path == "/index.html") return serve_index(is_head);
  return serve_file(path, is_head);
}

std::string TraceServer::verdict_for(const ServedTrace& trace) {
  const std::string full = root_ + "/" + trace.rel_path;
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0) return "unreadable: " + std::string(std::strerror(errno));
  const std::int64_t mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // One lock for lookup and compute: two index requests never read the
  // same large trace twice at once.
  std::lock_guard<std::mutex> lock(verdict_mu_);
  auto it = verdicts_.find(trace.rel_path);
  if (it != verdicts_.end() && it->second.size_bytes == size && it->second.mtime_ns == mtime_ns) {
    return it->second.verdict;
  }
  std::string verdict;
  Result<Trace> t = read_trace(full);
  if (!t) {
    verdict = "unreadable: " + t.error().message();
  } else {
    verdict = std::string(verdict_name(diagnose(*t).verdict));
  }
  verdicts_[trace.rel_path] = {size, mtime_ns, verdict};
  return verdict;
}

TraceServer::Answer TraceServer::serve_index(bool head) {
  std::string body =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tprof serve</title>\n"
      "<style>body{font:14px sans-serif;margin:2em}td,th{padding:.3em 1em;text-align:left}"
      "tr:nth-child(even){background:#f4f4f4}</style></head><body>\n"
      "<h1>tprof serve</h1>\n<p>" +
      html_escape(root_) + "</p>\n";
  const std::vector<ServedTrace> traces = find_traces(root_);
  if (traces.empty()) {
    body += "<p>No traces (*.json, *.json.gz) in this directory.</p>\n";
  } else {
    body += "<table>\n<tr><th>trace</th><th>size</th><th>verdict</th><th></th></tr>\n";
    for (const ServedTrace& t : traces) {
      body += "<tr><td><a href=\"" + html_escape(t.url_path) + "\">" + html_escape(t.rel_path) + "</a></td><td>" +
              format_size(t.size_bytes) + "</td><td class=\"verdict\">" + html_escape(verdict_for(t)) +
              "</td><td><a href=\"" + html_escape(perfetto_link(t)) + "\">open in Perfetto UI</a></td></tr>\n";
    }
    body += "</table>\n";
  }
  body += "</body></html>\n";
  std::string out = "HTTP/1.1 200 OK\r\n" + common_headers(options_.allow_origin) +
                    "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
                    "Content-Type: text/html; charset=utf-8\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n";
  if (!head) out += body;
  return {.bytes = std::move(out)};
}

TraceServer::Answer TraceServer::serve_file(const std::string& target_path, bool head) {
  const auto fail = [&](int status) { return Answer{.bytes = plain_answer(status, head)}; };
  const DecodedPath decoded = decode_request_path(target_path);
  if (decoded.check == PathCheck::kBadRequest) return fail(400);
  if (decoded.check != PathCheck::kOk) return fail(403);
  if (!is_trace_name(decoded.rel_path)) return fail(404);
  const std::string candidate = root_ + "/" + decoded.rel_path;
  char resolved[PATH_MAX];
  if (::realpath(candidate.c_str(), resolved) == nullptr) return fail(404);
  // The resolved file must lie under the root; the trailing '/' keeps
  // "/srv/traces-old" from passing as inside "/srv/traces".
  const std::string prefix = root_ == "/" ? root_ : root_ + "/";
  if (std::string_view(resolved).substr(0, prefix.size()) != prefix) return fail(403);
  // O_NOFOLLOW: the resolved path has no link left in its last component;
  // one put there since realpath() is refused rather than followed.
  // O_NONBLOCK: a FIFO named *.json does not hold the worker (and is
  // refused below as not a regular file).
  const int file = ::open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file < 0) return fail(errno == ENOENT ? 404 : 403);
  struct stat st {};
  if (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(file);
    return fail(404);
  }
  const bool gz = ends_with(decoded.rel_path, ".gz");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // A .json.gz goes out as the compressed bytes (no Content-Encoding):
  // Perfetto UI unpacks gzip itself, and the download stays the file.
  Answer a{.bytes = "HTTP/1.1 200 OK\r\n" + common_headers(options_.allow_origin) +
                    "Content-Type: " + (gz ? "application/gzip" : "application/json") +
                    "\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n"};
  if (head) {
    ::close(file);
  } else {
    a.file_fd = file;  // run()'s loop sends it and closes it
    a.file_size = size;
  }
  return a;
}

}  // namespace tprof::internal
