// Streaming windows (ProfilerOptions::spill_dir): windows many times longer
// than the thread buffers keep every event, in order, nested across the
// chunks they were spilled in; memory stays at the buffers' size; the
// spill files are gone after delivery; a slow disk makes recording threads
// wait (counted), then drop (counted exactly); an unusable directory is an
// error at start(). Issue 26, item 2.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "src/capture/recorder.h"
#include "src/trace/json_value.h"
#include "tests/support/child_process.h"
#include "tests/support/sanitizers.h"
#include "tests/support/trace_queries.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"


namespace tprof {
namespace {

namespace fs = std::filesystem;

class SpillDir {
 public:
  SpillDir() {
    std::string t = (fs::temp_directory_path() / "tprof-spill-test.XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~SpillDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  std::string path_;
};

// What one worker records: an outer scope open across the whole window (it
// begins in the first chunk and ends in the last), then `n` items, each
// with two arguments (a runtime key and a static one) and a nested child;
// every 10th item has an op with shapes.
void work(int n) {
  RecordFunction outer(std::string("outer"));
  for (int i = 0; i < n; ++i) {
    RecordFunction item(std::string("item"));
    item.arg("i", static_cast<std::int64_t>(i));
    TPROF_ARG(item, "twice", 2 * i);
    TPROF_RECORD_FUNCTION("child");
    if (i % 10 == 0) {
      TPROF_RECORD_OP_SHAPES("op::mm", {{i, 2}});
    }
  }
}

struct Ev {
  std::int64_t ts, end;
  std::uint32_t e;
};

// Checks one window recorded by `threads` workers of `n` items each: exact
// counts, per-thread order, nesting.
void check_window(const Trace& t, int threads, int n) {
  EXPECT_EQ(t.meta.dropped_events, 0u);
  EXPECT_EQ(t.meta.dropped_shapes, 0u);
  EXPECT_EQ(t.meta.unfinished_scopes, 0u);
  std::map<std::uint32_t, std::map<std::string, std::vector<Ev>>> lanes;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    const std::string name(t.name(e));
    if (name != "outer" && name != "item" && name != "child" && name != "op::mm") continue;
    lanes[t.events.lane[e]][name].push_back({t.events.ts_ns[e], t.events.ts_ns[e] + t.events.dur_ns[e], e});
  }
  ASSERT_EQ(lanes.size(), static_cast<std::size_t>(threads));
  for (auto& [lane, by_name] : lanes) {
    ASSERT_EQ(by_name["outer"].size(), 1u);
    ASSERT_EQ(by_name["item"].size(), static_cast<std::size_t>(n));
    ASSERT_EQ(by_name["child"].size(), static_cast<std::size_t>(n));
    ASSERT_EQ(by_name["op::mm"].size(), static_cast<std::size_t>((n + 9) / 10));
    for (auto& [name, evs] : by_name) {
      std::stable_sort(evs.begin(), evs.end(), [](const Ev& x, const Ev& y) { return x.ts < y.ts; });
    }
    const Ev outer = by_name["outer"][0];
    const auto& items = by_name["item"];
    const auto& children = by_name["child"];
    for (int i = 0; i < n; ++i) {
      const Ev& it = items[static_cast<std::size_t>(i)];
      const Ev& ch = children[static_cast<std::size_t>(i)];
      // In recording order, whole, and nested.
      ASSERT_EQ(testing::arg_text(t, it.e, "i"), std::to_string(i)) << "lane " << lane;
      ASSERT_EQ(testing::arg_text(t, it.e, "twice"), std::to_string(2 * i)) << "lane " << lane;
      ASSERT_TRUE(it.ts >= outer.ts && it.end <= outer.end) << i;
      ASSERT_TRUE(ch.ts >= it.ts && ch.end <= it.end) << i;
    }
    for (std::size_t k = 0; k < by_name["op::mm"].size(); ++k) {
      const auto v = internal::JsonValue::parse(t.args_json(by_name["op::mm"][k].e), 0);
      ASSERT_TRUE(v.has_value());
      const internal::JsonValue* dims = v->find("Input Dims");
      ASSERT_NE(dims, nullptr) << k;
      ASSERT_EQ(dims->items().size(), 1u);
      ASSERT_EQ(dims->items()[0].items()[0].int_or(-1), static_cast<std::int64_t>(k * 10)) << k;
    }
  }
}

// Lossless tests wait as long as the spill thread needs: on a loaded 2-core
// machine under a sanitizer it falls behind by more than the default 50 ms
// (that path is SlowDiskWaitsThenDropsCounted's).
struct PatientSpill {
  PatientSpill() { internal::set_spill_max_wait_for_testing(30'000'000'000); }
  ~PatientSpill() { internal::set_spill_max_wait_for_testing(internal::kSpillMaxWaitNs); }
};

constexpr std::uint32_t kBuffer = 4096;  // chunks of 1024 records
constexpr int kItems = 12000;            // about 37k records per thread: 36 chunks

TEST(CaptureSpill, LongWindowKeepsEveryEventInOrder) {
  const PatientSpill patient;
  for (const bool inline_delivery : {false, true}) {
    SCOPED_TRACE(inline_delivery ? "deliver_inline" : "off-thread");
    SpillDir dir;
    std::size_t files_in_handler = 99;
    Profiler prof({.on_trace_ready =
                       [&](Profiler&) {
                         files_in_handler = dir.files();
                         return Status();
                       },
                   .record_shapes = true,
                   .buffer_events_per_thread = kBuffer,
                   .payload_words_per_thread = 256,
                   .deliver_inline = inline_delivery,
                   .spill_dir = dir.path()});
    ASSERT_TRUE(prof.start().ok());
    std::vector<std::thread> workers;
    for (int w = 0; w < 3; ++w) workers.emplace_back(work, kItems);
    for (auto& w : workers) w.join();
    EXPECT_EQ(dir.files(), 0u);  // unlinked when created
    ASSERT_TRUE(prof.stop().ok());
    const SpillStats s = prof.spill_stats();
    EXPECT_GE(s.chunks, 3u * 30);
    EXPECT_EQ(s.dropped, 0u);
    check_window(prof.trace(), 3, kItems);
    EXPECT_EQ(files_in_handler, 0u);
    EXPECT_EQ(dir.files(), 0u);
  }
}

TEST(CaptureSpill, ScheduleOfSeveralWindows) {
  const PatientSpill patient;
  for (const bool inline_delivery : {false, true}) {
    SCOPED_TRACE(inline_delivery ? "deliver_inline" : "off-thread");
    SpillDir dir;
    std::vector<std::string> problems;
    int windows = 0;
    Profiler prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 3}),
                   .on_trace_ready =
                       [&](Profiler& p) {
                         ++windows;
                         // Two active steps of 2 workers, n items each.
                         const Trace& t = p.trace();
                         if (testing::count_named(t, "item") != 2u * 2 * 3000 || t.meta.dropped_events != 0) {
                           problems.push_back("window " + std::to_string(windows) + ": " +
                                              std::to_string(testing::count_named(t, "item")) + " items, " +
                                              std::to_string(t.meta.dropped_events) + " dropped");
                         }
                         return Status();
                       },
                   .buffer_events_per_thread = 2048,
                   .deliver_inline = inline_delivery,
                   .spill_dir = dir.path()});
    ASSERT_TRUE(prof.start().ok());
    for (int step = 0; step < 12; ++step) {
      std::thread a(work, 3000), b(work, 3000);
      a.join();
      b.join();
      ASSERT_TRUE(prof.step().ok());
    }
    ASSERT_TRUE(prof.stop().ok());
    EXPECT_EQ(windows, 3);
    EXPECT_TRUE(problems.empty()) << problems.front();
    EXPECT_GT(prof.spill_stats().chunks, 0u);
    EXPECT_EQ(dir.files(), 0u);
  }
}

// The spill thread slower than the recording: a thread whose next chunk is
// still being written waits (counted); past kSpillMaxWaitNs it drops,
// counted exactly, until a chunk is free again.
TEST(CaptureSpill, SlowDiskWaitsThenDropsCounted) {
  SpillDir dir;
  struct Reset {
    ~Reset() { internal::set_spill_delay_for_testing(0); }
  } reset;
  auto flat = [](int n) {
    for (int i = 0; i < n; ++i) {
      TPROF_RECORD_FUNCTION("flat");
    }
  };
  {
    const PatientSpill patient;
    internal::set_spill_delay_for_testing(2'000'000);  // 2 ms a chunk: waits, no drop
    Profiler prof({.buffer_events_per_thread = 256, .spill_dir = dir.path()});
    ASSERT_TRUE(prof.start().ok());
    flat(1000);
    ASSERT_TRUE(prof.stop().ok());
    EXPECT_GT(prof.spill_stats().waits, 0u);
    EXPECT_GT(prof.spill_stats().wait_ns, 0);
    EXPECT_EQ(prof.spill_stats().dropped, 0u);
    EXPECT_EQ(testing::count_named(prof.trace(), "flat"), 1000u);
    EXPECT_EQ(prof.trace().meta.dropped_events, 0u);
  }
  {
    internal::set_spill_delay_for_testing(internal::kSpillMaxWaitNs + 40'000'000);  // drops
    Profiler prof({.buffer_events_per_thread = 256, .spill_dir = dir.path()});
    ASSERT_TRUE(prof.start().ok());
    flat(800);
    ASSERT_TRUE(prof.stop().ok());
    const std::size_t kept = testing::count_named(prof.trace(), "flat");
    EXPECT_GT(prof.spill_stats().dropped, 0u);
    EXPECT_EQ(prof.trace().meta.dropped_events, prof.spill_stats().dropped);
    EXPECT_EQ(kept + prof.trace().meta.dropped_events, 800u);
  }
  EXPECT_EQ(dir.files(), 0u);
}

// The race a loaded machine hit once (capture_load_test's ProfilerFork
// left a spill file open): a thread checks its buffer's epoch, is
// preempted while its window ends, is built and released, then finds its
// chunk full. That chunk belongs to a window that is never restored again:
// handed to the spill thread, it would open a file nobody closes. It is
// dropped (counted) instead, as a full buffer's record after the window's
// end. Replayed here step by step on one thread.
TEST(CaptureSpill, AChunkOfAWindowAlreadyBuiltIsDroppedNotSpilled) {
  SpillDir dir;
  Profiler prof({.buffer_events_per_thread = kBuffer, .deliver_inline = true, .spill_dir = dir.path()});
  ASSERT_TRUE(prof.start().ok());
  ASSERT_TRUE(internal::enter_recorder());
  internal::ThreadBuffer* b = internal::current_buffer();
  ASSERT_NE(b, nullptr);
  while (b->size < b->capacity) internal::append_inside(internal::Record{});  // kind 0: skipped by the builder
  internal::leave_recorder();
  ASSERT_TRUE(prof.stop().ok());
  (void)prof.trace();  // built and released
  ASSERT_TRUE(internal::enter_recorder());
  const std::uint64_t dropped = b->dropped.load();
  const bool handed_over = internal::make_room(b);
  internal::leave_recorder();
  EXPECT_FALSE(handed_over) << "a chunk of a window already built went to the spill thread";
  EXPECT_EQ(b->dropped.load(), dropped + 1);
  EXPECT_EQ(prof.spill_stats().chunks, 0u);
}

TEST(CaptureSpill, UnusableDirectoryIsAnErrorAtStart) {
  SpillDir dir;
  const std::string file = dir.path() + "/plain-file";
  std::ofstream(file) << "x";
  for (const std::string& bad : {dir.path() + "/does/not/exist", file}) {
    Profiler prof({.spill_dir = bad});
    const Status s = prof.start();
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code(), ErrorCode::kIo);
    EXPECT_NE(s.error().message().find("spill_dir"), std::string::npos) << s.error().message();
    EXPECT_NE(s.error().message().find(bad), std::string::npos) << s.error().message();
    // Nothing left running: another profiler starts.
    Profiler next;
    ASSERT_TRUE(next.start().ok());
    ASSERT_TRUE(next.stop().ok());
  }
}

