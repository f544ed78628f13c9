#include "src/analyze/diagnose_context.h"
#include "tprof/compare.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "src/analyze/efficiency.h"
#include "src/trace/id_index.h"
#include "src/trace/json_value.h"
#include "src/analyze/intervals.h"
#include "src/analyze/verdict.h"
#include "src/base/check.h"
#include "src/base/saturate.h"
#include "tprof/key_averages.h"
#include "tprof/steps.h"

namespace tprof {

std::string_view step_alignment_name(StepAlignment a) {
  switch (a) {
    case StepAlignment::kStepNumber: return "step_number";
    case StepAlignment::kOrder: return "order";
    case StepAlignment::kWholeTrace: return "whole_trace";
  }
  return "whole_trace";
}

std::int64_t OpDelta::self_cpu_delta_ns() const { return internal::sat_sub(self_cpu_b_ns, self_cpu_a_ns); }
std::int64_t OpDelta::cpu_total_delta_ns() const { return internal::sat_sub(cpu_total_b_ns, cpu_total_a_ns); }
std::int64_t KernelDelta::time_delta_ns() const { return internal::sat_sub(time_b_ns, time_a_ns); }

std::string_view compare_metric_name(CompareMetric m) {
  switch (m) {
    case CompareMetric::kAuto: return "auto";
    case CompareMetric::kStep: return "step";
    case CompareMetric::kDevice: return "device";
    case CompareMetric::kCpu: return "cpu";
    case CompareMetric::kSteady: return "steady";
  }
  return "step";
}

std::string_view gate_outcome_name(GateOutcome o) {
  switch (o) {
    case GateOutcome::kPass: return "pass";
    case GateOutcome::kFail: return "fail";
    case GateOutcome::kRefused: break;
  }
  return "refused";
}

std::optional<CompareMetric> compare_metric_named(std::string_view name) {
  for (const CompareMetric m : {CompareMetric::kAuto, CompareMetric::kStep, CompareMetric::kDevice, CompareMetric::kCpu,
                                CompareMetric::kSteady}) {
    if (compare_metric_name(m) == name) return m;
  }
  return std::nullopt;
}

const MetricComparison* Comparison::metric(CompareMetric m) const {
  for (const MetricComparison& x : metrics) {
    if (x.metric == m) return &x;
  }
  return nullptr;
}

std::string_view change_kind_name(ChangeKind k) {
  switch (k) {
    case ChangeKind::kCommon: return "common";
    case ChangeKind::kNew: return "new";
    case ChangeKind::kVanished: return "vanished";
  }
  return "common";
}

namespace internal {

// What one run's trace gives the comparison before alignment
// (tprof::CompareRun): per step metrics, op and device activity items with
// per-run name ids, verdict, set-up.
struct CompareRunData {
  // A host op instance: which name (index into op_names), where it starts
  // (the trace's own ts, the same clock as the steps) and its times.
  struct OpItem {
    std::uint32_t name = 0;
    std::int64_t ts_ns = 0;
    std::int64_t self_ns = 0;
    std::int64_t total_ns = 0;
  };
  // A device activity: its name, the time that decides its step (its launch
  // call's start when linked, else its own) and its duration.
  struct KernelItem {
    std::uint32_t name = 0;
    std::int64_t step_ts_ns = 0;
    std::int64_t dur_ns = 0;
  };

  std::string label;  // read_compare_run's
  StepsSummary steps;
  // Per step (as steps.steps): the union of the device work it launched and
  // its thread's busy time; for the whole trace: all device work, and the
  // busiest host thread.
  std::vector<std::int64_t> step_device_ns;
  std::vector<std::int64_t> step_cpu_ns;
  std::vector<std::int64_t> step_steady_ns;  // CompareSide::steady_ns, per step of the trace
  std::int64_t trace_device_ns = 0;
  std::int64_t trace_cpu_ns = 0;
  bool has_device = false;
  RunSetup setup;
  std::int64_t trace_start_ns = 0;
  std::int64_t trace_end_ns = 0;
  Verdict verdict = Verdict::kUnclear;
  std::string verdict_summary;
  std::vector<std::string> op_names;
  std::vector<OpItem> ops;
  std::vector<std::string> kernel_names;
  std::vector<std::string> kernel_categories;
  std::vector<KernelItem> kernels;
};

}  // namespace internal

namespace {

using RunData = internal::CompareRunData;
using OpItem = RunData::OpItem;
using KernelItem = RunData::KernelItem;

std::string_view device_category(EventKind k) {
  switch (k) {
    case EventKind::kGpuMemcpy: return "memcpy";
    case EventKind::kGpuMemset: return "memset";
    default: return "kernel";
  }
}


RunSetup setup_of(const internal::DiagnoseContext& c) {
  RunSetup s;
  internal::device_peak(c.trace, &s.device);
  std::vector<std::int32_t> devices;
  for (const internal::DeviceOp& op : c.device) devices.push_back(op.device);
  std::sort(devices.begin(), devices.end());
  s.device_count = std::unique(devices.begin(), devices.end()) - devices.begin();
  s.world_size = internal::world_size(c.trace);
  // The dtype of most kernel time whose dtype is known. A GEMM known only
  // as 16-bit by its name ("fp16/bf16", nvjet's "_h_") names no dtype to
  // compare set-ups by.
  std::map<std::string, std::int64_t> by_dtype;
  if (c.has_device()) {
    for (const internal::KernelEfficiency& k : c.efficiency().kernels) {
      if (!k.dtype.empty() && k.dtype != "fp16/bf16") internal::sat_acc(by_dtype[k.dtype], k.time_ns);
    }
  }
  std::int64_t best = 0;
  for (const auto& [dtype, ns] : by_dtype) {
    if (ns > best) best = ns, s.dtype = dtype;
  }
  return s;
}

// The busiest host thread's busy time over the whole trace.
std::int64_t busiest_thread_ns(const internal::DiagnoseContext& c) {
  std::map<std::uint32_t, std::vector<internal::Interval>> by_lane;
  c.for_each_host_event([&](std::uint32_t e) {
    by_lane[c.trace.events.lane[e]].push_back({c.ts(e), c.end(e)});
  });
  std::int64_t best = 0;
  for (auto& [lane, v] : by_lane) best = std::max(best, internal::union_length(std::move(v)));
  return best;
}

RunData read_run(const Trace& t) {
  RunData d;
  const internal::DiagnoseContext ctx(t, /*with_averages=*/true);
  const Diagnosis diagnosis = internal::diagnose(ctx);
  d.steps = ctx.steps;
  d.trace_start_ns = t.start_ns();
  d.trace_end_ns = t.end_ns();
  d.verdict = diagnosis.verdict;
  d.verdict_summary = diagnosis.summary;
  d.has_device = ctx.has_device();
  TPROF_CHECK(diagnosis.steps.size() == d.steps.steps.size());
  // The steady state (issue 40, item 1): internal::steady_costs.
  for (const StepVerdict& v : diagnosis.steps) {
    d.step_device_ns.push_back(v.gpu_work_ns);
    d.step_cpu_ns.push_back(v.cpu_busy_ns);
  }
  d.step_steady_ns = internal::steady_costs(diagnosis.steps);
  {
    std::vector<internal::Interval> all;
    for (const internal::DeviceOp& op : ctx.device) all.push_back({op.start, op.end});
    d.trace_device_ns = internal::union_length(std::move(all));
  }
  d.trace_cpu_ns = busiest_thread_ns(ctx);
  d.setup = setup_of(ctx);

  // Host ops with torch's self/total times. Rows are reduced to small items
  // at once; names are interned per side.
  {
    EventListOptions options;
    options.with_memory = false;
    const EventList events = EventList::build(t, options);
    std::unordered_map<std::string, std::uint32_t> ids;
    const std::vector<StatRow> rows = events.event_rows();
    d.ops.reserve(rows.size());
    for (const StatRow& r : rows) {
      if (r.is_device || r.event == kNoIndex || r.key == "ProfilerStep*") continue;
      auto [it, added] = ids.try_emplace(r.key, static_cast<std::uint32_t>(d.op_names.size()));
      if (added) d.op_names.push_back(r.key);
      d.ops.push_back({it->second, t.events.ts_ns[r.event], r.self_cpu_time_total_ns, r.cpu_time_total_ns});
    }
  }

  // Device activities, each linked to its launch call by correlation id.
  const EventColumns& ev = t.events;
  std::vector<std::pair<std::int64_t, std::uint32_t>> launch_pairs;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (ev.phase[e] == Phase::kComplete && (k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) &&
        ev.correlation[e] >= 0) {
      launch_pairs.emplace_back(ev.correlation[e], e);
    }
  }
  const internal::IdIndex launch_by_corr(std::move(launch_pairs));
  std::vector<std::uint32_t> name_ids(t.strings.size(), kNoIndex);
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (ev.phase[e] != Phase::kComplete) continue;
    if (!is_device_work(k)) continue;
    std::uint32_t& id = name_ids[ev.name[e]];
    if (id == kNoIndex) {
      id = static_cast<std::uint32_t>(d.kernel_names.size());
      d.kernel_names.emplace_back(t.name(e));
      d.kernel_categories.emplace_back(device_category(k));
    }
    const std::uint32_t launch = ev.correlation[e] >= 0 ? launch_by_corr.find(ev.correlation[e]) : kNoIndex;
    d.kernels.push_back({id, launch != kNoIndex ? ev.ts_ns[launch] : ev.ts_ns[e], ev.dur_ns[e]});
  }
  return d;
}

