// clock_skew: the host and device clocks disagree. A device activity cannot
// start before the runtime call that launched it (same correlation id), and
// a device stream cannot run before the profiler recorded anything on the
// host; either means the CUPTI → host clock conversion drifted or the trace
// was merged from machines with different clocks. Every launch → kernel
// offset (cpu_gpu_offset, the per-step verdicts, HTA's launch delay) is then
// off by the same amount. Trace health; the evidence is the worst offset.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Ours: torch's legacy export and 2021 Kineto round to whole µs, so a
// launch and its kernel can appear up to 1 µs out of order without skew.
// Precondition: a device activity starts more than that before its launch
// call; or, in a trace where no activity is linked to its launch, the
// first device activity starts before the first host event.
constexpr std::int64_t kToleranceNs = 1'000;

}  // namespace

void rule_clock_skew(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  std::int64_t checked = 0, skewed = 0;
  std::int64_t worst_offset = 0;
  const DeviceOp* worst = nullptr;
  std::vector<std::int64_t> offsets;  // every linked activity's start − its launch call's start
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex) continue;
    ++checked;
    const std::int64_t offset = op.start - c.ts(op.launch);
    offsets.push_back(offset);
    if (offset >= -kToleranceNs) continue;
    ++skewed;
    if (offset < worst_offset) {
      worst_offset = offset;
      worst = &op;
    }
  }
  // The first device activity against the first host event.
  std::int64_t first_cpu = std::numeric_limits<std::int64_t>::max();
  const Trace& t = c.trace;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kMetadata || t.lanes[t.events.lane[e]].kind != LaneKind::kCpu) continue;
    first_cpu = std::min(first_cpu, t.events.ts_ns[e]);
  }
  const DeviceOp& first_dev = c.device.front();
  const bool has_cpu = first_cpu != std::numeric_limits<std::int64_t>::max();
  const std::int64_t lane_lead = has_cpu ? first_cpu - first_dev.start : 0;
  // Only where no launch links the clocks: with linked pairs in order, an
  // unlinked activity that starts before the host's first event is work
  // queued before the window (the profiler's warmup step left a kernel
  // running into the first active step: H200, 4096 warm eager), not skew.
  const bool device_first = lane_lead > kToleranceNs && checked == 0;
  if (skewed == 0 && !device_first) return;

  Finding f;
  f.id = "clock_skew";
  f.severity = FindingSeverity::kWarning;
  if (skewed > 0) {
    f.title = std::to_string(skewed) + " of " + std::to_string(checked) +
              " device activities start before their launch call (worst by " + format_ns(-worst_offset) + ")";
  } else {
    f.title = "device activity starts " + format_ns(lane_lead) + " before the first host event";
  }
  f.evidence.num("launches_checked", checked).num("starts_before_launch", skewed);
  if (worst != nullptr) {
    f.evidence.num("worst_offset_ns", worst_offset)
        .event("worst_activity", c.ref(worst->event))
        .event("worst_launch", c.ref(worst->launch));
  }
  if (device_first) {
    f.evidence.num("device_lead_ns", lane_lead).event("first_device_activity", c.ref(first_dev.event));
  }
  const std::int64_t skew = std::max(-worst_offset, device_first ? lane_lead : 0);
  // Most activities before their launch: the device lanes as a whole run
  // behind the host's clock by about the median offset (a B200 training
  // step: 113 of 179, median -132 us), not a few late conversions.
  std::int64_t median = 0;
  if (!offsets.empty()) {
    std::nth_element(offsets.begin(), offsets.begin() + static_cast<std::ptrdiff_t>(offsets.size() / 2), offsets.end());
    median = offsets[offsets.size() / 2];
    f.evidence.num("median_offset_ns", median);
  }
  const std::string shifted =
      median < -kToleranceNs ? "; the median activity starts " + format_ns(-median) +
                                   " before its launch, so the device lanes as a whole are shifted by about that much"
                             : std::string();
  // One process's trace: Kineto converted CUPTI's device timestamps to the
  // host clock, and the conversion is off; a merged trace: the hosts' clocks.
  const bool merged = world_size(c.trace) > 1;
  f.advice = "Read launch → kernel offsets and GPU idle gaps in this trace with " + format_ns(skew) + " of slack" +
             shifted + ". " +
             (merged ? "Align the hosts' clocks before merging traces, or read each rank's trace on its own."
                     : "Both clocks are this machine's: Kineto converts CUPTI's device timestamps to the host's clock, "
                       "and the conversion is off here (CUPTI, the driver and the PyTorch build disagree); the "
                       "durations are right, the offsets between host and device are not.") +
             " A kernel cannot start before its launch call, so the host and device timestamps are not on one clock.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
