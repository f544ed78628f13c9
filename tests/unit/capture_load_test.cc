// Capture under load and faults (issue 13, docs/reliability.md "Capture"):
// many threads filling bounded buffers, a Profiler destroyed under open
// scopes, exceptions through scopes, fork() while recording. make test
// runs these under ASan+UBSan and TSan too (with fewer scopes there).
#include <gtest/gtest.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tprof/profiler.h"
#include "tprof/read.h"

#include "src/capture/recorder.h"
#include "tests/support/child_process.h"
#include "tests/support/sanitizers.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_queries.h"

// LeakSanitizer's hook (sanitizer/lsan_interface.h), asked at its check at
// exit: off in the children below that end with exit() on purpose. The
// parent's threads whose stacks held pointers to what they allocated are
// not in a fork child, so the check would report those blocks as leaks.
namespace {
std::atomic<bool> g_no_leak_check_at_exit{false};
}  // namespace
extern "C" int __lsan_is_turned_off() { return g_no_leak_check_at_exit.load() ? 1 : 0; }

namespace tprof {
namespace {

using tprof::testing::kSanitized;

using tprof::testing::count_named;

// 8 threads each record far more scopes than their buffer holds: every
// buffer is filled exactly, every other scope is counted as dropped, and
// every kept event is whole (its name, its category, an end after its
// start, in order on its lane).
TEST(ProfilerLoad, EightThreadsFillBoundedBuffersAndEveryDropIsCounted) {
  constexpr int kThreads = 8;
  constexpr std::uint64_t kScopes = kSanitized ? 200'000 : 10'000'000;
  constexpr std::uint32_t kCapacity = 1u << 15;
  Profiler prof({.buffer_events_per_thread = kCapacity, .payload_words_per_thread = 0});
  ASSERT_TRUE(prof.start());
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([] {
      for (std::uint64_t k = 0; k < kScopes; ++k) {
        TPROF_RECORD_OP("load");
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(t.meta.dropped_events, kThreads * (kScopes - kCapacity));
  EXPECT_EQ(count_named(t, "load"), std::size_t{kThreads} * kCapacity);
  std::map<std::uint32_t, std::int64_t> last_start;  // per lane
  std::map<std::uint32_t, std::uint32_t> per_lane;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] != Phase::kComplete) continue;
    ASSERT_EQ(t.name(e), "load");
    ASSERT_EQ(t.cat(e), "cpu_op");
    ASSERT_GE(t.events.dur_ns[e], 0);
    const std::uint32_t lane = t.events.lane[e];
    auto [it, added] = last_start.try_emplace(lane, t.events.ts_ns[e]);
    if (!added) {
      ASSERT_GE(t.events.ts_ns[e], it->second);
      it->second = t.events.ts_ns[e];
    }
    ++per_lane[lane];
  }
  EXPECT_EQ(per_lane.size(), std::size_t{kThreads});
  for (const auto& [lane, n] : per_lane) EXPECT_EQ(n, kCapacity) << "lane " << lane;
}

std::uint64_t virtual_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

// Thousands of short-lived threads record in one window (a pool that
// churns): each dead thread keeps only the pages it wrote until stop(), not
// its 32 MiB buffer, and fork() still works (it failed with ENOMEM).
TEST(ProfilerLoad, ShortLivedThreadsKeepOnlyWhatTheyWroteUntilStop) {
  const int kThreads = kSanitized ? 300 : 3000;
  Profiler prof;  // default buffers: 32 MiB of records a thread
  ASSERT_TRUE(prof.start());
  const std::uint64_t before = virtual_bytes();
  for (int i = 0; i < kThreads; ++i) {
    std::thread([] { TPROF_RECORD_FUNCTION("short-lived"); }).join();
  }
  const std::uint64_t grown = virtual_bytes() - before;
  EXPECT_LT(grown, std::uint64_t{kThreads} * (1u << 20)) << grown / (1u << 20) << " MiB for " << kThreads << " threads";
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "short-lived"), static_cast<std::size_t>(kThreads));
}

