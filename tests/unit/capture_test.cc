#include <gtest/gtest.h>

#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <stdexcept>
#include <memory>
#include <thread>
#include <vector>

#include "src/base/file.h"
#include "src/capture/recorder.h"
#include "tests/support/sanitizers.h"
#include "tests/support/trace_compare.h"
#include "tests/support/trace_queries.h"
#include "tprof/profiler.h"
#include "tprof/profiler_tables.h"
#include "tprof/read.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using A = ProfilerAction;

using tprof::testing::count_named;

// docs/torch-table-semantics.md §4.2, every example.
TEST(Schedule, ActionTableOfTorch) {
  auto actions = [](ScheduleOptions o, int n) {
    std::vector<A> out;
    const Schedule s(o);
    for (int i = 0; i < n; ++i) out.push_back(s(i));
    return out;
  };
  EXPECT_EQ(actions({.wait = 1, .warmup = 1, .active = 3, .repeat = 1}, 6),
            (std::vector<A>{A::kNone, A::kWarmup, A::kRecord, A::kRecord, A::kRecordAndSave, A::kNone}));
  EXPECT_EQ(actions({.wait = 1, .warmup = 1, .active = 2, .repeat = 2}, 10),
            (std::vector<A>{A::kNone, A::kWarmup, A::kRecord, A::kRecordAndSave, A::kNone, A::kWarmup, A::kRecord,
                            A::kRecordAndSave, A::kNone, A::kNone}));
  // repeat = 0 cycles for ever.
  EXPECT_EQ(actions({.wait = 1, .warmup = 1, .active = 2, .repeat = 0}, 12)[11], A::kRecordAndSave);
  EXPECT_EQ(actions({.wait = 0, .warmup = 1, .active = 1, .skip_first = 3}, 7),
            (std::vector<A>{A::kNone, A::kNone, A::kNone, A::kWarmup, A::kRecordAndSave, A::kWarmup,
                            A::kRecordAndSave}));
  EXPECT_EQ(actions({.wait = 0, .warmup = 0, .active = 2}, 3),
            (std::vector<A>{A::kRecord, A::kRecordAndSave, A::kRecord}));
  EXPECT_FALSE(Schedule({.active = 0}).valid());
  EXPECT_FALSE(Schedule({.wait = -1, .active = 1}).valid());
  EXPECT_TRUE(Schedule({.active = 1}).valid());
}

TEST(Profiler, InvalidScheduleAndDoubleStartAreErrors) {
  Profiler bad({.schedule = schedule({.active = 0})});
  Status s = bad.start();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);

  Profiler a;
  ASSERT_TRUE(a.start());
  Profiler b;
  EXPECT_FALSE(b.start());  // one profiler at a time
  ASSERT_TRUE(a.stop());
  EXPECT_FALSE(Profiler().step());
}

std::vector<std::string> step_names(const Trace& t) {
  std::vector<std::string> out;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e).rfind("ProfilerStep#", 0) == 0) out.emplace_back(t.name(e));
  }
  return out;
}

// The blog's schedule: 5 steps, wait 1, warmup 1, active 3 -> one trace with
// steps 2, 3, 4 (labelled with their own numbers), delivered in step() 5.
TEST(Profiler, ScheduleWindowsStepLabelsAndReadyCalls) {
  std::vector<std::int64_t> ready_at;
  std::vector<std::vector<std::string>> traces;
  Profiler prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 1}),
                 .on_trace_ready = [&](Profiler& p) {
                   ready_at.push_back(p.step_num());
                   traces.push_back(step_names(p.trace()));
                   return Status();
                 }});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 5; ++i) {
    { TPROF_RECORD_FUNCTION("matmul_add"); }
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  ASSERT_EQ(ready_at, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(traces[0], (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}));
  EXPECT_EQ(prof.key_averages().rows().size(), 2u);  // ProfilerStep*, matmul_add

  // repeat = 2: traces at steps 4 and 8.
  ready_at.clear();
  traces.clear();
  Profiler twice({.schedule = schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 2}),
                  .on_trace_ready = [&](Profiler& p) {
                    ready_at.push_back(p.step_num());
                    traces.push_back(step_names(p.trace()));
                    return Status();
                  }});
  ASSERT_TRUE(twice.start());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(twice.step());
  ASSERT_TRUE(twice.stop());
  EXPECT_EQ(ready_at, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(traces[1], (std::vector<std::string>{"ProfilerStep#6", "ProfilerStep#7"}));
}

TEST(Profiler, ACutShortWindowIsDeliveredAtStopAndNoScheduleMeansNoSteps) {
  int ready = 0;
  Profiler prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 5}),
                 .on_trace_ready = [&](Profiler&) { ++ready; return Status(); }});
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.step());
  ASSERT_TRUE(prof.stop());  // stopped in RECORD: delivered
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(step_names(prof.trace()), (std::vector<std::string>{"ProfilerStep#0", "ProfilerStep#1"}));

  Profiler plain({.on_trace_ready = [&](Profiler&) { ++ready; return Status(); }});
  ASSERT_TRUE(plain.start());
  { TPROF_RECORD_FUNCTION("x"); }
  ASSERT_TRUE(plain.step());
  ASSERT_TRUE(plain.stop());
  EXPECT_EQ(ready, 2);
  EXPECT_TRUE(step_names(plain.trace()).empty());
}

