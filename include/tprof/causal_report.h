// tprof/causal_report.h — tprof critical-path and tprof whatif as text,
// JSON and Markdown (docs/critical-path.md).
//
//   auto r = tprof::analyze_causal(trace, {.edits = edits});
//   std::cout << tprof::format_whatif(trace, *r, "text");
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tprof/causal.h"
#include "tprof/trace.h"

namespace tprof {

struct CausalReportOptions {
  std::string format = "text";  // text, json or md
  // One step's path in detail (an index into CausalResult::steps); without
  // it, every step's shares and the events with most time on the paths.
  std::optional<std::size_t> step;
  // A window other than a step (annotation_critical_path), shown in detail.
  std::optional<CriticalPath> window;
  std::string window_label;  // "\"## forward ##\" instance 1"
  std::size_t top = 10;      // events listed by time on the path
};

// The critical path: length, share by bound type, the events on it.
std::string format_critical_path(const Trace& trace, const CausalResult& r, const CausalReportOptions& o = {});
// Measured, replayed and predicted time per step, and the path after the edits.
std::string format_whatif(const Trace& trace, const CausalResult& r, const CausalReportOptions& o = {});

}  // namespace tprof
