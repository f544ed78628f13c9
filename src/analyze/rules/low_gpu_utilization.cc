// low_gpu_utilization: the TensorBoard plugin's "GPU N has low utilization"
// recommendation (kineto tb_plugin/torch_tb_profiler/profiler/data.py,
// _analyze_gpu_metrics; the number from gpu_metrics_parser.py): per device,
// the union of its kernels inside the steps' span, divided by that span.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// The plugin recommends a larger batch when utilization < 0.5 (data.py).
constexpr double kLowUtilization = 0.5;

struct Gap {
  std::int64_t ns = 0;
  std::uint32_t before = kNoIndex;  // the activity whose end opens the gap
  std::uint32_t after = kNoIndex;   // the activity that closes it
};

// The longest stretch inside [lo, hi) where `device` ran no kernel, with the
// kernels on either side (one pass over activities sorted by start).
Gap longest_gap(const DiagnoseContext& c, std::int32_t device, std::int64_t lo, std::int64_t hi) {
  Gap best;
  std::int64_t busy_until = lo;
  std::uint32_t last = kNoIndex;
  for (const DeviceOp& op : c.device) {
    if (op.device != device || c.kind(op.event) != EventKind::kKernel) continue;
    if (op.start >= hi) break;
    if (op.end <= lo) continue;
    if (op.start > busy_until && op.start - busy_until > best.ns) best = {op.start - busy_until, last, op.event};
    if (op.end > busy_until) {
      busy_until = op.end;
      last = op.event;
    }
  }
  if (hi > busy_until && hi - busy_until > best.ns) best = {hi - busy_until, last, kNoIndex};
  return best;
}

}  // namespace

void rule_low_gpu_utilization(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // The plugin's span runs from the first step's start to the last step's
  // end, stretched to the end of device work the steps launched; without
  // steps it is the whole trace.
  std::int64_t lo = c.start_ns, hi = c.end_ns;
  const auto& steps = c.steps.steps;
  if (!steps.empty()) {
    lo = steps.front().start_ns;
    hi = 0;
    for (const StepStat& s : steps) hi = std::max(hi, s.start_ns + s.dur_ns);
    for (const DeviceOp& op : c.device) {
      if (op.step >= 0) hi = std::max(hi, op.end);
    }
  }
  if (hi <= lo) return;
  std::map<std::int32_t, std::vector<Interval>> per_device;
  for (const DeviceOp& op : c.device) {
    if (c.kind(op.event) == EventKind::kKernel) per_device[op.device].push_back({op.start, op.end});
  }
  struct Low {
    std::int32_t device;
    std::int64_t busy;
  };
  std::vector<Low> low;
  std::vector<std::string> per_device_text;
  for (auto& [device, iv] : per_device) {
    const std::int64_t busy = covered_within(merge_intervals(std::move(iv)), lo, hi);
    const double util = static_cast<double>(busy) / static_cast<double>(hi - lo);
    per_device_text.push_back("gpu " + std::to_string(device) + ": " + format_pct(100.0 * util));
    if (util < kLowUtilization) low.push_back({device, busy});
  }
  if (low.empty()) return;
  const Low worst = *std::min_element(low.begin(), low.end(), [](const Low& a, const Low& b) { return a.busy < b.busy; });
  const std::int64_t window = hi - lo;
  const double util = 100.0 * static_cast<double>(worst.busy) / static_cast<double>(window);
  std::vector<std::int64_t> devices;
  for (const Low& l : low) devices.push_back(l.device);

  Finding f;
  f.id = "low_gpu_utilization";
  f.severity = FindingSeverity::kWarning;
  f.title = "GPU " + std::to_string(worst.device) + " runs kernels " + format_pct(util) + " of the " +
            (steps.empty() ? std::string("trace") : std::string("steps' span")) + " (" + format_ns(window) + ")";
  f.evidence.num("device", worst.device)
      .real("utilization_pct", util)
      .num("kernel_busy_ns", worst.busy)
      .num("window_ns", window)
      .num("window_start_ns", lo)
      .num("idle_ns", window - worst.busy)
      .real("threshold_pct", 100.0 * kLowUtilization)
      .ints("low_devices", devices)
      .texts("per_device", per_device_text);
  const Gap gap = longest_gap(c, worst.device, lo, hi);
  if (gap.ns > 0) {
    f.evidence.num("longest_gap_ns", gap.ns);
    if (gap.before != kNoIndex) f.evidence.event("gap_start_kernel", c.ref(gap.before));
    if (gap.after != kNoIndex) f.evidence.event("gap_end_kernel", c.ref(gap.after));
  }
  f.advice =
      "The GPU waits more than it works. Check where the idle time goes (host launch overhead, data loading, "
      "synchronization: see the other findings); if the work is simply small, a larger batch or fusing ops "
      "(torch.compile, CUDA graphs) raises utilization.";
  f.impact_ns = window - worst.busy;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