// Resident set size now (pages of /proc/self/statm).
std::int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Recording 2M events (64 MiB of records) into a 64k-event buffer keeps the
// process's memory at the buffers while the window records.
TEST(CaptureSpill, MemoryStaysAtTheBuffersWhileRecording) {
  const PatientSpill patient;
  if (tprof::testing::kSanitized) GTEST_SKIP() << "RSS is the sanitizer's, not tprof's";
  SpillDir dir;
  constexpr std::uint32_t kEvents = 1u << 16;  // 2 MiB of records a buffer
  constexpr int kScopes = 2'000'000;
  std::int64_t grown = 0;
  Profiler prof({.buffer_events_per_thread = kEvents, .spill_dir = dir.path()});
  ASSERT_TRUE(prof.start().ok());
  const std::int64_t before = rss_bytes();
  std::int64_t peak = before;
  for (int i = 0; i < kScopes; ++i) {
    TPROF_RECORD_FUNCTION("s");
    if (i % 100000 == 0) peak = std::max(peak, rss_bytes());
  }
  grown = std::max(peak, rss_bytes()) - before;
  ASSERT_TRUE(prof.stop().ok());
  EXPECT_EQ(testing::count_named(prof.trace(), "s"), static_cast<std::size_t>(kScopes));
  EXPECT_EQ(prof.trace().meta.dropped_events, 0u);
  // The records were 64 MiB; the buffers 4 MiB (two per thread).
  std::printf("RSS growth while recording %d events spilled from a %u-event buffer: %lld KiB\n", kScopes, kEvents,
              static_cast<long long>(grown >> 10));
  EXPECT_LT(grown, std::int64_t{16} << 20);
}