std::int64_t mad_of(const std::vector<std::int64_t>& v, std::int64_t median) {
  std::vector<std::int64_t> dev;
  dev.reserve(v.size());
  for (const std::int64_t x : v) dev.push_back(std::llabs(x - median));
  return internal::mean_median(std::move(dev));
}

// A side's median step, its MAD and range, from its aligned steps' durations.
void set_spread(CompareSide* side) {
  side->median_step_ns = internal::mean_median(side->dur_ns);
  side->mad_ns = mad_of(side->dur_ns, side->median_step_ns);
  if (!side->dur_ns.empty()) {
    side->min_step_ns = *std::min_element(side->dur_ns.begin(), side->dur_ns.end());
    side->max_step_ns = *std::max_element(side->dur_ns.begin(), side->dur_ns.end());
  }
}

// An aligned step's window on one side: [start, end) and its pair index.
struct Window {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::size_t pair = 0;
};

// The pair index of the window holding ts, or -1.
std::ptrdiff_t find_window(const std::vector<Window>& w, std::int64_t ts) {
  auto it = std::upper_bound(w.begin(), w.end(), ts, [](std::int64_t x, const Window& s) { return x < s.start_ns; });
  if (it == w.begin()) return -1;
  --it;
  return ts < it->end_ns ? static_cast<std::ptrdiff_t>(it->pair) : -1;
}

bool has_duplicate_numbers(std::vector<std::int64_t> n) {
  std::sort(n.begin(), n.end());
  return std::adjacent_find(n.begin(), n.end()) != n.end();
}

// Aligned step indices into each run's steps (-1: the whole trace), the
// same count for every run; runs are A's, then B's.
struct Alignment {
  StepAlignment kind = StepAlignment::kWholeTrace;
  std::vector<std::vector<std::ptrdiff_t>> steps;  // per run
  std::size_t per_run() const { return steps.empty() ? 0 : steps.front().size(); }
};

// The alignment of runs by their steps' numbers (each run's, in its step
// order). `by_number` false: by order even where the numbers would align
// (a job whose ranks share no step numbers).
Alignment align_steps(const std::vector<std::vector<std::int64_t>>& runs, bool by_number = true) {
  Alignment out;
  bool every_run_has_steps = true, unique = by_number;
  std::size_t fewest = std::numeric_limits<std::size_t>::max();
  for (const std::vector<std::int64_t>& r : runs) {
    every_run_has_steps = every_run_has_steps && !r.empty();
    unique = unique && !has_duplicate_numbers(r);
    fewest = std::min(fewest, r.size());
  }
  if (!every_run_has_steps) {
    out.steps.assign(runs.size(), std::vector<std::ptrdiff_t>{-1});
    return out;
  }
  // By number when the shortest run's numbers all appear in every run (the
  // same schedule, or some runs went on longer) and no number repeats; for
  // two traces, when one side's numbers all appear on the other.
  if (unique) {
    std::map<std::int64_t, std::size_t> runs_with;  // step number -> runs holding it
    for (const std::vector<std::int64_t>& r : runs) {
      for (const std::int64_t number : r) ++runs_with[number];
    }
    std::vector<std::int64_t> common;  // sorted by number
    for (const auto& [number, n] : runs_with) {
      if (n == runs.size()) common.push_back(number);
    }
    if (common.size() == fewest) {
      out.kind = StepAlignment::kStepNumber;
      for (const std::vector<std::int64_t>& r : runs) {
        std::map<std::int64_t, std::ptrdiff_t> by_number_at;
        for (std::size_t j = 0; j < r.size(); ++j) by_number_at[r[j]] = static_cast<std::ptrdiff_t>(j);
        std::vector<std::ptrdiff_t>& idx = out.steps.emplace_back();
        for (const std::int64_t number : common) idx.push_back(by_number_at[number]);
      }
      return out;
    }
  }
  out.kind = StepAlignment::kOrder;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::vector<std::ptrdiff_t>& idx = out.steps.emplace_back();
    for (std::size_t i = 0; i < fewest; ++i) idx.push_back(static_cast<std::ptrdiff_t>(i));
  }
  return out;
}

// Per name: per aligned step sums of two values and the instance count.
struct PerStep {
  std::vector<std::int64_t> x, y;
  std::int64_t count = 0;
};

struct Aggregated {
  std::int64_t x_median = 0, y_median = 0;
  double per_step = 0;
};

Aggregated aggregate(const PerStep& p, std::size_t pairs) {
  Aggregated a;
  a.x_median = internal::mean_median(p.x);
  a.y_median = p.y.empty() ? 0 : internal::mean_median(p.y);
  a.per_step = pairs == 0 ? 0.0 : static_cast<double>(p.count) / static_cast<double>(pairs);
  return a;
}

// The verdict most runs have; ties go to the earliest run's.
std::size_t most_common_verdict(const std::vector<const RunData*>& runs) {
  std::size_t best = 0, best_n = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::size_t n = 0;
    for (const RunData* r : runs) n += r->verdict == runs[i]->verdict ? 1 : 0;
    if (n > best_n) best = i, best_n = n;
  }
  return best;
}

