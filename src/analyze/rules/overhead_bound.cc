// overhead_bound: the CPU spends far more time than the GPU and the GPU sits
// mostly idle: it waits for the host to prepare and launch work.
// Origin: docs/trace-reading.md, "Self CPU total ≫ Self CUDA total (ms vs
// µs): overhead-bound". Advice names graphs only when the trace does not
// replay any yet (no cudaGraphLaunch / hipGraphLaunch).
// Precondition: the host is shown dispatching. Torch's Self CPU total also
// counts time the host spends waiting on the device, initialising CUDA or
// in a step's unrecorded gaps (the ProfilerStep's own self time), none of
// which per-op launch overhead explains and none of which the advice helps.
// The advice is in the program's API (DiagnoseContext::is_torch: stream
// capture for a C++ program) and counts one iteration's launch calls
// (launch_rate: per step, else per repeated NVTX range); with one launch
// call per iteration there is nothing within it to replay or fuse.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A trace without steps or a repeated range that launches at most this
// many calls is one cold pass, not a loop to replay.
constexpr std::int64_t kOnePassLaunches = 20;

// "≫": an order of magnitude. The post's 64×64 run had 2.314 ms vs 23.1 µs
// (100×); the H100 64×64 traces show 21–71×, the 4096² ones about 1×.
constexpr double kCpuToDeviceRatio = 10.0;
// At 100× (the post's figure, GPU < 1% of CPU time) the finding is critical.
constexpr double kCriticalRatio = 100.0;
// Where the totals are the steps' own (a host range's steps: tprof record of
// a whole program), the host time cannot exceed the steps' span on the
// launching thread, so the ratio is at most 1 / (1 - the GPU's idle share):
// 10× would ask the GPU to idle 90% of the steps. There "≫" is 5× (device
// work under a fifth of the host's time), critical at 10×. tprof record's
// H200 64×64 run: 512.5 µs vs 57.1 µs (9.0×), GPU idle 91% of the steps;
// its whole-trace totals (CUDA start-up, 112.9 ms) read 1591×.
constexpr double kCpuToDeviceRatioInSteps = 5.0;
constexpr double kCriticalRatioInSteps = 10.0;
// "GPU mostly idle": the TensorBoard plugin flags GPU utilisation < 50%.
constexpr double kIdleShare = 0.5;
// "The host is busy dispatching": host events cover at least half of the
// window once blocking calls and long calls that launch nothing are taken
// out. Per-op dispatch costs µs to tens of µs; a call of 1 ms or more that
// launches nothing is host work of its own (CUDA context creation under the
// first op: 19.6 s and 29.9 s on the HTA traces; cudaFree; the allocator).
constexpr double kDispatchShare = 0.5;
constexpr std::int64_t kLongHostCallNs = 1'000'000;
// Per-op dispatch costs µs to tens of µs (the post's 64×64 step, torch 1.13
// with its profiler on: ~100 µs a launch). Half a millisecond of host time
// or more per launch call is host work between the launches (Python logic,
// data handling), which a CUDA graph does not remove: host_bound's story,
// not this one (issue 38's fifth round: 20 launches in 22 ms of a cold MoE
// step, 281x, got graph advice).
constexpr std::int64_t kMaxDispatchPerLaunchNs = 500'000;

// Host time in the windows spent dispatching: host ops and runtime calls
// (ProfilerStep spans aside) minus blocking calls (synchronize, blocking
// memcpy: the host waits) and calls of kLongHostCallNs or more with no
// launch on their thread inside them.
std::int64_t dispatch_ns(const DiagnoseContext& c, const std::vector<Interval>& windows) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> launches;  // (lane, ts)
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex) launches.emplace_back(c.trace.events.lane[op.launch], c.ts(op.launch));
  }
  std::sort(launches.begin(), launches.end());
  auto launches_inside = [&](std::uint32_t e) {
    const auto it = std::lower_bound(launches.begin(), launches.end(), std::make_pair(c.trace.events.lane[e], c.ts(e)));
    return it != launches.end() && it->first == c.trace.events.lane[e] && it->second < c.end(e);
  };
  // Per thread: its host time minus its own waits and long non-launching
  // calls (a helper thread sleeping in a 4.8 s wait says nothing about the
  // thread that launches), then the union over threads.
  std::unordered_map<std::uint32_t, std::pair<std::vector<Interval>, std::vector<Interval>>> by_lane;  // host, idle
  // Calls that blocked by effect (allocator, pageable copies, a full launch
  // queue, initialisation: src/analyze/idle.h) wait too.
  std::unordered_set<std::uint32_t> blocked;
  for (const BlockingCall& b : c.idle().blocking()) blocked.insert(b.event);
  auto add = [&](std::uint32_t e, bool runtime) {
    const std::string_view n = c.name(e);
    if (is_profiler_step(n) || c.dur(e) <= 0) return;
    auto& [host, idle] = by_lane[c.trace.events.lane[e]];
    host.push_back({c.ts(e), c.end(e)});
    const bool blocking = runtime && (is_sync_call(n) || is_blocking_memcpy(n) || blocked.count(e) > 0);
    if (blocking || (c.dur(e) >= kLongHostCallNs && !launches_inside(e))) idle.push_back({c.ts(e), c.end(e)});
  };
  for (std::uint32_t e : c.host_ops) add(e, false);
  for (std::uint32_t e : c.runtime) add(e, true);
  std::vector<Interval> all;
  for (auto& [lane, hi] : by_lane) {
    const std::vector<Interval> busy = subtract(merge_intervals(std::move(hi.first)), merge_intervals(std::move(hi.second)));
    all.insert(all.end(), busy.begin(), busy.end());
  }
  const std::vector<Interval> busy = merge_intervals(std::move(all));
  std::int64_t in_windows = 0;
  for (const Interval& w : windows) sat_acc(in_windows, covered_within(busy, w.start, w.end));  // steps may overlap
  return in_windows;
}


}  // namespace

