#include "src/analyze/legacy_spans.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/base/saturate.h"
#include "src/causal/names.h"

namespace tprof::internal {

bool LegacySpans::device_behind(std::int64_t span_ns) const {
  if (!any()) return false;
  const bool late_most = linked > 0 && 2 * late > linked;
  const bool tail = span_ns > 0 && 4 * sat_sub(device_end_ns, host_end_ns) >= span_ns;
  return late_most || tail;
}

LegacySpans compute_legacy_spans(const DiagnoseContext& c) {
  LegacySpans s;
  if (!c.device.empty()) return s;
  const Trace& t = c.trace;
  if (!t.strings.find("CUDA functions")) return s;
  const EventColumns& ev = t.events;
  std::vector<std::uint32_t> spans;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.kind[e] != EventKind::kGpuUserAnnotation || ev.phase[e] != Phase::kComplete) continue;
    const Lane& lane = t.lanes[ev.lane[e]];
    if (lane.kind != LaneKind::kGpu || !lane.pid.is_str || t.strings.str(lane.pid.str) != "CUDA functions") continue;
    spans.push_back(e);
  }
  if (spans.empty()) return s;
  std::sort(spans.begin(), spans.end(), [&](std::uint32_t a, std::uint32_t b) {
    return c.ts(a) != c.ts(b) ? c.ts(a) < c.ts(b) : c.dur(a) > c.dur(b);
  });
  s.spans = static_cast<std::int64_t>(spans.size());
  std::vector<Interval> all;
  // Each span's own time (its duration less its children's), by op name:
  // where the device time goes (a convolution's span holds its input's
  // contiguous copy, whose own time is small).
  std::vector<std::int64_t> self(spans.size());
  std::vector<std::size_t> open;  // indices into spans
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const std::uint32_t e = spans[i];
    all.push_back({c.ts(e), c.end(e)});
    s.device_end_ns = std::max(s.device_end_ns, c.end(e));
    while (!open.empty() && c.end(spans[open.back()]) <= c.ts(e)) open.pop_back();
    self[i] = c.dur(e);
    if (!open.empty()) self[open.back()] = sat_sub(self[open.back()], c.dur(e));
    open.push_back(i);
  }
  std::map<StrId, std::pair<std::int64_t, std::int64_t>> by_name;  // name -> (own time, calls)
  std::map<StrId, std::uint32_t> example;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    auto& [ns, calls] = by_name[ev.name[spans[i]]];
    sat_acc(ns, std::max<std::int64_t>(0, self[i]));
    ++calls;
    example.try_emplace(ev.name[spans[i]], spans[i]);
  }
  s.covered_ns = total_length(merge_intervals(std::move(all)));
  for (const auto& [name, v] : by_name) {
    // A collective's span mirrors the host's wait for its peers, not work
    // the device was given (cpu_collectives).
    if (v.first > s.busiest_ns && !is_host_collective(t.strings.str(name))) {
      s.busiest_ns = v.first;
      s.busiest_calls = v.second;
      s.busiest = example[name];
    }
  }
  for (std::uint32_t e : c.host_ops) s.host_end_ns = std::max(s.host_end_ns, c.end(e));
  // cpu_to_cuda flows: the start at the op's call, the end at its span.
  if (const auto cat = t.strings.find("cpu_to_cuda")) {
    std::unordered_map<std::int64_t, std::int64_t> start_of;
    for (std::uint32_t e = 0; e < ev.size(); ++e) {
      if (ev.cat[e] == *cat && ev.phase[e] == Phase::kFlowStart) start_of[ev.flow_id[e]] = c.ts(e);
    }
    std::vector<std::int64_t> offsets;
    for (std::uint32_t e = 0; e < ev.size(); ++e) {
      if (ev.cat[e] != *cat || ev.phase[e] != Phase::kFlowEnd) continue;
      const auto it = start_of.find(ev.flow_id[e]);
      if (it == start_of.end()) continue;
      const std::int64_t off = std::max<std::int64_t>(0, sat_sub(c.ts(e), it->second));
      offsets.push_back(off);
      if (off >= kLegacyLateNs) ++s.late;
    }
    s.linked = static_cast<std::int64_t>(offsets.size());
    s.median_offset_ns = upper_median(std::move(offsets));
  }
  return s;
}

}  // namespace tprof::internal
