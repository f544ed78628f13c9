// libtprof_inject.so: `tprof record` for unmodified CUDA programs.
//
//   tprof record -- ./app args      (tools/tprof/record_cmd.cc)
//     sets CUDA_INJECTION64_PATH=libtprof_inject.so, NVTX_INJECTION64_PATH=libcupti,
//     TPROF_RECORD_* (below), runs the program
//   the CUDA driver, at cuInit ──▶ InitializeInjection()   (the thread calling cuInit)
//     ── libcupti loaded; a tprof::Profiler with CPU and CUDA activities
//     ── the window opens here when it starts with the program
//     ── the session thread ("tprof-record"), which does everything else:
//        ── opens and closes windows: --delay-ms / --duration-ms timers,
//           each --on-signal delivery (a window per toggle)
//        ── ends the window at exit (atexit handler) or on a fatal signal
//           (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT left at their default)
//        ── builds the trace (cut to the first NVTX range named
//           TPROF_RECORD_NVTX_RANGE when set) and writes it as
//           tensorboard_trace_handler(TPROF_RECORD_DIR) names it
//
// Exit. glibc's exit() runs the exiting thread's thread_local destructors,
// then the exit functions in reverse order of registration; a library
// loaded after an atexit() call has its static destructors run BEFORE that
// handler. The first tprof record loaded libcupti at the window's start,
// after registering its handler: at exit CUPTI was torn down first, and the
// handler's flush crashed every program (SIGSEGV, no trace). Here libcupti
// is loaded before the handler is registered, the handler only wakes the
// session thread and waits for it, and the device wait and CUPTI calls
// stop short when the driver's own teardown has already run
// (src/cupti/cupti_source.cc).
//
// Signals. A fatal signal whose disposition is still the default when CUDA
// initializes (Python keeps SIGINT for KeyboardInterrupt, and ends that
// exit with SIGINT after finalizing: Py_AtExit ends the window there) is
// caught: the handler wakes the session thread, waits
// for the trace (at most TPROF_RECORD_SIGNAL_WAIT_MS, default 60 s), then
// restores the default and re-raises, so the program dies of its signal as
// before. _exit(), SIGKILL and exec write nothing.
//
// Processes. The environment is inherited: every process of the program's
// tree that initializes CUDA writes its own trace. A process with RANK set
// (torchrun) is named <worker>_rank<RANK> and carries distributedInfo
// {rank, world_size}; other processes below the one tprof record started
// are named <worker>_<pid>.
//
// Environment (set by tprof record): TPROF_RECORD_DIR (default "."),
// TPROF_RECORD_WORKER (file name prefix; default <host>_<pid>),
// TPROF_RECORD_GZIP=1, TPROF_RECORD_DELAY_MS, TPROF_RECORD_DURATION_MS,
// TPROF_RECORD_NVTX_RANGE, TPROF_RECORD_ON_SIGNAL (a signal number),
// TPROF_RECORD_API=all (every runtime/driver call, not only torch's),
// TPROF_RECORD_MEMORY=1 (device memory: [memory] events, profile_memory),
// TPROF_RECORD_ROOT_PID (the process tprof record started),
// TPROF_RECORD_STATUS_DIR (where to report, below). tprof record clears
// every other TPROF_RECORD_* variable before it runs the program.
//
// Reports. What happened to the recording is tprof record's to say, after
// the program has ended: a trace that could not be written (a full disk,
// a directory that went away) is a failure it prints and exits 2 for, and
// "no trace written" is explained by what each process got to (CUDA
// initialized, a window opened, the --nvtx-range never ran). Each process
// appends one line per event to TPROF_RECORD_STATUS_DIR/<its pid>, a
// private 0700 directory tprof record made: a file, not an inherited
// descriptor, because programs close descriptors they did not open
// (Python's subprocess does by default) and a number reused for another
// file would be written into; written as each event happens, so a process
// that then ends by _exit or SIGKILL has said what it got to. Without the
// directory (CUDA_INJECTION64_PATH set by hand) failures go to stderr.
//
// Only InitializeInjection is exported (inject.map): the tprof inside this
// library never meets a tprof the program itself links.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "src/base/file.h"
#include "src/capture/handlers.h"
#include "src/cupti/cupti_source.h"
#include "src/trace/select.h"
#include "tprof/profiler.h"
#include "tprof/write.h"

namespace {

std::int64_t env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0) ? static_cast<std::int64_t>(n) : 0;
}

std::string env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::int64_t monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// ---- reports to tprof record (see the header comment) ----
//
// Lines: "init" (InitializeInjection ran: the program initialized CUDA),
// "open" (a window opened), "written <path>", "no-range <name>" (a window
// without the --nvtx-range), "error <file: reason>". A newline inside a
// message is written as "\\n", so that each report stays one line.

