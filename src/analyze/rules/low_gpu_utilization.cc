// low_gpu_utilization: the TensorBoard plugin's "GPU N has low utilization"
// recommendation (kineto tb_plugin/torch_tb_profiler/profiler/data.py,
// _analyze_gpu_metrics; the number from gpu_metrics_parser.py): per device,
// the union of its kernels inside the steps' span, divided by that span.
// A whole-run recording (no steps) whose unrecorded idle time lies mostly
// before and after its device phase is the process's start-up and exit, not
// host work to record: its fix is to record only that phase (tprof record
// --nvtx-range). The phase is the range that holds the measured work where
// one user annotation does (measured_range: "measure"), else the first
// kernel to the end of the last device activity (a buffer's memset right
// after cudaMalloc is set-up too).
// An excerpt (steps whose events, host and device, span at most
// kExcerptSpan of the window, with at least kExcerptUnrecorded of the idle
// time unrecorded, and nothing recorded for kExcerptSpan of the window both
// before and after them: the tb_plugin resnet50 sample keeps 2.5 ms from the
// middle of a 122 ms step) shows no utilization to judge: info, no saving,
// and the fix is a recording of the whole step, not "record the host's
// work". A step whose events open it and then stop (HTA's triton_example:
// 1.5 ms of a 13.3 s step, then Triton compiling) is the program's idle.
// Host work before the first device activity is set-up by its place only
// when the stack (with_stack) does not name it as something else
// (host_stack.h): a video preprocess inside the recorded step is input
// preparation, whose fix is DataLoader workers or precomputing it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A whole run's device phase is a cold pass when its one-time set-up
// reaches this and the device work in it.
constexpr std::int64_t kMinColdSetUpNs = 1'000'000;

// Earlier findings that claim all but this share of the idle time leave
// this one the rest: info, their fixes first.
constexpr double kMostClaimed = 0.10;
// With the DataLoader's wait the larger part, half is enough (issue 38's
// thirteenth round: an MLP's loader wait held 85% of its idle GPU and this
// finding still told the host to launch bigger ops, "the host is launching").
constexpr double kMostClaimedByLoader = 0.5;
// What they leave in the steps, under this share of the window, gets no
// fix of its own; nor, under kUnrecordedSliverShare, a rest mostly
// unrecorded, which no fix can name (issue 38's twentieth round: a lecture
// toy's 176 ms left of 5.8 s, mostly CUDA's unrecorded start-up, was a
// third numbered finding restating the verdict).
constexpr double kSliverShare = 0.01;
constexpr double kUnrecordedSliverShare = 0.05;
// An op called this often, each call at least half as long as the one
// holding the longest host-work stretch, is the loop's work, not set-up.
constexpr std::int64_t kMinRecurringCalls = 3;