// On-demand windows: each SIGUSR2 toggles recording at the next step().
// Signals before steps 3 and 6 make one window of steps 3..5, delivered in
// step() 6; two signals before step 8 change nothing; one before step 9
// opens a window that stop() ends and delivers.
TEST(Profiler, ASignalTogglesWindowsAtTheNextStep) {
  std::vector<std::int64_t> ready_at;
  std::vector<std::vector<std::string>> traces;
  Profiler prof({.on_trace_ready =
                     [&](Profiler& p) {
                       ready_at.push_back(p.step_num());
                       traces.push_back(step_names(p.trace()));
                       return Status();
                     },
                 .toggle_signal = SIGUSR2});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 11; ++i) {
    { TPROF_RECORD_FUNCTION("work"); }
    if (i == 2 || i == 5 || i == 8) ASSERT_EQ(raise(SIGUSR2), 0);
    if (i == 7) {
      ASSERT_EQ(raise(SIGUSR2), 0);
      ASSERT_EQ(raise(SIGUSR2), 0);
    }
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  ASSERT_EQ(ready_at, (std::vector<std::int64_t>{6, 11}));
  EXPECT_EQ(traces[0], (std::vector<std::string>{"ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"}));
  EXPECT_EQ(traces[1], (std::vector<std::string>{"ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"}));
  EXPECT_EQ(count_named(prof.trace(), "work"), 2u);  // steps 9 and 10
  // stop() gave the signal back: the default action again.
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(Profiler, ToggleSignalRefusesASchedule) {
  Profiler both({.schedule = schedule({.active = 1}), .toggle_signal = SIGUSR2});
  EXPECT_FALSE(both.start());
  Profiler kill({.toggle_signal = SIGKILL});
  EXPECT_FALSE(kill.start());
  Profiler out_of_range({.toggle_signal = 100000});
  EXPECT_FALSE(out_of_range.start());
  // A refused start leaves nothing behind: another profiler starts.
  Profiler ok({.toggle_signal = SIGUSR2});
  EXPECT_TRUE(ok.start());
  EXPECT_TRUE(ok.stop());
}

TEST(Profiler, NothingIsRecordedOutsideWindows) {
  Profiler prof({.schedule = schedule({.wait = 2, .warmup = 1, .active = 1, .repeat = 1})});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 5; ++i) {
    { TPROF_RECORD_FUNCTION("step body"); }
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  int bodies = 0;
  for (std::uint32_t e = 0; e < prof.trace().events.size(); ++e) bodies += prof.trace().name(e) == "step body";
  EXPECT_EQ(bodies, 1);  // only step 3 records
}

TEST(Profiler, ScopesNestShapesAndMemoryAsTorchShowsThem) {
  Profiler prof({.record_shapes = true, .profile_memory = true});
  ASSERT_TRUE(prof.start());
  {
    TPROF_RECORD_FUNCTION("outer");
    char buffer[64];
    record_alloc(buffer, 4096);
    { TPROF_RECORD_OP_SHAPES("op::mm", {{16, 32}, {32, 8}}); }
    { RecordFunction dynamic(std::string("layer ") + "7", kCpuOp); }
    record_free(buffer, 4096);
    record_alloc(buffer + 8, 100, cuda_device(0));
  }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(t.meta.producer, Producer::kTprof);
  ASSERT_EQ(t.memory.size(), 3u);
  EXPECT_EQ(t.memory[0].bytes, 4096);
  EXPECT_EQ(t.memory[0].total_allocated, 4096);
  EXPECT_EQ(t.memory[1].total_allocated, 0);
  EXPECT_EQ(t.memory[2].device_type, 1);
  EXPECT_EQ(t.memory[2].device_id, 0);
  std::map<std::string, std::string> args;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) args[std::string(t.name(e))] = std::string(t.args_json(e));
  EXPECT_NE(args["op::mm"].find("\"Input Dims\": [[16, 32], [32, 8]]"), std::string::npos) << args["op::mm"];
  EXPECT_EQ(t.cat(static_cast<std::uint32_t>(std::find_if(t.events.name.begin(), t.events.name.end(),
                                                           [&](StrId n) { return t.str(n) == "layer 7"; }) -
                                              t.events.name.begin())),
            "cpu_op");

  const KeyAverages ka = prof.key_averages(true);
  const StatRow* outer = nullptr;
  for (const StatRow& r : ka.rows()) {
    if (r.key == "outer") outer = &r;
  }
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->cpu_memory_usage, 0);  // alloc and free inside
  EXPECT_EQ(outer->device_memory_usage, 100);
  const std::string table = *ka.table({.sort_by = "cpu_time_total"});
  EXPECT_NE(table.find("CPU Mem"), std::string::npos) << table;
  EXPECT_NE(table.find("[[16, 32], [32, 8]]"), std::string::npos) << table;
}

// Viewers read "ts" and "dur" as doubles. Epoch microseconds (~1.8e15 with
// three decimals) keep only 0.25 us there, and nested scopes of tens of ns
// then end after their parents; the export is relative to
// baseTimeNanoseconds (as PyTorch 2.x writes it), exact as doubles.
TEST(Profiler, ExportedTimesReadAsDoublesKeepEveryChildInsideItsParent) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 2000; ++i) {
    TPROF_RECORD_FUNCTION("outer");
    { TPROF_RECORD_FUNCTION("inner"); }
  }
  ASSERT_TRUE(prof.stop());
  const std::string path = ::testing::TempDir() + "/tprof_doubles.json";
  ASSERT_TRUE(prof.export_chrome_trace(path));
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch base;
  ASSERT_TRUE(std::regex_search(text, base, std::regex("\"baseTimeNanoseconds\": ([0-9]+)")));
  EXPECT_GT(std::stoll(base[1]), 1'500'000'000'000'000'000LL);  // epoch ns
  EXPECT_NE(text.find("\"displayTimeUnit\": \"ms\""), std::string::npos);
  // The parent comes from exact integer ns (the text without its decimal
  // point); containment is checked on doubles, as a viewer computes it.
  struct Span {
    std::int64_t begin_ns, end_ns;
    double begin, end;
  };
  auto exact_ns = [](std::string v) {
    const std::size_t dot = v.find('.');
    EXPECT_EQ(v.size() - dot, 4u) << v;  // three decimals
    v.erase(dot, 1);
    return std::stoll(v);
  };
  std::vector<Span> spans;
  const std::regex x("\"ph\": \"X\".*\"ts\": ([0-9.]+), \"dur\": ([0-9.]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), x); it != std::sregex_iterator(); ++it) {
    const double ts = std::strtod((*it)[1].str().c_str(), nullptr);  // as a viewer parses it
    const double dur = std::strtod((*it)[2].str().c_str(), nullptr);
    EXPECT_LT(ts, 1e10) << "ts is not relative";
    const std::int64_t b = exact_ns((*it)[1].str());
    spans.push_back({b, b + exact_ns((*it)[2].str()), ts, ts + dur});
  }
  ASSERT_EQ(spans.size(), 4000u);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
  });
  // A child may end in the same ns as its parent; ts + dur of the two then
  // round differently in the last bit (~1e-10 us). Viewers compare at their
  // display precision (catapult rounds both ends to the time unit's), so
  // "outside" is beyond 1e-6 us; absolute epoch us were 0.25 us off.
  constexpr double kBelowOneNs = 1e-6;
  std::vector<const Span*> stack;
  int children = 0, outside_ns = 0, outside = 0;
  for (const Span& s : spans) {
    while (!stack.empty() && stack.back()->end_ns <= s.begin_ns) stack.pop_back();
    if (!stack.empty()) {
      const Span& p = *stack.back();
      ++children;
      outside_ns += s.begin_ns < p.begin_ns || s.end_ns > p.end_ns;
      outside += s.begin < p.begin - kBelowOneNs || s.end > p.end + kBelowOneNs;
    }
    stack.push_back(&s);
  }
  EXPECT_EQ(children, 2000);
  EXPECT_EQ(outside_ns, 0);
  EXPECT_EQ(outside, 0);
}