std::string g_status_dir;  // TPROF_RECORD_STATUS_DIR, read once in begin()

// Appends one report line to the status directory, the whole line in one
// write() on an O_APPEND descriptor. The directory must be a real one
// (not a link), this user's, and private; else, and when it cannot be
// written, an error goes to stderr instead (the other reports only tell
// tprof record's summary apart, they are dropped). Under `ulimit -f` the
// write fails with EFBIG instead of killing the program: SIGXFSZ is
// blocked around it and the one it raised taken back (FileSizeSignalGuard,
// as the trace writer's writes).
void report(std::string_view kind, std::string_view text = {}) {
  std::string line(kind);
  if (!text.empty()) {
    line += ' ';
    for (char c : text) {
      if (c == '\n') {
        line += "\\n";
      } else {
        line += c;
      }
    }
  }
  line += '\n';
  bool done = false;
  if (!g_status_dir.empty()) {
    const int dir = ::open(g_status_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (dir >= 0 && ::fstat(dir, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0) {
      const std::string name = std::to_string(::getpid());
      const int fd = ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) {
        {
          const tprof::internal::FileSizeSignalGuard no_sigxfsz;
          ssize_t n;
          do {
            n = ::write(fd, line.data(), line.size());
          } while (n < 0 && errno == EINTR);
          done = n == static_cast<ssize_t>(line.size());
        }
        ::close(fd);
      }
    }
    if (dir >= 0) ::close(dir);
  }
  if (!done && kind == "error") {
    const std::string out = "tprof record: " + line.substr(kind.size() + 1);
    ssize_t ignored = ::write(2, out.data(), out.size());
    static_cast<void>(ignored);
  }
}

// ---- what signal handlers and the exit handler share with the session ----
//
// Only async-signal-safe operations cross from a handler: atomics, write()
// to the wake pipe, poll()/read() on the done pipe, sigaction, raise.

constexpr int kFatalSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT};

int g_wake[2] = {-1, -1};  // handlers -> session thread: one byte per request
int g_done[2] = {-1, -1};  // session thread -> waiters: closed when the session has ended
pid_t g_pid = 0;           // the process the session belongs to (not a forked child)
std::atomic<int> g_fatal{0};          // a fatal signal to end the session for
std::atomic<bool> g_exit{false};      // exit() is running
std::atomic<unsigned> g_toggles{0};   // --on-signal deliveries
std::atomic<bool> g_ended{false};     // the session has ended (g_done's write end is closed)
std::int64_t g_signal_wait_ms = 60000;
constexpr std::int64_t kExitWaitMs = 10 * 60 * 1000;

void wake() noexcept {
  const char b = 1;
  ssize_t n;
  do {
    n = ::write(g_wake[1], &b, 1);
  } while (n < 0 && errno == EINTR);
  // EAGAIN: the pipe is full of wake-ups already; one is enough.
}

// Waits until the session has ended, at most timeout_ms (< 0: no limit).
void wait_for_end(std::int64_t timeout_ms) noexcept {
  if (g_ended.load(std::memory_order_acquire)) return;
  const std::int64_t deadline = timeout_ms < 0 ? -1 : monotonic_ms() + timeout_ms;
  for (;;) {
    pollfd p{g_done[0], POLLIN, 0};
    int wait = -1;
    if (deadline >= 0) {
      const std::int64_t left = deadline - monotonic_ms();
      if (left <= 0) return;
      wait = static_cast<int>(left > 1000000 ? 1000000 : left);
    }
    const int r = ::poll(&p, 1, wait);
    if (r > 0) return;  // POLLHUP: the write end was closed
    if (r < 0 && errno != EINTR) return;
  }
}

void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  if (::getpid() == g_pid) {
    int none = 0;
    g_fatal.compare_exchange_strong(none, sig);
    wake();
    wait_for_end(g_signal_wait_ms);
  }
  // Die of it as the program would have: default disposition, the signal
  // again (blocked while this handler runs, delivered when it returns).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  errno = saved_errno;
}

void on_toggle_signal(int) {
  const int saved_errno = errno;
  if (::getpid() == g_pid) {
    g_toggles.fetch_add(1, std::memory_order_relaxed);
    wake();
  }
  errno = saved_errno;
}

void exit_handler() {
  // A child forked without exec inherits this handler but not the session
  // thread: it writes nothing.
  if (::getpid() != g_pid) return;
  g_exit.store(true, std::memory_order_release);
  wake();
  // A bound, so that a session that cannot finish (a deadlock tprof did not
  // foresee) delays the exit instead of hanging the program.
  wait_for_end(kExitWaitMs);
}

