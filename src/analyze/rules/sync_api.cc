// sync_api: Nsight Systems' expert rules cuda_api_sync ("CUDA
// Synchronization APIs") and cuda_memcpy_sync ("CUDA Synchronous Memcpy")
// (nsys analyze; Nsight Systems User Guide, "Expert Systems Analysis"):
// runtime calls that block the host until the device catches up —
// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and
// their driver / HIP forms) — and memcpy calls without "Async". Ours looks
// inside ProfilerSteps, where a blocked host is a stalled pipeline; a
// synchronize after the loop is sync_at_window_end's business. Without steps
// it looks at the whole trace, but only at calls with device work launched
// after them (the last drain of a trace stalls nothing).
// Precondition for a warning: the GPU was mostly idle during the calls, and
// idle for want of work; or, busy through them, it idles after calls that
// drained its queue for 10% of the window or more (kDrainedShare, below). A sync while the GPU is busy is the host waiting
// for queued work: the host lost that time, the GPU did not (a GPU-bound
// program looks like that). A sync while work launched before it sits
// queued on an idle device (behind a wait on another stream) waits for a
// dependency: the sync is its symptom (SGLang decode: a 463 ms
// hipMemcpyWithStream behind kernels held by a hipStreamWaitEvent).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A replayed saving below this share of the window, from a wait that holds
// half of it or more: the host has no other work worth moving the sync for.
constexpr double kMaterialSaving = 0.02;
// A GPU busy this share of the window sets the run's pace.
constexpr double kGpuBoundShare = 0.9;

// Nsight reports every such call; ours makes the finding a warning once the
// host spends more than this share of the steps blocked in them.
constexpr double kWarningShare = 0.1;
// ... and the GPU was busy less than this share of the calls' time (as
// sync_at_window_end: a GPU busy through the wait is not starved by it).
constexpr double kBusyShare = 0.5;
constexpr std::size_t kMaxSteps = 16;
// A sync the GPU works through still drains its queue: where the GPU then
// idles this share of the window or more while the host launches the next
// work, the wait costs that idle (issue 38's eighteenth round: an MoE
// layer's split sizes read back before each all_to_all on a B200, the GPU
// busy 82% of the waits, then idle 6.7 ms of the run's 9.1 ms as the host
// re-issued its small ops one by one: "the host waited, the GPU did not").
constexpr double kDrainedShare = 0.05;
// After a drain, the queue has rebuilt once an activity starts this long
// after its launch call ended: the host is ahead again.
constexpr std::int64_t kRebuiltNs = 20'000;
// Precondition: the calls block the host this share of the window (their
// union: calls on several threads overlap) or the GPU idles this share of it
// inside them; below, a few µs of .item() are not worth a line.
constexpr double kMinShare = 0.01;
// A read-back of this many bytes or fewer is one value (a scalar, a few
// indices); this many of them in the calls is a loop over elements.
constexpr std::int64_t kScalarBytes = 64;
constexpr std::int64_t kManyScalarReads = 1000;

// What in Python makes the op around a sync synchronize.
std::string trigger_of(const std::string& site) {
  if (site.find("_local_scalar_dense") != std::string::npos || site.find("aten::item") != std::string::npos) {
    return ".item() (or float()/int()/bool() of a tensor)";
  }
  if (site.find("is_nonzero") != std::string::npos) return "a Python `if tensor:`";
  if (site.find("nonzero") != std::string::npos || site.find("masked_select") != std::string::npos ||
      site.find("unique") != std::string::npos) {
    return "an op whose output size depends on the data (nonzero, masked_select, unique, boolean indexing)";
  }
  if (site.find("copy_") != std::string::npos || site.find("aten::to") != std::string::npos) {
    return "a copy to the host (.cpu(), .tolist(), .numpy(), .to() without non_blocking=True)";
  }
  return "";
}
// How many device activities after a sync's start are searched for work
// launched before it (bounded: the rule stays linear on huge traces).
constexpr int kMaxScan = 4096;

