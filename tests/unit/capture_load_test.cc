// Capture under load and faults (issue 13, docs/reliability.md "Capture"):
// many threads filling bounded buffers, a Profiler destroyed under open
// scopes, exceptions through scopes, fork() while recording. make test
// runs these under ASan+UBSan and TSan too (with fewer scopes there).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tprof/profiler.h"

namespace tprof {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::size_t count_named(const Trace& t, std::string_view name) {
  std::size_t n = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) n += t.name(e) == name ? 1 : 0;
  return n;
}

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
// the child records into its own copy without blocking on a lock a parent
// thread held at the fork, and the parent's trace holds only its own events.
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

}  // namespace
}  // namespace tprof
