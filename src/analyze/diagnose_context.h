// What every diagnose rule reads, computed once per trace: steps, device
// activities classified and linked to their launch calls, runtime calls,
// torch's key_averages (lazily), and helpers that turn events into evidence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/causal/names.h"
#include "src/trace/id_index.h"
#include "src/analyze/intervals.h"
#include "src/analyze/untimed_device.h"
#include "tprof/causal.h"
#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/steps.h"
#include "tprof/trace.h"

namespace tprof::internal {

class IdlePartition;
struct Efficiency;
struct Nesting;
struct LegacySpans;
// What a device activity does (HTA's and TraceLens' categories).
enum class DeviceClass : std::uint8_t {
  kCompute = 0,  // kernels that are not communication
  kComm,         // NCCL / RCCL kernels
  kMemcpy,       // gpu_memcpy
  kMemset,       // gpu_memset
  kRange,        // cuda_profiler_range: counters, not measured times (DiagnoseContext::ranges)
};

struct DeviceOp {
  std::uint32_t event = kNoIndex;
  std::uint32_t lane = kNoIndex;
  std::int32_t device = -1;
  std::int64_t stream = -1;
  std::int64_t start = 0;  // ns, absolute
  std::int64_t end = 0;
  DeviceClass cls = DeviceClass::kCompute;
  std::uint32_t launch = kNoIndex;  // the runtime call with the same correlation id
  // Index into DiagnoseContext::steps.steps, by launch time, else start;
  // work launched before the recording is the first step's where it runs
  // in it, else -1.
  std::int32_t step = -1;
  // Launched before the recording began: no launch call of its own in the
  // trace and a correlation id below every linked activity's.
  bool before_recording = false;
};

class DiagnoseContext {
  // Declared before `trace`, which refers to its copy when it holds one.
  RetimedTrace retimed_;

 public:
  // with_averages: also compute torch's key_averages() rows, on a second
  // thread while this one builds the rest (diagnose needs both).
  explicit DiagnoseContext(const Trace& trace, bool with_averages = false);

  // The trace diagnose reads: the caller's, or a copy of it whose device
  // activities stamped at ts 0 are placed after their launch calls
  // (untimed_device.h; untimed_device() says how many).
  const Trace& trace;
  StepsSummary steps;               // steps.steps sorted by start
  std::vector<DeviceOp> device;     // kernels, memcpy, memset (not gpu_user_annotation), by start
  // CUPTI range-profiler ranges (cls kRange), by start: device work with
  // hardware counters, whose times are the profiling span split evenly, so
  // they stay out of `device` and of every time-based measure. Linked to
  // their launch by the "correlation" arg, else in order to the trace's
  // kernel launch calls when the counts match (HTA's cupti_counter_analysis).
  std::vector<DeviceOp> ranges;
  std::vector<std::uint32_t> runtime;   // cuda_runtime / cuda_driver / cuda_sync on CPU lanes, by ts
  std::vector<std::uint32_t> host_ops;  // cpu_op / user_annotation / python_function on CPU lanes, by ts
  // Calls fn(e) for the events of host_ops and runtime merged in ts order
  // (a host op first when both start at once): every host-side event in
  // one pass, for rules that nest calls inside ops per lane.
  template <typename Fn>
  void for_each_host_event(Fn fn) const {
    std::size_t i = 0, j = 0;
    while (i < host_ops.size() || j < runtime.size()) {
      if (j >= runtime.size() || (i < host_ops.size() && ts(host_ops[i]) <= ts(runtime[j]))) {
        fn(host_ops[i++]);
      } else {
        fn(runtime[j++]);
      }
    }
  }
  // Calls fn(r) for the runtime calls made on host event e's thread while
  // it ran (starting inside it), in ts order: the calls an op makes.
  template <typename Fn>
  void for_each_runtime_in(std::uint32_t e, Fn fn) const {
    auto it = std::lower_bound(runtime.begin(), runtime.end(), ts(e),
                               [this](std::uint32_t r, std::int64_t v) { return ts(r) < v; });
    for (; it != runtime.end() && ts(*it) < end(e); ++it) {
      if (trace.events.lane[*it] == trace.events.lane[e]) fn(*it);
    }
  }
  std::int64_t start_ns = 0;        // first event
  // The last event's end, leaving out host events that start after the
  // profiler's own "Trace" span ended and Kineto's "Record Window End"
  // marker: what a thread recorded after torch.profiler stopped is no part
  // of the run (issue 38 review, a vLLM trace: two cudaEventQuery calls and
  // the marker 90-134 ms after the stop made a 89%-busy GPU "unclear").
  // Device activity after the span still counts (work queued before it).
  std::int64_t end_ns = 0;
  bool has_device() const { return !device.empty(); }
  // The device activities that had no start time (ts 0) and were placed
  // after their launch calls, and the host's first event's distance from
  // ts 0: 0 and 0 for a trace whose activities all carry times.
  std::int64_t untimed_device() const { return retimed_.untimed; }
  std::int64_t untimed_lead_ns() const { return retimed_.lead_ns; }
  std::uint32_t untimed_first() const { return retimed_.first; }
  // The time findings are weighed against: the steps' total, or the trace's
  // span when it has no steps.
  std::int64_t window_ns() const;