// The copy launched from the op around a sync (the op holding it, views
// skipped): its direction, kHtoD, kDtoH, or kOther (no copy, another kind),
// and its host memory. A copy_ that waits after copying a CPU tensor to the
// GPU is not a read-back: its fix is to build the tensor on the GPU.
CopyKind copy_around(const DiagnoseContext& c, std::uint32_t sync) {
  const std::uint32_t op = c.enclosing_op(sync, /*skip_views=*/true);
  if (op == kNoIndex) return {};
  const std::uint32_t lane = c.trace.events.lane[sync];
  auto it = std::lower_bound(c.device.begin(), c.device.end(), c.ts(op),
                             [](const DeviceOp& d, std::int64_t v) { return d.start < v; });
  for (int scanned = 0; it != c.device.end() && it->start <= c.end(op) && scanned < kMaxScan; ++it, ++scanned) {
    if (it->cls != DeviceClass::kMemcpy || it->launch == kNoIndex || c.trace.events.lane[it->launch] != lane) continue;
    if (c.ts(it->launch) < c.ts(op) || c.ts(it->launch) > c.ts(sync)) continue;
    const CopyKind k = copy_kind(c.name(it->event));
    if (k.direction == CopyDirection::kHtoD || k.direction == CopyDirection::kDtoH) return k;
  }
  return {};
}


// Whether each call is an explicit device-wide synchronize, the only one counted in
// its step (two steps at least), with no device work launched after it
// before the step ends.
bool closes_each_step(const DiagnoseContext& c, const std::vector<std::uint32_t>& calls) {
  std::unordered_set<int> seen;
  for (std::uint32_t e : calls) {
    // torch.cuda.synchronize(): a device-wide wait, not a read-back's
    // stream or event wait (vLLM's sampled tokens).
    const std::string_view name = c.name(e);
    if (name.find("DeviceSynchronize") == std::string_view::npos && name.find("CtxSynchronize") == std::string_view::npos) {
      return false;
    }
    const int si = c.step_index_at(c.ts(e));
    if (si < 0 || !seen.insert(si).second) return false;
    const StepStat& st = c.steps.steps[static_cast<std::size_t>(si)];
    const std::int64_t step_end = sat_add(st.start_ns, st.dur_ns);
    auto it = std::lower_bound(c.device.begin(), c.device.end(), c.end(e),
                               [](const DeviceOp& op, std::int64_t v) { return op.start < v; });
    for (int scanned = 0; it != c.device.end() && it->start < step_end; ++it) {
      if (++scanned > kMaxScan) return false;
      if (it->launch != kNoIndex && c.ts(it->launch) >= c.end(e) && c.ts(it->launch) < step_end) return false;
    }
  }
  return seen.size() >= 2;
}
}  // namespace

