// cpu_gpu_offset: how long after its launch call a device activity starts.
// Two readings: the whole trace's median is large (the GPU queue is backed up:
// the CPU runs ahead of a busy GPU, compute-bound), or only the first step's
// is (the lane offset at the start: the profiler's buffer request, cold
// start). A backed-up queue needs a busy device while work waits.
// Cheatsheet: "the first one explains the initial CPU→GPU lane offset
// (~2.5 ms in the post with wait=0, warmup=0)", and its "Self CPU ≈ Self
// CUDA (...): compute-bound".
// A queue that grows step after step (the first activity of each step
// waits longer than the last step's, in at least kGrowingShare of the
// steps, over at least kMinGrowingSteps) has no typical offset: its median
// is wherever the recording stops. It is reported as its growth per step
// (the last step's offset minus the first's over the steps between), the
// host's time to enqueue the steps and the GPU's time to run what they
// launched (review 2026-11-26, item 8).
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A launch on an idle GPU starts its work within ~5–20 µs (the H100 traces
// of matmul_add: median 7–13 µs); a median ten times that means work waits
// in the stream's queue behind earlier kernels.
constexpr std::int64_t kBackedUpNs = 100'000;
// Host work (cpu_bound and data_loading) on this share of the steps'
// critical path or more: the host is on it, whatever the queue says.
constexpr double kHostPathShare = 0.2;
// ... and the device is busy through most of those waits: work that waits
// on an idle device waits on something else (another stream's event,
// another rank), not in a queue behind earlier kernels.
constexpr double kQueueBusyShare = 0.5;
// The first step's (or first activity's) offset counts as a start-up lane
// offset when it is both this large and this many times the later median
// (the post: ~2.5 ms at the start against a few µs afterwards).
constexpr std::int64_t kStartMinNs = 100'000;
constexpr double kStartFactor = 5.0;
// A growing queue: offsets rising in at least this share of consecutive
// steps, over this many steps, and the last one this many times the first.
constexpr double kGrowingShare = 0.8;
constexpr std::size_t kMinGrowingSteps = 5;
constexpr double kGrowingFactor = 3.0;

// "800 TFLOP/s, 80.8% of the H200's dense fp16/bf16 peak" for a GEMM whose
// rate "Efficiency" measured, else "".
std::string gemm_rate_text(const DiagnoseContext& c, std::string_view kernel) {
  const Efficiency& e = c.efficiency();
  const auto k = std::find_if(e.kernels.begin(), e.kernels.end(), [&](const KernelEfficiency& x) { return x.name == kernel; });
  if (k == e.kernels.end() || k->cls != KernelClass::kGemm || k->tflops() <= 0) return "";
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.0f TFLOP/s", k->tflops());
  const double peak = e.gemm_peak_tflops(k->dtype);
  if (peak <= 0 || e.peak == nullptr) return rate;
  return std::string(rate) + ", " + format_pct(100.0 * k->tflops() / peak) + " of the " + std::string(e.peak->name) +
         "'s dense " + k->dtype + " peak";
}

}  // namespace

