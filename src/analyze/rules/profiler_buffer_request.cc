// profiler_buffer_request: Kineto's "Activity Buffer Request" (a CUPTI
// overhead record: category "overhead", written with pid -1 / tid 0, shown
// next to the GPU lanes) is the profiler allocating its own event buffer. The
// first one explains the initial CPU→GPU lane offset; one inside a step
// explains a gap between kernels that appears only once. Cheatsheet:
// "'Activity Buffer Request' on the GPU lane: the profiler allocating its own
// event buffer; the first one explains the initial CPU→GPU lane offset (~2.5
// ms in the post with wait=0, warmup=0). A gap between two kernels inside one
// step that appears only once in 20 steps is another buffer request."
#include <algorithm>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A request that ends this close before the first launch call held that
// call up: CUPTI asks for its first buffer on the thread whose CUDA call
// needs one, and the call starts once it returns (issue 38's sixth round:
// 2.725 ms ending 7.6 us before a speech model's first cudaLaunchKernel,
// "profiler 8.8%" of the idle time with no finding).
constexpr std::int64_t kHeldUpNs = 100'000;
// Requests listed as events in the evidence (the count stays exact).
constexpr std::size_t kMaxListed = 10;

}  // namespace

void rule_profiler_buffer_request(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::vector<std::uint32_t>& reqs = c.buffer_requests();
  if (reqs.empty()) return;

  // The device's idle gaps, all streams together: prefix max of activity
  // ends over c.device (by start) gives, for each activity, the end of the
  // busy time before it.
  std::vector<std::int64_t> busy_until(c.device.size());
  std::int64_t m = INT64_MIN;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    busy_until[i] = m;
    m = std::max(m, c.device[i].end);
  }
  // The first launch call: a request before the first device activity
  // delays it only while work is already launched (one that ends long
  // before, at a whole run's start-up, delays nothing).
  std::int64_t first_launch_ts = INT64_MAX;
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex) first_launch_ts = std::min(first_launch_ts, c.ts(op.launch));
  }
  std::int64_t total = 0, explained_gap_ns = 0, before_first = 0;
  std::vector<std::int64_t> steps, gaps;
  std::vector<EventRef> refs;
  for (std::uint32_t e : reqs) {
    sat_acc(total, c.dur(e));
    const std::int64_t s = c.step_number_at(c.ts(e));
    if (s >= 0 && std::find(steps.begin(), steps.end(), s) == steps.end()) steps.push_back(s);
    if (refs.size() < kMaxListed) refs.push_back(c.ref(e));
    // The first device activity starting at or after the request.
    auto it = std::lower_bound(c.device.begin(), c.device.end(), c.ts(e),
                               [](const DeviceOp& op, std::int64_t v) { return op.start < v; });
    if (it == c.device.end()) continue;
    const std::size_t i = static_cast<std::size_t>(it - c.device.begin());
    if (i == 0) {
      if (first_launch_ts == INT64_MAX || sat_add(c.end(e), kHeldUpNs) > first_launch_ts) ++before_first;
      continue;
    }
    // A request overlapping idle device time explains that gap, unless the
    // work after it was queued before the device went idle and the gap is
    // no longer than the device's own latency between kernels (issue 38's
    // eleventh round: a vLLM decode 84 ms ahead had its 1 us gaps between
    // queued kernels put on two requests; the blog's one-off gap in a step
    // is hundreds of microseconds).
    const bool queued = it->launch != kNoIndex && c.end(it->launch) <= busy_until[i] &&
                        sat_sub(it->start, busy_until[i]) <= kKernelLatencyNs;
    if (!queued && busy_until[i] < c.end(e) && busy_until[i] < it->start) {
      const std::int64_t gap = it->start - busy_until[i];
      sat_acc(explained_gap_ns, gap);
      gaps.push_back(gap);
    }
  }

  // The initial lane offset: the first-launched device activity's start
  // minus its launch call's.
  std::int64_t initial_offset = -1;
  std::uint32_t first_kernel = kNoIndex, first_launch = kNoIndex;
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex || (first_launch != kNoIndex && c.ts(op.launch) >= c.ts(first_launch))) continue;
    initial_offset = op.start - c.ts(op.launch);
    first_kernel = op.event;
    first_launch = op.launch;
  }

  Finding f;
  f.id = "profiler_buffer_request";
  // The GPU time it costs: the partition's profiler time (device idle while
  // a request runs, inside the steps), which only this rule claims.
  if (c.has_device()) set_idle_claim(f, claimable_idle(c.idle(), cause_bit(IdleCause::kProfiler), nullptr, *out));
  // A request that precedes no device work, overlaps no device gap and holds
  // no idle time in the steps (the end-of-window flush, after the last
  // kernel) delays nothing: nothing to say, and wait/warmup would not move it.
  // Without steps the window is the whole trace: device idle time under a
  // request that neither delays the first kernel nor sits in a gap between
  // kernels is a program with nothing launched yet (or any more).
  if (before_first == 0 && gaps.empty() && (f.idle_ns == 0 || c.steps.steps.empty())) return;
  f.severity = FindingSeverity::kInfo;
  f.title = std::to_string(reqs.size()) + " Activity Buffer Request" + (reqs.size() == 1 ? "" : "s") + " (" +
            format_ns(total) + "): the profiler allocating its event buffer";
  // The lane offset is the first request's only where one ran before the
  // first kernel (issue 38's eleventh round: "the first kernel starts 898.4
  // us after its launch" was put beside two requests 353 ms later).
  if (initial_offset >= 0 && before_first > 0) {
    f.title += "; the first kernel starts " + format_ns(initial_offset) + " after its launch";
  }
  f.evidence.num("count", static_cast<std::int64_t>(reqs.size()))
      .num("total_ns", total)
      .num("first_dur_ns", c.dur(reqs.front()))
      .ints("steps", steps)
      .num("before_first_kernel", before_first)
      .num("explained_gaps", static_cast<std::int64_t>(gaps.size()))
      .num("explained_gap_ns", explained_gap_ns)
      .ints("gaps_ns", gaps)
      .num("gpu_idle_ns", f.idle_ns);
  if (initial_offset >= 0) f.evidence.num("initial_offset_ns", initial_offset).event("first_kernel", c.ref(first_kernel));
  f.evidence.events("requests", std::move(refs));
  std::string listed;
  for (std::size_t i = 0; i < steps.size() && i < 8; ++i) listed += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 8) listed += ", ...";
  if (before_first > 0) {
    f.advice =
        "Give the schedule wait/warmup steps so the request falls outside the active window, and leave the steps it "
        "lands in out when judging step time. This is the profiler, not your code: CUPTI asks for a new activity "
        "buffer and the device work around it starts late; the first request explains the offset between the CPU "
        "and GPU lanes at the start, one inside a step a gap that appears only once.";
  } else {
    // Mid-run requests come when CUPTI's buffers fill: wait/warmup steps do
    // not move them (issue 38's eleventh round: requests in steps 60 and
    // 122 of a 127-step decode).
    f.advice = std::string("Leave ") + (steps.empty() ? std::string("the time around them") : (steps.size() == 1 ? "step " : "steps ") + listed) +
               " out when judging step time: this is the profiler, not your code. CUPTI asks for a new activity buffer "
               "when its buffers fill, mid-run, so wait/warmup steps do not move these; recording fewer events (fewer "
               "active steps, without with_stack or record_shapes) makes them rarer.";
  }
  f.impact_ns = f.idle_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
