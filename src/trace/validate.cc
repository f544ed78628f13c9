#include "src/trace/validate.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/base/radix_sort.h"

namespace tprof::internal {

bool launches_device_work(std::string_view name) {
  // CANN (torch_npu's traces): its kernel launch "Node@launch", an aclnn
  // op's execution "AscendCL@aclnnAdd" (not its GetWorkspaceSize). An op
  // compiled at run time (AscendCL@aclopCompileAndExecute) is a blocking
  // call: its compilation is what the host waits for.
  if (name.starts_with("AscendCL@aclnn")) return !name.ends_with("GetWorkspaceSize");
  return name.find("Launch") != std::string_view::npos || name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos || name.starts_with("Node@launch");
}

namespace {

void check_overlaps(Trace* t) {
  const EventColumns& ev = t->events;
  std::vector<std::vector<std::uint32_t>> per_lane(t->lanes.size());
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (is_device_work(k) &&
        ev.phase[e] == Phase::kComplete) {
      per_lane[ev.lane[e]].push_back(e);
    }
  }
  for (auto& list : per_lane) {
    if (list.size() < 2) continue;
    sort_by_time(ev.ts_ns, &list);  // writers emit a stream in time order: usually a check only
    std::uint32_t prev = list[0];
    for (std::size_t i = 1; i < list.size(); ++i) {
      const std::uint32_t e = list[i];
      const std::int64_t prev_end = ev.ts_ns[prev] + ev.dur_ns[prev];
      if (ev.ts_ns[e] < prev_end) {
        std::string msg;
        msg.append("'").append(t->name(e)).append("' starts ").append(std::to_string(prev_end - ev.ts_ns[e]));
        msg.append(" ns before '").append(t->name(prev)).append("' ends on the same stream");
        t->diagnostics.add(DiagnosticCode::kOverlappingKernels, static_cast<std::int64_t>(ev.src_offset[e]),
                           std::move(msg), e);
      }
      if (ev.ts_ns[e] + ev.dur_ns[e] > prev_end) prev = e;
    }
  }
}

// Kineto (CUPTI and roctracer alike) writes an ac2g flow end on runtime
// calls that launch nothing (cudaFuncSetAttribute, cudaDeviceGetAttribute,
// hipGetDevicePropertiesR0600) and a flow start on cudaDeviceSynchronize or
// a zero-byte cudaMemsetAsync: one end, no partner, in complete files. A
// lone flow is expected when it sits on a CPU runtime call of its
// correlation id that has no device activity, and either the call launches
// nothing or device work launched after it was recorded (a window cut at
// the end drops the activity of the last launches only).
// An older Kineto marks as a flow start only the launch calls it knows by
// cbid: a call it cannot name (written "INVALID": cudaLaunchKernelExC,
// cbid 430) gets an end, like its kernel. Two ends and no start, on a CPU
// call and the device activity of one correlation id, are a whole link.
std::vector<std::uint32_t> drop_expected_lone_flows(const Trace& t, std::vector<std::uint32_t> lone) {
  const EventColumns& ev = t.events;
  std::vector<std::pair<std::int64_t, std::uint32_t>> calls;  // (correlation, runtime call)
  std::vector<std::int64_t> device_corr;
  std::vector<std::pair<std::int64_t, std::uint32_t>> cpu_ends;  // (flow id, lane) of every flow end on a CPU lane
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (ev.phase[e] == Phase::kFlowEnd && t.lanes[ev.lane[e]].kind == LaneKind::kCpu) {
      cpu_ends.emplace_back(ev.flow_id[e], ev.lane[e]);
    }
    if (ev.correlation[e] < 0) continue;
    if (is_device_work(k)) {
      device_corr.push_back(ev.correlation[e]);
    } else if ((k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver || k == EventKind::kCudaSync) &&
               t.lanes[ev.lane[e]].kind == LaneKind::kCpu) {
      calls.emplace_back(ev.correlation[e], e);
    }
  }
  std::sort(cpu_ends.begin(), cpu_ends.end());
  std::sort(calls.begin(), calls.end());
  std::sort(device_corr.begin(), device_corr.end());
  auto has_device = [&](std::int64_t corr) { return std::binary_search(device_corr.begin(), device_corr.end(), corr); };
  // The last launch whose device activity is in the trace.
  std::int64_t last_recorded_launch = INT64_MIN;
  for (const auto& [corr, e] : calls) {
    if (has_device(corr)) last_recorded_launch = std::max(last_recorded_launch, ev.ts_ns[e]);
  }
  std::vector<std::uint32_t> kept;
  for (std::uint32_t f : lone) {
    const std::int64_t id = ev.flow_id[f];
    auto it = std::lower_bound(calls.begin(), calls.end(), std::make_pair(id, std::uint32_t{0}));
    bool expected = false;
    for (; it != calls.end() && it->first == id && !expected; ++it) {
      const std::uint32_t call = it->second;
      expected = (ev.phase[f] == Phase::kFlowEnd && has_device(id) &&
                  std::binary_search(cpu_ends.begin(), cpu_ends.end(), std::make_pair(id, ev.lane[call]))) ||
                 (ev.lane[call] == ev.lane[f] && !has_device(id) &&
                  (!launches_device_work(t.name(call)) || ev.ts_ns[call] < last_recorded_launch));
    }
    if (!expected) kept.push_back(f);
  }
  return kept;
}

