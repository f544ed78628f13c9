#include "tprof/steps.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/trace/id_index.h"
#include "src/analyze/intervals.h"
#include "src/base/radix_sort.h"
#include "src/base/saturate.h"

namespace tprof {

namespace {

bool is_host_activity(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kPythonFunction ||
         k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver;
}

}  // namespace

StepsSummary compute_steps(const Trace& t) {
  StepsSummary out;
  out.trace_start_ns = t.start_ns();
  const EventColumns& ev = t.events;
  StepEvents found = find_step_events(t);
  out.range = std::move(found.range);
  out.detected = found.detected;
  out.closing_step_only = found.closing_step_only;
  out.empty_markers = found.empty_markers;
  out.candidates = std::move(found.candidates);
  std::vector<std::uint8_t> is_step(ev.size(), 0);
  for (std::size_t i = 0; i < found.events.size(); ++i) {
    const std::uint32_t e = found.events[i];
    is_step[e] = 1;
    StepStat s;
    s.step = found.numbers[i];
    s.numbered = found.numbered[i] != 0;
    s.event = e;
    s.lane = ev.lane[e];
    s.start_ns = ev.ts_ns[e];
    s.dur_ns = ev.dur_ns[e];
    out.steps.push_back(s);
  }

  std::vector<internal::Interval> device;
  std::vector<std::pair<std::int64_t, std::uint32_t>> device_corr;
  std::vector<std::uint32_t> launches;  // runtime calls, by ts
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const EventKind k = ev.kind[e];
    if (is_device_work(k)) {
      device.push_back({ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
      if (ev.correlation[e] >= 0) device_corr.emplace_back(ev.correlation[e], e);
    } else if ((k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) && ev.correlation[e] >= 0) {
      // Launches come from the runtime (cudaLaunchKernel) and from the driver
      // (cuLaunchKernel, category cuda_driver: Triton and cuBLAS's CUTLASS
      // GEMMs in torch 2.x traces).
      launches.push_back(e);
    }
  }
  out.has_device = !device.empty();
  const std::vector<internal::Interval> device_union = internal::merge_intervals(std::move(device));
  const internal::IdIndex device_by_corr(std::move(device_corr));
  internal::sort_by_time(ev.ts_ns, &launches);
  // Host activity of the lanes that hold steps, merged once per lane.
  std::vector<std::vector<internal::Interval>> host(t.lanes.size());
  std::vector<std::uint8_t> has_steps(t.lanes.size(), 0);
  for (const StepStat& s : out.steps) has_steps[s.lane] = 1;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete || !is_host_activity(ev.kind[e])) continue;
    if (!has_steps[ev.lane[e]] || is_step[e]) continue;
    host[ev.lane[e]].push_back({ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
  }
  for (std::vector<internal::Interval>& v : host) v = internal::merge_intervals(std::move(v));

  for (StepStat& s : out.steps) {
    const std::int64_t end = s.start_ns + s.dur_ns;
    s.cpu_busy_ns = internal::covered_within(host[s.lane], s.start_ns, end);
    s.gpu_busy_ns = internal::covered_within(device_union, s.start_ns, end);
    s.gpu_idle_pct = s.dur_ns > 0 ? 100.0 * (1.0 - static_cast<double>(s.gpu_busy_ns) / static_cast<double>(s.dur_ns))
                                  : 0.0;
    auto it = std::lower_bound(launches.begin(), launches.end(), s.start_ns,
                               [&](std::uint32_t e, std::int64_t ts) { return ev.ts_ns[e] < ts; });
    // The first kernel's, not the first activity's: a step that starts by
    // copying its input measured the pageable copy's wait (issue 38's
    // fourteenth round: "first kernel after its launch: median 65 us" on a
    // CIFAR CNN whose kernels start 10 us after theirs). A step with no
    // kernel keeps its first activity's.
    bool kernel_found = false;
    for (; it != launches.end() && ev.ts_ns[*it] < end; ++it) {
      const std::uint32_t d = device_by_corr.find(ev.correlation[*it]);
      if (d == kNoIndex) continue;
      ++s.launches;
      const bool kernel = ev.kind[d] == EventKind::kKernel;
      if (!s.first_kernel_offset_ns || (kernel && !kernel_found)) {
        s.first_kernel_offset_ns = ev.ts_ns[d] - ev.ts_ns[*it];
        s.first_kernel_event = d;
        s.first_launch_event = *it;
        kernel_found = kernel;
      }
    }
  }
  return out;
}

}  // namespace tprof
