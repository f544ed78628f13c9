#include "src/analyze/nesting.h"

#include <algorithm>
#include <climits>
#include <span>

#include "src/base/radix_sort.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

std::uint32_t group_of(const EventColumns& ev, std::uint32_t e) {
  return 2 * ev.lane[e] + (ev.kind[e] == EventKind::kPythonFunction ? 1 : 0);
}

std::int64_t end_of(const EventColumns& ev, std::uint32_t e) { return ev.ts_ns[e] + ev.dur_ns[e]; }

}  // namespace

Nesting build_nesting(const Trace& t) {
  const EventColumns& ev = t.events;
  const std::size_t n = ev.size();
  Nesting out;
  out.parent.assign(n, kNoIndex);
  out.child_ns.assign(n, 0);
  std::int64_t min_ts = INT64_MAX, max_end = INT64_MIN;
  for (std::uint32_t e = 0; e < n; ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    out.order.push_back(e);
    min_ts = std::min(min_ts, ev.ts_ns[e]);
    max_end = std::max(max_end, end_of(ev, e));
  }
  // Three stable radix passes, least significant key first: -end, ts, group.
  std::vector<std::uint64_t> keys(out.order.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = static_cast<std::uint64_t>(max_end - end_of(ev, out.order[i]));
  }
  radix_sort(&keys, &out.order);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<std::uint64_t>(ev.ts_ns[out.order[i]] - min_ts);
  radix_sort(&keys, &out.order);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = group_of(ev, out.order[i]);
  radix_sort(&keys, &out.order);

  const std::size_t groups = 2 * t.lanes.size();
  out.group_begin.assign(groups + 1, 0);
  for (std::uint32_t e : out.order) ++out.group_begin[group_of(ev, e) + 1];
  for (std::size_t g = 0; g < groups; ++g) out.group_begin[g + 1] += out.group_begin[g];

  // prof.events()'s tree (EventListBuilder::build_trees): pop what ended
  // before this event starts or ends before it does.
  std::vector<std::uint32_t> stack;
  for (std::size_t k = 0; k < out.order.size(); ++k) {
    const std::uint32_t e = out.order[k];
    if (k == 0 || group_of(ev, out.order[k - 1]) != group_of(ev, e)) stack.clear();
    while (!stack.empty()) {
      const std::uint32_t p = stack.back();
      if (ev.ts_ns[e] >= end_of(ev, p) || end_of(ev, e) > end_of(ev, p)) {
        stack.pop_back();
      } else {
        out.parent[e] = p;
        sat_acc(out.child_ns[p], ev.dur_ns[e]);
        break;
      }
    }
    stack.push_back(e);
  }
  return out;
}

namespace {

// The complete events of `lane` (its python_function frames with `python`,
// else the others), in nesting order; empty for a lane the nesting does not
// cover.
std::span<const std::uint32_t> lane_events(const Nesting& nest, std::uint32_t lane, bool python = false) {
  const std::size_t g = 2 * static_cast<std::size_t>(lane) + (python ? 1 : 0);
  if (g + 1 >= nest.group_begin.size()) return {};
  return std::span<const std::uint32_t>(nest.order).subspan(nest.group_begin[g],
                                                            nest.group_begin[g + 1] - nest.group_begin[g]);
}

}  // namespace

// The innermost event of `events` (one group, in nesting order) that holds
// [from, to] and satisfies `keep`: the last one to start at or before
// `from`, or the first of its ancestors that does (every event holding
// [from, to] is one of them: the group's events nest).
template <typename Keep>
std::uint32_t innermost_holding(const EventColumns& ev, const Nesting& nest, std::span<const std::uint32_t> events,
                                std::int64_t from, std::int64_t to, Keep keep) {
  auto it = std::upper_bound(events.begin(), events.end(), from,
                             [&](std::int64_t v, std::uint32_t e) { return v < ev.ts_ns[e]; });
  if (it == events.begin()) return kNoIndex;
  std::uint32_t e = *(it - 1);
  while (e != kNoIndex && (end_of(ev, e) < to || !keep(e))) e = nest.parent[e];
  return e;
}

std::uint32_t enclosing(const Trace& t, const Nesting& nest, std::uint32_t lane, std::int64_t at) {
  return innermost_holding(t.events, nest, lane_events(nest, lane), at, at, [](std::uint32_t) { return true; });
}

std::uint32_t enclosing_module(const Trace& t, const Nesting& nest, std::uint32_t e) {
  const EventColumns& ev = t.events;
  return innermost_holding(ev, nest, lane_events(nest, ev.lane[e], /*python=*/true), ev.ts_ns[e], end_of(ev, e),
                           [&](std::uint32_t p) { return t.str(ev.name[p]).starts_with("nn.Module: "); });
}

std::uint32_t next_slice(const Trace& t, const Nesting& nest, std::uint32_t lane, std::int64_t at) {
  const EventColumns& ev = t.events;
  const std::span<const std::uint32_t> events = lane_events(nest, lane);
  const auto first = events.begin(), last = events.end();
  auto it = std::lower_bound(first, last, at, [&](std::uint32_t e, std::int64_t v) { return ev.ts_ns[e] < v; });
  return it == last ? kNoIndex : *it;
}

std::uint32_t event_parent(const Trace& t, const Nesting& nest, std::uint32_t e) {
  const EventColumns& ev = t.events;
  const Phase ph = ev.phase[e];
  if (ph == Phase::kInstant || ph == Phase::kFlowStart || ph == Phase::kFlowStep || ph == Phase::kFlowEnd) {
    return enclosing(t, nest, ev.lane[e], ev.ts_ns[e]);
  }
  return nest.parent[e];
}

std::vector<std::uint32_t> event_parents(const Trace& t, const Nesting& nest) {
  std::vector<std::uint32_t> out(t.events.size());
  for (std::uint32_t e = 0; e < out.size(); ++e) out[e] = event_parent(t, nest, e);
  return out;
}

std::vector<std::int32_t> event_depths(const Trace& t, const Nesting& nest, const std::vector<std::uint32_t>& parents) {
  const std::size_t n = t.events.size();
  std::vector<std::int32_t> depth(n, 0);
  // A complete event's parent comes before it in nest.order (it was on the
  // stack); every other event's parent is a complete event.
  for (std::uint32_t e : nest.order) {
    if (parents[e] != kNoIndex) depth[e] = depth[parents[e]] + 1;
  }
  for (std::uint32_t e = 0; e < n; ++e) {
    if (t.events.phase[e] != Phase::kComplete && parents[e] != kNoIndex) depth[e] = depth[parents[e]] + 1;
  }
  return depth;
}

}  // namespace tprof::internal
