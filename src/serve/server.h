// tprof serve: the traces in a directory over HTTP on the loopback
// interface, so that Perfetto UI (https://ui.perfetto.dev) can fetch them.
//
//   TPROF_TRY_ASSIGN(auto server, TraceServer::start({.dir = "./log", .port = 9001}));
//   for (const ServedTrace& t : server->traces()) puts(server->perfetto_link(t).c_str());
//   TPROF_TRY(server->run());   // until stop() (a signal handler may call it)
//
// A small HTTP/1.1 server on plain POSIX sockets: one request per connection
// (Connection: close), GET and HEAD of trace files and of an index page,
// OPTIONS preflights, everything else 405. Only trace files (*.json,
// *.json.gz) inside the directory are served: the path is percent-decoded
// once, segments that are empty or start with '.', encoded separators and
// control bytes are refused, and the file's realpath must lie under the
// directory's realpath (docs/serve.md, "Security model").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/base/safe_text.h"  // html_escape, shared with tprof report
#include "tprof/status.h"

namespace tprof::internal {

struct ServeOptions {
  std::string dir;                          // the directory whose traces are served
  std::string bind_address = "127.0.0.1";  // numeric IPv4 or IPv6 address
  int port = 9001;                          // 0: the kernel picks a free port (see port())
  // Allowed origin for cross-origin reads (Access-Control-Allow-Origin).
  std::string allow_origin = "https://ui.perfetto.dev";
  // A client has this long to send its request head, and each write may
  // stall this long before the connection is dropped.
  int io_timeout_ms = 5000;
  // Stop after this many connections were accepted and answered; 0: never.
  std::uint64_t max_connections = 0;
  int workers = 8;  // connections handled at once; more wait in a short queue
};

// A trace file found under the directory.
struct ServedTrace {
  std::string rel_path;       // relative to the directory, '/'-separated, not encoded
  std::string url_path;       // "/" + the percent-encoded rel_path
  std::uint64_t size_bytes = 0;
};

// The outcome of checking a request target's path (below).
enum class PathCheck : std::uint8_t {
  kOk = 0,
  kBadRequest,  // malformed percent-encoding
  kForbidden,   // traversal, hidden or empty segment, encoded separator, control byte
};

struct DecodedPath {
  PathCheck check = PathCheck::kOk;
  std::string rel_path;  // decoded, '/'-separated, no leading '/', when kOk
};

// Checks and decodes the path of an origin-form target ("/a/b%20c.json",
// no query): each '/'-separated segment is percent-decoded exactly once and
// must be non-empty, not start with '.', and decode to no '/', '\\', NUL or
// other control byte.
DecodedPath decode_request_path(std::string_view path);

// Percent-encodes every byte of `rel_path` outside [A-Za-z0-9-._~/].
std::string percent_encode_path(std::string_view rel_path);

// True for the names served as traces: *.json and *.json.gz.
bool is_trace_name(std::string_view name);

// A request head (request line and header fields, without the blank line
// that ends it), checked strictly: one "METHOD SP target SP HTTP/1.x" line;
// fields "name: value" with a token name and a value free of NUL, CR, LF and
// other control bytes but tab; no folded lines; at most one Host, exactly
// one for HTTP/1.1, with a value that is a host and optional port.
struct RequestHead {
  int status = 0;      // 0: well-formed; else the status to answer with
  std::string method;
  std::string target;
  std::string host;    // Host's value, trimmed, when has_host
  bool has_host = false;
};
RequestHead parse_request_head(std::string_view head);

class TraceServer {
 public:
  // Resolves the directory, finds its traces and listens. Errors:
  // kInvalidArgument (no such directory, not a directory, bad address),
  // kIo (the address cannot be bound, e.g. the port is in use).
  static Result<std::unique_ptr<TraceServer>> start(const ServeOptions& options);
  ~TraceServer();
  TraceServer(const TraceServer&) = delete;
  TraceServer& operator=(const TraceServer&) = delete;

  int port() const { return port_; }
  const std::string& root() const { return root_; }  // the directory's realpath
  // The traces found by start(), by path. The index page looks again on each request.
  const std::vector<ServedTrace>& traces() const { return traces_; }
  // "http://127.0.0.1:PORT" (the bind address, or loopback for a wildcard one).
  const std::string& base_url() const { return base_url_; }
  // "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:PORT/<encoded path>".
  std::string perfetto_link(const ServedTrace& trace) const;

  // Serves on the calling thread until stop() or max_connections, then
  // waits for the connections in flight. Call once.
  Status run();
  // Asks run() to return. Thread-safe and async-signal-safe.
  void stop() noexcept;

  std::uint64_t connections_handled() const { return handled_.load(std::memory_order_relaxed); }

 private:
  explicit TraceServer(ServeOptions options) : options_(std::move(options)) {}

  void worker_loop();
  void handle_connection(int fd);
  void respond(int fd, const RequestHead& req);
  void serve_index(int fd, bool head);
  void serve_file(int fd, const std::string& target_path, bool head);
  std::string verdict_for(const ServedTrace& trace);

  ServeOptions options_;
  std::string root_;
  std::string base_url_;
  std::vector<ServedTrace> traces_;
  bool loopback_ = true;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> handled_{0};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<int> queue_;
  bool accept_done_ = false;
  std::vector<std::thread> workers_;

  // Verdicts by path, with the size and mtime they were computed for.
  struct CachedVerdict {
    std::uint64_t size_bytes = 0;
    std::int64_t mtime_ns = 0;
    std::string verdict;
  };
  std::mutex verdict_mu_;
  std::map<std::string, CachedVerdict> verdicts_;
};

}  // namespace tprof::internal
