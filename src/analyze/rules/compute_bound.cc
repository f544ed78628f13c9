// compute_bound: the host keeps the GPU fed: Self CPU ≈ Self CUDA, both
// large, and the GPU busy most of the time. Usually what you want (info).
// Origin: docs/trace-reading.md, "Self CPU ≈ Self CUDA, both in ms:
// compute-bound — usually what you want".
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// "≈": Self CPU at most twice Self CUDA (the post's 4096² run: 4.908 ms vs
// 4.495 ms; the H100 ones 4.0 vs 4.0 ms). More device time than CPU time
// counts too: the GPU is then even more clearly the bottleneck.
constexpr double kMaxCpuToDevice = 2.0;
// "both in ms": the device total must reach a millisecond, so a tiny trace
// with one long kernel is not called compute-bound.
constexpr std::int64_t kMinDeviceTotalNs = 1'000'000;
// "GPU busy most of the time": the step verdict's compute share (80%).
constexpr double kBusyShare = 0.8;

}  // namespace

void rule_compute_bound(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const std::int64_t cpu = c.self_cpu_total_ns();
  const std::int64_t dev = c.self_device_total_ns();
  if (dev < kMinDeviceTotalNs) return;
  const double ratio = static_cast<double>(cpu) / static_cast<double>(dev);
  if (ratio > kMaxCpuToDevice) return;

  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const std::int64_t span = w.span_ns, busy = w.busy_ns;
  std::vector<std::int64_t> busy_steps;
  for (const StepStat& st : c.steps.steps) {
    const std::int64_t b = std::min(st.gpu_busy_ns, st.dur_ns);
    if (st.dur_ns > 0 && static_cast<double>(b) >= kBusyShare * static_cast<double>(st.dur_ns)) {
      busy_steps.push_back(st.step);
    }
  }
  if (span <= 0) return;
  const double busy_share = static_cast<double>(busy) / static_cast<double>(span);
  if (busy_share < kBusyShare) return;

  Finding f;
  f.id = "compute_bound";
  f.severity = FindingSeverity::kInfo;
  char r[32];
  std::snprintf(r, sizeof r, "%.2f", ratio);
  f.title = "Compute-bound: GPU busy " + format_pct(100.0 * busy_share) + (c.steps.steps.empty() ? " of the trace" : " of the steps") +
            "; Self CPU " + format_ns(cpu) + " vs Self CUDA " + format_ns(dev) + " (ratio " + r + ")";
  f.evidence.num("self_cpu_total_ns", cpu)
      .num("self_device_total_ns", dev)
      .real("cpu_to_device_ratio", ratio)
      .real("gpu_busy_pct", 100.0 * busy_share)
      .num("window_ns", span)
      .num("gpu_busy_ns", busy)
      .text("window", c.steps.steps.empty() ? "trace" : "steps");
  if (!c.steps.steps.empty()) {
    f.evidence.num("steps_total", static_cast<std::int64_t>(c.steps.steps.size()));
    add_steps(f.evidence, std::move(busy_steps));
  }
  f.advice =
      "The GPU is the bottleneck, which is usually what you want. Speed-ups now come from the kernels themselves: "
      "start at the hotspot, check dtype (bf16/TF32), shapes that suit the tensor cores, and fusion of memory-bound ops.";
  f.impact_ns = dev;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
