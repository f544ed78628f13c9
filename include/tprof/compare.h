// tprof/compare.h — runs of the same workload side by side: before and
// after a change, eager and compiled, cold and warm. Steps are aligned, each
// metric's mean per step is compared with a bootstrap interval, and host ops
// and device activities are diffed per step, new and vanished ones named.
// Each side is one run (a trace) or several: with several, the interval
// resamples runs, then steps within them, so between-run noise counts.
//
//   tprof::Comparison c = tprof::compare_traces(a, b);
//   std::cout << tprof::format_comparison_text(c, {.label_a = "a.json", .label_b = "b.json"});
//   tprof::GateResult g = tprof::check_gate(c, {.max_slower_pct = 5.0});  // B more than 5% slower, beyond the noise?
//   std::cerr << tprof::format_gate_line(g);
//   if (g.outcome != tprof::GateOutcome::kPass) return g.outcome == tprof::GateOutcome::kFail ? 1 : 2;
//
//   // Several runs a side: read each trace into a CompareRun, drop the trace.
//   std::vector<tprof::CompareRun> a_runs, b_runs;
//   for (const tprof::Trace& t : a_traces) a_runs.push_back(tprof::read_compare_run(t));
//   for (const tprof::Trace& t : b_traces) b_runs.push_back(tprof::read_compare_run(t));
//   tprof::Comparison r = tprof::compare_runs(a_runs, b_runs);
//
// Definitions (docs/compare.md):
//   alignment  every run has ProfilerStep#N: by step number when the
//              shortest run's numbers all appear in every run (the steps
//              with those numbers; for two traces: one side's numbers all
//              appear on the other), else by order (the first n steps of
//              each run, n the fewest). Otherwise each whole trace is one
//              "step" (first event start to last event end).
//   median     of the aligned steps' durations (the mean of the two middle
//              values for an even count, truncated to ns).
//   noise      MAD_A + MAD_B, each side's median absolute deviation of its
//              aligned steps' durations from their median (the spread shown;
//              the gate decides with the interval below).
//   metrics    per aligned step: "steady" the time from the previous step's
//              end to its own (the gate's default), "step" the
//              ProfilerStep's duration (the host's wall time), "device" the
//              union of the device work the step launched (wherever it
//              ran), "cpu" the step thread's busy time.
//   interval   95% bootstrap interval of B's mean over A's mean − 1; 4000
//              resamples, a fixed seed. One run a side: paired (resampling
//              aligned pairs) when steps align by number, unpaired
//              otherwise. Several runs: hierarchical, each side's runs
//              resampled with replacement, then each chosen run's steps
//              (CompareOptions::paired_runs: run i of A with run i of B).
//   ops        torch's FunctionEvents (tprof/key_averages.h) that are not
//              device activities nor ProfilerStep#N, by name; an event
//              belongs to the aligned step its start falls in. Self CPU and
//              CPU total: the median over aligned steps (of every run) of
//              the per-step sums; calls: the mean per step.
//   kernels    kernels, memcpy and memset by name; an activity belongs to
//              the step its launch call started in (correlation id), else
//              the one it started in. Device time: the median over aligned
//              steps of the per-step sums; count: the mean per step.
//   new / vanished  an op or kernel seen in the aligned steps of B only /
//              of A only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/diagnose.h"
#include "tprof/ranks.h"
#include "tprof/trace.h"

