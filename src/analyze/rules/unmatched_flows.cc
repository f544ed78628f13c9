// unmatched_flows: flow events (ac2g launch arrows, fwdbwd, ...) with a start
// but no end or the reverse (DiagnosticCode::kUnmatchedFlow, from the
// reader's validator). Viewers draw no arrow for them; a truncated file or a
// trace window that cut a launch from its kernel leaves them behind.
// Precondition: only flows that should have a partner, inside the window,
// in a trace with device activity: where none was recorded every launch's
// flow is lone, and device_activity_missing says why (issue 38 review).
// The reader leaves out the lone flows Kineto writes on runtime calls that
// launch nothing (src/trace/validate.cc): they are in every complete Kineto
// file; the rule also leaves out those on cuda_sync spans and on calls of a
// correlation id with neither a launching call nor device activity, and
// those outside the first-to-last span of the matched flows or, by
// correlation id, launched before the first recorded launch call or after
// the last recorded device activity (cut by the profiling window).
// Trace health.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Ours: flows cut at the window's edges are normal and never counted; more
// than this share of the flow events broken inside the window means links
// (launch → kernel) are broken in bulk.
constexpr double kWarningShare = 0.1;
// Ours: up to this share of broken links inside the window is not worth a
// finding.
constexpr double kSilentShare = 0.02;

}  // namespace

void rule_unmatched_flows(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const std::uint64_t count = t.diagnostics.count(DiagnosticCode::kUnmatchedFlow);
  if (count == 0 || (!c.has_device() && c.ranges.empty())) return;
  const EventColumns& ev = t.events;
  std::vector<std::uint32_t> lone;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code == DiagnosticCode::kUnmatchedFlow && d.event != kNoIndex) lone.push_back(d.event);
  }
  std::sort(lone.begin(), lone.end());
  // The window the links cover: the first to the last flow event that has
  // its partner. A flow outside it was cut by the profiling window (a launch
  // whose kernel ran after the recording stopped, a kernel whose launch came
  // before it started): normal, not a defect.
  std::int64_t flow_events = 0, lo = INT64_MAX, hi = INT64_MIN;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kFlowStart && ev.phase[e] != Phase::kFlowEnd) continue;
    ++flow_events;
    if (std::binary_search(lone.begin(), lone.end(), e)) continue;
    lo = std::min(lo, ev.ts_ns[e]);
    hi = std::max(hi, ev.ts_ns[e]);
  }
  // Only links that should exist: a launching call (Launch, Memcpy, Memset in
  // its name) or a device activity of the flow's correlation id. Kineto also
  // puts ac2g flows on calls that launch nothing (cudaEventRecord,
  // cudaEventElapsedTime) and on cuda_sync spans ("Event Sync", "Stream Wait
  // Event"): nothing is missing there.
  std::vector<std::int64_t> linkable;
  // Correlation ids grow with each call a process makes: a kernel whose id
  // is below every recorded launch call's was launched before the
  // recording began, and a launch whose id is above every recorded device
  // activity's ran its work after it stopped, however late in time (issue 38's
  // eighth round: an MI300X replay whose queue was 9-28 ms deep ran nine
  // kernels launched in the warm-up steps inside the window).
  std::int64_t first_launch_corr = INT64_MAX, last_device_corr = INT64_MIN;
  // A trace that records no driver call cannot show a launch made through
  // the driver API (cuLaunchKernel: TensorRT's engines, Triton): those
  // kernels' flows are lone by the profiler's coverage, not broken (issue
  // 38's eighth round: six TensorRT kernels told to "re-export the trace").
  bool records_driver = false;
  std::vector<std::int64_t> runtime_corr;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.correlation[e] < 0) continue;
    const EventKind k = ev.kind[e];
    const bool device = is_device_work(k);
    const std::string_view n = t.name(e);
    const bool launch = (k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) &&
                        (n.find("Launch") != std::string_view::npos || n.find("Memcpy") != std::string_view::npos ||
                         n.find("Memset") != std::string_view::npos);
    if (device || launch) linkable.push_back(ev.correlation[e]);
    records_driver = records_driver || k == EventKind::kCudaDriver;
    if (k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) runtime_corr.push_back(ev.correlation[e]);
    if (launch) first_launch_corr = std::min(first_launch_corr, ev.correlation[e]);
    if (device) last_device_corr = std::max(last_device_corr, ev.correlation[e]);
  }
  std::sort(linkable.begin(), linkable.end());
  std::sort(runtime_corr.begin(), runtime_corr.end());
  std::int64_t inside = 0, at_edges = 0, launch_nothing = 0, driver_launched = 0;
  std::uint32_t first = kNoIndex;
  std::vector<std::string> categories;
  for (std::uint32_t e : lone) {
    if (!std::binary_search(linkable.begin(), linkable.end(), ev.flow_id[e])) {
      ++launch_nothing;
      continue;
    }
    const bool before_recording = ev.phase[e] == Phase::kFlowEnd && ev.flow_id[e] < first_launch_corr;
    const bool after_recording = ev.phase[e] == Phase::kFlowStart && ev.flow_id[e] > last_device_corr;
    if (ev.ts_ns[e] < lo || ev.ts_ns[e] > hi || before_recording || after_recording) {
      ++at_edges;
      continue;
    }
    if (!records_driver && ev.phase[e] == Phase::kFlowEnd &&
        !std::binary_search(runtime_corr.begin(), runtime_corr.end(), ev.flow_id[e])) {
      ++driver_launched;
      continue;
    }
    ++inside;
    if (first == kNoIndex || c.ts(e) < c.ts(first)) first = e;
    const std::string cat(t.cat(e));
    if (std::find(categories.begin(), categories.end(), cat) == categories.end()) categories.push_back(cat);
  }
  const double share = flow_events > 0 ? static_cast<double>(inside) / static_cast<double>(flow_events) : 1.0;
  if (inside == 0 || share <= kSilentShare) return;
  Finding f;
  f.id = "unmatched_flows";
  f.severity = share > kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = std::to_string(inside) + " launch/kernel links broken inside the recorded window (" +
            format_pct(100.0 * share) + " of flow events)";
  f.evidence.num("unmatched", inside)
      .num("at_window_edges", at_edges)
      .num("on_calls_launching_nothing", launch_nothing)
      .num("launched_through_the_driver", driver_launched)
      .num("flow_events", flow_events)
      .real("unmatched_pct", 100.0 * share)
      .texts("categories", categories);
  if (first != kNoIndex) f.evidence.event("first", c.ref(first));
  f.advice =
      "Re-export the trace from the profiler, unedited and unmerged, before trusting launch → kernel offsets: "
      "launches and kernels inside the window have lost their links, so the viewer draws no arrow and tprof cannot "
      "tie those kernels to the op or step that launched them.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