  // torch's key_averages() rows and the two totals torch prints under its
  // table: computed by the constructor when with_averages, else on first
  // use. The lazy members (these, idle(), efficiency()) are built once, by
  // the first thread that asks; the others wait for it (diagnose runs its
  // rules on several threads).
  const std::vector<StatRow>& averages() const;
  std::int64_t self_cpu_total_ns() const;
  std::int64_t self_device_total_ns() const;
  // The host against the device, as the overhead- and compute-bound
  // verdicts weigh them: torch's two totals, except where the steps are a
  // host range (tprof record's NVTX ranges: a trace of the whole program,
  // its start-up and exit in the totals): then the Self CPU of the host
  // events that start inside the steps and the time of the device work
  // they launched. Built on first use.
  struct HostVsDevice {
    std::int64_t cpu_ns = 0;
    std::int64_t device_ns = 0;
    bool within_steps = false;
    const char* cpu_label = "Self CPU total";    // how a line names the two
    const char* device_label = "Self CUDA total";
  };
  const HostVsDevice& host_vs_device() const;
  // The length of merged intervals inside the window host_vs_device()
  // measures: the steps where it counts within them, else the trace (what
  // of its Self CPU the host spent waiting, or the profiler took).
  std::int64_t covered_in_host_window(const std::vector<Interval>& merged) const;
  // The GPU idle time partitioned by cause (src/analyze/idle.h): built on
  // first use.
  const IdlePartition& idle() const;

  // Kernel classes and achieved rates against the device's peak
  // (src/analyze/efficiency.h): built on first use, like idle().
  const Efficiency& efficiency() const;

  // The causal model of the trace (tprof/causal.h): its graph replayed
  // without edits, with a critical path per step. Built on first use, like
  // idle().
  const CausalResult& causal() const;
  // Every lane's call tree (src/analyze/nesting.h): which event encloses
  // which, as torch builds prof.events()'s. Built on first use, like idle().
  const Nesting& nesting() const;
  // The legacy profiler's per-op device spans (src/analyze/legacy_spans.h):
  // built on first use, like idle(); the verdict and several rules ask.
  const LegacySpans& legacy_spans() const;
  // The profiler's own buffer requests: Kineto's "Activity Buffer Request"
  // complete events (a CUPTI overhead record), by start. Built on first
  // use; the idle partition, the critical path's host share and
  // profiler_buffer_request read them.
  const std::vector<std::uint32_t>& buffer_requests() const;
  // What a fix saves in the model: the trace replayed with `edits` (on
  // causal()'s graph) against the replay without them, summed over the
  // steps (the window without steps), and per step the median over the
  // steps (mean_median) of each step's saving. nullopt when an edit matches
  // nothing it can change (analyze_causal fails).
  struct ReplayedSaving {
    std::int64_t total_ns = 0;
    std::int64_t per_step_ns = 0;
  };
  std::optional<ReplayedSaving> replayed_saving(std::vector<WhatIfEdit> edits) const;
  // The device activity on the other end of causal()'s edge of `type` into
  // event e: for kSync, the activity whose end the call e waited for (the
  // edge into its end); for kStreamWait, the activity recorded by the
  // cudaEventRecord that device activity e waited on (the edge into its
  // start). The binding edge where one is, else the one whose source
  // happened last. kNoIndex when the graph has no such edge.
  std::uint32_t waited_for(std::uint32_t e, EdgeType type) const;
  // The share of causal()'s critical paths that is host work: the sum over
  // the steps (the window without steps) of their paths' cpu_bound and
  // data_loading time, over the sum of the steps' replayed time; 0 when
  // there is none.
  double host_path_share() const;

  // Index into steps.steps of the step whose [start, end) holds ts, or -1.
  int step_index_at(std::int64_t ts) const;
  // Its number N (ProfilerStep#N), or -1.
  std::int64_t step_number_at(std::int64_t ts) const;
  std::int64_t step_number(int index) const { return index < 0 ? -1 : steps.steps[static_cast<std::size_t>(index)].step; }
  // Per event (by index), the number N of the ProfilerStep#N it falls in,
  // or -1: device activity and profiler ranges by their op.step (the step
  // their launch call falls in, else their start: the SQL export's
  // kernels.step), every other event by its ts (step_number_at), metadata
  // never. The Python module's Trace.events() column `step`.
  std::vector<std::int64_t> event_step_numbers() const;

