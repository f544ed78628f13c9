// The host of tests/plugins: a program that dlopens plugins (RTLD_LOCAL)
// and records one window around its own scopes and theirs. Built twice:
// plugin_host links the shared libtprof_capture.so (HOST_SHARED=1),
// plugin_host_static tprof's static archive (HOST_SHARED=0).
//
//   plugin_host one_window OUT PLUGIN_A PLUGIN_B
//     both plugins link libtprof_capture.so: the window holds the host's
//     scopes and both plugins', each on the thread that ran it (A on the
//     main thread inside host::main, B on a worker), and nothing is
//     printed or diagnosed about recorders.
//   plugin_host second_recorder OUT PLUGIN OTHER
//     PLUGIN brings a second recorder (OTHER names it: the plugin's path
//     for a static copy, libtprof_capture.so for the shared one): loading
//     it prints one warning naming both recorders, the host's window still
//     holds the host's scopes and none of the plugin's, and the trace (in
//     memory and as written, read back) carries a diagnostic naming OTHER.
//
// Exit 0 when every check passes; each failure is printed.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tprof/profiler.h"
#include "tprof/read.h"
#include "tprof/record_function.h"

#ifndef HOST_SHARED
#error "HOST_SHARED is set by tests/plugins/CMakeLists.txt"
#endif

namespace {

using PluginWork = std::int64_t (*)(int);

int g_failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++g_failures;
  }
}

std::int64_t gettid_now() { return static_cast<std::int64_t>(::syscall(SYS_gettid)); }

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Loads the plugins with stderr going to a file, and returns what was
// written there (also echoed, for the test's log).
std::string load_plugins(const std::vector<std::string>& paths, const std::string& err_path,
                         std::vector<PluginWork>* works) {
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  const int fd = ::open(err_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (saved < 0 || fd < 0) {
    check(false, "cannot redirect stderr to " + err_path);
    return {};
  }
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  std::vector<std::string> errors;
  for (const std::string& path : paths) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors.push_back(std::string("dlopen: ") + ::dlerror());
      continue;
    }
    void* work = ::dlsym(handle, "plugin_work");
    if (work == nullptr) errors.push_back(path + " has no plugin_work");
    works->push_back(reinterpret_cast<PluginWork>(work));
  }
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  for (const std::string& e : errors) check(false, e);
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  std::fputs(text.str().c_str(), stderr);
  return text.str();
}

struct Span {
  std::int64_t ts = 0, end = 0, tid = -1;
  int n = 0;
};

// The events named `name` in `t`: how many, and the first one's span and thread.
Span find(const tprof::Trace& t, std::string_view name) {
  Span s;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) != name) continue;
    if (s.n++ == 0) {
      s.ts = t.events.ts_ns[e];
      s.end = s.ts + t.events.dur_ns[e];
      s.tid = t.lanes[t.events.lane[e]].tid.num;
    }
  }
  return s;
}

std::string recorder_diagnostics(const tprof::Trace& t) {
  std::string all;
  for (const tprof::Diagnostic& d : t.diagnostics.items()) {
    if (d.code == tprof::DiagnosticCode::kActivityUnavailable) all += d.message + "\n";
  }
  return all;
}

// One window: host::main on this thread around plugin A's work, and a
// worker thread running host::worker around plugin B's work (or A's again).
struct Window {
  std::int64_t main_tid = 0, worker_tid = 0, a_tid = 0, b_tid = 0;
};

tprof::Status record(tprof::Profiler& prof, PluginWork a, PluginWork b, Window* w) {
  w->main_tid = gettid_now();
  TPROF_TRY(prof.start());
  {
    TPROF_RECORD_FUNCTION("host::main");
    w->a_tid = a(3);
    std::thread worker([&] {
      ::pthread_setname_np(::pthread_self(), "host-worker");
      TPROF_RECORD_FUNCTION("host::worker");
      w->worker_tid = gettid_now();
      w->b_tid = b(2);
    });
    worker.join();
  }
  TPROF_TRY(prof.stop());
  return prof.flush();
}

