// tprof/steps.h — one row per step (ProfilerStep#N, or a repeated range):
// where each step's time went.
//
//   tprof::StepsSummary s = tprof::compute_steps(trace);
//   for (const tprof::StepStat& st : s.steps) std::printf("%lld %.1f%%\n", st.step, st.gpu_idle_pct);
//   std::cout << tprof::format_steps_text(trace, s);
//
// Definitions (docs/steps.md):
//   CPU busy  union of host activity (ops, annotations, runtime calls) on the
//             step's thread, inside the step.
//   GPU busy  union of device activity (kernels, memcpy, memset) on every
//             stream, clipped to the step's [start, end).
//   GPU idle  100 × (1 − GPU busy / duration).
//   first kernel offset  for the first device activity launched during the
//             step (by launch time): its start − its launch call's start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprof/step_events.h"
#include "tprof/trace.h"

namespace tprof {

struct StepStat {
  std::int64_t step = -1;             // N of "ProfilerStep#N"
  // False when the name holds no usable N ("ProfilerStep#abc", "#", a
  // number past int64): `step` is then the previous step's number + 1.
  bool numbered = true;
  std::uint32_t event = kNoIndex;     // the ProfilerStep event
  std::uint32_t lane = kNoIndex;
  std::int64_t start_ns = 0;          // absolute
  std::int64_t dur_ns = 0;
  std::int64_t cpu_busy_ns = 0;
  std::int64_t gpu_busy_ns = 0;
  double gpu_idle_pct = 0;            // meaningful when the trace has device activity
  std::int64_t launches = 0;          // device activities launched during the step
  std::optional<std::int64_t> first_kernel_offset_ns;
  std::uint32_t first_kernel_event = kNoIndex;
  std::uint32_t first_launch_event = kNoIndex;
};

struct StepsSummary {
  std::vector<StepStat> steps;  // by start time
  bool has_device = false;      // the trace has device activity
  std::int64_t trace_start_ns = 0;
  std::string range;            // as StepEvents (tprof/step_events.h): what the steps are
  bool detected = false;
  bool closing_step_only = false;  // the trace's one ProfilerStep was the profiler's closing step (no steps)
  std::int64_t empty_markers = 0;  // the trace's ProfilerStep#N events hold no other event (no steps)
  std::vector<std::string> candidates;
};

// Computes the per-step rows of find_step_events' steps (none when it finds none).
StepsSummary compute_steps(const Trace& trace);

// Plain-text table, one line per step.
std::string format_steps_text(const Trace& trace, const StepsSummary& summary);
// JSON document {"steps": [...]} with ns integers (a stable contract).
std::string format_steps_json(const Trace& trace, const StepsSummary& summary);

}  // namespace tprof