  // An event as evidence: name, lane label, ts, dur, step.
  EventRef ref(std::uint32_t event) const;
  // "cpu pid 1073 tid 1073", "gpu 0 stream 7".
  std::string lane_label(std::uint32_t lane) const;
  // The runtime call that launched device activity with this correlation id.
  std::uint32_t launch_for_correlation(std::int64_t correlation) const;
  // The innermost CPU op around host event `call` on its thread (cpu_op,
  // not ProfilerStep#): the latest-starting one that encloses it, with
  // skip_views view and metadata ops passed over (is_view_op). The walk
  // back from the call is bounded (512 host ops): an op that
  // started long before and still encloses it is an outer scope, the
  // nearer ones come first. kNoIndex when none is found.
  std::uint32_t enclosing_op(std::uint32_t call, bool skip_views) const;
  // The innermost host event (cpu_op, annotation, Python frame) on `lane`
  // that encloses [t0, t1] (starts at or before t0, ends at or after t1),
  // is not `self`, and `accept`s: the latest-starting such one, walking back
  // over at most `max_walk` host ops from t0 (an event that started long
  // before and still encloses it is an outer scope; the nearer ones come
  // first). kNoIndex when none is found. enclosing_op and the rules' own
  // questions about what a call or a record runs inside are this walk.
  template <class Accept>
  std::uint32_t innermost_enclosing(std::uint32_t lane, std::int64_t t0, std::int64_t t1, int max_walk, Accept accept,
                                    std::uint32_t self = kNoIndex) const {
    auto it = std::upper_bound(host_ops.begin(), host_ops.end(), t0, [&](std::int64_t v, std::uint32_t e) { return v < ts(e); });
    for (int n = 0; it != host_ops.begin() && n < max_walk; ++n) {
      const std::uint32_t e = *--it;
      if (e == self || trace.events.lane[e] != lane || end(e) < t1) continue;
      if (accept(e)) return e;
    }
    return kNoIndex;
  }

  // GPU busy time and the span it is measured over: each step's device
  // activity clipped to the step, summed over the steps; without steps, the
  // union of all device activity over the whole trace. Where the device
  // work the steps launched outlasts the steps themselves (the host runs
  // ahead of a queue: an event replay that launches 30 ms of work in 1.5 ms
  // of steps), the steps' spans are not where their work runs: the span is
  // the idle partition's window, the steps and the work they queued, and
  // busy is that window less its idle time (queued_ahead).
  struct BusyWindow {
    std::int64_t span_ns = 0;
    std::int64_t busy_ns = 0;
    bool over_steps = false;
    bool queued_ahead = false;
    // busy / span; 1 without a window (nothing says the GPU idles).
    double busy_share() const {
      return span_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(span_ns) : 1.0;
    }
  };
  BusyWindow gpu_busy_window() const;
  // Whether the trace shows what launched work could wait for on the device:
  // a stream wait call (cudaStreamWaitEvent, hipStreamWaitEvent,
  // cuStreamWaitEvent) or a device with work on two streams or more. Without
  // either, work that starts late on an idle device waited on nothing the
  // trace holds (another process on the GPU, its clocks or power state,
  // module loading, the trace's clocks): stream_wait's remedy says so, and
  // the verdict is not dependency-bound. Built once: the verdict, the idle
  // account and several rules ask, and each answer scans every runtime call.
  bool dependency_visible() const;
  // The GPU idle time of a median step: the median over the steps of the
  // step's span minus its GPU busy time (mean_median: the mean of the two
  // middle steps of an even count); 0 without steps or device activity.
  // What a fix that removes idle time can save in a typical step.
  std::int64_t median_step_idle_ns() const;

