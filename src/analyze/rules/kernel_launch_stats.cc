// kernel_launch_stats: HolisticTraceAnalysis' CUDA kernel launch statistics
// (hta/analyzers/cuda_kernel_analysis.py, cuda_kernel_launch_stats and
// docs/source/features/cuda_kernel_launch_stats.rst). Every device activity
// joined to its launch call by correlation id gives three numbers: the launch
// call's duration (cpu), the activity's duration (gpu) and the launch delay
// (activity start − launch call end). From them HTA reads:
//   short kernels     gpu < cpu and cpu <= runtime_cutoff
//   runtime outliers  cpu > runtime_cutoff
//   delay outliers    launch delay > launch_delay_cutoff
// Preconditions: at least kMinLaunches launches, so the statistics describe a
// distribution (one launch with a long delay is an anecdote, and the verdict
// reads it); one launch call, one launch: a graph launch (cudaGraphLaunch,
// hipGraphLaunch) runs many kernels from one call, so it counts once, its gpu
// time is the sum of its activities and its delay is that of the first.
// Delay outliers only where the trace shows something to wait for
// (dependency_visible): on one stream with no stream wait a late start is
// the device held from outside, low_gpu_utilization's cause.
// Severity from the time at stake: delays are a warning once they add up to
// kDelayWarnShare of the window (the steps, or the trace without steps).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "src/analyze/causes.h"
#include "src/analyze/idle.h"
#include "src/analyze/verdict.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// HTA's defaults: get_cuda_kernel_launch_stats(runtime_cutoff=50,
// launch_delay_cutoff=100), both in µs.
constexpr std::int64_t kRuntimeCutoffNs = 50'000;
constexpr std::int64_t kLaunchDelayCutoffNs = 100'000;
// An activity starting this soon after another stream's activity ended
// waited for it (an event wait), not for its launch.
constexpr std::int64_t kStreamHandoffNs = 20'000;
// HTA only plots the distributions; ours reports them once a trace has enough
// launches to be a pattern, not a warm-up, and calls short kernels a finding
// when they are at least half of the launches.
constexpr double kShortShare = 0.5;
constexpr std::int64_t kMinLaunches = 20;
constexpr double kDelayWarnShare = 0.05;
// Outliers of a kind are a pattern from this many on (one 106 µs launch call
// or one 149 ms delay is an anecdote).
constexpr std::int64_t kMinOutliers = 3;
// The device idle time the reported launches leave must be at least this
// share of the window: on a busy GPU or behind a deep queue the work waits
// on the device, not on the host, and short kernels cost nothing.
constexpr double kMinIdleShare = 0.01;
// And at least this share of the short kernels must run on an idle stream:
// with most of them queued behind longer work the host runs ahead, and a
// few idle-stream ones are the gaps of its other work (issue 38's
// fourteenth round: an H200 attention call, 7 of 55 short kernels on an
// idle stream after host Python and pageable copies, the rest behind a 2 ms
// queue, told "the host sets the pace"; it was 10%).
constexpr double kMinExposedShare = 0.25;
// Steps listed in evidence.
constexpr std::size_t kMaxSteps = 16;

// HTA joins cudaLaunchKernel, cudaMemcpyAsync and cudaMemsetAsync; ours takes
// every launching call by the same token (cuLaunchKernel, cudaLaunchKernelExC,
// cudaGraphLaunch, hipLaunchKernel, cuMemcpyHtoDAsync, ...) and leaves out
// blocking calls (cudaMemcpy, hipMemcpyWithStream), whose duration is a wait.
// Kineto writes "INVALID" for a runtime call it cannot name (an older
// Kineto's cudaLaunchKernelExC, which Triton and CUTLASS launch with): one
// joined to a device activity by its correlation id launched it.
bool is_launch_call(std::string_view name) {
  return name == "INVALID" || name.find("Launch") != std::string_view::npos ||
         name.find("MemcpyAsync") != std::string_view::npos || name.find("MemsetAsync") != std::string_view::npos ||
         ((name.find("Memcpy") != std::string_view::npos || name.find("Memset") != std::string_view::npos) &&
          name.find("Async") != std::string_view::npos);
}

}  // namespace

