// untimed_device: device activities recorded without a start time (ts 0,
// the host's events a second or more later; untimed_device.h). diagnose
// reads them placed after their launch calls in their streams' order, so
// busy totals and durations are the trace's own while idle gaps and
// launch → start offsets are estimates; this finding says so, once. Trace
// health. Origin: issue 38's twenty-third round (IBM Spyre: every kernel at
// ts 0, read as "the GPU idle 100.0%" of a 5,533,068 s window).
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

void rule_untimed_device(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::int64_t untimed = c.untimed_device();
  if (untimed == 0) return;
  const std::int64_t total = static_cast<std::int64_t>(c.device.size());
  const std::uint32_t first = c.untimed_first();
  Finding f;
  f.id = "untimed_device";
  f.severity = FindingSeverity::kWarning;
  f.title = std::to_string(untimed) + " of " + std::to_string(total) +
            " device activities have no start time (ts 0, " + format_ns(c.untimed_lead_ns()) +
            " before the host's first event)";
  f.evidence.num("untimed_activities", untimed).num("device_activities", total).num("lead_ns", c.untimed_lead_ns());
  if (first != kNoIndex) f.evidence.event("first_placed", c.ref(first));
  f.advice = "tprof placed each one when its launch call starts or when the work before it on its stream ends, "
             "whichever is later: device busy time and durations are the trace's, idle gaps and launch → start "
             "offsets are estimates (no earlier than the device could have started). The device's profiler "
             "(its Kineto plugin) writes durations without start times; record its start stamps to read the "
             "timeline exactly.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