TEST(Profiler, ThreadsThatStartAndExitDuringAWindowAreKept) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i] {
      for (int k = 0; k <= i; ++k) {
        TPROF_RECORD_FUNCTION("worker");
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  int workers = 0;
  std::set<std::uint32_t> lanes;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) == "worker") {
      ++workers;
      lanes.insert(t.events.lane[e]);
    }
  }
  EXPECT_EQ(workers, 1 + 2 + 3 + 4);
  EXPECT_EQ(lanes.size(), 4u);
  for (std::uint32_t l : lanes) EXPECT_NE(t.lanes[l].thread_name, kEmptyStr);
}

// Workers record continuously while windows open and close underneath them
// (run under TSan by `make test`): every delivered window holds only whole,
// well-ordered events of its own time span.
TEST(Profiler, WindowsOpenAndCloseWhileThreadsRecord) {
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&done] {
      while (!done.load(std::memory_order_relaxed)) {
        TPROF_RECORD_FUNCTION("outer");
        TPROF_RECORD_OP("inner");
      }
    });
  }
  int windows = 0;
  Profiler prof({.schedule = schedule({.wait = 1, .warmup = 0, .active = 2}),
                 .on_trace_ready =
                     [&](Profiler& p) {
                       ++windows;
                       const Trace& t = p.trace();
                       const std::int64_t lo = t.start_ns(), hi = t.end_ns();
                       for (std::uint32_t e = 0; e < t.events.size(); ++e) {
                         if (t.events.phase[e] != Phase::kComplete) continue;
                         EXPECT_GE(t.events.dur_ns[e], 0);
                         EXPECT_GE(t.events.ts_ns[e], lo);
                         EXPECT_LE(t.events.ts_ns[e] + t.events.dur_ns[e], hi);
                       }
                       return Status();
                     },
                 .buffer_events_per_thread = 1 << 14});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  done = true;
  for (auto& th : workers) th.join();
  EXPECT_EQ(windows, 10);
}

// The first measured step must not pay the buffer's page faults (a huge
// page's fault took ~470 us inside the first step of a fresh process):
// start() attaches the calling thread and writes every page of its buffer.
TEST(Profiler, StartFaultsTheCallingThreadsBufferIn) {
  std::thread fresh([] {  // a thread with no buffer yet
    Profiler prof({.buffer_events_per_thread = 1u << 16, .payload_words_per_thread = 1u << 12});
    ASSERT_TRUE(prof.start());
    const internal::ThreadBuffer* b = internal::tl_buffer;
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->epoch.load(), internal::g_epoch.load());  // attached to this window already
    ASSERT_EQ(b->capacity, 1u << 16);
    const long page = sysconf(_SC_PAGESIZE);
    const auto first = reinterpret_cast<std::uintptr_t>(b->records) & ~static_cast<std::uintptr_t>(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(b->records + b->capacity);
    std::vector<unsigned char> resident((end - first + page - 1) / page);
    ASSERT_EQ(mincore(reinterpret_cast<void*>(first), end - first, resident.data()), 0);
    std::size_t out = 0;
    for (unsigned char r : resident) out += (r & 1) == 0;
    EXPECT_EQ(out, 0u) << "of " << resident.size() << " pages";
    ASSERT_TRUE(prof.stop());
  });
  fresh.join();
}

TEST(Profiler, TableWithAnUnknownSortKeyIsAnError) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  { TPROF_RECORD_FUNCTION("op"); }
  ASSERT_TRUE(prof.stop());
  const Result<std::string> table = prof.key_averages().table({.sort_by = "cpu_time_totl"});
  ASSERT_FALSE(table);
  EXPECT_EQ(table.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(table.error().message().find("cpu_time_total"), std::string::npos) << table.error().message();
  ASSERT_TRUE(prof.key_averages().table({.sort_by = "cpu_time_total"}));
}

TEST(Profiler, FullBuffersDropAndCountNeverGrow) {
  Profiler prof({.buffer_events_per_thread = 100});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 250; ++i) {
    TPROF_RECORD_FUNCTION("many");
  }
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(prof.trace().meta.dropped_events, 150u);
  EXPECT_EQ(prof.trace().diagnostics.count(DiagnosticCode::kDroppedEvents), 1u);
  const std::string table = *prof.key_averages().table();
  EXPECT_NE(table.find("Dropped events: 150"), std::string::npos) << table;
  // The count survives the file.
  const std::string path = ::testing::TempDir() + "/tprof_dropped.json";
  ASSERT_TRUE(prof.export_chrome_trace(path));
  Result<Trace> back = read_trace(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->meta.dropped_events, 150u);
  EXPECT_EQ(back->meta.producer, Producer::kTprof);
  std::remove(path.c_str());
}

TEST(Profiler, DroppedShapesCountOnlyKeptScopes) {
  // 100 records, and room for the shapes of 12 scopes (4 words each): of 250
  // scopes 150 are dropped whole (events, not shapes) and 88 of the 100 kept
  // lack their shapes. Counting dropped scopes too said 238.
  Profiler prof({.record_shapes = true, .buffer_events_per_thread = 100, .payload_words_per_thread = 48});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 250; ++i) {
    TPROF_RECORD_OP_SHAPES("shaped", {{2, 3}});
  }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(t.meta.dropped_events, 150u);
  EXPECT_EQ(t.meta.dropped_shapes, 88u);
  std::size_t with_shapes = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) == "shaped" && t.args_json(e).find("Input Dims") != std::string_view::npos) ++with_shapes;
  }
  EXPECT_EQ(with_shapes, 12u);
  const std::string path = ::testing::TempDir() + "/tprof_dropped_shapes.json";
  ASSERT_TRUE(prof.export_chrome_trace(path));
  Result<Trace> back = read_trace(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->meta.dropped_shapes, 88u);
  EXPECT_EQ(back->meta.dropped_events, 150u);
  std::remove(path.c_str());
}