// An id as words: "host_work" -> "host work".
std::string words(std::string_view id) {
  std::string s(id);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// The plugin recommends a larger batch when utilization < 0.5 (data.py).
constexpr double kLowUtilization = 0.5;
// A whole run's start-up and exit: at least this much unrecorded idle before
// and after the device phase (a process's start-up is tens to hundreds of ms;
// Kineto's docs sample idles 280 ns in all).
constexpr std::int64_t kMinStartupExitNs = 1'000'000;
constexpr double kExcerptSpan = 0.10;
constexpr double kExcerptUnrecorded = 0.90;

struct Gap {
  std::int64_t ns = 0;
  std::uint32_t before = kNoIndex;  // the activity whose end opens the gap
  std::uint32_t after = kNoIndex;   // the activity that closes it
};

// The longest stretch inside [lo, hi) where `device` ran no kernel, with the
// kernels on either side (one pass over activities sorted by start).
Gap longest_gap(const DiagnoseContext& c, std::int32_t device, std::int64_t lo, std::int64_t hi) {
  Gap best;
  std::int64_t busy_until = lo;
  std::uint32_t last = kNoIndex;
  for (const DeviceOp& op : c.device) {
    if (op.device != device || c.kind(op.event) != EventKind::kKernel) continue;
    if (op.start >= hi) break;
    if (op.end <= lo) continue;
    if (op.start > busy_until && op.start - busy_until > best.ns) best = {op.start - busy_until, last, op.event};
    if (op.end > busy_until) {
      busy_until = op.end;
      last = op.event;
    }
  }
  if (hi > busy_until && hi - busy_until > best.ns) best = {hi - busy_until, last, kNoIndex};
  return best;
}

// The host's own pace in [lo, hi): the union of the ops and runtime calls
// on the threads that launch device work (not the step annotations around
// them), each thread's gaps under 100 µs between them counted as its
// Python, less the time those threads sit in runtime calls of 50 µs or
// more (syncs and copies waiting for the GPU, which a faster GPU shortens).
// However fast the device, the steps take at least this.
std::int64_t host_pace_ns(const DiagnoseContext& c, std::int64_t lo, std::int64_t hi) {
  constexpr std::int64_t kBlockedNs = 50'000;
  constexpr std::int64_t kInterpreterGapNs = 100'000;
  const std::size_t lanes = c.trace.lanes.size();
  std::vector<std::uint8_t> launching(lanes, 0);
  for (const DeviceOp& op : c.device)
    if (op.launch != kNoIndex) launching[c.trace.events.lane[op.launch]] = 1;
  std::vector<std::vector<Interval>> per_lane(lanes);
  std::vector<Interval> blocked;
  auto clip = [&](std::uint32_t e, std::vector<Interval>* v) {
    const std::int64_t a = std::max(c.ts(e), lo), b = std::min(c.end(e), hi);
    if (a < b) v->push_back({a, b});
  };
  for (std::uint32_t e : c.host_ops) {
    const std::uint32_t lane = c.trace.events.lane[e];
    const EventKind k = c.kind(e);
    if (!launching[lane] || k == EventKind::kPythonFunction) continue;
    if (k == EventKind::kUserAnnotation && is_profiler_step(c.name(e))) continue;
    clip(e, &per_lane[lane]);
  }
  for (std::uint32_t e : c.runtime) {
    const std::uint32_t lane = c.trace.events.lane[e];
    if (!launching[lane]) continue;
    clip(e, &per_lane[lane]);
    if (c.dur(e) >= kBlockedNs) clip(e, &blocked);
  }
  std::vector<Interval> busy;
  for (std::vector<Interval>& v : per_lane) {
    const std::size_t first = busy.size();
    for (const Interval& iv : merge_intervals(std::move(v))) {
      if (busy.size() > first && iv.start - busy.back().end < kInterpreterGapNs) {
        busy.back().end = std::max(busy.back().end, iv.end);
      } else {
        busy.push_back(iv);
      }
    }
  }
  return std::max<std::int64_t>(0, union_length(subtract(merge_intervals(std::move(busy)), merge_intervals(std::move(blocked)))));
}

}  // namespace

