// Timeline and flame graph data for tprof report (docs/report.md).
//
// Both are reduced here, never in the page: a 100 MB trace has millions of
// events, and the page must stay a few MB. The timeline keeps per lane the
// union of its events merged at span / timeline_resolution (coarser when a
// lane would still have too many intervals), and a few named events for the
// tooltips; the flame graph keeps the call tree's large nodes only.
#include "src/report/html_views.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "src/analyze/intervals.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

using Span = std::pair<std::int64_t, std::int64_t>;

// Joins sorted intervals whose gap is at most `gap` (0: the plain union).
// Times are offsets from the trace's start, so they and their differences
// fit int64, but an offset plus a gap may not.
std::vector<Span> merge_spans(const std::vector<Span>& sorted, std::int64_t gap) {
  std::vector<Span> out;
  for (const Span& s : sorted) {
    if (!out.empty() && s.first - out.back().second <= gap) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// ⌈a / b⌉ for a >= 0, b > 0, without a + b - 1 (a may be near 2^63).
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Each host event's depth in its lane's call stack (ProfilerStep#N left
// out: the timeline draws the steps as boundaries), then the `limit`
// longest of those no deeper than max_depth, by start.
void nest_events(const DiagnoseContext& c, std::vector<std::uint32_t> events, std::int64_t origin, std::size_t limit,
                 int max_depth, TimelineLane* out) {
  if (limit == 0) return;
  std::erase_if(events, [&](std::uint32_t e) { return is_profiler_step(c.name(e)); });
  std::sort(events.begin(), events.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (c.ts(a) != c.ts(b)) return c.ts(a) < c.ts(b);
    if (c.dur(a) != c.dur(b)) return c.dur(a) > c.dur(b);
    return a < b;
  });
  struct Nested {
    std::uint32_t e;
    int depth;
  };
  std::vector<Nested> all;
  all.reserve(events.size());
  std::vector<std::int64_t> open_ends;  // the enclosing events' ends
  for (std::uint32_t e : events) {
    const std::int64_t ts = c.ts(e), end = c.end(e);
    // Pop what ended and what this event is not inside (overlap without nesting).
    while (!open_ends.empty() && (open_ends.back() <= ts || open_ends.back() < end)) open_ends.pop_back();
    const int depth = static_cast<int>(open_ends.size());
    if (depth <= max_depth) all.push_back({e, depth});
    open_ends.push_back(end);
  }
  const std::size_t n = std::min(limit, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [&](const Nested& a, const Nested& b) {
                      return c.dur(a.e) != c.dur(b.e) ? c.dur(a.e) > c.dur(b.e) : a.e < b.e;
                    });
  all.resize(n);
  std::sort(all.begin(), all.end(), [&](const Nested& a, const Nested& b) {
    return c.ts(a.e) != c.ts(b.e) ? c.ts(a.e) < c.ts(b.e) : a.depth < b.depth;
  });
  for (const Nested& x : all) {
    out->nested.push_back({c.ts(x.e) - origin, c.dur(x.e), x.depth, std::string(c.name(x.e))});
    out->max_depth = std::max(out->max_depth, x.depth);
  }
}

struct LaneEvents {
  std::uint32_t lane = 0;
  std::vector<std::uint32_t> events;
  std::int64_t busy_ns = 0;
  bool marked = false;
};

}  // namespace

std::size_t Timeline::nested_count() const {
  std::size_t n = 0;
  for (const TimelineLane& l : lanes) n += l.nested.size();
  return n;
}

std::size_t Timeline::interval_count() const {
  std::size_t n = 0;
  for (const TimelineLane& l : lanes) n += l.intervals.size();
  return n;
}

Timeline build_timeline(const DiagnoseContext& c, const Diagnosis& d, const HtmlReportOptions& options) {
  Timeline t;
  t.start_ns = c.start_ns;
  t.span_ns = std::max<std::int64_t>(1, c.end_ns - c.start_ns);
  const Trace& trace = c.trace;

  // Events per lane: host-side events on CPU lanes, device activity on GPU lanes.
  std::unordered_map<std::uint32_t, LaneEvents> by_lane;
  c.for_each_host_event([&](std::uint32_t e) {
    LaneEvents& l = by_lane[trace.events.lane[e]];
    l.lane = trace.events.lane[e];
    l.events.push_back(e);
  });
  for (const DeviceOp& op : c.device) {
    LaneEvents& l = by_lane[op.lane];
    l.lane = op.lane;
    l.events.push_back(op.event);
  }
  std::vector<LaneEvents> lanes;
  lanes.reserve(by_lane.size());
  for (auto& [lane, l] : by_lane) lanes.push_back(std::move(l));
  t.lanes_total = lanes.size();

  // The marks' lanes are kept even when they are not among the busiest.
  const std::size_t n_causes = std::min(d.causes.size(), options.max_causes);
  std::unordered_map<std::string, std::size_t> lane_by_label;
  for (std::size_t i = 0; i < lanes.size(); ++i) lane_by_label.emplace(c.lane_label(lanes[i].lane), i);
  for (std::size_t i = 0; i < n_causes; ++i) {
    if (!d.causes[i].look_at) continue;
    auto it = lane_by_label.find(d.causes[i].look_at->lane);
    if (it != lane_by_label.end()) lanes[it->second].marked = true;
  }

  // Per lane: events sorted by start, their union (busy time).
  std::vector<std::vector<Span>> unions(lanes.size());
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    std::vector<Span> spans;
    spans.reserve(lanes[i].events.size());
    for (std::uint32_t e : lanes[i].events) spans.emplace_back(c.ts(e) - t.start_ns, c.end(e) - t.start_ns);
    std::sort(spans.begin(), spans.end());
    unions[i] = merge_spans(spans, 0);
    for (const Span& s : unions[i]) lanes[i].busy_ns += s.second - s.first;
  }

  // The lanes drawn: marked first, then by busy time; shown CPU then GPU.
  std::vector<std::size_t> order(lanes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (lanes[a].marked != lanes[b].marked) return lanes[a].marked;
    if (lanes[a].busy_ns != lanes[b].busy_ns) return lanes[a].busy_ns > lanes[b].busy_ns;
    return lanes[a].lane < lanes[b].lane;
  });
  if (order.size() > options.max_timeline_lanes) order.resize(options.max_timeline_lanes);
  auto lane_key = [&](std::size_t i) {
    const Lane& l = trace.lanes[lanes[i].lane];
    const bool gpu = l.kind == LaneKind::kGpu;
    return std::tuple(gpu, gpu ? l.device : 0, gpu ? l.stream : 0, lanes[i].lane);
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lane_key(a) < lane_key(b); });

  // Each lane's share of the interval budget, at most max_lane_intervals.
  const std::size_t per_lane =
      order.empty() ? 0
                    : std::max<std::size_t>(1, std::min(options.max_lane_intervals,
                                                        options.max_timeline_intervals / order.size()));
  std::size_t cpu_drawn = 0;
  for (std::size_t i : order) cpu_drawn += trace.lanes[lanes[i].lane].kind == LaneKind::kGpu ? 0 : 1;
  const std::size_t nested_share =
      cpu_drawn == 0 ? 0 : std::min(options.max_lane_nested_events, options.max_nested_events / cpu_drawn);
  std::unordered_map<std::string, int> row_by_label;  // drawn lanes: their row
  const std::int64_t base_gap = t.span_ns / std::max(1, options.timeline_resolution);
  for (std::size_t i : order) {
    const LaneEvents& le = lanes[i];
    const Lane& lane = trace.lanes[le.lane];
    TimelineLane out;
    out.trace_lane = le.lane;
    out.label = c.lane_label(le.lane);
    out.thread_name = std::string(trace.str(lane.thread_name));
    out.gpu = lane.kind == LaneKind::kGpu;
    out.events = le.events.size();
    out.busy_ns = le.busy_ns;
    out.intervals = merge_spans(unions[i], base_gap);
    out.merge_ns = base_gap;
    if (out.intervals.size() > per_lane) {
      // Still too many: merge on a grid of per_lane cells, an interval
      // joining the previous one when it starts in the cell where that one
      // ends. Each interval then ends in a cell of its own, so at most
      // per_lane remain. (A larger gap alone would not do: evenly spaced
      // kernels merge all at once or not at all.)
      const std::int64_t cell = t.span_ns / static_cast<std::int64_t>(per_lane) + 1;
      std::vector<Span> coarse;
      for (const Span& s : out.intervals) {
        if (!coarse.empty() && s.first / cell <= (coarse.back().second - 1) / cell) {
          coarse.back().second = std::max(coarse.back().second, s.second);
        } else {
          coarse.push_back(s);
        }
      }
      out.intervals = std::move(coarse);
      out.merge_ns = std::max(base_gap, cell);
    }
    std::vector<std::uint32_t> longest = le.events;
    const std::size_t n_top = std::min(options.timeline_top_events, longest.size());
    std::partial_sort(longest.begin(), longest.begin() + static_cast<std::ptrdiff_t>(n_top), longest.end(),
                      [&](std::uint32_t a, std::uint32_t b) {
                        return c.dur(a) != c.dur(b) ? c.dur(a) > c.dur(b) : a < b;
                      });
    for (std::size_t k = 0; k < n_top; ++k) {
      const std::uint32_t e = longest[k];
      out.top.push_back({c.ts(e) - t.start_ns, c.dur(e), std::string(c.name(e))});
    }
    if (!out.gpu) nest_events(c, le.events, t.start_ns, nested_share, options.max_nest_depth, &out);
    row_by_label.emplace(out.label, static_cast<int>(t.lanes.size()));
    t.lanes.push_back(std::move(out));
  }

  for (std::size_t i = 0; i < c.steps.steps.size() && i < options.max_steps; ++i) {
    const StepStat& st = c.steps.steps[i];
    t.steps.push_back({st.step, st.start_ns - t.start_ns, st.dur_ns});
  }

  for (std::size_t i = 0; i < n_causes; ++i) {
    const Cause& cause = d.causes[i];
    if (!cause.look_at) continue;
    TimelineMark m;
    const auto it = row_by_label.find(cause.look_at->lane);
    if (it != row_by_label.end()) m.lane = it->second;
    m.ts_ns = cause.look_at->ts_ns - t.start_ns;
    m.dur_ns = cause.look_at->dur_ns;
    m.cause = i;
    m.name = cause.look_at->name;
    m.lane_label = cause.look_at->lane;
    m.title = cause.title;
    m.severity = std::string(severity_name(cause.severity));
    t.marks.push_back(std::move(m));
  }
  return t;
}

