// tprof/internal/ticks.h — the cheapest clock, read inline (not API).
// Ticks become nanoseconds later (src/base/clock.h).
#pragma once

#include <cstdint>

#include "tprof/internal/visibility.h"

// No <x86intrin.h> (48k preprocessed lines in every instrumented file):
// the compiler's builtin reads the TSC (GCC and clang).

TPROF_API_BEGIN
namespace tprof::internal {

// True when ticks are TSC reads (invariant TSC), else CLOCK_MONOTONIC ns.
extern const bool g_use_tsc;
std::uint64_t monotonic_ns() noexcept;

inline std::uint64_t read_ticks() noexcept {
#if defined(__x86_64__)
  if (__builtin_expect(g_use_tsc, 1)) return __builtin_ia32_rdtsc();
#endif
  return monotonic_ns();
}

}  // namespace tprof::internal
TPROF_API_END
