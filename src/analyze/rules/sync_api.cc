// sync_api: Nsight Systems' expert rules cuda_api_sync ("CUDA
// Synchronization APIs") and cuda_memcpy_sync ("CUDA Synchronous Memcpy")
// (nsys analyze; Nsight Systems User Guide, "Expert Systems Analysis"):
// runtime calls that block the host until the device catches up —
// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and
// their driver / HIP forms) — and memcpy calls without "Async". Ours looks
// only inside ProfilerSteps, where a blocked host is a stalled pipeline; a
// synchronize after the loop is sync_at_window_end's business.
// Precondition for a warning: the GPU was mostly idle during the calls. A
// sync while the GPU is busy is the host waiting for queued work: the host
// lost that time, the GPU did not (a GPU-bound program looks like that).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Nsight reports every such call; ours makes the finding a warning once the
// host spends more than this share of the steps blocked in them.
constexpr double kWarningShare = 0.1;
// ... and the GPU was busy less than this share of the calls' time (as
// sync_at_window_end: a GPU busy through the wait is not starved by it).
constexpr double kBusyShare = 0.5;
constexpr std::size_t kMaxSteps = 16;

}  // namespace

void rule_sync_api(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (c.steps.steps.empty()) return;
  std::map<std::string_view, std::int64_t> count_by_name, ns_by_name;
  std::int64_t calls = 0, sync_ns = 0, busy_ns = 0;
  std::uint32_t worst = kNoIndex;
  std::vector<std::int64_t> steps;
  for (std::uint32_t e : c.runtime) {
    const std::string_view name = c.name(e);
    if (!is_sync_call(name) && !is_blocking_memcpy(name)) continue;
    const int si = c.step_index_at(c.ts(e));
    if (si < 0) continue;
    ++calls;
    sync_ns += c.dur(e);
    busy_ns += c.device_busy_ns(-1, c.ts(e), c.end(e));
    ++count_by_name[name];
    ns_by_name[name] += c.dur(e);
    if (worst == kNoIndex || c.dur(e) > c.dur(worst)) worst = e;
    const std::int64_t n = c.step_number(si);
    if (steps.empty() || steps.back() != n) steps.push_back(n);
  }
  if (calls == 0) return;
  std::int64_t step_total = 0;
  for (const StepStat& s : c.steps.steps) step_total += s.dur_ns;
  const double share = step_total > 0 ? static_cast<double>(sync_ns) / static_cast<double>(step_total) : 0;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  const std::int64_t steps_with = static_cast<std::int64_t>(steps.size());
  if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);
  std::vector<std::string> by_name;
  for (const auto& [name, n] : count_by_name) {
    by_name.push_back(std::string(name) + " x" + std::to_string(n) + " " + format_ns(ns_by_name[name]));
  }

  const double busy = sync_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(sync_ns) : 0;
  const bool gpu_busy = c.has_device() && busy >= kBusyShare;
  Finding f;
  f.id = "sync_api";
  f.severity = share > kWarningShare && !gpu_busy ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = std::to_string(calls) + " synchronizing " + std::string(c.api()) + " calls inside steps block the host " +
            format_ns(sync_ns) + " (" + format_pct(100.0 * share) + " of step time)";
  if (gpu_busy) f.title += "; the GPU was busy " + format_pct(100.0 * busy) + " of it: the host waited, the GPU did not";
  f.evidence.num("calls", calls)
      .num("sync_ns", sync_ns)
      .real("sync_pct", 100.0 * share)
      .num("step_total_ns", step_total)
      .real("gpu_busy_pct", 100.0 * busy)
      .num("gpu_idle_during_sync_ns", sync_ns - busy_ns)
      .num("steps_with_sync", steps_with)
      .texts("by_name", by_name)
      .event("longest", c.ref(worst))
      .ints("steps", steps);
  f.advice =
      "Each call stops the host until the GPU drains, so the next launches start late. Find what triggers it "
      "(.item(), .cpu(), printing or logging a tensor, torch.cuda.synchronize(), a non_blocking=False copy) "
      "and move it out of the step, batch it every N steps, or use events and non_blocking copies.";
  // What the waits cost the device: its idle time inside them.
  f.impact_ns = sync_ns - busy_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