CriticalPathView build_critical_path_view(const DiagnoseContext& c, const Timeline& t,
                                          const HtmlReportOptions& options) {
  CriticalPathView v;
  // The context's model: diagnose built it already for the causes' savings.
  const CausalResult* r = &c.causal();
  if (r->graph == nullptr) {
    v.error = "the causal model could not be built";
    return v;
  }
  v.available = true;
  v.has_steps = r->has_steps;
  v.steps_total = r->steps.size();
  const CausalGraph& g = *r->graph;
  const Trace& trace = c.trace;
  std::unordered_map<std::uint32_t, int> row_of;  // trace lane → timeline row
  for (std::size_t i = 0; i < t.lanes.size(); ++i) row_of.emplace(t.lanes[i].trace_lane, static_cast<int>(i));
  bool full = true;  // every stretch so far kept
  for (std::size_t i = 0; i < r->steps.size() && i < options.max_steps; ++i) {
    const StepTime& st = r->steps[i];
    const CriticalPath& p = st.path;
    PathStep ps;
    ps.step = st.step;
    ps.start_ns = p.start_ns - t.start_ns;
    ps.length_ns = p.length_ns();
    ps.unexplained_ns = p.unexplained_ns;
    ps.bound_ns = p.bound_ns;
    for (const PathSegment& s : p.segments) {
      if (s.dur_ns <= 0) continue;
      ++ps.segments_total;
      if (v.segments.size() >= options.max_path_segments) continue;
      // The lane of the event whose time it is (a launch's and a stream
      // gap's: the device activity's stream, a sync's: the waiting call's
      // thread); host time between events: its thread.
      const std::uint32_t e = s.event != kNoIndex ? s.event : g.event_of(g.edges[s.edge].to);
      PathStretch x;
      if (e < trace.events.size()) {
        const auto it = row_of.find(trace.events.lane[e]);
        if (it != row_of.end()) x.lane = it->second;
      }
      x.start_ns = s.start_ns - t.start_ns;
      x.dur_ns = s.dur_ns;
      x.type = s.type;
      x.bound = s.bound;
      if (s.event != kNoIndex) x.name = std::string(trace.name(s.event));
      if (x.lane < 0) ++v.off_timeline;
      v.segments.push_back(std::move(x));
      ++ps.segments;
    }
    v.segments_total += ps.segments_total;
    full = full && ps.segments == ps.segments_total;
    if (full) ++v.steps_marked;
    v.steps.push_back(ps);
  }
  return v;
}

