// The first window of a fresh process (bench/README.md, "First window"):
// what a program pays for its first recorded scopes, and for stop() +
// export of that window, where the steady-state capture_bench measures warm
// buffers. Each run forks a child that has never recorded, so it starts
// cold: no thread buffer, no pages, no interned names.
//
//   first_window_bench [--runs 9] [--scopes 20000]
//
// Per run, in the child: start(); a plain loop of TPROF_RECORD_FUNCTION
// (static name) timed with std::chrono around the loop; the same loop of two
// TSC reads (the floor); stop() + export_chrome_trace() to a temporary file.
// Printed: the median over runs of scope ns, floor ns, their ratio, and
// stop+export ns per event (and stop()'s share).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/fork_run.h"
#include "tprof/internal/ticks.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

namespace {

struct Sample {
  double scope_ns = 0;
  double floor_ns = 0;
  double stop_export_ns_per_event = 0;
  double stop_ns_per_event = 0;
};

double ns_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// Runs in the fresh child.
std::optional<Sample> child(int scopes) {
  Sample s;
  tprof::Profiler prof;
  if (!prof.start().ok()) return std::nullopt;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < scopes; ++i) {
    TPROF_RECORD_FUNCTION("bench::first_window");
    asm volatile("" ::: "memory");
  }
  s.scope_ns = ns_since(t0) / scopes;
  std::uint64_t sink = 0;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < scopes; ++i) {
    const std::uint64_t a = tprof::internal::read_ticks();
    asm volatile("" ::: "memory");
    const std::uint64_t b = tprof::internal::read_ticks();
    sink += b - a;
  }
  s.floor_ns = ns_since(t0) / scopes;
  const std::string path = "/tmp/tprof_first_window_" + std::to_string(getpid()) + ".json";
  t0 = std::chrono::steady_clock::now();
  if (!prof.stop().ok()) return std::nullopt;
  s.stop_ns_per_event = ns_since(t0) / scopes;
  if (!prof.export_chrome_trace(path).ok()) return std::nullopt;
  s.stop_export_ns_per_event = ns_since(t0) / scopes;
  std::remove(path.c_str());
  if (sink == 42) std::puts("");  // keeps the floor's reads alive
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9, scopes = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--scopes") == 0) scopes = std::max(1, std::atoi(argv[i + 1]));
  }
  std::vector<double> scope, floor, ratio, stop_export, stop;
  for (int r = 0; r < runs; ++r) {
    const std::optional<Sample> got = bench::in_fresh_process<Sample>([&] { return child(scopes); });
    if (!got) {
      std::fprintf(stderr, "first_window_bench: run %d failed\n", r);
      return 2;
    }
    const Sample& s = *got;
    scope.push_back(s.scope_ns);
    floor.push_back(s.floor_ns);
    ratio.push_back(s.scope_ns / s.floor_ns);
    stop_export.push_back(s.stop_export_ns_per_event);
    stop.push_back(s.stop_ns_per_event);
  }
  std::printf("first window of a fresh process, %d scopes, median of %d runs:\n", scopes, runs);
  std::printf("  recorded scope      %7.1f ns\n", bench::median(scope));
  std::printf("  two TSC reads       %7.1f ns\n", bench::median(floor));
  std::printf("  scope / floor       %7.2fx   (target <= 1.5x)\n", bench::median(ratio));
  std::printf("  stop() + export     %7.1f ns/event   (target <= 200)\n", bench::median(stop_export));
  std::printf("    of which stop()   %7.1f ns/event\n", bench::median(stop));
  return 0;
}