// What a signal handler meets when it interrupts tprof on its own thread
// (the thread's mark set; capture_load_test sends real signals): its
// record is refused and counted. Inside a record, straight into the
// window's buffer; inside an attach (the buffer about to be reset), as
// pending, moved into the buffer when the attach ends. The thread's own
// records around it are kept, and the count reaches the file.
TEST(Profiler, ARecordMadeWhileItsThreadIsInsideTprofIsRefusedAndCounted) {
  using internal::tl_in_recorder;
  Profiler prof({.profile_memory = true});
  ASSERT_TRUE(prof.start());
  // A new window for this thread's buffer (start() attached it): its next
  // record attaches again.
  internal::g_epoch.fetch_add(1);
  tl_in_recorder.store(internal::kInTprof);  // as if attaching
  { TPROF_RECORD_FUNCTION("refused while attaching"); }
  tl_in_recorder.store(internal::kOutsideRecorder);
  { TPROF_RECORD_FUNCTION("kept after"); }  // attaches: the pending refusal moves into the buffer
  tl_in_recorder.store(internal::kInRecorder);  // as if inside a record
  {
    TPROF_RECORD_FUNCTION("refused while recording");
    TPROF_INSTANT("refused instant");
    TPROF_COUNTER("refused counter", 1);
    int x = 0;
    record_alloc(&x, 4);
  }
  tl_in_recorder.store(internal::kOutsideRecorder);
  { TPROF_RECORD_FUNCTION("kept last"); }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(count_named(t, "kept after"), 1u);
  EXPECT_EQ(count_named(t, "kept last"), 1u);
  for (const char* name : {"refused while attaching", "refused while recording", "refused instant",
                           "refused counter", "[memory]"}) {
    EXPECT_EQ(count_named(t, name), 0u) << name;
  }
  EXPECT_EQ(t.meta.dropped_events, 5u);
  bool said = false;
  for (const Diagnostic& d : t.diagnostics.items()) {
    said |= d.code == DiagnosticCode::kDroppedEvents && d.message.find("signal handler") != std::string::npos;
  }
  EXPECT_TRUE(said);
  const std::string path = ::testing::TempDir() + "/tprof_refused.json";
  ASSERT_TRUE(prof.export_chrome_trace(path));
  Result<Trace> back = read_trace(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->meta.dropped_events, 5u);
  std::remove(path.c_str());
}

// Records used to be written when a scope ended, so a buffer that filled
// inside a long scope kept its children and lost it (and the step around
// it). A scope's record is taken when it begins: whatever is open when the
// buffer fills is kept, what begins later is dropped, counted exactly.
TEST(Profiler, AFullBufferKeepsEveryScopeThatWasOpenWhenItFilled) {
  Profiler prof({.schedule = schedule({.active = 1, .repeat = 1}), .buffer_events_per_thread = 100});
  ASSERT_TRUE(prof.start());
  {
    TPROF_RECORD_FUNCTION("outer");
    for (int i = 0; i < 60; ++i) {
      TPROF_RECORD_FUNCTION("middle");
      { TPROF_RECORD_OP("inner"); }
    }
  }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  // 100 records: the step, outer, then 49 middle/inner pairs; the other 11
  // pairs are dropped.
  EXPECT_EQ(count_named(t, "ProfilerStep#0"), 1u);
  EXPECT_EQ(count_named(t, "outer"), 1u);
  EXPECT_EQ(count_named(t, "middle"), 49u);
  EXPECT_EQ(count_named(t, "inner"), 49u);
  EXPECT_EQ(t.meta.dropped_events, 22u);
  // Every kept scope lies inside every kept scope that began before it.
  const std::uint32_t step = static_cast<std::uint32_t>(
      std::find_if(t.events.name.begin(), t.events.name.end(), [&](StrId n) { return t.str(n) == "ProfilerStep#0"; }) -
      t.events.name.begin());
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] != Phase::kComplete || e == step) continue;
    EXPECT_GE(t.events.ts_ns[e], t.events.ts_ns[step]);
    EXPECT_LE(t.events.ts_ns[e] + t.events.dur_ns[e], t.events.ts_ns[step] + t.events.dur_ns[step]);
  }
}

// A thread marked dead may still run thread_local destructors that record
// (into a state made for them). Its state must outlive a stop() that frees
// exited threads' states until the thread is really gone (ASan in make test
// saw the use after free this guards against).
TEST(Profiler, AThreadStillExitingKeepsItsBufferAcrossStop) {
  std::atomic<int> phase{0};
  struct Lingerer {
    std::atomic<int>* phase = nullptr;
    ~Lingerer() {
      if (phase == nullptr) return;
      { TPROF_RECORD_FUNCTION("late 1"); }
      phase->store(1);
      while (phase->load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      { TPROF_RECORD_FUNCTION("late 2"); }
      phase->store(3);
    }
  };
  Profiler prof;
  ASSERT_TRUE(prof.start());
  std::thread worker([&phase] {
    thread_local Lingerer lingerer;
    lingerer.phase = &phase;
    TPROF_RECORD_FUNCTION("early");  // attaches: tprof's exit guard is destroyed before the lingerer
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(prof.stop());  // frees the states of exited threads
  EXPECT_EQ(count_named(prof.trace(), "early"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "late 1"), 1u);
  ASSERT_TRUE(prof.start());
  phase.store(2);
  while (phase.load() != 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  worker.join();
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "late 2"), 1u);
}

// CUDA asked for where it cannot be had (no driver, or a build without
// CUPTI): every window still records the CPU, once per window the trace
// says why the GPU is missing, and the written file says it too.
TEST(Profiler, CudaWithoutADeviceRecordsCpuOnlyAndSaysWhy) {
  if (access("/dev/nvidiactl", F_OK) == 0) GTEST_SKIP() << "an NVIDIA driver is present";
  Profiler prof({.activities = {Activity::kCpu, Activity::kCuda},
                 .schedule = schedule({.wait = 0, .warmup = 1, .active = 1, .repeat = 2})});
  ASSERT_TRUE(prof.start());
  std::vector<std::string> reasons;
  std::size_t windows = 0;
  for (int i = 0; i < 4; ++i) {
    { TPROF_RECORD_FUNCTION("work"); }
    ASSERT_TRUE(prof.step());
    if (i % 2 == 1) {  // a window just ended
      ++windows;
      ASSERT_TRUE(prof.flush());  // delivered off-thread: trace() is it once flushed
      const Trace& t = prof.trace();
      EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kActivityUnavailable), 1u);
      for (const Diagnostic& d : t.diagnostics.items()) {
        if (d.code == DiagnosticCode::kActivityUnavailable) reasons.push_back(d.message);
      }
      std::size_t work = 0;
      for (std::uint32_t e = 0; e < t.events.size(); ++e) work += t.name(e) == "work";
      EXPECT_EQ(work, 1u);
    }
  }
  ASSERT_TRUE(prof.stop());
  ASSERT_EQ(windows, 2u);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("CUDA"), std::string::npos) << reasons[0];
  const std::string path = ::testing::TempDir() + "/tprof_cuda_unavailable.json";
  ASSERT_TRUE(prof.export_chrome_trace(path));
  Result<Trace> back = read_trace(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->diagnostics.count(DiagnosticCode::kActivityUnavailable), 1u);
  std::remove(path.c_str());
}

