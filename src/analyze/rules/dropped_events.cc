// dropped_events: the recorder lost events (full per-thread buffers in
// tprof's capture, its "tprof": {"droppedEvents": N} key; Kineto's own
// overflow drops leave no count in the file). Totals and gaps near the loss
// undercount. DiagnosticCode::kDroppedEvents / TraceMetadata::dropped_events.
// Also the capture's other losses, which cost detail rather than time:
// kept scopes without their shapes (droppedShapes) and scopes still open
// when the window ended (unfinishedScopes, DiagnosticCode::kUnfinishedScopes).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Ours: losing more than 1% of the events makes totals unreliable.
constexpr double kWarningShare = 0.01;

}  // namespace

void rule_dropped_events(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const std::uint64_t diag = t.diagnostics.count(DiagnosticCode::kDroppedEvents);
  const std::int64_t dropped = static_cast<std::int64_t>(t.meta.dropped_events);
  const std::int64_t shapes = static_cast<std::int64_t>(t.meta.dropped_shapes);
  const std::int64_t unfinished = static_cast<std::int64_t>(t.meta.unfinished_scopes);
  if (dropped == 0 && diag == 0 && unfinished == 0) return;
  const std::int64_t kept = static_cast<std::int64_t>(t.events.size());
  // In double: dropped can be anything up to INT64_MAX (a file says so).
  const double share =
      dropped > 0 ? static_cast<double>(dropped) / (static_cast<double>(dropped) + static_cast<double>(kept)) : 0;
  std::string message;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code == DiagnosticCode::kDroppedEvents) {
      message = d.message;
      break;
    }
  }
  Finding f;
  f.id = "dropped_events";
  // Lost events undercount totals; lost shapes or scopes cut at the
  // window's end lose detail, not time.
  const bool events_lost = dropped > 0 || (diag > 0 && shapes == 0);
  f.severity = events_lost && (dropped == 0 || share > kWarningShare) ? FindingSeverity::kWarning
                                                                       : FindingSeverity::kInfo;
  if (dropped > 0) {
    f.title = std::to_string(dropped) + " events were dropped by the recorder (" + format_pct(100.0 * share) +
              " of all)";
  } else if (shapes > 0) {
    f.title = std::to_string(shapes) + " kept scopes lost their input shapes";
  } else if (unfinished > 0) {
    f.title = std::to_string(unfinished) + (unfinished == 1 ? " scope was" : " scopes were") +
              " still open when the window ended";
  } else {
    f.title = "the recorder reports dropped events";
  }
  f.evidence.num("dropped_events", dropped).num("events_kept", kept).real("dropped_pct", 100.0 * share);
  if (shapes > 0) f.evidence.num("shapes_missing", shapes);
  if (unfinished > 0) f.evidence.num("unfinished_scopes", unfinished);
  if (!message.empty()) f.evidence.text("message", message);
  std::string advice;
  if (events_lost) {
    advice =
        "Totals, busy times and gaps undercount where events were lost. Profile a shorter window (fewer "
        "active steps in the schedule) or fewer threads, or enlarge the recorder's buffers.";
  }
  if (shapes > 0) {
    advice += std::string(advice.empty() ? "" : " ") +
              "Shape-based views (TFLOP/s, group_by_input_shape) miss those scopes: raise "
              "ProfilerOptions::payload_words_per_thread.";
  }
  if (unfinished > 0) {
    advice += std::string(advice.empty() ? "" : " ") +
              "A scope still open when its window ends is left out of the trace (and its children's time is "
              "nobody's): end the window (step() or stop()) outside long-running scopes.";
  }
  f.advice = advice;
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
