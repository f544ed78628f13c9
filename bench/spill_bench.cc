// Streaming windows (ProfilerOptions::spill_dir): one long window of
// THREADS x SCOPES scopes, recorded in memory (buffers big enough to hold
// it all) and spilled (64k-event buffers), each in a fresh forked process.
// Prints per mode: ns per scope on the recording threads, RSS at the end
// of recording (before stop()), peak RSS including the build, and the
// spill counters; then the ratios. bench/README.md, "Streaming windows".
//
//   spill_bench [THREADS=4] [SCOPES_PER_THREAD=2000000] [DIR=/var/tmp]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/fork_run.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

namespace {

long long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::string(key).size());
  }
  return -1;
}

struct Result {
  double ns_per_scope = 0;
  long long rss_recording_kib = 0, peak_kib = 0;
  unsigned long long events = 0, dropped = 0, chunks = 0, waits = 0;
};

Result run(int threads, long scopes, const std::string& spill_dir) {
  const bool spill = !spill_dir.empty();
  tprof::Profiler prof({.buffer_events_per_thread = spill ? (1u << 16) : static_cast<std::uint32_t>(scopes + 16),
                        .payload_words_per_thread = 0,
                        .spill_dir = spill_dir});
  if (!prof.start().ok()) std::abort();
  std::vector<double> ns(static_cast<std::size_t>(threads));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < scopes; ++i) {
        TPROF_RECORD_FUNCTION("scope");
      }
      ns[static_cast<std::size_t>(t)] =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
          static_cast<double>(scopes);
    });
  }
  for (auto& t : ts) t.join();
  Result r;
  r.rss_recording_kib = status_kib("VmRSS:");
  if (!prof.stop().ok()) std::abort();
  r.peak_kib = status_kib("VmHWM:");
  for (double x : ns) r.ns_per_scope += x / threads;
  r.events = prof.trace().events.size();
  r.dropped = prof.trace().meta.dropped_events;
  r.chunks = prof.spill_stats().chunks;
  r.waits = prof.spill_stats().waits;
  return r;
}

// In a fresh process: its peak RSS is this mode's alone.
Result forked(int threads, long scopes, const std::string& dir) {
  const std::optional<Result> r =
      bench::in_fresh_process<Result>([&] { return std::optional<Result>(run(threads, scopes, dir)); });
  if (!r) std::abort();
  return *r;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const long scopes = argc > 2 ? std::atol(argv[2]) : 2000000;
  const std::string dir = argc > 3 ? argv[3] : "/var/tmp";
  std::printf("%d threads x %ld scopes = %ld events in one window\n", threads, scopes, threads * scopes);
  const Result mem = forked(threads, scopes, "");
  const Result sp = forked(threads, scopes, dir);
  for (const auto& [name, r] : {std::pair<const char*, const Result&>{"in memory", mem}, {"spilled", sp}}) {
    std::printf("%-10s %6.2f ns/scope  RSS recording %7lld MiB  peak %7lld MiB  events %llu dropped %llu chunks %llu waits %llu\n",
                name, r.ns_per_scope, r.rss_recording_kib >> 10, r.peak_kib >> 10, r.events, r.dropped, r.chunks,
                r.waits);
  }
  std::printf("ratios spilled/in-memory: cost per scope %.2fx, RSS while recording %.2fx, peak RSS %.2fx\n",
              sp.ns_per_scope / mem.ns_per_scope, static_cast<double>(sp.rss_recording_kib) / static_cast<double>(mem.rss_recording_kib),
              static_cast<double>(sp.peak_kib) / static_cast<double>(mem.peak_kib));
  return 0;
}
