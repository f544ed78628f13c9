#include "src/serve/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof::internal {

namespace {

// Limits on what a client may send before it is answered (docs/serve.md).
constexpr std::size_t kMaxRequestLine = 8 * 1024;
constexpr std::size_t kMaxHead = 16 * 1024;
constexpr int kMaxHeaderFields = 100;
// Connections accepted but not yet picked up by a worker; beyond this the
// server answers 503 at once instead of letting them wait.
constexpr std::size_t kMaxQueued = 64;
// After answering, what the client may still send is read and dropped (up to
// this much, for at most the linger time) so that closing does not reset
// the connection before the client has read the answer.
constexpr std::size_t kMaxDrain = 1 << 20;
constexpr int kLingerMs = 1000;

using Clock = std::chrono::steady_clock;

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

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Host's value: host [":" port] (RFC 9110 7.2, RFC 3986 3.2.2), where host is
// an IP literal in brackets or a registered name / IPv4 address.
bool is_valid_host(std::string_view host) {
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (const char c : host.substr(1, close - 1)) {
      if (!is_hex(c) && c != ':' && c != '.') return false;
    }
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
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
    port = colon == std::string_view::npos ? std::string_view() : host.substr(colon + 1);
  }
  return port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Writes all of `bytes`; false when the peer went away or stalled past the
// socket's send timeout. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
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
  const std::string h = lower(host);
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

std::string percent_encode_path(std::string_view rel_path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : rel_path) {
    const auto u = static_cast<unsigned char>(c);
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

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
    if (lower(field.substr(0, colon)) == "host") {
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
  s->listen_fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
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
    std::lock_guard<std::mutex> lock(queue_mu_);
    accept_done_ = true;
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  for (const int fd : queue_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (const int fd : wake_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::string TraceServer::perfetto_link(const ServedTrace& trace) const {
  // Perfetto UI decodes its route arguments once, so a '%' of the encoded
  // path is itself encoded; every other byte is already safe in the fragment.
  std::string link = "https://ui.perfetto.dev/#!/?url=" + base_url_;
  for (const char c : trace.url_path) {
    if (c == '%') {
      link += "%25";
    } else {
      link.push_back(c);
    }
  }
  return link;
}

void TraceServer::stop() noexcept {
  stopping_.store(true, std::memory_order_relaxed);
  if (wake_fds_[1] >= 0) {
    const char byte = 1;
    // Async-signal-safe; a full pipe already holds a wake-up.
    [[maybe_unused]] const ssize_t n = ::write(wake_fds_[1], &byte, 1);
  }
}

Status TraceServer::run() {
  const int workers = std::max(1, options_.workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  std::uint64_t accepted = 0;
  Status status;
  while (!stopping_.load(std::memory_order_relaxed) &&
         (options_.max_connections == 0 || accepted < options_.max_connections)) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = Error(ErrorCode::kIo, std::string("poll: ") + std::strerror(errno));
      break;
    }
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // The peer may have gone already (ECONNABORTED), or descriptors ran
      // out for a moment: neither stops the server.
      if (errno == EMFILE || errno == ENFILE) ::poll(nullptr, 0, 10);
      continue;
    }
    ++accepted;
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (queue_.size() < kMaxQueued) {
        queue_.push_back(fd);
        queued = true;
      }
    }
    if (queued) {
      queue_cv_.notify_one();
    } else {
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n";
      ::send(fd, kBusy.data(), kBusy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      handled_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    accept_done_ = true;
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  ::close(listen_fd_);
  listen_fd_ = -1;
  return status;
}

void TraceServer::worker_loop() {
  // sendfile() to a closed peer raises SIGPIPE (send() has MSG_NOSIGNAL);
  // blocked here it stays pending on this thread and is dropped with it.
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
  while (true) {
    int fd = -1;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return !queue_.empty() || accept_done_; });
      if (queue_.empty()) return;
      fd = queue_.front();
      queue_.pop_front();
    }
    // On a signal, connections still waiting are closed unanswered.
    if (!stopping_.load(std::memory_order_relaxed)) handle_connection(fd);
    ::close(fd);
    handled_.fetch_add(1, std::memory_order_relaxed);
  }
}

void TraceServer::handle_connection(int fd) {
  const timeval tv{options_.io_timeout_ms / 1000, (options_.io_timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  // Read the request head against one deadline, so a client that trickles
  // bytes cannot hold a worker longer than io_timeout_ms.
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.io_timeout_ms);
  std::string buf;
  int early = 0;  // an answer decided before the head is complete
  std::size_t scanned = 0;
  std::size_t head_end = std::string::npos;
  char chunk[4096];
  while (true) {
    // A lone CR or LF is refused at once (a head ending in "\n\n" would
    // otherwise wait for its deadline); a CR at the very end may yet be
    // followed by its LF.
    for (; early == 0 && scanned < buf.size(); ++scanned) {
      if (buf[scanned] == '\n' && (scanned == 0 || buf[scanned - 1] != '\r')) early = 400;
      if (buf[scanned] == '\r') {
        if (scanned + 1 == buf.size()) break;
        if (buf[scanned + 1] != '\n') early = 400;
      }
    }
    if (early != 0) break;
    head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos) break;
    const std::size_t line_end = buf.find("\r\n");
    if (line_end == std::string::npos && buf.size() > kMaxRequestLine) {
      early = 414;
      break;
    }
    if (buf.size() > kMaxHead) {
      early = 431;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      early = 408;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      early = 408;
      break;
    }
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client left (or reset) before sending a request
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  RequestHead req;
  if (early != 0) {
    req.status = early;
  } else {
    req = parse_request_head(std::string_view(buf).substr(0, head_end));
  }
  respond(fd, req);

  // Lingering close: tell the client we are done, then drop what it still
  // sends until it closes, so the kernel does not reset the connection
  // (and discard the answer) because unread bytes were left behind.
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point linger_end = Clock::now() + std::chrono::milliseconds(kLingerMs);
  std::size_t drained = 0;
  while (drained < kMaxDrain) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(linger_end - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
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

void TraceServer::respond(int fd, const RequestHead& req) {
  auto answer = [&](int status, std::string_view extra_headers = {}) {
    const std::string body = std::to_string(status) + " " + reason_phrase(status) + "\n";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    out += common_headers(options_.allow_origin);
    out += extra_headers;
    out += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    if (req.method != "HEAD") out += body;
    send_all(fd, out);
  };
  if (req.status != 0) return answer(req.status);
  const bool is_get = req.method == "GET";
  const bool is_head = req.method == "HEAD";
  const bool is_options = req.method == "OPTIONS";
  if (!is_get && !is_head && !is_options) return answer(405, "Allow: GET, HEAD, OPTIONS\r\n");
  // Only origin-form targets ("/path"); absolute-form ("http://host/path")
  // is for proxies, which this is not. "OPTIONS *" asks about the server.
  if (is_options && req.target == "*") {
    send_all(fd, "HTTP/1.1 204 No Content\r\n" + common_headers(options_.allow_origin) +
                     "Allow: GET, HEAD, OPTIONS\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  if (req.target.front() != '/') return answer(400);
  // DNS rebinding: a page whose name resolves to 127.0.0.1 is same-origin
  // with this server, so a loopback server answers only loopback names.
  if (loopback_ && req.has_host && !is_loopback_host(req.host)) return answer(403);
  const std::string path = req.target.substr(0, req.target.find_first_of("?#"));
  if (is_options) {
    send_all(fd, "HTTP/1.1 204 No Content\r\n" + common_headers(options_.allow_origin) +
                     "Allow: GET, HEAD, OPTIONS\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  if (path == "/" || path == "/index.html") return serve_index(fd, is_head);
  serve_file(fd, path, is_head);
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

void TraceServer::serve_index(int fd, bool head) {
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
  send_all(fd, out);
}

void TraceServer::serve_file(int fd, const std::string& target_path, bool head) {
  auto fail = [&](int status) {
    const std::string body = std::to_string(status) + " " + reason_phrase(status) + "\n";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n" +
                      common_headers(options_.allow_origin) +
                      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n";
    if (!head) out += body;
    send_all(fd, out);
  };
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
  const std::string out = "HTTP/1.1 200 OK\r\n" + common_headers(options_.allow_origin) +
                          "Content-Type: " + (gz ? "application/gzip" : "application/json") +
                          "\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n";
  if (send_all(fd, out) && !head) {
    off_t offset = 0;
    while (static_cast<std::uint64_t>(offset) < size) {
      const ssize_t n = ::sendfile(fd, file, &offset, size - static_cast<std::uint64_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // peer gone, stalled past SO_SNDTIMEO, or the file shrank
    }
  }
  ::close(file);
}

}  // namespace tprof::internal
