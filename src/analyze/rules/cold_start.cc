// cold_start: the first recorded step is much wider than the rest
// (workspace allocation, cuBLAS heuristics, lazy module loading). Evidence:
// the first step's duration, the median of the others, and where the extra
// time shows: the gap between the step's first op (the user annotation) and
// its first child, step 1 vs later steps. Origin: docs/trace-reading.md,
// "The first recorded step is much wider than the rest: cold start ... ~228
// µs gap ... versus ~4–6 µs in later steps".
// The fix depends on what ran before the recording. Steps are numbered from
// 0 (torch.profiler's and tprof::schedule's action table), so a trace whose
// first step is #1 or later already ran a step before it (the schedule's
// wait or warm-up, not recorded). With the same calls as later steps, step
// 1 is then the profiler's first active step: another warm-up step would not
// change it, so the fix is to judge by the median and the title does not say
// "cold start". With one-time calls still in it, the warm-up was too short:
// untimed iterations in the program before the profiler starts, or a wait
// step as well, in the recorder's schedule (tprof::schedule for tprof's
// captures, torch.profiler.schedule otherwise).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Need a first step and at least two others to call the rest "typical".
constexpr std::size_t kMinSteps = 3;
// "Much wider": twice the median of the other steps ...
constexpr double kWidthRatio = 2.0;
// ... and at least 100 µs more, so jitter on µs-sized steps stays quiet (the
// post's step-1 gap alone was ~228 µs; the H100 traces' first steps are
// 160–280 µs wider than the median).
constexpr std::int64_t kMinExcessNs = 100'000;

struct FirstGap {
  std::uint32_t op = kNoIndex;     // the step's first host op (usually the user annotation)
  std::uint32_t child = kNoIndex;  // its first child
  std::int64_t gap_ns = 0;
};

// The step's first host op on the step's thread and its first child. Scans
// host ops from the step start until the child is found: a few events per step.
std::optional<FirstGap> first_gap(const DiagnoseContext& c, const StepStat& st) {
  const EventColumns& ev = c.trace.events;
  const std::int64_t step_end = st.start_ns + st.dur_ns;
  auto it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), st.start_ns,
                             [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
  FirstGap g;
  for (; it != c.host_ops.end() && c.ts(*it) < step_end; ++it) {
    const std::uint32_t e = *it;
    if (e == st.event || ev.lane[e] != st.lane) continue;
    if (g.op == kNoIndex) {
      if (is_profiler_step(c.name(e))) continue;
      g.op = e;
      continue;
    }
    if (c.ts(e) >= c.end(g.op)) return std::nullopt;  // a leaf: no child to measure against
    g.child = e;
    g.gap_ns = c.ts(e) - c.ts(g.op);
    return g;
  }
  return std::nullopt;
}

}  // namespace