// Labels name the cause only: a step's bar holds a slice of an idle
// stretch, so a size in the label (the 1 ms that makes host work "long")
// would read as the slice's own and be false of most slices.
std::string_view idle_cause_label(IdleCause cause) {
  switch (cause) {
    case IdleCause::kLaunching: return "idle: waiting on the host to launch";
    case IdleCause::kHostWork: return "idle: host busy, not launching";
    case IdleCause::kUnrecorded: return "idle: nothing recorded on host or device";
    case IdleCause::kBlockedSync: return "idle: host blocked in a synchronize";
    case IdleCause::kBlockedCopy: return "idle: host blocked in a copy";
    case IdleCause::kBlockedAlloc: return "idle: host blocked in the allocator";
    case IdleCause::kBlockedInit: return "idle: host blocked in initialisation";
    case IdleCause::kBlockedLaunchQueue: return "idle: host blocked on a full launch queue";
    case IdleCause::kBlockedOther: return "idle: host blocked in another runtime call";
    case IdleCause::kStreamWait: return "idle: work waiting on another stream or event";
    case IdleCause::kPeers: return "idle: waiting for the other ranks";
    case IdleCause::kProfiler: return "idle: the profiler's own overhead";
    case IdleCause::kOutsideSteps: return "idle: between the host's steps";
    case IdleCause::kKernelLatency: return "idle: queued behind other work";
  }
  return "idle";
}