namespace tprof {

enum class StepAlignment : std::uint8_t {
  kStepNumber = 0,  // by the N of ProfilerStep#N
  kOrder,           // first with first, second with second, ...
  kWholeTrace,      // a side without steps: each whole trace is one step
};
std::string_view step_alignment_name(StepAlignment a);  // "step_number", "order", "whole_trace"

// What a run ran on: a gate refuses runs whose set-ups differ.
struct RunSetup {
  std::string device;            // deviceProperties[0].name; "" when the trace has none
  std::int64_t device_count = 0; // GPUs with device activity in the trace
  std::int64_t world_size = -1;  // distributedInfo.world_size; -1 when absent
  std::string dtype;             // the dtype of most GEMM/kernel time ("bf16", "fp32", ...); "" unknown
};

// One run (trace) of a side, as it was read.
struct CompareRunInfo {
  std::string label;            // read_compare_run's label (its path); "" when none was given
  bool has_steps = false;       // the trace has ProfilerStep#N events
  std::size_t total_steps = 0;  // all of its steps, aligned or not
  Verdict verdict = Verdict::kUnclear;
  RunSetup setup;
};

// One side's aligned steps and what the comparison read from it. With
// several runs, every per-step vector holds each run's aligned steps, run
// after run, in the order the runs were given; every run has the same
// number of aligned steps (steps_per_run()).
struct CompareSide {
  bool has_steps = false;             // every run has ProfilerStep#N events
  std::size_t total_steps = 0;        // all of its steps, aligned or not (summed over runs)
  std::vector<CompareRunInfo> runs;   // one per run (trace), in the order given
  std::vector<std::int64_t> step;     // aligned steps' numbers (-1 for a whole trace)
  std::vector<std::int64_t> dur_ns;   // aligned steps' durations
  std::int64_t median_step_ns = 0;
  std::int64_t mad_ns = 0;            // median absolute deviation of dur_ns
  std::int64_t min_step_ns = 0;
  std::int64_t max_step_ns = 0;
  Verdict verdict = Verdict::kUnclear;  // tprof::diagnose(trace).verdict
  std::string verdict_summary;
  // Per aligned step (as dur_ns): the device work it launched (union, ns;
  // empty when the trace has no device activity) and its thread's busy time.
  std::vector<std::int64_t> device_ns;
  std::vector<std::int64_t> cpu_ns;
  // Per aligned step, the steady state: from the previous step's end to its
  // own, a step ending when its host span and the device work it launched
  // are both done (the first step: from its start). Whole trace: its span.
  std::vector<std::int64_t> steady_ns;
  bool gpu_bound = false;  // verdict compute-bound or communication-bound
  // Several runs: the verdict most runs have (ties: the earliest run's) and
  // the first run's set-up.
  RunSetup setup;
  // Aligned steps per run (dur_ns.size() / runs.size()); 0 without runs.
  std::size_t steps_per_run() const { return runs.empty() ? 0 : dur_ns.size() / runs.size(); }
};

enum class CompareMetric : std::uint8_t {
  kAuto = 0,  // steady
  kStep,      // the ProfilerStep's duration (the host's wall time per step)
  kDevice,    // the union of the device work each step launched
  kCpu,       // the step thread's busy time
  kSteady,    // the steady state: the time between consecutive step ends (CompareSide::steady_ns)
};
std::string_view compare_metric_name(CompareMetric m);  // "auto", "step", "device", "cpu", "steady"
// The metric of that name (compare_metric_name's inverse); nullopt for any other.
std::optional<CompareMetric> compare_metric_named(std::string_view name);

// One metric over the aligned steps: B's mean against A's, with the 95%
// bootstrap interval of the change (docs/compare.md, "The gate").
struct MetricComparison {
  CompareMetric metric = CompareMetric::kStep;
  bool available = false;          // device: both traces have device activity
  std::size_t steps = 0;           // aligned steps measured (the smaller side's, over all its runs)
  bool paired = false;             // steps resampled as pairs (aligned by number; within run pairs)
  // Runs resampled per side. With 2 or more on a side the interval is a
  // hierarchical bootstrap (runs, then steps within each), so that side's
  // between-run noise is in it; with one run a side it is unknown.
  std::size_t runs_a = 1, runs_b = 1;
  bool paired_runs = false;        // run i of A resampled with run i of B (CompareOptions::paired_runs)
  bool over_runs() const { return runs_a > 1 || runs_b > 1; }
  std::int64_t mean_a_ns = 0, mean_b_ns = 0;
  std::int64_t median_a_ns = 0, median_b_ns = 0;
  double delta_pct = 0;            // 100 × (mean_b / mean_a − 1); 0 when mean_a is 0
  bool has_interval = false;       // two or more steps
  double low_pct = 0, high_pct = 0;  // the interval of delta_pct
  std::int64_t low_ns = 0, high_ns = 0;  // the interval of mean_b − mean_a
  // Slower or faster beyond the noise: the interval excludes 0.
  bool beyond_noise() const { return has_interval && (low_ns > 0 || high_ns < 0); }
};

enum class ChangeKind : std::uint8_t {
  kCommon = 0,  // on both sides
  kNew,         // in B only
  kVanished,    // in A only
};
std::string_view change_kind_name(ChangeKind k);  // "common", "new", "vanished"

// A host op (by name): medians over aligned steps of per-step sums, ns.
struct OpDelta {
  std::string name;
  ChangeKind change = ChangeKind::kCommon;
  std::int64_t self_cpu_a_ns = 0, self_cpu_b_ns = 0;
  std::int64_t cpu_total_a_ns = 0, cpu_total_b_ns = 0;
  double calls_a = 0, calls_b = 0;  // mean per aligned step
  // B − A, saturating at the int64 limits (self times may be negative).
  std::int64_t self_cpu_delta_ns() const;
  std::int64_t cpu_total_delta_ns() const;
};

// A device activity (kernel, memcpy, memset) by name.
struct KernelDelta {
  std::string name;
  std::string category;  // "kernel", "memcpy", "memset"
  ChangeKind change = ChangeKind::kCommon;
  std::int64_t time_a_ns = 0, time_b_ns = 0;  // median per aligned step of the summed durations
  double count_a = 0, count_b = 0;            // mean per aligned step
  std::int64_t time_delta_ns() const;  // B − A, saturating
};

struct Comparison {
  StepAlignment alignment = StepAlignment::kWholeTrace;
  bool paired_runs = false;  // runs resampled as pairs (CompareOptions::paired_runs, as many runs a side)
  CompareSide a, b;
  std::int64_t delta_ns = 0;  // b.median_step_ns − a.median_step_ns
  double delta_pct = 0;       // 100 × delta / a.median_step_ns (0 when A's median is 0)
  std::int64_t noise_ns = 0;  // a.mad_ns + b.mad_ns
  bool verdict_changed = false;
  std::vector<OpDelta> ops;          // by |Self CPU delta|, then |CPU total delta|, then name
  std::vector<KernelDelta> kernels;  // by |time delta|, then name
  // Step, device and cpu, in that order (device unavailable without device
  // activity on both sides), and the metric the run is bound by.
  std::vector<MetricComparison> metrics;
  CompareMetric bound_metric = CompareMetric::kStep;
  std::string bound_reason;  // "both runs are GPU-bound (compute-bound, compute-bound)"
  // Set-up differences, one line each: "device: NVIDIA A100 vs NVIDIA V100".
  std::vector<std::string> setup_differences;
  // What one side records and the other does not, one line each ("dtype: bf16
  // vs unknown"): shown, never a reason to refuse (unknown is no mismatch).
  std::vector<std::string> setup_unknown;
  // Every host op that matters moved by about the same factor and none was
  // added or removed (docs/compare.md, "An environment change"): the
  // machine or its state changed, not the code. "" otherwise.
  std::string environment_change;
  bool jobs = false;  // compare_jobs: each side is one job, its step the median over its ranks
  const MetricComparison* metric(CompareMetric m) const;  // nullptr for kAuto
};

// Compares the two traces (B against A): compare_runs with one run a side.
// Never fails: traces without steps are compared as wholes, traces without
// device activity have no kernels. Reads both traces (and diagnoses them)
// on two threads; the traces must stay unmodified meanwhile.
Comparison compare_traces(const Trace& a, const Trace& b);

namespace internal {
struct CompareRunData;
}

struct CompareOptions {
  // Run i of A ran next to run i of B (interleaved A1 B1 A2 B2 ..., in the
  // order given): they share the machine's state, so each resample draws
  // pairs of runs and the state's drift cancels. Only with as many runs a
  // side (else unpaired).
  bool paired_runs = false;
};

// What a comparison reads from one run's trace: its steps, per-step
// metrics, ops and device activities, verdict and set-up; much smaller than
// the trace, which may be dropped once read. Cheap to copy (shared,
// immutable); thread-safe to read.
class CompareRun {
 public:
  CompareRun() = default;  // empty: not a run (compare_runs checks)
  bool empty() const { return data_ == nullptr; }
  // distributedInfo.rank of the trace; -1 when absent. Runs of one side
  // with different ranks are a job's ranks, not runs (the CLI refuses them).
  std::int64_t rank() const { return rank_; }