  // Device activity on device `dev` (every stream; any device when dev < 0)
  // inside [from, to), as a union: was the GPU busy while the host waited?
  std::int64_t device_busy_ns(std::int32_t dev, std::int64_t from, std::int64_t to) const;
  // The collectives' time (union of kComm activities) and the part of it
  // no computation overlaps. Collectives on their own stream that compute
  // covers are not what the GPU waits on, whatever their summed share.
  // Built once (compute_bound and cpu_gpu_offset ask).
  struct CommOverlap {
    std::int64_t comm_ns = 0, exposed_ns = 0;
    bool mostly_overlapped() const { return comm_ns > 0 && 2 * exposed_ns < comm_ns; }
  };
  CommOverlap comm_overlap() const;
  // A device that starts launched work only in bursts at a fixed period,
  // idle in between with work queued and nothing running on any of its
  // streams: another context holds it in time slices (another process on
  // the GPU, MPS, vGPU). Per device where the waits show it
  // (docs/diagnose.md, device_time_sliced: >= 8 waits of >= 500 us, >= 75%
  // of them within 10% of their median, one ended by work that waits on no
  // peer, the regular waits >= 20% of the window). device_time_sliced
  // reports it; the verdict calls such steps shared-device. Built once
  // (src/analyze/time_slicing.cc).
  struct TimeSlicing {
    std::int32_t device = 0;
    std::vector<Interval> waits;  // the regular waits, by start: launched work queued, nothing running
    std::size_t waits_all = 0;    // every wait of >= 500 us on the device, regular or not
    std::int64_t median_ns = 0, min_ns = 0, max_ns = 0, total_ns = 0;
    std::int64_t period_ns = 0;   // median from one burst's start to the next; 0 with one wait
    std::size_t witness = 0;      // index into device of the activity that ends a regular wait, not a collective
  };
  const std::vector<TimeSlicing>& time_slicing() const;
  // Every device's activity as merged intervals, by start.
  const std::vector<Interval>& device_busy() const { return busy_all_.intervals(); }

