// capture_bench: what a scope costs, and what stop() + export cost per event,
// side by side in one run (bench/README.md, "Capture").
//
//   build/bench/capture_bench [--benchmark_filter=...] [--benchmark_repetitions=N]
//
// Every scope benchmark runs the same loop body, kBatch times per benchmark
// iteration: `{ <what is measured>; benchmark::ClobberMemory(); }` (the
// clobber stands for the opaque work a real scope wraps). Each reports
//   ns_per_op  its own wall time per body, measured around its loop;
//   x_floor    ns_per_op / the floor's ns_per_op from the same process
//              (BM_Floor_TwoTicks runs first; filtered out, no ratio).
//
// Recording benchmarks measure the recording path, never the drop path:
//   - every thread restarts the window after each kWindowOps of its own
//     bodies by bumping the recorder's window epoch (what
//     Profiler::start_window does, without building a Trace); every thread
//     resets its buffer at its next record, so none holds more than
//     kWindowOps bodies — a quarter of its capacity, half with an
//     argument's record — however the threads are scheduled;
//   - before timing, every thread records half of each of its two buffers
//     (the windows alternate between them), so the pages the windows reuse
//     are already faulted in (a fresh buffer's first window pays a page
//     fault per 128 records);
//   - after timing, the profiler is stopped and the run is failed
//     (SkipWithError) if anything was dropped or nothing was recorded.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/capture_bench.h"
#include "src/base/file.h"
#include "tprof/internal/recorder.h"
#include "tprof/internal/ticks.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"
#include "tprof/write.h"

namespace tprof_bench {
namespace {

constexpr int kBatch = 64;                           // loop bodies per benchmark iteration
constexpr std::uint32_t kCapacity = 1u << 20;        // records per thread buffer (the default)
constexpr std::int64_t kWindowOps = kCapacity / 4;   // bodies per window and thread
constexpr std::int64_t kWindowIters = kWindowOps / kBatch;

double g_floor_ns = 0;  // BM_Floor_TwoTicks's ns per body, for x_floor

// A reusable barrier for the benchmark's threads (all call wait(n)).
class SpinBarrier {
 public:
  void wait(int n) {
    const int gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      arrived_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
  }

 private:
  std::atomic<int> arrived_{0};
  std::atomic<int> gen_{0};
};

SpinBarrier g_barrier;
std::unique_ptr<tprof::Profiler> g_profiler;  // owned by thread 0 of a recording benchmark

// Starts a new window without stopping the profiler: the epoch bump that
// Profiler::start_window does. Thread buffers reset at their next record.
void restart_window() { tprof::internal::g_epoch.fetch_add(1, std::memory_order_relaxed); }

class Clock {
 public:
  Clock() : t0_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_;
};

void report(benchmark::State& state, double seconds, bool is_floor = false) {
  const double ops = static_cast<double>(state.iterations()) * kBatch;
  const double ns = seconds * 1e9 / ops;
  if (is_floor && state.threads() == 1) g_floor_ns = ns;
  state.counters["ns_per_op"] = benchmark::Counter(ns, benchmark::Counter::kAvgThreads);
  if (g_floor_ns > 0) state.counters["x_floor"] = benchmark::Counter(ns / g_floor_ns, benchmark::Counter::kAvgThreads);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// ---- the floor: two tick reads ----------------------------------------------

void BM_Floor_TwoTicks(benchmark::State& state) {
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      std::uint64_t a = tprof::internal::read_ticks();
      std::uint64_t b = tprof::internal::read_ticks();
      benchmark::DoNotOptimize(a);
      benchmark::DoNotOptimize(b);
      benchmark::ClobberMemory();
    }
  }
  report(state, clock.seconds(), true);
}
BENCHMARK(BM_Floor_TwoTicks)->Threads(1)->Threads(2);

// ---- no profiler, and compiled out ------------------------------------------

void BM_Scope_Idle(benchmark::State& state) {
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TPROF_RECORD_FUNCTION("bench::scope");
      benchmark::ClobberMemory();
    }
  }
  report(state, clock.seconds());
}
BENCHMARK(BM_Scope_Idle)->Threads(1)->Threads(2);

void BM_Scope_CompiledOut(benchmark::State& state) {
  const Clock clock;
  for (auto _ : state) run_compiled_out_scopes(kBatch);
  report(state, clock.seconds());
}
BENCHMARK(BM_Scope_CompiledOut);

// ---- recording ---------------------------------------------------------------