// The one recording of this process. Never destroyed: the session thread
// and the exit handler use it while static destructors run.
class Session {
 public:
  static Session& instance() {
    static Session* s = new Session();
    return *s;
  }

  // On the thread calling cuInit (InitializeInjection).
  void begin() {
    g_pid = ::getpid();
    g_status_dir = env_str("TPROF_RECORD_STATUS_DIR", "");
    report("init");
    delay_ms_ = env_int("TPROF_RECORD_DELAY_MS");
    duration_ms_ = env_int("TPROF_RECORD_DURATION_MS");
    on_signal_ = static_cast<int>(env_int("TPROF_RECORD_ON_SIGNAL"));
    if (on_signal_ >= NSIG) on_signal_ = 0;
    if (const std::int64_t w = env_int("TPROF_RECORD_SIGNAL_WAIT_MS")) g_signal_wait_ms = w;
    dir_ = env_str("TPROF_RECORD_DIR", ".");
    gzip_ = env_str("TPROF_RECORD_GZIP", "0") == "1";
    range_ = env_str("TPROF_RECORD_NVTX_RANGE", "");
    name_worker();

    tprof::ProfilerOptions options;
    options.activities = {tprof::Activity::kCpu, tprof::Activity::kCuda};
    if (env_str("TPROF_RECORD_API", "") == "all") options.cuda_api_calls = tprof::CudaApiCalls::kAll;
    // CUDA's allocations, releases and pools as torch's [memory] records.
    // (The program's own tprof, if it links one, is another copy: its
    // record_alloc hooks are not this profiler's.)
    options.profile_memory = env_str("TPROF_RECORD_MEMORY", "0") == "1";
    options.on_trace_ready = [this](tprof::Profiler& p) { return write(p.trace()); };
    profiler_ = std::make_unique<tprof::Profiler>(std::move(options));
    if (!distributed_info_.empty()) {
      static_cast<void>(profiler_->add_metadata_json("distributedInfo", distributed_info_));
    }
    // Before anything is registered for exit: see the header comment. A
    // failure is the window's to report (start() says why, in the trace).
    static_cast<void>(tprof::internal::preload_cupti());

    if (::pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(g_done, O_CLOEXEC) != 0) {
      report("error", std::string("cannot record: pipe2: ") + std::strerror(errno));
      return;
    }
    const bool at_init = delay_ms_ == 0 && on_signal_ == 0;
    if (at_init) start_window();  // here, so the program's first kernels are in it
    opened_at_ms_ = monotonic_ms();

    // The session thread takes none of the signals tprof handles: a handler
    // running on it would wait for itself.
    sigset_t block, old;
    sigemptyset(&block);
    for (int s : kFatalSignals) sigaddset(&block, s);
    if (on_signal_ != 0) sigaddset(&block, on_signal_);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    try {
      std::thread([this] { run(); }).detach();
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      report("error", "cannot record: the recording thread did not start");
      stop_window();
      return;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);

    for (int s : kFatalSignals) catch_if_default(s, on_fatal_signal);
    if (on_signal_ != 0) {
      struct sigaction sa {};
      sa.sa_handler = on_toggle_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      ::sigaction(on_signal_, &sa, nullptr);
    }
    std::atexit(exit_handler);
    // CPython ends a KeyboardInterrupt by finalizing, then killing itself
    // with SIGINT at its default: no C exit handler runs. Its own exit
    // functions (Py_AtExit, run at the end of Py_FinalizeEx) do, with CUDA
    // and CUPTI still up; the handler is idempotent.
    using PyAtExit = int (*)(void (*)());
    if (auto py_at_exit = reinterpret_cast<PyAtExit>(dlsym(RTLD_DEFAULT, "Py_AtExit"))) py_at_exit(exit_handler);
  }

 private:
  // The file name prefix: --worker (else torch's <host>_<pid>), with the
  // rank when torchrun set one, or the pid in a descendant of the process
  // tprof record started.
  void name_worker() {
    worker_ = env_str("TPROF_RECORD_WORKER", "");
    const std::string rank = env_str("RANK", "");
    if (all_digits(rank)) {
      std::string base = worker_;
      if (base.empty()) {
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
        base = host;
      }
      worker_ = base + "_rank" + rank;
      const std::string world = env_str("WORLD_SIZE", "");
      // torch writes distributedInfo once torch.distributed is up; these
      // are the two members a reader of ranks needs.
      distributed_info_ = "{\"rank\": ";
      distributed_info_ += std::to_string(std::stoll(rank));
      if (all_digits(world)) {
        distributed_info_ += ", \"world_size\": ";
        distributed_info_ += std::to_string(std::stoll(world));
      }
      distributed_info_ += "}";
      return;
    }
    const std::int64_t root = env_int("TPROF_RECORD_ROOT_PID");
    if (!worker_.empty() && root != 0 && root != static_cast<std::int64_t>(::getpid())) {
      worker_ += '_';
      worker_ += std::to_string(::getpid());
    }
  }

