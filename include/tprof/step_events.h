// tprof/step_events.h — which events are a trace's steps: ProfilerStep#N,
// a range named on the command line (--step-range NAME), or a repeated
// range found in the trace. One definition for every analysis that reads
// steps (compute_steps, the causal replay, diagnose, compare, reports).
//
//   tprof::StepEvents s = tprof::find_step_events(trace);
//   for (std::size_t i = 0; i < s.events.size(); ++i) use(s.events[i], s.numbers[i]);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprof/trace.h"

namespace tprof {

// The steps, by start (then index) (docs/steps.md, "What a step is"):
//   1. trace.meta.step_range set (--step-range NAME): the outermost
//      complete events of that name on CPU lanes (an NVTX range, a
//      record_function, any host event), numbered 0, 1, ... by start;
//   2. else its ProfilerStep#N events on CPU lanes, numbered N (a name
//      without a usable N: the step before's number + 1, `numbered` false);
//      none where no ProfilerStep#N holds another event, on any thread or
//      device, while the trace records some (markers of the step() calls:
//      a legacy export's, `empty_markers`);
//   3. else a repeated range found in it: the one name of user annotation
//      (record_function, NVTX: tprof record's ranges) on a CPU thread whose
//      outermost occurrences repeat (3 or more: two are as often set-up and
//      tear-down), lie inside no other repeated annotation, cover at least
//      half the span from the first's start to the last's end (a
//      once-per-iteration marker such as an optimizer step does not), and,
//      where the trace has launch calls, hold at least half of them (an
//      iteration launches the run's device work), numbered 0, 1, ...; two
//      or more such names: none, and they are listed. torch's own
//      annotations (a compiled graph's "## Call CompiledFxGraph", an
//      optimizer step, a collective) are pieces of an iteration, never
//      one; a trace that records graph capture has none (its ranges are
//      the captures' warm-ups).
//   4. else, with no such annotation, a repeated Python function
//      (with_stack traces: vLLM's engine step) by the same tests, held
//      stricter: calls back to back (nine tenths of their span) over four
//      fifths of the trace's host span, half of them running an op, and
//      no op recurring between them that never runs in one (a layer's
//      forward repeats too).
struct StepEvents {
  std::vector<std::uint32_t> events;    // by start, then index
  std::vector<std::int64_t> numbers;    // per step
  std::vector<std::uint8_t> numbered;   // per step: 0 when N was not usable (case 2)
  std::string range;                    // "": ProfilerStep#N; else the range's name
  bool detected = false;                // the range was found (3), not named (1)
  bool closing_step_only = false;       // (2) its one ProfilerStep was the profiler's closing step, left out
  std::int64_t empty_markers = 0;       // (2) its ProfilerStep#N events, left out: none holds another event
  std::vector<std::string> candidates;  // (3) found none: the repeated ranges it could not choose among
};
StepEvents find_step_events(const Trace& trace);

// The names of the user annotations (record_function, NVTX) that occur two
// or more times as the outermost call of their name on a CPU thread, sorted:
// what --step-range could name, for an error that says what is there.
std::vector<std::string> repeated_ranges(const Trace& trace);

// What is wrong with the range trace.meta.step_range names, for an error:
// "" when none is named or the trace has it; else "no host event of that
// name", with the repeated ranges the trace does have (10 at most).
std::string step_range_problem(const Trace& trace);

}  // namespace tprof
