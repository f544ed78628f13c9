// sync_at_window_end: a long synchronize at the end of the profiled window
// (nothing launched after it) during which the GPU does little: the profiler
// flushing and the host waiting, not GPU work. Origin: docs/trace-reading.md,
// "A long cudaDeviceSynchronize at the end of the active window ... 1.78 ms of
// sync covering about 26 µs of GPU work — 98% idle".
// Precondition: the program's sync, not torch.profiler's: a sync inside
// torch/profiler/profiler.py's stop (the Python stack, with_stack) is the
// profiler closing its window, which no program change removes (issue 38
// review: a vLLM worker's profile() ending in profiler.stop > stop_trace >
// torch.cuda.synchronize, made the top cause); and the sync does not return
// with the end of work launched before it (then it waits for kernels,
// whatever held them back); the sync is 1% of the window or more.
#include <algorithm>
#include <climits>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// "Long": at least 100 µs (the post's was 1.78 ms; the H100 64×64 traces end
// with 13–24 µs syncs, which are not worth a finding).
constexpr std::int64_t kMinSyncNs = 100'000;
// "Covering little GPU work": the GPU idle for at least half of the sync (the
// post: 98%). A sync that waits on queued kernels (the 4096² traces: 2.3 ms
// with the GPU busy throughout) is compute-bound, not this.
constexpr double kMinIdleShare = 0.5;
// And at least this share of the window (the steps, or the trace).
constexpr double kMinWindowShare = 0.01;

// Whether a Python frame of torch.profiler's stop encloses `call` on its
// thread (a bounded walk back over the host ops, as enclosing_op).
bool in_profiler_stop(const DiagnoseContext& c, std::uint32_t call) {
  constexpr int kMaxWalk = 4096;
  return c.innermost_enclosing(c.trace.events.lane[call], c.ts(call), c.end(call), kMaxWalk, [&](std::uint32_t e) {
    if (c.kind(e) != EventKind::kPythonFunction) return false;
    const std::string_view name = c.name(e);
    return name.find("profiler/profiler.py") != std::string_view::npos &&
           (name.ends_with(": stop") || name.ends_with(": stop_trace") || name.ends_with(": __exit__"));
  }) != kNoIndex;
}

}  // namespace

void rule_sync_at_window_end(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // The last synchronizing call and the last launch (by launch time) in one
  // pass each.
  std::uint32_t sync = kNoIndex;
  for (auto it = c.runtime.rbegin(); it != c.runtime.rend(); ++it) {
    if (is_sync_call(c.name(*it))) {
      sync = *it;
      break;
    }
  }
  if (sync == kNoIndex || c.dur(sync) < kMinSyncNs) return;
  const std::int64_t lo = c.ts(sync), hi = c.end(sync);
  if (in_profiler_stop(c, sync)) return;
  std::int64_t last_launch = -1;
  std::vector<Interval> busy;
  std::uint32_t last_op = kNoIndex;
  std::int64_t queued_end = INT64_MIN;  // the end of the work launched before the sync that ran during it
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex) last_launch = std::max(last_launch, c.ts(op.launch));
    if (op.end > lo && op.start < hi) busy.push_back({std::max(op.start, lo), std::min(op.end, hi)});
    if (op.start < hi && (last_op == kNoIndex || op.end > c.end(last_op))) last_op = op.event;
    if (op.launch != kNoIndex && c.ts(op.launch) < lo && op.start >= lo) queued_end = std::max(queued_end, op.end);
  }
  // At the window's end: no device work launched after the sync began.
  if (last_launch > lo) return;
  const std::int64_t sync_ns = hi - lo;
  // The sync returns when work queued before it ends: it waits for
  // kernels, whatever held them (issue 38's ninth round: a DCGAN's final
  // sync waited 1.76 ms for 8 Adam kernels that a 2.3 ms device stall held
  // back, and was called the profiler's flush).
  if (queued_end != INT64_MIN && queued_end >= hi - std::max<std::int64_t>(kMinSyncNs / 2, sync_ns / 10)) return;
  const std::int64_t gpu_ns = union_length(std::move(busy));
  const double idle = 1.0 - static_cast<double>(gpu_ns) / static_cast<double>(sync_ns);
  if (idle < kMinIdleShare) return;
  // A sliver of the window changes no step time worth comparing (issue 38's
  // eleventh round: a vLLM decode's 100.7 us closing sync in a 317 ms window,
  // "up to 792 ns a step", was its second cause, as a warning).
  if (static_cast<double>(sync_ns) < kMinWindowShare * static_cast<double>(c.window_ns())) return;
  // After the last step (steps recorded, none holding it) it is in no step's
  // time: the cheatsheet's closing flush, to know when reading the window,
  // with nothing to save (issue 38's twenty-second round: a MetaX
  // benchmark's closing 416.6 us sync, "up to 83.3 us a step", outside its
  // five steps).
  const bool after_steps = !c.steps.steps.empty() && c.step_index_at(lo) < 0 && c.step_index_at(hi - 1) < 0;

  Finding f;
  f.id = "sync_at_window_end";
  f.severity = FindingSeverity::kWarning;
  f.title = std::string(c.name(sync)) + " at the end of the window: " + format_ns(sync_ns) + " covering " +
            format_ns(gpu_ns) + " of GPU work (" + format_pct(100.0 * idle) + " idle)";
  f.evidence.num("sync_ns", sync_ns)
      .num("gpu_busy_in_sync_ns", gpu_ns)
      .num("gpu_idle_in_sync_ns", sync_ns - gpu_ns)
      .real("gpu_idle_pct", 100.0 * idle)
      .event("sync", c.ref(sync));
  if (last_op != kNoIndex) f.evidence.event("last_device_activity", c.ref(last_op));
  const std::int64_t step = c.step_number_at(lo);
  if (step >= 0) f.evidence.ints("steps", {step});
  f.advice = "Leave the final " + std::string(c.name(sync)) + " (" + format_ns(sync_ns) +
             ") out of step-time comparisons" + (step >= 0 ? " (it ends step " + std::to_string(step) + ")" : std::string()) +
             ", and if the loop itself calls " + (c.is_torch() ? std::string("torch.cuda.synchronize()") : std::string(c.name(sync))) +
             " there, drop that call. Nothing is launched after "
             "it and the GPU runs only " + format_ns(gpu_ns) +
             " of work during it, so the host is waiting for the profiler's flush at the window's end, not for kernels.";
  f.impact_ns = sync_ns - gpu_ns;
  if (after_steps) {
    f.severity = FindingSeverity::kInfo;
    f.title += "; after the last step, in no step's time";
    f.evidence.text("nothing_to_act_on", "after the steps");
    f.advice = "Nothing to change in the steps: " + std::string(c.name(sync)) + " (" + format_ns(sync_ns) +
               ") comes after the last one, so no step's time holds it. Nothing is launched after it and the GPU runs "
               "only " + format_ns(gpu_ns) + " of work during it: the window's closing wait (the profiler's flush), "
               "which a comparison of the whole trace's span would count.";
    f.impact_ns = 0;
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