std::string_view idle_cause_help(IdleCause cause) {
  switch (cause) {
    case IdleCause::kLaunching:
      return "the host was inside a launch call, or in a gap under 1 ms before one: launches come too slowly";
    case IdleCause::kHostWork:
      return "the host ran recorded work and launched nothing, in a gap of 1 ms or more between launches (or "
             "after the last one); a step holds the part of the gap that falls in it";
    case IdleCause::kUnrecorded:
      return "in a gap of 1 ms or more between launches, time where neither the host nor the device recorded "
             "anything";
    case IdleCause::kBlockedSync: return "the launching thread waited in a synchronize (or a blocking copy)";
    case IdleCause::kBlockedCopy: return "the launching thread waited in an async copy that blocked (pageable memory)";
    case IdleCause::kBlockedAlloc: return "the launching thread waited in an allocator call (cudaMalloc, cudaFree, ...)";
    case IdleCause::kBlockedInit:
      return "the launching thread waited in context, module or library initialisation";
    case IdleCause::kBlockedLaunchQueue:
      return "the launching thread waited in a launch stalled by a full launch queue";
    case IdleCause::kBlockedOther: return "the launching thread waited in another runtime call that blocked";
    case IdleCause::kStreamWait:
      return "launched work had not started 50 us after its launch: it waits on another stream or an event";
    case IdleCause::kPeers: return "a launched collective had not started 50 us after its launch: the other ranks";
    case IdleCause::kProfiler: return "CUPTI asked for buffer memory (Activity Buffer Request)";
    case IdleCause::kOutsideSteps:
      return "idle time in no step's span on the host, not split by cause; on a device that runs behind the host "
             "its gaps between kernels fall here";
    case IdleCause::kKernelLatency:
      return "work launched behind still-running work started within 10 us of it: the device's own latency "
             "between kernels";
  }
  return "";
}