TEST(Profiler, ExportedTraceReadsBackAsTheSameModel) {
  Profiler prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 2}), .record_shapes = true,
                 .profile_memory = true});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 3; ++i) {
    TPROF_RECORD_OP_SHAPES("op::add", {{i, 2}});
    record_alloc(&i, 8);
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  for (const char* name : {"/tprof_model.json", "/tprof_model.json.gz"}) {
    const std::string path = ::testing::TempDir() + name;
    ASSERT_TRUE(prof.export_chrome_trace(path));
    Result<Trace> back = read_trace(path);
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_EQ(testing::diff_traces(prof.trace(), *back), "");
    EXPECT_EQ(back->meta.gzip, std::string(name).ends_with(".gz"));
    std::remove(path.c_str());
  }
}

TEST(TensorboardHandler, NamesFilesLikeTorch) {
  const std::string dir = ::testing::TempDir() + "/tprof_tb/a/b";
  fs::remove_all(::testing::TempDir() + "/tprof_tb");
  for (bool gz : {false, true}) {
    Profiler prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1, .repeat = 2}),
                   .on_trace_ready = tensorboard_trace_handler(dir, gz ? "worker0" : "", gz)});
    ASSERT_TRUE(prof.start());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(prof.step());
    ASSERT_TRUE(prof.stop());
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::regex plain(std::string(host) + "_" + std::to_string(getpid()) + R"(\.\d{19}\.pt\.trace\.json)");
  const std::regex gzipped(R"(worker0\.\d{19}\.pt\.trace\.json\.gz)");
  int plain_files = 0, gz_files = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    const std::string name = f.path().filename().string();
    if (std::regex_match(name, plain)) ++plain_files;
    if (std::regex_match(name, gzipped)) {
      ++gz_files;
      auto bytes = internal::read_file(f.path().string());
      ASSERT_TRUE(bytes);
      EXPECT_EQ(static_cast<unsigned char>((*bytes)[0]), 0x1f);
      Result<Trace> t = read_trace(f.path().string());
      ASSERT_TRUE(t);
      EXPECT_TRUE(t->meta.gzip);
    }
  }
  // Two windows each, each its own file (epoch ns, a taken name never
  // replaced: tests/unit/output_safety_test.cc).
  EXPECT_EQ(plain_files, 2);
  EXPECT_EQ(gz_files, 2);
  EXPECT_EQ(plain_files + gz_files, static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator())));

  // A path that cannot be a directory: the error comes back from step()
  // (inline), or from the next call that waits for the delivery (flush()).
  const std::string file = ::testing::TempDir() + "/tprof_tb_file";
  ASSERT_TRUE(internal::write_file_atomic(file, "x"));
  for (bool inline_delivery : {true, false}) {
    Profiler bad({.schedule = schedule({.active = 1}),
                  .on_trace_ready = tensorboard_trace_handler(file + "/sub"),
                  .deliver_inline = inline_delivery});
    ASSERT_TRUE(bad.start());
    Status s = bad.step();
    // Off-thread: step() returns it only if the delivery was that fast.
    if (!inline_delivery && s.ok()) s = bad.flush();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("Can't create directory"), std::string::npos);
    EXPECT_FALSE(bad.stop());  // the next window is delivered at stop(), and fails the same way
  }
  std::remove(file.c_str());
}

// ---- faults in the user's code and at the edges (issue 13) ----------------

TEST(ProfilerFaults, AHandlerThatThrowsIsAnErrorNotATerminate) {
  auto thrower = [](Profiler&) -> Status { throw std::runtime_error("disk on fire"); };
  {
    Profiler prof({.on_trace_ready = thrower});
    ASSERT_TRUE(prof.start());
    { TPROF_RECORD_FUNCTION("work"); }
    Status s = prof.stop();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("on_trace_ready threw: disk on fire"), std::string::npos) << s.error().message();
    EXPECT_TRUE(prof.start());  // the profiler is in a usable state
  }  // ~Profiler stops it: the handler throws again, and nothing escapes
  SUCCEED();
}

TEST(ProfilerFaults, AHandlerThatCallsStopGetsAnErrorInsteadOfRecursing) {
  Status inner;
  Profiler prof({.on_trace_ready = [&](Profiler& p) {
    inner = p.stop();
    return Status{};
  }});
  ASSERT_TRUE(prof.start());
  { TPROF_RECORD_FUNCTION("work"); }
  EXPECT_TRUE(prof.stop());
  ASSERT_FALSE(inner);
  EXPECT_NE(inner.error().message().find("stop() called from on_trace_ready"), std::string::npos);
  EXPECT_EQ(count_named(prof.trace(), "work"), 1u);
}

TEST(ProfilerFaults, AScopeOpenAtStopIsInNoWindow) {
  // It was missing from its window (it had not ended) and then showed up in
  // the next one, starting before that window began.
  Profiler prof;
  ASSERT_TRUE(prof.start());
  auto open = std::make_unique<RecordFunction>(std::string("straddler"), kCpuOp);
  { TPROF_RECORD_FUNCTION("inside first"); }
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "straddler"), 0u);
  EXPECT_NE(prof.trace().meta.top_level_json("tprof").find("\"unfinishedScopes\": 1"), std::string_view::npos)
      << prof.trace().meta.top_level_json("tprof");
  // Said where every command shows it: the model, a diagnostic, and read back from the file.
  EXPECT_EQ(prof.trace().meta.unfinished_scopes, 1u);
  EXPECT_EQ(prof.trace().diagnostics.count(DiagnosticCode::kUnfinishedScopes), 1u);
  {
    const std::string path = ::testing::TempDir() + "/tprof_unfinished.json";
    ASSERT_TRUE(prof.export_chrome_trace(path));
    Result<Trace> back = read_trace(path);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->meta.unfinished_scopes, 1u);
    EXPECT_EQ(back->diagnostics.count(DiagnosticCode::kUnfinishedScopes), 1u);
    std::remove(path.c_str());
  }
  ASSERT_TRUE(prof.start());
  { TPROF_RECORD_FUNCTION("inside second"); }
  open.reset();  // ends inside the second window
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "straddler"), 0u);
  EXPECT_EQ(prof.trace().meta.dropped_events, 0u);  // not lost: unfinished, and said so
  EXPECT_EQ(count_named(prof.trace(), "inside second"), 1u);
}