void rule_cold_start(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::vector<StepStat>& steps = c.steps.steps;
  if (steps.size() < kMinSteps) return;
  const StepStat& first = steps.front();
  std::vector<std::int64_t> others;
  others.reserve(steps.size() - 1);
  for (std::size_t i = 1; i < steps.size(); ++i) others.push_back(steps[i].dur_ns);
  const std::int64_t median = mean_median(others);
  const std::int64_t excess = first.dur_ns - median;
  if (median <= 0 || static_cast<double>(first.dur_ns) < kWidthRatio * static_cast<double>(median) ||
      excess < kMinExcessNs) {
    return;
  }
  // Where the steps' device work outlasts the steps (the host runs ahead of
  // a queue) and the first step's work waited in the queue longer than the
  // step's extra host time, that time delayed nothing: the queue absorbed
  // it (issue 38's eighth round: "judge this run by the median step (90.5
  // us)" on an MI300X replay whose first step's work started 9.1 ms after
  // its launch; the H100 4096 traces' first step, whose GEMM starts at its
  // launch, keeps its cold start).
  if (c.has_device() && first.first_kernel_offset_ns && *first.first_kernel_offset_ns >= excess &&
      c.gpu_busy_window().queued_ahead) {
    return;
  }

  // Runtime calls by name: in the first step, and in any later one; the
  // first step's time in each name (what the one-time calls cost it).
  std::set<StrId> in_first, in_later;
  std::map<StrId, std::int64_t> first_ns;
  for (std::uint32_t e : c.runtime) {
    const int si = c.step_index_at(c.ts(e));
    if (si < 0) continue;
    (si == 0 ? in_first : in_later).insert(c.trace.events.name[e]);
    if (si == 0) sat_acc(first_ns[c.trace.events.name[e]], c.dur(e));
  }
  std::vector<std::string> one_time;
  std::int64_t one_time_ns = 0;
  StrId costliest = 0;
  std::int64_t costliest_ns = -1;
  for (StrId n : in_first) {
    if (in_later.contains(n)) continue;
    one_time.emplace_back(c.trace.str(n));
    sat_acc(one_time_ns, first_ns[n]);
    if (first_ns[n] > costliest_ns) {
      costliest_ns = first_ns[n];
      costliest = n;
    }
  }
  std::sort(one_time.begin(), one_time.end());

  // The profiler's own buffer allocation inside the first step (issue 38's
  // seventeenth round: 1.759 ms of a 2.311 ms excess, a first step of three
  // "cuda/iteration_<n>" ranges, "look at aten::zeros").
  std::int64_t buffer_ns = 0;
  for (const std::uint32_t e : c.buffer_requests()) {
    sat_acc(buffer_ns, std::max<std::int64_t>(0, std::min(c.end(e), first.start_ns + first.dur_ns) -
                                                     std::max(c.ts(e), first.start_ns)));
  }
  const double ratio = static_cast<double>(first.dur_ns) / static_cast<double>(median);
  Finding f;
  f.id = "cold_start";
  f.severity = one_time.empty() ? FindingSeverity::kInfo : FindingSeverity::kWarning;
  char r[32];
  std::snprintf(r, sizeof r, "%.1fx", ratio);
  // Steps before the recording: #0 up to the first recorded one.
  const std::int64_t before = std::max<std::int64_t>(0, first.step);
  f.title = std::string(one_time.empty() ? "Slow first step" : "Cold start") + ": step " + std::to_string(first.step) +
            " took " + format_ns(first.dur_ns) + ", " + r +
            " the median of the other steps (" + format_ns(median) + ")";
  f.title += one_time.empty() ? "; the same calls as later steps, only slower"
                              : "; one-time calls: " + one_time.front() +
                                    (one_time.size() > 1 ? " and " + std::to_string(one_time.size() - 1) + " more" : "");
  // Named where it is a tenth of the excess or more.
  if (sat_mul(10, buffer_ns) >= excess) {
    f.title += "; " + format_ns(std::min(buffer_ns, excess)) +
               " of it the profiler allocating its event buffer (Activity Buffer Request), not the program";
  }
  f.evidence.num("first_step", first.step)
      .num("first_step_ns", first.dur_ns)
      .num("median_other_steps_ns", median)
      .num("excess_ns", excess)
      .real("ratio", ratio)
      .num("other_steps", static_cast<std::int64_t>(others.size()))
      .event("first_step_event", c.ref(first.event));
  if (sat_mul(10, buffer_ns) >= excess) f.evidence.num("profiler_buffer_ns", buffer_ns);
  if (!one_time.empty()) f.evidence.texts("one_time_calls", one_time);
  // Where the extra time shows: the first op's dispatch gap, step 1 vs the rest.
  if (const std::optional<FirstGap> g = first_gap(c, first)) {
    std::vector<std::int64_t> later;
    for (std::size_t i = 1; i < steps.size(); ++i) {
      if (const std::optional<FirstGap> h = first_gap(c, steps[i])) later.push_back(h->gap_ns);
    }
    f.evidence.text("first_op", std::string(c.name(g->op)))
        .text("first_child", std::string(c.name(g->child)))
        .num("first_step_gap_ns", g->gap_ns);
    if (!later.empty()) {
      f.evidence.num("median_later_gap_ns", upper_median(later))
          .num("min_later_gap_ns", *std::min_element(later.begin(), later.end()))
          .num("max_later_gap_ns", *std::max_element(later.begin(), later.end()));
    }
    f.evidence.event("first_op_event", c.ref(g->op)).event("first_child_event", c.ref(g->child));
  }
  f.evidence.ints("steps", {first.step});
  if (before > 0) f.evidence.num("steps_before_recording", before);
  const std::string schedule = c.schedule_call(static_cast<std::int64_t>(steps.size()));
  const std::string ran = before == 1 ? "step #0" : "steps #0 to #" + std::to_string(before - 1);
  // The program, for "its own warm-up": the process of the first step.
  std::string program;
  for (const Process& p : c.trace.processes) {
    if (p.pid == c.trace.lanes[first.lane].pid && p.name != kEmptyStr) program = std::string(c.trace.str(p.name));
  }
  if (one_time.empty() && before > 0) {
    f.advice = "Judge this run by the median step (" + format_ns(median) + "), not step " + std::to_string(first.step) +
               " (" + format_ns(excess) + " longer), the profiler's first active step: the run already had " + ran +
               " before it (the schedule's wait or warm-up, not recorded), so another warm-up step would not remove "
               "it. Step " + std::to_string(first.step) +
               " makes the same runtime calls as later steps, only slower: the one-time work happened before the "
               "recording, and what is left is the first active step's profiler start and cold caches.";
  } else if (one_time.empty()) {
    f.advice = "Judge this run by the median step (" + format_ns(median) + "), not step " + std::to_string(first.step) +
               " (" + format_ns(excess) + " longer); to keep it out of the recording, add a warm-up step (" + schedule +
               "). The first step makes the same runtime calls as the others, only slower, so the one-time work "
               "happened before the recording and what is left is the profiler's first active step and cold caches.";
  } else if (before > 0) {
    // A warm-up step ran and the one-time work is still here: the program's
    // second call allocates again (a pool growing to two live outputs), or
    // the warm-up step was the profiler's wait, with nothing run before it.
    f.evidence.num("one_time_calls_ns", one_time_ns);
    f.advice = "Warm up longer (" + ran + " already ran before the recording): run a few untimed iterations" +
               (program.empty() ? std::string() : " in " + program) + " before the profiler starts, or add a wait step (" +
               schedule + "). Step " + std::to_string(first.step) + " still loses " + format_ns(excess) +
               " to one-time setup, " + format_ns(one_time_ns) +
               " of it in calls no later step makes (" + std::string(c.trace.str(costliest)) + " " +
               format_ns(costliest_ns) +
               (one_time.size() > 1 ? ", and " + std::to_string(one_time.size() - 1) + " more" : "") +
               "). Allocation, cuBLAS/cuDNN heuristics and lazy module loading run on the first calls that need them.";
  } else {
    f.evidence.num("one_time_calls_ns", one_time_ns);
    f.advice = "Run at least one warm-up iteration before the profiled steps (" + schedule + "): step " +
               std::to_string(first.step) + " loses " + format_ns(excess) + " to one-time setup, " +
               format_ns(one_time_ns) + " of it in calls no later step makes (" + std::string(c.trace.str(costliest)) +
               " " + format_ns(costliest_ns) + (one_time.size() > 1 ? ", and " + std::to_string(one_time.size() - 1) + " more" : "") +
               "). Workspace allocation, cuBLAS/cuDNN heuristics and lazy module loading run once, on the first call.";
  }
  // The host running ahead of a queue: the steps' spans are its queueing,
  // not the run's time, so "judge by the median step" would judge by the
  // wrong clock, and the first step's extra host time hides behind the
  // queue but for its start (issue 38's twenty-third round: the blog's 1024
  // fp32 matmul_add on an A100, its steps 74.7 us of host time each where
  // the GPU takes ~178 us, told to judge the run by the 74.2 us median).
  // What the device waits for is the first step's host time before its
  // first launch, beyond the later steps' (the blog's 4096 runs: 228 us of
  // cuBLAS warm-up before the first op, all of it a wait); the rest hides
  // behind the queue.
  if (one_time.empty() && c.has_device() && c.gpu_busy_window().queued_ahead) {
    std::vector<std::int64_t> lead(steps.size(), -1);  // per step: its first launch after its start
    for (const DeviceOp& op : c.device) {
      if (op.launch == kNoIndex || op.step < 0 || static_cast<std::size_t>(op.step) >= steps.size()) continue;
      std::int64_t& l = lead[static_cast<std::size_t>(op.step)];
      const std::int64_t d = sat_sub(c.ts(op.launch), steps[static_cast<std::size_t>(op.step)].start_ns);
      if (d >= 0 && (l < 0 || d < l)) l = d;
    }
    std::vector<std::int64_t> later_lead;
    for (std::size_t i = 1; i < lead.size(); ++i)
      if (lead[i] >= 0) later_lead.push_back(lead[i]);
    const std::int64_t delayed =
        lead[0] >= 0 && !later_lead.empty() ? std::max<std::int64_t>(0, sat_sub(lead[0], mean_median(later_lead))) : -1;
    if (delayed >= 0) {
      const bool hidden = sat_mul(2, delayed) < excess;
      f.evidence.num("first_launch_delay_ns", std::min(delayed, excess));
      f.advice = "Judge this run by its device work, not by the steps' spans: the host queues work ahead of the GPU, "
                 "so each step's span is the host's queueing time. Of step " + std::to_string(first.step) +
                 "'s extra " + format_ns(excess) + " on the host, " +
                 (hidden ? "only the " + format_ns(delayed) + " before its first launch delays the GPU; the rest hides "
                           "behind the queue"
                         : "the " + format_ns(std::min(delayed, excess)) + " before its first launch delays the GPU") +
                 ". It makes the same runtime calls as later steps, only slower" +
                 (before > 0 ? ": it is the profiler's first active step: the run already had " + ran +
                                   " before it (the schedule's wait or warm-up, not recorded), so another warm-up step "
                                   "would not remove it."
                             : " (cold caches); to keep it out of the recording, add a warm-up step (" + schedule + ").");
      if (hidden) f.evidence.num("nothing_to_act_on", 1);
    }
  }
  // Judging by the median saves nothing: the note names no saving (review
  // 2026-11-26, R2: "fix (up to 6.2 us a step)" on a fix that says another
  // warm-up step would not remove it). The excess stays in evidence.
  f.impact_ns = one_time.empty() && before > 0 ? 0 : excess;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
