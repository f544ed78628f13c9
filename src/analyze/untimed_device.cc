#include "src/analyze/untimed_device.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "src/base/saturate.h"
#include "src/trace/id_index.h"
#include "src/trace/select.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kUntimedLeadNs = 1'000'000'000;  // 1 s

}  // namespace

RetimedTrace retime_untimed_device(const Trace& t) {
  RetimedTrace out;
  const EventColumns& ev = t.events;
  const std::uint32_t n = static_cast<std::uint32_t>(ev.size());
  // The file's ts 0: its baseTimeNanoseconds where it has one.
  const std::int64_t zero = t.meta.base_time_ns.value_or(0);
  // One cheap pass first: most traces have no activity at ts 0, and stop
  // here without building anything.
  bool any_zero = false;
  for (std::uint32_t e = 0; e < n && !any_zero; ++e) {
    any_zero = ev.ts_ns[e] == zero && ev.phase[e] == Phase::kComplete && is_device_work(ev.kind[e]);
  }
  if (!any_zero) return RetimedTrace{};
  // A PrivateUse1 backend's launch calls ("privateuse1_runtime", kOther to
  // the reader: IBM Spyre's aiuLaunchControlBlocks) place its activities too.
  const std::optional<StrId> pu1_runtime = t.strings.find("privateuse1_runtime");
  std::int64_t first_host = std::numeric_limits<std::int64_t>::max();
  std::vector<std::pair<std::int64_t, std::uint32_t>> launch_corr;
  for (std::uint32_t e = 0; e < n; ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const EventKind k = ev.kind[e];
    if (!is_device_work(k) && t.lanes[ev.lane[e]].kind == LaneKind::kCpu) {
      first_host = std::min(first_host, ev.ts_ns[e]);
      if ((k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver || k == EventKind::kCudaSync ||
           (k == EventKind::kOther && pu1_runtime.has_value() && ev.cat[e] == *pu1_runtime)) &&
          ev.correlation[e] >= 0) {
        launch_corr.emplace_back(ev.correlation[e], e);
      }
    }
  }
  if (first_host == std::numeric_limits<std::int64_t>::max() || first_host - zero < kUntimedLeadNs) {
    return RetimedTrace{};
  }
  const IdIndex launch_by_corr(std::move(launch_corr));
  // Per stream lane: (when it can start, event, untimed) in that order.
  struct Item {
    std::int64_t key;
    std::uint32_t event;
    bool untimed;
  };
  std::vector<std::vector<Item>> by_lane(t.lanes.size());
  std::int64_t untimed = 0;
  for (std::uint32_t e = 0; e < n; ++e) {
    if (ev.phase[e] != Phase::kComplete || !is_device_work(ev.kind[e])) continue;
    std::uint32_t launch = kNoIndex;
    if (ev.ts_ns[e] == zero && ev.correlation[e] >= 0) launch = launch_by_corr.find(ev.correlation[e]);
    if (launch != kNoIndex && ev.ts_ns[launch] - zero >= kUntimedLeadNs) {
      by_lane[ev.lane[e]].push_back({ev.ts_ns[launch], e, true});
      ++untimed;
    } else {
      by_lane[ev.lane[e]].push_back({ev.ts_ns[e], e, false});
    }
  }
  if (untimed == 0) return RetimedTrace{};
  std::vector<std::uint8_t> keep(n, 1);
  Trace copy = select_events(t, keep);
  for (std::vector<Item>& items : by_lane) {
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.key < b.key; });
    std::int64_t free_at = std::numeric_limits<std::int64_t>::min();
    for (const Item& it : items) {
      const std::int64_t dur = std::max<std::int64_t>(0, ev.dur_ns[it.event]);
      const std::int64_t start = it.untimed ? std::max(it.key, free_at) : ev.ts_ns[it.event];
      if (it.untimed) {
        copy.events.ts_ns[it.event] = start;
        if (out.first == kNoIndex || start < copy.events.ts_ns[out.first]) out.first = it.event;
      }
      free_at = std::max(free_at, sat_add(start, dur));
    }
  }
  // Their flow ends (ac2g, "f" at ts 0 on the activity's lane) move with
  // them: a flow event stamped ts 0 on a placed activity's lane, with its
  // correlation id, takes the activity's new start.
  std::vector<std::pair<std::int64_t, std::uint32_t>> placed_corr;
  std::vector<std::uint8_t> placed_lane(t.lanes.size(), 0);
  for (const std::vector<Item>& items : by_lane) {
    for (const Item& it : items) {
      if (!it.untimed) continue;
      placed_corr.emplace_back(ev.correlation[it.event], it.event);
      placed_lane[ev.lane[it.event]] = 1;
    }
  }
  const IdIndex placed_by_corr(std::move(placed_corr));
  for (std::uint32_t e = 0; e < n; ++e) {
    const Phase p = ev.phase[e];
    if ((p != Phase::kFlowStart && p != Phase::kFlowStep && p != Phase::kFlowEnd) || ev.ts_ns[e] != zero ||
        !placed_lane[ev.lane[e]] || ev.flow_id[e] < 0) {
      continue;
    }
    const std::uint32_t a = placed_by_corr.find(ev.flow_id[e]);
    if (a != kNoIndex) copy.events.ts_ns[e] = copy.events.ts_ns[a];
  }
  out.untimed = untimed;
  out.lead_ns = first_host - zero;
  out.trace = std::make_unique<const Trace>(std::move(copy));
  return out;
}

}  // namespace tprof::internal
