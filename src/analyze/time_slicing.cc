// DiagnoseContext::time_slicing: a device that starts launched work only
// in bursts at a fixed period (docs/diagnose.md, device_time_sliced).
// Origin: issue 38's nineteenth round: a Megatron TP2 rank on a V100 ran
// its work in bursts 2.48 ms apart, 22 waits of 2.1-2.4 ms (82% of its
// step) with launched work waiting, a lone host-to-device copy on an
// otherwise empty device included.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// A time slice is milliseconds (the driver's default slice is about 2 ms);
// shorter waits are launch latency, not another context's turn.
constexpr std::int64_t kMinWaitNs = 500'000;
constexpr std::size_t kMinWaits = 8;
// A fixed period: a dependency's waits vary with the work waited on.
constexpr double kRegularTolerance = 0.10;
constexpr double kRegularShare = 0.75;
constexpr double kMinShare = 0.20;

struct Wait {
  Interval iv;        // from the later of the gap's start and the launch's return to the activity's start
  std::size_t after;  // index into device of the activity that ends it
};

}  // namespace

const std::vector<DiagnoseContext::TimeSlicing>& DiagnoseContext::time_slicing() const {
  std::call_once(time_slicing_once_, [&] {
    const std::int64_t span = window_ns();
    if (span <= 0 || device.empty()) return;
    const Interval w = idle().window();
    // Per device: its activities by start (device is), the end of the work
    // so far, and the waits where all of it had ended.
    std::map<std::int32_t, std::vector<Wait>> waits;
    std::map<std::int32_t, std::int64_t> busy_until;
    for (std::size_t i = 0; i < device.size(); ++i) {
      const DeviceOp& op = device[i];
      auto [it, fresh] = busy_until.try_emplace(op.device, op.end);
      if (fresh) continue;
      // The part of the idle gap after its launch call had returned: work
      // queued on an idle device, not started.
      if (op.launch != kNoIndex && op.start > it->second) {
        const Interval wait{std::max(it->second, end(op.launch)), op.start};
        if (wait.end - wait.start >= kMinWaitNs && wait.start >= w.start && wait.end <= w.end) {
          waits[op.device].push_back({wait, i});
        }
      }
      it->second = std::max(it->second, op.end);
    }
    for (const auto& [dev, g] : waits) {
      if (g.size() < kMinWaits) continue;
      std::vector<std::int64_t> ns;
      for (const Wait& x : g) ns.push_back(x.iv.end - x.iv.start);
      const std::int64_t med = lower_median(ns);
      std::vector<const Wait*> regular;
      for (const Wait& x : g) {
        const double d = static_cast<double>(x.iv.end - x.iv.start);
        if (std::abs(d - static_cast<double>(med)) <= kRegularTolerance * static_cast<double>(med)) regular.push_back(&x);
      }
      if (static_cast<double>(regular.size()) < kRegularShare * static_cast<double>(g.size()) ||
          regular.size() < kMinWaits) {
        continue;
      }
      TimeSlicing t;
      t.device = dev;
      t.waits_all = g.size();
      t.median_ns = med;
      t.min_ns = INT64_MAX;
      const Wait* witness = nullptr;  // a regular wait ended by work that waits on no peer
      for (const Wait* x : regular) {
        const std::int64_t d = x->iv.end - x->iv.start;
        sat_acc(t.total_ns, d);
        t.min_ns = std::min(t.min_ns, d);
        t.max_ns = std::max(t.max_ns, d);
        t.waits.push_back(x->iv);
        if (witness == nullptr && device[x->after].cls != DeviceClass::kComm) witness = x;
      }
      if (witness == nullptr || static_cast<double>(t.total_ns) < kMinShare * static_cast<double>(span)) continue;
      t.witness = witness->after;
      // The period: from one burst's start to the next, over the regular waits.
      std::vector<std::int64_t> periods;
      for (std::size_t i = 1; i < regular.size(); ++i) periods.push_back(regular[i]->iv.end - regular[i - 1]->iv.end);
      t.period_ns = periods.empty() ? 0 : lower_median(periods);
      time_slicing_.push_back(std::move(t));
    }
  });
  return time_slicing_;
}

}  // namespace tprof::internal
