// device_time_sliced: the device starts launched work only in bursts at a
// fixed period, idle in between with work queued and nothing running on
// any of its streams: another context holds the GPU in time slices (another
// process on the same GPU, a shared or virtualised one), not this program.
// Origin: issue 38's nineteenth round (scoring half, after its figure): a
// Megatron TP2 rank on a V100 ran its work in bursts 2.48 ms apart, 23 gaps
// of 2.37-2.43 ms (88% of its step) with launched work waiting, a lone
// host-to-device copy on an otherwise empty device included; the other
// rank waited on this one. It was called dependency-bound ("it waits on
// other streams or ranks") and told to capture a CUDA graph.
// Precondition: DiagnoseContext::time_slicing (src/analyze/time_slicing.cc)
// finds the device's regular waits: at least 8 of 500 us or more in the
// window where the whole device is idle and the activity that ends the
// idle gap has been launched (queued, not started), at least 75% of them
// within 10% of their median (a fixed period), at least one ended by work
// that waits on no peer (not a collective), holding 20% of the window.
#include <string>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr double kWarnShare = 0.20;

}  // namespace

void rule_device_time_sliced(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::int64_t window = c.window_ns();
  for (const DiagnoseContext::TimeSlicing& t : c.time_slicing()) {
    Finding f;
    f.id = "device_time_sliced";
    const std::string gpu = "GPU " + std::to_string(t.device);
    const std::string of = c.steps.steps.empty() ? " of the trace" : " of the steps";
    f.severity = static_cast<double>(t.total_ns) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                           : FindingSeverity::kInfo;
    f.title = gpu + " starts launched work only in bursts" +
              (t.period_ns > 0 ? " about " + format_ns(t.period_ns) + " apart" : std::string()) + ": " +
              std::to_string(t.waits.size()) + " gaps of " + format_ns(t.min_ns) + " to " + format_ns(t.max_ns) + " (" +
              format_ns(t.total_ns) + ", " +
              format_pct(100.0 * static_cast<double>(t.total_ns) / static_cast<double>(window)) + of +
              ") with work queued and nothing running on it";
    const DeviceOp& w_after = c.device[t.witness];
    f.evidence.num("gaps", static_cast<std::int64_t>(t.waits.size()))
        .num("gaps_all", static_cast<std::int64_t>(t.waits_all))
        .num("median_gap_ns", t.median_ns)
        .num("min_gap_ns", t.min_ns)
        .num("max_gap_ns", t.max_ns)
        .num("total_gap_ns", t.total_ns)
        .num("period_ns", t.period_ns)
        .event("queued_activity", c.ref(w_after.event))
        .event("its_launch", c.ref(w_after.launch));
    set_idle_claim(f, claimable_idle(c.idle(), kAllCauses & ~kReservedCauses, &t.waits, *out));
    f.advice = "Find what else holds " + gpu + ": its launched work waits for the device's next turn, not for this "
               "program (nothing runs on any of its streams in these gaps, and " + std::string(c.name(w_after.event)) +
               ", launched into one of them, waits like the rest). Another process's context on the same GPU "
               "(nvidia-smi lists them), or a shared or virtualised GPU (MPS, vGPU, a time-shared cloud GPU), "
               "time-slices it: give the job the GPU alone. Until then every synchronize waits a slice too.";
    f.impact_ns = f.idle_ns;
    out->push_back(std::move(f));
  }
}

}  // namespace tprof::internal