// A side's aligned steps, run after run: durations and metrics, and each
// run's windows (sorted by start; `pair` is the step's index within the
// run); then the side's summary numbers. `first` is the side's first run
// in the alignment.
std::vector<std::vector<Window>> fill_side(const std::vector<const RunData*>& runs, const Alignment& al,
                                           std::size_t first, CompareSide* side) {
  std::vector<std::vector<Window>> windows(runs.size());
  side->has_steps = true;
  bool has_device = true;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const RunData& d = *runs[r];
    side->has_steps = side->has_steps && !d.steps.steps.empty();
    side->total_steps += d.steps.steps.size();
    side->runs.push_back({d.label, !d.steps.steps.empty(), d.steps.steps.size(), d.verdict, d.setup});
    has_device = has_device && d.has_device;
    const std::vector<std::ptrdiff_t>& aligned = al.steps[first + r];
    for (std::size_t p = 0; p < aligned.size(); ++p) {
      const std::ptrdiff_t i = aligned[p];
      if (i < 0) {
        side->step.push_back(-1);
        side->dur_ns.push_back(d.trace_end_ns - d.trace_start_ns);
        side->device_ns.push_back(d.trace_device_ns);
        side->cpu_ns.push_back(d.trace_cpu_ns);
        side->steady_ns.push_back(d.trace_end_ns - d.trace_start_ns);
        // Inclusive of the last event's end: every event is inside.
        windows[r].push_back({d.trace_start_ns, d.trace_end_ns + 1, p});
      } else {
        const StepStat& s = d.steps.steps[static_cast<std::size_t>(i)];
        side->step.push_back(s.step);
        side->dur_ns.push_back(s.dur_ns);
        side->device_ns.push_back(d.step_device_ns[static_cast<std::size_t>(i)]);
        side->cpu_ns.push_back(d.step_cpu_ns[static_cast<std::size_t>(i)]);
        side->steady_ns.push_back(d.step_steady_ns[static_cast<std::size_t>(i)]);
        windows[r].push_back({s.start_ns, s.start_ns + s.dur_ns, p});
      }
    }
    std::sort(windows[r].begin(), windows[r].end(),
              [](const Window& x, const Window& y) { return x.start_ns < y.start_ns; });
  }
  set_spread(side);
  const RunData& typical = *runs[most_common_verdict(runs)];
  side->verdict = typical.verdict;
  side->verdict_summary = typical.verdict_summary;
  // Device time is measured only when every run has device activity.
  if (!has_device) side->device_ns.clear();
  side->gpu_bound = side->verdict == Verdict::kComputeBound || side->verdict == Verdict::kCommunicationBound;
  side->setup = runs.front()->setup;
  return windows;
}

// Per name of one run: per aligned step (of the run) sums and counts.
std::vector<PerStep> bucket_ops(const RunData& d, const std::vector<Window>& w, std::size_t pairs) {
  std::vector<PerStep> out(d.op_names.size(), PerStep{std::vector<std::int64_t>(pairs, 0),
                                                      std::vector<std::int64_t>(pairs, 0), 0});
  for (const OpItem& op : d.ops) {
    const std::ptrdiff_t p = find_window(w, op.ts_ns);
    if (p < 0) continue;
    PerStep& s = out[op.name];
    // Saturating: a step may hold any number of long (and, for self time,
    // negative: overlapping children) ops.
    internal::sat_acc(s.x[static_cast<std::size_t>(p)], op.self_ns);
    internal::sat_acc(s.y[static_cast<std::size_t>(p)], op.total_ns);
    ++s.count;
  }
  return out;
}

std::vector<PerStep> bucket_kernels(const RunData& d, const std::vector<Window>& w, std::size_t pairs) {
  std::vector<PerStep> out(d.kernel_names.size(), PerStep{std::vector<std::int64_t>(pairs, 0), {}, 0});
  for (const KernelItem& k : d.kernels) {
    const std::ptrdiff_t p = find_window(w, k.step_ts_ns);
    if (p < 0) continue;
    PerStep& s = out[k.name];
    internal::sat_acc(s.x[static_cast<std::size_t>(p)], k.dur_ns);
    ++s.count;
  }
  return out;
}

// A side's names over its runs (names are interned per run): per name, the
// per-step sums of every run's aligned steps, run after run (a run without
// the name counts 0 on its steps), and the first run's category.
struct SideName {
  PerStep per_step;
  std::string_view category;
};

template <class Bucket>
std::map<std::string_view, SideName> by_name_over_runs(const std::vector<const RunData*>& runs,
                                                       const std::vector<std::vector<Window>>& w,
                                                       std::size_t per_run, bool kernels, Bucket bucket) {
  std::map<std::string_view, SideName> out;
  const std::size_t slots = per_run * runs.size();
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::vector<PerStep> p = bucket(*runs[r], w[r], per_run);
    const std::vector<std::string>& names = kernels ? runs[r]->kernel_names : runs[r]->op_names;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (p[i].count == 0) continue;
      auto [it, added] = out.try_emplace(names[i]);
      PerStep& s = it->second.per_step;
      if (added) {
        if (kernels) it->second.category = runs[r]->kernel_categories[i];
        if (runs.size() == 1) {
          s = std::move(p[i]);
          continue;
        }
        s.x.assign(slots, 0);
        if (!p[i].y.empty()) s.y.assign(slots, 0);
      }
      std::copy(p[i].x.begin(), p[i].x.end(), s.x.begin() + static_cast<std::ptrdiff_t>(r * per_run));
      if (!p[i].y.empty()) std::copy(p[i].y.begin(), p[i].y.end(), s.y.begin() + static_cast<std::ptrdiff_t>(r * per_run));
      s.count += p[i].count;
    }
  }
  return out;
}

// |v| for any int64 (a saturated delta may be INT64_MIN, which llabs cannot take).
std::uint64_t magnitude(std::int64_t v) {
  return v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
}

ChangeKind change_of(std::int64_t count_a, std::int64_t count_b) {
  if (count_a == 0) return ChangeKind::kNew;
  if (count_b == 0) return ChangeKind::kVanished;
  return ChangeKind::kCommon;
}