// The dropped_events diagnostics of a trace, one a line.
std::string dropped_reasons(const Trace& t) {
  std::string out;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code == DiagnosticCode::kDroppedEvents) out += d.message + "\n";
  }
  return out;
}

// Records `n` flat scopes into a spilling profiler (in `dir`) and checks
// that what was lost is counted and said, with `reason` in the words, and
// not said to be a full buffer. Returns what is wrong ("" when nothing).
std::string record_past_a_full_spill_file(const std::string& dir, int n, const std::string& reason) {
  Profiler prof({.buffer_events_per_thread = 256, .payload_words_per_thread = 0, .spill_dir = dir});
  if (!prof.start().ok()) return "start() failed";
  for (int i = 0; i < n; ++i) {
    TPROF_RECORD_FUNCTION("flat");
  }
  if (!prof.stop().ok()) return "stop() failed";
  const Trace& t = prof.trace();
  const std::size_t kept = testing::count_named(t, "flat");
  const std::string reasons = dropped_reasons(t);
  std::string wrong;
  if (t.meta.dropped_events == 0) wrong += "nothing was dropped; ";
  if (kept + t.meta.dropped_events != static_cast<std::size_t>(n)) {
    wrong += std::to_string(kept) + " kept + " + std::to_string(t.meta.dropped_events) + " dropped != " +
             std::to_string(n) + "; ";
  }
  if (prof.spill_stats().dropped != t.meta.dropped_events) {
    wrong += "spill_stats().dropped " + std::to_string(prof.spill_stats().dropped) + "; ";
  }
  if (reasons.find(reason) == std::string::npos) wrong += "the reason is not \"" + reason + "\"; ";
  if (reasons.find(std::to_string(t.meta.dropped_events) + " spilled events dropped") == std::string::npos) {
    wrong += "the count is not said; ";
  }
  if (reasons.find("buffers were full") != std::string::npos) wrong += "it says the buffers were full; ";
  return wrong.empty() ? wrong : wrong + "the diagnostics:\n" + reasons;
}