// ~Profiler stops the window under scopes that are still open; they end
// later, into buffers the next window reuses, without touching its trace.
TEST(ProfilerFaults, AProfilerDestroyedUnderOpenScopesLeavesThemHarmless) {
  std::unique_ptr<RecordFunction> open;
  {
    Profiler prof;
    ASSERT_TRUE(prof.start());
    open = std::make_unique<RecordFunction>(std::string("outlives its profiler"), kCpuOp);
    TPROF_RECORD_FUNCTION("closed by the profiler's end");
    std::thread worker([] {
      TPROF_RECORD_FUNCTION("a worker's scope");
    });
    worker.join();
  }  // destroyed: stops with "open" and the scope above still open
  Profiler next;
  ASSERT_TRUE(next.start());
  { TPROF_RECORD_FUNCTION("next window"); }
  open.reset();  // ends now, inside the next profiler's window
  ASSERT_TRUE(next.stop());
  EXPECT_EQ(count_named(next.trace(), "next window"), 1u);
  EXPECT_EQ(count_named(next.trace(), "outlives its profiler"), 0u);
  EXPECT_EQ(next.trace().meta.dropped_events, 0u);
}

void throws_from_inside() {
  TPROF_RECORD_FUNCTION("inner");
  throw std::runtime_error("out of the scopes");
}

TEST(ProfilerFaults, AnExceptionThroughScopesEndsEachOfThem) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  try {
    TPROF_RECORD_FUNCTION("outer");
    throws_from_inside();
  } catch (const std::runtime_error&) {
  }
  { TPROF_RECORD_FUNCTION("after"); }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  for (const char* name : {"outer", "inner", "after"}) EXPECT_EQ(count_named(t, name), 1u) << name;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> span;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kComplete) {
      span[std::string(t.name(e))] = {t.events.ts_ns[e], t.events.ts_ns[e] + t.events.dur_ns[e]};
    }
  }
  EXPECT_LE(span["outer"].first, span["inner"].first);
  EXPECT_LE(span["inner"].second, span["outer"].second);
  EXPECT_LE(span["outer"].second, span["after"].first);
}

// fork() while other threads record and attach (taking tprof's locks):
// the child's scopes and runtime names never block on a lock a parent
// thread held at the fork (they record nothing: the window is the
// parent's, ProfilerFork below), and the parent's trace holds only its own
// events.
TEST(ProfilerFaults, AForkedChildNeitherBlocksNorReachesTheParentsTrace) {
  // Small buffers: every short-lived thread below keeps its buffer until
  // stop(), and thousands of default 32 MiB ones make fork() fail (ENOMEM).
  Profiler prof({.buffer_events_per_thread = 1024, .payload_words_per_thread = 0});
  ASSERT_TRUE(prof.start());
  std::atomic<bool> done{false};
  std::vector<std::thread> churn;
  for (int w = 0; w < 2; ++w) {
    churn.emplace_back([&done] {
      while (!done.load()) {
        // Short-lived threads attach (the registry's lock) and intern
        // runtime names (the name table's lock) all the time.
        std::thread([] { RecordFunction r(std::string("churn ") + "name", kCpuOp); }).join();
      }
    });
  }
  constexpr int kForks = kSanitized ? 5 : 20;
  for (int i = 0; i < kForks; ++i) {
    const pid_t child = fork();
    if (child < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      break;
    }
    if (child == 0) {
      { TPROF_RECORD_FUNCTION("child static"); }  // allocation-free: this thread's buffer is attached
      // Under the sanitizers the child does not allocate: GCC 12's ASan
      // runtime has no fork handlers for its allocator, whose lock another
      // thread may hold at the fork; TSan does not start threads after a
      // multi-threaded fork. The release build checks tprof's own locks.
      if (!kSanitized) {
        { RecordFunction mine(std::string("child ") + std::to_string(i), kCpuOp); }
        std::thread([] { RecordFunction r(std::string("child thread"), kCpuOp); }).join();
      }
      _exit(0);
    }
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    pid_t waited = 0;
    while ((waited = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (waited == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      ADD_FAILURE() << "the child of fork " << i << " blocked";
      break;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "fork " << i << " status " << status;
  }
  done = true;
  for (auto& th : churn) th.join();
  { TPROF_RECORD_FUNCTION("parent"); }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(count_named(t, "parent"), 1u);
  EXPECT_EQ(count_named(t, "child static"), 0u);
  EXPECT_EQ(count_named(t, "child thread"), 0u);
  EXPECT_GT(count_named(t, "churn name"), 0u);
}

// The control thread is not the recording one: start() and step() on one
// thread, stop() on another, while workers record (TSan in make test).
TEST(ProfilerFaults, StopFromAnotherThreadWhileWorkersRecord) {
  Profiler prof({.schedule = schedule({.active = 2})});
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&done] {
      while (!done.load(std::memory_order_relaxed)) {
        TPROF_RECORD_FUNCTION("work");
      }
    });
  }
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 3; ++i) {
    // Long enough for a worker's first attach in a window (a 32 MiB buffer,
    // slow under ASan) to be followed by records.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ASSERT_TRUE(prof.step());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Status stopped;
  std::thread([&] { stopped = prof.stop(); }).join();
  done = true;
  for (auto& th : workers) th.join();
  EXPECT_TRUE(stopped);
  EXPECT_EQ(count_named(prof.trace(), "ProfilerStep#3"), 1u);
  EXPECT_GT(count_named(prof.trace(), "work"), 0u);
}