int one_window(const std::string& out, const std::string& plugin_a, const std::string& plugin_b) {
  std::vector<PluginWork> works;
  const std::string err = load_plugins({plugin_a, plugin_b}, out + ".stderr", &works);
  if (works.size() != 2 || works[0] == nullptr || works[1] == nullptr) return 1;
  check(count(err, "tprof: warning") == 0, "loading two plugins on the shared recorder printed a warning");
  tprof::Profiler prof;
  Window w;
  if (const tprof::Status s = record(prof, works[0], works[1], &w); !s.ok()) {
    check(false, "recording: " + s.error().to_string());
    return 1;
  }
  const tprof::Trace& t = prof.trace();
  const Span host = find(t, "host::main"), worker = find(t, "host::worker");
  const Span a = find(t, "plugin_a::work"), b = find(t, "plugin_b::work");
  check(host.n == 1 && host.tid == w.main_tid, "host::main once on the main thread");
  check(worker.n == 1 && worker.tid == w.worker_tid, "host::worker once on the worker thread");
  check(a.n == 1, "plugin_a::work (a plugin's static scope) is in the host's window");
  check(b.n == 1, "plugin_b::work (the other plugin's static scope) is in the host's window");
  check(a.tid == w.main_tid && w.a_tid == w.main_tid, "plugin_a::work is on the main thread");
  check(b.tid == w.worker_tid && w.b_tid == w.worker_tid, "plugin_b::work is on the worker thread");
  check(a.ts >= host.ts && a.end <= host.end, "plugin_a::work lies inside host::main");
  check(b.ts >= worker.ts && b.end <= worker.end, "plugin_b::work lies inside host::worker");
  for (int i = 0; i < 3; ++i) {
    const Span item = find(t, "plugin_a::item " + std::to_string(i));
    check(item.n == 1 && item.tid == w.main_tid && item.ts >= a.ts && item.end <= a.end,
          "plugin_a::item " + std::to_string(i) + " (a run-time name) inside plugin_a::work");
  }
  check(find(t, "plugin_b::item 1").n == 1, "plugin_b::item 1 (a run-time name) is in the window");
  check(find(t, "plugin_a::done").n == 1 && find(t, "plugin_b::done").n == 1, "both plugins' instants");
  check(recorder_diagnostics(t).empty(), "no recorder diagnostic: " + recorder_diagnostics(t));
  check(t.meta.dropped_events == 0, "nothing dropped");
  if (const tprof::Status s = prof.export_chrome_trace(out); !s.ok()) check(false, s.error().to_string());
  std::printf("%s: host, plugin_a and plugin_b in one window of %zu events\n", g_failures ? "FAILED" : "ok",
              t.events.size());
  return g_failures == 0 ? 0 : 1;
}

int second_recorder(const std::string& out, const std::string& plugin, const std::string& other) {
  std::vector<PluginWork> works;
  const std::string err = load_plugins({plugin}, out + ".stderr", &works);
  if (works.size() != 1 || works[0] == nullptr) return 1;
  // The host's own recorder, as the warning and the diagnostic name it.
  const std::string host_recorder = HOST_SHARED ? std::string("libtprof_capture.so") : self_path();
  check(count(err, "tprof: warning") == 1, "one warning on stderr, got " + std::to_string(count(err, "tprof: warning")));
  check(count(err, "2 tprof recorders are now loaded") == 1, "the warning counts two recorders");
  check(err.find(other) != std::string::npos, "the warning names the plugin's recorder (" + other + ")");
  check(err.find(host_recorder) != std::string::npos, "the warning names the host's recorder (" + host_recorder + ")");
  check(err.find("go to its own recorder") != std::string::npos, "the warning says where the events go");
  tprof::Profiler prof;
  Window w;
  if (const tprof::Status s = record(prof, works[0], works[0], &w); !s.ok()) {
    check(false, "recording: " + s.error().to_string());
    return 1;
  }
  const tprof::Trace& t = prof.trace();
  const Span host = find(t, "host::main"), worker = find(t, "host::worker");
  check(host.n == 1 && host.tid == w.main_tid, "host::main is in the host's window, on the main thread");
  check(worker.n == 1 && worker.tid == w.worker_tid, "host::worker is in the host's window, on the worker");
  std::size_t plugin_events = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) plugin_events += t.name(e).substr(0, 7) == "plugin_";
  check(plugin_events == 0, "the plugin's scopes (its own recorder's) are not in the host's window");
  const std::string in_memory = recorder_diagnostics(t);
  check(count(in_memory, "2 tprof recorders are loaded") == 1 && in_memory.find(other) != std::string::npos,
        "the window's trace has a diagnostic naming " + other + ": [" + in_memory + "]");
  if (const tprof::Status s = prof.export_chrome_trace(out); !s.ok()) {
    check(false, s.error().to_string());
  } else {
    const tprof::Result<tprof::Trace> back = tprof::read_trace(out);
    check(back.has_value(), "the written trace reads back");
    if (back.has_value()) {
      const std::string written = recorder_diagnostics(back.value());
      check(written.find(other) != std::string::npos && written.find("its scopes are not here") != std::string::npos,
            "the written trace carries the diagnostic: [" + written + "]");
      check(find(back.value(), "host::main").n == 1, "the written trace holds host::main");
    }
  }
  std::printf("%s: a second recorder (%s) warned once and is diagnosed\n", g_failures ? "FAILED" : "ok",
              other.c_str());
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "one_window") return one_window(args[1], args[2], args[3]);
  if (args.size() == 4 && args[0] == "second_recorder") return second_recorder(args[1], args[2], args[3]);
  std::fprintf(stderr,
               "usage: %s one_window OUT PLUGIN_A PLUGIN_B | second_recorder OUT PLUGIN OTHER\n", argv[0]);
  return 2;
}