// A deterministic generator (splitmix64): the same traces give the same
// interval on every machine and every run.
struct SplitMix {
  std::uint64_t x;
  std::uint64_t next() {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n): the modulo's bias is below n / 2^64.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

double mean_of(const std::vector<std::int64_t>& v) {
  double s = 0;
  for (const std::int64_t x : v) s += static_cast<double>(x);
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

std::int64_t to_ns(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(std::llround(v));
}

// The resampled changes of both bootstraps: mean_B − mean_A, and
// mean_B / mean_A − 1 in percent where A's mean is positive.
struct ResampledChanges {
  std::vector<double> diff, rel;
  explicit ResampledChanges(std::size_t resamples) {
    diff.reserve(resamples);
    rel.reserve(resamples);
  }
  // One resample's sums over its `na` and `nb` drawn values.
  void add(double sum_a, std::size_t na, double sum_b, std::size_t nb) {
    const double ra = sum_a / static_cast<double>(na), rb = sum_b / static_cast<double>(nb);
    diff.push_back(rb - ra);
    if (ra > 0) rel.push_back(100.0 * (rb / ra - 1.0));
  }
};

// The interval: the 2.5th and 97.5th percentiles of the resampled changes.
void set_interval(MetricComparison* m, ResampledChanges changes) {
  std::vector<double>& diff = changes.diff;
  std::vector<double>& rel = changes.rel;
  auto bounds = [](std::vector<double>& v, double* lo, double* hi) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    const double last = static_cast<double>(v.size() - 1);
    *lo = v[static_cast<std::size_t>(std::floor(0.025 * last))];
    *hi = v[static_cast<std::size_t>(std::ceil(0.975 * last))];
  };
  double lo = 0, hi = 0;
  bounds(diff, &lo, &hi);
  m->low_ns = to_ns(lo);
  m->high_ns = to_ns(hi);
  bounds(rel, &m->low_pct, &m->high_pct);
}

// What both bootstraps start from: the metric's means and medians a side
// and B's change against A; `available` false when a side has no value.
MetricComparison point_estimates(CompareMetric metric, const std::vector<std::int64_t>& a,
                                 const std::vector<std::int64_t>& b) {
  MetricComparison m;
  m.metric = metric;
  m.available = !a.empty() && !b.empty();
  if (!m.available) return m;
  m.steps = std::min(a.size(), b.size());
  const double ma = mean_of(a), mb = mean_of(b);
  m.mean_a_ns = to_ns(ma);
  m.mean_b_ns = to_ns(mb);
  m.median_a_ns = internal::mean_median(a);
  m.median_b_ns = internal::mean_median(b);
  m.delta_pct = ma > 0 ? 100.0 * (mb / ma - 1.0) : 0.0;
  return m;
}

// B's median step against A's, the noise shown beside it, the verdict change.
void set_median_change(Comparison* c) {
  c->delta_ns = c->b.median_step_ns - c->a.median_step_ns;
  c->delta_pct = c->a.median_step_ns > 0
                     ? 100.0 * static_cast<double>(c->delta_ns) / static_cast<double>(c->a.median_step_ns)
                     : 0.0;
  c->noise_ns = internal::sat_add(c->a.mad_ns, c->b.mad_ns);
  c->verdict_changed = c->a.verdict != c->b.verdict;
}

// 4000 resamples; fewer for very long runs (at most about 4e7 draws).
std::size_t resample_count(std::size_t a, std::size_t b) {
  return std::clamp<std::size_t>(40000000 / std::max(a, b), 400, 4000);
}

// One run a side: B's mean against A's over the aligned steps, with the 95% percentile
// bootstrap interval of mean_B − mean_A and of mean_B / mean_A − 1.
// Paired: each resample draws n aligned pairs (a step's A and B stay
// together, so what changes from step to step on both sides cancels);
// unpaired: each side is resampled on its own.
MetricComparison compare_metric(CompareMetric metric, const std::vector<std::int64_t>& a,
                                const std::vector<std::int64_t>& b, bool paired) {
  MetricComparison m = point_estimates(metric, a, b);
  if (!m.available) return m;
  m.paired = paired && a.size() == b.size();
  if (a.size() < 2 || b.size() < 2) return m;
  m.has_interval = true;
  const std::size_t resamples = resample_count(a.size(), b.size());
  SplitMix rng{0x7470726f66ull};  // "tprof"
  ResampledChanges changes(resamples);
  for (std::size_t r = 0; r < resamples; ++r) {
    double sa = 0, sb = 0;
    if (m.paired) {
      for (std::size_t k = 0; k < a.size(); ++k) {
        const std::size_t i = rng.below(a.size());
        sa += static_cast<double>(a[i]);
        sb += static_cast<double>(b[i]);
      }
    } else {
      for (std::size_t k = 0; k < a.size(); ++k) sa += static_cast<double>(a[rng.below(a.size())]);
      for (std::size_t k = 0; k < b.size(); ++k) sb += static_cast<double>(b[rng.below(b.size())]);
    }
    changes.add(sa, a.size(), sb, b.size());
  }
  set_interval(&m, std::move(changes));
  return m;
}

// Several runs on a side: a hierarchical bootstrap. Each resample draws
// each side's runs with replacement (as many as it has), then, in each
// drawn run, as many of its steps with replacement; its figure is the mean
// of the drawn steps (every run has the same number of aligned steps, so
// it is also the mean of the drawn runs' means). How far the run means
// differ enters through the first draw; a side with one run contributes
// its steps' noise only. Paired runs (run i of A with run i of B, as many
// a side) draw pairs of runs, and within a pair the steps as pairs when
// they align by number. Same seed and resample count as one run a side.
MetricComparison compare_metric_over_runs(CompareMetric metric, const std::vector<std::int64_t>& a,
                                          std::size_t runs_a, const std::vector<std::int64_t>& b,
                                          std::size_t runs_b, bool paired_steps, bool paired_runs) {
  MetricComparison m = point_estimates(metric, a, b);
  m.runs_a = runs_a;
  m.runs_b = runs_b;
  if (!m.available) return m;
  TPROF_CHECK(a.size() % runs_a == 0 && b.size() % runs_b == 0);
  const std::size_t na = a.size() / runs_a, nb = b.size() / runs_b;
  m.paired_runs = paired_runs && runs_a == runs_b;
  m.paired = m.paired_runs && paired_steps && na == nb;
  if (a.size() < 2 || b.size() < 2) return m;
  m.has_interval = true;
  const std::size_t resamples = resample_count(a.size(), b.size());
  SplitMix rng{0x7470726f66ull};  // "tprof"
  // The sum of one side's drawn steps: its runs, then steps in each.
  const auto draw = [&rng](const std::vector<std::int64_t>& v, std::size_t runs, std::size_t per_run) {
    double sum = 0;
    for (std::size_t k = 0; k < runs; ++k) {
      const std::size_t first = rng.below(runs) * per_run;
      for (std::size_t j = 0; j < per_run; ++j) sum += static_cast<double>(v[first + rng.below(per_run)]);
    }
    return sum;
  };
  ResampledChanges changes(resamples);
  for (std::size_t r = 0; r < resamples; ++r) {
    double sa = 0, sb = 0;
    if (m.paired_runs) {
      for (std::size_t k = 0; k < runs_a; ++k) {
        const std::size_t i = rng.below(runs_a);
        if (m.paired) {
          for (std::size_t j = 0; j < na; ++j) {
            const std::size_t step = rng.below(na);
            sa += static_cast<double>(a[i * na + step]);
            sb += static_cast<double>(b[i * nb + step]);
          }
        } else {
          for (std::size_t j = 0; j < na; ++j) sa += static_cast<double>(a[i * na + rng.below(na)]);
          for (std::size_t j = 0; j < nb; ++j) sb += static_cast<double>(b[i * nb + rng.below(nb)]);
        }
      }
    } else {
      sa = draw(a, runs_a, na);
      sb = draw(b, runs_b, nb);
    }
    changes.add(sa, a.size(), sb, b.size());
  }
  set_interval(&m, std::move(changes));
  return m;
}

std::string verdict_list(const CompareSide& a, const CompareSide& b) {
  return "A " + std::string(verdict_name(a.verdict)) + ", B " + std::string(verdict_name(b.verdict));
}

// What differs between the two runs' set-ups, one line each.
std::vector<std::string> setup_differences(const RunSetup& a, const RunSetup& b) {
  std::vector<std::string> out;
  if (!a.device.empty() && !b.device.empty() && a.device != b.device) {
    out.push_back("device: " + a.device + " vs " + b.device);
  }
  if (a.device_count != b.device_count) {
    out.push_back("devices with work: " + std::to_string(a.device_count) + " vs " + std::to_string(b.device_count));
  }
  // No distributedInfo: one process (torch writes it only under torch.distributed).
  const std::int64_t wa = std::max<std::int64_t>(a.world_size, 1), wb = std::max<std::int64_t>(b.world_size, 1);
  if (wa != wb) out.push_back("world size: " + std::to_string(wa) + " vs " + std::to_string(wb));
  if (!a.dtype.empty() && !b.dtype.empty() && a.dtype != b.dtype) {
    out.push_back("dtype: " + a.dtype + " vs " + b.dtype);
  }
  return out;
}

// Every host op holding at least kEnvOpShare of either side's Self CPU is on
// both sides and moved by a factor within kEnvSpread of the median factor,
// which is kEnvMinChange or more away from 1, over kEnvMinOps such ops: the
// same code on a changed machine (issue 40: cold and warm runs of the 64x64
// program, every host op x1.6-2.1). "" otherwise.
constexpr double kEnvOpShare = 0.01;
constexpr double kEnvSpread = 1.35;
constexpr double kEnvMinChange = 0.1;
constexpr std::size_t kEnvMinOps = 3;

std::string environment_change(const std::vector<OpDelta>& ops) {
  std::int64_t total_a = 0, total_b = 0;
  for (const OpDelta& o : ops) {
    internal::sat_acc(total_a, std::max<std::int64_t>(0, o.self_cpu_a_ns));
    internal::sat_acc(total_b, std::max<std::int64_t>(0, o.self_cpu_b_ns));
  }
  if (total_a <= 0 || total_b <= 0) return {};
  std::vector<double> ratios;
  for (const OpDelta& o : ops) {
    const bool matters = static_cast<double>(o.self_cpu_a_ns) >= kEnvOpShare * static_cast<double>(total_a) ||
                         static_cast<double>(o.self_cpu_b_ns) >= kEnvOpShare * static_cast<double>(total_b);
    if (!matters) continue;
    if (o.change != ChangeKind::kCommon || o.self_cpu_a_ns <= 0 || o.self_cpu_b_ns <= 0) return {};
    ratios.push_back(static_cast<double>(o.self_cpu_b_ns) / static_cast<double>(o.self_cpu_a_ns));
  }
  if (ratios.size() < kEnvMinOps) return {};
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2];
  if (std::abs(median - 1.0) < kEnvMinChange) return {};
  if (ratios.front() < median / kEnvSpread || ratios.back() > median * kEnvSpread) return {};
  char text[256];
  std::snprintf(text, sizeof text,
                "every host op that matters (%zu) moved by x%.2f-%.2f (median x%.2f) and none was added or removed: "
                "the machine or its state changed (clocks, load, warm-up, the profiler), not the code",
                ratios.size(), ratios.front(), ratios.back(), median);
  return text;
}