void rule_sync_api(const DiagnoseContext& c, std::vector<Finding>* out) {
  const bool has_steps = !c.steps.steps.empty();
  // Without steps: the start of the last device work launched (or run).
  std::int64_t last_launch = INT64_MIN;
  for (const DeviceOp& op : c.device)
    last_launch = std::max(last_launch, op.launch != kNoIndex ? c.ts(op.launch) : op.start);
  if (!has_steps && !c.has_device()) return;
  std::map<std::string_view, std::int64_t> count_by_name, ns_by_name;
  std::int64_t calls = 0, sync_ns = 0, busy_ns = 0, queued_ns = 0, comm_ns = 0;
  // Collective kernels, merged: a sync that waits behind one waits for the
  // other ranks (or the network), not for this GPU's work.
  std::vector<Interval> comm_iv;
  for (const DeviceOp& op : c.device)
    if (op.cls == DeviceClass::kComm) comm_iv.push_back({op.start, op.end});
  const std::vector<Interval> comm = merge_intervals(std::move(comm_iv));
  // The device's idle time inside [from, to) while work launched before
  // `from` had not started yet.
  auto queued_idle = [&](std::int64_t from, std::int64_t to) -> std::int64_t {
    auto it = std::lower_bound(c.device.begin(), c.device.end(), from,
                               [](const DeviceOp& op, std::int64_t v) { return op.start < v; });
    for (int scanned = 0; it != c.device.end() && scanned < kMaxScan; ++it, ++scanned) {
      if (it->launch == kNoIndex || c.end(it->launch) > from) continue;
      const std::int64_t until = std::min(it->start, to);
      return until > from ? (until - from) - c.device_busy_ns(-1, from, until) : 0;
    }
    return 0;
  };
  // CUDA/HIP graph capture recorded (cudaStreamBeginCapture,
  // hipStreamBeginCapture): the syncs are the capture's warm-up, paid once
  // at start-up, not per step.
  std::int64_t captures = 0;
  // The threads that launch kernels: a wait on another thread (vLLM's
  // output thread reading results back, whose job is to wait) holds no
  // launch back (issue 38's eleventh round: 83.6 ms "blocking the host",
  // 45.3% of the steps, of which the launching thread's was 0.77 ms).
  std::unordered_set<std::uint32_t> kernel_lanes;
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex && (op.cls == DeviceClass::kCompute || op.cls == DeviceClass::kComm)) {
      kernel_lanes.insert(c.trace.events.lane[op.launch]);
    }
  }
  std::uint32_t worst = kNoIndex;
  std::vector<std::int64_t> steps;
  std::vector<Interval> counted;  // the calls this finding reports
  std::vector<std::uint32_t> call_events;
  for (std::uint32_t e : c.runtime) {
    const std::string_view name = c.name(e);
    if (name.find("StreamBeginCapture") != std::string_view::npos) ++captures;
    if (!c.blocks_host(e)) continue;
    if (!kernel_lanes.empty() && kernel_lanes.count(c.trace.events.lane[e]) == 0) continue;
    // A read-back to pageable memory whose own copy holds half the call or
    // more is the copy's time (pageable_memcpy's), not a wait for other
    // work (pytorch/benchmark's pageable copy loop); one that waits behind
    // queued work is a sync (DLRM's split sizes behind an all-to-all).
    if (const std::int64_t copy = c.pageable_readback_ns(e); copy >= 0 && sat_mul(2, copy) >= c.dur(e)) continue;
    const int si = c.step_index_at(c.ts(e));
    if (has_steps ? si < 0 : c.end(e) > last_launch) continue;
    // cuDNN's benchmark mode reading back its trial timings: one-time
    // tuning, host_blocked's initialisation (idle.h, in_tuning).
    if (c.idle().in_tuning(c, e)) continue;
    ++calls;
    counted.push_back({c.ts(e), c.end(e)});
    call_events.push_back(e);
    sat_acc(sync_ns, c.dur(e));  // calls on several threads may overlap
    sat_acc(busy_ns, c.device_busy_ns(-1, c.ts(e), c.end(e)));
    if (!comm.empty()) sat_acc(comm_ns, covered_within(comm, c.ts(e), c.end(e)));
    sat_acc(queued_ns, queued_idle(c.ts(e), c.end(e)));
    ++count_by_name[name];
    sat_acc(ns_by_name[name], c.dur(e));
    if (worst == kNoIndex || c.dur(e) > c.dur(worst)) worst = e;
    if (si >= 0) {
      const std::int64_t n = c.step_number(si);
      if (steps.empty() || steps.back() != n) steps.push_back(n);
    }
  }
  if (calls == 0) return;
  const std::int64_t step_total = c.window_ns();
  counted = merge_intervals(std::move(counted));
  const std::int64_t blocked_ns = total_length(counted);  // the host's time in them, counted once
  const double share = step_total > 0 ? static_cast<double>(blocked_ns) / static_cast<double>(step_total) : 0;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  const std::int64_t steps_with = static_cast<std::int64_t>(steps.size());
  if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);
  std::vector<std::string> by_name;
  for (const auto& [name, n] : count_by_name) {
    by_name.push_back(std::string(name) + " x" + std::to_string(n) + " " + format_ns(ns_by_name[name]));
  }

  const double busy = sync_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(sync_ns) : 0;
  const bool gpu_busy = c.has_device() && busy >= kBusyShare;
  // Mostly in collectives: the GPU waited too, for the other ranks.
  const bool in_collectives = gpu_busy && sat_mul(2, comm_ns) >= busy_ns;
  // The GPU's idle for launches after calls that return to an empty queue
  // (nothing running, nothing launched before the return left to start),
  // until the queue rebuilds (an activity starting kRebuiltNs after its
  // launch), the next counted call or its step's end.
  std::int64_t drained_ns = 0, drained_calls = 0;
  std::vector<Interval> drained;
  if (gpu_busy && !in_collectives) {
    std::sort(call_events.begin(), call_events.end(), [&](std::uint32_t a, std::uint32_t b) { return c.ts(a) < c.ts(b); });
    for (std::size_t i = 0; i < call_events.size(); ++i) {
      const std::int64_t from = c.end(call_events[i]);
      std::int64_t limit = i + 1 < call_events.size() ? c.ts(call_events[i + 1]) : c.end_ns;
      if (const int si = c.step_index_at(c.ts(call_events[i])); si >= 0) {
        const StepStat& st = c.steps.steps[static_cast<std::size_t>(si)];
        limit = std::min(limit, sat_add(st.start_ns, st.dur_ns));
      }
      if (limit <= from || c.device_busy_ns(-1, from, from + 1) > 0) continue;
      auto it = std::lower_bound(c.device.begin(), c.device.end(), from,
                                 [](const DeviceOp& op, std::int64_t v) { return op.start < v; });
      if (it == c.device.end() || (it->launch != kNoIndex && c.end(it->launch) <= from)) continue;
      std::int64_t to = limit;
      for (int scanned = 0; it != c.device.end() && scanned < kMaxScan; ++it, ++scanned) {
        if (it->start >= limit) break;
        if (it->launch != kNoIndex && it->start - c.end(it->launch) >= kRebuiltNs) {
          to = it->start;
          break;
        }
      }
      if (to <= from) continue;
      drained.push_back({from, to});
      ++drained_calls;
    }
    // The idle the host leaves launching in them (not host work that
    // launches nothing: a 218 ms evaluation after a step's last read-back),
    // read once over all of them (they do not overlap), less what earlier
    // findings claim (issue 38's twentieth round: a pruned ResNet's 543 us
    // after its syncs held 460 us the launch-overhead finding claimed).
    std::sort(drained.begin(), drained.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    drained_ns = total_length(claimable_idle(
        c.idle(), cause_bit(IdleCause::kLaunching) | cause_bit(IdleCause::kKernelLatency), &drained, *out));
  }
  const std::int64_t window = c.window_ns();
  const bool drains = window > 0 && static_cast<double>(drained_ns) >= kDrainedShare * static_cast<double>(window);
  // The steps are the calls of a named range (a benchmark's timed function,
  // not ProfilerStep), each closed by one explicit synchronize that nothing
  // in its step launches after, and the GPU works through them: the timing
  // idiom (torch.cuda.synchronize() as the last line of the timed scope),
  // the harness's and not the program's (issue 38's nineteenth round:
  // transformer_nuggets' QLoRA MLP benchmark, "5 synchronizing calls block
  // the host 48.6% of step time" given as a cause).
  // (An idle after them inside the step launches nothing: the step's own
  // tail, not a queue drained for later work.)
  if (has_steps && !c.steps.range.empty() && gpu_busy && !in_collectives && captures == 0 &&
      closes_each_step(c, call_events)) {
    return;
  }
  const double comm_share = sync_ns > 0 ? static_cast<double>(comm_ns) / static_cast<double>(sync_ns) : 0;
  // The device idled inside the calls: for want of work (the sync's cost), or
  // with launched work queued behind something else (a dependency's).
  const std::int64_t idle_ns = std::max<std::int64_t>(0, sync_ns - busy_ns);
  const std::int64_t starved_ns = std::max<std::int64_t>(0, idle_ns - queued_ns);
  const bool dependency = !gpu_busy && queued_ns > starved_ns;
  Finding f;
  f.id = "sync_api";
  // What the waits cost the GPU: the partition's blocked_sync time inside
  // the calls (the thread that launches next was in them, nothing queued).
  set_idle_claim(f, claimable_idle(c.idle(), cause_bit(IdleCause::kBlockedSync), &counted, *out));
  if (share < kMinShare && static_cast<double>(f.idle_ns) < kMinShare * static_cast<double>(step_total)) return;
  f.severity = share > kWarningShare && !gpu_busy && !dependency && captures == 0 ? FindingSeverity::kWarning
                                                                                  : FindingSeverity::kInfo;
  f.title = count_of(calls, "synchronizing " + std::string(c.api()) + " call") + " " +
            (has_steps ? "inside steps" : "before later device work") + (calls == 1 ? " blocks" : " block") +
            " the host " + format_ns(blocked_ns) + " (" + format_pct(100.0 * share) +
            (has_steps ? " of step time)" : " of the trace)");
  if (in_collectives) {
    f.title += "; the GPU was in collectives " + format_pct(100.0 * comm_share) +
               " of it: the host waited behind communication, which itself waits for the other ranks or the network";
  } else if (gpu_busy) {
    f.title += "; the GPU was busy " + format_pct(100.0 * busy) + " of it" +
               (drains ? ", but " + std::to_string(drained_calls) + " of them return to an empty queue, and the GPU then idles " +
                             format_ns(drained_ns) + " while the host launches the next work"
                       : std::string(": the host waited, the GPU did not"));
  }
  // The longest call inside a lead of queued work the trace does not hold
  // (DiagnoseContext::queued_lead): it waited for that work, not for
  // anything the program did in the recording.
  const Interval lead = c.queued_lead();
  const bool before_recording = dependency && lead.end > lead.start && c.ts(worst) < lead.end;
  if (before_recording) {
    f.title += "; the device work it waited for ran before the trace's first device activity, " +
               format_ns(sat_sub(lead.end, lead.start)) + " into it: work the trace does not hold";
  } else if (dependency) {
    f.title += "; work launched before it sat queued on the idle GPU " + format_ns(queued_ns) +
               " of it: the host waited for that work to start";
  }
  f.evidence.num("calls", calls)
      .num("sync_ns", sync_ns)
      .num("host_blocked_ns", blocked_ns)
      .real("sync_pct", 100.0 * share)
      .num("step_total_ns", step_total)
      .text("window", has_steps ? "steps" : "trace")
      .real("gpu_busy_pct", 100.0 * busy)
      .real("gpu_comm_pct", 100.0 * comm_share)
      .num("gpu_idle_during_sync_ns", idle_ns)
      .num("gpu_idle_queued_ns", queued_ns)
      .num("gpu_idle_ns", f.idle_ns)
      .num("steps_with_sync", steps_with)
      .texts("by_name", by_name)
      .event("longest", c.ref(worst));
  // What the longest call waited for: the device work on the other end of
  // the causal graph's sync edge into its return.
  add_waits_for(c, f.evidence, worst, EdgeType::kSync);
  const std::string site = call_sites(c, {worst})[worst];
  if (!site.empty()) {
    f.evidence.text("longest_site", site);
    f.title += "; longest " + std::string(c.name(worst)) + " " + format_ns(c.dur(worst)) + " in " + site;
  }
  if (has_steps) f.evidence.ints("steps", steps);
  const std::string where = std::string(c.name(worst)) + (site.empty() ? "" : " in " + site);
  std::string trigger = trigger_of(site);
  const CopyKind copy = trigger.starts_with("a copy") ? copy_around(c, worst) : CopyKind{};
  const CopyDirection direction = copy.direction;
  if (direction != CopyDirection::kOther) f.evidence.text("copy", std::string(copy_direction_name(direction)));
  if (direction == CopyDirection::kHtoD && copy.host == HostMemory::kPinned) {
    // Pinned already (a DataLoader with pin_memory=True): only the flag is
    // missing (issue 38's twentieth round: "pin it" for a pinned input).
    f.evidence.text("copy_host_memory", "pinned");
    trigger = "a pinned CPU tensor copied to the GPU without non_blocking=True (pass non_blocking=True: the source "
              "is pinned already, so the copy then runs without stopping the host)";
  } else if (direction == CopyDirection::kHtoD) {
    trigger = "a CPU tensor copied to the GPU without non_blocking=True (pin it and pass non_blocking=True; an "
              "index or mask made on the CPU each step can be built on the GPU instead)";
  }
  if (captures > 0) f.evidence.num("graph_captures", captures);
  if (captures > 0) {
    f.title += "; during " + std::string(c.api()) + " graph capture (one-time start-up)";
    f.advice = "Profile the graph replay (steady-state iterations, after capture) to judge serving or step "
               "performance: this trace records " + std::to_string(captures) + " " + std::string(c.api()) +
               " graph capture" + (captures == 1 ? "" : "s") + " (" + (c.is_hip() ? "hipStreamBeginCapture" : "cudaStreamBeginCapture") +
               "), and " + where + " is the capture's warm-up, paid once at start-up, not per step.";
  } else if (before_recording) {
    f.advice = std::string("Synchronize the device before the profiler starts (") +
               (c.is_torch() ? "torch.cuda.synchronize()" : std::string(c.is_hip() ? "hip" : "cuda") + "DeviceSynchronize()") +
               "), so the recording does not open on earlier work still running (an unprofiled iteration): " + where +
               " waited for that work, which the trace does not hold, not for the program's.";
  } else if (dependency) {
    f.advice = "Fix what holds the work " + where +
               " waits for (see the verdict: an event from another stream, lazy module loading), not the call. The "
               "host waits for work that itself waits on the idle GPU.";
  } else if (in_collectives) {
    f.advice = "First find why the collectives that " + where + " waits behind take so long, on all ranks "
               "(comm_exposed, and tprof diagnose on the job's directory): the wait is theirs, a late rank or the "
               "transfer. " +
               "Moving " + (trigger.empty() ? "the sync" : trigger) + " out of the step would let the host run on "
               "while they finish.";
  } else if (gpu_busy && drains) {
    f.advice = "Take " + (trigger.empty() ? "the sync" : trigger) +
               " off the step's path: read the value without blocking (copy it early with non_blocking=True into "
               "pinned memory and wait on an event later), keep it on the device (sizes exchanged by a collective "
               "that needs no host copy, a fixed capacity), or do it every N steps. Each call lets the GPU's queue "
               "drain, and the GPU idles " + format_ns(drained_ns) + " after them while the host launches the next "
               "work op by op.";
  } else if (gpu_busy) {
    // Whether the host has other work to do: the replay without the wait
    // (the causal model) finds the host's later work overlapping the GPU's.
    auto edit = parse_whatif_edit("drop-sync:" + std::string(c.name(worst)));
    const auto saving = edit ? c.replayed_saving({*edit}) : std::nullopt;
    // A copy to the GPU needs no move, only to stop blocking.
    const std::string move =
        direction == CopyDirection::kHtoD
            ? std::string(copy.host == HostMemory::kPinned
                              ? "Passing non_blocking=True to that copy (its source is pinned already)"
                              : "Pinning that copy's source and passing non_blocking=True") +
                  " would let the host queue the next work earlier."
            : "Moving " + (trigger.empty() ? "the sync" : trigger) +
                  " out of the step would let the host queue the next step earlier.";
    // Where the wait holds most of the window, the saving must be material
    // too (kMaterialSaving of the window): a copy benchmark's sync that
    // times its copy blocks 99.6% of a 30.7 ms step and frees 155 us: the
    // host has nothing else to do (issue 38's fourth round).
    // So too where the GPU is busy kGpuBoundShare of the window: the run is
    // the GPU's, and a wait it works through is no cause unless the replay
    // frees a share of the window (issue 38's eleventh round: vLLM's 130 ms
    // of cudaEventSynchronize in a GPU-bound trace, 1% in the replay, was
    // its first cause, "the host has other work to do").
    const bool dominant = static_cast<double>(sync_ns) >= 0.5 * static_cast<double>(step_total) ||
                          c.gpu_busy_window().busy_share() >= kGpuBoundShare;
    const std::int64_t saved_per_step = saving ? saving->per_step_ns : 0;
    const std::int64_t saved_total = saving ? saving->total_ns : 0;
    const bool material = saved_per_step > 0 && (!dominant || static_cast<double>(saved_total) >=
                                                                  kMaterialSaving * static_cast<double>(step_total));
    if (material) {
      f.advice = "The host has other work to do: while " + where +
                 " waits, the GPU runs queued work, and the host's work after it could run meanwhile. " + move;
    } else {
      f.advice = "No change needed unless the host has other work to do: while " + where +
                 " waits, the GPU runs queued work. " + move;
      // Dropped under a host-side verdict (src/analyze/consistency.h).
      f.evidence.text("host_side", "nothing to fix");
    }
  } else if (waits_for_unrecorded_device(c)) {
    // The device's activity is missing and these waits hold most of the
    // time: they are the launched work's time, not a stall to move.
    f.advice = "Make the work " + where + " waits for faster: it waits for the work launched before it, and the trace "
               "holds no device activity, so that work's time is these waits (" + format_pct(100.0 * share) +
               " of " + (has_steps ? "step" : "the trace's") + " time). Time the kernels themselves (CUDA events around "
               "them, Nsight Systems or Nsight Compute) or record the device side again (device_activity_missing); "
               "the sync is where the work shows, not its cause.";
  } else {
    f.advice = "Move " + (trigger.empty() ? "what triggers " + where : trigger + " behind " + where) +
               (has_steps ? " out of the step, do it every N steps," : " out of the loop, do it every N iterations,") +
               " or record an event and read the value later (non_blocking "
               "copies into pinned memory). Each call stops the host until the GPU drains, so the next launches "
               "start late and the GPU idles meanwhile.";
  }
  std::int64_t scalar_loop_saving = 0;
  // A read-back of one value at a time: most calls copy a scalar (64 bytes
  // or less) to the host, over a thousand of them: a Python loop over a
  // tensor's elements (.item(), .cpu(), float(x[i])), each read stopping
  // the host until the GPU drains. The fix is one read of the whole result,
  // not moving each (issue 38's twenty-second round: GPUPuzzlers' per-element
  // .cpu() sum, 4,096 reads of 4 bytes, 62% of its trace, told to move the
  // copy "out of the step, or every N steps" in a trace without steps).
  {
    std::unordered_set<std::uint32_t> counted_calls(call_events.begin(), call_events.end());
    constexpr int kMaxOpDepth = 16, kMaxOpWalk = 64;
    std::int64_t scalar_reads = 0, read_bytes = -1;
    for (const DeviceOp& op : c.device) {
      if (op.cls != DeviceClass::kMemcpy || op.launch == kNoIndex || counted_calls.count(op.launch) == 0) continue;
      if (copy_kind(c.name(op.event)).direction != CopyDirection::kDtoH) continue;
      const std::int64_t b = c.int_arg(op.event, "bytes");
      if (b < 0 || b > kScalarBytes) continue;
      ++scalar_reads;
      read_bytes = std::max(read_bytes, b);
    }
    // Each read is its copy call and, to pageable memory, the sync after it.
    if (scalar_reads >= kManyScalarReads && sat_mul(5, sat_mul(2, scalar_reads)) >= sat_mul(4, calls) && !gpu_busy) {
      // What the loop's reads cost the host: each read's outermost op (a
      // .cpu() is aten::to > aten::_to_copy > aten::copy_ > the copy and
      // its wait), less one read, which the fix keeps (issue 38's
      // twenty-second round: 4,096 reads, 112.8 ms in aten::to, had no
      // saving and ranked below a graph replay that could not capture them).
      std::unordered_set<std::uint32_t> read_ops;
      std::vector<std::int64_t> read_durs;
      for (const DeviceOp& op : c.device) {
        if (op.cls != DeviceClass::kMemcpy || op.launch == kNoIndex || counted_calls.count(op.launch) == 0) continue;
        if (copy_kind(c.name(op.event)).direction != CopyDirection::kDtoH) continue;
        const std::int64_t b = c.int_arg(op.event, "bytes");
        if (b < 0 || b > kScalarBytes) continue;
        std::uint32_t top = c.enclosing_op(op.launch, false);
        if (top == kNoIndex) continue;
        for (int up = 0; up < kMaxOpDepth; ++up) {
          const std::uint32_t p = c.innermost_enclosing(
              c.trace.events.lane[top], c.ts(top), c.end(top), kMaxOpWalk,
              [&](std::uint32_t e) { return c.kind(e) == EventKind::kCpuOp && !is_profiler_step(c.name(e)); }, top);
          if (p == kNoIndex) break;
          top = p;
        }
        if (read_ops.insert(top).second) read_durs.push_back(c.dur(top));
      }
      std::int64_t read_ops_ns = 0;
      for (std::int64_t d : read_durs) sat_acc(read_ops_ns, d);
      const std::int64_t one = read_durs.empty() ? 0 : upper_median(read_durs);
      const std::int64_t loop_saving = sat_sub(read_ops_ns, one);
      if (!read_durs.empty()) {
        f.evidence.num("read_ops", static_cast<std::int64_t>(read_durs.size())).num("read_ops_ns", read_ops_ns);
      }
      f.evidence.num("scalar_reads", scalar_reads).num("scalar_read_bytes", read_bytes);
      f.title += "; they are " + std::to_string(scalar_reads) + " read-backs of one value each (" +
                 std::to_string(read_bytes) + " bytes or less), a copy call and its wait each";
      f.advice = "Read the values back in one copy: " + std::to_string(scalar_reads) +
                 " read-backs of one value each are a Python loop over a tensor's elements (.item(), .cpu() or "
                 "float() of x[i]), and each stops the host until the GPU has drained. Compute on the device and copy "
                 "the result once (x.sum().item(), x.tolist() or x.cpu() once, then the loop on the host copy)" +
                 (read_durs.empty() ? std::string(".")
                                    : ": the reads' ops take " + format_ns(read_ops_ns) + " of host time, one read about " +
                                          format_ns(one) + ".");
      scalar_loop_saving = loop_saving;
    }
  }
  if (drains) {
    f.evidence.num("drained_calls", drained_calls).num("gpu_idle_after_drain_ns", drained_ns);
    if (static_cast<double>(drained_ns) >= kWarningShare * static_cast<double>(window)) f.severity = FindingSeverity::kWarning;
  }
  // The recording's fix, no time of the program's; a drained queue's idle
  // is the waits' too.
  f.impact_ns = before_recording ? 0 : std::max(scalar_loop_saving, sat_add(f.idle_ns, drains ? drained_ns : 0));
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
