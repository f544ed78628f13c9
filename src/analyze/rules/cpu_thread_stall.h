// Ops of a CPU-only program that take whole scheduler ticks
// (cpu_thread_stall.cc): the rule reports them, per_param_optimizer and the
// verdict read them, so an optimizer's time that is its stalls is not
// called the per-parameter loop's.
#pragma once

#include <cstdint>
#include <vector>

#include "src/analyze/diagnose_context.h"

namespace tprof::internal {

struct ThreadStalls {
  std::int64_t tick_ns = 0;              // 0: the preconditions fail
  std::int64_t long_calls = 0;           // calls from kMinCallNs to kMaxMultiple ticks and a half
  std::vector<std::uint32_t> stalled;    // the calls on a tick's multiple, by start
  std::int64_t stalled_ns = 0;
  std::int64_t excess_ns = 0;            // less each op's median short call: the saving's bound
  std::int64_t busy_ns = 0;              // the steps' span, else the trace's window
  bool found() const { return tick_ns > 0; }
};

// The whole program's: a CPU-only program whose stalls hold kMinBusyShare
// (10%) of its busy time (the rule's preconditions).
ThreadStalls thread_stalls(const DiagnoseContext& c);

// Among `calls` (CPU ops, by start) only, the same test with min_calls long
// calls and without the busy share (busy_ns 0): an optimizer step's own ops.
ThreadStalls stalls_among(const DiagnoseContext& c, const std::vector<std::uint32_t>& calls, std::size_t min_calls);

// The time of `calls` (CPU ops) that sit on a multiple of `tick`, a tick
// the whole program's stalls were found on: no witnesses of their own.
std::int64_t stalled_ns_at(const DiagnoseContext& c, const std::vector<std::uint32_t>& calls, std::int64_t tick);

// An op's calls of kMinCallNs or more, however many ticks they last, and
// those that sit on a multiple of `tick` (a call of many ticks lands there
// by chance 29% of the time; most of them there is the stalls in it).
struct CallsOnTicks {
  std::int64_t calls = 0, on_ticks = 0;
  bool most() const;  // at least kMinOpCalls calls, kMinShare of them on ticks
};
CallsOnTicks calls_on_ticks(const DiagnoseContext& c, std::string_view op, std::int64_t tick);

}  // namespace tprof::internal