// What one side records and the other does not.
std::vector<std::string> setup_unknown(const RunSetup& a, const RunSetup& b) {
  std::vector<std::string> out;
  auto one_sided = [&](std::string_view what, const std::string& x, const std::string& y) {
    if (x.empty() != y.empty()) {
      out.push_back(std::string(what) + ": " + (x.empty() ? "unknown" : x) + " vs " + (y.empty() ? "unknown" : y) +
                    " (" + (x.empty() ? "A" : "B") + " does not record it)");
    }
  };
  one_sided("device", a.device, b.device);
  one_sided("dtype", a.dtype, b.dtype);
  return out;
}

// distributedInfo.rank of the trace; -1 when absent.
std::int64_t rank_of(const Trace& t) {
  const std::string_view info = t.meta.top_level_json("distributedInfo");
  if (info.empty()) return -1;
  Result<internal::JsonValue> v = internal::JsonValue::parse(info);
  const internal::JsonValue* rank = v && v->is_object() ? v->find("rank") : nullptr;
  std::int64_t out = -1;
  return rank != nullptr && rank->get_int(&out) ? out : -1;
}

}  // namespace

CompareRun read_compare_run(const Trace& trace, std::string label) {
  CompareRun run;
  RunData d = read_run(trace);
  d.label = std::move(label);
  run.data_ = std::make_shared<const RunData>(std::move(d));
  run.rank_ = rank_of(trace);
  return run;
}

Comparison compare_traces(const Trace& a, const Trace& b) {
  // The two sides are independent until alignment: read B on a second thread.
  std::future<CompareRun> fb = std::async(std::launch::async, [&b] { return read_compare_run(b); });
  std::vector<CompareRun> ra{read_compare_run(a)};
  std::vector<CompareRun> rb{fb.get()};
  return compare_runs(ra, rb);
}

Comparison compare_runs(const std::vector<CompareRun>& a, const std::vector<CompareRun>& b,
                        const CompareOptions& options) {
  TPROF_CHECK(!a.empty() && !b.empty());
  std::vector<const RunData*> da, db;
  std::vector<std::vector<std::int64_t>> numbers;  // each run's step numbers, A's runs then B's
  for (const auto& [side, runs] : {std::pair{&a, &da}, std::pair{&b, &db}}) {
    for (const CompareRun& r : *side) {
      TPROF_CHECK(!r.empty());
      runs->push_back(r.data_.get());
      std::vector<std::int64_t>& n = numbers.emplace_back();
      for (const StepStat& st : r.data_->steps.steps) n.push_back(st.step);
    }
  }

  Comparison c;
  const Alignment al = align_steps(numbers);
  c.alignment = al.kind;
  const std::size_t per_run = al.per_run();
  const std::vector<std::vector<Window>> wa = fill_side(da, al, 0, &c.a);
  const std::vector<std::vector<Window>> wb = fill_side(db, al, da.size(), &c.b);
  set_median_change(&c);

  // The metrics the gate may read, and the one the runs are bound by. One
  // run a side: the steps' bootstrap; several: runs, then steps.
  const bool paired = al.kind == StepAlignment::kStepNumber;
  const bool over_runs = da.size() > 1 || db.size() > 1;
  c.paired_runs = over_runs && options.paired_runs && da.size() == db.size();
  const auto metric = [&](CompareMetric m, const std::vector<std::int64_t>& va, const std::vector<std::int64_t>& vb) {
    return over_runs ? compare_metric_over_runs(m, va, da.size(), vb, db.size(), paired, c.paired_runs)
                     : compare_metric(m, va, vb, paired);
  };
  c.metrics.push_back(metric(CompareMetric::kSteady, c.a.steady_ns, c.b.steady_ns));
  c.metrics.push_back(metric(CompareMetric::kStep, c.a.dur_ns, c.b.dur_ns));
  c.metrics.push_back(metric(CompareMetric::kDevice, c.a.device_ns, c.b.device_ns));
  c.metrics.push_back(metric(CompareMetric::kCpu, c.a.cpu_ns, c.b.cpu_ns));
  // The steady state covers host- and device-bound runs alike, and a change
  // of bound between them: the gate's metric unless --metric says otherwise.
  c.bound_metric = CompareMetric::kSteady;
  c.bound_reason = "the steady state: from one step's end to the next, a step ending when its host work and the "
                   "device work it launched are done, whichever side bounds each run (" + verdict_list(c.a, c.b) + ")";
  c.setup_differences = setup_differences(c.a.setup, c.b.setup);
  // Runs of one side on different set-ups are no runs of one program.
  for (const auto& [side, name] : {std::pair{&c.a, "A"}, std::pair{&c.b, "B"}}) {
    for (std::size_t r = 1; r < side->runs.size(); ++r) {
      for (const std::string& d : setup_differences(side->runs.front().setup, side->runs[r].setup)) {
        c.setup_differences.push_back(std::string("within ") + name + ", run 1 against run " + std::to_string(r + 1) +
                                      ": " + d);
      }
    }
  }
  c.setup_unknown = setup_unknown(c.a.setup, c.b.setup);

  // Ops by name, both sides; only names seen inside the aligned steps.
  const std::size_t slots_a = per_run * da.size(), slots_b = per_run * db.size();
  {
    const std::map<std::string_view, SideName> pa = by_name_over_runs(da, wa, per_run, false, bucket_ops);
    const std::map<std::string_view, SideName> pb = by_name_over_runs(db, wb, per_run, false, bucket_ops);
    std::map<std::string_view, std::pair<const PerStep*, const PerStep*>> by_name;
    for (const auto& [name, e] : pa) by_name[name].first = &e.per_step;
    for (const auto& [name, e] : pb) by_name[name].second = &e.per_step;
    for (const auto& [name, p] : by_name) {
      OpDelta o;
      o.name = std::string(name);
      o.change = change_of(p.first ? p.first->count : 0, p.second ? p.second->count : 0);
      if (p.first) {
        const Aggregated g = aggregate(*p.first, slots_a);
        o.self_cpu_a_ns = g.x_median;
        o.cpu_total_a_ns = g.y_median;
        o.calls_a = g.per_step;
      }
      if (p.second) {
        const Aggregated g = aggregate(*p.second, slots_b);
        o.self_cpu_b_ns = g.x_median;
        o.cpu_total_b_ns = g.y_median;
        o.calls_b = g.per_step;
      }
      c.ops.push_back(std::move(o));
    }
    std::sort(c.ops.begin(), c.ops.end(), [](const OpDelta& x, const OpDelta& y) {
      const std::uint64_t sx = magnitude(x.self_cpu_delta_ns()), sy = magnitude(y.self_cpu_delta_ns());
      if (sx != sy) return sx > sy;
      const std::uint64_t tx = magnitude(x.cpu_total_delta_ns()), ty = magnitude(y.cpu_total_delta_ns());
      if (tx != ty) return tx > ty;
      const std::int64_t mx = std::max(x.self_cpu_a_ns, x.self_cpu_b_ns), my = std::max(y.self_cpu_a_ns, y.self_cpu_b_ns);
      if (mx != my) return mx > my;
      return x.name < y.name;
    });
  }

  c.environment_change = environment_change(c.ops);

  // Device activities by name (the category of the first side that has it).
  {
    const std::map<std::string_view, SideName> pa = by_name_over_runs(da, wa, per_run, true, bucket_kernels);
    const std::map<std::string_view, SideName> pb = by_name_over_runs(db, wb, per_run, true, bucket_kernels);
    struct Both {
      const PerStep* a = nullptr;
      const PerStep* b = nullptr;
      std::string_view category;
    };
    std::map<std::string_view, Both> by_name;
    for (const auto& [name, e] : pa) {
      Both& x = by_name[name];
      x.a = &e.per_step;
      x.category = e.category;
    }
    for (const auto& [name, e] : pb) {
      Both& x = by_name[name];
      x.b = &e.per_step;
      if (x.category.empty()) x.category = e.category;
    }
    for (const auto& [name, e] : by_name) {
      KernelDelta k;
      k.name = std::string(name);
      k.category = std::string(e.category);
      k.change = change_of(e.a ? e.a->count : 0, e.b ? e.b->count : 0);
      if (e.a) {
        const Aggregated g = aggregate(*e.a, slots_a);
        k.time_a_ns = g.x_median;
        k.count_a = g.per_step;
      }
      if (e.b) {
        const Aggregated g = aggregate(*e.b, slots_b);
        k.time_b_ns = g.x_median;
        k.count_b = g.per_step;
      }
      c.kernels.push_back(std::move(k));
    }
    std::sort(c.kernels.begin(), c.kernels.end(), [](const KernelDelta& x, const KernelDelta& y) {
      const std::uint64_t dx = magnitude(x.time_delta_ns()), dy = magnitude(y.time_delta_ns());
      if (dx != dy) return dx > dy;
      const std::int64_t mx = std::max(x.time_a_ns, x.time_b_ns), my = std::max(y.time_a_ns, y.time_b_ns);
      if (mx != my) return mx > my;
      return x.name < y.name;
    });
  }
  return c;
}

