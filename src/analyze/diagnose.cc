// diagnose(): the context once, every rule, per-step verdicts, the peers'
// breakdowns; findings ordered by severity, then by the time at stake.
#include "tprof/diagnose.h"

#include <algorithm>
#include <array>
#include <future>

#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof {

using internal::DeviceClass;
using internal::DiagnoseContext;
using internal::Interval;

std::string_view severity_name(FindingSeverity s) {
  switch (s) {
    case FindingSeverity::kInfo: return "info";
    case FindingSeverity::kWarning: return "warning";
    case FindingSeverity::kCritical: return "critical";
  }
  return "info";
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kOverheadBound: return "overhead-bound";
    case Verdict::kComputeBound: return "compute-bound";
    case Verdict::kInputBound: return "input-bound";
    case Verdict::kCommunicationBound: return "communication-bound";
    case Verdict::kSyncBound: return "sync-bound";
    case Verdict::kCpuOnly: return "cpu-only";
  }
  return "cpu-only";
}

Evidence& Evidence::num(std::string key, std::int64_t v) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kInt;
  f.i = v;
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::real(std::string key, double v) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kReal;
  f.d = v;
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::text(std::string key, std::string v) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kText;
  f.s = std::move(v);
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::event(std::string key, EventRef e) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kEvent;
  f.events.push_back(std::move(e));
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::events(std::string key, std::vector<EventRef> e) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kEvents;
  f.events = std::move(e);
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::ints(std::string key, std::vector<std::int64_t> v) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kInts;
  f.ints = std::move(v);
  fields_.push_back(std::move(f));
  return *this;
}
Evidence& Evidence::texts(std::string key, std::vector<std::string> v) {
  Field f;
  f.key = std::move(key);
  f.kind = Kind::kTexts;
  f.texts = std::move(v);
  fields_.push_back(std::move(f));
  return *this;
}
const Evidence::Field* Evidence::find(std::string_view key) const {
  for (const Field& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

namespace {

// Verdict thresholds (docs/diagnose.md, "Verdicts").
constexpr double kInputShare = 0.25;     // DataLoader time / step
constexpr double kCommShare = 0.25;      // exposed communication / step
constexpr double kComputeShare = 0.8;    // GPU work (launched or in the window) / step
constexpr double kSyncShare = 0.5;       // host blocked in synchronize / step

bool is_dataloader(std::string_view name) {
  return name.find("DataLoader") != std::string_view::npos;
}

// Events of `sorted` (by ts) that overlap [lo, hi), clipped to it and kept
// when `keep` says so. `max_dur` bounds how far before lo one can start.
template <typename Keep>
std::int64_t clipped_union(const DiagnoseContext& c, const std::vector<std::uint32_t>& sorted, std::int64_t max_dur,
                           std::int64_t lo, std::int64_t hi, Keep keep) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), lo - max_dur,
                             [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
  std::vector<Interval> iv;
  for (; it != sorted.end() && c.ts(*it) < hi; ++it) {
    if (c.end(*it) > lo && keep(*it)) iv.push_back({std::max(c.ts(*it), lo), std::min(c.end(*it), hi)});
  }
  return internal::union_length(std::move(iv));
}

std::vector<StepVerdict> step_verdicts(const DiagnoseContext& c) {
  std::vector<StepVerdict> out;
  const Trace& t = c.trace;
  const std::size_t nsteps = c.steps.steps.size();
  if (nsteps == 0) return out;
  // One pass over device activity: work launched per step, communication
  // and compute intervals for "exposed" communication.
  std::vector<std::vector<Interval>> work(nsteps);
  std::vector<Interval> compute_iv, comm_iv;
  for (const internal::DeviceOp& op : c.device) {
    if (op.step >= 0) work[static_cast<std::size_t>(op.step)].push_back({op.start, op.end});
    if (op.cls == DeviceClass::kCompute) compute_iv.push_back({op.start, op.end});
    if (op.cls == DeviceClass::kComm) comm_iv.push_back({op.start, op.end});
  }
  compute_iv = internal::merge_intervals(std::move(compute_iv));
  const std::vector<Interval> exposed = internal::subtract(internal::merge_intervals(std::move(comm_iv)), compute_iv);
  std::int64_t max_host = 0, max_rt = 0;
  std::vector<std::uint32_t> dl_ops, sync_calls;
  for (std::uint32_t e : c.host_ops) {
    if (is_dataloader(t.name(e))) {
      dl_ops.push_back(e);
      max_host = std::max(max_host, c.dur(e));
    }
  }
  for (std::uint32_t e : c.runtime) {
    if (internal::is_sync_call(t.name(e))) {
      sync_calls.push_back(e);
      max_rt = std::max(max_rt, c.dur(e));
    }
  }
  auto all = [](std::uint32_t) { return true; };
  for (std::size_t si = 0; si < nsteps; ++si) {
    const StepStat& st = c.steps.steps[si];
    StepVerdict v;
    v.step = st.step;
    v.start_ns = st.start_ns;
    v.cpu_span_ns = st.dur_ns;
    v.cpu_busy_ns = st.cpu_busy_ns;
    v.gpu_busy_ns = st.gpu_busy_ns;
    v.gpu_idle_pct = st.gpu_idle_pct;
    v.launch_offset_ns = st.first_kernel_offset_ns;
    const std::int64_t lo = st.start_ns, hi = st.start_ns + st.dur_ns;
    v.gpu_work_ns = internal::union_length(std::move(work[si]));
    v.exposed_comm_ns = internal::covered_within(exposed, lo, hi);
    v.dataloader_ns = clipped_union(c, dl_ops, max_host, lo, hi, all);
    v.sync_ns = clipped_union(c, sync_calls, max_rt, lo, hi, all);
    const double span = static_cast<double>(std::max<std::int64_t>(1, st.dur_ns));
    if (!c.has_device()) {
      v.verdict = Verdict::kCpuOnly;
    } else if (static_cast<double>(v.dataloader_ns) > kInputShare * span) {
      v.verdict = Verdict::kInputBound;
    } else if (static_cast<double>(v.exposed_comm_ns) > kCommShare * span) {
      v.verdict = Verdict::kCommunicationBound;
    } else if (static_cast<double>(std::max(v.gpu_work_ns, v.gpu_busy_ns)) >= kComputeShare * span) {
      v.verdict = Verdict::kComputeBound;
    } else if (static_cast<double>(v.sync_ns) > kSyncShare * span) {
      v.verdict = Verdict::kSyncBound;
    } else {
      v.verdict = Verdict::kOverheadBound;
    }
    out.push_back(v);
  }
  return out;
}

// The trace as one window when it has no steps.
Verdict whole_trace_verdict(const DiagnoseContext& c) {
  if (!c.has_device()) return Verdict::kCpuOnly;
  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  return static_cast<double>(w.busy_ns) >= kComputeShare * static_cast<double>(std::max<std::int64_t>(1, w.span_ns))
             ? Verdict::kComputeBound
             : Verdict::kOverheadBound;
}

std::string summarize(const DiagnoseContext& c, const Diagnosis& d) {
  std::string s;
  if (!d.steps.empty()) {
    std::array<int, 6> counts{};
    for (const StepVerdict& v : d.steps) ++counts[static_cast<int>(v.verdict)];
    double idle = 0;
    for (const StepVerdict& v : d.steps) idle += v.gpu_idle_pct;
    idle /= static_cast<double>(d.steps.size());
    s = std::to_string(counts[static_cast<int>(d.verdict)]) + " of " + std::to_string(d.steps.size()) + " steps " +
        std::string(verdict_name(d.verdict));
    if (c.has_device()) s += "; the GPU is idle " + internal::format_pct(idle) + " of a step on average";
  } else {
    s = "no ProfilerStep in the trace; judged over the whole trace (" + internal::format_ns(c.end_ns - c.start_ns) + ")";
  }
  if (c.has_device()) {
    s += "; Self CPU total " + internal::format_ns(c.self_cpu_total_ns()) + ", Self CUDA total " +
         internal::format_ns(c.self_device_total_ns());
  }
  return s;
}

}  // namespace

std::vector<std::string> rule_ids() {
  std::vector<std::string> ids;
  for (const internal::RuleInfo& r : internal::all_rules()) ids.emplace_back(r.id);
  return ids;
}

Diagnosis diagnose(const Trace& trace, const DiagnoseOptions& options) {
  // Two threads: torch's averages alongside the context, the peers'
  // breakdowns alongside the rules. Each part reads the trace and the
  // context only, and the results do not depend on the split.
  const DiagnoseContext c(trace, /*with_averages=*/true);
  std::future<Breakdowns> breakdowns = std::async(std::launch::async, internal::compute_breakdowns, std::cref(c));
  Diagnosis d;
  d.steps = step_verdicts(c);
  if (d.steps.empty()) {
    d.verdict = whole_trace_verdict(c);
  } else {
    std::array<int, 6> counts{};
    for (const StepVerdict& v : d.steps) ++counts[static_cast<int>(v.verdict)];
    d.verdict = static_cast<Verdict>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  }
  for (const internal::RuleInfo& r : internal::all_rules()) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), r.id) == options.only.end()) continue;
    r.fn(c, &d.findings);
  }
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.impact_ns > b.impact_ns;
  });
  d.breakdowns = breakdowns.get();
  d.summary = summarize(c, d);
  return d;
}

}  // namespace tprof
