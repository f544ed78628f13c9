#include "src/base/clock.h"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tprof::internal {

namespace {

bool detect_invariant_tsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
  __cpuid(0x80000007, a, b, c, d);
  return (d & (1u << 8)) != 0;  // CPUID.80000007H:EDX[8]: invariant TSC
#else
  return false;
#endif
}

// One tick reading paired with one monotonic reading: monotonic read
// between two tick reads, the tick taken as their midpoint, which bounds the
// error by half the bracket. A thread preempted inside the bracket (a loaded
// machine) widens it by the preemption, milliseconds, so the narrowest of a
// few brackets is kept (a launch call linked to its scope by time once fell
// outside it under load: StandinProfiler's window test, one External id in
// 150 runs).
struct Pair {
  std::uint64_t tick;
  std::int64_t mono;
};
constexpr int kBrackets = 5;

}  // namespace

const bool g_use_tsc = detect_invariant_tsc();

namespace {

Pair read_pair() {
  Pair best{0, 0};
  std::uint64_t narrowest = UINT64_MAX;
  for (int i = 0; i < kBrackets; ++i) {
    const std::uint64_t t0 = read_ticks();
    const std::int64_t mono = static_cast<std::int64_t>(monotonic_ns());
    const std::uint64_t t1 = read_ticks();
    if (t1 - t0 < narrowest) {
      narrowest = t1 - t0;
      best = {t0 + (t1 - t0) / 2, mono};
    }
  }
  return best;
}

}  // namespace

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::int64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

TickClock& TickClock::instance() {
  static TickClock clock;
  return clock;
}

void TickClock::sample() {
  const Pair p = read_pair();
  const std::uint64_t tick = p.tick;
  const std::int64_t mono = p.mono;
  std::lock_guard<std::mutex> lock(mu_);
  if (!anchored_) {
    anchored_ = true;
    tick0_ = tick1_ = tick;
    mono0_ = mono1_ = mono;
    epoch_offset_ = realtime_ns() - static_cast<std::int64_t>(monotonic_ns());
    return;
  }
  tick1_ = tick;
  mono1_ = mono;
}

TickConversion TickClock::conversion() const {
  TickConversion c;
  std::lock_guard<std::mutex> lock(mu_);
  c.tick0 = tick0_;
  c.epoch_ns0 = mono0_ + epoch_offset_;
  c.monotonic_to_epoch_ns = epoch_offset_;
  if (!g_use_tsc) return c;  // ticks are monotonic ns
  if (tick1_ - tick0_ >= 10000000) {
    c.ns_per_tick = static_cast<double>(mono1_ - mono0_) / static_cast<double>(tick1_ - tick0_);
    return c;
  }
  // Samples too close together for a precise rate (a first, short window):
  // measure the rate once over 2 ms and keep it until the anchor span is long.
  if (short_rate_ == 0) {
    const Pair a = read_pair();
    while (static_cast<std::int64_t>(monotonic_ns()) - a.mono < 2000000) {
    }
    const Pair b = read_pair();
    short_rate_ = static_cast<double>(b.mono - a.mono) / static_cast<double>(b.tick - a.tick);
  }
  c.ns_per_tick = short_rate_;
  return c;
}

}  // namespace tprof::internal