// Thread 0 starts a profiler; every thread faults in the part of its buffer
// the windows use; then a fresh window opens for the timed loop.
void begin_recording(benchmark::State& state, tprof::ProfilerOptions options) {
  const int n = state.threads();
  if (state.thread_index() == 0) {
    options.buffer_events_per_thread = kCapacity;
    g_profiler = std::make_unique<tprof::Profiler>(std::move(options));
    if (!g_profiler->start()) state.SkipWithError("Profiler::start failed");
  }
  // Each thread writes its two buffers in turn (one per window): half of
  // each, the most a window of two records per body uses.
  for (int buffer = 0; buffer < 2; ++buffer) {
    g_barrier.wait(n);
    for (std::int64_t i = 0; i < 2 * kWindowOps; ++i) {
      TPROF_RECORD_FUNCTION("bench::prefault");
      benchmark::ClobberMemory();
    }
    g_barrier.wait(n);
    if (state.thread_index() == 0) restart_window();
  }
  g_barrier.wait(n);
}

// After the timed loop (Google Benchmark's barrier: every thread is done):
// thread 0 stops the profiler and fails the run if the last window dropped
// anything or holds nothing.
void end_recording(benchmark::State& state) {
  if (state.thread_index() != 0) return;
  const bool stopped = static_cast<bool>(g_profiler->stop());
  const tprof::Trace& t = g_profiler->trace();
  const bool dropped = t.meta.dropped_events != 0 || t.diagnostics.count(tprof::DiagnosticCode::kDroppedEvents) != 0;
  const bool empty = t.events.size() < 8;
  g_profiler.reset();
  if (!stopped) state.SkipWithError("Profiler::stop failed");
  if (dropped) state.SkipWithError("a buffer filled: this measured the drop path");
  if (empty) state.SkipWithError("nothing was recorded");
}

// Restarts the window after every kWindowIters iterations of this thread.
inline void maybe_restart(std::int64_t* iter) {
  if (++*iter == kWindowIters) {
    *iter = 0;
    restart_window();
  }
}

void BM_Scope_Recorded(benchmark::State& state) {
  begin_recording(state, {});
  std::int64_t iter = 0;
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TPROF_RECORD_FUNCTION("bench::scope");
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_Scope_Recorded)->Threads(1)->Threads(2);

void BM_Scope_RecordedDynamicName(benchmark::State& state) {
  begin_recording(state, {});
  const std::string name = "bench::dynamic " + std::to_string(state.thread_index());
  std::int64_t iter = 0;
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      const tprof::RecordFunction scope(std::string_view{name});
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_Scope_RecordedDynamicName)->Threads(1)->Threads(2);

void BM_Scope_RecordedStaticArg(benchmark::State& state) {
  begin_recording(state, {});
  std::int64_t iter = 0;
  std::int64_t tokens = 0;
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TPROF_RECORD_FUNCTION_VAR(scope, "bench::scope");
      TPROF_ARG(scope, "tokens", ++tokens);
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_Scope_RecordedStaticArg)->Threads(1)->Threads(2);

void BM_Scope_RecordedRuntimeArg(benchmark::State& state) {
  begin_recording(state, {});
  std::int64_t iter = 0;
  std::int64_t tokens = 0;
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TPROF_RECORD_FUNCTION_VAR(scope, "bench::scope");
      scope.arg("tokens", ++tokens);
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_Scope_RecordedRuntimeArg)->Threads(1)->Threads(2);

void BM_Scope_RecordedShapes(benchmark::State& state) {
  // 7 payload words per scope: [count][rank][16][32][rank][32][8].
  tprof::ProfilerOptions options;
  options.record_shapes = true;
  options.payload_words_per_thread = 8 * kCapacity;
  begin_recording(state, std::move(options));
  std::int64_t iter = 0;
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TPROF_RECORD_OP_SHAPES("bench::mm", {{16, 32}, {32, 8}});
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_Scope_RecordedShapes)->Threads(1)->Threads(2);

void BM_RecordAlloc(benchmark::State& state) {
  tprof::ProfilerOptions options;
  options.profile_memory = true;
  begin_recording(state, std::move(options));
  std::int64_t iter = 0;
  char block[64];
  const Clock clock;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      tprof::record_alloc(block, 64);
      benchmark::ClobberMemory();
    }
    maybe_restart(&iter);
  }
  report(state, clock.seconds());
  end_recording(state);
}
BENCHMARK(BM_RecordAlloc)->Threads(1)->Threads(2);

// ---- stop() and export -------------------------------------------------------