TEST(ProfilerFaults, ARuntimeNameInAThreadLocalDestructorIsRecorded) {
  // A pool worker exiting while a window records: its thread_locals are
  // destroyed in reverse order, the name cache (made at its first runtime
  // name) before an object made earlier, whose destructor still records.
  struct Farewell {
    bool armed = false;
    ~Farewell() {
      if (armed) RecordFunction bye(std::string("farewell ") + "scope", kCpuOp);
    }
  };
  Profiler prof;
  ASSERT_TRUE(prof.start());
  std::thread worker([] {
    thread_local Farewell farewell;
    farewell.armed = true;
    { RecordFunction first(std::string("first ") + "name", kCpuOp); }  // creates the cache
  });
  worker.join();
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "first name"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "farewell scope"), 1u);
}

TEST(ProfilerFaults, BuffersNoMachineCanGiveAreRefusedAtStart) {
  Profiler prof({.buffer_events_per_thread = UINT32_MAX});
  Status s = prof.start();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("more than half the physical memory"), std::string::npos) << s.error().message();
  Profiler ok;  // the refused one did not keep the process-wide slot
  EXPECT_TRUE(ok.start());
  EXPECT_TRUE(ok.stop());
}

TEST(ProfilerFaults, RuntimeNamesAreKeptForOneWindowOnly) {
  // 2M unique names used to stay in the process (917 MB, 794 MB a window
  // later). The table is emptied once each window's trace is built; names
  // reused in the next window are interned again and named right.
  Profiler prof;
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 50000; ++i) RecordFunction r("unique name " + std::to_string(i), kCpuOp);
  { RecordFunction again(std::string("shared"), kCpuOp); }
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(internal::dynamic_names_held(), 0u);
  EXPECT_EQ(count_named(prof.trace(), "unique name 49999"), 1u);
  ASSERT_TRUE(prof.start());
  { RecordFunction again(std::string("shared"), kCpuOp); }
  { RecordFunction fresh(std::string("second window"), kUserAnnotation); }
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "shared"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "second window"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "unique name 0"), 0u);
  EXPECT_EQ(prof.trace().meta.dropped_events, 0u);
}

#if defined(__GLIBC__)
// The bytes malloc has handed out and not had back (small blocks and mmapped
// ones). Meaningless under ASan, whose allocator glibc does not see.
std::size_t malloc_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

TEST(ProfilerFaults, RuntimeNamesLeaveNothingOnTheThreadThatRecorded) {
  if (tprof::testing::kSanitized) GTEST_SKIP() << "mallinfo2 does not see the sanitizer's allocator";
  // The thread's name cache kept every key and its slots after the window
  // (2M names: 96 MB of keys until the thread named a scope again, and 200 MB
  // of slots for as long as it lived). It is emptied with the table, and
  // never grows past 2^16 slots.
  { RecordFunction warm(std::string("warm"), kCpuOp); }  // the thread's cache, made once
  const std::size_t before = malloc_in_use();
  {
    Profiler prof;
    ASSERT_TRUE(prof.start());
    for (int i = 0; i < 200000; ++i) RecordFunction r("a name used once " + std::to_string(i), kCpuOp);
    ASSERT_TRUE(prof.stop());
  }
  const std::size_t after = malloc_in_use();
  EXPECT_LT(after, before + (2u << 20)) << before << " bytes in use before the window, " << after << " after";
}
#endif

// ---- off-thread delivery (issue 26, item 1) -------------------------------

// A gate the test opens once: a handler can hold its delivery until the
// program's thread has gone on.
class Gate {
 public:
  void open() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(ProfilerDelivery, TheHandlerRunsOnATprofThreadOrInlineOnTheCaller) {
  for (bool inline_delivery : {false, true}) {
    std::thread::id handler_thread;
    int calls = 0;
    Profiler prof({.schedule = schedule({.active = 1, .repeat = 1}),
                   .on_trace_ready = [&](Profiler& p) -> Status {
                     handler_thread = std::this_thread::get_id();
                     ++calls;
                     EXPECT_EQ(count_named(p.trace(), "in window"), 1u);
                     EXPECT_EQ(p.step_num(), 1);  // the step the window ended at
                     return {};
                   },
                   .deliver_inline = inline_delivery});
    ASSERT_TRUE(prof.start());
    { TPROF_RECORD_FUNCTION("in window"); }
    ASSERT_TRUE(prof.step());
    if (inline_delivery) {
      EXPECT_EQ(calls, 1);  // delivered inside step(), as torch does
      EXPECT_EQ(count_named(prof.trace(), "in window"), 1u);
    }
    ASSERT_TRUE(prof.stop());
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(count_named(prof.trace(), "in window"), 1u);  // stop() waited for it
    if (inline_delivery) {
      EXPECT_EQ(handler_thread, std::this_thread::get_id());
      EXPECT_EQ(prof.delivery_stats().windows, 0u);
    } else {
      EXPECT_NE(handler_thread, std::this_thread::get_id());
      EXPECT_EQ(prof.delivery_stats().windows, 1u);
    }
  }
}

// The handler sees the window it delivers (trace(), export_chrome_trace(),
// key_averages(), step_num()) while the program's thread records the next
// one and reads its own trace() (TSan: no race between the two).
TEST(ProfilerDelivery, TheHandlerSeesItsWindowWhileTheProgramRecordsTheNext) {
  Gate recorded_next;
  const std::string path = ::testing::TempDir() + "/tprof_delivered.json";
  std::atomic<int> delivered{0};
  Profiler prof({.schedule = schedule({.active = 1, .repeat = 2}),
                 .on_trace_ready = [&](Profiler& p) -> Status {
                   if (delivered.load() == 0) {
                     recorded_next.wait();
                     EXPECT_EQ(count_named(p.trace(), "first"), 3u);
                     EXPECT_EQ(count_named(p.trace(), "second"), 0u);
                     EXPECT_EQ(p.step_num(), 1);
                     TPROF_TRY(p.export_chrome_trace(path));
                     const std::string table = *p.key_averages().table();
                     EXPECT_NE(table.find("first"), std::string::npos) << table;
                     EXPECT_EQ(table.find("second"), std::string::npos) << table;
                   }
                   delivered.fetch_add(1);
                   return {};
                 }});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 3; ++i) { TPROF_RECORD_FUNCTION("first"); }
  ASSERT_TRUE(prof.step());  // window 1 ends, window 2 records
  for (int i = 0; i < 2; ++i) { TPROF_RECORD_FUNCTION("second"); }
  // The program's own trace() is still the one before (none delivered yet).
  EXPECT_EQ(count_named(prof.trace(), "first"), 0u);
  recorded_next.open();
  ASSERT_TRUE(prof.flush());
  EXPECT_EQ(count_named(prof.trace(), "first"), 3u);  // taken in by flush()
  Result<Trace> written = read_trace(path);
  ASSERT_TRUE(written);
  EXPECT_EQ(count_named(*written, "first"), 3u);
  EXPECT_EQ(count_named(*written, "second"), 0u);
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(delivered.load(), 2);
  EXPECT_EQ(count_named(prof.trace(), "second"), 2u);
  EXPECT_EQ(count_named(prof.trace(), "first"), 0u);
  std::remove(path.c_str());
}