namespace {

// One side's aligned steps' values of a metric.
const std::vector<std::int64_t>& metric_values(const CompareSide& s, CompareMetric m) {
  switch (m) {
    case CompareMetric::kDevice: return s.device_ns;
    case CompareMetric::kCpu: return s.cpu_ns;
    case CompareMetric::kSteady: return s.steady_ns;
    default: return s.dur_ns;
  }
}

// The chance that nb exchangeable values all exceed na others: one order of
// the C(na + nb, nb) equally likely ones.
double chance_all_apart(std::size_t na, std::size_t nb) {
  double p = 1;
  for (std::size_t i = 1; i <= nb; ++i) p *= static_cast<double>(i) / static_cast<double>(na + i);
  return p;
}

// A fail over runs that rests on few of them: how often runs of one
// program would order themselves that way by chance, when that is over 5%;
// and a side whose between-run noise is missing. "" otherwise.
std::string few_runs_basis(const MetricComparison& m) {
  std::string out;
  if (m.runs_a == 1 || m.runs_b == 1) {
    out = std::string(m.runs_a == 1 ? "A" : "B") + " has one run: its between-run noise is not in the interval";
  }
  // Paired: a sign test (each pair slower or not, a coin flip for alike
  // runs); unpaired: the exact order of the run means, as for few steps.
  const double p = m.paired_runs ? std::ldexp(1.0, -static_cast<int>(std::min<std::size_t>(m.runs_a, 60)))
                                 : chance_all_apart(m.runs_a, m.runs_b);
  if (p > 0.05) {
    char pb[32];
    std::snprintf(pb, sizeof pb, "%.3g", p);
    if (!out.empty()) out += "; ";
    out += m.paired_runs
               ? "few pairs of runs (" + std::to_string(m.runs_a) + "): even every pair slower happens by chance " +
                     "with p = " + pb + " for alike runs, weak evidence (5 pairs make it 0.031)"
               : "few runs (A " + std::to_string(m.runs_a) + ", B " + std::to_string(m.runs_b) +
                     "): even every B run slower than every A run happens by chance with p = " + pb +
                     " for runs of one program, weak evidence (3 runs a side make it 0.05)";
  }
  return out;
}

}  // namespace

GateResult check_gate(const Comparison& c, const GateOptions& o) {
  GateResult g;
  g.max_slower_pct = o.max_slower_pct;
  g.min_steps = o.min_steps;
  if (o.metric == CompareMetric::kAuto) {
    g.metric = c.bound_metric;
    g.metric_reason = c.bound_reason;
  } else {
    g.metric = o.metric;
    g.metric_reason = "--metric " + std::string(compare_metric_name(o.metric));
  }
  if (const MetricComparison* m = c.metric(g.metric)) g.m = *m;
  g.m.metric = g.metric;
  const MetricComparison& m = g.m;
  // A's mean of 0 (an empty trace): any slowdown of B is over every threshold.
  g.over_threshold = m.mean_b_ns > m.mean_a_ns && (m.mean_a_ns == 0 || m.delta_pct > o.max_slower_pct);
  // Without an interval (one step, allowed by min_steps) only the threshold decides.
  g.over_noise = m.has_interval ? m.low_ns > 0 : true;
  auto refuse = [&](std::string why) {
    g.outcome = GateOutcome::kRefused;
    g.refusal = std::move(why);
    g.passed = false;
    return g;
  };
  if (!m.available) {
    return refuse(g.metric == CompareMetric::kDevice ? "no device activity on both sides to measure device time"
                                                     : "nothing to measure");
  }
  if (!c.setup_differences.empty() && !o.allow_mismatch) {
    std::string why = c.jobs ? "the jobs' set-ups differ (" : "the runs' set-ups differ (";
    for (std::size_t i = 0; i < c.setup_differences.size(); ++i) {
      if (i) why += "; ";
      why += c.setup_differences[i];
    }
    return refuse(why + "); --allow-mismatch gates anyway");
  }
  if (m.steps < o.min_steps) {
    const std::string few = "fewer than " + std::to_string(o.min_steps) + " aligned steps (" +
                            std::to_string(m.steps) + "; --min-steps)";
    if (!g.over_threshold) {
      // Nothing to block: B's mean is within the limit whatever the noise.
      g.outcome = GateOutcome::kPass;
      g.passed = true;
      g.basis = few + ": B's mean is within the limit, so there is nothing to block";
      return g;
    }
    const std::vector<std::int64_t>& va = metric_values(c.a, g.metric);
    const std::vector<std::int64_t>& vb = metric_values(c.b, g.metric);
    const double factor = 1.0 + o.max_slower_pct / 100.0;
    const std::int64_t max_a = va.empty() ? 0 : *std::max_element(va.begin(), va.end());
    const std::int64_t min_b = vb.empty() ? 0 : *std::min_element(vb.begin(), vb.end());
    const bool apart = static_cast<double>(min_b) > factor * static_cast<double>(max_a);
    const double p = chance_all_apart(va.size(), vb.size());
    char pb[32];
    std::snprintf(pb, sizeof pb, "%.3g", p);
    if (apart && p <= 0.05) {
      g.outcome = GateOutcome::kFail;
      g.passed = false;
      g.basis = few + ": every B step is slower than every A step by more than the limit (by chance at most p = " +
                std::string(pb) + ")";
      return g;
    }
    std::string need;
    if (apart) {
      need = "3 or more steps a side (every B step is slower than every A step, but " + std::to_string(va.size()) +
             " against " + std::to_string(vb.size()) + " happens by chance with p = " + pb + ")";
    } else if (m.has_interval && m.delta_pct > o.max_slower_pct && m.delta_pct > m.low_pct) {
      // The interval's half-width shrinks as 1/sqrt(n): the steps at which
      // its lower end would clear the limit.
      const double ratio = (m.delta_pct - m.low_pct) / (m.delta_pct - o.max_slower_pct);
      const double n = std::ceil(static_cast<double>(m.steps) * ratio * ratio);
      need = "about " + std::to_string(static_cast<long long>(std::max(n, static_cast<double>(o.min_steps)))) +
             " steps (if they vary as these do)";
    } else {
      need = std::to_string(o.min_steps) + " or more steps";
    }
    return refuse(few + ": B's mean is over the limit, but so few steps cannot tell it from the noise; " + need +
                  " would decide (lower --min-steps to gate on the interval anyway)");
  }
  if (m.over_runs()) {
    // Over runs the interval holds the between-run noise as well: B fails
    // only when all of it is above the limit.
    g.low_over_limit = !m.has_interval ? g.over_threshold
                       : m.mean_a_ns > 0 ? m.low_pct > o.max_slower_pct
                                         : m.low_ns > 0;
    g.outcome = g.over_threshold && g.low_over_limit ? GateOutcome::kFail : GateOutcome::kPass;
    g.passed = g.outcome == GateOutcome::kPass;
    if (g.outcome == GateOutcome::kFail) g.basis = few_runs_basis(m);
    return g;
  }
  g.outcome = g.over_threshold && g.over_noise ? GateOutcome::kFail : GateOutcome::kPass;
  g.passed = g.outcome == GateOutcome::kPass;
  return g;
}