  // "HIP" when the trace's runtime calls are hip* (ROCm), else "CUDA": the
  // API and tools named in titles and advice.
  std::string_view api() const { return hip_ ? "HIP" : "CUDA"; }
  bool is_hip() const { return hip_; }
  // Whether the recorded program runs PyTorch, so advice may name torch's
  // API (torch.compile, DataLoader, torch.cuda.graphs, torch.profiler).
  // Every trace torch.profiler writes does. A tprof capture does when it
  // holds an ATen op (aten::...), a Python function, a PyTorch or Inductor
  // kernel (at::..., triton_...), a torch.compile region, or comes from a
  // Python process (tprof record of a Python program records CUDA calls and
  // kernels, no ATen op). Any other tprof capture is a C++/CUDA program
  // (examples/matmul_add's op::* ops, vecadd): its advice names CUDA's API
  // (stream capture and cudaGraphLaunch, fused kernels and cuBLASLt
  // epilogues, cudaMallocHost) and tprof's (tprof::schedule), like api()
  // names HIP's on ROCm traces and has_device() keeps GPU advice off
  // CPU-only ones.
  bool is_torch() const { return torch_; }
  // Whether the trace comes from a PyTorch without graph capture or
  // torch.compile: Kineto's first category names ("Operator", "Runtime"),
  // which PyTorch 1.9 renamed, or epoch-time stamps dated before PyTorch
  // 1.10's release (21 October 2021). graph_how() and fuse_how() then name the
  // upgrade (issue 38's fourteenth round: December 2020 BERT runs told to
  // use torch.compile(mode="reduce-overhead")).
  bool torch_before_graphs() const { return torch_before_graphs_; }
  // Whether the trace comes from a PyTorch without torch.compile: one
  // before graphs, or a Kineto trace of torch 2.0 or older whose events are
  // dated (epoch time) before PyTorch 2.0's release, 15 March 2023 (issue
  // 38's fifteenth round: a February 2023 CPU ResNet's batch norm was to be
  // folded "with torch.jit.freeze, or torch.compile"). compile_how(),
  // fuse_how() and graph_how() then name what that PyTorch has.
  bool torch_before_compile() const { return torch_before_compile_; }
  // Whether the trace runs torch's recurrent layers (aten::gru, aten::lstm,
  // aten::rnn_*, cuDNN's or MIOpen's RNN op): torch.compile breaks its
  // graph there, so graph_how() names capture by hand (issue 38's
  // fourteenth round: a GRU's inference told to use reduce-overhead).
  bool runs_rnn() const { return runs_rnn_; }
  // The kernel most of the device time runs in where kernels that runtime
  // launch calls (cudaLaunchKernel, hipLaunchKernel: not the driver API
  // Triton launches with) make outside any ATen op (no External id, no
  // enclosing cpu_op) hold half the kernel time or more: a C++/CUDA
  // extension called through pybind11, which torch.compile does not trace
  // unless it is registered as a torch.library custom op, so graph_how()
  // names capture by hand (issue 38's seventeenth round: a course's GEMM
  // extension told to use reduce-overhead). Empty otherwise, and on a
  // trace with no CPU op. Built on first use.
  const std::string& extension_kernel() const;
  // Recorded by tprof (its capture API or tprof record), not torch.profiler:
  // advice about the recording names tprof's settings.
  bool by_tprof() const { return trace.meta.producer == Producer::kTprof; }
  // The schedule that records `active` steps after a skipped and a warm-up
  // one, in the recorder's API: "tprof::schedule({.wait = 1, .warmup = 1,
  // .active = N})" in a tprof capture, else "torch.profiler.schedule(wait=1,
  // warmup=1, active=N)".
  std::string schedule_call(std::int64_t active) const;
  // Graph replay in the program's API: torch.compile(mode="reduce-overhead")
  // for PyTorch; stream capture for C++
  // ("cudaStreamBeginCapture/cudaStreamEndCapture once, then cudaGraphLaunch";
  // hip* on ROCm).
  std::string graph_how() const;
  // n / d to one decimal where it is not whole: "2", "1.5".
  static std::string count_per(std::int64_t n, std::int64_t d);
  // A host call that waits for the device: a synchronize (is_sync_call), a
  // memcpy without Async (is_blocking_memcpy), or an Async memcpy whose
  // copy goes from the device to pageable host memory, which returns only
  // once the copy is done (CUDA's API sync behaviour; Kineto names the copy
  // "Memcpy DtoH (Device -> Pageable)"; issue 38's seventh round: DLRM's
  // 880 us split-size read-back went uncounted).
  bool blocks_host(std::uint32_t e) const;
  // The runtime calls that block the host (blocks_host), merged: where it
  // waits for the device (the verdict's sync time, comm_exposed's host
  // waits). Computed once.
  const std::vector<Interval>& host_waits() const;
  // The DataLoader scopes (is_dataloader_scope: a DataLoader's __next__, a
  // DataPipe's iterator) on the host, merged: the input wait, which
  // dataloader_bound reports and the idle partition and
  // low_gpu_utilization leave to it. Computed once.
  const std::vector<Interval>& dataloader_scopes() const;
  // A multi-process DataLoader's workers starting before its first
  // __next__: the stretch of kWorkerSpawnNs or more with no op on that
  // call's thread, right after the iterator's seed draw (aten::random_
  // then .item(), in _BaseDataLoaderIter.__init__, which starts the workers
  // next); a spawn start re-imports the script in each worker (issue 38's
  // fifteenth round: a Windows CIFAR epoch, 11.9 s of its 12.8 s before
  // the first batch); a fork takes tens of milliseconds (the sixteenth
  // round: 26.7 ms for four workers, 28% of a 94 ms trace). Empty (start ==
  // end) when there is none. In dataloader_scopes.
  Interval dataloader_startup() const;
  // Where a trace without steps opens on launched work waiting with
  // nothing running on the device: [start_ns, first device activity) when
  // that wait (the idle partition's stream_wait and peers there) holds a
  // quarter of the trace or more. The device was busy with work the trace
  // does not hold (launched before the recording began: a previous
  // iteration, unsynchronized) or the host and device clocks disagree. The
  // verdict judges from its end (verdict.cc: the same test on its window);
  // low_gpu_utilization does too and sync_api names it (issue 38's
  // eighteenth round: LightLLM decodes profiled right after an
  // unprofiled step, "runs kernels 48.7% of the trace", the 101 ms wait
  // "another process on the GPU"). Empty (start == end) when none.
  Interval queued_lead() const;
  // Whether the first of four or more steps is a cold start: it lasts
  // kColdFirstStepFactor (10) times the later steps' median or more. The
  // verdict judges by the later steps where they agree on another verdict,
  // and low_gpu_utilization measures them alone; cold_start and the
  // blocking calls speak for the first (issue 38's eighteenth round: a
  // FlashInfer RoPE benchmark's first step, 30.1 ms of JIT and lazy module
  // loading, nine more of 123 us, GPU-bound, called host-bound).
  bool cold_first_step() const;
  // Whether a multi-process iterator's first __next__ (first_ns long, with
  // the workers' spawning before it, spawn_ns: dataloader_startup) is its
  // start-up, a one-time cost, against its later calls' lengths: it
  // lasts kDataLoaderStartupNs or more (or the spawning was seen), is the only call or
  // kFirstNextFactor times the later calls' median or more (issue 38's
  // fifth round: one 780 ms first __next__ made a start-up dominated
  // inference trace "input-bound"), and no later call waits half as long:
  // a later wait that long is the pipeline's pace, the workers taking that
  // long per batch, which the first batch paid too (issue 38's sixteenth
  // round: a MONAI pipeline's 8.27 s first __next__ called "its workers
  // starting" beside a 5.39 s wait mid-run, workers already spawned in
  // 127 ms).
  static bool first_next_is_startup(std::int64_t first_ns, std::int64_t spawn_ns, const std::vector<std::int64_t>& later);
  // The same, from the iterator's __next__ calls by start; false without one.
  bool first_next_is_startup(const std::vector<std::uint32_t>& calls, std::int64_t spawn_ns) const;
  static constexpr std::int64_t kFirstNextFactor = 5;
  // The host-to-device copies on the device where every one is from pinned
  // memory (pin_memory is on already), else 0.
  std::int64_t pinned_htod_copies() const;
  // The profiler timing each op with a pair of CUDA events (PyTorch's
  // fallback when CUPTI cannot be used, and the legacy profiler's
  // use_cuda=True): the trace's cudaEventRecord calls number at least 1.5
  // a CPU op, 100 or more (issue 38's fifteenth round: 1,717 records and
  // 1,668 creates around 834 ops, every view included, called "batch
  // them"). Those calls are the profiler's, not the program's. Built on
  // first use.
  bool profiler_event_timing() const;
  static constexpr std::int64_t kDataLoaderStartupNs = 100'000'000;
  static constexpr std::int64_t kWorkerSpawnNs = 10'000'000;
  // The device time of the copy that launch call e made to pageable host
  // memory (an Async device-to-host copy), or -1 when e made none.
  std::int64_t pageable_readback_ns(std::uint32_t e) const;
  // Host waits in the middle of a step: a synchronize or blocking copy
  // (blocks_host) with device work launched before
  // and after it in its step. A graph cannot capture them (a value read
  // back, a data-dependent shape: .item(), nonzero, masked_select);
  // torch.compile breaks its graph at each (issue 38, fifth round). A sync
  // that ends the step waits for its work, after the replay; one that
  // starts it, before. Without steps there is no iteration to be in the
  // middle of (a per-iteration sync of a whole program's trace ends its
  // iteration): none. Computed once.
  struct CaptureBlockers {
    std::int64_t count = 0;                                 // over every step
    std::vector<std::pair<std::string, std::int64_t>> ops;  // the op around each (the call where none), most first
  };
  const CaptureBlockers& capture_blockers() const;
  // "" without capture_blockers(); else the sentence graph advice gives
  // in place of "replay the step as a graph": "A CUDA graph (...) cannot
  // replay the step yet: it waits for the GPU N times a step in the middle
  // (aten::index x4, ...), and those waits must go first."
  std::string graph_blocker() const;
  // Fusion in the program's API: "torch.compile" for PyTorch, "a fused
  // kernel or a cuBLASLt epilogue" (hipBLASLt on ROCm) for C++.
  std::string fuse_how() const;
  // Compiling a region of Python: "torch.compile", or on a PyTorch before
  // it "TorchScript (torch.jit.script; torch.compile needs PyTorch 2.0)".
  std::string compile_how() const;
  // Running without autograd: "torch.inference_mode()", or on a PyTorch
  // before 1.9 (by its event names, or dated before 15 June 2021)
  // "torch.no_grad() (torch.inference_mode needs PyTorch 1.9)".
  std::string inference_mode_how() const;
  // Launch calls of device work per iteration, for the "one graph replay
  // for N launch calls" advice: per step (the launch calls of the steps'
  // device work / the steps); without steps, per call of the user
  // annotation (an NVTX range such as "step") repeated most often, at least
  // 3 times, whose calls hold at least half the launches; else the trace's
  // launch calls with no iteration known (`iterations` 0, `unit` empty).
  struct LaunchRate {
    std::int64_t calls = 0;       // launch calls in the steps (the trace)
    std::int64_t iterations = 0;  // steps, or calls of the repeated range; 0 when unknown
    std::string unit;             // "step", "\"step\" range", or "" (unknown)
    std::int64_t per_iteration() const { return iterations > 0 ? calls / iterations : calls; }
  };
  LaunchRate launch_rate() const;
  // Graph launch calls (cudaGraphLaunch, hipGraphLaunch) in the trace.
  std::int64_t graph_launches() const { return graph_launches_; }
  // cudaStreamBeginCapture / hipStreamBeginCapture calls: the trace records
  // CUDA/HIP graph capture, whose eager warm-up runs are start-up, not steps.
  std::int64_t graph_captures() const { return graph_captures_; }