void rule_kernel_launch_stats(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // Graph capture's eager warm-up launches are start-up; "replay as a graph"
  // would be circular (see kernel_gap).
  if (c.graph_captures() > 0) return;
  std::vector<std::int64_t> cpu_durs, delays;
  std::int64_t launches = 0, short_kernels = 0, short_exposed = 0, short_excess_ns = 0;
  std::int64_t runtime_outliers = 0, runtime_outlier_ns = 0;
  std::int64_t delay_outliers = 0, delay_outlier_ns = 0;
  const DeviceOp* worst_runtime = nullptr;
  const DeviceOp* worst_delay = nullptr;
  std::int64_t worst_delay_ns = 0;
  std::vector<std::int64_t> outlier_steps, delay_steps;
  // Where the device may idle because of a launch: from when the stream
  // had nothing left (or, first on its stream, the call started) to the
  // activity's start, per exposed short kernel and runtime outlier; the
  // delay itself per delay outlier.
  std::vector<Interval> short_at_stake, runtime_at_stake, delay_at_stake;
  // End of the previous activity on each stream: a delay is only the launch
  // path's fault when the stream had nothing queued before the activity.
  std::unordered_map<std::uint32_t, std::int64_t> stream_end;
  // Graph launches: the device time of all their activities, and which were
  // seen.
  std::unordered_map<std::uint32_t, std::int64_t> graph_gpu_ns;
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex && is_graph_launch(c.name(op.launch))) {
      sat_acc(graph_gpu_ns[op.launch], op.end - op.start);
    }
  }
  // Launch calls that blocked by effect (a copy that waited for its
  // transfer, a full launch queue, module loading, a sync): host_blocked and
  // sync_api explain them; they are not launch overhead.
  std::unordered_set<std::uint32_t> blocked;
  for (const BlockingCall& b : c.idle().blocking()) {
    if (b.op != kNoIndex) blocked.insert(b.event);
  }
  std::int64_t blocked_launches = 0;
  std::vector<std::uint32_t> by_end;  // device activity indices by end (the handoff test)
  std::unordered_set<std::uint32_t> graph_seen;
  std::int64_t graph_launches = 0;
  for (const DeviceOp& op : c.device) {
    auto it = stream_end.try_emplace(op.lane, std::numeric_limits<std::int64_t>::min()).first;
    const std::int64_t prev_end = it->second;
    it->second = std::max(prev_end, op.end);
    if (op.launch == kNoIndex || !is_launch_call(c.name(op.launch))) continue;
    const auto graph = graph_gpu_ns.find(op.launch);
    if (graph != graph_gpu_ns.end()) {
      if (!graph_seen.insert(op.launch).second) continue;  // the graph's later activities
      ++graph_launches;
    }
    ++launches;
    const std::int64_t cpu = c.dur(op.launch);
    const std::int64_t gpu = graph != graph_gpu_ns.end() ? graph->second : op.end - op.start;
    const std::int64_t delay = op.start - c.end(op.launch);
    cpu_durs.push_back(cpu);
    delays.push_back(delay);
    // Queued behind earlier work on its stream: waiting for the GPU, which is
    // what a busy GPU should look like; neither a short kernel that costs
    // anything nor a launch delay outlier.
    const bool queued = prev_end > c.end(op.launch);
    const Interval at_stake{prev_end == std::numeric_limits<std::int64_t>::min() ? c.ts(op.launch) : prev_end,
                            op.start};
    // Or the device was busy with another stream's work through most of
    // the wait: the stream idled, the GPU did not, and what idle there is
    // inside is that work's own kernel-to-kernel latency (issue 38's
    // twenty-second round: SGLang's decode on an H200, 71 small kernels on
    // stream 7 between the replays of a 1,642-kernel CUDA graph on another
    // stream, "leaving the GPU idle 4.399 ms", most of it the graph's
    // sub-microsecond gaps).
    const bool device_busy = !queued && at_stake.end > at_stake.start &&
                             sat_mul(2, c.device_busy_ns(op.device, at_stake.start, at_stake.end)) >=
                                 sat_sub(at_stake.end, at_stake.start);
    if (cpu <= kRuntimeCutoffNs && gpu < cpu) {
      ++short_kernels;
      if (!queued && !device_busy) {
        ++short_exposed;
        sat_acc(short_excess_ns, cpu - gpu);
        if (at_stake.end > at_stake.start) short_at_stake.push_back(at_stake);
      }
    }
    if (cpu > kRuntimeCutoffNs && blocked.count(op.launch) > 0) {
      ++blocked_launches;
    } else if (cpu > kRuntimeCutoffNs) {
      ++runtime_outliers;
      sat_acc(runtime_outlier_ns, cpu);
      if (worst_runtime == nullptr || cpu > c.dur(worst_runtime->launch)) worst_runtime = &op;
      if (op.step >= 0) outlier_steps.push_back(c.step_number(op.step));
      if (at_stake.end > at_stake.start) runtime_at_stake.push_back(at_stake);
    }
    // Or held by another stream's work it waits for (a stream-wait edge in
    // the causal graph whose source ends after the launch): a dependency,
    // not the launch path (issue 38's sixth round: 8 layout kernels on
    // cuDNN's side streams waiting 1.2 ms for stream 7 counted as launch
    // delays).
    // Without such an edge (the graph links a cudaStreamWaitEvent only where
    // it can tell which record it waits on): it starts within
    // kStreamHandoffNs of the end of another stream's activity on its
    // device that ended after the launch returned (the device was busy
    // elsewhere until then: a handoff, not a slow launch path).
    const bool waits_on_stream = delay > kLaunchDelayCutoffNs && !queued && [&] {
      const std::uint32_t w = c.waited_for(op.event, EdgeType::kStreamWait);
      if (w != kNoIndex && c.end(w) > c.end(op.launch)) return true;
      if (by_end.empty()) {  // the device activities by end, built for the first candidate
        for (std::uint32_t i = 0; i < c.device.size(); ++i) by_end.push_back(i);
        std::sort(by_end.begin(), by_end.end(),
                  [&](std::uint32_t a, std::uint32_t b) { return c.device[a].end < c.device[b].end; });
      }
      const std::int64_t from = std::max(c.end(op.launch) + 1, op.start - kStreamHandoffNs);
      auto e = std::lower_bound(by_end.begin(), by_end.end(), from,
                                [&](std::uint32_t i, std::int64_t t) { return c.device[i].end < t; });
      for (; e != by_end.end() && c.device[*e].end <= op.start; ++e) {
        const DeviceOp& o = c.device[*e];
        if (o.device == op.device && o.lane != op.lane) return true;
      }
      return false;
    }();
    if (delay > kLaunchDelayCutoffNs && !queued && !waits_on_stream) {
      ++delay_outliers;
      sat_acc(delay_outlier_ns, delay);
      if (delay > worst_delay_ns) {
        worst_delay_ns = delay;
        worst_delay = &op;
      }
      if (op.step >= 0) delay_steps.push_back(c.step_number(op.step));
      delay_at_stake.push_back({c.end(op.launch), op.start});
    }
  }
  if (launches < kMinLaunches) return;
  const double short_share = static_cast<double>(short_kernels) / static_cast<double>(launches);
  // Short kernels cost something only on an idle stream (queued behind
  // longer work they cost nothing): a pattern of those too, and not a
  // handful among thousands queued deep.
  const bool many_short = short_share >= kShortShare && short_exposed >= kMinOutliers &&
                          static_cast<double>(short_exposed) >= kMinExposedShare * static_cast<double>(short_kernels);
  const bool runtime_pattern = runtime_outliers >= kMinOutliers;
  // A delay on an idle stream where the trace shows nothing to wait for
  // (one stream a device, no stream wait) is the device held from outside
  // the program: low_gpu_utilization's "check the GPU", not a dependency
  // to start earlier (place_causes, issue 38's ninth round).
  const bool delay_pattern = delay_outliers >= kMinOutliers && c.dependency_visible();
  if (!many_short && !runtime_pattern && !delay_pattern) return;
  if (!runtime_pattern) outlier_steps.clear();
  if (delay_pattern) outlier_steps.insert(outlier_steps.end(), delay_steps.begin(), delay_steps.end());
  // The device idle time the reported parts leave (the idle partition, in
  // the steps): what they cost, not the host time they take.
  // Before a short kernel only the host launching (and the device's own
  // kernel-to-kernel latency) is the launch path's; in a long call or a
  // delay, any idle time in the steps.
  // Not inside the steps the device bounds, where launches queue ahead of
  // it (issue 38's eighteenth round: a CUDA-graphed ViT, 4 of 5 steps
  // GPU-bound behind a queue of up to 679 us, its idle left in the first
  // step, was told the host set the pace).
  const std::vector<Interval> device_bound = device_bound_steps(c);
  if (!device_bound.empty()) {
    for (std::vector<Interval>* v : {&short_at_stake, &runtime_at_stake, &delay_at_stake}) {
      std::erase_if(*v, [&](const Interval& iv) {
        return sat_mul(2, covered_within(device_bound, iv.start, iv.end)) >= iv.end - iv.start;
      });
    }
  }
  std::vector<Interval> at_stake;
  if (runtime_pattern) at_stake.insert(at_stake.end(), runtime_at_stake.begin(), runtime_at_stake.end());
  if (delay_pattern) at_stake.insert(at_stake.end(), delay_at_stake.begin(), delay_at_stake.end());
  const std::vector<Interval> outliers = merge_intervals(std::move(at_stake));
  // A delay whose idle time an earlier finding already names (kernel_gap's
  // stream wait, a blocking call) is not counted again. Nor is the idle
  // before short kernels that a finding of another cause names (kernel_gap's
  // recurring zero_grad fills on a compute-bound trace): two causes would
  // count it twice (review 2026-11-26, round 6). Short kernels are a symptom
  // of launch overhead: where that cause forms (around overhead_bound, or
  // around its strongest symptom where the measurements say launch
  // overhead; causes.cc), its members' claims are the same idle seen
  // from another side, and counted (a cause weighs as its largest member).
  std::vector<Interval> earlier;
  for (const Finding& g : *out) {
    for (const TimeRange& r : g.idle_claim) earlier.push_back({r.start_ns, r.end_ns});
  }
  std::vector<Interval> other_causes;
  if (many_short && !earlier.empty()) {
    const bool cause_forms =
        std::any_of(out->begin(), out->end(), [](const Finding& g) { return g.id == "overhead_bound"; }) ||
        launch_overhead_measured(c);
    for (const Finding& g : *out) {
      if (cause_forms && in_launch_overhead(g)) continue;
      for (const TimeRange& r : g.idle_claim) other_causes.push_back({r.start_ns, r.end_ns});
    }
  }
  const IdlePartition::Totals idle_outliers =
      idle_by_cause(c.idle(), subtract(outliers, merge_intervals(std::move(earlier))));
  std::int64_t idle_ns = 0;
  for (int k = 0; k < kIdleCauseCount; ++k) {
    if (static_cast<IdleCause>(k) != IdleCause::kOutsideSteps) sat_acc(idle_ns, idle_outliers[static_cast<std::size_t>(k)]);
  }
  // Idle-stream short kernels whose idle (half of it or more) is another
  // cause's: counted, but not as this finding's.
  std::int64_t short_elsewhere = 0;
  if (many_short) {
    const std::vector<Interval> others = merge_intervals(std::move(other_causes));
    for (const Interval& iv : short_at_stake) {
      if (!others.empty() && sat_mul(2, covered_within(others, iv.start, iv.end)) >= iv.end - iv.start) ++short_elsewhere;
    }
    const IdlePartition::Totals idle_short =
        idle_by_cause(c.idle(), subtract(subtract(merge_intervals(std::move(short_at_stake)), outliers), others));
    sat_acc(idle_ns, idle_short[static_cast<std::size_t>(IdleCause::kLaunching)]);
    sat_acc(idle_ns, idle_short[static_cast<std::size_t>(IdleCause::kKernelLatency)]);
  }
  const std::int64_t window_ns = c.window_ns();
  if (window_ns <= 0 || static_cast<double>(idle_ns) < kMinIdleShare * static_cast<double>(window_ns)) return;
  // Where most steps are device-bound, the others' launch idle is a
  // pattern only from kDelayWarnShare of the window on (the ViT above: 265
  // us, 3.5%, all of it in its first step).
  if (!device_bound.empty() && static_cast<double>(idle_ns) < kDelayWarnShare * static_cast<double>(window_ns)) return;

  std::sort(outlier_steps.begin(), outlier_steps.end());
  outlier_steps.erase(std::unique(outlier_steps.begin(), outlier_steps.end()), outlier_steps.end());
  if (outlier_steps.size() > kMaxSteps) outlier_steps.resize(kMaxSteps);

  Finding f;
  f.id = "kernel_launch_stats";
  const bool costly_delays = static_cast<double>(idle_ns) >= kDelayWarnShare * static_cast<double>(window_ns);
  f.severity = many_short || costly_delays ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  std::string title;
  if (many_short) {
    title = std::to_string(short_kernels) + " of " + std::to_string(launches) +
            " device activities run shorter than their launch call (" + format_pct(100.0 * short_share) + ")";
    const std::string claimed = " in GPU idle other findings claim";
    if (short_exposed < short_kernels) {
      title += ", " + std::to_string(short_exposed) + " of them on an idle stream";
      if (short_elsewhere > 0) title += " (" + std::to_string(short_elsewhere) + claimed + ")";
    } else if (short_elsewhere > 0) {
      title += ", " + std::to_string(short_elsewhere) + " of them" + claimed;
    }
  } else {
    title = count_of(launches, "launch");
  }
  if (runtime_pattern)
    title += "; " + count_of(runtime_outliers, "launch call") + " over " + format_ns(kRuntimeCutoffNs);
  if (delay_pattern) {
    title += "; " + count_of(delay_outliers, "launch delay") + " over " + format_ns(kLaunchDelayCutoffNs) + " (worst " +
             format_ns(worst_delay_ns) + ")";
  }
  // The idle measured is the gaps before the activities, while the host
  // launched them: not something their shortness leaves (issue 38's
  // twenty-third round: "leaving the GPU idle 459.2 us" read as the idle
  // after 10 short copies, which was 98.6 us).
  title += (many_short && !runtime_pattern && !delay_pattern ? ", the GPU idle " + format_ns(idle_ns) + " before them while the host launched them"
                                                             : ", leaving the GPU idle " + format_ns(idle_ns));
  f.title = std::move(title);
  f.evidence.num("launches", launches)
      .num("window_ns", window_ns)
      .num("launch_delay_outlier_ns", delay_outlier_ns)
      .num("short_kernels", short_kernels)
      .num("short_kernels_idle_stream", short_exposed)
      .num("gpu_idle_ns", idle_ns)
      .real("short_pct", 100.0 * short_share)
      .num("median_launch_ns", upper_median(std::move(cpu_durs)))
      .num("median_launch_delay_ns", upper_median(std::move(delays)))
      .num("runtime_cutoff_ns", kRuntimeCutoffNs)
      .num("runtime_outliers", runtime_outliers)
      .num("launch_delay_cutoff_ns", kLaunchDelayCutoffNs)
      .num("launch_delay_outliers", delay_outliers)
      .num("blocked_launch_calls", blocked_launches);
  if (graph_launches > 0) f.evidence.num("graph_launches", graph_launches);
  if (short_elsewhere > 0) f.evidence.num("short_kernels_claimed_elsewhere", short_elsewhere);
  if (worst_runtime != nullptr && runtime_pattern) {
    f.evidence.num("worst_launch_ns", c.dur(worst_runtime->launch))
        .event("worst_launch", c.ref(worst_runtime->launch))
        .event("worst_launch_activity", c.ref(worst_runtime->event));
  }
  if (worst_delay != nullptr && delay_pattern) {
    f.evidence.num("worst_launch_delay_ns", worst_delay_ns)
        .event("worst_delay_launch", c.ref(worst_delay->launch))
        .event("worst_delay_activity", c.ref(worst_delay->event));
  }
  if (!outlier_steps.empty()) f.evidence.ints("steps", outlier_steps);
  // Advice for the parts that were found, in the title's order.
  std::string advice;
  if (many_short) {
    const std::string one = graph_launches > 0 ? std::string() : one_launch_remedy(c);
    const std::string fewer = "the work into fewer, larger ops (" +
                              (c.is_torch() && !c.torch_before_compile() ? std::string("torch.compile fuses elementwise chains") : c.fuse_how()) + ")";
    // A step that waits for the GPU mid-way cannot be a graph yet: the
    // other fix first, then what keeps it out of a graph.
    const std::string blocker = graph_launches > 0 ? std::string() : c.graph_blocker();
    advice += (!one.empty() ? one
               : !blocker.empty()
                   ? "Batch " + fewer
                   : (graph_launches > 0 ? std::string("Move more of the step into the graphs it already replays")
                                         : "Replay the step as a " + std::string(c.api()) + " graph (" + c.graph_how() + ")") +
                         " or batch " + fewer) +
              (one.empty() ? ": " : ". ") +
              std::to_string(short_exposed - short_elsewhere) + " activities on an idle stream" +
              (short_elsewhere > 0 ? std::string(", outside the GPU idle other findings claim,") : std::string()) +
              " run shorter than the call that launched them, so the host, not the GPU, sets the pace. " +
              (one.empty() && !blocker.empty() ? blocker + " " : "");
  }
  if (runtime_pattern) {
    advice +=
        "Warm up before recording if the long launch calls are first launches (lazy module loading), and check "
        "the CPU lane around the worst one for what holds it (another thread, the driver). ";
  }
  if (delay_pattern) {
    advice += std::string("Start earlier the work the delayed kernels wait for (a ") +
              (c.is_hip() ? "hipStreamWaitEvent" : "cudaStreamWaitEvent") +
              " on another stream's event, another thread's launches): on an idle stream a kernel that starts "
              "long after its launch is held on the device, not by the host.";
  }
  while (!advice.empty() && advice.back() == ' ') advice.pop_back();
  f.advice = std::move(advice);
  f.evidence.num("short_excess_ns", short_excess_ns).num("runtime_outlier_ns", runtime_outlier_ns);
  f.impact_ns = idle_ns;
  // Per step at most what a median step leaves idle (the mean is pulled up
  // by a wide first step), as for the findings that claim their idle time.
  const auto nsteps = static_cast<std::int64_t>(c.steps.steps.size());
  if (nsteps > 0 && c.median_step_idle_ns() > 0) {
    f.impact_per_step_ns = std::max<std::int64_t>(1, std::min(idle_ns / nsteps, c.median_step_idle_ns()));
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
