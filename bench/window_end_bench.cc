// What a window's end and a window's entry cost the program's thread
// (bench/README.md, "Window end and entry"), with torch's inline delivery
// (ProfilerOptions::deliver_inline) and with off-thread delivery, measured
// side by side in one run (interleaved: the machine is shared and noisy,
// read the ratios).
//
//   window_end_bench [--runs 5] [--events 10000,100000,500000] [--step-ms 20]
//
// Window end: in one process, per run and size, a profiler with a
// warmup-then-one-window schedule whose handler writes the trace
// (tensorboard_trace_handler, as a program would); the window records N
// static scopes, and the step() that ends it is timed with std::chrono.
// Off-thread, stop() (untimed) then waits for the delivery.
//
// Window entry: each run forks a fresh child (no buffer, no pages yet):
// start() with a wait-warmup-window schedule, then the first warmup step()
// and the step() that enters the window are timed, with --step-ms of
// program work (a sleep) before each, as a training step would have.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/fork_run.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The step() that ends a window of `events` scopes, in µs.
double window_end_us(bool inline_delivery, int events, const std::string& dir) {
  tprof::Profiler prof({.schedule = tprof::schedule({.wait = 0, .warmup = 1, .active = 1, .repeat = 1}),
                        .on_trace_ready = tprof::tensorboard_trace_handler(dir, "bench"),
                        .deliver_inline = inline_delivery});
  if (!prof.start().ok()) std::exit(2);
  if (!prof.flush().ok()) std::exit(2);  // off-thread: the buffers faulted in, as in a program's first steps
  if (!prof.step().ok()) std::exit(2);   // the window begins
  for (int i = 0; i < events - 1; ++i) {  // and the step annotation: `events` records
    TPROF_RECORD_FUNCTION("bench::window_end");
    asm volatile("" ::: "memory");
  }
  const auto t0 = Clock::now();
  if (!prof.step().ok()) std::exit(2);
  const double us = us_since(t0);
  if (!prof.stop().ok()) std::exit(2);
  return us;
}

struct Entry {
  double warmup_us = 0;  // the first warmup step()
  double window_us = 0;  // the step() entering the window
  double start_us = 0;   // start()
};

// Runs in a fresh child.
std::optional<Entry> entry_child(bool inline_delivery, int step_ms) {
  Entry e;
  tprof::Profiler prof({.schedule = tprof::schedule({.wait = 1, .warmup = 1, .active = 1, .repeat = 1}),
                        .deliver_inline = inline_delivery});
  auto t0 = Clock::now();
  if (!prof.start().ok()) return std::nullopt;
  e.start_us = us_since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  t0 = Clock::now();
  if (!prof.step().ok()) return std::nullopt;
  e.warmup_us = us_since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  t0 = Clock::now();
  if (!prof.step().ok()) return std::nullopt;
  e.window_us = us_since(t0);
  for (int i = 0; i < 1000; ++i) { TPROF_RECORD_FUNCTION("bench::entry"); }
  if (!prof.stop().ok()) return std::nullopt;
  return e;
}

Entry fork_entry(bool inline_delivery, int step_ms) {
  const std::optional<Entry> e = bench::in_fresh_process<Entry>([&] { return entry_child(inline_delivery, step_ms); });
  if (!e) {
    std::fprintf(stderr, "window_end_bench: a child failed\n");
    std::exit(2);
  }
  return *e;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, step_ms = 20;
  std::vector<int> sizes = {10000, 100000, 500000};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--step-ms") == 0) step_ms = std::max(0, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--events") == 0) {
      sizes.clear();
      for (const char* p = argv[i + 1]; *p != '\0';) {
        sizes.push_back(std::max(2, std::atoi(p)));
        p = std::strchr(p, ',');
        if (p == nullptr) break;
        ++p;
      }
    }
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tprof_window_end_" + std::to_string(getpid()))).string();

  // Entries first, in fresh children (before this process has any buffer).
  std::vector<double> warm[2], enter[2], start[2];
  for (int r = 0; r < runs; ++r) {
    for (int m = 0; m < 2; ++m) {
      const Entry e = fork_entry(m == 0, step_ms);
      warm[m].push_back(e.warmup_us);
      enter[m].push_back(e.window_us);
      start[m].push_back(e.start_us);
    }
  }
  std::vector<std::vector<double>> ends[2];
  ends[0].resize(sizes.size());
  ends[1].resize(sizes.size());
  for (int r = 0; r < runs; ++r) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      for (int m = 0; m < 2; ++m) ends[m][s].push_back(window_end_us(m == 0, sizes[s], dir));
    }
  }
  std::filesystem::remove_all(dir);

  std::printf("the program thread's cost, median of %d runs (inline = deliver_inline, torch's; off = default)\n",
              runs);
  std::printf("%-34s %12s %12s %10s\n", "", "inline us", "off us", "inline/off");
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const double a = bench::median(ends[0][s]), b = bench::median(ends[1][s]);
    std::printf("step() ending a window of %7d  %12.1f %12.1f %9.0fx\n", sizes[s], a, b, a / b);
  }
  const double sa = bench::median(start[0]), sb = bench::median(start[1]);
  const double wa = bench::median(warm[0]), wb = bench::median(warm[1]);
  const double ea = bench::median(enter[0]), eb = bench::median(enter[1]);
  std::printf("start() (fresh process)            %12.1f %12.1f %9.1fx\n", sa, sb, sa / sb);
  std::printf("first warmup step() (%2d ms later)   %12.1f %12.1f %9.0fx\n", step_ms, wa, wb, wa / wb);
  std::printf("step() entering the window         %12.1f %12.1f %9.1fx\n", ea, eb, ea / eb);
  return 0;
}