void check_flows(Trace* t) {
  const EventColumns& ev = t->events;
  struct Item {
    StrId cat;
    std::int64_t id;
    std::uint32_t event;
  };
  std::vector<Item> items;
  std::int64_t max_id = -1;
  bool plain_ids = true;  // every id is a small non-negative integer
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const Phase p = ev.phase[e];
    if (p != Phase::kFlowStart && p != Phase::kFlowEnd) continue;
    items.push_back({ev.cat[e], ev.flow_id[e], e});
    plain_ids = plain_ids && ev.flow_id[e] >= 0;
    max_id = std::max(max_id, ev.flow_id[e]);
  }
  if (items.empty()) return;
  std::vector<std::uint32_t> lone;
  bool done = false;
  if (plain_ids && max_id < static_cast<std::int64_t>(8 * items.size() + 1024)) {
    // Dense ids (correlation ids count up): one slot per (id, category).
    std::vector<StrId> cats;
    for (const Item& it : items) {
      if (std::find(cats.begin(), cats.end(), it.cat) == cats.end()) cats.push_back(it.cat);
      if (cats.size() > 8) break;
    }
    if (cats.size() <= 8) {
      const std::size_t slots = static_cast<std::size_t>(max_id + 1);
      std::vector<std::uint8_t> seen(slots * cats.size(), 0);  // bit 0: start, bit 1: end
      std::vector<std::uint32_t> first(slots * cats.size(), kNoIndex);
      for (const Item& it : items) {
        const std::size_t c = static_cast<std::size_t>(std::find(cats.begin(), cats.end(), it.cat) - cats.begin());
        const std::size_t slot = c * slots + static_cast<std::size_t>(it.id);
        seen[slot] = static_cast<std::uint8_t>(seen[slot] | (ev.phase[it.event] == Phase::kFlowStart ? 1 : 2));
        if (first[slot] == kNoIndex) first[slot] = it.event;
      }
      for (std::size_t slot = 0; slot < seen.size(); ++slot) {
        if (seen[slot] == 1 || seen[slot] == 2) lone.push_back(first[slot]);
      }
      done = true;
    }
  }
  if (!done) {
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.cat != b.cat ? a.cat < b.cat : a.id != b.id ? a.id < b.id : a.event < b.event;
    });
    for (std::size_t i = 0; i < items.size();) {
      std::size_t j = i;
      bool has_start = false, has_end = false;
      for (; j < items.size() && items[j].cat == items[i].cat && items[j].id == items[i].id; ++j) {
        (ev.phase[items[j].event] == Phase::kFlowStart ? has_start : has_end) = true;
      }
      if (!has_start || !has_end) lone.push_back(items[i].event);
      i = j;
    }
  }
  std::sort(lone.begin(), lone.end());
  if (plain_ids) lone = drop_expected_lone_flows(*t, std::move(lone));
  for (std::uint32_t e : lone) {
    const bool is_start = ev.phase[e] == Phase::kFlowStart;
    t->diagnostics.add(DiagnosticCode::kUnmatchedFlow, static_cast<std::int64_t>(ev.src_offset[e]),
                       std::string("flow ") + (is_start ? "start" : "end") + " id " + std::to_string(ev.flow_id[e]) +
                           " (" + std::string(t->cat(e)) + ") has no " + (is_start ? "end" : "start"),
                       e);
  }
}

}  // namespace

void check_trace(Trace* trace) {
  check_overlaps(trace);
  check_flows(trace);
}

}  // namespace tprof::internal