 private:
  friend CompareRun read_compare_run(const Trace& trace, std::string label);
  friend Comparison compare_runs(const std::vector<CompareRun>& a, const std::vector<CompareRun>& b,
                                 const CompareOptions& options);
  std::shared_ptr<const internal::CompareRunData> data_;
  std::int64_t rank_ = -1;
};

// Reads (and diagnoses) one run's trace; `label` names the run in reports
// (its path). Never fails; the trace must stay unmodified meanwhile, and
// may be dropped afterwards.
CompareRun read_compare_run(const Trace& trace, std::string label = {});

// Compares B's runs against A's: one or more runs a side (each a trace of
// the same program). Steps align across every run (the rule above); each
// metric's figure is the mean per step over every aligned step of a side's
// runs, and its interval resamples runs, then steps within each chosen run
// (docs/compare.md, "Runs"). With one run a side this is compare_traces.
// Each side must hold at least one non-empty run (a bug otherwise).
Comparison compare_runs(const std::vector<CompareRun>& a, const std::vector<CompareRun>& b,
                        const CompareOptions& options = {});

// The CI gate (docs/compare.md, "The gate"): B fails when its mean per
// step of the metric is slower than A's by more than max_slower_pct percent
// and the 95% interval of the change lies above 0 (slower beyond the noise).
// Over runs (a side with 2 or more) it fails only when the interval's low
// end is above max_slower_pct: slower than the limit beyond the noise of
// runs and steps.
// With fewer aligned steps than min_steps it still answers where the answer
// is plain: it passes when B's mean is within the limit (nothing to block),
// and fails when an exact test decides (every B step slower than every A
// step by more than the limit, which exchangeable steps do by chance with
// probability 1 / C(nA + nB, nB), at most 5%); else it refuses (kRefused),
// saying about how many steps would decide. It also refuses with an
// unavailable metric, or when the set-ups differ (unless allowed).
struct GateOptions {
  double max_slower_pct = 0;
  CompareMetric metric = CompareMetric::kAuto;
  std::size_t min_steps = 5;     // fewer aligned steps: the noise is unknown
  bool allow_mismatch = false;   // gate runs whose device, count, world size or dtype differ
};

enum class GateOutcome : std::uint8_t { kPass = 0, kFail, kRefused };
std::string_view gate_outcome_name(GateOutcome o);  // "pass", "fail", "refused" (JSON's gate.outcome)

struct GateResult {
  GateOutcome outcome = GateOutcome::kPass;
  bool passed = true;            // outcome == kPass
  double max_slower_pct = 0;
  CompareMetric metric = CompareMetric::kStep;  // the metric read (auto resolved)
  std::string metric_reason;     // why this metric ("--metric", or the bound)
  MetricComparison m;            // its comparison
  std::size_t min_steps = 0;
  bool over_threshold = false;   // slower by more than max_slower_pct (any slowdown when A's mean is 0)
  bool over_noise = false;       // the interval lies above 0 (no interval: noise unknown, counted as over)
  // Over runs: the interval's low end is above the limit (what fails there).
  bool low_over_limit = false;
  std::string refusal;           // why kRefused
  // With fewer steps than min_steps, how a pass or fail was decided
  // ("fewer than 5 steps: ..."); "" otherwise.
  std::string basis;
};
GateResult check_gate(const Comparison& c, const GateOptions& options);
// check_gate with the default options and this threshold.
GateResult check_slower(const Comparison& c, double max_slower_pct);

struct CompareFormat {
  std::string label_a = "A";  // how the report names the traces (their paths, or the runs' directory)
  std::string label_b = "B";
  std::size_t top = 10;       // op and kernel rows shown (by |delta|); 0: all. JSON lists all.
};

// A short text report: steps and medians with the noise, verdicts, then the
// top ops and kernels by |delta| and the new / vanished names.
// With a gate result, its decision (format_gate_line) comes first.
std::string format_comparison_text(const Comparison& c, const CompareFormat& f = {},
                                   const GateResult* gate = nullptr);
// Markdown for a pull-request comment: the same content as tables; with a
// gate result, its decision in bold under the heading.
std::string format_comparison_md(const Comparison& c, const CompareFormat& f = {}, const GateResult* gate = nullptr);
// {"a", "b", "alignment", "steps", "median_step", "verdict", "ops",
// "kernels"[, "gate"]}: ns integers, snake_case keys (docs/compare.md).
// `gate` is written when given.
std::string format_comparison_json(const Comparison& c, const CompareFormat& f = {},
                                   const GateResult* gate = nullptr);
// One line for CI logs: "compare gate: PASS|FAIL|REFUSED: B's mean device
// time per step is ... [95% interval] against A's; limit P% (...)".
std::string format_gate_line(const GateResult& g);

// ---- Two jobs: every rank of each (docs/compare.md, "Jobs") ----
//
//   tprof::JobComparison j = tprof::compare_jobs(job_a, job_b);   // merged rank summaries (tprof/ranks.h)
//   tprof::GateResult g = tprof::check_gate(j.c, {.max_slower_pct = 5.0});
//   std::cout << tprof::format_job_comparison_text(j, {.label_a = "run1/", .label_b = "run2/"}, &g);
//
// A job's step is the median over its ranks of each per-step figure (the
// ranks of a synchronous job wait for each other, so their steps agree; the
// median ignores one rank's boundary offset). `c` holds the job's step
// series as one run a side, so the metrics, their bootstrap interval, the
// gate and its formats are compare's; it has no ops or kernels (a summary
// keeps none).

// One rank's mean per aligned step of the gate's default metric (steady
// when both jobs' summaries have it, else step time), matched by rank.
struct JobRankDelta {
  std::int64_t rank = 0;
  ChangeKind change = ChangeKind::kCommon;  // new: in B only; vanished: in A only
  std::int64_t mean_a_ns = 0, mean_b_ns = 0;  // 0 on the side without it
  std::int64_t delta_ns() const;              // B − A, saturating
};

// Mean per aligned step of one phase of the job's step (the median over
// ranks of RankStep's computation, communication, idle).
struct JobPhaseDelta {
  std::string phase;  // "computation", "communication", "idle"
  std::int64_t mean_a_ns = 0, mean_b_ns = 0;
};

// What one job's view says, for the report: ranks, verdicts, stragglers.
struct JobSide {
  std::int64_t ranks = 0;           // ranks of the view (windows of one process merged)
  std::int64_t ranks_with_steps = 0;  // those whose steps make the job's steps
  std::int64_t world_size = -1;
  std::vector<std::pair<Verdict, std::int64_t>> verdicts;  // the ranks' own verdicts, most common first
  std::vector<Straggler> stragglers;  // named ones (compute_job_view)
  std::vector<std::int64_t> slow_link_suspects;
  std::int64_t slow_transfer_groups = 0;
  CrossRankPath critical_path;  // the view's (steps 0: none)
};

struct JobComparison {
  Comparison c;  // c.a.steady_ns empty: some rank's summary has no steady_ns (before version 3)
  JobSide a, b;
  CompareMetric rank_metric = CompareMetric::kSteady;  // what `ranks` measures
  std::vector<JobRankDelta> ranks;    // by |delta|, then rank; new and vanished last
  std::vector<JobPhaseDelta> phases;  // computation, communication, idle
};

// B's job against A's. Steps: a job step is a step number every rank with
// steps has (by order when a rank repeats a number: the first n of each
// rank, n the fewest); A and B align as two traces do (by number when one
// side's numbers all appear on the other, else by order). A job whose ranks
// have no steps is one whole "step": the median over ranks of their spans,
// step time only. steady/device/cpu are measured only when every rank's
// summary has them (version 3). The set-ups differ when the rank counts,
// the world sizes or the ranks with device activity differ. Never fails;
// each job must hold at least one rank (a bug otherwise).
JobComparison compare_jobs(const JobSummary& a, const JobSummary& b);

// The job comparison as text, Markdown or JSON: the job's metrics (as
// format_comparison_*), phases, verdicts, stragglers and slow links of each
// side, then the ranks by |delta|. `top` limits the rank rows (JSON lists all).
std::string format_job_comparison_text(const JobComparison& j, const CompareFormat& f = {},
                                       const GateResult* gate = nullptr);
std::string format_job_comparison_md(const JobComparison& j, const CompareFormat& f = {},
                                     const GateResult* gate = nullptr);
std::string format_job_comparison_json(const JobComparison& j, const CompareFormat& f = {},
                                       const GateResult* gate = nullptr);
// The job comparison as one self-contained HTML page (docs/compare.md,
// "Jobs"): the job step's metrics and phases, what each job's view says,
// every rank's A and B on one scale, and the text view; it fetches nothing.
std::string format_job_comparison_html(const JobComparison& j, const CompareFormat& f = {},
                                       const GateResult* gate = nullptr);

}  // namespace tprof