// Records made from a signal handler on the recording thread
// (docs/reliability.md "Capture"): a second thread interrupts the loop
// below with SIGUSR1 and SIGUSR2, one at a time, as often as it can; both
// handlers record a static-name scope and instant. Every record is kept or
// counted as dropped: the loop's own records are all kept (a handler that
// interrupts the recorder on its thread refuses its own record, counted),
// and every handler record that is missing is in droppedEvents. Before
// this, a handler between the recorder's read of the buffer's size and its
// store of the next took the same slot: one of the two records was lost,
// uncounted.
std::atomic<std::uint64_t> g_handler_scopes{0};
std::atomic<std::uint64_t> g_handler_instants{0};
std::atomic<std::uint64_t> g_handled{0};

extern "C" void record_from_handler(int) {
  const int saved_errno = errno;
  {
    g_handler_scopes.fetch_add(1, std::memory_order_relaxed);  // lock-free: async-signal-safe
    TPROF_RECORD_FUNCTION("signal: handler scope");
    g_handler_instants.fetch_add(1, std::memory_order_relaxed);
    TPROF_INSTANT("signal: handler instant");
  }
  g_handled.fetch_add(1, std::memory_order_release);
  errno = saved_errno;
}

struct SignalRun {
  std::uint64_t signals = 0;
  std::uint64_t handler_scopes = 0;
  std::uint64_t handler_instants = 0;
};

// Records `loops` times a scope and an instant on this thread while another
// thread sends it signals; returns what the handlers issued.
SignalRun record_under_signals(std::uint64_t loops) {
  g_handler_scopes = 0;
  g_handler_instants = 0;
  g_handled = 0;
  struct sigaction sa {}, old_usr1{}, old_usr2{};
  sa.sa_handler = record_from_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NODEFER;  // either handler may interrupt the other, or itself
  sigaction(SIGUSR1, &sa, &old_usr1);
  sigaction(SIGUSR2, &sa, &old_usr2);
  const pthread_t target = pthread_self();
  std::atomic<bool> done{false};
  std::thread sender([&] {
    // One signal at a time (a second would merge into the pending one):
    // the next goes once the handler of the last has run. At least one,
    // however late this thread starts.
    std::uint64_t n = 0;
    do {
      const std::uint64_t seen = g_handled.load(std::memory_order_acquire);
      pthread_kill(target, (n++ & 1) != 0 ? SIGUSR2 : SIGUSR1);
      while (g_handled.load(std::memory_order_acquire) == seen && !done.load(std::memory_order_relaxed)) {
      }
    } while (!done.load(std::memory_order_relaxed));
  });
  for (std::uint64_t i = 0; i < loops; ++i) {
    { TPROF_RECORD_FUNCTION("signal: loop scope"); }
    TPROF_INSTANT("signal: loop instant");
  }
  done = true;
  sender.join();
  // A signal still pending is delivered now, while the window records
  // (unblocking delivers it before pthread_sigmask returns).
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGUSR1);
  sigaddset(&both, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &both, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &both, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigaction(SIGUSR2, &old_usr2, nullptr);
  return {g_handled.load(), g_handler_scopes.load(), g_handler_instants.load()};
}

