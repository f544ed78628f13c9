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
// Precondition: on one device, at least kMinGaps waits of kMinGapNs or more
// in the window where the whole device is idle and the activity that ends
// the idle gap has been launched (from its launch call's return, or the
// gap's start, to its own start: queued, not started); at
// least kRegularShare of them within kRegularTolerance of their median (a
// fixed period: a dependency's waits vary with the work waited on); at
// least one of those ended by work that waits on no peer (not a
// collective); the regular gaps hold kMinShare of the window.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A time slice is milliseconds (the driver's default slice is about 2 ms);
// shorter gaps are launch latency, not another context's turn.
constexpr std::int64_t kMinGapNs = 500'000;
constexpr std::size_t kMinGaps = 8;
constexpr double kRegularTolerance = 0.10;
constexpr double kRegularShare = 0.75;
constexpr double kMinShare = 0.20;
constexpr double kWarnShare = 0.20;

struct Gap {
  Interval iv;        // from the later of the gap's start and the launch's return to the activity's start
  std::size_t after;  // index into c.device of the activity that ends it
};

}  // namespace

void rule_device_time_sliced(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::int64_t window = c.window_ns();
  if (window <= 0 || c.device.empty()) return;
  const Interval w = c.idle().window();
  // Per device: its activities by start (c.device is), the end of the work
  // so far, and the gaps where all of it had ended.
  std::map<std::int32_t, std::vector<Gap>> gaps;
  std::map<std::int32_t, std::int64_t> busy_until;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    auto [it, fresh] = busy_until.try_emplace(op.device, op.end);
    if (!fresh) {
      // The part of the idle gap after its launch call had returned: work
      // queued on an idle device, not started.
      if (op.launch != kNoIndex && op.start > it->second) {
        const Interval wait{std::max(it->second, c.end(op.launch)), op.start};
        if (wait.end - wait.start >= kMinGapNs && wait.start >= w.start && wait.end <= w.end) {
          gaps[op.device].push_back({wait, i});
        }
      }
      it->second = std::max(it->second, op.end);
    }
  }
  for (const auto& [dev, g] : gaps) {
    if (g.size() < kMinGaps) continue;
    std::vector<std::int64_t> ns;
    for (const Gap& x : g) ns.push_back(x.iv.end - x.iv.start);
    const std::int64_t med = lower_median(ns);
    std::vector<const Gap*> regular;
    for (const Gap& x : g) {
      const double d = static_cast<double>(x.iv.end - x.iv.start);
      if (std::abs(d - static_cast<double>(med)) <= kRegularTolerance * static_cast<double>(med)) regular.push_back(&x);
    }
    if (static_cast<double>(regular.size()) < kRegularShare * static_cast<double>(g.size()) ||
        regular.size() < kMinGaps) {
      continue;
    }
    std::int64_t total = 0, lo = INT64_MAX, hi = 0;
    const Gap* witness = nullptr;  // a regular gap ended by work that waits on no peer
    std::vector<Interval> ranges;
    for (const Gap* x : regular) {
      const std::int64_t d = x->iv.end - x->iv.start;
      sat_acc(total, d);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
      ranges.push_back(x->iv);
      const DeviceOp& after = c.device[x->after];
      if (witness == nullptr && after.cls != DeviceClass::kComm) witness = x;
    }
    if (witness == nullptr || static_cast<double>(total) < kMinShare * static_cast<double>(window)) continue;
    // The period: from one burst's start to the next, over the regular gaps.
    std::vector<std::int64_t> starts;
    for (const Gap* x : regular) starts.push_back(x->iv.end);
    std::vector<std::int64_t> periods;
    for (std::size_t i = 1; i < starts.size(); ++i) periods.push_back(starts[i] - starts[i - 1]);
    const std::int64_t period = periods.empty() ? 0 : lower_median(periods);

    Finding f;
    f.id = "device_time_sliced";
    const std::string gpu = "GPU " + std::to_string(dev);
    const std::string of = c.steps.steps.empty() ? " of the trace" : " of the steps";
    f.severity = static_cast<double>(total) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                       : FindingSeverity::kInfo;
    f.title = gpu + " starts launched work only in bursts" +
              (period > 0 ? " about " + format_ns(period) + " apart" : std::string()) + ": " +
              std::to_string(regular.size()) + " gaps of " + format_ns(lo) + " to " + format_ns(hi) + " (" +
              format_ns(total) + ", " + format_pct(100.0 * static_cast<double>(total) / static_cast<double>(window)) +
              of + ") with work queued and nothing running on it";
    const DeviceOp& w_after = c.device[witness->after];
    f.evidence.num("gaps", static_cast<std::int64_t>(regular.size()))
        .num("gaps_all", static_cast<std::int64_t>(g.size()))
        .num("median_gap_ns", med)
        .num("min_gap_ns", lo)
        .num("max_gap_ns", hi)
        .num("total_gap_ns", total)
        .num("period_ns", period)
        .event("queued_activity", c.ref(w_after.event))
        .event("its_launch", c.ref(w_after.launch));
    set_idle_claim(f, claimable_idle(c.idle(), kAllCauses & ~kReservedCauses, &ranges, *out));
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
