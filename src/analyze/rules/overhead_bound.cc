// overhead_bound: the CPU spends far more time than the GPU and the GPU sits
// mostly idle: it waits for the host to prepare and launch work.
// Origin: docs/trace-reading.md, "Self CPU total ≫ Self CUDA total (ms vs
// µs): overhead-bound". Advice names graphs only when the trace does not
// replay any yet (no cudaGraphLaunch / hipGraphLaunch).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// "≫": an order of magnitude. The post's 64×64 run had 2.314 ms vs 23.1 µs
// (100×); the H100 64×64 traces show 21–71×, the 4096² ones about 1×.
constexpr double kCpuToDeviceRatio = 10.0;
// At 100× (the post's figure, GPU < 1% of CPU time) the finding is critical.
constexpr double kCriticalRatio = 100.0;
// "GPU mostly idle": the TensorBoard plugin flags GPU utilisation < 50%.
constexpr double kIdleShare = 0.5;

}  // namespace

void rule_overhead_bound(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const std::int64_t cpu = c.self_cpu_total_ns();
  const std::int64_t dev = c.self_device_total_ns();
  if (cpu <= 0) return;
  const double ratio = static_cast<double>(cpu) / static_cast<double>(std::max<std::int64_t>(1, dev));
  if (ratio < kCpuToDeviceRatio) return;

  // GPU idle over the steps (their windows), else over the whole trace.
  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const std::int64_t span = w.span_ns, busy = w.busy_ns;
  std::vector<std::int64_t> affected;
  std::int64_t affected_idle = w.over_steps ? 0 : span - busy;
  std::uint32_t worst_step_event = kNoIndex;
  double worst_idle = -1;
  for (const StepStat& st : c.steps.steps) {
    const double idle = st.dur_ns > 0 ? 1.0 - static_cast<double>(st.gpu_busy_ns) / static_cast<double>(st.dur_ns) : 0;
    if (idle >= kIdleShare) {
      affected.push_back(st.step);
      affected_idle += st.dur_ns - std::min(st.gpu_busy_ns, st.dur_ns);
      if (idle > worst_idle) {
        worst_idle = idle;
        worst_step_event = st.event;
      }
    }
  }
  if (span <= 0) return;
  const double idle_share = 1.0 - static_cast<double>(busy) / static_cast<double>(span);
  if (idle_share < kIdleShare) return;

  Finding f;
  f.id = "overhead_bound";
  f.severity = ratio >= kCriticalRatio ? FindingSeverity::kCritical : FindingSeverity::kWarning;
  char r[32];
  std::snprintf(r, sizeof r, "%.0fx", ratio);
  f.title = "Overhead-bound: Self CPU " + format_ns(cpu) + " vs Self CUDA " + format_ns(dev) + " (" + r +
            "), GPU idle " + format_pct(100.0 * idle_share) + (c.steps.steps.empty() ? " of the trace" : " of the steps");
  f.evidence.num("self_cpu_total_ns", cpu)
      .num("self_device_total_ns", dev)
      .real("cpu_to_device_ratio", ratio)
      .real("gpu_idle_pct", 100.0 * idle_share)
      .num("window_ns", span)
      .num("gpu_busy_ns", busy)
      .text("window", c.steps.steps.empty() ? "trace" : "steps");
  if (!c.steps.steps.empty()) {
    f.evidence.num("steps_total", static_cast<std::int64_t>(c.steps.steps.size()));
    add_steps(f.evidence, std::move(affected));
    if (worst_step_event != kNoIndex) f.evidence.event("most_idle_step", c.ref(worst_step_event));
  }
  if (c.graph_launches() > 0) {
    const std::string call = c.is_hip() ? "hipGraphLaunch" : "cudaGraphLaunch";
    f.evidence.num("graph_launches", c.graph_launches());
    f.advice = "The GPU waits on the CPU to prepare and launch work, although the trace already replays graphs (" +
               std::to_string(c.graph_launches()) + " " + call +
               "): the host time is outside them. Look at what runs between the graph launches (scheduling, "
               "sampling, Python), move more of the step into the graph, or overlap the host work with the "
               "previous graph.";
  } else {
    f.advice = "The GPU waits on the CPU to prepare and launch work. Give each launch more work (bigger or batched "
               "inputs), fuse small ops (torch.compile), or replay the launches with " +
               std::string(c.api()) + " graphs.";
  }
  f.impact_ns = affected_idle;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