TEST(ProfilerFaults, RecordsFromASignalHandlerAreKeptOrCountedExactly) {
  const std::uint64_t kLoops = kSanitized ? 100'000 : 1'000'000;
  // Room for everything: what is missing was refused, not left out of a full buffer.
  Profiler prof({.buffer_events_per_thread = 1u << 22, .payload_words_per_thread = 0});
  ASSERT_TRUE(prof.start());
  const SignalRun run = record_under_signals(kLoops);
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  const std::size_t kept_scopes = count_named(t, "signal: handler scope");
  const std::size_t kept_instants = count_named(t, "signal: handler instant");
  EXPECT_GT(run.signals, 0u);
  EXPECT_EQ(count_named(t, "signal: loop scope"), kLoops);
  EXPECT_EQ(count_named(t, "signal: loop instant"), kLoops);
  ASSERT_LE(kept_scopes, run.handler_scopes);
  ASSERT_LE(kept_instants, run.handler_instants);
  EXPECT_EQ(t.meta.dropped_events, (run.handler_scopes - kept_scopes) + (run.handler_instants - kept_instants))
      << run.signals << " signals; handler scopes " << kept_scopes << " of " << run.handler_scopes
      << ", instants " << kept_instants << " of " << run.handler_instants;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kComplete) {
      ASSERT_GE(t.events.dur_ns[e], 0) << t.name(e);
    }
  }
}

// The same with a buffer that fills half-way: it holds exactly its
// capacity, and everything else, from the loop or a handler, is counted.
TEST(ProfilerFaults, ASignalHandlerRecordingIntoAFullBufferIsCountedExactly) {
  const std::uint64_t kLoops = kSanitized ? 100'000 : 1'000'000;
  const std::uint32_t kCapacity = static_cast<std::uint32_t>(kLoops);  // 2 records a loop
  Profiler prof({.buffer_events_per_thread = kCapacity, .payload_words_per_thread = 0});
  ASSERT_TRUE(prof.start());
  const SignalRun run = record_under_signals(kLoops);
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  std::uint64_t kept = 0;
  for (const char* name : {"signal: loop scope", "signal: loop instant", "signal: handler scope",
                           "signal: handler instant"}) {
    kept += count_named(t, name);
  }
  EXPECT_GT(run.signals, 0u);
  EXPECT_EQ(kept, kCapacity);
  EXPECT_EQ(kept + t.meta.dropped_events, 2 * kLoops + run.handler_scopes + run.handler_instants)
      << run.signals << " signals";
}

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A window big enough that its export takes a while (tens of ms).
void record_big_window(Profiler* prof, int scopes) {
  ASSERT_TRUE(prof->start());
  for (int i = 0; i < scopes; ++i) {
    TPROF_RECORD_FUNCTION("export me");
  }
  ASSERT_TRUE(prof->stop());
}