void rule_overhead_bound(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // Torch's totals, or the steps' own where they are a host range (a whole
  // program's trace, start-up and exit in its totals).
  const DiagnoseContext::HostVsDevice& hd = c.host_vs_device();
  const std::int64_t cpu = hd.cpu_ns;
  const std::int64_t dev = hd.device_ns;
  if (cpu <= 0) return;
  const double ratio = static_cast<double>(cpu) / static_cast<double>(std::max<std::int64_t>(1, dev));
  if (ratio < (hd.within_steps ? kCpuToDeviceRatioInSteps : kCpuToDeviceRatio)) return;

  // GPU idle over the steps (their windows), else over the whole trace.
  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const std::int64_t span = w.span_ns, busy = w.busy_ns;
  std::vector<std::int64_t> affected;
  std::vector<Interval> affected_windows;  // the steps it speaks for (the trace without steps)
  std::uint32_t worst_step_event = kNoIndex;
  double worst_idle = -1;
  for (const StepStat& st : c.steps.steps) {
    const double idle = st.dur_ns > 0 ? 1.0 - static_cast<double>(st.gpu_busy_ns) / static_cast<double>(st.dur_ns) : 0;
    if (idle >= kIdleShare) {
      affected.push_back(st.step);
      affected_windows.push_back({st.start_ns, st.start_ns + st.dur_ns});
      if (idle > worst_idle) {
        worst_idle = idle;
        worst_step_event = st.event;
      }
    }
  }
  if (span <= 0) return;
  const double idle_share = 1.0 - static_cast<double>(busy) / static_cast<double>(span);
  if (idle_share < kIdleShare) return;
  std::vector<Interval> windows;
  for (const StepStat& st : c.steps.steps) windows.push_back({st.start_ns, st.start_ns + st.dur_ns});
  if (windows.empty()) windows.push_back({c.start_ns, c.end_ns});
  windows = merge_intervals(std::move(windows));
  const std::int64_t dispatch = dispatch_ns(c, windows);
  const double dispatch_share = static_cast<double>(dispatch) / static_cast<double>(span);
  if (dispatch_share < kDispatchShare) return;
  std::unordered_set<std::uint32_t> launch_calls;  // in the windows (a call may launch several activities)
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex) continue;
    const std::int64_t at = c.ts(op.launch);
    const auto in = std::upper_bound(windows.begin(), windows.end(), at,
                                     [](std::int64_t v, const Interval& iv) { return v < iv.end; });
    if (in != windows.end() && in->start <= at) launch_calls.insert(op.launch);
  }
  if (launch_calls.empty() ||
      dispatch / static_cast<std::int64_t>(launch_calls.size()) >= kMaxDispatchPerLaunchNs) {
    return;
  }

  Finding f;
  f.id = "overhead_bound";
  // The GPU time it accounts for: the partition's launching time in the
  // steps it names (the whole window without steps).
  affected_windows = merge_intervals(std::move(affected_windows));
  set_idle_claim(f, claimable_idle(c.idle(), cause_bit(IdleCause::kLaunching),
                                   w.over_steps ? &affected_windows : nullptr, *out));
  f.severity = ratio >= (hd.within_steps ? kCriticalRatioInSteps : kCriticalRatio) ? FindingSeverity::kCritical
                                                                                    : FindingSeverity::kWarning;
  char r[32];
  std::snprintf(r, sizeof r, "%.0fx", ratio);
  // The profiler's buffer requests inside the host's time are the
  // profiler's, not the program's dispatch (issue 38's seventeenth round: a
  // 1.759 ms request in a 2.610 ms Self CPU, "85x"), named where they are
  // a tenth of it or more.
  std::string profiler;
  {
    // Only where an op was running: a request outside every op is in no
    // op's Self CPU.
    std::vector<Interval> reqs, ops;
    for (const std::uint32_t e : c.buffer_requests()) reqs.push_back({c.ts(e), c.end(e)});
    if (!reqs.empty()) {
      for (const std::uint32_t e : c.host_ops) {
        if (c.kind(e) == EventKind::kCpuOp) ops.push_back({c.ts(e), c.end(e)});
      }
    }
    reqs = intersect(merge_intervals(std::move(reqs)), merge_intervals(std::move(ops)));
    const std::int64_t req_ns = c.covered_in_host_window(reqs);
    if (req_ns > 0 && sat_mul(10, req_ns) >= cpu) {
      profiler = " (" + format_ns(std::min(req_ns, cpu)) + " of it the profiler allocating its buffer)";
      f.evidence.num("profiler_buffer_ns", req_ns);
    }
  }
  f.title = "Overhead-bound: " + std::string(hd.within_steps ? "Self CPU in the steps " : "Self CPU ") + format_ns(cpu) +
            profiler + (hd.within_steps ? " vs their device time " : " vs Self CUDA ") + format_ns(dev) + " (" + r +
            "), GPU idle " + format_pct(100.0 * idle_share) + (c.steps.steps.empty() ? " of the trace" : " of the steps");
  f.evidence.num(hd.within_steps ? "self_cpu_in_steps_ns" : "self_cpu_total_ns", cpu)
      .num(hd.within_steps ? "device_in_steps_ns" : "self_device_total_ns", dev)
      .real("cpu_to_device_ratio", ratio)
      .real("gpu_idle_pct", 100.0 * idle_share)
      .num("window_ns", span)
      .num("gpu_busy_ns", busy)
      .num("host_dispatch_ns", dispatch)
      .num("launch_calls", static_cast<std::int64_t>(launch_calls.size()))
      .real("host_dispatch_pct", 100.0 * dispatch_share)
      .num("gpu_idle_launching_ns", f.idle_ns)
      .text("window", c.steps.steps.empty() ? "trace" : "steps");
  if (!c.steps.steps.empty()) {
    f.evidence.num("steps_total", static_cast<std::int64_t>(c.steps.steps.size()));
    add_steps(f.evidence, std::move(affected));
    if (worst_step_event != kNoIndex) f.evidence.event("most_idle_step", c.ref(worst_step_event));
  }
  // Launch calls per step (without steps, per call of the repeated range
  // around them, else the whole trace's): what one graph replay would stand
  // in for.
  const DiagnoseContext::LaunchRate rate = c.launch_rate();
  const std::int64_t per_step = rate.per_iteration();
  f.evidence.num("launches_per_step", per_step);
  if (c.steps.steps.empty() && rate.iterations > 0) {
    f.evidence.num("iterations", rate.iterations).text("iteration", rate.unit);
  }
  const std::string per = c.steps.steps.empty() ? " in the trace" : " per step";
  if (c.graph_launches() > 0) {
    const std::string call = c.is_hip() ? "hipGraphLaunch" : "cudaGraphLaunch";
    f.evidence.num("graph_launches", c.graph_launches());
    f.advice = "Move the host work between the graph launches (scheduling, sampling, Python) into the graph or "
               "overlap it with the previous replay; " + std::to_string(per_step) + " launch calls" + per +
               " remain outside the " + std::to_string(c.graph_launches()) + " " + call +
               " calls. The GPU waits on the CPU to prepare and launch work.";
  } else {
    // One launch call per iteration: nothing within it to replay or fuse.
    // Without steps, the graph stands in for an iteration's calls (the
    // repeated range's), not the trace's.
    // One short pass, no steps and no repeated range: a cold call, whose
    // first calls pay allocation and module loading; a graph replays a
    // loop, which the trace does not hold (issue 38's fourteenth round: a
    // custom LayerNorm backward's one call, 5 launches in 963 us, two of
    // them first-call costs of 311 and 222 us, was told to replay a graph).
    const bool one_pass = c.steps.steps.empty() && rate.iterations <= 1 && rate.calls > 0 &&
                          rate.calls <= kOnePassLaunches;
    const std::string one = one_pass ? "Profile several warmed-up iterations before judging the launches: the trace "
                                       "holds one pass of " + count_of(rate.calls, "launch call") +
                                       ", cold (its first calls pay allocation and module loading), and a graph "
                                       "replays a loop, not one call"
                                     : one_launch_remedy(c);
    if (one_pass) f.evidence.text("one_pass", "yes");
    // What keeps the step out of a graph, said first.
    const DiagnoseContext::CaptureBlockers blockers =
        one.empty() ? c.capture_blockers() : DiagnoseContext::CaptureBlockers{};
    std::string first;
    if (blockers.count > 0) {
      std::string where;
      bool truth = false, item = false, nonzero = false, copy = false, inside = false;
      for (std::size_t i = 0; i < blockers.ops.size(); ++i) {
        const std::string& op = blockers.ops[i].first;
        if (i < 3) where += (i ? ", " : "") + op + " x" + std::to_string(blockers.ops[i].second);
        truth = truth || op == "aten::is_nonzero";
        item = item || op == "aten::item";
        nonzero = nonzero || (op.find("nonzero") != std::string::npos && op != "aten::is_nonzero") ||
                  op.find("masked_select") != std::string::npos || op.find("unique") != std::string::npos;
        copy = copy || op == "aten::copy_" || op == "aten::to" || op == "aten::_to_copy";
        inside = inside || op.find("_backward") != std::string::npos;
      }
      // What to keep on the device follows the ops that read back.
      std::vector<std::string> keep;
      if (truth) keep.push_back("no Python truth test on a device tensor (if t.all():, assert t: aten::is_nonzero)");
      if (item) keep.push_back("no .item() or printing in the loop");
      if (nonzero) keep.push_back("masks or torch.nonzero_static instead of nonzero and masked_select");
      // A host copy waits when its host memory is pageable; a backward op
      // that waits does so inside PyTorch (issue 38's fourteenth round: a
      // BERT step's 24 embedding_dense_backward and 10 input copy_ waits
      // were told to drop .item() from the loop).
      if (copy) keep.push_back("pinned host memory and non_blocking=True for the copies (aten::copy_)");
      if (inside) keep.push_back("the backward ops that wait do so inside PyTorch: its version decides");
      std::string keep_text;
      for (std::size_t i = 0; i < keep.size(); ++i) keep_text += (i ? "; " : "") + keep[i];
      const auto steps = static_cast<std::int64_t>(c.steps.steps.size());
      f.evidence.num("mid_step_syncs", blockers.count);
      first = "; first take the host's waits for the GPU out of the middle of the step (" +
              (steps > 1 ? DiagnoseContext::count_per(blockers.count, steps) + " a step" : std::to_string(blockers.count) + " in the step") +
              ", with work launched before and after: " + where + "): a " + std::string(c.api()) +
              " graph cannot capture a synchronize or a value read back from the device" +
              (c.is_torch() ? std::string(c.torch_before_compile()
                                              ? ": keep values on the device"
                                              : " (torch.compile breaks its graph at each and replays only the "
                                                "pieces between): keep values on the device") +
                                  (keep_text.empty() ? std::string() : " (" + keep_text + ")")
                            : ": move them to the end of the iteration or out of the loop");
    }
    // Its fix, the graph, needs a newer PyTorch: the causes rank the fixes
    // this one can make first (causes.cc).
    if (c.is_torch() && c.torch_before_graphs()) f.evidence.text("needs_upgrade", "PyTorch 1.10 (torch.cuda.graphs)");
    const std::string graph = std::string(c.api()) + " graph (" + c.graph_how() +
                              (c.is_torch() && !c.torch_before_compile() && !c.runs_rnn() && c.extension_kernel().empty()
                                   ? ", or torch.cuda.graphs by hand)"
                                   : ")");
    const std::string calls =
        rate.iterations <= 0 ? "one graph launch per iteration in place of its launch calls (" +
                                   std::to_string(rate.calls) + " in the trace)"
        : c.steps.steps.empty() ? "which turns the " + std::to_string(per_step) + " launch calls per " + rate.unit +
                                      " into one (" + std::to_string(rate.calls) + " in the trace)"
                                : "which turns the " + std::to_string(per_step) + " launch calls per step into one";
    // The graph first, the saving's edit; what keeps the step out of one
    // after it (issue 38's fourteenth round: the default view printed only
    // "first take the waits out" beside the graph replay's saving).
    // Kernels launched outside any op leave torch.compile nothing to fuse.
    const std::string fuse = c.extension_kernel().empty() ? ", or fuse the small ops (" + c.fuse_how() + ") and" : ", or";
    f.advice = (one.empty() ? "Replay the step as a " + graph + ", " + calls + fuse +
                                  " give each launch more work (a larger batch)" + first
                            : one) +
               ". The GPU waits on the CPU, which spends longer dispatching and launching each op than the GPU "
               "spends running it.";
  }
  // One cold pass: where its time went, not what a fix would save.
  f.impact_ns = f.evidence.find("one_pass") != nullptr ? 0 : f.idle_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