void rule_low_gpu_utilization(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // The plugin's span runs from the first step's start to the last step's
  // end, stretched to the end of device work the steps launched; without
  // steps it is the whole trace.
  std::int64_t lo = c.start_ns, hi = c.end_ns;
  const auto& steps = c.steps.steps;
  // A cold first step is cold_start's and the blocking calls': the steady
  // state is the steps after it.
  const bool skip_first = c.cold_first_step();
  if (!steps.empty()) {
    lo = (skip_first ? steps[1] : steps.front()).start_ns;
    hi = 0;
    for (const StepStat& s : steps) hi = std::max(hi, s.start_ns + s.dur_ns);
    for (const DeviceOp& op : c.device) {
      if (op.step >= 0) hi = std::max(hi, op.end);
    }
  }
  // A trace that opens on launched work queued behind work it does not
  // hold is judged from its first device activity, as the verdict is.
  const Interval lead = c.queued_lead();
  const bool from_first = steps.empty() && lead.end > lead.start;
  if (from_first) lo = lead.end;
  if (hi <= lo) return;
  std::map<std::int32_t, std::vector<Interval>> per_device, any_per_device;
  for (const DeviceOp& op : c.device) {
    if (c.kind(op.event) == EventKind::kKernel) per_device[op.device].push_back({op.start, op.end});
    any_per_device[op.device].push_back({op.start, op.end});
  }
  struct Low {
    std::int32_t device;
    std::int64_t busy;
  };
  std::vector<Low> low;
  std::vector<std::string> per_device_text;
  for (auto& [device, iv] : per_device) {
    const std::int64_t busy = covered_within(merge_intervals(std::move(iv)), lo, hi);
    const double util = static_cast<double>(busy) / static_cast<double>(hi - lo);
    per_device_text.push_back("gpu " + std::to_string(device) + ": " + format_pct(100.0 * util));
    // Copies and memsets that keep the device busy are not idle time to
    // launch into: the plugin's kernel-only figure would call a copy-bound
    // step's PCIe time idle (issue 38's eleventh round: "the GPU runs each
    // launch faster than the host makes the next" for steps 78% copying).
    // The copy-bound verdict and the copy rules speak for them.
    const std::int64_t any_busy = covered_within(merge_intervals(std::move(any_per_device[device])), lo, hi);
    if (static_cast<double>(any_busy) >= kLowUtilization * static_cast<double>(hi - lo)) continue;
    if (util < kLowUtilization) low.push_back({device, busy});
  }
  if (low.empty()) return;
  const Low worst = *std::min_element(low.begin(), low.end(), [](const Low& a, const Low& b) { return a.busy < b.busy; });
  const std::int64_t window = hi - lo;
  const double util = 100.0 * static_cast<double>(worst.busy) / static_cast<double>(window);
  std::vector<std::int64_t> devices;
  for (const Low& l : low) devices.push_back(l.device);

  Finding f;
  f.id = "low_gpu_utilization";
  f.severity = FindingSeverity::kWarning;
  f.title = "GPU " + std::to_string(worst.device) + " runs kernels " + format_pct(util) + " of the " +
            (skip_first     ? std::string("steps' span after the first (a cold start)")
             : !steps.empty() ? std::string("steps' span")
             : from_first   ? std::string("trace from its first device activity")
                            : std::string("trace")) +
            " (" + format_ns(window) + ")";
  // Collectives count as running while they wait for their peers: where
  // they hold most of the kernel time, the title says so (issue 38's
  // fourteenth round: a DDP rank's "runs kernels 47.0%", 96% of it an
  // all-reduce waiting for the other rank, its compute 4.4%).
  std::vector<Interval> comm;
  for (const DeviceOp& op : c.device) {
    if (op.device == worst.device && op.cls == DeviceClass::kComm) comm.push_back({op.start, op.end});
  }
  const std::int64_t comm_busy = covered_within(merge_intervals(std::move(comm)), lo, hi);
  if (worst.busy > 0 && 2 * comm_busy >= worst.busy) {
    f.title += ", " + format_pct(100.0 * static_cast<double>(comm_busy) / static_cast<double>(worst.busy)) +
               " of it collectives (busy while they wait for peers)";
    f.evidence.num("comm_kernel_busy_ns", comm_busy);
  }
  f.evidence.num("device", worst.device)
      .real("utilization_pct", util)
      .num("kernel_busy_ns", worst.busy)
      .num("window_ns", window)
      .num("window_start_ns", lo)
      .num("idle_ns", window - worst.busy)
      .real("threshold_pct", 100.0 * kLowUtilization)
      .ints("low_devices", devices)
      .texts("per_device", per_device_text);
  // Where the idle time goes: the partition's causes over the window, and
  // the claim: what no earlier finding accounts for, of the causes shared
  // between rules (the blocked_* and profiler causes stay with their rules).
  const IdlePartition& p = c.idle();
  std::vector<std::string> by_cause;
  for (int k = 0; k < kIdleCauseCount; ++k) {
    const std::int64_t ns = p.totals()[static_cast<std::size_t>(k)];
    if (ns > 0) {
      by_cause.push_back(std::string(idle_cause_id(static_cast<IdleCause>(k))) + " " + format_ns(ns) + " (" +
                         format_pct(100.0 * static_cast<double>(ns) / static_cast<double>(std::max<std::int64_t>(1, p.idle_ns()))) + ")");
    }
  }
  // DataLoader scopes: their idle time is dataloader_bound's (the input
  // wait), not claimed here too.
  const std::vector<Interval>& loader = c.dataloader_scopes();
  const bool has_loader = !loader.empty();
  // The idle time inside them: dataloader_bound's, whose fix comes first;
  // the workers' start-up before the first batch aside, once and no reason
  // to put the loop's own idle second (issue 38's sixteenth round: a
  // training loop's 26.7 ms of forking workers made its launch overhead
  // "their fixes come first").
  std::int64_t loader_idle_ns = 0;
  if (has_loader) {
    const Interval s = c.dataloader_startup();
    const std::vector<Interval> paced = s.end > s.start ? subtract(loader, {s}) : loader;
    for (const std::int64_t v : idle_by_cause(p, paced)) sat_acc(loader_idle_ns, v);
  }
  std::vector<Interval> candidate = {{from_first || skip_first ? lo : std::min(c.start_ns, p.window().start), std::max(c.end_ns, p.window().end)}};
  if (has_loader) candidate = subtract(candidate, loader);
  set_idle_claim(f, claimable_idle(p, kAllCauses & ~kReservedCauses, &candidate, *out));
  // Nothing left to claim outside DataLoader waits and the other findings:
  // they say it.
  if (has_loader && f.idle_ns == 0) return;
  f.evidence.num("gpu_idle_ns", p.idle_ns()).texts("idle_by_cause", by_cause).num("idle_claimed_ns", f.idle_ns);
  const Gap gap = longest_gap(c, worst.device, lo, hi);
  if (gap.ns > 0) {
    f.evidence.num("longest_gap_ns", gap.ns);
    if (gap.before != kNoIndex) f.evidence.event("gap_start_kernel", c.ref(gap.before));
    if (gap.after != kNoIndex) f.evidence.event("gap_end_kernel", c.ref(gap.after));
  }
  // The fix for the cause holding the most of the idle time.
  // it accounts for (its claim; the whole partition when earlier findings
  // took all of it, whose fixes then come first).
  std::vector<Interval> claimed;
  for (const TimeRange& r : f.idle_claim) claimed.push_back({r.start_ns, r.end_ns});
  IdlePartition::Totals in_steps = claimed.empty() ? p.totals() : idle_by_cause(p, claimed);
  in_steps[static_cast<std::size_t>(IdleCause::kOutsideSteps)] = 0;
  const IdleCause top = dominant_cause(in_steps);
  const double top_pct = 100.0 * static_cast<double>(p.totals()[static_cast<std::size_t>(top)]) /
                         static_cast<double>(std::max<std::int64_t>(1, p.idle_ns()));
  f.evidence.text("idle_cause", std::string(idle_cause_id(top)));
  f.advice = idle_remedy(top, c) + " That cause holds " + format_pct(top_pct) + " of the GPU's idle time (" +
             format_ns(p.idle_ns()) + ").";
  // Host work in a trace without a DataLoader that is set-up, not input
  // loading: before the first device activity (model and tensor creation,
  // the first allocation), or anywhere in a trace without steps (a
  // benchmark's harness between its timed parts). Record only the timed
  // iterations.
  // The idle time the fix below removes, where it addresses one part of
  // the claim (set-up host work): its saving, not the whole claim (issue
  // 38's ninth round: "record only the timed iterations" credited with a
  // cold ResNet-18's 5.7 ms of launch gaps, which stay after warm-up).
  std::int64_t advised_ns = -1;
  if (top == IdleCause::kHostWork && !has_loader && !c.device.empty()) {
    const std::int64_t first = c.device.front().start;
    const std::int64_t host_work = in_steps[static_cast<std::size_t>(IdleCause::kHostWork)];
    std::vector<Interval> before;
    for (const Interval& r : claimed) {
      if (r.start < first) before.push_back({r.start, std::min(r.end, first)});
    }
    const std::int64_t setup = idle_by_cause(p, before)[static_cast<std::size_t>(IdleCause::kHostWork)];
    // Host work that comes back in the steps after the first device
    // activity, as long, is per step, wherever the first falls (issue 38's
    // seventh round: a torch.randn on the CPU in each of two steps, the
    // first before any device work, called set-up).
    std::vector<std::int64_t> later;
    for (std::size_t i = 0; i < c.steps.steps.size(); ++i) {
      if (c.steps.steps[i].start_ns >= first) later.push_back(p.step_totals(i)[static_cast<std::size_t>(IdleCause::kHostWork)]);
    }
    const bool recurs = !later.empty() && sat_add(mean_median(later), mean_median(later)) >= setup;
    const bool before_first = host_work > 0 && sat_mul(2, setup) >= host_work && !recurs;
    if (before_first || (steps.empty() && host_work > 0)) {
      // Where: the longest host-work idle span (before the first activity,
      // or anywhere), and the op holding most of it with the op inside
      // that holding most.
      Interval span{0, 0};
      for (const Interval& r : p.ranges(cause_bit(IdleCause::kHostWork), lo, before_first ? first : hi)) {
        if (r.end - r.start > span.end - span.start) span = r;
      }
      auto overlap = [&](std::uint32_t e) {
        return std::max<std::int64_t>(0, std::min(c.end(e), span.end) - std::max(c.ts(e), span.start));
      };
      std::uint32_t outer = kNoIndex, inner = kNoIndex;
      for (std::uint32_t e : c.host_ops) {
        if (c.kind(e) != EventKind::kCpuOp || overlap(e) == 0) continue;
        if (outer == kNoIndex || overlap(e) > overlap(outer) ||
            (overlap(e) == overlap(outer) && c.dur(e) > c.dur(outer)))
          outer = e;
      }
      if (outer != kNoIndex) {
        for (std::uint32_t e : c.host_ops) {
          if (e == outer || c.kind(e) != EventKind::kCpuOp || c.ts(e) < c.ts(outer) || c.end(e) > c.end(outer) ||
              overlap(e) == 0)
            continue;
          if (inner == kNoIndex || overlap(e) > overlap(inner)) inner = e;
        }
      }
      // Calls of the same op at least half as long: the loop's own work
      // where there are kMinRecurringCalls of them.
      std::int64_t recurring_calls = 0, recurring_median = 0;
      if (outer != kNoIndex) {
        std::vector<std::int64_t> durs;
        for (std::uint32_t e : c.host_ops) {
          if (c.kind(e) == EventKind::kCpuOp && c.trace.events.name[e] == c.trace.events.name[outer] &&
              sat_mul(2, c.dur(e)) >= c.dur(outer)) {
            durs.push_back(c.dur(e));
          }
        }
        recurring_calls = static_cast<std::int64_t>(durs.size());
        recurring_median = mean_median(std::move(durs));
      }
      std::string what;
      if (outer != kNoIndex) {
        what = " (longest " + format_ns(span.end - span.start) + " in " + std::string(c.name(outer)) +
               (inner != kNoIndex ? " > " + std::string(c.name(inner)) : std::string()) + ")";
        f.evidence.event("setup_op", c.ref(outer));
      }
      const std::int64_t ns = before_first ? setup : host_work;
      f.evidence.num("setup_host_work_ns", ns);
      advised_ns = ns;
      const std::string where =
          before_first ? std::string(", before the first device activity") : std::string(", in a trace without steps");
      const std::string share = " That cause holds " + format_pct(top_pct) + " of the GPU's idle time (" +
                                format_ns(p.idle_ns()) + ").";
      // The stack's name for the longest stretch, on the thread that
      // launches the GPU's work: what it is decides the fix, not where it
      // lies (a video preprocess inside the recorded step is no set-up).
      const HostFrame hf = host_frame(c, launching_lane(c), {span});
      if (hf.found() && (!hf.annotation || hf.kind != HostWorkKind::kOther)) {
        f.evidence.text("host_frame", hf.name)
            .num("host_frame_ns", hf.held_ns)
            .text("host_work_kind", host_work_kind_id(hf.kind))
            .event("host_frame_event", c.ref(hf.event));
      }
      const std::string longest = "longest " + format_ns(span.end - span.start);
      if (hf.found() && hf.kind != HostWorkKind::kOther) {
        f.advice = host_frame_remedy(c, hf) + " That is host work that launches nothing, " + format_ns(ns) +
                   " of the idle time" + where + " (" + longest + ": " + host_frame_text(hf) + ")." + share;
      } else if (hf.found() && !hf.annotation) {
        f.advice = format_ns(ns) + " of the idle time is host work that launches nothing" + where + " (" + longest +
                   "), most of it in " + host_frame_text(hf) +
                   ": if it runs once (set-up), record only the timed iterations (start the profiler after it, or give "
                   "the schedule wait and warmup steps); if it runs every step, move it out of the step or overlap it "
                   "with device work." + share;
      } else if (recurring_calls >= kMinRecurringCalls) {
        // The op holding it runs again and again, as long: the loop's own
        // host work, its first call before any device work (issue 38's
        // fifteenth round: GPU MODE lecture 1's torch.randn on the CPU, 10
        // draws of 470 ms, the first called "set-up, not per-step input").
        f.evidence.num("recurring_calls", recurring_calls);
        std::int64_t claimed_before = 0;
        for (const Finding& e : *out) sat_acc(claimed_before, e.idle_ns);
        // Its fix is theirs: nothing of its own to act on.
        if (claimed_before > 0) f.evidence.num("nothing_to_act_on", 1);
        f.advice = std::string(c.name(outer)) + " holds the longest of it (" + format_ns(span.end - span.start) +
                   ") and runs " + std::to_string(recurring_calls) + " times, as long (a median of " +
                   format_ns(recurring_median) + "), launching nothing: the loop's own host work, not set-up, " +
                   format_ns(ns) + " of the idle time" + where + "; " +
                   (claimed_before > 0 ? std::string("the other findings' fixes remove it")
                                       : std::string("move it out of the loop or overlap it with device work")) +
                   "." + share;
      } else {
        // Named by its place alone (an annotation of no known kind, such as
        // a benchmark's "[param|cuda]", says no more than the ops do): set-up,
        // unless the stack (when there is none) would say otherwise.
        const bool ask = !has_python_stack(c) && note_no_stack(c, *out, f);
        f.advice = "Record only the timed iterations (start the profiler after set-up, or give the schedule wait and "
                   "warmup steps): " +
                   format_ns(ns) + " of the idle time is host work that launches nothing" + where + what +
                   ", with no DataLoader in the trace: set-up, not per-step input" +
                   (ask ? " (by its place: the trace records no Python stack to name it, with_stack=True would)"
                        : std::string()) +
                   "." + share;
      }
    }
  }
  // A whole run recorded (no steps): the unrecorded idle before the first
  // device activity is start-up (imports, context creation, data set-up)
  // and after the last one exit (teardown, the profiler's flush), around a
  // device phase that may be a few ms of a trace of hundreds.
  bool whole_run = false;
  if (top == IdleCause::kUnrecorded && steps.empty() && !c.device.empty()) {
    const std::uint32_t range = measured_range(c, 0, 0);
    std::int64_t first = -1, last = 0;
    if (range != kNoIndex) {
      first = c.ts(range);
      last = c.end(range);
    } else {
      for (const DeviceOp& op : c.device) {
        if (first < 0 && c.kind(op.event) != EventKind::kGpuMemset) first = op.start;
        last = std::max(last, op.end);
      }
      if (first < 0) first = c.device.front().start;
    }
    std::int64_t startup = 0, exit = 0;
    for (const Interval& r : claimed) {
      sat_acc(startup, std::max<std::int64_t>(0, sat_sub(std::min(r.end, first), r.start)));
      sat_acc(exit, std::max<std::int64_t>(0, sat_sub(r.end, std::max(r.start, last))));
    }
    const std::int64_t outside = sat_add(startup, exit);
    // The span before the device phase mostly claimed by earlier findings
    // is their work, not start-up (issue 38's fifteenth round: the GPU MODE
    // lecture's first CPU draw, 473 of the 571 ms before its first copy,
    // host_built_tensor's, called start-up to record around).
    std::int64_t others_before = 0;
    for (const Finding& e : *out) {
      for (const TimeRange& r : e.idle_claim) {
        sat_acc(others_before, std::max<std::int64_t>(0, sat_sub(std::min(r.end_ns, first), std::max(r.start_ns, c.start_ns))));
      }
    }
    const bool others_lead = sat_add(others_before, others_before) >= sat_sub(first, c.start_ns);
    if (!others_lead && f.idle_ns > 0 && sat_add(outside, outside) >= f.idle_ns && outside >= kMinStartupExitNs) {
      // Stated as the spans before and after the phase, which add up with
      // it to the window (issue 38's sixth round: the idle time's
      // unrecorded part before it left out the first launch's module load).
      startup = std::max<std::int64_t>(0, sat_sub(first, c.start_ns));
      exit = std::max<std::int64_t>(0, sat_sub(c.end_ns, last));
      whole_run = true;
      const std::string name = range != kNoIndex ? std::string(c.name(range)) : std::string();
      const std::string how =
          c.by_tprof() ? (name.empty() ? std::string("an NVTX range around it with tprof record --nvtx-range NAME, or --delay-ms")
                                       : "tprof record --nvtx-range " + name)
                       : "start torch.profiler after set-up and stop it before exit";
      const std::string phase =
          name.empty() ? "the device phase (" + how + "), the " + format_ns(sat_sub(last, first)) +
                             " from the first kernel or copy to the end of the last device activity"
                       : "\"" + name + "\" (" + how + "), the " + format_ns(sat_sub(last, first)) +
                             " range that holds the measured work";
      if (range != kNoIndex) f.evidence.event("measured_range", c.ref(range));
      f.evidence.num("startup_idle_ns", startup).num("exit_idle_ns", exit).num("device_phase_ns", sat_sub(last, first));
      // The phase itself still mostly idle with nothing recorded: said in
      // the first sentence (all the default view shows; issue 38's sixth
      // round: a 3.2 s phase 98.9% idle read as the place to look), what
      // to record inside it after.
      std::vector<Interval> in_phase;
      for (const Interval& r : claimed) {
        if (std::min(r.end, last) > std::max(r.start, first)) in_phase.push_back({std::max(r.start, first), std::min(r.end, last)});
      }
      const std::int64_t inside = idle_by_cause(p, in_phase)[static_cast<std::size_t>(IdleCause::kUnrecorded)];
      const bool idle_inside = sat_add(inside, inside) >= sat_sub(last, first);
      // A cold pass: one-time set-up in the phase outweighs the device
      // work it serves (issue 38's sixth round: 16.8 ms of module loading
      // and cuBLAS set-up around 62 us of kernels, never summed).
      const OneTimeSetUp setup = one_time_setup(c, first, last);
      const std::int64_t busy = c.device_busy_ns(-1, first, last);
      const bool cold = setup.total_ns() >= kMinColdSetUpNs && setup.total_ns() >= busy;
      if (cold) {
        f.evidence.num("one_time_setup_ns", setup.total_ns())
            .num("module_loading_ns", setup.module_ns)
            .num("library_setup_ns", setup.library_ns)
            .num("algorithm_tuning_ns", setup.tuning_ns)
            .num("allocator_ns", setup.alloc_ns)
            .num("phase_device_busy_ns", busy);
      }
      f.advice = "Record only " + phase + ": the " + format_ns(startup) + " before it is start-up and the " +
                 format_ns(exit) + " after it exit" +
                 (idle_inside ? "; within it the GPU still idles " + format_ns(inside) + " with nothing recorded" : std::string()) +
                 (cold ? std::string(idle_inside ? ", and" : "; within it") + " the host spends " +
                             one_time_setup_text(setup) + " against " + format_ns(busy) + " of device work" +
                             (setup.alloc_ns > 0 ? " (and " + format_ns(setup.alloc_ns) + " in allocator calls)" : "") +
                             ": a cold first pass, so run each path once before recording"
                       : std::string()) +
                 ". A whole-run recording holds the process's start-up and exit, where nothing runs on the device: no "
                 "utilization to judge there, and no run time to save by recording less.";
      if (idle_inside) {
        f.evidence.num("phase_idle_ns", inside);
        f.advice += " Within the phase: " + idle_remedy(IdleCause::kUnrecorded, c);
      }
    }
  }
  // Earlier findings took most of the idle time: their fixes come first,
  // and this one speaks for the rest, whose cause may be another (issue 38's
  // seventh round: after a host-built tensor took 97% of the idle time, the
  // 30 us left, launch gaps, got a CUDA-graph fix as a top cause).
  std::int64_t earlier = 0;
  for (const Finding& e : *out) sat_acc(earlier, e.idle_ns);
  // The DataLoader's wait counts with them: its finding comes after this
  // one in the rules' order but claims no idle time of its own.
  const bool loader_most = loader_idle_ns > earlier;
  sat_acc(earlier, loader_idle_ns);
  const double most = loader_most ? kMostClaimedByLoader : kMostClaimed;
  if (!whole_run && p.idle_ns() > 0 && static_cast<double>(f.idle_ns) < most * static_cast<double>(p.idle_ns()) &&
      static_cast<double>(earlier) >= (1.0 - most) * static_cast<double>(p.idle_ns())) {
    f.severity = FindingSeverity::kInfo;
    f.evidence.num("claimed_before_ns", earlier);
    if (loader_idle_ns > 0) f.evidence.num("dataloader_idle_ns", loader_idle_ns);
    advised_ns = -1;  // the advice below speaks for the whole rest
    // The rest inside the steps (time between steps is no step's).
    std::int64_t rest = 0;
    for (const std::int64_t v : in_steps) sat_acc(rest, v);
    const bool sliver = static_cast<double>(rest) < kSliverShare * static_cast<double>(window) ||
                        (top == IdleCause::kUnrecorded &&
                         static_cast<double>(rest) < kUnrecordedSliverShare * static_cast<double>(window));
    // Nothing of its own to fix: the default view leaves it to "Also"
    // (issue 38's fourteenth round: a lecture toy's "GPU 0 runs kernels
    // 1.1%", its fix "up to 21.7 us a step", under the host-built tensor
    // that took 1.354 s of the 1.354 s idle).
    if (sliver) f.evidence.num("nothing_to_act_on", 1);
    f.advice = (loader_most ? "The DataLoader's wait and the other findings account for "
                            : "The other findings account for ") +
               format_ns(earlier) + " of the GPU's " + format_ns(p.idle_ns()) +
               " of idle time: their fixes come first. " +
               (sliver ? "The rest in the steps (" + format_ns(rest) + ") is too little to act on."
                       : "Of the rest in the steps (" + format_ns(rest) + "), mostly " + words(idle_cause_id(top)) +
                             ": " + idle_remedy(top, c));
  }
  // What it accounts for beyond the findings before it (docs/diagnose.md,
  // "GPU idle time").
  // A whole run's fix is a narrower recording: no run time saved.
  f.impact_ns = whole_run ? 0 : f.idle_ns;
  if (advised_ns >= 0) f.impact_ns = std::min(f.impact_ns, advised_ns);
  // Launched work held on the device (nothing in the trace ahead of it):
  // letting it go saves at most what the host's own pace leaves of the
  // window (issue 38's ninth round: a DCGAN's stalls were credited 11.9 ms
  // a step where its two launching threads need about 17 of its 22 ms).
  if (!whole_run && top == IdleCause::kStreamWait && !c.dependency_visible()) {
    const std::int64_t pace = host_pace_ns(c, lo, hi);
    f.evidence.num("host_pace_ns", pace);
    f.impact_ns = std::min(f.impact_ns, std::max<std::int64_t>(0, window - pace));
  }
  // An excerpt: the events inside the window span a sliver of it.
  if (!steps.empty()) {
    std::int64_t from = hi, to = lo;
    auto span_of = [&](std::int64_t s, std::int64_t e) {
      s = std::max(s, lo);
      e = std::min(e, hi);
      if (e <= s) return;
      from = std::min(from, s);
      to = std::max(to, e);
    };
    for (std::uint32_t e : c.host_ops) {
      if (!is_profiler_step(c.name(e))) span_of(c.ts(e), c.end(e));
    }
    for (std::uint32_t e : c.runtime) span_of(c.ts(e), c.end(e));
    for (const DeviceOp& op : c.device) span_of(op.start, op.end);
    const std::int64_t recorded = std::max<std::int64_t>(0, sat_sub(to, from));
    const std::int64_t unrecorded = p.totals()[static_cast<std::size_t>(IdleCause::kUnrecorded)];
    const double edge = kExcerptSpan * static_cast<double>(window);
    if (static_cast<double>(recorded) <= kExcerptSpan * static_cast<double>(window) &&
        static_cast<double>(sat_sub(from, lo)) >= edge && static_cast<double>(sat_sub(hi, to)) >= edge &&
        static_cast<double>(unrecorded) >= kExcerptUnrecorded * static_cast<double>(p.idle_ns())) {
      const bool one = steps.size() == 1;
      f.severity = FindingSeverity::kInfo;
      f.title = "GPU " + std::to_string(worst.device) + ": the " + (one ? "step holds" : "steps hold") +
                " device work for " + format_ns(worst.busy) + " of " + format_ns(window) +
                " and no events for the rest: utilization can't be judged";
      f.evidence.num("recorded_span_ns", recorded).num("unrecorded_idle_ns", unrecorded);
      f.advice = "Judge utilization on a recording that holds the whole " + std::string(one ? "step" : "steps") +
                 ": its events span " + format_ns(recorded) + " in the middle of " + format_ns(window) +
                 ", with nothing recorded on host or device before or after them (an excerpt cut from a longer trace, "
                 "or a recording that lost its events), so the idle time there is not the program's.";
      f.impact_ns = 0;  // no saving to claim from what was not recorded
    }
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