// ulimit -f (RLIMIT_FSIZE) with SIGXFSZ at its default action, which kills:
// the spill thread's write past the limit fails with EFBIG instead (the
// signal held off by the writers' one guard, FileSizeSignalGuard), the
// chunks that could not be written are counted, and the trace says the
// file size limit, not full buffers (issue 36, defects 5 and 11).
TEST(CaptureSpill, AFileSizeLimitDropsCountedAndSaidNotAKill) {
  SpillDir dir;
  const testing::ChildResult r = testing::run_in_child([&] {
    signal(SIGXFSZ, SIG_DFL);
    const rlimit limit{64 * 1024, 64 * 1024};  // 2048 records; 20000 are spilled
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return std::string("setrlimit failed");
    return record_past_a_full_spill_file(dir.path(), 20000, "reached the file size limit (RLIMIT_FSIZE, ulimit -f): " +
                                                                std::string(std::strerror(EFBIG)));
  });
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(dir.files(), 0u);
}

// A full disk (a 128 KiB tmpfs mounted over spill_dir in a mount namespace
// of a child: root): the drop is counted and the trace says the disk was
// full, with errno's reason, not that the buffers were.
TEST(CaptureSpill, AFullDiskIsSaidToBeTheDiskNotTheBuffers) {
  if (geteuid() != 0) GTEST_SKIP() << "mounts a small tmpfs in a mount namespace: needs root";
  SpillDir dir;
  const testing::ChildResult r = testing::run_in_child([&] {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=128k") != 0) {
      return std::string("skip: cannot mount a tmpfs: ") + std::strerror(errno);
    }
    return record_past_a_full_spill_file(dir.path(), 40000,
                                         "the disk of spill_dir \"" + dir.path() + "\" was full: " +
                                             std::strerror(ENOSPC));
  });
  if (r.message.rfind("skip: ", 0) == 0) GTEST_SKIP() << r.message;
  EXPECT_TRUE(r.ok()) << r.describe();
}

// A real full buffer (no spill_dir) is still said to be one.
TEST(CaptureSpill, AFullBufferIsStillSaidToBeTheBuffers) {
  Profiler prof({.buffer_events_per_thread = 256, .payload_words_per_thread = 0});
  ASSERT_TRUE(prof.start().ok());
  for (int i = 0; i < 1000; ++i) {
    TPROF_RECORD_FUNCTION("flat");
  }
  ASSERT_TRUE(prof.stop().ok());
  EXPECT_EQ(prof.trace().meta.dropped_events, 1000u - 256u);
  const std::string reasons = dropped_reasons(prof.trace());
  EXPECT_NE(reasons.find("744 events dropped: thread buffers were full"), std::string::npos) << reasons;
  EXPECT_EQ(reasons.find("spill"), std::string::npos) << reasons;
}

}  // namespace
}  // namespace tprof
