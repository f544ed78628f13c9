#include "tprof/sweep.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/intervals.h"
#include "src/base/check.h"
#include "src/base/saturate.h"
#include "tprof/diagnose.h"
#include "tprof/steps.h"

namespace tprof {

namespace {

bool is_host_op(EventKind k) { return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation; }

// Per step (by start), the time in leaf host ops of the step's thread: a
// stack per lane over the ops sorted by (start, longer first); an op with a
// child nested in it is not a leaf.
std::vector<std::int64_t> leaf_time_per_step(const Trace& t, const StepsSummary& steps) {
  const EventColumns& ev = t.events;
  std::vector<std::uint32_t> ops;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete || !is_host_op(ev.kind[e])) continue;
    if (t.name(e).starts_with("ProfilerStep#")) continue;
    ops.push_back(e);
  }
  std::sort(ops.begin(), ops.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (ev.lane[a] != ev.lane[b]) return ev.lane[a] < ev.lane[b];
    if (ev.ts_ns[a] != ev.ts_ns[b]) return ev.ts_ns[a] < ev.ts_ns[b];
    return ev.dur_ns[a] > ev.dur_ns[b];
  });
  std::vector<std::uint8_t> has_child(ev.size(), 0);
  std::vector<std::uint32_t> stack;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::uint32_t e = ops[i];
    if (i > 0 && ev.lane[ops[i - 1]] != ev.lane[e]) stack.clear();
    const std::int64_t end = internal::sat_add(ev.ts_ns[e], ev.dur_ns[e]);
    while (!stack.empty() && internal::sat_add(ev.ts_ns[stack.back()], ev.dur_ns[stack.back()]) < end) stack.pop_back();
    if (!stack.empty()) has_child[stack.back()] = 1;
    stack.push_back(e);
  }
  std::vector<std::int64_t> out(std::max<std::size_t>(1, steps.steps.size()), 0);
  for (const std::uint32_t e : ops) {
    if (has_child[e]) continue;
    std::size_t step = 0;
    if (!steps.steps.empty()) {
      // The step whose span holds the op's start, on any thread (ops of a
      // worker thread count in the step that ran them).
      auto it = std::upper_bound(steps.steps.begin(), steps.steps.end(), ev.ts_ns[e],
                                 [](std::int64_t v, const StepStat& s) { return v < s.start_ns; });
      if (it == steps.steps.begin()) continue;
      --it;
      if (ev.ts_ns[e] >= internal::sat_add(it->start_ns, it->dur_ns)) continue;
      step = static_cast<std::size_t>(it - steps.steps.begin());
    }
    internal::sat_acc(out[step], ev.dur_ns[e]);
  }
  return out;
}

// Per step, from diagnose's own step view (the context's steps and the
// device activities it attributed to them by their launch calls, and the
// device work per step judge() measured), so sweep and diagnose cannot
// disagree about what a step launched:
//   work  the union of the device activity the step launched (StepVerdict::gpu_work_ns);
//   step  from the step's start, or the previous step's completion when that
//         is later, to its completion: the later of its ProfilerStep's end and
//         the end of the last device activity it launched. A loop that does
//         not synchronize (torch's, matmul_add's) leaves a GPU-bound step's
//         ProfilerStep after enqueueing its work: the span measures the host,
//         and the device's time shows only here.
void device_steps(const internal::DiagnoseContext& c, const Diagnosis& d, std::vector<std::int64_t>* step_ns,
                  std::vector<std::int64_t>* work_ns) {
  const std::vector<StepStat>& steps = c.steps.steps;
  TPROF_CHECK(d.steps.size() == steps.size());
  std::vector<std::int64_t> device_end(steps.size(), std::numeric_limits<std::int64_t>::min());
  for (const internal::DeviceOp& op : c.device) {
    if (op.step >= 0) {
      std::int64_t& end = device_end[static_cast<std::size_t>(op.step)];
      end = std::max(end, op.end);
    }
  }
  std::int64_t previous_end = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::int64_t begin = std::max(steps[i].start_ns, previous_end);
    const std::int64_t end =
        std::max({internal::sat_add(steps[i].start_ns, steps[i].dur_ns), device_end[i], previous_end});
    step_ns->push_back(std::max<std::int64_t>(0, internal::sat_sub(end, begin)));
    work_ns->push_back(d.steps[i].gpu_work_ns);
    previous_end = end;
  }
}

}  // namespace

SweepPoint sweep_point(const Trace& trace, std::int64_t size) {
  SweepPoint p;
  p.size = size;
  // The context diagnose builds, once: the verdict is diagnose's on this
  // trace, and device work per step is the step view it judged.
  const internal::DiagnoseContext c(trace, /*with_averages=*/true);
  const Diagnosis d = internal::diagnose(c);
  p.verdict = std::string(verdict_name(d.verdict));
  p.device = c.has_device();
  const StepsSummary& steps = c.steps;
  std::vector<std::int64_t> step_ns, work_ns, host_ns;
  if (steps.steps.empty()) {
    step_ns.push_back(std::max<std::int64_t>(0, internal::sat_sub(trace.end_ns(), trace.start_ns())));
    host_ns = step_ns;
    if (p.device) {
      std::vector<internal::Interval> busy;
      for (const internal::DeviceOp& op : c.device) busy.push_back({op.start, op.end});
      work_ns.push_back(internal::union_length(std::move(busy)));
    } else {
      work_ns = leaf_time_per_step(trace, steps);
    }
  } else {
    for (const StepStat& st : steps.steps) host_ns.push_back(st.dur_ns);
    if (p.device) {
      device_steps(c, d, &step_ns, &work_ns);
    } else {
      step_ns = host_ns;
      work_ns = leaf_time_per_step(trace, steps);
    }
  }
  p.steps = static_cast<std::int64_t>(step_ns.size());
  std::vector<std::int64_t> overhead(step_ns.size());
  for (std::size_t i = 0; i < step_ns.size(); ++i) overhead[i] = std::max<std::int64_t>(0, step_ns[i] - work_ns[i]);
  p.step_ns = internal::upper_median(step_ns);
  p.host_ns = internal::upper_median(std::move(host_ns));
  p.work_ns = internal::upper_median(work_ns);
  p.overhead_ns = internal::upper_median(overhead);
  // The share of each step that works, median over the steps, capped at
  // 100%: a step's device work can overlap the previous step's on another
  // stream, and leaf ops on worker threads can outlast a CPU step.
  std::vector<double> share(step_ns.size());
  for (std::size_t i = 0; i < share.size(); ++i) {
    const std::int64_t span = std::max(step_ns[i], work_ns[i]);
    share[i] = span > 0 ? 100.0 * static_cast<double>(work_ns[i]) / static_cast<double>(span) : 0;
  }
  std::sort(share.begin(), share.end());
  p.work_pct = share.empty() ? 0 : share[share.size() / 2];
  return p;
}

Sweep finish_sweep(std::vector<SweepPoint> points) {
  Sweep s;
  std::sort(points.begin(), points.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.size < b.size; });
  s.points = std::move(points);
  // The smallest size from which every point works at least half its step.
  for (std::size_t i = s.points.size(); i-- > 0;) {
    if (s.points[i].work_pct < 50.0) break;
    s.crossover_size = s.points[i].size;
  }
  return s;
}

}  // namespace tprof