// SIGKILL at any moment of an export over an existing trace leaves the old
// file, whole, or the new one, whole: never a mix or a prefix.
TEST(ProfilerFaults, AnExportKilledMidWayLeavesTheOldFileOrTheNewOne) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tprof_killed_export_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "trace.json";
  const std::string old_text = "{\"traceEvents\": []}\n";
  const int scopes = kSanitized ? 50'000 : 400'000;
  int replaced = 0, kept = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::ofstream(target, std::ios::binary) << old_text;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Profiler prof;
      record_big_window(&prof, scopes);
      _exit(prof.export_chrome_trace(target.string()).ok() ? 0 : 1);
    }
    // Kill it somewhere between recording and the end of its export.
    std::this_thread::sleep_for(std::chrono::milliseconds(40 + 25 * trial));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    const std::string now = slurp(target);
    if (now == old_text) {
      ++kept;
      continue;
    }
    const Result<Trace> t = read_trace(target.string());
    ASSERT_TRUE(t) << "trial " << trial << ": a partial file: " << t.error().to_string();
    EXPECT_EQ(count_named(*t, "export me"), static_cast<std::size_t>(scopes));
    EXPECT_TRUE(t->diagnostics.count(DiagnosticCode::kTruncated) == 0);
    ++replaced;
  }
  EXPECT_EQ(kept + replaced, 6);
  // Killed exports leave their temporary files; the next export of the
  // same target clears those of processes that are gone.
  Profiler prof;
  record_big_window(&prof, 10);
  ASSERT_TRUE(prof.export_chrome_trace(target.string()));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

// A disk that fills during the export (RLIMIT_FSIZE in a child, the same
// EFBIG/ENOSPC path for the writer): the export fails with the reason, the
// existing trace is untouched, and no temporary file is left beside it.
TEST(ProfilerFaults, AFullDiskFailsTheExportAndLeavesTheOldFile) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tprof_full_disk_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "trace.json";
  const std::string old_text = "{\"traceEvents\": []}\n";
  std::ofstream(target, std::ios::binary) << old_text;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Profiler prof;
    record_big_window(&prof, 20'000);
    signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
    rlimit limit{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &limit);
    const Status s = prof.export_chrome_trace(target.string());
    _exit(s.ok() ? 0 : (s.error().message().find("File too large") != std::string::npos ? 3 : 4));
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "0: the export did not fail; 4: it failed without saying why";
  EXPECT_EQ(slurp(target), old_text);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u) << "a temporary file was left beside the trace";
  fs::remove_all(dir);
}


// fork() and a running Profiler (issue 36, defect 4). The child's copy of
// the parent's profiler is inert: stop(), flush(), step() and its
// destruction return at once (the parent's delivery and spill threads are
// not in the child: they hung waiting for them), deliver nothing (no
// on_trace_ready with the parent's window), and the child holds none of
// the parent's spill files. A Profiler the child starts records the
// child's own windows. Each child is bounded (SIGALRM, then SIGKILL): a
// hang fails the test instead of hanging the suite.

// Descriptors of this process open on spill files (unlinked tprof-spill.*).
int spill_descriptors() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    char link[512];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t len = readlink(path.c_str(), link, sizeof link - 1);
    if (len <= 0) continue;
    link[len] = '\0';
    if (std::strstr(link, "tprof-spill.") != nullptr) ++n;
  }
  closedir(d);
  return n;
}

