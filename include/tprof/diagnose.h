// tprof/diagnose.h — read a trace the way an expert would: per-step verdicts,
// findings with evidence, and the peers' breakdowns by their own definitions.
//
//   tprof::Diagnosis d = tprof::diagnose(trace);
//   std::cout << tprof::format_diagnosis_text(trace, d);   // verdict first
//   for (const tprof::Finding& f : d.findings) std::puts(f.id.c_str());
//
// Every rule lives in its own file under src/analyze/rules/ and is listed in
// docs/diagnose.md with its definition, thresholds and origin (the blog's
// cheatsheet, HolisticTraceAnalysis, TraceLens, the TensorBoard plugin,
// Nsight Systems). The JSON form (format_diagnosis_json) is a stable
// contract: ids never change meaning; additions are fine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprof/steps.h"
#include "tprof/trace.h"

namespace tprof {

enum class FindingSeverity : std::uint8_t { kInfo = 0, kWarning = 1, kCritical = 2 };
std::string_view severity_name(FindingSeverity s);

// An event a person can click on in Perfetto: its name, lane, start (ns,
// absolute, as in the trace) and the ProfilerStep it falls in (-1: none).
struct EventRef {
  std::string name;
  std::string lane;  // "cpu pid 1073 tid 1073", "gpu 0 stream 7"
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t step = -1;
};

// Ordered named values: numbers (ns, counts, percentages), text, event
// references, lists of those. Written as one JSON object.
class Evidence {
 public:
  enum class Kind : std::uint8_t { kInt, kReal, kText, kEvent, kEvents, kInts, kTexts };
  struct Field {
    std::string key;
    Kind kind = Kind::kInt;
    std::int64_t i = 0;
    double d = 0;
    std::string s;
    std::vector<EventRef> events;  // kEvent: one element
    std::vector<std::int64_t> ints;
    std::vector<std::string> texts;
  };

  Evidence& num(std::string key, std::int64_t v);
  Evidence& real(std::string key, double v);
  Evidence& text(std::string key, std::string v);
  Evidence& event(std::string key, EventRef e);
  Evidence& events(std::string key, std::vector<EventRef> e);
  Evidence& ints(std::string key, std::vector<std::int64_t> v);
  Evidence& texts(std::string key, std::vector<std::string> v);

  const std::vector<Field>& fields() const { return fields_; }
  // The field named `key`, or nullptr.
  const Field* find(std::string_view key) const;

