// unmatched_flows: flow events (ac2g launch arrows, fwdbwd, ...) with a start
// but no end or the reverse (DiagnosticCode::kUnmatchedFlow, from the
// reader's validator). Viewers draw no arrow for them; a truncated file or a
// trace window that cut a launch from its kernel leaves them behind.
// Precondition: only flows that should have a partner. The reader leaves
// out the lone flows Kineto writes on runtime calls that launch nothing
// (src/trace/validate.cc): they are in every complete Kineto file.
// Trace health.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Ours: a few strays at the window's edges are normal; more than this share
// of the flow events means links (launch → kernel) are broken in bulk.
constexpr double kWarningShare = 0.1;
// Ours: up to this share they are the strays a profiling window always cuts
// (a launch just before it, a kernel just after); not worth a finding.
constexpr double kSilentShare = 0.02;

}  // namespace

void rule_unmatched_flows(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const std::uint64_t count = t.diagnostics.count(DiagnosticCode::kUnmatchedFlow);
  if (count == 0) return;
  std::int64_t flow_events = 0;
  for (Phase p : t.events.phase) {
    if (p == Phase::kFlowStart || p == Phase::kFlowEnd) ++flow_events;
  }
  std::uint32_t first = kNoIndex;
  std::vector<std::string> categories;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code != DiagnosticCode::kUnmatchedFlow || d.event == kNoIndex) continue;
    if (first == kNoIndex || c.ts(d.event) < c.ts(first)) first = d.event;
    const std::string cat(t.cat(d.event));
    if (std::find(categories.begin(), categories.end(), cat) == categories.end()) categories.push_back(cat);
  }
  const double share = flow_events > 0 ? static_cast<double>(count) / static_cast<double>(flow_events) : 1.0;
  if (share <= kSilentShare) return;
  Finding f;
  f.id = "unmatched_flows";
  f.severity = share > kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = std::to_string(count) + " flow events have no partner (" + format_pct(100.0 * share) +
            " of flow events)";
  f.evidence.num("unmatched", static_cast<std::int64_t>(count))
      .num("flow_events", flow_events)
      .real("unmatched_pct", 100.0 * share)
      .texts("categories", categories);
  if (first != kNoIndex) f.evidence.event("first", c.ref(first));
  f.advice =
      "Arrows from these launches to their kernels (or between forward and backward) are missing in the "
      "viewer. A few at the window's edges are normal; many point to a truncated or merged trace.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