  // A forward-only (inference) recording: the trace records CPU ops, none of
  // them backward or an optimizer step (a *Backward* node, autograd's
  // evaluate_function, an aten::*_backward, Optimizer.step*), no optimizer
  // annotation (Optimizer.*) or torch/optim frame, and no device activity
  // is named backward. False where no CPU op is recorded (unknown).
  bool forward_only() const;

  // Kineto's launch shape of a kernel: "grid [x, y, z] block [x, y, z]"
  // from its args, or "" when absent. Parses the event's args.
  std::string launch_shape(std::uint32_t e) const;

  // The integer arg `key` of event e (e.g. a memcpy's "bytes"), or -1 when
  // absent or not an integer. Parses the event's args: not for every event.
  std::int64_t int_arg(std::uint32_t e, std::string_view key) const;

  EventKind kind(std::uint32_t e) const { return trace.events.kind[e]; }
  std::int64_t ts(std::uint32_t e) const { return trace.events.ts_ns[e]; }
  std::int64_t dur(std::uint32_t e) const { return trace.events.dur_ns[e]; }
  std::int64_t end(std::uint32_t e) const { return trace.events.ts_ns[e] + trace.events.dur_ns[e]; }
  std::string_view name(std::uint32_t e) const { return trace.name(e); }

 private:
  void set_averages(std::vector<StatRow> rows) const;
  void link_ranges(std::vector<std::uint32_t> events);
  IdIndex launch_by_corr_;
  // Merged device activity per device, (device, intervals) by device.
  std::vector<std::pair<std::int32_t, CoverageIndex>> busy_by_device_;
  CoverageIndex busy_all_;  // every device's activity, merged
  bool hip_ = false;
  bool torch_ = true;
  bool torch_before_graphs_ = false;
  bool torch_before_compile_ = false;
  bool torch_before_inference_mode_ = false;
  bool torch_before_graphs_by_date_ = false;  // not by its event names
  bool runs_rnn_ = false;
  mutable std::string extension_kernel_;
  std::int64_t graph_launches_ = 0;
  std::int64_t graph_captures_ = 0;
  mutable std::once_flag extension_once_;
  mutable std::once_flag averages_once_, efficiency_once_, idle_once_, causal_once_, host_vs_device_once_,
      capture_blockers_once_, host_waits_once_, busy_window_once_, dependency_once_, nesting_once_, queued_lead_once_,
      dataloader_once_, dataloader_startup_once_, legacy_spans_once_, buffer_requests_once_,
      profiler_event_timing_once_, comm_overlap_once_, time_slicing_once_;
  mutable CommOverlap comm_overlap_;
  mutable std::vector<TimeSlicing> time_slicing_;
  mutable std::vector<Interval> host_waits_, dataloader_scopes_;
  mutable Interval dataloader_startup_{0, 0};
  BusyWindow compute_busy_window() const;
  mutable BusyWindow busy_window_;
  mutable bool dependency_visible_ = false;
  mutable Interval queued_lead_{};
  mutable bool profiler_event_timing_ = false;
  mutable CaptureBlockers capture_blockers_;
  // (launch call, the copy's device time) of Async DtoH copies to pageable memory, by call.
  std::vector<std::pair<std::uint32_t, std::int64_t>> pageable_readbacks_;
  mutable HostVsDevice host_vs_device_;
  mutable std::optional<std::vector<StatRow>> averages_;
  mutable std::shared_ptr<const Efficiency> efficiency_;
  mutable std::shared_ptr<const IdlePartition> idle_;
  mutable std::shared_ptr<const CausalResult> causal_;
  mutable std::shared_ptr<const Nesting> nesting_;
  mutable std::shared_ptr<const LegacySpans> legacy_spans_;
  mutable std::vector<std::uint32_t> buffer_requests_;
  mutable std::int64_t self_cpu_total_ = 0, self_device_total_ = 0;
};

// The remedy for launch overhead when each iteration (launch_rate()) makes
// one launch call: nothing within it can be replayed as a graph or fused,
// so give the launch more work or capture several iterations in one graph
// (in the program's API; no final period). "" when iterations make 2 or
// more launch calls each, or none is known.
std::string one_launch_remedy(const DiagnoseContext& c);

// Evidence "waits_for": the event c.waited_for(e, type) names, or the text
// "unknown (...)" saying that the trace records no such dependency (a
// finding that says a stretch waits shows what it waits on, or says the
// cause is unknown).
void add_waits_for(const DiagnoseContext& c, Evidence& ev, std::uint32_t e, EdgeType type);

// In a trace without steps, the range that holds the measured work: a user
// annotation (an NVTX range such as tprof record's --nvtx-range "measure")
// that occurs once, holds at least half of the launch calls and does not
// overlap [from, to) (from = to = 0: any); the shortest such.
// kNoIndex when none.
std::uint32_t measured_range(const DiagnoseContext& c, std::int64_t from, std::int64_t to);

// diagnose() on a context the caller built (with_averages: true), so a
// caller that also reads the context (tprof report) builds it once.
Diagnosis diagnose(const DiagnoseContext& c, const DiagnoseOptions& options = {});

// tprof kernels' statistics (include/tprof/kernels.h) of the context's
// device activity: compute_kernels() and the kernel_variance rule.
KernelsSummary kernel_stats(const DiagnoseContext& c);
// The range-profiler ranges by name with their counters summed (kernels.h).
std::vector<RangeStat> range_stats(const DiagnoseContext& c);
// tprof kernels' statistics of one group of activities (ops by start):
// count, total, mean, nearest-rank median and p90, cv, outliers (> 1.5x or
// < 0.5x the median, groups of at least 3).
KernelStat kernel_stat(const DiagnoseContext& c, std::string name, std::string category,
                       const std::vector<const DeviceOp*>& ops);

// "1.234 ms", "56.7 us", "890 ns": durations in evidence titles.
std::string format_ns(std::int64_t ns);
// "12.3%"
std::string format_pct(double pct);
// "1 call", "3 calls": n and the noun, plural unless n is 1.
std::string count_of(std::int64_t n, std::string_view noun);
// Which collective a communication activity runs: its own "Collective
// name", else what the ops around its launch say (record_param_comms' arg,
// the c10d op), else its kernel's name (collective_kind_of); "other" when
// none says (a SendRecv kernel alone: NCCL's send/receive and all-to-all).
std::string collective_kind(const DiagnoseContext& c, const DeviceOp& op);

// True when s contains needle, ASCII case-insensitively.
bool contains_ci(std::string_view s, std::string_view needle);
// True for "ProfilerStep#N" names and torch's "ProfilerStep*" key.
inline bool is_profiler_step(std::string_view name) { return name.starts_with("ProfilerStep"); }

// .item(): aten::item around the aten::_local_scalar_dense that copies the
// value to the host, waiting for the device first.
inline bool is_scalar_read(std::string_view name) {
  return name == "aten::item" || name == "aten::_local_scalar_dense";
}
// `name`, cut to 60 characters with "..." for a finding's title.
std::string title_name(std::string_view name);
// `text` with its first letter in upper case (ASCII): a clause as a sentence.
std::string capitalized(std::string_view text);

// Adds "steps" (the first 32 step numbers, so lists stay readable on long
// traces) and "steps_count" (how many there are in all) to `ev`.
void add_steps(Evidence& ev, std::vector<std::int64_t> steps);

// The middle value: the upper one of an even count (v[n / 2]); 0 when empty.
std::int64_t upper_median(std::vector<std::int64_t> v);
// The lower one of an even count (v[(n - 1) / 2]); 0 when empty.
std::int64_t lower_median(std::vector<std::int64_t> v);
// The mean of the two middle values of an even count (truncated toward
// zero), the middle one of an odd count; 0 when empty (tprof compare's and
// the ranks view's median).
std::int64_t mean_median(std::vector<std::int64_t> v);
// The median absolute deviation from the median (both mean_median's); 0
// when empty.
std::int64_t mad(std::vector<std::int64_t> v);

// An op's "Input Dims" as written ("[[2, 3072], [3072, 1024]]"), "" when
// not recorded: calls on different shapes are different work.
std::string input_dims_text(const Trace& t, std::uint32_t e);

// The trace's traceName as written, its quotes off; "" when absent.
std::string_view trace_name(const Trace& t);
// The host a trace written by torch's tensorboard_trace_handler names in
// its traceName (".../HOST_PID.TIME.pt.trace.json"): "DESKTOP-VR1IOQL",
// "dockz27-a5425.compute.dtu.dk"; "" where the name is not of that form.
std::string_view trace_host_name(const Trace& t);

// Whether any op in the trace records its input shapes ("Input Dims"):
// record_shapes was on, and a missing shape is not the setting's.
bool records_shapes(const DiagnoseContext& c);

// distributedInfo.world_size of the trace, or -1 when absent or not a positive integer.
std::int64_t world_size(const Trace& t);
// Nearest rank on sorted, non-empty values: the smallest value with at
// least q of them at or below it.
std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, double q);

// True for names of synchronizing runtime calls (cudaDeviceSynchronize,
// cudaStreamSynchronize, cudaEventSynchronize, hip*...).
bool is_sync_call(std::string_view name);
// Device memory returned to / taken from the driver: the CUDA and HIP
// runtimes' and the driver's names, the async pool variants included.
bool is_device_free(std::string_view name);
bool is_device_malloc(std::string_view name);
// is_dataloader_scope, is_blocking_memcpy, is_comm_kernel, is_graph_launch:
// src/causal/names.h (the causal graph's too).

}  // namespace tprof::internal