TEST(ProfilerDelivery, FlushWaitsAndReturnsTheHandlersError) {
  std::atomic<int> calls{0};
  // The handler finishes only once step() has returned: a sleep of a few ms
  // raced a step() descheduled on a loaded machine (its error then came back
  // from step(), as documented, not from flush()).
  std::atomic<bool> stepped{false};
  Profiler prof({.schedule = schedule({.active = 1}),
                 .on_trace_ready = [&](Profiler&) -> Status {
                   while (!stepped.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                   calls.fetch_add(1);
                   return Error(ErrorCode::kIo, "disk full");
                 }});
  ASSERT_TRUE(prof.start());
  { TPROF_RECORD_FUNCTION("w"); }
  const Status first = prof.step();  // does not wait for the handler
  stepped.store(true);
  ASSERT_TRUE(first);
  Status s = prof.flush();
  EXPECT_EQ(calls.load(), 1);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(), "disk full");
  EXPECT_TRUE(prof.flush());  // returned once
  // An exception from the handler is an error too, on the delivery thread.
  Profiler throws({.schedule = schedule({.active = 1}),
                   .on_trace_ready = [](Profiler&) -> Status { throw std::runtime_error("boom"); }});
  prof.stop().ok();
  ASSERT_TRUE(throws.start());
  s = throws.step();  // returns it when the delivery was that fast, else stop() does
  if (s.ok()) s = throws.stop();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("boom"), std::string::npos);
}

TEST(ProfilerDelivery, AnErrorIsReturnedByTheNextStep) {
  std::atomic<bool> ran{false};
  Gate ended;
  Profiler prof({.schedule = schedule({.active = 1, .repeat = 1}),
                 .on_trace_ready = [&](Profiler& p) -> Status {
                   ended.wait();
                   // Inside the handler, the control calls refuse.
                   EXPECT_FALSE(p.step());
                   EXPECT_FALSE(p.flush());
                   ran.store(true);
                   return Error(ErrorCode::kIo, "handler failed");
                 }});
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.step());  // the window ends; its handler has not run yet
  ended.open();
  Status s;
  for (int i = 0; i < 2000 && s.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = prof.step();  // no window: each returns what was delivered meanwhile
  }
  EXPECT_TRUE(ran.load());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(), "handler failed");
  EXPECT_TRUE(prof.stop());
}

// Windows shorter than the handler: the program's thread waits (counted)
// instead of dropping a window or growing memory, and every window is
// delivered whole, in order, with its own step.
TEST(ProfilerDelivery, ManyShortWindowsWithASlowHandlerAreAllDelivered) {
  struct Seen {
    std::int64_t step;
    std::size_t work;
    std::size_t step_annotation;  // ProfilerStep#(step - 1)
  };
  std::vector<Seen> seen;  // the delivery thread's only, until stop()
  const int kWindows = tprof::testing::kSanitized ? 12 : 40;
  Profiler prof({.schedule = schedule({.active = 1}),
                 .on_trace_ready = [&](Profiler& p) -> Status {
                   seen.push_back({p.step_num(), count_named(p.trace(), "work"),
                                   count_named(p.trace(), "ProfilerStep#" + std::to_string(p.step_num() - 1))});
                   std::this_thread::sleep_for(std::chrono::milliseconds(3));
                   return {};
                 },
                 .buffer_events_per_thread = 1u << 12,
                 .payload_words_per_thread = 1u << 10});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < kWindows; ++i) {
    { TPROF_RECORD_FUNCTION("work"); }
    { TPROF_RECORD_FUNCTION("work"); }
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kWindows) + 1);  // stop() ends the last (empty) one
  for (int i = 0; i < kWindows; ++i) {
    EXPECT_EQ(seen[i].step, i + 1);
    EXPECT_EQ(seen[i].work, 2u);
    EXPECT_EQ(seen[i].step_annotation, 1u);
  }
  EXPECT_EQ(seen.back().work, 0u);
  EXPECT_EQ(prof.delivery_stats().windows, static_cast<std::uint64_t>(kWindows) + 1);
  EXPECT_GT(prof.delivery_stats().waits, 0u);  // the handler is slower than the windows
  EXPECT_GT(prof.delivery_stats().wait_ns, 0);
}