GateResult check_slower(const Comparison& c, double max_slower_pct) {
  return check_gate(c, GateOptions{.max_slower_pct = max_slower_pct});
}

}  // namespace tprof

// ---- Two jobs (docs/compare.md, "Jobs") ----

namespace tprof {

std::int64_t JobRankDelta::delta_ns() const { return internal::sat_sub(mean_b_ns, mean_a_ns); }

namespace {

// The per-step figures a job's step takes the median of over its ranks.
enum JobField : std::size_t { kDur = 0, kSteady, kDevice, kCpu, kComputation, kCommunication, kIdle, kJobFields };

std::int64_t job_field(const RankStep& s, std::size_t f) {
  switch (f) {
    case kDur: return s.dur_ns;
    case kSteady: return s.steady_ns;
    case kDevice: return s.device_ns;
    case kCpu: return s.cpu_ns;
    case kComputation: return s.computation_ns;
    case kCommunication: return s.communication_ns;
    case kIdle: return s.idle_ns;
    default: break;
  }
  return -1;
}

// One job as compare reads it: its view (windows of one process merged
// into one rank), the ranks whose steps make the job's steps, and for each
// job step the index of that step in each such rank.
struct JobSteps {
  JobView view;
  std::vector<const RankRow*> rows;          // ranks with steps
  std::vector<std::int64_t> numbers;         // the job's steps: their numbers (by order: the first rank's)
  std::vector<std::vector<std::size_t>> at;  // at[k][r]: job step k in rows[r]'s step_list
  bool by_number = true;
  bool whole = false;                        // no rank has steps
  std::map<std::int64_t, std::int64_t> spans;  // per rank: first start to last end of its traces
  bool has_device = true;                    // every rank's trace has device activity
  std::int64_t ranks_with_device = 0;        // ranks of the view with device activity in a trace
};

JobSteps job_steps(const JobSummary& job) {
  JobSteps s;
  s.view = compute_job_view(job);
  std::map<std::string_view, const RankSummary*> by_source;
  for (const RankSummary& r : job.ranks) {
    s.has_device = s.has_device && r.has_device;
    by_source.emplace(r.source, &r);
  }
  for (const RankRow& row : s.view.ranks) {
    if (!row.step_list.empty()) s.rows.push_back(&row);
    // Its traces (the process's windows): device activity in any, and the
    // span from the first start to the last end.
    bool device = false, any = false;
    std::int64_t first = 0, last = 0;
    for (const std::string& w : row.windows) {
      const auto it = by_source.find(w);
      if (it == by_source.end()) continue;
      const RankSummary& r = *it->second;
      device = device || r.has_device;
      first = any ? std::min(first, r.start_ns) : r.start_ns;
      last = any ? std::max(last, r.end_ns) : r.end_ns;
      any = true;
    }
    s.ranks_with_device += device ? 1 : 0;
    s.spans[row.rank] = any ? std::max<std::int64_t>(0, internal::sat_sub(last, first)) : 0;
  }
  if (s.rows.empty()) {
    s.whole = true;
    return s;
  }
  // By number: the numbers every rank has, none repeating in a rank.
  std::vector<std::map<std::int64_t, std::size_t>> index(s.rows.size());
  for (std::size_t r = 0; r < s.rows.size() && s.by_number; ++r) {
    const std::vector<RankStep>& steps = s.rows[r]->step_list;
    for (std::size_t i = 0; i < steps.size() && s.by_number; ++i) {
      s.by_number = index[r].emplace(steps[i].step, i).second;
    }
  }
  if (s.by_number) {
    for (const auto& [number, i] : index.front()) {
      std::vector<std::size_t> where;
      for (const auto& idx : index) {
        const auto it = idx.find(number);
        if (it == idx.end()) break;
        where.push_back(it->second);
      }
      if (where.size() != s.rows.size()) continue;
      s.numbers.push_back(number);
      s.at.push_back(std::move(where));
    }
    if (!s.numbers.empty()) return s;
    s.by_number = false;
  }
  std::size_t fewest = s.rows.front()->step_list.size();
  for (const RankRow* row : s.rows) fewest = std::min(fewest, row->step_list.size());
  for (std::size_t k = 0; k < fewest; ++k) {
    s.numbers.push_back(s.rows.front()->step_list[k].step);
    s.at.emplace_back(s.rows.size(), k);
  }
  return s;
}

// Job step k's figure f: the median over its ranks; -1 when a rank does not
// know it (an older summary).
std::int64_t job_step_value(const JobSteps& s, std::size_t k, std::size_t f) {
  std::vector<std::int64_t> v;
  v.reserve(s.rows.size());
  for (std::size_t r = 0; r < s.rows.size(); ++r) {
    const std::int64_t x = job_field(s.rows[r]->step_list[s.at[k][r]], f);
    if (x < 0) return -1;
    v.push_back(x);
  }
  return internal::mean_median(std::move(v));
}

JobSide job_side(const JobSteps& s) {
  JobSide side;
  side.ranks = static_cast<std::int64_t>(s.view.ranks.size());
  side.ranks_with_steps = static_cast<std::int64_t>(s.rows.size());
  side.world_size = s.view.world_size;
  std::map<Verdict, std::int64_t> counts;
  for (const RankRow& row : s.view.ranks) ++counts[row.verdict];
  side.verdicts.assign(counts.begin(), counts.end());
  std::stable_sort(side.verdicts.begin(), side.verdicts.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  side.stragglers = s.view.stragglers;
  side.slow_link_suspects = s.view.network.suspects;
  side.slow_transfer_groups = static_cast<std::int64_t>(s.view.network.groups.size());
  side.critical_path = s.view.critical_path;
  return side;
}

// One side of the comparison: the aligned job steps' series.
void fill_job_side(const JobSteps& s, const std::vector<std::size_t>& aligned, bool whole, const JobSide& info,
                   CompareSide* side, std::array<std::vector<std::int64_t>, kJobFields>* series) {
  side->has_steps = !s.whole;
  side->total_steps = s.whole ? 0 : s.numbers.size();
  if (whole) {
    std::vector<std::int64_t> spans;
    for (const auto& [rank, span] : s.spans) spans.push_back(span);
    side->step.push_back(-1);
    (*series)[kDur].push_back(internal::mean_median(std::move(spans)));
  } else {
    for (const std::size_t k : aligned) {
      side->step.push_back(s.numbers[k]);
      for (std::size_t f = 0; f < kJobFields; ++f) (*series)[f].push_back(job_step_value(s, k, f));
    }
  }
  // A figure some rank does not know is not measured; device time needs
  // device activity on every rank.
  for (std::size_t f = 0; f < kJobFields; ++f) {
    std::vector<std::int64_t>& v = (*series)[f];
    if (std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x < 0; }) || (f == kDevice && !s.has_device)) {
      v.clear();
    }
  }
  side->dur_ns = (*series)[kDur];
  side->steady_ns = (*series)[kSteady];
  side->device_ns = (*series)[kDevice];
  side->cpu_ns = (*series)[kCpu];
  set_spread(side);
  side->verdict = info.verdicts.empty() ? Verdict::kUnclear : info.verdicts.front().first;
  const std::int64_t most = info.verdicts.empty() ? 0 : info.verdicts.front().second;
  side->verdict_summary = std::to_string(most) + " of " + std::to_string(info.ranks) + " ranks " +
                          std::string(verdict_name(side->verdict));
  side->gpu_bound = side->verdict == Verdict::kComputeBound || side->verdict == Verdict::kCommunicationBound;
  side->setup = RunSetup{.device = "", .device_count = s.ranks_with_device, .world_size = info.world_size, .dtype = ""};
  side->runs.push_back({"", side->has_steps, side->total_steps, side->verdict, side->setup});
}

// A rank's mean per aligned step of field f, by rank (its span for a
// whole job); a rank that does not know f is left out.
std::map<std::int64_t, std::int64_t> rank_means(const JobSteps& s, const std::vector<std::size_t>& aligned,
                                                bool whole, std::size_t f) {
  if (whole) return s.spans;
  std::map<std::int64_t, std::int64_t> out;
  for (std::size_t r = 0; r < s.rows.size(); ++r) {
    double sum = 0;
    bool known = true;
    for (const std::size_t k : aligned) {
      const std::int64_t x = job_field(s.rows[r]->step_list[s.at[k][r]], f);
      known = known && x >= 0;
      sum += static_cast<double>(x);
    }
    if (known && !aligned.empty()) out[s.rows[r]->rank] = to_ns(sum / static_cast<double>(aligned.size()));
  }
  return out;
}

}  // namespace