StepBars build_step_bars(const DiagnoseContext& c, const Diagnosis& d, const HtmlReportOptions& options) {
  StepBars b;
  b.device = c.has_device();
  const std::size_t n = std::min({d.steps.size(), c.steps.steps.size(), options.max_steps});
  // Host activity on every CPU thread (the step events themselves left out,
  // whatever their name: ProfilerStep#N or the repeated range that marks
  // the steps wraps the step, it is not work), for "any thread busy".
  std::vector<std::uint32_t> step_events;
  for (const StepStat& st : c.steps.steps) step_events.push_back(st.event);
  std::sort(step_events.begin(), step_events.end());
  std::vector<Interval> host;
  c.for_each_host_event([&](std::uint32_t e) {
    const std::uint32_t lane = c.trace.events.lane[e];
    if (lane < c.trace.lanes.size() && c.trace.lanes[lane].kind == LaneKind::kCpu && !is_profiler_step(c.name(e)) &&
        !std::binary_search(step_events.begin(), step_events.end(), e)) {
      host.push_back({c.ts(e), c.end(e)});
    }
  });
  const std::vector<Interval> host_u = merge_intervals(std::move(host));

  if (!b.device) {
    b.keys = {"cpu_busy", "cpu_idle"};
    b.labels = {"the step's thread busy", "the step's thread idle (no recorded event)"};
    b.help = {"the union of the step thread's recorded events (ops, annotations, Python functions)",
              "the rest of the step: the thread waited, or ran code nothing recorded"};
  } else {
    b.keys = {"compute", "exposed_comm", "exposed_copy"};
    b.labels = {"compute (kernels, memsets)", "communication not overlapped by compute",
                "copies not overlapped by compute or communication"};
    b.help = {"kernels and memsets that are not communication", "communication kernels while no compute ran",
              "memory copies while neither compute nor communication ran"};
    for (int k = 0; k < kIdleCauseCount; ++k) {
      b.keys.push_back("idle_" + std::string(idle_cause_id(static_cast<IdleCause>(k))));
      b.labels.emplace_back(idle_cause_label(static_cast<IdleCause>(k)));
      b.help.emplace_back(idle_cause_help(static_cast<IdleCause>(k)));
    }
    b.keys.emplace_back("idle_other");
    b.labels.emplace_back("idle: not accounted for");
    b.help.emplace_back("idle time no cause covers (none when the idle partition covers the step)");
  }

  // TraceLens' classes (breakdowns.cc, tracelens_gpu_timeline), by the
  // context's device classes: memsets count as computation.
  std::vector<Interval> comp, comm, copy;
  // The latest end of the work each step launched; the minimum until one
  // (0 is a time too: a rank's clock may run below it).
  std::vector<std::int64_t> work_end(n, std::numeric_limits<std::int64_t>::min());
  for (const DeviceOp& op : c.device) {
    const Interval iv{op.start, op.end};
    if (op.cls == DeviceClass::kComm) {
      comm.push_back(iv);
    } else if (op.cls == DeviceClass::kMemcpy) {
      copy.push_back(iv);
    } else {
      comp.push_back(iv);
    }
    if (op.step >= 0 && static_cast<std::size_t>(op.step) < n) {
      std::int64_t& e = work_end[static_cast<std::size_t>(op.step)];
      e = std::max(e, op.end);
    }
  }
  const std::vector<Interval> comp_u = merge_intervals(std::move(comp));
  const std::vector<Interval> comm_x = subtract(merge_intervals(std::move(comm)), comp_u);
  const std::vector<Interval> copy_x = subtract(subtract(merge_intervals(std::move(copy)), comp_u), comm_x);

  // The GPU idle time by cause over any stretch of the window: diagnose's
  // partition (sorted, disjoint spans) clipped to it.
  const std::vector<IdleSpan>& idle_spans = d.idle.spans;
  auto idle_within = [&](std::int64_t lo, std::int64_t hi, std::vector<std::int64_t>* parts) {
    auto it = std::upper_bound(idle_spans.begin(), idle_spans.end(), lo,
                               [](std::int64_t v, const IdleSpan& sp) { return v < sp.end_ns; });
    for (; it != idle_spans.end() && it->start_ns < hi; ++it) {
      const std::int64_t a = std::max(lo, it->start_ns), z = std::min(hi, it->end_ns);
      if (z > a) (*parts)[3 + static_cast<std::size_t>(it->cause)] += z - a;
    }
  };
  std::int64_t device_end = n > 0 ? c.steps.steps[0].start_ns : 0;
  for (std::size_t i = 0; i < n; ++i) {
    const StepVerdict& v = d.steps[i];
    const StepStat& st = c.steps.steps[i];
    StepBar bar;
    bar.step = v.step;
    bar.start_ns = st.start_ns;
    bar.dur_ns = st.dur_ns;
    bar.cpu_busy_ns = st.cpu_busy_ns;
    bar.verdict = std::string(verdict_name(v.verdict));
    const std::int64_t lo = st.start_ns, hi = sat_add(st.start_ns, st.dur_ns);
    bar.cpu_any_busy_ns = covered_within(host_u, lo, hi);
    if (!b.device) {
      bar.parts = {st.cpu_busy_ns, std::max<std::int64_t>(0, st.dur_ns - st.cpu_busy_ns)};
      bar.device_start_ns = st.start_ns;
      bar.device_dur_ns = st.dur_ns;
      bar.device_parts = bar.parts;
    } else {
      bar.parts.push_back(covered_within(comp_u, lo, hi));
      bar.parts.push_back(covered_within(comm_x, lo, hi));
      bar.parts.push_back(covered_within(copy_x, lo, hi));
      std::int64_t sum = bar.parts[0] + bar.parts[1] + bar.parts[2];
      for (const std::int64_t idle : v.idle_by_cause) {
        bar.parts.push_back(idle);
        sum = sat_add(sum, idle);
      }
      // The idle partition covers the step window exactly (idle.h), so
      // this is 0; kept so the parts always sum to the step.
      bar.parts.push_back(std::max<std::int64_t>(0, st.dur_ns - sum));
      const bool launched = work_end[i] != std::numeric_limits<std::int64_t>::min();
      bar.work_end_ns = launched ? work_end[i] : 0;
      if (launched && work_end[i] > hi) bar.lag_ns = work_end[i] - hi;

      // The step on the device (the TensorBoard plugin's _update_steps_duration):
      // consecutive, never overlapping, each as long as the device took for it.
      const std::int64_t dlo = std::max(device_end, lo), dhi = std::max({hi, work_end[i], dlo});
      device_end = dhi;
      bar.device_start_ns = dlo;
      bar.device_dur_ns = dhi - dlo;
      bar.device_parts.assign(b.keys.size(), 0);
      bar.device_parts[0] = covered_within(comp_u, dlo, dhi);
      bar.device_parts[1] = covered_within(comm_x, dlo, dhi);
      bar.device_parts[2] = covered_within(copy_x, dlo, dhi);
      idle_within(dlo, dhi, &bar.device_parts);
      // The busy classes and the idle partition tile diagnose's window, which
      // holds every step's device span: idle_other is 0, kept as above.
      std::int64_t dsum = 0;
      for (std::size_t k = 0; k + 1 < bar.device_parts.size(); ++k) dsum = sat_add(dsum, bar.device_parts[k]);
      bar.device_parts.back() = std::max<std::int64_t>(0, bar.device_dur_ns - dsum);
    }
    b.steps.push_back(std::move(bar));
  }
  return b;
}

