// The cheapest clock, read on the hot path, converted to ns later.
//
// On x86-64 with an invariant TSC, ticks are `rdtsc`; elsewhere they are
// CLOCK_MONOTONIC nanoseconds. A TickClock maps ticks to epoch nanoseconds
// with a calibration that is refined every time it is consulted, anchored at
// its first use (a longer span, a more exact rate).
#pragma once

#include <cstdint>
#include <mutex>

#include "tprof/internal/ticks.h"

namespace tprof::internal {

inline bool ticks_are_tsc() { return g_use_tsc; }
std::int64_t realtime_ns() noexcept;

// A frozen ticks -> epoch ns mapping, applied without locks.
struct TickConversion {
  std::uint64_t tick0 = 0;
  std::int64_t epoch_ns0 = 0;
  double ns_per_tick = 1.0;
  // Epoch ns - CLOCK_MONOTONIC ns: puts CLOCK_MONOTONIC times (the GPU
  // tracer's clock) on the same time line as converted ticks.
  std::int64_t monotonic_to_epoch_ns = 0;
  std::int64_t operator()(std::uint64_t ticks) const {
    const double delta = static_cast<double>(static_cast<std::int64_t>(ticks - tick0)) * ns_per_tick;
    return epoch_ns0 + static_cast<std::int64_t>(delta < 0 ? delta - 0.5 : delta + 0.5);
  }
};

// Ticks -> epoch ns. Thread-safe.
class TickClock {
 public:
  // The process-wide clock.
  static TickClock& instance();

  // Takes a calibration sample now (start and stop of every window call it).
  void sample();
  // The mapping for ticks read since the first sample(), calibrated over
  // everything sampled so far.
  TickConversion conversion() const;

 private:
  TickClock() = default;
  mutable std::mutex mu_;
  bool anchored_ = false;
  std::uint64_t tick0_ = 0, tick1_ = 0;
  std::int64_t mono0_ = 0, mono1_ = 0;
  std::int64_t epoch_offset_ = 0;  // realtime - monotonic at the anchor
  mutable double short_rate_ = 0;  // ns per tick measured over 2 ms, when the anchor span is short
};

}  // namespace tprof::internal