// Lossless spilling on a loaded machine (as capture_spill_test's).
struct PatientSpill {
  PatientSpill() { internal::set_spill_max_wait_for_testing(30'000'000'000); }
  ~PatientSpill() {
    internal::set_spill_max_wait_for_testing(internal::kSpillMaxWaitNs);
    internal::set_spill_delay_for_testing(0);
  }
};

// The parent's handler, called in a child: the parent's window delivered there.
constexpr int kDeliveredInTheChild = 42;

// A Profiler the child starts after the fork records the child's window,
// and nothing of the parent's. Under a sanitizer it delivers inline and
// does not spill: TSan starts no thread in the child of a multi-threaded
// fork.
std::string childs_own_profiler_works(const std::string& spill_dir) {
  ProfilerOptions o;
  o.deliver_inline = kSanitized;
  if (!kSanitized && !spill_dir.empty()) {
    o.spill_dir = spill_dir;
    o.buffer_events_per_thread = 256;
  }
  Profiler mine(o);
  if (const Status s = mine.start(); !s.ok()) return "the child's own profiler: start(): " + s.error().to_string();
  for (int i = 0; i < 1000; ++i) {
    TPROF_RECORD_FUNCTION("child's own");
  }
  if (const Status s = mine.stop(); !s.ok()) return "the child's own profiler: stop(): " + s.error().to_string();
  const std::size_t own = count_named(mine.trace(), "child's own");
  const std::size_t parents = count_named(mine.trace(), "parent's work");
  if (own != 1000 || parents != 0 || mine.trace().meta.dropped_events != 0) {
    return "the child's own profiler recorded " + std::to_string(own) + " of its 1000 scopes and " +
           std::to_string(parents) + " of the parent's (" + std::to_string(mine.trace().meta.dropped_events) +
           " dropped)";
  }
  return {};
}

enum class ChildCall : std::uint8_t { kStop, kFlush, kStep, kDestroy };

struct ForkCase {
  bool deliver_inline = false;
  bool spill = false;
  ChildCall call = ChildCall::kStop;
};

std::string fork_case_text(const ForkCase& c) {
  static const char* const kCalls[] = {"Stop", "Flush", "Step", "Destroy"};
  return std::string(c.deliver_inline ? "Inline" : "OffThread") + (c.spill ? "Spilling" : "") +
         kCalls[static_cast<int>(c.call)];
}
std::string fork_case_name(const ::testing::TestParamInfo<ForkCase>& info) { return fork_case_text(info.param); }
void PrintTo(const ForkCase& c, std::ostream* os) { *os << fork_case_text(c); }

class ProfilerFork : public ::testing::TestWithParam<ForkCase> {};

// The parent records every step as a window while two workers record; the
// child is forked while a window's on_trace_ready is running on the
// delivery thread (off-thread delivery) and, spilling, while the parent
// holds an open spill file with chunks queued. The parent's windows are
// all delivered afterwards, in the parent, once each, and none lost.
TEST_P(ProfilerFork, TheChildsCopyReturnsAtOnceAndWritesNothingOfTheParents) {
  const ForkCase c = GetParam();
  const pid_t parent = getpid();
  const testing::TempDir dir("tprof_fork");
  const PatientSpill patient;
  std::atomic<bool> gate{false}, in_handler{false};
  std::mutex mu;
  std::size_t windows = 0, parents_work = 0, childs_own = 0;
  std::uint64_t dropped = 0;
  ProfilerOptions o;
  o.schedule = schedule({.active = 1});  // every step ends a window
  o.deliver_inline = c.deliver_inline;
  o.payload_words_per_thread = 0;
  if (c.spill) {
    o.spill_dir = dir.path();
    o.buffer_events_per_thread = 256;  // chunks of 64 records
    internal::set_spill_delay_for_testing(200'000);  // a slow disk: chunks queued at the fork
  } else {
    o.buffer_events_per_thread = 1u << 16;
  }
  o.on_trace_ready = [&](Profiler& p) -> Status {
    if (getpid() != parent) _exit(kDeliveredInTheChild);
    if (gate.load()) {
      in_handler = true;
      while (gate.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
      in_handler = false;
    }
    const std::lock_guard<std::mutex> lock(mu);
    ++windows;
    parents_work += count_named(p.trace(), "parent's work");
    childs_own += count_named(p.trace(), "child's own");
    dropped += p.trace().meta.dropped_events;
    return {};
  };
  auto prof = std::make_unique<Profiler>(o);
  ASSERT_TRUE(prof->start());
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&done] {
      // Static names: these threads never allocate, so the child (which
      // does) never finds the allocator's lock held by one of them
      // (GCC 12's ASan has no fork handlers for it).
      while (!done.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 20; ++i) {
          TPROF_RECORD_FUNCTION("parent's work");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  // A failed assertion below leaves neither the handler waiting (the
  // profiler's destructor would wait for it) nor the workers running.
  struct Release {
    std::atomic<bool>& gate;
    std::atomic<bool>& done;
    std::vector<std::thread>& workers;
    ~Release() {
      gate = false;
      done = true;
      for (auto& th : workers) {
        if (th.joinable()) th.join();
      }
    }
  } release{gate, done, workers};
  int steps = 0;
  for (; steps < 3; ++steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(prof->step());
  }
  if (!c.deliver_inline) {
    // A delivery in flight: the next window's on_trace_ready waits. The
    // windows before it are delivered first: a step() that ended a window
    // while two were unbuilt would wait for the gated delivery thread.
    ASSERT_TRUE(prof->flush());
    gate = true;
    ASSERT_TRUE(prof->step());
    ++steps;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!in_handler.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(in_handler.load());
  }
  if (c.spill) {
    // The window's spill file is open (the workers' chunks keep it so).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (spill_descriptors() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(spill_descriptors(), 0);
  }
  const testing::ChildResult child = testing::run_in_child([&]() -> std::string {
    // The parent's spill files are not the child's to write or read.
    if (spill_descriptors() != 0) return "the child holds the parent's spill files";
    Status s;
    switch (c.call) {
      case ChildCall::kStop:
        s = prof->stop();
        break;
      case ChildCall::kFlush:
        s = prof->flush();
        break;
      case ChildCall::kStep:
        for (int i = 0; i < 4 && s.ok(); ++i) s = prof->step();
        break;
      case ChildCall::kDestroy:
        prof.reset();
        break;
    }
    if (!s.ok()) return "the call returned " + s.error().to_string();
    if (prof != nullptr) {
      // Then all the others, and its destruction.
      for (const Status& again : {prof->step(), prof->flush(), prof->stop(), prof->stop()}) {
        if (!again.ok()) return "a later call returned " + again.error().to_string();
      }
      prof.reset();
    }
    return childs_own_profiler_works(c.spill ? dir.path() : std::string());
  });
  gate = false;
  EXPECT_TRUE(child.ok()) << child.describe()
                          << (child.finished && WIFEXITED(child.status) &&
                                      WEXITSTATUS(child.status) == kDeliveredInTheChild
                                  ? " (on_trace_ready was called in the child with the parent's window)"
                                  : "");
  for (int i = 0; i < 2; ++i, ++steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(prof->step());
  }
  done = true;
  for (auto& th : workers) th.join();
  ASSERT_TRUE(prof->stop());
  prof.reset();
  // Every window (one per step, and the one stop() ended) delivered here, once.
  EXPECT_EQ(windows, static_cast<std::size_t>(steps + 1));
  EXPECT_GT(parents_work, 0u);
  EXPECT_EQ(childs_own, 0u);
  if (c.spill) {
    EXPECT_EQ(dropped, 0u) << "spilled records of the parent were lost";
    EXPECT_EQ(spill_descriptors(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Calls, ProfilerFork,
    ::testing::ValuesIn([] {
      std::vector<ForkCase> cases;
      for (bool deliver_inline : {false, true}) {
        for (bool spill : {false, true}) {
          for (ChildCall call : {ChildCall::kStop, ChildCall::kFlush, ChildCall::kStep, ChildCall::kDestroy}) {
            cases.push_back({deliver_inline, spill, call});
          }
        }
      }
      return cases;
    }()),
    fork_case_name);

// fork() inside on_trace_ready: the child returns from the handler. On the
// delivery thread (off-thread) that thread is the child's only one, and it
// ends there (the child exits 0, as a process whose last thread returns);
// inline, the child's step() returns into the program, whose later calls
// are those of a child's copy (above).
void fork_inside_on_trace_ready(bool deliver_inline) {
#if defined(__SANITIZE_THREAD__)
  constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
  constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
  constexpr bool kThreadSanitizer = false;
#endif
  if (kThreadSanitizer && !deliver_inline) {
    GTEST_SKIP() << "TSan's runtime crashes when a fork child's only thread, not its main one, ends";
  }
  const pid_t parent = getpid();
  std::atomic<pid_t> child{0};
  std::atomic<int> windows{0};
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ProfilerOptions o;
  o.schedule = schedule({.active = 1});
  o.deliver_inline = deliver_inline;
  o.buffer_events_per_thread = 1u << 12;
  o.payload_words_per_thread = 0;
  o.on_trace_ready = [&](Profiler&) -> Status {
    if (getpid() != parent) _exit(kDeliveredInTheChild);
    if (windows.fetch_add(1) != 1) return {};
    std::fflush(nullptr);  // the child's exit() flushes its copy of stdout's buffer
    const pid_t pid = fork();
    if (pid == 0) {
      g_no_leak_check_at_exit = true;
      close(fds[0]);
      alarm(30);
      return {};  // back into tprof, in the child
    }
    child = pid;
    return {};
  };
  auto prof = std::make_unique<Profiler>(o);
  ASSERT_TRUE(prof->start());
  for (int i = 0; i < 4; ++i) {
    { TPROF_RECORD_FUNCTION("parent's work"); }
    const Status s = prof->step();
    if (getpid() != parent) {
      // The inline child, out of the handler and its step().
      const Status stopped = prof->stop();
      prof.reset();
      _exit(s.ok() && stopped.ok() ? 0 : 3);
    }
    ASSERT_TRUE(s);
    if (i == 1) {
      // The second window is being delivered, and forks: this thread
      // waits without allocating (the child frees; GCC 12's ASan has no
      // fork handlers for its allocator's lock).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (child.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  ASSERT_TRUE(prof->stop());
  prof.reset();
  close(fds[1]);
  ASSERT_GT(child.load(), 0);
  const testing::ChildResult r = testing::wait_for_child(child.load(), fds[0], 40);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(windows.load(), 5);
}

TEST(ProfilerForkInHandler, OffThread) { fork_inside_on_trace_ready(false); }
TEST(ProfilerForkInHandler, Inline) { fork_inside_on_trace_ready(true); }

// Process exit with a Profiler still running (a static one, destroyed by
// exit() after the thread_local destructors of the thread that calls it):
// its window is delivered, a scope recorded by a thread_local's destructor
// included. A child forked meanwhile that exits the same way destroys its
// copy at once and delivers nothing: one trace file in all.
struct RecordsAtThreadExit {
  ~RecordsAtThreadExit() { TPROF_RECORD_FUNCTION("thread_local destructor"); }
};
thread_local RecordsAtThreadExit tl_records_at_exit;

Profiler& profiler_destroyed_at_exit(ProfilerOptions options) {
  static Profiler prof(std::move(options));  // constructed in the child: its destructor runs at the child's exit
  return prof;
}

TEST(ProfilerExit, ARunningProfilerDeliversAtExitAndAForkedChildsCopyDoesNot) {
  const testing::TempDir dir("tprof_exit");
  const testing::ChildResult r = testing::run_in_child(
      [&]() -> std::string {
        g_no_leak_check_at_exit = true;
        Profiler& prof = profiler_destroyed_at_exit({.on_trace_ready = tensorboard_trace_handler(dir.path(), "w")});
        if (!prof.start().ok()) return "start() failed";
        { TPROF_RECORD_FUNCTION("before exit"); }
        (void)&tl_records_at_exit;  // constructed after the thread's first record: destroyed before tprof's guard
        const testing::ChildResult grandchild = testing::run_in_child(
            [] {
              TPROF_RECORD_FUNCTION("the grandchild's");
              return std::string();
            },
            20, /*run_exit=*/true);
        if (!grandchild.ok()) return "the grandchild's exit: " + grandchild.describe();
        return std::string();  // exit(0): the window is delivered by ~Profiler
      },
      40, /*run_exit=*/true);
  ASSERT_TRUE(r.ok()) << r.describe();
  const std::vector<std::string> files = dir.files();
  ASSERT_EQ(files.size(), 1u) << "one window, delivered once (by the child, not its own child)";
  const Result<Trace> t = read_trace(dir.path() + "/" + files[0]);
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(count_named(*t, "before exit"), 1u);
  EXPECT_EQ(count_named(*t, "thread_local destructor"), 1u);
  EXPECT_EQ(count_named(*t, "the grandchild's"), 0u);
}

}  // namespace
}  // namespace tprof