void rule_cpu_gpu_offset(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::vector<std::int64_t> all;
  std::int64_t waited = 0, waited_busy = 0;  // launch -> start, and the part with its device busy
  std::vector<Interval> wait_iv;             // the waits' union: concurrent waits count once
  std::int64_t waits = 0, busy_waits = 0;    // waits ≥ kBackedUpNs, and those with the device busy most of the wait
  // max_op: the largest wait among the activities that start after their
  // launch call returned; a copy that starts inside its own blocking call
  // (a pageable cudaMemcpyAsync staging 19 MB) waits in that call, which
  // host_blocked reports, not in the queue (review round 5, N4). Any
  // activity when none does.
  std::size_t first_op = SIZE_MAX, max_op = SIZE_MAX, max_any = SIZE_MAX;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    if (op.launch == kNoIndex) continue;
    const std::int64_t off = op.start - c.ts(op.launch);
    all.push_back(off);
    if (off >= kBackedUpNs) {
      sat_acc(waited, off);
      const std::int64_t busy = c.device_busy_ns(op.device, c.ts(op.launch), op.start);
      sat_acc(waited_busy, busy);
      ++waits;
      wait_iv.push_back({c.ts(op.launch), op.start});
      if (static_cast<double>(busy) >= kQueueBusyShare * static_cast<double>(off)) ++busy_waits;
    }
    if (first_op == SIZE_MAX || c.ts(op.launch) < c.ts(c.device[first_op].launch)) first_op = i;
    if (max_any == SIZE_MAX || off > c.device[max_any].start - c.ts(c.device[max_any].launch)) max_any = i;
    if (op.start >= c.end(op.launch) &&
        (max_op == SIZE_MAX || off > c.device[max_op].start - c.ts(c.device[max_op].launch))) {
      max_op = i;
    }
  }
  if (all.empty()) return;
  if (max_op == SIZE_MAX) max_op = max_any;
  const std::int64_t overall = mean_median(all);
  wait_iv = merge_intervals(std::move(wait_iv));
  std::int64_t union_ns = 0, union_busy = 0;
  for (const Interval& i : wait_iv) {
    union_ns += i.end - i.start;
    union_busy += c.device_busy_ns(-1, i.start, i.end);
  }

  // First vs later: per step (the first activity each step launched), else
  // the trace's first activity vs all the others.
  std::int64_t first = 0, later = 0, first_step = -1;
  std::uint32_t first_event = kNoIndex, first_launch = kNoIndex;
  std::vector<std::int64_t> per_step, step_numbers;
  for (const StepStat& st : c.steps.steps) {
    if (!st.first_kernel_offset_ns) continue;
    per_step.push_back(*st.first_kernel_offset_ns);
    step_numbers.push_back(st.step);
    if (first_event == kNoIndex) {
      first_event = st.first_kernel_event;
      first_launch = st.first_launch_event;
      first_step = st.step;
    }
  }
  if (per_step.size() >= 2) {
    first = per_step.front();
    later = mean_median(std::vector<std::int64_t>(per_step.begin() + 1, per_step.end()));
  } else {
    const DeviceOp& f0 = c.device[first_op];
    first = f0.start - c.ts(f0.launch);
    first_event = f0.event;
    first_launch = f0.launch;
    first_step = c.step_number(f0.step);
    std::vector<std::int64_t> rest;
    for (std::size_t i = 0; i < c.device.size(); ++i) {
      if (i != first_op && c.device[i].launch != kNoIndex) rest.push_back(c.device[i].start - c.ts(c.device[i].launch));
    }
    later = mean_median(std::move(rest));
  }
  const bool has_later = per_step.size() >= 2 || all.size() >= 2;
  // The part of the first offset spent inside its own launch call (a 111 ms
  // hipLaunchKernel loading its module) is that call's time, which
  // host_blocked and cold_start already count: judged and claimed without it.
  // Copies too: a pageable copy's call blocks while the driver stages it
  // and the copy starts late inside it (the tb_plugin resnet50 sample: step
  // 16's 19.3 MB HtoD copy starts 42.9 ms into its 45.7 ms cudaMemcpyAsync,
  // with no device work before it; host_blocked reports that call). That is
  // the call's time, not a lane offset a warm-up removes (review
  // 2026-11-26, R11).
  const std::string_view first_call = first_launch != kNoIndex ? c.name(first_launch) : std::string_view();
  const bool first_is_launch = first_call.find("Launch") != std::string_view::npos ||
                               ((first_call.find("Memcpy") != std::string_view::npos ||
                                 first_call.find("Memset") != std::string_view::npos) &&
                                first_call.find("Async") != std::string_view::npos);
  const std::int64_t first_call_ns = first_is_launch ? std::min(first, c.dur(first_launch)) : 0;
  std::int64_t first_queued = first - std::max<std::int64_t>(0, first_call_ns);
  // The part of the wait the device spent running earlier work is a queue,
  // not a start-up offset: a recording that starts mid-run finds the last
  // unrecorded step's kernels still queued, and the first recorded kernel
  // starts as they end (issue 38's nineteenth round: modded-nanogpt's
  // 47.9 ms "offset" began 2.6 us after 49.6 ms of step 9's work, on a GPU
  // busy throughout). Only the device's idle part of the wait is a lane
  // offset a warm-up removes.
  if (first_event != kNoIndex && first_launch != kNoIndex && first_queued > 0) {
    // Earlier work: launched before the recording, or before the first
    // launch; clipped to the wait.
    const std::int64_t wait_end = c.ts(first_event), wait_start = wait_end - first_queued;
    std::vector<Interval> earlier;
    for (const DeviceOp& op : c.device) {
      const bool before = op.before_recording || (op.launch != kNoIndex && c.ts(op.launch) < c.ts(first_launch));
      if (before && op.end > wait_start && op.start < wait_end) {
        earlier.push_back({std::max(op.start, wait_start), std::min(op.end, wait_end)});
      }
    }
    first_queued = sat_sub(first_queued, union_length(std::move(earlier)));
  }
  const bool start_offset = has_later && first_queued >= kStartMinNs &&
                            static_cast<double>(first_queued) >= kStartFactor * static_cast<double>(later);
  // The queue reading needs the device busy through the waits, summed per
  // activity and over their union (SGLang: 537 of 542 short waits behind a
  // busy GPU, but the union is mostly a 463 ms wait on an idle device: work
  // held by a dependency, which no GPU speed-up shortens).
  const bool backed_up = overall >= kBackedUpNs &&
                         static_cast<double>(waited_busy) >= kQueueBusyShare * static_cast<double>(waited) &&
                         static_cast<double>(union_busy) >= kQueueBusyShare * static_cast<double>(union_ns);
  if (!start_offset && !backed_up) return;
  // The later offsets negative beyond rounding: the device's clock runs
  // behind the host's (clock_skew says so), and no offset in the trace is
  // a lane offset to judge: a "-132.1 us later" baseline is the skew itself
  // (issue 38's fourth round: a B200 training step).
  if (has_later && later < -1'000) return;

  const DeviceOp& mx = c.device[max_op];
  Finding f;
  f.id = "cpu_gpu_offset";
  if (start_offset) {
    f.severity = FindingSeverity::kWarning;
    f.title = std::string("CPU→GPU lane offset at the start: the ") +
              (per_step.size() >= 2 ? "first step's kernel" : "first kernel") + " starts " + format_ns(first) + " after its launch vs " + format_ns(later) + " later";
    f.impact_ns = sat_sub(first_queued, later);  // later may be negative (a kernel before its launch)
  } else {
    f.severity = FindingSeverity::kInfo;
    f.title = "GPU queue backed up: device work starts " + format_ns(overall) +
              " after its launch call starts (median), up to " + format_ns(mx.start - c.ts(mx.launch));
    f.impact_ns = 0;  // the CPU running ahead of a busy GPU costs nothing
  }
  // The queue grows: no typical offset, a rate. Over the steps, else over
  // the calls of the repeated range (DiagnoseContext::launch_rate(), the
  // iteration the graph advice counts: an NVTX "step" range of tprof
  // record; review 2026-11-26, R3 on record_plain_4096_nvtx).
  std::vector<std::int64_t> iter_offsets = per_step, iter_numbers = step_numbers;
  std::int64_t host_ns = 0, work_ns = 0;
  std::string unit = "step", units = "steps";
  std::vector<Interval> work;
  if (!c.steps.steps.empty()) {
    for (const DeviceOp& op : c.device) {
      if (op.step >= 0) work.push_back({op.start, op.end});
    }
    for (const StepStat& st : c.steps.steps) sat_acc(host_ns, st.dur_ns);
  } else if (const DiagnoseContext::LaunchRate rate = c.launch_rate(); rate.iterations > 0 && rate.unit.size() > 8) {
    // unit: "\"NAME\" range"
    const std::string_view range_name = std::string_view(rate.unit).substr(1, rate.unit.size() - 8);
    unit = rate.unit;
    units = rate.unit + "s";
    std::vector<std::pair<std::int64_t, std::int64_t>> launched;  // launch ts, device op index
    for (std::size_t i = 0; i < c.device.size(); ++i) {
      if (c.device[i].launch != kNoIndex) launched.emplace_back(c.ts(c.device[i].launch), static_cast<std::int64_t>(i));
    }
    std::sort(launched.begin(), launched.end());
    std::int64_t n = 0;
    for (std::uint32_t e : c.host_ops) {
      if (c.kind(e) != EventKind::kUserAnnotation || c.dur(e) <= 0 || c.name(e) != range_name) continue;
      ++n;
      sat_acc(host_ns, c.dur(e));
      auto it = std::lower_bound(launched.begin(), launched.end(), std::make_pair(c.ts(e), std::int64_t{-1}));
      bool first_in_range = true;
      for (; it != launched.end() && it->first < c.end(e); ++it) {
        const DeviceOp& op = c.device[static_cast<std::size_t>(it->second)];
        work.push_back({op.start, op.end});
        if (first_in_range) {
          iter_offsets.push_back(op.start - c.ts(op.launch));
          iter_numbers.push_back(n);
          first_in_range = false;
        }
      }
    }
  }
  std::size_t rising = 0;
  for (std::size_t i = 1; i < iter_offsets.size(); ++i) rising += iter_offsets[i] > iter_offsets[i - 1] ? 1 : 0;
  // And it grows after the first step too, by at least half of its whole
  // rise: a queue that fills in the first step and then stays level (issue
  // 38's thirteenth round: a vLLM decode's offsets 0.02, 21.8, 25.1 ... 25.7
  // ms, "grows 3.665 ms a range") is a backed-up queue, not a growing one.
  const bool grows_later =
      iter_offsets.size() >= 2 &&
      2 * (static_cast<double>(iter_offsets.back()) - static_cast<double>(iter_offsets[1])) >=
          static_cast<double>(iter_offsets.back()) - static_cast<double>(iter_offsets.front());
  const bool growing = !start_offset && iter_offsets.size() >= kMinGrowingSteps &&
                       static_cast<double>(rising) >= kGrowingShare * static_cast<double>(iter_offsets.size() - 1) &&
                       static_cast<double>(iter_offsets.back()) >=
                           kGrowingFactor * static_cast<double>(std::max<std::int64_t>(1, iter_offsets.front())) &&
                       grows_later;
  std::int64_t growth = 0;
  if (growing) {
    // A queue that grows needs no busy-device test of its own: it is the
    // backed-up queue's rate. Without steps it may be the only reading.
    growth = (iter_offsets.back() - iter_offsets.front()) / static_cast<std::int64_t>(iter_offsets.size() - 1);
    work_ns = union_length(std::move(work));
    f.title = "GPU queue grows about " + format_ns(growth) + " a " + unit + ": the host enqueues " +
              std::to_string(c.steps.steps.empty() ? iter_offsets.size() : c.steps.steps.size()) + " " + units + " in " + format_ns(host_ns) + ", the GPU needs " +
              format_ns(work_ns) + " for their work (it starts " + format_ns(iter_offsets.front()) + " after its launch in " +
              unit + " " + std::to_string(iter_numbers.front()) + ", " + format_ns(iter_offsets.back()) + " in " + unit +
              " " + std::to_string(iter_numbers.back()) + ")";
  }
  f.evidence.text("pattern", start_offset && backed_up ? "start_offset+queue_backed_up"
                              : start_offset           ? "start_offset"
                                                       : "queue_backed_up");
  // A growing queue's numbers first: the default text quotes the first ones.
  if (growing) f.evidence.num("growth_per_step_ns", growth).num("steps_host_ns", host_ns).num("steps_device_work_ns", work_ns);
  // The default text quotes the first fields: the first step's offset for
  // a start offset, the median and the longest for a backed-up queue; no
  // step number where there are no steps (issue 38 review: "first_step -1").
  if (start_offset) {
    f.evidence.num("first_offset_ns", first).num("first_launch_call_ns", first_call_ns);
    if (first_step >= 0) f.evidence.num("first_step", first_step);
    f.evidence.num("later_median_offset_ns", later).num("median_offset_ns", overall);
  } else {
    f.evidence.num("median_offset_ns", overall)
        .num("max_offset_ns", mx.start - c.ts(mx.launch))
        .num("first_offset_ns", first)
        .num("first_launch_call_ns", first_call_ns);
    if (first_step >= 0) f.evidence.num("first_step", first_step);
    f.evidence.num("later_median_offset_ns", later);
  }
  if (start_offset) f.evidence.num("max_offset_ns", mx.start - c.ts(mx.launch));
  if (mx.step >= 0) f.evidence.num("max_offset_step", c.step_number(mx.step));
  f.evidence.num("waited_ns", waited)
      .num("waited_busy_ns", waited_busy)
      .num("waits", waits)
      .num("busy_waits", busy_waits)
      .num("waits_union_ns", union_ns)
      .num("waits_union_busy_ns", union_busy);
  if (!per_step.empty()) f.evidence.ints("step_offsets_ns", per_step).ints("steps", step_numbers);
  if (growing && per_step.empty()) f.evidence.ints("range_offsets_ns", iter_offsets).text("iteration", unit);
  if (first_launch != kNoIndex) f.evidence.event("first_launch", c.ref(first_launch));
  if (first_event != kNoIndex) f.evidence.event("first_kernel", c.ref(first_event));
  f.evidence.event("max_offset_kernel", c.ref(mx.event));
  if (start_offset && first_step > 0) {
    // Steps ran before the recording: no cold start, and no warm-up step
    // removes the wait (issue 38's seventeenth round: an NPU's step 50,
    // its first launch a synchronous input copy, told to warm up).
    f.advice = "Find what the first launch of step " + std::to_string(first_step) + " waited for: steps #0 to #" +
               std::to_string(first_step - 1) +
               " ran before the recording, so it is no cold start that a warm-up step removes; work queued before "
               "the recording began, or a copy staged through pageable memory (pin the host buffer, non_blocking=True), "
               "holds it. The later steps' launch latency is " + format_ns(later) + ".";
  } else if (start_offset) {
    f.advice = "Start the profiler after a warm-up step (" +
               c.schedule_call(std::max<std::int64_t>(1, static_cast<std::int64_t>(c.steps.steps.size()))) + ") or run "
               "a few iterations before profiling, and judge launch latency from the later steps (" +
               format_ns(later) + "), not the first (" + format_ns(first) +
               "). The profiler's activity-buffer request and one-time setup (context, cuBLAS workspace, lazy "
               "module loading) delay only the first kernels.";
  } else {
    // What the queue waits behind: the device activity with the most GPU
    // time, communication named as such, never given compute advice. Where
    // compute overlaps most of the collectives (on their own stream), the
    // computation with the most time: the queue backs up behind it (issue
    // 38's nineteenth round: DeepEP's combine, 49 ms on a side stream of an
    // H800 rank, 4 ms of it exposed, was "the most GPU time").
    const bool comm_overlapped = c.comm_overlap().mostly_overlapped();
    std::unordered_map<std::string_view, std::int64_t> by_name;
    std::string_view top;
    std::int64_t top_ns = -1;
    bool top_comm = false;
    // First the computation alone where the collectives overlap it, else
    // everything; the collectives only where nothing else ran.
    for (const bool comm_only : {false, true}) {
      for (const DeviceOp& op : c.device) {
        const bool is_comm = op.cls == DeviceClass::kComm;
        if (comm_only ? !is_comm : (comm_overlapped && is_comm)) continue;
        std::int64_t& ns = by_name[c.name(op.event)];
        sat_acc(ns, op.end - op.start);
        if (ns > top_ns || (ns == top_ns && c.name(op.event) < top)) {
          top_ns = ns;
          top = c.name(op.event);
          top_comm = is_comm;
        }
      }
      if (top_ns >= 0) break;
    }
    f.evidence.text("top_device_activity", std::string(top)).num("top_device_activity_ns", top_ns);
    // Its rate against the peak, said here: a pointer to "the kernel-class
    // findings" sent the reader to nothing where none fired (review
    // 2026-11-26, R9: H200 4096 cold_compile, cold_fused, warm_fused).
    const std::string rate = top_comm ? std::string() : gemm_rate_text(c, top);
    // Checked against the critical path: where host work holds a good part
    // of it, the host is not "nothing to fix" (issue 37, item 5).
    const double host_share = c.host_path_share();
    f.evidence.real("host_critical_path_pct", 100.0 * host_share);
    const bool host_on_path = host_share >= kHostPathShare;
    // A queue that backs up while the device works says nothing of a window
    // the GPU mostly idles through (issue 38's eighth round, from its
    // scoring half: "nothing to fix on the host" where the GPU idled 97% of
    // 3.9 s around 50 ms of device work).
    const DiagnoseContext::BusyWindow bw = c.gpu_busy_window();
    if (bw.busy_share() < 0.5) {
      f.evidence.real("gpu_busy_pct", 100.0 * bw.busy_share());
      f.advice = "Look at where the GPU idles first: it is busy only " + format_pct(100.0 * bw.busy_share()) + " of " +
                 (c.steps.steps.empty() ? std::string("the trace") : std::string("the steps")) +
                 ", and the queue backs up only while it works (launches wait a median " + format_ns(overall) +
                 " there, the host running ahead of " + std::string(top) + ", " + format_ns(top_ns) +
                 " of GPU time); the host side of the idle time is the verdict's and the other findings'.";
      out->push_back(std::move(f));
      return;
    }
    // "The GPU sets the pace": dropped under a host-side verdict by the
    // consistency pass, where the queue backs up only between the host's
    // stalls (issue 38's nineteenth round: modded-nanogpt's 2.2 ms launch
    // paths, host work 62% of the path, under a host-bound verdict).
    f.evidence.text("pace", "gpu");
    // "Nothing to fix on the host": dropped under a host-side verdict by the
    // consistency pass (src/analyze/consistency.h).
    if (!host_on_path && !top_comm) f.evidence.text("host_side", "nothing to fix");
    f.advice = std::string(host_on_path ? "Shorten the GPU work: the most GPU time goes to "
                                        : "Leave the host side alone and shorten the GPU work: the most GPU time goes to ") +
               std::string(top) + " (" + format_ns(top_ns) + (rate.empty() ? "" : ", " + rate) + ")" +
               (top_comm ? ", a collective: see the communication findings and the rank analysis."
                : host_on_path
                    ? std::string(": the GPU sets the pace; the ") + (growing ? "growing " : "") +
                          "queue is the host running ahead, yet host work is " + format_pct(100.0 * host_share) +
                          (c.steps.steps.empty() ? " of the critical path" : " of the steps' critical path") +
                          ", so the host side matters too."
                    : std::string(": the GPU sets the pace; the ") + (growing ? "growing " : "") +
                          "queue is the host running ahead, nothing to fix on the host.") +
               (growing ? " Each step's launches wait about " + format_ns(growth) +
                              " longer than the last step's in the stream's queue, because the CPU runs ahead of a "
                              "busy GPU, which costs no step time."
                        : " Launches wait a median " + format_ns(overall) +
                              " in the stream's queue because the CPU runs ahead of a busy GPU, which costs no step "
                              "time.");
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
