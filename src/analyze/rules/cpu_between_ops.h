// The time a CPU-only program runs no recorded op or scope on any thread
// (cpu_between_ops.cc): the rule and the verdict (verdict.cc) read it, so a
// cpu-only verdict says how much of the span its ops' kinds describe.
#pragma once

#include <cstdint>

#include "src/analyze/diagnose_context.h"

namespace tprof::internal {

struct BetweenOps {
  std::int64_t span_ns = 0;      // first recorded op or scope to the last
  std::int64_t recorded_ns = 0;  // their union (ProfilerStep#, a scope wrapping the run left out)
  std::int64_t gaps_ns = 0;      // stretches of kMinGapNs or more with none running
  std::int64_t gaps = 0;
  std::int64_t largest_ns = 0;
  std::int64_t largest_at_ns = 0;  // absolute
  double share() const { return span_ns > 0 ? static_cast<double>(gaps_ns) / static_cast<double>(span_ns) : 0.0; }
};

// Zero when the preconditions fail: a torch trace of a CPU-only program
// with no Python stack, a span of at least a few milliseconds, and two or
// more recorded stretches.
BetweenOps between_recorded_ops(const DiagnoseContext& c);

// Where the finding starts: that share of the span.
inline constexpr double kBetweenOpsMinShare = 0.30;

}  // namespace tprof::internal