void write_step_bars_json(JsonWriter& w, const StepBars& b) {
  w.begin_object();
  w.key("device");
  w.value_bool(b.device);
  w.key("keys");
  w.begin_array();
  for (const std::string& k : b.keys) w.value_string(k);
  w.end_array();
  w.key("labels");
  w.begin_array();
  for (const std::string& l : b.labels) w.value_string(l);
  w.end_array();
  w.key("help");
  w.begin_array();
  for (const std::string& h : b.help) w.value_string(h);
  w.end_array();
  w.end_object();
}

FlameTree build_flame_tree(const DiagnoseContext& c, const HtmlReportOptions& options) {
  FlameTree f;
  const Trace& trace = c.trace;
  // The ops and annotations of each CPU lane, by start, a parent before a
  // child that starts with it (longer first, then file order).
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> by_lane;
  for (std::uint32_t e : c.host_ops) {
    const EventKind k = c.kind(e);
    if (k == EventKind::kCpuOp || k == EventKind::kUserAnnotation) by_lane[trace.events.lane[e]].push_back(e);
  }
  std::vector<std::uint32_t> lane_ids;
  for (const auto& [lane, events] : by_lane) lane_ids.push_back(lane);
  std::sort(lane_ids.begin(), lane_ids.end());

  struct Node {
    Node(int p, std::string_view n) : parent(p), name(n) {}
    int parent;
    std::string_view name;
    std::int64_t total_ns = 0;
    std::int64_t calls = 0;
    std::vector<int> children;
  };
  std::vector<Node> nodes;
  std::vector<std::string> thread_names;  // owns the thread nodes' names
  thread_names.reserve(lane_ids.size());
  nodes.emplace_back(-1, "all threads");
  // (parent node, name id) → node; ProfilerStep#N all map to one id.
  constexpr StrId kStepName = static_cast<StrId>(-1);
  std::unordered_map<std::uint64_t, int> child_of;
  auto child = [&](int parent, StrId name_id, std::string_view name) {
    const std::uint64_t key = (static_cast<std::uint64_t>(parent) << 32) | name_id;
    auto [it, fresh] = child_of.emplace(key, static_cast<int>(nodes.size()));
    if (fresh) {
      nodes.emplace_back(parent, name);
      nodes[static_cast<std::size_t>(parent)].children.push_back(it->second);
    }
    return it->second;
  };

  for (std::uint32_t lane : lane_ids) {
    std::vector<std::uint32_t>& events = by_lane[lane];
    std::sort(events.begin(), events.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (c.ts(a) != c.ts(b)) return c.ts(a) < c.ts(b);
      if (c.dur(a) != c.dur(b)) return c.dur(a) > c.dur(b);
      return a < b;
    });
    const Lane& l = trace.lanes[lane];
    std::string label = "thread " + c.lane_label(lane).substr(4);  // drop "cpu "
    if (l.thread_name != kEmptyStr) label += " (" + std::string(trace.str(l.thread_name)) + ")";
    thread_names.push_back(std::move(label));
    const int thread = static_cast<int>(nodes.size());
    nodes.emplace_back(0, thread_names.back());
    nodes[0].children.push_back(thread);
    // The open ancestors: (end, node).
    std::vector<std::pair<std::int64_t, int>> stack;
    for (std::uint32_t e : events) {
      const std::int64_t ts = c.ts(e), end = c.end(e);
      // Pop what ended, and what this event is not inside (overlaps without nesting).
      while (!stack.empty() && (stack.back().first <= ts || stack.back().first < end)) stack.pop_back();
      const int parent = stack.empty() ? thread : stack.back().second;
      const std::string_view name = c.name(e);
      const bool step = is_profiler_step(name);
      const int n = child(parent, step ? kStepName : trace.events.name[e], step ? "ProfilerStep#*" : name);
      // Same-named calls and overlapping top-level events add up past any
      // span: the sums saturate.
      sat_acc(nodes[static_cast<std::size_t>(n)].total_ns, end - ts);
      nodes[static_cast<std::size_t>(n)].calls += 1;
      if (stack.empty()) sat_acc(nodes[static_cast<std::size_t>(thread)].total_ns, end - ts);
      stack.emplace_back(end, n);
    }
    sat_acc(nodes[0].total_ns, nodes[static_cast<std::size_t>(thread)].total_ns);
  }
  if (nodes.size() == 1) return f;  // no host ops: no tree
  f.nodes_total = nodes.size();

  // The largest nodes first (a parent is never smaller than its child, so
  // it is always taken before it); children under the threshold are left out.
  // In double, converted back only inside int64 (a saturated root's time is
  // 2^63 as a double: a fraction of 1 would keep it there).
  const double min_share = static_cast<double>(nodes[0].total_ns) * options.flame_min_fraction;
  const std::int64_t min_ns = !(min_share > 0)    ? 0
                              : min_share < 9.2e18 ? static_cast<std::int64_t>(min_share)
                                                   : std::numeric_limits<std::int64_t>::max();
  auto smaller = [&](int a, int b) {
    const std::int64_t ta = nodes[static_cast<std::size_t>(a)].total_ns;
    const std::int64_t tb = nodes[static_cast<std::size_t>(b)].total_ns;
    return ta != tb ? ta < tb : a > b;
  };
  std::priority_queue<int, std::vector<int>, decltype(smaller)> queue(smaller);
  std::vector<int> out_index(nodes.size(), -1);
  queue.push(0);
  while (!queue.empty() && f.nodes.size() < options.max_flame_nodes) {
    const int n = queue.top();
    queue.pop();
    const Node& node = nodes[static_cast<std::size_t>(n)];
    out_index[static_cast<std::size_t>(n)] = static_cast<int>(f.nodes.size());
    f.nodes.push_back({node.parent < 0 ? -1 : out_index[static_cast<std::size_t>(node.parent)], std::string(node.name),
                       node.total_ns, node.calls});
    for (int ch : node.children) {
      if (nodes[static_cast<std::size_t>(ch)].total_ns >= min_ns && nodes[static_cast<std::size_t>(ch)].total_ns > 0) {
        queue.push(ch);
      }
    }
  }
  return f;
}