// The same windows with on_backlog = kSkip (a serving loop): step() never
// waits; a window that would begin while two wait to be built is not
// recorded, counted, and the next recorded window says how many were
// skipped; every window recorded is delivered whole.
TEST(ProfilerDelivery, SkipNeverWaitsAndCountsTheWindowsItSkips) {
  struct Seen {
    std::int64_t step;
    std::size_t work;
    std::string skipped;  // the dropped_events diagnostic that reports skipped windows
  };
  std::vector<Seen> seen;
  // 40 steps of about 1 ms outlast the 15 ms handler three times over
  // (sanitized too: the steps are sleeps), so windows recorded after a
  // skip report it.
  const int kWindows = 40;
  ProfilerOptions o{.schedule = schedule({.active = 1}),
                    .on_trace_ready = [&](Profiler& p) -> Status {
                      Seen s{p.step_num(), count_named(p.trace(), "work"), {}};
                      for (const Diagnostic& d : p.trace().diagnostics.items()) {
                        if (d.code == DiagnosticCode::kDroppedEvents && d.message.find("kSkip") != std::string::npos) {
                          s.skipped = d.message;
                        }
                      }
                      seen.push_back(s);
                      std::this_thread::sleep_for(std::chrono::milliseconds(15));
                      return {};
                    },
                    .buffer_events_per_thread = 1u << 12,
                    .payload_words_per_thread = 1u << 10};
  o.on_backlog = ProfilerOptions::Backlog::kSkip;
  Profiler prof(o);
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < kWindows; ++i) {
    { TPROF_RECORD_FUNCTION("work"); }
    { TPROF_RECORD_FUNCTION("work"); }
    // Steps of about 1 ms against a 15 ms handler (margin for a loaded or
    // sanitized run): the backlog fills and drains, so windows are skipped
    // and later ones recorded.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(prof.step());
  }
  ASSERT_TRUE(prof.stop());
  const DeliveryStats st = prof.delivery_stats();
  EXPECT_EQ(st.waits, 0u);
  EXPECT_EQ(st.wait_ns, 0);
  EXPECT_GT(st.skipped, 0u);  // the handler is slower than the windows
  // Every window is recorded or skipped; every recorded one is delivered.
  EXPECT_EQ(st.windows + st.skipped, static_cast<std::uint64_t>(kWindows) + 1);
  EXPECT_EQ(seen.size(), st.windows);
  std::uint64_t reported = 0;
  std::int64_t last_step = 0;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const Seen& s = seen[i];
    EXPECT_GT(s.step, last_step);  // in order
    last_step = s.step;
    // Whole windows: both scopes of their step (stop() ends the last, empty one).
    if (i + 1 < seen.size()) EXPECT_EQ(s.work, 2u) << s.step;
    if (!s.skipped.empty()) reported += std::stoull(s.skipped);
  }
  // Skips after the last recorded window are reported by none.
  EXPECT_LE(reported, st.skipped);
  EXPECT_GT(reported, 0u);
}

TEST(ProfilerDelivery, TheDestructorDeliversPendingWindows) {
  std::atomic<int> delivered{0};
  {
    Profiler prof({.schedule = schedule({.active = 1, .repeat = 3}),
                   .on_trace_ready = [&](Profiler& p) -> Status {
                     std::this_thread::sleep_for(std::chrono::milliseconds(5));
                     if (count_named(p.trace(), "kept") == 1) delivered.fetch_add(1);
                     return {};
                   }});
    ASSERT_TRUE(prof.start());
    for (int i = 0; i < 3; ++i) {
      { TPROF_RECORD_FUNCTION("kept"); }
      ASSERT_TRUE(prof.step());
    }
    // No stop(): the program ends here.
  }
  EXPECT_EQ(delivered.load(), 3);
}

// A thread that records in the window now open and exits while the previous
// window is still being delivered keeps its records (its buffer is not freed
// with the delivered window's), thread_local destructors included; and each
// of a thread's two buffers counts its own drops exactly.
TEST(ProfilerDelivery, ThreadsExitingWhileTheLastWindowIsDeliveredKeepTheirRecords) {
  Gate release_first;
  struct Farewell {
    bool armed = false;
    ~Farewell() {
      if (armed) RecordFunction bye(std::string("farewell"), kCpuOp);
    }
  };
  std::vector<std::uint64_t> drops;  // the delivery thread's only
  Profiler prof({.schedule = schedule({.active = 1, .repeat = 3}),
                 .on_trace_ready = [&](Profiler& p) -> Status {
                   if (drops.empty()) release_first.wait();  // window 2 stays unbuilt meanwhile
                   drops.push_back(p.trace().meta.dropped_events);
                   return {};
                 },
                 .buffer_events_per_thread = 100,
                 .payload_words_per_thread = 64});
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 150; ++i) { TPROF_RECORD_FUNCTION("first"); }  // 51 dropped (the step's record is one)
  ASSERT_TRUE(prof.step());
  for (int i = 0; i < 10; ++i) { TPROF_RECORD_FUNCTION("between"); }
  ASSERT_TRUE(prof.step());  // window 3 records while window 2 waits to be built
  std::thread worker([] {
    thread_local Farewell farewell;
    farewell.armed = true;
    TPROF_RECORD_FUNCTION("exiting thread");
  });
  worker.join();  // exited (thread_local destructors run) during window 3
  for (int i = 0; i < 120; ++i) { TPROF_RECORD_FUNCTION("second"); }
  release_first.open();  // window 2's trace is built now, its buffers released
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "exiting thread"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "farewell"), 1u);
  EXPECT_EQ(count_named(prof.trace(), "second"), 99u);  // 100 records: the step's and 99
  ASSERT_EQ(drops.size(), 3u);
  EXPECT_EQ(drops[0], 51u);
  EXPECT_EQ(drops[1], 0u);
  EXPECT_EQ(drops[2], 21u);
  EXPECT_LE(prof.delivery_stats().waits, 1u);  // 1: window 3 began before window 1 was built
}

// The delivery thread faults the program thread's buffers in from start()
// on: entering the warmup and the window faults nothing on the program's
// thread (getrusage's per-thread minor faults).
TEST(ProfilerDelivery, EnteringAWindowFaultsNoBufferPageOnTheProgramsThread) {
  if (tprof::testing::kSanitized) GTEST_SKIP() << "sanitizer runtimes fault their shadow memory in";
  Profiler prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 1, .repeat = 2}),
                 .buffer_events_per_thread = 1u << 18});
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.flush());  // the delivery thread is idle: both buffers faulted in
  rusage before{}, after{};
  ASSERT_EQ(getrusage(RUSAGE_THREAD, &before), 0);
  ASSERT_TRUE(prof.step());  // warmup
  ASSERT_TRUE(prof.step());  // the window begins
  for (int i = 0; i < 1000; ++i) { TPROF_RECORD_FUNCTION("warm"); }
  ASSERT_TRUE(prof.step());  // it ends (wait)
  // A step's work later: the buffer this thread's earlier tests left at
  // another size has been faulted in again after the build.
  ASSERT_TRUE(prof.flush());
  ASSERT_TRUE(prof.step());  // warmup
  ASSERT_TRUE(prof.step());  // the second window, in either buffer
  for (int i = 0; i < 1000; ++i) { TPROF_RECORD_FUNCTION("warm"); }
  ASSERT_EQ(getrusage(RUSAGE_THREAD, &after), 0);
  // 8 MiB buffers: 2048 pages each (or 4 huge pages) would be faulted here.
  EXPECT_LT(after.ru_minflt - before.ru_minflt, 32) << "minor faults on the program's thread";
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "warm"), 1000u);
}

}  // namespace
}  // namespace tprof
