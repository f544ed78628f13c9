// dropped_events: the recorder lost events (full per-thread buffers in
// tprof's capture, its "tprof": {"droppedEvents": N} key; Kineto's own
// overflow drops leave no count in the file). Totals and gaps near the loss
// undercount. DiagnosticCode::kDroppedEvents / TraceMetadata::dropped_events.
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
  if (dropped == 0 && diag == 0) return;
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
  f.severity = dropped == 0 || share > kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = dropped > 0 ? std::to_string(dropped) + " events were dropped by the recorder (" +
                              format_pct(100.0 * share) + " of all)"
                        : "the recorder reports dropped events";
  f.evidence.num("dropped_events", dropped).num("events_kept", kept).real("dropped_pct", 100.0 * share);
  if (!message.empty()) f.evidence.text("message", message);
  f.advice =
      "Totals, busy times and gaps undercount where events were lost. Profile a shorter window (fewer "
      "active steps in the schedule) or fewer threads, or enlarge the recorder's buffers.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
