// tprof serve: the HTTP server over a temporary directory, driven with raw
// sockets; path refusals, CORS, the index page, the strict head parser,
// deadlines and connection limits against slow and silent clients (the
// load test is serve_load_test.cc), and the CLI's exit codes and signal
// handling.
#include "src/serve/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/serve_client.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof::internal::serve_test {
namespace {

namespace fs = std::filesystem;


std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory with two traces, one gzipped, one with a name that needs
// escaping, links out of it and a secret next to it.
class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tprof_serve_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/traces";
    fs::create_directories(dir_ + "/sub dir");
    fs::create_directories(dir_ + "/.git");
    fs::create_directories(base_ + "/traces-evil");
    fs::copy_file(kTrace, dir_ + "/after_fix_trace.json");
    fs::copy_file(kTrace, dir_ + "/sub dir/a&b <x>.json");
    fs::copy_file(kGzTrace, dir_ + "/w.pt.trace.json.gz");
    std::ofstream(base_ + "/secret.json") << "SECRET";
    std::ofstream(base_ + "/traces-evil/x.json") << "SECRET";
    std::ofstream(dir_ + "/.git/hidden.json") << "SECRET";
    std::ofstream(dir_ + "/notes.txt") << "not a trace";
    fs::create_symlink(base_ + "/secret.json", dir_ + "/out.json");
    fs::create_symlink("../traces-evil/x.json", dir_ + "/prefix.json");  // shares the root's prefix
    fs::create_symlink("after_fix_trace.json", dir_ + "/inside.json");   // a link that stays inside
  }
  void TearDown() override {
    stop_server();
    fs::remove_all(base_);
  }

  void start_server(ServeOptions options = {}) {
    options.dir = dir_;
    options.port = 0;
    Result<std::unique_ptr<TraceServer>> s = TraceServer::start(options);
    ASSERT_TRUE(s) << s.error().to_string();
    server_ = std::move(s).value();
    port_ = server_->port();
    // The socket listens once start() returns: connections wait in its
    // backlog until run() accepts them, so no sleep is needed.
    thread_ = std::thread([this] { run_status_ = server_->run(); });
  }
  void stop_server() {
    if (!server_) return;
    server_->stop();
    thread_.join();
    EXPECT_TRUE(run_status_);
    server_.reset();
  }
  // Waits (at most 10 s) until the server holds `n` connections, so that
  // connections counted on are accepted, not waiting in the kernel's backlog.
  bool wait_open(std::uint64_t n) {
    const Clock::time_point end = Clock::now() + milliseconds(10'000);
    while (server_->stats().open_connections != n) {
      if (Clock::now() > end) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  }

  std::string base_, dir_;
  std::unique_ptr<TraceServer> server_;
  std::thread thread_;
  Status run_status_;
  int port_ = 0;
};

TEST_F(ServeTest, FindsTracesRecursivelyAndPrintsPerfettoLinks) {
  start_server();
  std::vector<std::string> names;
  for (const ServedTrace& t : server_->traces()) names.push_back(t.rel_path);
  // Hidden entries, non-traces and links out of the directory are left out.
  EXPECT_EQ(names, (std::vector<std::string>{"after_fix_trace.json", "inside.json", "sub dir/a&b <x>.json",
                                             "w.pt.trace.json.gz"}));
  EXPECT_EQ(server_->perfetto_link(server_->traces()[0]),
            "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" + std::to_string(port_) + "/after_fix_trace.json");
  EXPECT_EQ(server_->traces()[2].url_path, "/sub%20dir/a%26b%20%3Cx%3E.json");
  // Perfetto UI decodes the url argument once: the path's '%' are encoded again.
  EXPECT_EQ(server_->perfetto_link(server_->traces()[2]),
            "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" + std::to_string(port_) +
                "/sub%2520dir/a%2526b%2520%253Cx%253E.json");
}

TEST_F(ServeTest, GetReturnsTheExactBytesWithCors) {
  start_server();
  const Response r = get(port_, "/after_fix_trace.json");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, slurp(kTrace));
  EXPECT_TRUE(r.has_header("Access-Control-Allow-Origin: https://ui.perfetto.dev")) << r.head;
  EXPECT_TRUE(r.has_header("Content-Type: application/json")) << r.head;
  EXPECT_TRUE(r.has_header("Content-Length: " + std::to_string(slurp(kTrace).size()))) << r.head;
  EXPECT_TRUE(r.has_header("Connection: close")) << r.head;

  const Response gz = get(port_, "/w.pt.trace.json.gz");
  ASSERT_EQ(gz.status, 200);
  EXPECT_EQ(gz.body, slurp(kGzTrace));  // served compressed, unchanged
  EXPECT_TRUE(gz.has_header("Content-Type: application/gzip")) << gz.head;

  const Response enc = get(port_, "/sub%20dir/a%26b%20%3Cx%3E.json?x=1");
  EXPECT_EQ(enc.status, 200);
  EXPECT_EQ(enc.body, slurp(kTrace));
  EXPECT_EQ(get(port_, "/inside.json").status, 200);  // a link that stays inside is fine

  const Response head = get(port_, "/after_fix_trace.json", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_TRUE(head.has_header("Content-Length: " + std::to_string(slurp(kTrace).size()))) << head.head;
}

TEST_F(ServeTest, AllowOriginIsConfigurable) {
  start_server({.allow_origin = "*"});
  EXPECT_TRUE(get(port_, "/after_fix_trace.json").has_header("Access-Control-Allow-Origin: *"));
}

TEST_F(ServeTest, AnswersPreflight) {
  start_server();
  const Response r = http_exchange(port_,
                              "OPTIONS /after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
                              "Origin: https://ui.perfetto.dev\r\nAccess-Control-Request-Method: GET\r\n"
                              "Access-Control-Request-Private-Network: true\r\n\r\n");
  EXPECT_EQ(r.status, 204) << r.head;
  EXPECT_TRUE(r.has_header("Access-Control-Allow-Origin: https://ui.perfetto.dev")) << r.head;
  EXPECT_TRUE(r.has_header("Access-Control-Allow-Methods: GET, HEAD, OPTIONS")) << r.head;
  EXPECT_TRUE(r.has_header("Access-Control-Allow-Headers: *")) << r.head;
  EXPECT_TRUE(r.has_header("Access-Control-Allow-Private-Network: true")) << r.head;
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(http_exchange(port_, "OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 204);
}

TEST_F(ServeTest, IndexListsTracesWithVerdictsAndLinks) {
  start_server();
  const Response r = get(port_, "/");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.has_header("Content-Type: text/html; charset=utf-8")) << r.head;
  Result<Trace> t = read_trace(kTrace);
  ASSERT_TRUE(t);
  const std::string verdict(verdict_name(diagnose(*t).verdict));
  EXPECT_NE(r.body.find("<a href=\"/after_fix_trace.json\">after_fix_trace.json</a>"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("<td class=\"verdict\">" + verdict + "</td>"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(html_escape(server_->perfetto_link(server_->traces()[0]))), std::string::npos);
  // Every name is escaped.
  EXPECT_NE(r.body.find("sub dir/a&amp;b &lt;x&gt;.json"), std::string::npos);
  EXPECT_EQ(r.body.find("<x>"), std::string::npos);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  EXPECT_EQ(r.body.find("hidden.json"), std::string::npos);
  // Cached: a second index is the same page.
  EXPECT_EQ(get(port_, "/index.html").body, r.body);
}

TEST_F(ServeTest, RefusesEverythingOutsideTheDirectory) {
  start_server();
  const std::vector<std::string> targets = {
      "/../secret.json",
      "/%2e%2e/secret.json",
      "/%2E%2E/secret.json",
      "/%252e%252e/secret.json",
      "/..%2fsecret.json",
      "/sub%20dir/..%2F..%2Fsecret.json",
      "/sub dir/../../secret.json",
      "/./after_fix_trace.json",
      "//etc/passwd",
      "/etc/passwd",
      "/%2fetc%2fpasswd",
      "/out.json",
      "/prefix.json",
      "/.git/hidden.json",
      "/after_fix_trace.json%00.txt",
      "/x%00.json",
      "/after_fix_trace.json%5c..%5c..%5csecret.json",
      "/notes.txt",
      "/sub%20dir",
      "/%zz.json",
      "/%2",
      "http://evil/etc/passwd",
      "http://127.0.0.1/../secret.json",
  };
  for (const std::string& target : targets) {
    const Response r = get(port_, target);
    EXPECT_TRUE(r.status == 400 || r.status == 403 || r.status == 404) << target << " -> " << r.status;
    EXPECT_EQ(r.body.find("SECRET"), std::string::npos) << target;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << target;
  }
  // The ones that name something real outside are refused as such.
  EXPECT_EQ(get(port_, "/../secret.json").status, 403);
  EXPECT_EQ(get(port_, "/%2e%2e/secret.json").status, 403);
  EXPECT_EQ(get(port_, "/..%2fsecret.json").status, 403);
  EXPECT_EQ(get(port_, "/out.json").status, 403);
  EXPECT_EQ(get(port_, "/prefix.json").status, 403);
  EXPECT_EQ(get(port_, "/x%00.json").status, 403);
  EXPECT_EQ(get(port_, "http://evil/etc/passwd").status, 400);
  // A raw NUL byte in the request line is malformed.
  static constexpr char kNul[] = "GET /after_fix_trace.json\0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(http_exchange(port_, std::string(kNul, sizeof kNul - 1)).status, 400);
}

TEST_F(ServeTest, RejectsBadRequestsMethodsAndForeignHosts) {
  start_server();
  const Response del = get(port_, "/after_fix_trace.json", "DELETE");
  EXPECT_EQ(del.status, 405);
  EXPECT_TRUE(del.has_header("Allow: GET, HEAD, OPTIONS")) << del.head;
  EXPECT_EQ(get(port_, "/after_fix_trace.json", "POST").status, 405);
  EXPECT_EQ(http_exchange(port_, "garbage\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1 extra\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(port_, "GET / FTP/1.0\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nno colon here\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n").status, 400);
  // DNS rebinding: a loopback server answers loopback names only.
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n").status, 403);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: localhost:9001\r\n\r\n").status, 200);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.0\r\n\r\n").status, 200);
}

TEST_F(ServeTest, HugeHeadersGet4xx) {
  start_server();
  const std::string big(100 * 1024, 'a');
  const Response header = http_exchange(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + big + "\r\n\r\n");
  EXPECT_EQ(header.status, 431);
  const Response line = http_exchange(port_, "GET /" + big + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(line.status, 414);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(http_exchange(port_, many + "\r\n").status, 431);
  EXPECT_EQ(get(port_, "/after_fix_trace.json").status, 200);  // and it still answers
}

TEST_F(ServeTest, SlowClientTimesOutWithoutBlockingOthers) {
  start_server({.request_timeout_ms = 1000});
  const int idle = connect_to(port_);  // sends nothing
  ASSERT_GE(idle, 0);
  const int partial = connect_to(port_);  // sends half a request
  ASSERT_GE(partial, 0);
  ASSERT_EQ(::send(partial, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL), 16);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(get(port_, "/after_fix_trace.json").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(800));
  // The idle ones are answered 408 once their time is up, and closed.
  for (const int fd : {idle, partial}) {
    const Received raw = read_until_close(fd, milliseconds(10'000));
    EXPECT_EQ(raw.bytes.rfind("HTTP/1.1 408 ", 0), 0u) << raw.bytes;
    EXPECT_TRUE(raw.eof);
    ::close(fd);
  }
}

// A trace-named file of `size_bytes`: bigger than what the socket buffers
// of both ends hold, so that sending it waits on the reader.
void write_big_trace(const std::string& path, std::size_t size_bytes) {
  std::ofstream out(path, std::ios::binary);
  const std::string open = "{\"traceEvents\": [], \"pad\": \"";
  out << open << std::string(size_bytes - open.size() - 2, 'x') << "\"}";
}

// Review finding G (issue 23): eight clients reading 64 KB every ~11 s held
// every worker, because the send timeout was per call. Twelve slow readers
// now hold twelve connection slots and no thread.
TEST_F(ServeTest, SlowReadersDoNotHoldTheServer) {
  write_big_trace(dir_ + "/big.json", 8 << 20);
  start_server();
  std::vector<int> slow;
  for (int i = 0; i < 12; ++i) {
    const int fd = connect_to(port_, 64 * 1024);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /big.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    slow.push_back(fd);
  }
  ASSERT_TRUE(wait_open(12));
  std::atomic<bool> done{false};
  std::thread reader([&] {  // 64 KB a second each: never stalled, never done
    char buf[65536];
    while (!done.load()) {
      for (const int fd : slow) ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      for (int i = 0; i < 20 && !done.load(); ++i) std::this_thread::sleep_for(milliseconds(50));
    }
  });
  for (int i = 0; i < 8; ++i) {
    const Response r = get(port_, i % 2 == 0 ? "/after_fix_trace.json" : "/", "GET", milliseconds(5000));
    EXPECT_EQ(r.status, 200) << "request " << i << ": " << r.raw.bytes.substr(0, 200);
    if (r.status != 200) break;
  }
  done.store(true);
  reader.join();
  for (const int fd : slow) ::close(fd);
}

// Review finding G: the send deadline is for the whole answer, not each
// call. A reader that keeps taking 64 KB every 200 ms is cut off once
// response_timeout_ms plus size / min_send_rate has passed.
TEST_F(ServeTest, SlowReaderIsCutOffAtTheResponseDeadline) {
  write_big_trace(dir_ + "/big.json", 8 << 20);
  // 1 s + 8 MB at 64 MB/s: about 1.1 s for the whole answer.
  start_server({.response_timeout_ms = 1000, .min_send_rate_bytes_per_s = 64 << 20});
  const int fd = connect_to(port_, 64 * 1024);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /big.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const Clock::time_point start = Clock::now();
  std::size_t received = 0;
  bool closed = false;
  char buf[65536];
  while (!closed && Clock::now() - start < milliseconds(10'000)) {
    std::this_thread::sleep_for(milliseconds(200));
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) received += static_cast<std::size_t>(n);
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  const auto took = Clock::now() - start;
  ::close(fd);
  EXPECT_TRUE(closed) << "still sending after 10 s; " << received << " bytes so far";
  EXPECT_LT(received, std::size_t{8} << 20);
  EXPECT_GE(took, milliseconds(1000));  // not before its deadline
  EXPECT_EQ(server_->stats().response_timeouts, 1u);
  EXPECT_EQ(get(port_, "/after_fix_trace.json").status, 200);
}

// Review finding G: 80 half-open connections (connected, silent) left 0 of
// 36 requests answered. A hundred now wait for their 408 in slots of their
// own while 36 requests from four clients are answered.
TEST_F(ServeTest, HalfOpenConnectionsDoNotStarveOthers) {
  start_server();
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  EXPECT_TRUE(wait_open(100));  // held by the server, not waiting in the backlog
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 9; ++i) {
        const Response r = get(port_, (c + i) % 3 == 0 ? "/" : "/after_fix_trace.json", "GET", milliseconds(5000));
        if (r.status != 200) return;
        ok.fetch_add(1);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 36);
  for (const int fd : idle) ::close(fd);
}

// Review finding G: the 503 came as a reset (closed with the request unread).
// Now it is a whole answer the client reads, then a clean close.
TEST_F(ServeTest, BusyIsAComplete503ThenAClose) {
  start_server({.max_open_connections = 8, .workers = 1});
  // Seventy silent connections fill the server (before: one worker and a
  // queue of 64). Those refused already are read and closed.
  std::vector<int> held;
  for (int i = 0; i < 70; ++i) {
    const int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));
  std::erase_if(held, [](int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return false;
    read_until_close(fd, milliseconds(5000));
    ::close(fd);
    return true;
  });
  for (int i = 0; i < 20; ++i) {
    const int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const Response r = parse_response(read_until_close(fd, milliseconds(5000)));
    ::close(fd);
    EXPECT_EQ(r.status, 503) << i << ": " << r.raw.bytes;
    EXPECT_TRUE(r.raw.eof) << i << (r.raw.reset ? ": reset" : ": no close");
    EXPECT_TRUE(r.has_header("Retry-After: 1")) << r.head;
    EXPECT_TRUE(r.has_header("Access-Control-Allow-Origin: https://ui.perfetto.dev")) << r.head;
    if (r.status != 503 || !r.raw.eof) break;
  }
  for (const int fd : held) ::close(fd);
}

// One address may hold max_connections_per_client connections; the next
// is answered 503, while another address is still served.
TEST_F(ServeTest, PerClientConnectionLimit) {
  start_server({.max_connections_per_client = 4});
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    const int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  ASSERT_TRUE(wait_open(4));
  const Response busy = get(port_, "/after_fix_trace.json");
  EXPECT_EQ(busy.status, 503) << busy.head;
  EXPECT_TRUE(busy.raw.eof);
  ::close(held.back());
  held.pop_back();
  ASSERT_TRUE(wait_open(3));
  EXPECT_EQ(get(port_, "/after_fix_trace.json").status, 200);
  for (const int fd : held) ::close(fd);
  EXPECT_GE(server_->stats().busy, 1u);
}

// Issue 36, defect 10: every address of 127.0.0.0/8 reaches this host, and
// each counted as a client of its own: 600 connections held from 127.0.0.2,
// 127.0.0.3, ... took the whole server (512), and ordinary requests got
// 503. Every loopback address is now one client: held connections from
// 127.0.0.2..5 fill the per-client limit for 127.0.0.1 and 127.0.0.6 too.
TEST_F(ServeTest, EveryLoopbackAddressIsOneClient) {
  start_server({.max_connections_per_client = 4});
  std::vector<int> held;
  for (const char* source : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    const int fd = connect_to(port_, 0, source);
    if (fd < 0) {
      for (const int h : held) ::close(h);
      GTEST_SKIP() << "cannot bind a client socket to " << source;
    }
    held.push_back(fd);
  }
  ASSERT_TRUE(wait_open(4));
  for (const char* source : {"127.0.0.1", "127.0.0.6", "127.255.255.254"}) {
    const int fd = connect_to(port_, 0, source);
    ASSERT_GE(fd, 0) << source;
    ASSERT_TRUE(send_all(fd, "GET /after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const Response r = parse_response(read_until_close(fd, milliseconds(10'000)));
    EXPECT_EQ(r.status, 503) << source << ": " << r.head;
    ::close(fd);
  }
  // A slot freed by any of them is the client's again.
  ::close(held.back());
  held.pop_back();
  ASSERT_TRUE(wait_open(3));
  const int fd = connect_to(port_, 0, "127.0.0.7");
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_EQ(parse_response(read_until_close(fd, milliseconds(10'000))).status, 200);
  ::close(fd);
  for (const int h : held) ::close(h);
}

TEST(ServePeerKeyTest, LoopbackIsOneClientIpv6ByItsSlash64) {
  auto v4 = [](const char* text) {
    sockaddr_storage ss{};
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(1234);
    EXPECT_EQ(::inet_pton(AF_INET, text, &a->sin_addr), 1) << text;
    return peer_key(ss);
  };
  auto v6 = [](const char* text) {
    sockaddr_storage ss{};
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(4321);
    EXPECT_EQ(::inet_pton(AF_INET6, text, &a->sin6_addr), 1) << text;
    return peer_key(ss);
  };
  const std::string lo = v4("127.0.0.1");
  for (const std::string& k : {v4("127.0.0.2"), v4("127.255.255.255"), v4("127.1.2.3"), v6("::1"),
                               v6("::ffff:127.0.0.1"), v6("::ffff:127.9.8.7")}) {
    EXPECT_EQ(k, lo);
  }
  EXPECT_NE(v4("10.0.0.1"), lo);
  EXPECT_NE(v4("128.0.0.1"), lo);
  EXPECT_NE(v4("10.0.0.1"), v4("10.0.0.2"));
  EXPECT_EQ(v6("::ffff:10.0.0.1"), v4("10.0.0.1"));  // mapped: the IPv4 client
  // One /64 is one client; the next /64 another.
  EXPECT_EQ(v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff:ffff:ffff:ffff"));
  EXPECT_NE(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
  EXPECT_NE(v6("::2"), lo);
  EXPECT_NE(v6("fe80::1"), v6("fe81::1"));
}

// Review finding I: with two Host fields the last won, so "Host: evil" then
// "Host: 127.0.0.1" passed the DNS-rebinding check. Exactly one Host now
// (HTTP/1.1; at most one for 1.0), and its value must be a host[:port].
TEST_F(ServeTest, HostIsOneWellFormedField) {
  start_server();
  const std::vector<std::string> bad = {
      "GET / HTTP/1.1\r\nHost: evil.example\r\nHost: 127.0.0.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nhost: localhost\r\n\r\n",
      "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n",
      "GET / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1 evil\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1/x\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1:x\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: user@127.0.0.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
      // Issue 36: a port is 1..65535.
      "GET / HTTP/1.1\r\nHost: 127.0.0.1:99999\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: 127.0.0.1:0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: [::1]:65536\r\n\r\n",
  };
  for (const std::string& request : bad) {
    EXPECT_EQ(http_exchange(port_, request).status, 400) << request;
  }
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: [::1]:9001\r\n\r\n").status, 200);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nhOsT:\t127.0.0.1:9001 \r\n\r\n").status, 200);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.0\r\n\r\n").status, 200);
}

// Review finding I: NUL bytes in header values were accepted. NUL, a lone
// CR or LF, and other control bytes (tab aside) in any value are 400; so is
// a head whose lines end in a bare LF, at once rather than at the deadline.
TEST_F(ServeTest, ControlBytesInHeaderValuesAreRefused) {
  start_server();
  for (const char c : {'\0', '\r', '\n', '\x01', '\x1b', '\x7f'}) {
    const std::string host = "GET / HTTP/1.1\r\nHost: 127.0.0.1" + std::string(1, c) + "x\r\n\r\n";
    EXPECT_EQ(http_exchange(port_, host).status, 400) << static_cast<int>(c);
    const std::string other =
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Other: a" + std::string(1, c) + "b\r\n\r\n";
    EXPECT_EQ(http_exchange(port_, other).status, 400) << static_cast<int>(c);
  }
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tab: a\tb\r\n\r\n").status, 200);
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Utf8: \xc3\xa9\r\n\r\n").status, 200);
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(http_exchange(port_, "GET / HTTP/1.1\nHost: 127.0.0.1\n\n").status, 400);
  EXPECT_LT(Clock::now() - start, milliseconds(4000));  // not the 5 s head deadline
}

// Bytes trickled one at a time do not extend the head's deadline.
TEST_F(ServeTest, TrickledHeadGets408AtItsDeadline) {
  start_server({.request_timeout_ms = 1000});
  // From before the connection: the server's deadline runs from its accept,
  // which may come before connect() returns here (under ASan it read 997 ms).
  const Clock::time_point start = Clock::now();
  const int fd = connect_to(port_);
  ASSERT_GE(fd, 0);
  const std::string head = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  std::size_t sent = 0;
  Received raw;
  while (Clock::now() - start < milliseconds(10'000)) {
    if (::send(fd, sent < head.size() ? &head[sent] : "x", 1, MSG_NOSIGNAL) != 1) break;
    ++sent;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 1) {
      raw = read_until_close(fd, milliseconds(5000));
      break;
    }
  }
  const auto took = Clock::now() - start;
  ::close(fd);
  EXPECT_EQ(raw.bytes.rfind("HTTP/1.1 408 ", 0), 0u) << raw.bytes;
  EXPECT_GE(took, milliseconds(1000));
  EXPECT_LT(took, milliseconds(6000));
}

TEST(ServeParseTest, RequestHeadsAreParsedStrictly) {
  RequestHead r = parse_request_head("GET /a.json?x HTTP/1.1\r\nHost: localhost:9001\r\nAccept: */*");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/a.json?x");
  EXPECT_TRUE(r.has_host);
  EXPECT_EQ(r.host, "localhost:9001");
  r = parse_request_head("GET / HTTP/1.0");
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.has_host);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost:").status, 0);  // empty: allowed, not loopback
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nHost: a").status, 400);
  EXPECT_EQ(parse_request_head(std::string("GET / HTTP/1.1\r\nHost: a\r\nX: \0", 30)).status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\nX: b").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\n X: b").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nX : b").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\n: b").status, 400);
  EXPECT_EQ(parse_request_head("GET  / HTTP/1.1\r\nHost: a").status, 400);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.2\r\nHost: a").status, 505);
  EXPECT_EQ(parse_request_head("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: a").status, 414);
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(17000, 'a')).status, 431);
  std::string many = "GET / HTTP/1.1\r\nHost: a";
  for (int i = 0; i < 100; ++i) many += "\r\nX: 1";
  EXPECT_EQ(parse_request_head(many).status, 431);
  for (const char* host : {"127.0.0.1", "localhost", "[::1]", "[::1]:1", "a-b.example:80", "127.0.0.1:65535",
                           "[::1]:65535", "localhost:00080", "h:1"}) {
    EXPECT_EQ(parse_request_head(std::string("GET / HTTP/1.1\r\nHost: ") + host).status, 0) << host;
  }
  // Issue 36: "127.0.0.1:99999" was accepted (up to 5 digits, any value). A
  // port is 1..65535, digits only; "h:" (no digits) is refused too.
  for (const char* host : {"a b", "a/b", "a:b", "a@b", "[::1", "[::1]x", "[zz]", "a:123456", "a\\b",
                           "127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:0", "127.0.0.1:00000", "h:",
                           "[::1]:", "[::1]:99999", "[::1]:0", "a:+80", "a:-1", "a: 80", "a:8o", "a:1:2"}) {
    EXPECT_EQ(parse_request_head(std::string("GET / HTTP/1.1\r\nHost: ") + host).status, 400) << host;
  }
}

TEST_F(ServeTest, TenThousandRequestsLeaveItAnswering) {
  start_server();
  const std::string head_req = "HEAD /after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  int ok = 0, refused = 0, bad = 0, dropped = 0;
  for (int i = 0; i < 10'000; ++i) {
    switch (i % 8) {
      case 0: bad += get(port_, "/pot", "BREW").status == 405; break;
      case 1: refused += get(port_, "/%2e%2e/secret.json").status == 403; break;
      case 2: {  // connects and leaves at once
        const int fd = connect_to(port_);
        ASSERT_GE(fd, 0);
        ::close(fd);
        ++dropped;
        break;
      }
      default: ok += http_exchange(port_, head_req).status == 200;
    }
  }
  EXPECT_EQ(bad, 1250);
  EXPECT_EQ(refused, 1250);
  EXPECT_EQ(dropped, 1250);
  EXPECT_EQ(ok, 6250);
  const Response r = get(port_, "/after_fix_trace.json");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, slurp(kTrace));
}

TEST_F(ServeTest, MaxConnectionsEndsRun) {
  ServeOptions options{.exit_after_connections = 2};
  options.dir = dir_;
  options.port = 0;
  Result<std::unique_ptr<TraceServer>> s = TraceServer::start(options);
  ASSERT_TRUE(s);
  const int port = (*s)->port();
  std::thread t([&] { EXPECT_TRUE((*s)->run()); });
  EXPECT_EQ(get(port, "/").status, 200);
  EXPECT_EQ(get(port, "/after_fix_trace.json").status, 200);
  t.join();
  EXPECT_EQ((*s)->connections_handled(), 2u);
}

TEST_F(ServeTest, StartErrors) {
  EXPECT_EQ(TraceServer::start({.dir = base_ + "/missing"}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(TraceServer::start({.dir = base_ + "/secret.json"}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(TraceServer::start({.dir = dir_, .bind_address = "not-an-ip"}).error().code(),
            ErrorCode::kInvalidArgument);
  start_server();
  Result<std::unique_ptr<TraceServer>> second = TraceServer::start({.dir = dir_, .port = port_});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), ErrorCode::kIo);
  EXPECT_NE(second.error().message().find("in use"), std::string::npos) << second.error().message();
}

TEST(ServePathTest, DecodesOnceAndRefusesTraversal) {
  EXPECT_EQ(decode_request_path("/a/b%20c.json").rel_path, "a/b c.json");
  EXPECT_EQ(decode_request_path("/%252e%252e").rel_path, "%2e%2e");  // once, not twice
  EXPECT_EQ(decode_request_path("/..").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a/%2E%2e/b").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a%2fb").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a%5cb").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a%00").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a%0a").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("//a").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a/").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("a").check, PathCheck::kForbidden);
  EXPECT_EQ(decode_request_path("/a%2").check, PathCheck::kBadRequest);
  EXPECT_EQ(decode_request_path("/a%g0").check, PathCheck::kBadRequest);
  EXPECT_EQ(percent_encode_path("a b/c&d%.json"), "a%20b/c%26d%25.json");
  EXPECT_EQ(html_escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_TRUE(is_trace_name("x.pt.trace.json.gz"));
  EXPECT_FALSE(is_trace_name("x.json.txt"));
}

#ifdef TPROF_BIN
// Starts `tprof serve ARGS` with its stdout on a pipe; returns its pid.
pid_t spawn_serve(const std::vector<std::string>& args, int* out_fd) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(TPROF_BIN));
    argv.push_back(const_cast<char*>("-q"));  // a global flag: before the subcommand
    argv.push_back(const_cast<char*>("serve"));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(TPROF_BIN, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  *out_fd = fds[0];
  return pid;
}

// Reads the child's first stdout line ("serving N traces from D at http://127.0.0.1:P/ ...").
int read_port(int fd, std::string* line) {
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line->push_back(c);
  const std::size_t at = line->find("http://127.0.0.1:");
  return at == std::string::npos ? -1 : std::atoi(line->c_str() + at + 17);
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(ServeTest, CliStopsOnSigtermWithExitZero) {
  int out = -1;
  const pid_t pid = spawn_serve({dir_, "--port", "0"}, &out);
  ASSERT_GT(pid, 0);
  std::string line;
  const int port = read_port(out, &line);
  if (port <= 0) {
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    FAIL() << "no port in the first line: " << line;
  }
  std::string links;
  char c;
  for (int n = 0; n < 4 && ::read(out, &c, 1) == 1;) {
    if (c == '\n') ++n;
    links.push_back(c);
  }
  EXPECT_NE(links.find("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" + std::to_string(port) +
                       "/after_fix_trace.json\n"),
            std::string::npos)
      << links;
  EXPECT_EQ(get(port, "/after_fix_trace.json").status, 200);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0);
  ::close(out);
}

TEST_F(ServeTest, CliMaxRequestsAndBadInput) {
  int out = -1;
  pid_t pid = spawn_serve({dir_, "--port", "0", "--max-requests", "1"}, &out);
  std::string line;
  const int port = read_port(out, &line);
  if (port <= 0) {
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    FAIL() << "no port in the first line: " << line;
  }
  EXPECT_EQ(get(port, "/").status, 200);
  EXPECT_EQ(wait_exit(pid), 0);
  ::close(out);

  pid = spawn_serve({base_ + "/missing", "--port", "0"}, &out);
  EXPECT_EQ(wait_exit(pid), 2);
  ::close(out);
  pid = spawn_serve({base_ + "/secret.json", "--port", "0"}, &out);
  EXPECT_EQ(wait_exit(pid), 2);
  ::close(out);
  start_server();
  pid = spawn_serve({dir_, "--port", std::to_string(port_)}, &out);
  EXPECT_EQ(wait_exit(pid), 2);  // port in use
  ::close(out);
}
#endif

}  // namespace
}  // namespace tprof::internal::serve_test