  static void catch_if_default(int sig, void (*handler)(int)) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) return;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return;  // the program's own
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }

  // The session thread.
  void run() {
    pthread_setname_np(pthread_self(), "tprof-record");
    unsigned toggles_seen = 0;
    bool started_once = open_;
    for (;;) {
      // The next timer: the delayed start, or the end of a timed window.
      std::int64_t due = -1;
      if (!open_ && !started_once && on_signal_ == 0) due = opened_at_ms_ + delay_ms_;
      if (open_ && duration_ms_ > 0) due = opened_at_ms_ + duration_ms_;
      int wait = -1;
      if (due >= 0) {
        const std::int64_t left = due - monotonic_ms();
        wait = left <= 0 ? 0 : static_cast<int>(left > 1000000 ? 1000000 : left);
      }
      pollfd p{g_wake[0], POLLIN, 0};
      const int r = ::poll(&p, 1, wait);
      if (r > 0) {
        char buf[64];
        while (::read(g_wake[0], buf, sizeof buf) > 0) {
        }
      }
      if (g_fatal.load(std::memory_order_acquire) != 0 || g_exit.load(std::memory_order_acquire)) break;
      const unsigned toggles = g_toggles.load(std::memory_order_relaxed);
      if (toggles != toggles_seen) {
        // An odd number of deliveries since the last look flips the state.
        const bool flip = ((toggles - toggles_seen) & 1u) != 0;
        toggles_seen = toggles;
        if (flip) {
          if (open_) {
            stop_window();
          } else {
            start_window();
            opened_at_ms_ = monotonic_ms();
          }
        }
        continue;
      }
      if (due >= 0 && monotonic_ms() >= due) {
        if (open_) {
          stop_window();
          if (on_signal_ == 0) break;  // the one timed window is over
        } else {
          start_window();
          started_once = true;
          opened_at_ms_ = monotonic_ms();
        }
      }
    }
    stop_window();
    g_ended.store(true, std::memory_order_release);
    ::close(g_done[1]);  // every waiter wakes: the trace is written
  }

  void start_window() {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_) return;
    const tprof::Status s = profiler_->start();
    open_ = s.ok();
    if (open_) {
      report("open");
    } else {
      report("error", "the window did not start: " + s.error().to_string());
    }
  }

  void stop_window() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return;
    open_ = false;
    // stop() delivers the trace to on_trace_ready, which writes it.
    static_cast<void>(profiler_->stop());
  }

  // Writes the trace, or the first NVTX range named range_ of it (nothing
  // when that range never ran).
  tprof::Status write(const tprof::Trace& t) {
    if (range_.empty()) return emit(t);
    for (std::uint32_t e = 0; e < t.events.size(); ++e) {
      if (t.events.kind[e] != tprof::EventKind::kUserAnnotation || t.name(e) != range_) continue;
      return emit(tprof::internal::select_window(t, t.events.ts_ns[e], t.events.ts_ns[e] + t.events.dur_ns[e]));
    }
    report("no-range", range_);
    return {};
  }
  // Reported here, where the file's name and the reason are known: stop()
  // returns the handler's error only to the session thread, which has no
  // one to tell but tprof record.
  tprof::Status emit(const tprof::Trace& t) {
    tprof::Result<std::string> path = tprof::internal::write_tensorboard_trace(t, dir_, &worker_, gzip_);
    if (!path) {
      // Every line names a file: the trace's, when the error names none
      // (compression), with its time left out.
      const tprof::Error& e = path.error();
      report("error", e.path().empty() ? dir_ + "/" + worker_ + ".*.pt.trace.json" + (gzip_ ? ".gz" : "") + ": " +
                                             e.message()
                                       : e.to_string());
      return e;
    }
    report("written", *path);
    return {};
  }

  std::mutex mu_;  // the profiler: the cuInit thread's first start, then the session thread
  std::unique_ptr<tprof::Profiler> profiler_;
  bool open_ = false;
  std::int64_t delay_ms_ = 0, duration_ms_ = 0, opened_at_ms_ = 0;
  int on_signal_ = 0;
  std::string dir_, worker_, range_, distributed_info_;
  bool gzip_ = false;
};

}  // namespace

// Called by the CUDA driver when it initializes, in the thread that called
// cuInit (CUDA_INJECTION64_PATH). Returns nonzero: success.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  std::call_once(once, [] { Session::instance().begin(); });
  return 1;
}