// Records `events` scopes on `threads` threads (untimed), like a training
// step: an annotation around an operator, one operator in 8 with shapes.
void record_window(std::int64_t events, int threads) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([n = events / threads / 2] {
      for (std::int64_t i = 0; i < n; ++i) {
        TPROF_RECORD_FUNCTION("bench::layer");
        if (i % 8 == 0) {
          TPROF_RECORD_OP_SHAPES("aten::addmm", {{64, 128}, {128, 256}, {256}});
        } else {
          TPROF_RECORD_OP("aten::mm");
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One window of state.range(0) events from two threads; timed (manual time):
// stop() (collection + Trace building) and export_chrome_trace to a file.
// Also measured, outside the manual time: write_trace_json to memory, and
// writing those bytes to a file in the writer's 4 MiB pieces (the kernel's
// share of the export). Counters are medians over the iterations, after one
// untimed warm-up window: steady state, as when a schedule repeats windows.
// first_window_total_ns_per_event is that warm-up window's stop + export:
// the first window of the process also pays page faults for fresh memory.
void BM_StopAndExport(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::string path = (std::filesystem::temp_directory_path() / "tprof_capture_bench.json").string();
  std::vector<double> stop_ns, export_ns, json_ns, write_ns, export_mbps, json_mbps;
  double events = 0, bytes = 0;
  std::string json;
  bool warm = false;
  double cold = 0;  // the warm-up window: the process's first (fresh memory)
  auto window = [&](bool timed) {
    tprof::ProfilerOptions options;
    options.record_shapes = true;
    options.buffer_events_per_thread = kCapacity;
    tprof::Profiler prof(std::move(options));
    if (!prof.start()) return false;
    record_window(n, 2);
    std::remove(path.c_str());  // not timed: the previous file's unlink
    const Clock stop_clock;
    const tprof::Status stopped = prof.stop();
    const double s1 = stop_clock.seconds();
    const Clock export_clock;
    const tprof::Status exported = prof.export_chrome_trace(path);
    const double s2 = export_clock.seconds();
    if (!stopped || !exported || prof.trace().meta.dropped_events != 0) return false;
    json.clear();
    const Clock json_clock;
    tprof::write_trace_json(prof.trace(), &json);
    const double s3 = json_clock.seconds();
    std::remove(path.c_str());
    const Clock write_clock;
    auto file = tprof::internal::AtomicFileWriter::create(path);
    if (!file) return false;
    for (std::size_t i = 0; i < json.size(); i += 256u << 10) {
      if (!(*file)->write(std::string_view(json).substr(i, 256u << 10))) return false;
    }
    if (!(*file)->commit()) return false;
    const double s4 = write_clock.seconds();
    if (!timed) {
      cold = (s1 + s2) * 1e9 / static_cast<double>(prof.trace().events.size());
      return true;
    }
    state.SetIterationTime(s1 + s2);
    const double ev = static_cast<double>(prof.trace().events.size());
    events = ev;
    bytes = static_cast<double>(json.size());
    stop_ns.push_back(s1 * 1e9 / ev);
    export_ns.push_back(s2 * 1e9 / ev);
    json_ns.push_back(s3 * 1e9 / ev);
    write_ns.push_back(s4 * 1e9 / ev);
    export_mbps.push_back(bytes / s2 / 1e6);
    json_mbps.push_back(bytes / s3 / 1e6);
    return true;
  };
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      warm = window(false);
      state.ResumeTiming();
    }
    if (!warm || !window(true)) {
      state.SkipWithError("start, stop, export or a file write failed, or the window dropped events");
      break;
    }
  }
  std::remove(path.c_str());
  if (events == 0) return;
  state.counters["events"] = events;
  state.counters["bytes_per_event"] = bytes / events;
  state.counters["stop_ns_per_event"] = median(stop_ns);
  state.counters["export_ns_per_event"] = median(export_ns);
  std::vector<double> total;
  for (std::size_t i = 0; i < stop_ns.size(); ++i) total.push_back(stop_ns[i] + export_ns[i]);
  state.counters["total_ns_per_event"] = median(total);
  state.counters["first_window_total_ns_per_event"] = cold;
  state.counters["export_MBps"] = median(export_mbps);
  state.counters["json_mem_ns_per_event"] = median(json_ns);
  state.counters["json_mem_MBps"] = median(json_mbps);
  state.counters["file_write_ns_per_event"] = median(write_ns);
}

// JSON generation alone, warm: one window's trace written to memory again
// and again into a buffer that keeps its capacity (no page faults, no I/O).
void BM_WriteTraceJson(benchmark::State& state) {
  tprof::ProfilerOptions options;
  options.record_shapes = true;
  options.buffer_events_per_thread = kCapacity;
  tprof::Profiler prof(std::move(options));
  if (!prof.start()) {
    state.SkipWithError("Profiler::start failed");
    return;
  }
  record_window(state.range(0), 2);
  if (!prof.stop()) {
    state.SkipWithError("Profiler::stop failed");
    return;
  }
  std::string json;
  tprof::write_trace_json(prof.trace(), &json);
  const Clock clock;
  for (auto _ : state) {
    json.clear();
    tprof::write_trace_json(prof.trace(), &json);
    benchmark::DoNotOptimize(json.data());
  }
  const double seconds = clock.seconds();
  const double events = static_cast<double>(prof.trace().events.size()) * static_cast<double>(state.iterations());
  state.counters["ns_per_event"] = seconds * 1e9 / events;
  state.counters["MBps"] = static_cast<double>(json.size()) * static_cast<double>(state.iterations()) / seconds / 1e6;
}
BENCHMARK(BM_WriteTraceJson)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_StopAndExport)->Arg(1 << 20)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);

}  // namespace
}  // namespace tprof_bench

BENCHMARK_MAIN();
