// Saturating int64 arithmetic for sums over untrusted data (byte counts and
// durations from a trace file): never undefined behaviour, clamps at the limits.
#pragma once

#include <cstdint>
#include <limits>

namespace tprof::internal {

inline std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

inline std::int64_t sat_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

inline std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
}

// a += b, saturating.
inline void sat_acc(std::int64_t& a, std::int64_t b) { a = sat_add(a, b); }

}  // namespace tprof::internal