namespace {

// Strings written once, referred to by index.
class NameTable {
 public:
  int index(const std::string& s) {
    auto [it, fresh] = index_.emplace(s, static_cast<int>(names_.size()));
    if (fresh) names_.push_back(&it->first);
    return it->second;
  }
  void write(JsonWriter& w) const {
    w.begin_array();
    for (const std::string* s : names_) w.value_string(*s);
    w.end_array();
  }

 private:
  std::unordered_map<std::string, int> index_;
  std::vector<const std::string*> names_;
};

}  // namespace

void write_timeline_json(JsonWriter& w, const Timeline& t) {
  // Times in units of unit_ns (a millionth of the span, at least 1 ns), and
  // intervals as (gap since the previous end, length) pairs: small numbers,
  // so 40,000 intervals take a few hundred KB.
  const std::int64_t unit = std::max<std::int64_t>(1, ceil_div(t.span_ns, 1000000));
  NameTable names;
  w.begin_object();
  w.key("start_ns");
  w.value_int(t.start_ns);
  // Also as text: absolute ns may pass 2^53, where a JavaScript number
  // rounds; the page adds to it with BigInt for its Perfetto links.
  w.key("start_ns_text");
  w.value_string(std::to_string(t.start_ns));
  w.key("span_ns");
  w.value_int(t.span_ns);
  w.key("unit_ns");
  w.value_int(unit);
  w.key("lanes_total");
  w.value_uint(t.lanes_total);
  w.key("lanes");
  w.begin_array();
  for (const TimelineLane& l : t.lanes) {
    w.begin_object();
    w.key("label");
    w.value_string(l.label);
    w.key("thread");
    w.value_string(l.thread_name);
    w.key("gpu");
    w.value_bool(l.gpu);
    w.key("events");
    w.value_uint(l.events);
    w.key("busy_ns");
    w.value_int(l.busy_ns);
    w.key("merge_ns");
    w.value_int(l.merge_ns);
    w.key("iv");
    w.begin_array();
    std::int64_t prev = 0;
    for (const auto& [s, e] : l.intervals) {
      const std::int64_t su = std::max(prev, s / unit);
      const std::int64_t eu = std::max(su + 1, ceil_div(e, unit));  // at least one unit: visible
      w.value_int(su - prev);
      w.value_int(eu - su);
      prev = eu;
    }
    w.end_array();
    // [start, duration, name index] in units, then start and duration in
    // ns (exact, for the Perfetto link's ts and dur).
    w.key("top");
    w.begin_array();
    for (const TimelineEvent& e : l.top) {
      w.begin_array();
      w.value_int(e.start_ns / unit);
      w.value_int(ceil_div(e.dur_ns, unit));
      w.value_int(names.index(e.name));
      w.value_int(e.start_ns);
      w.value_int(e.dur_ns);
      w.end_array();
    }
    w.end_array();
    // [start ns, duration ns, name index, depth], by start.
    if (!l.gpu) {
      w.key("nest");
      w.begin_array();
      for (const NestedEvent& e : l.nested) {
        w.begin_array();
        w.value_int(e.start_ns);
        w.value_int(e.dur_ns);
        w.value_int(names.index(e.name));
        w.value_int(e.depth);
        w.end_array();
      }
      w.end_array();
      w.key("max_depth");
      w.value_int(l.max_depth);
    }
    w.end_object();
  }
  w.end_array();
  w.key("marks");
  w.begin_array();
  for (const TimelineMark& m : t.marks) {
    w.begin_object();
    w.key("lane");
    w.value_int(m.lane);
    w.key("ts_ns");
    w.value_int(m.ts_ns);
    w.key("dur_ns");
    w.value_int(m.dur_ns);
    w.key("cause");
    w.value_uint(m.cause);
    w.key("name");
    w.value_string(m.name);
    w.key("lane_label");
    w.value_string(m.lane_label);
    w.key("title");
    w.value_string(m.title);
    w.key("severity");
    w.value_string(m.severity);
    w.end_object();
  }
  w.end_array();
  // [start ns relative, duration ns, step number]
  w.key("steps");
  w.begin_array();
  for (const TimelineStep& st : t.steps) {
    w.begin_array();
    w.value_int(st.start_ns);
    w.value_int(st.dur_ns);
    w.value_int(st.step);
    w.end_array();
  }
  w.end_array();
  w.key("names");
  names.write(w);
  w.end_object();
}