 private:
  std::vector<Field> fields_;
};

// A stretch of time [start, end) in ns (absolute, as EventRef::ts_ns).
struct TimeRange {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

struct Finding {
  std::string id;  // stable snake_case: "overhead_bound", "cold_start", ...
  FindingSeverity severity = FindingSeverity::kInfo;
  std::string title;  // one line with the key number
  Evidence evidence;
  std::string advice;
  // Time it could save (ns) in the window: the steps, or the whole trace
  // without steps; findings and causes are ordered by it. 0 for notes that
  // name no saving (trace health, where the time goes).
  std::int64_t impact_ns = 0;
  // The same per recorded step: impact_ns / the steps (impact_ns without
  // steps), unless the rule measured it per step itself.
  std::int64_t impact_per_step_ns = 0;
  // The GPU idle time this finding accounts for: sorted, disjoint ranges
  // inside Diagnosis::idle's spans, none of them claimed by another finding
  // (docs/diagnose.md, "GPU idle time"); empty for findings about other
  // things. idle_ns is their total.
  std::vector<TimeRange> idle_claim;
  std::int64_t idle_ns = 0;
};

// Why the device was idle: each stretch of GPU idle time has exactly one
// cause (docs/diagnose.md, "GPU idle time"; ids from idle_cause_id()).
enum class IdleCause : std::uint8_t {
  kLaunching = 0,      // "launching": the host dispatching and launching op after op
  kHostWork,           // "host_work": 1 ms or more of recorded host work without a launch, a
                       // DataLoader's __next__, or a CPU op of 50 us or more launching nothing
  kUnrecorded,         // "unrecorded": 1 ms or more where the trace records nothing
  kBlockedSync,        // "blocked_sync": the launching thread in a synchronize or a blocking copy
  kBlockedCopy,        // "blocked_copy": ... in an async copy that blocked (pageable memory)
  kBlockedAlloc,       // "blocked_alloc": ... in an allocator call (cudaMalloc, cudaFree, ...)
  kBlockedInit,        // "blocked_init": ... in context, module or library initialisation
  kBlockedLaunchQueue, // "blocked_launch_queue": ... in a launch stalled by a full launch queue
  kBlockedOther,       // "blocked_other": ... in another runtime call that blocked
  kStreamWait,         // "stream_wait": launched work waits on another stream or an event
  kPeers,              // "peers": launched collectives wait for the other ranks
  kProfiler,           // "profiler": the profiler's own overhead (Activity Buffer Request)
  kOutsideSteps,       // "outside_steps": idle time in the window but in no step
  kKernelLatency,      // "kernel_latency": work queued behind the work before it on its stream starts within 10 µs of it
};
inline constexpr int kIdleCauseCount = 14;
std::string_view idle_cause_id(IdleCause c);  // "launching", "blocked_sync", ...

// One stretch of GPU idle time and its cause.
struct IdleSpan {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  IdleCause cause = IdleCause::kLaunching;
  std::int64_t step = -1;              // the ProfilerStep number it lies in; -1: none
  std::uint32_t event = kNoIndex;      // the host event that explains it (blocking call, launch call, buffer request)
};

// The GPU's idle time, partitioned (docs/diagnose.md, "GPU idle time").
struct IdleAccount {
  // The window: the steps, from the first one's start to the end of the last
  // one or of the device work they launched; the whole trace without steps.
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  std::int64_t idle_ns = 0;  // the window minus device activity (every device and stream)
  std::array<std::int64_t, kIdleCauseCount> by_cause{};  // by IdleCause; sums to idle_ns
  std::vector<IdleSpan> spans;                           // sorted, disjoint; lengths sum to idle_ns
  // Whether the trace shows what launched work could wait for (a stream
  // wait call, or two streams on a device): without it stream_wait idle is
  // launched work held on the device by nothing the trace records.
  bool waits_visible = true;
};

// Per-step verdicts (docs/diagnose.md, "Verdicts").
enum class Verdict : std::uint8_t {
  kOverheadBound = 0,
  kComputeBound,
  kInputBound,
  kCommunicationBound,
  kSyncBound,
  kCpuOnly,
  kHostBound,        // the device idles while the host works without launching device work
  kDependencyBound,  // launched device work waits (other streams, other ranks), not the host
  kUnclear,          // no measured share supports a verdict
  kCopyBound,        // the GPU is busy, mostly with copies and memsets: transfers bound the run
  kSharedDevice,     // launched work waits for another context's time slice on the GPU (device_time_sliced)
};
inline constexpr int kVerdictCount = 11;
std::string_view verdict_name(Verdict v);  // "overhead-bound", ...

struct StepVerdict {
  std::int64_t step = -1;
  std::int64_t start_ns = 0;
  std::int64_t cpu_span_ns = 0;      // the ProfilerStep's duration
  std::int64_t cpu_busy_ns = 0;
  std::int64_t gpu_busy_ns = 0;      // device activity inside the step window
  std::int64_t gpu_work_ns = 0;      // device activity launched by the step (wherever it ran)
  std::int64_t work_end_ns = 0;      // the end of the last device activity it launched; 0 when none (gpu_work_ns 0)
  double gpu_idle_pct = 0;
  std::optional<std::int64_t> launch_offset_ns;  // first kernel start − its launch
  std::int64_t dataloader_ns = 0;
  std::int64_t sync_ns = 0;          // synchronizing runtime calls inside the step
  std::int64_t exposed_comm_ns = 0;  // communication kernels not overlapped by compute
  // The device's idle time in the step, by what it waited on (docs/diagnose.md, "Verdicts"):
  std::int64_t idle_launch_ns = 0;  // the host launching: inside launch calls, or under 1 ms between them
  std::int64_t idle_host_ns = 0;    // host events, no launch call, for 1 ms or more
  std::int64_t idle_queued_ns = 0;  // launched work not started yet (other streams, ranks)
  std::int64_t idle_unrecorded_ns = 0;  // stretches of 1 ms or more with no host event either
  std::array<std::int64_t, kIdleCauseCount> idle_by_cause{};  // the step's idle time by IdleCause (sums to its idle)
  Verdict verdict = Verdict::kCpuOnly;
};

// TraceLens' gpu_timeline.csv (TraceLens/TreePerf/gpu_event_analyser.py).
struct TracelensGpuTimeline {
  std::int64_t computation_time_ns = 0;
  std::int64_t exposed_comm_time_ns = 0;
  std::int64_t exposed_memcpy_time_ns = 0;
  std::int64_t busy_time_ns = 0;
  std::int64_t idle_time_ns = 0;
  std::int64_t total_time_ns = 0;
  std::int64_t total_comm_time_ns = 0;
  std::int64_t total_memcpy_time_ns = 0;
  // Not TraceLens' own rows: the device activities it leaves out (no launch
  // its call tree links: an unnamed launch call, a launch before the
  // recording), so a reader can see why its busy time is below ours.
  std::int64_t left_out_activities = 0;
  std::int64_t left_out_ns = 0;
  // Not TraceLens' rows either: the collectives its names ("nccl",
  // "rccl", "cross_device_reduce") miss, which it counts as computation
  // (DeepEP's dispatch and combine, MSCCL++'s kernels: the kernel-class
  // table's communication), so a reader can see why its exposed
  // communication is below ours (issue 38's eighteenth round).
  std::int64_t comm_as_computation = 0;
  std::int64_t comm_as_computation_ns = 0;
};

// HolisticTraceAnalysis' temporal breakdown of one rank (get_temporal_breakdown),
// over the events HTA keeps (docs/diagnose.md); ns, never negative.
struct HtaTemporal {
  std::int64_t rank = 0;
  std::int64_t kernel_time_ns = 0;
  std::int64_t idle_time_ns = 0;
  std::int64_t compute_time_ns = 0;
  std::int64_t non_compute_time_ns = 0;
};

// HolisticTraceAnalysis' idle time breakdown of one stream of one rank
// (get_idle_time_breakdown: host wait, kernel wait, other); ns, never negative.
struct HtaIdle {
  std::int64_t rank = 0;
  std::int64_t stream = -1;  // the events' args "stream", as HTA reads it
  std::int64_t host_wait_ns = 0;
  std::int64_t kernel_wait_ns = 0;
  std::int64_t other_ns = 0;
};

// The TensorBoard plugin's overview, one step; the rows sum to the step.
struct TbPluginStep {
  std::int64_t step = -1;
  double kernel_us = 0, memcpy_us = 0, memset_us = 0, runtime_us = 0;
  double dataloader_us = 0, cpu_exec_us = 0, other_us = 0;
  double communication_us = 0;  // the plugin's Communication row (collectives)
};

struct Breakdowns {
  std::optional<TracelensGpuTimeline> tracelens_gpu_timeline;  // traces with device activity
  std::vector<HtaTemporal> hta_temporal;
  std::vector<HtaIdle> hta_idle;  // one per (rank, stream), streams in order of first appearance
  std::vector<TbPluginStep> tb_plugin_steps;
};

// A root cause: the findings that describe one problem, read together
// (docs/diagnose.md, "Causes"). Launch overhead gathers overhead_bound,
// low_gpu_utilization, recurring kernel gaps, short-kernel launch stats and
// recurring dispatch gaps; a cold start gathers cold_start, the first-call
// dispatch gap, the first step's one-off kernel gap and launch offset; every
// other finding is a cause of its own.
struct Cause {
  std::string id;     // "launch_overhead", "cold_start", ...; a lone finding's id
  std::string title;  // one line; a lone finding's title
  FindingSeverity severity = FindingSeverity::kInfo;  // the strongest finding's
  // What its fix saves: the trace's causal model replayed with the what-if
  // edit that expresses the fix (`whatif`) against the replay without it,
  // summed over the steps (per step: the median step's saving); where no
  // edit expresses the fix, the largest of its findings' estimates (they
  // overlap: never summed). docs/diagnose.md, "Causes".
  std::int64_t impact_ns = 0;
  std::int64_t impact_per_step_ns = 0;  // the same, per step
  std::string saving_from;  // "replay", "estimate", or "" (no saving)
  std::string whatif;       // the edit replayed ("graph", "drop-sync:cudaStreamSynchronize"), "" for an estimate
  std::vector<std::size_t> findings;  // indices into Diagnosis::findings, strongest first
  std::size_t anchor = 0;             // index of the finding the title comes from
  std::optional<EventRef> look_at;    // the one event to open first, when a finding names one
};

// Host time of one CPU thread (traces without device activity): the union of
// its ops, annotations, Python functions and runtime calls over the window.
struct ThreadBusy {
  std::string lane;         // "cpu pid 1073 tid 1073"
  std::string thread_name;  // from metadata, "" when absent
  std::int64_t busy_ns = 0;
  std::int64_t waiting_ns = 0;  // left out of busy_ns: in wait frames, and a multi-process DataLoader's own time
  std::int64_t window_ns = 0;   // the steps (first start to last end), else the whole trace
  double busy_pct = 0;
};

// A finding the consistency pass dropped (docs/diagnose.md, "Consistency"):
// its rule id and the contradiction, in words.
struct Reconciled {
  std::string id;
  std::string why;
};

struct Diagnosis {
  // The step verdict holding the most step time (the whole trace judged as
  // one window without steps); kUnclear when no measured share supports one.
  Verdict verdict = Verdict::kCpuOnly;
  std::string summary;                  // one sentence with the numbers behind the verdict
  Evidence verdict_evidence;            // what was measured for the verdict (shares, idle split)
  std::vector<std::string> support;     // ids of the findings that agree with the verdict
  std::vector<StepVerdict> steps;
  // What the steps are (StepsSummary::range): "" for ProfilerStep#N, else
  // the range whose calls they are, found in the trace (detected) or named
  // by --step-range.
  std::string step_range;
  bool step_range_detected = false;
  std::vector<Finding> findings;        // by severity, then impact
  std::vector<Cause> causes;            // every finding in exactly one; by impact, then severity
  std::vector<ThreadBusy> threads;      // traces without device activity; by busy time, largest first
  Breakdowns breakdowns;
  IdleAccount idle;                     // traces with device activity: the GPU idle time by cause
  std::vector<Reconciled> reconciled;   // findings dropped as contradicting the verdict or the trace
  // Where "at X ms" counts from when it is not the trace's first event: the
  // first event of the trace diagnose read, when it placed device
  // activities that had no start time (the untimed_device finding).
  std::optional<std::int64_t> time_origin_ns;
};

struct DiagnoseOptions {
  // Run only these rule ids (empty: all).
  std::vector<std::string> only{};
  // Threads the rules run on: 0, the machine's cores; 1, one after another
  // on the calling thread. The findings do not depend on it.
  int threads = 0;
};

// Runs every rule. Never fails: a trace without steps or device activity
// gets the findings that apply to it.
Diagnosis diagnose(const Trace& trace, const DiagnoseOptions& options = {});

// The ids of every rule, in registry order.
std::vector<std::string> rule_ids();

struct DiagnoseFormat {
  // false: the 30-second view (verdict, steps in two lines, the top causes
  // with one line of evidence, one event and the fix each, the other
  // findings by id, the breakdowns), at most max_lines lines of at most about 160
  // characters: the causes get the lines the rest leaves, at least one.
  // true: every step, every finding and every evidence field.
  bool verbose = false;
  std::size_t max_causes = 4;  // cause cards in the short view, at most (fewer where max_lines do not hold them)
  // The short view's lines, blank ones included (issue 38, item 8: verdict,
  // top causes and fixes in at most 30 lines on every trace in tests/data).
  // The cause cards take what the head and the tail leave, at least one; a
  // card that does not fit goes to the "Also:" line whole, never cut.
  std::size_t max_lines = 30;
};

// Verdict first, then the causes (or, verbose, every finding) in order of
// impact, then the breakdowns. Events print as "name @ lane, at 0.198 ms
// (ts 5117.500), 2.3 us, step 1": ms since the trace's first event (as
// `tprof steps` and Perfetto count) and the ts written in the file.
std::string format_diagnosis_text(const Trace& trace, const Diagnosis& d, const DiagnoseFormat& format = {});
// {"verdict", "summary", "steps", "findings", "causes", "threads",
// "breakdowns"}; ns integers; events add "rel_ns" and "raw_ts".
std::string format_diagnosis_json(const Trace& trace, const Diagnosis& d);
std::string format_diagnosis_md(const Trace& trace, const Diagnosis& d);

}  // namespace tprof
