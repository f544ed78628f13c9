// tprof serve DIR: the traces in DIR on 127.0.0.1, one Perfetto UI link per
// trace, an index page with verdicts at "/" (docs/serve.md).
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "src/serve/server.h"
#include "tools/tprof/common.h"

namespace tprof::cli {

namespace {

// The server a SIGINT/SIGTERM stops; TraceServer::stop() is async-signal-safe.
std::atomic<internal::TraceServer*> g_server{nullptr};

extern "C" void on_stop_signal(int) {
  if (internal::TraceServer* s = g_server.load()) s->stop();
}

bool is_loopback_address(const std::string& a) { return a == "::1" || a.rfind("127.", 0) == 0; }

}  // namespace

void add_serve_command(CLI::App& app, int* rc) {
  auto opts = std::make_shared<internal::ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the traces in DIR on 127.0.0.1 with Perfetto UI links");
  cmd->add_option("DIR", opts->dir, "Directory searched recursively for *.json and *.json.gz traces")->required();
  cmd->add_option("--port", opts->port, "TCP port (0: pick a free one); Perfetto UI fetches from 9001")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--bind", opts->bind_address, "Listen on this address instead of 127.0.0.1 (exposes the traces)")
      ->capture_default_str();
  cmd->add_option("--allow-origin", opts->allow_origin, "Access-Control-Allow-Origin sent with every answer")
      ->capture_default_str();
  // For tests: exit 0 after answering N connections.
  cmd->add_option("--max-requests", opts->exit_after_connections, "")->group("");
  cmd->callback([opts, rc] {
    if (!is_loopback_address(opts->bind_address)) {
      std::cerr << "tprof: warning: --bind " << opts->bind_address
                << " is not a loopback address: anyone who can reach it can read every trace in " << opts->dir
                << "\n";
    }
    // Each connection may hold a socket and a file: a soft descriptor limit
    // of 1024 would cut the connection limit (docs/serve.md), so raise it
    // toward the hard limit, as servers do.
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY && files.rlim_cur < 4096) {
      files.rlim_cur = files.rlim_max == RLIM_INFINITY ? 4096 : std::min<rlim_t>(files.rlim_max, 4096);
      ::setrlimit(RLIMIT_NOFILE, &files);
    }
    Result<std::unique_ptr<internal::TraceServer>> server = internal::TraceServer::start(*opts);
    if (!server) {
      std::string hint;
      if (server.error().code() == ErrorCode::kIo && opts->port != 0) {
        hint = " (is another server there? --port 0 picks a free port)";
      }
      std::cerr << "tprof: serve: " << server.error().to_string() << hint << "\n";
      *rc = kExitBadInput;
      return;
    }
    internal::TraceServer& s = **server;
    // Handlers first: a Ctrl-C as soon as the links show still exits 0.
    g_server.store(&s);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_int {}, old_term {};
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    std::printf("serving %zu trace%s from %s at %s/ (Ctrl-C stops)\n", s.traces().size(),
                s.traces().size() == 1 ? "" : "s", s.root().c_str(), s.base_url().c_str());
    for (const internal::ServedTrace& t : s.traces()) std::printf("%s\n", s.perfetto_link(t).c_str());
    std::fflush(stdout);
    if (s.max_open_connections() < opts->max_open_connections && !global_options().quiet) {
      std::cerr << "tprof: note: at most " << s.max_open_connections()
                << " connections at once (the descriptor limit, ulimit -n, allows no more)\n";
    }
    if (s.port() != 9001 && !global_options().quiet) {
      std::cerr << "tprof: note: ui.perfetto.dev fetches local traces from port 9001 only (its content security "
                   "policy); links to port "
                << s.port() << " open in a self-hosted or local Perfetto UI\n";
    }

    const Status st = s.run();
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_server.store(nullptr);
    if (!st) {
      std::cerr << "tprof: serve: " << st.error().to_string() << "\n";
      *rc = kExitBadInput;
      return;
    }
    *rc = kExitOk;
  });
}

}  // namespace tprof::cli
