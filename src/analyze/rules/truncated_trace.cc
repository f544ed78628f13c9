// truncated_trace: the file ends early (a job killed while writing, a full
// disk, a damaged gzip stream). The reader keeps every complete event before
// the cut and records DiagnosticCode::kTruncated; everything after it, often
// the last steps and the device activity flushed at the end, is missing.
// Trace health, as HolisticTraceAnalysis and Perfetto report unreadable
// input; ours still analyzes what loaded.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

void rule_truncated_trace(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const std::uint64_t count = t.diagnostics.count(DiagnosticCode::kTruncated);
  if (count == 0) return;
  const Diagnostic* first = nullptr;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code == DiagnosticCode::kTruncated) {
      first = &d;
      break;
    }
  }
  // The last event that did load: where the cut is on the timeline.
  std::uint32_t last = kNoIndex;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kMetadata) continue;
    if (last == kNoIndex || c.end(e) > c.end(last)) last = e;
  }
  Finding f;
  f.id = "truncated_trace";
  f.severity = FindingSeverity::kWarning;
  f.title = "the trace file ends early; " + std::to_string(t.events.size()) + " events loaded before the cut";
  f.evidence.num("events_loaded", static_cast<std::int64_t>(t.events.size()))
      .num("byte_offset", first != nullptr ? first->byte_offset : -1)
      .num("loaded_span_ns", c.end_ns - c.start_ns);
  if (first != nullptr) f.evidence.text("message", first->message);
  if (last != kNoIndex) f.evidence.event("last_event", c.ref(last));
  f.advice =
      "Findings cover only what loaded: the last steps and late device activity may be missing. Re-export "
      "the trace (let the profiler finish writing, check disk space), or profile fewer steps.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
