#include "tprof/steps.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "src/analyze/intervals.h"

namespace tprof {

namespace {

bool is_host_activity(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kPythonFunction ||
         k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver;
}

bool is_device_work(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kGpuMemcpy || k == EventKind::kGpuMemset;
}

}  // namespace

StepsSummary compute_steps(const Trace& t) {
  StepsSummary out;
  out.trace_start_ns = t.start_ns();
  const EventColumns& ev = t.events;
  constexpr std::string_view kPrefix = "ProfilerStep#";

  std::vector<internal::Interval> device;
  std::unordered_map<std::int64_t, std::uint32_t> device_by_corr;
  std::vector<std::uint32_t> launches;  // runtime calls, by ts
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const EventKind k = ev.kind[e];
    if (is_device_work(k)) {
      device.push_back({ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
      if (ev.correlation[e] >= 0) device_by_corr.try_emplace(ev.correlation[e], e);
    } else if ((k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) && ev.correlation[e] >= 0) {
      // Launches come from the runtime (cudaLaunchKernel) and from the driver
      // (cuLaunchKernel, category cuda_driver: Triton and cuBLAS's CUTLASS
      // GEMMs in torch 2.x traces).
      launches.push_back(e);
    } else if (t.name(e).rfind(kPrefix, 0) == 0 && t.lanes[ev.lane[e]].kind == LaneKind::kCpu) {
      StepStat s;
      std::string_view num = t.name(e).substr(kPrefix.size());
      std::from_chars(num.data(), num.data() + num.size(), s.step);
      s.event = e;
      s.lane = ev.lane[e];
      s.start_ns = ev.ts_ns[e];
      s.dur_ns = ev.dur_ns[e];
      out.steps.push_back(s);
    }
  }
  out.has_device = !device.empty();
  const std::vector<internal::Interval> device_union = internal::merge_intervals(std::move(device));
  std::sort(launches.begin(), launches.end(), [&](std::uint32_t a, std::uint32_t b) {
    return ev.ts_ns[a] != ev.ts_ns[b] ? ev.ts_ns[a] < ev.ts_ns[b] : a < b;
  });
  std::sort(out.steps.begin(), out.steps.end(), [](const StepStat& a, const StepStat& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.event < b.event;
  });

  // Host activity per lane, merged once.
  std::unordered_map<std::uint32_t, std::vector<internal::Interval>> host;
  for (const StepStat& s : out.steps) host.try_emplace(s.lane);
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete || !is_host_activity(ev.kind[e])) continue;
    auto it = host.find(ev.lane[e]);
    if (it == host.end() || t.name(e).rfind(kPrefix, 0) == 0) continue;
    it->second.push_back({ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
  }
  for (auto& [lane, v] : host) v = internal::merge_intervals(std::move(v));

  for (StepStat& s : out.steps) {
    const std::int64_t end = s.start_ns + s.dur_ns;
    s.cpu_busy_ns = internal::covered_within(host[s.lane], s.start_ns, end);
    s.gpu_busy_ns = internal::covered_within(device_union, s.start_ns, end);
    s.gpu_idle_pct = s.dur_ns > 0 ? 100.0 * (1.0 - static_cast<double>(s.gpu_busy_ns) / static_cast<double>(s.dur_ns))
                                  : 0.0;
    auto it = std::lower_bound(launches.begin(), launches.end(), s.start_ns,
                               [&](std::uint32_t e, std::int64_t ts) { return ev.ts_ns[e] < ts; });
    for (; it != launches.end() && ev.ts_ns[*it] < end; ++it) {
      auto d = device_by_corr.find(ev.correlation[*it]);
      if (d == device_by_corr.end()) continue;
      ++s.launches;
      if (!s.first_kernel_offset_ns) {
        s.first_kernel_offset_ns = ev.ts_ns[d->second] - ev.ts_ns[*it];
        s.first_kernel_event = d->second;
        s.first_launch_event = *it;
      }
    }
  }
  return out;
}

}  // namespace tprof