JobComparison compare_jobs(const JobSummary& a, const JobSummary& b) {
  TPROF_CHECK(!a.ranks.empty() && !b.ranks.empty());
  const JobSteps sa = job_steps(a), sb = job_steps(b);
  JobComparison j;
  j.c.jobs = true;
  j.a = job_side(sa);
  j.b = job_side(sb);
  Comparison& c = j.c;

  // Align the job steps as two traces' steps align (a job without steps:
  // no numbers, a whole trace); a job read by order aligns by order.
  const bool whole = sa.whole || sb.whole;
  const Alignment al = align_steps({whole ? std::vector<std::int64_t>{} : sa.numbers, sb.numbers},
                                   sa.by_number && sb.by_number);
  c.alignment = al.kind;
  std::vector<std::size_t> ia, ib;
  if (!whole) {
    for (const std::ptrdiff_t i : al.steps[0]) ia.push_back(static_cast<std::size_t>(i));
    for (const std::ptrdiff_t i : al.steps[1]) ib.push_back(static_cast<std::size_t>(i));
  }
  std::array<std::vector<std::int64_t>, kJobFields> fa, fb;
  fill_job_side(sa, ia, whole, j.a, &c.a, &fa);
  fill_job_side(sb, ib, whole, j.b, &c.b, &fb);
  set_median_change(&c);

  const bool paired = c.alignment == StepAlignment::kStepNumber;
  c.metrics.push_back(compare_metric(CompareMetric::kSteady, c.a.steady_ns, c.b.steady_ns, paired));
  c.metrics.push_back(compare_metric(CompareMetric::kStep, c.a.dur_ns, c.b.dur_ns, paired));
  c.metrics.push_back(compare_metric(CompareMetric::kDevice, c.a.device_ns, c.b.device_ns, paired));
  c.metrics.push_back(compare_metric(CompareMetric::kCpu, c.a.cpu_ns, c.b.cpu_ns, paired));
  const std::string job_step = "a job step is the median over its ranks";
  if (c.metric(CompareMetric::kSteady)->available) {
    c.bound_metric = CompareMetric::kSteady;
    c.bound_reason = "the steady state: from one step's end to the next, a step ending when its host work and the "
                     "device work it launched are done, whichever side bounds each job (" + job_step + ")";
  } else {
    c.bound_metric = CompareMetric::kStep;
    c.bound_reason = whole ? "the whole trace: a job without steps is one step, the median over its ranks of their "
                             "spans"
                           : "the ProfilerStep's wall time: a summary from before version 3 has no steady state per "
                             "step (summarize the traces again) (" + job_step + ")";
  }
  j.rank_metric = c.bound_metric;

  c.setup_differences = setup_differences(c.a.setup, c.b.setup);
  if (j.a.ranks != j.b.ranks) {
    // Every rank with device activity on both sides: the rank counts say it all.
    if (c.a.setup.device_count == j.a.ranks && c.b.setup.device_count == j.b.ranks) {
      std::erase_if(c.setup_differences, [](const std::string& d) { return d.starts_with("devices with work:"); });
    }
    c.setup_differences.insert(c.setup_differences.begin(),
                               "ranks: " + std::to_string(j.a.ranks) + " vs " + std::to_string(j.b.ranks));
  }
  c.setup_unknown = setup_unknown(c.a.setup, c.b.setup);

  // Phases of the job's step, mean per aligned step.
  for (const auto& [f, name] : {std::pair{kComputation, "computation"}, std::pair{kCommunication, "communication"},
                                std::pair{kIdle, "idle"}}) {
    if (fa[f].empty() || fb[f].empty()) continue;
    j.phases.push_back({name, to_ns(mean_of(fa[f])), to_ns(mean_of(fb[f]))});
  }

  // Ranks, matched by number.
  const std::size_t field = j.rank_metric == CompareMetric::kSteady ? kSteady : kDur;
  const std::map<std::int64_t, std::int64_t> ra = rank_means(sa, ia, whole, field);
  const std::map<std::int64_t, std::int64_t> rb = rank_means(sb, ib, whole, field);
  for (const auto& [rank, mean] : ra) {
    const auto it = rb.find(rank);
    j.ranks.push_back({rank, it == rb.end() ? ChangeKind::kVanished : ChangeKind::kCommon, mean,
                       it == rb.end() ? 0 : it->second});
  }
  for (const auto& [rank, mean] : rb) {
    if (!ra.contains(rank)) j.ranks.push_back({rank, ChangeKind::kNew, 0, mean});
  }
  std::stable_sort(j.ranks.begin(), j.ranks.end(), [](const JobRankDelta& x, const JobRankDelta& y) {
    const bool cx = x.change == ChangeKind::kCommon, cy = y.change == ChangeKind::kCommon;
    if (cx != cy) return cx;
    const std::uint64_t dx = magnitude(x.delta_ns()), dy = magnitude(y.delta_ns());
    if (dx != dy) return dx > dy;
    return x.rank < y.rank;
  });
  return j;
}

}  // namespace tprof