void write_critical_path_json(JsonWriter& w, const CriticalPathView& v) {
  constexpr int kBounds = static_cast<int>(BoundType::kCount_);
  constexpr int kEdges = static_cast<int>(EdgeType::kCount_);
  NameTable names;
  w.begin_object();
  w.key("available");
  w.value_bool(v.available);
  w.key("error");
  w.value_string(v.error);
  w.key("has_steps");
  w.value_bool(v.has_steps);
  // HTA's bound type names and the edge types, once; the steps' bound_ns
  // and the segments' indices follow them.
  w.key("bounds");
  w.begin_array();
  for (int b = 0; b < kBounds; ++b) w.value_string(bound_type_name(static_cast<BoundType>(b)));
  w.end_array();
  w.key("edge_types");
  w.begin_array();
  for (int e = 0; e < kEdges; ++e) w.value_string(edge_type_name(static_cast<EdgeType>(e)));
  w.end_array();
  w.key("steps_total");
  w.value_uint(v.steps_total);
  w.key("steps_marked");
  w.value_uint(v.steps_marked);
  w.key("segments_total");
  w.value_uint(v.segments_total);
  w.key("off_timeline");
  w.value_uint(v.off_timeline);
  w.key("steps");
  w.begin_array();
  for (const PathStep& s : v.steps) {
    w.begin_object();
    w.key("step");
    w.value_int(s.step);
    w.key("start_ns");
    w.value_int(s.start_ns);
    w.key("length_ns");
    w.value_int(s.length_ns);
    w.key("unexplained_ns");
    w.value_int(s.unexplained_ns);
    w.key("bound_ns");
    w.begin_array();
    for (const std::int64_t ns : s.bound_ns) w.value_int(ns);
    w.end_array();
    w.key("segments");
    w.value_uint(s.segments);
    w.key("segments_total");
    w.value_uint(s.segments_total);
    w.end_object();
  }
  w.end_array();
  // [lane, gap ns since the previous segment's end (the first: since the
  // timeline's start), duration ns, edge type, bound type, name index]:
  // small numbers, the exact times summed back by the page.
  w.key("segments");
  w.begin_array();
  std::int64_t prev_end = 0;
  for (const PathStretch& x : v.segments) {
    w.begin_array();
    w.value_int(x.lane);
    w.value_int(x.start_ns - prev_end);
    w.value_int(x.dur_ns);
    w.value_int(static_cast<int>(x.type));
    w.value_int(static_cast<int>(x.bound));
    w.value_int(x.name.empty() ? -1 : names.index(x.name));
    w.end_array();
    prev_end = x.start_ns + x.dur_ns;
  }
  w.end_array();
  w.key("names");
  names.write(w);
  w.end_object();
}

void write_flame_json(JsonWriter& w, const FlameTree& f) {
  NameTable names;
  w.begin_object();
  w.key("nodes_total");
  w.value_uint(f.nodes_total);
  // [parent, name index, total ns, calls]
  w.key("nodes");
  w.begin_array();
  for (const FlameNode& n : f.nodes) {
    w.begin_array();
    w.value_int(n.parent);
    w.value_int(names.index(n.name));
    w.value_int(n.total_ns);
    w.value_int(n.calls);
    w.end_array();
  }
  w.end_array();
  w.key("names");
  names.write(w);
  w.end_object();
}

}  // namespace tprof::internal
