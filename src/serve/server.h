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
//
// One thread (run()'s) owns every socket and never blocks on a client: it
// reads request heads and writes answers without blocking, each against one
// deadline for the whole head and one for the whole answer. Worker threads
// only build answers (the index page's verdicts can take seconds), so slow or
// silent clients cost a connection slot each, never a thread
// (docs/serve.md, "Slow and hostile clients").
#pragma once

#include <sys/socket.h>

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

  // Deadlines, each for a whole phase however the bytes trickle:
  // from accepting a connection to the end of its request head (then 408),
  int request_timeout_ms = 5000;
  // and from the first byte of an answer to its last: response_timeout_ms
  // plus one second per min_send_rate_bytes_per_s of answer (then the
  // connection is reset, the answer cut short).
  int response_timeout_ms = 10'000;
  std::uint64_t min_send_rate_bytes_per_s = 1 << 20;
  // After answering, how long to wait for the client to close before closing
  // (a close with unread bytes would reset the connection and could discard
  // the answer).
  int linger_ms = 1000;

  // Connections held at once (clamped to what RLIMIT_NOFILE allows), and per
  // client address; beyond either a new connection is answered 503.
  int max_open_connections = 512;
  int max_connections_per_client = 256;
  // Threads that build answers (the index page, file lookups); requests
  // waiting for one are capped too (docs/serve.md), beyond that 503.
  int workers = 4;
  // For tests: return from run() once this many connections were accepted
  // and closed; 0: never.
  std::uint64_t exit_after_connections = 0;
};

// What the server has done so far; counters only grow, except open_connections.
struct ServeStats {
  std::uint64_t accepted = 0;           // connections accepted
  std::uint64_t closed = 0;             // connections closed (answered or not)
  std::uint64_t open_connections = 0;   // held now (accepted - closed), 503 lane included
  std::uint64_t busy = 0;               // answered 503 (a limit was reached)
  std::uint64_t request_timeouts = 0;   // answered 408 (no whole head in time)
  std::uint64_t response_timeouts = 0;  // reset before the whole answer was sent
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

// The key of the per-client connection limit for a client's address (its
// port aside): one key for every loopback address (127.0.0.0/8, ::1,
// ::ffff:127.0.0.0/104), since every local process can use any of them;
// an IPv6 address by its /64; another IPv4 address (mapped or not) by
// itself.
std::string peer_key(const sockaddr_storage& addr);

// A request head (request line and header fields, without the blank line
// that ends it), checked strictly: one "METHOD SP target SP HTTP/1.x" line;
// fields "name: value" with a token name and a value free of NUL, CR, LF and
// other control bytes but tab; no folded lines; at most one Host, exactly
// one for HTTP/1.1, with a value that is a host and optional port (1..65535).
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

  // Serves on the calling thread until stop() or exit_after_connections,
  // then lets answers under way finish (at most a second after stop()).
  // Call once. Errors: kIo when poll() fails.
  Status run();
  // Asks run() to return. Thread-safe and async-signal-safe.
  void stop() noexcept;

  // Thread-safe; the counters are read one by one, not as one snapshot.
  ServeStats stats() const;
  std::uint64_t connections_handled() const { return closed_.load(std::memory_order_relaxed); }
  // max_open_connections after clamping to the descriptor limit.
  int max_open_connections() const { return options_.max_open_connections; }

 private:
  explicit TraceServer(ServeOptions options) : options_(std::move(options)) {}

  struct Loop;  // run()'s sockets and their state (server.cc)
  // An answer a worker built for a connection: head and in-memory body in
  // `bytes`, then `file_size` bytes of `file_fd` (-1: none), owned.
  struct Answer {
    std::uint64_t conn_id = 0;
    std::string bytes;
    int file_fd = -1;
    std::uint64_t file_size = 0;
  };
  struct Job {
    std::uint64_t conn_id = 0;
    RequestHead request;
  };

  void worker_loop();
  void wake() noexcept;
  Answer answer_request(const RequestHead& req);
  std::string plain_answer(int status, bool head_only, std::string_view extra_headers = {}) const;
  Answer serve_index(bool head);
  Answer serve_file(const std::string& target_path, bool head);
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

  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> closed_{0};
  std::atomic<std::uint64_t> busy_{0};
  std::atomic<std::uint64_t> request_timeouts_{0};
  std::atomic<std::uint64_t> response_timeouts_{0};

  // Requests waiting for a worker, and the answers workers built; run()'s
  // thread is woken through wake_fds_ when an answer is ready.
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  bool workers_done_ = false;
  std::mutex answers_mu_;
  std::deque<Answer> answers_;
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
