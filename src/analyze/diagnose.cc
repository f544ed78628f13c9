// diagnose(): the context once, every rule, the verdicts (verdict.cc), the
// peers' breakdowns; findings ordered by the time they could save, then by
// severity.
#include "tprof/diagnose.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "src/analyze/breakdowns.h"
#include "src/analyze/causes.h"
#include "src/analyze/consistency.h"
#include "src/analyze/diagnose_context.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/analyze/verdict.h"

namespace tprof {

using internal::DiagnoseContext;

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
    case Verdict::kHostBound: return "host-bound";
    case Verdict::kDependencyBound: return "dependency-bound";
    case Verdict::kUnclear: return "unclear";
    case Verdict::kCopyBound: return "copy-bound";
    case Verdict::kSharedDevice: return "shared-device";
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
  return internal::diagnose(c, options);
}

bool internal::by_impact(const Finding& a, const Finding& b) {
  if (a.impact_ns != b.impact_ns) return a.impact_ns > b.impact_ns;
  return a.severity > b.severity;
}

namespace internal {
namespace {

// Runs the selected rules, on up to `threads` threads, and returns their
// findings in registry order: the same findings, in the same order, as
// running them one after another. The rules that claim idle time run in
// order as one task (each reads what the ones before it claimed); every
// other rule is a task of its own, handed to whichever thread is free.
std::vector<Finding> run_rules(const DiagnoseContext& c, const DiagnoseOptions& options) {
  const std::span<const RuleInfo> rules = all_rules();
  std::vector<std::size_t> chain, alone;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const RuleInfo& r = rules[i];
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), r.id) == options.only.end()) continue;
    (r.claims_idle ? chain : alone).push_back(i);
  }
  std::vector<std::vector<Finding>> found(rules.size());
  auto run_chain = [&] {
    std::vector<Finding> claimed;  // every finding so far: what claimable_idle reads
    std::vector<std::size_t> ends;
    for (const std::size_t i : chain) {
      rules[i].fn(c, &claimed);
      ends.push_back(claimed.size());
    }
    std::size_t from = 0;
    for (std::size_t k = 0; k < chain.size(); ++k) {
      found[chain[k]].assign(std::make_move_iterator(claimed.begin() + static_cast<std::ptrdiff_t>(from)),
                             std::make_move_iterator(claimed.begin() + static_cast<std::ptrdiff_t>(ends[k])));
      from = ends[k];
    }
  };
  // Task 0 is the chain (the longest: it builds the idle partition first).
  const std::size_t tasks = 1 + alone.size();
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t t = next++; t < tasks; t = next++) {
      if (t == 0) {
        run_chain();
      } else {
        const std::size_t i = alone[t - 1];
        rules[i].fn(c, &found[i]);
      }
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads =
      std::min<std::size_t>(tasks, options.threads > 0 ? static_cast<std::size_t>(options.threads) : cores);
  std::vector<std::future<void>> helpers;
  for (std::size_t k = 1; k < threads; ++k) helpers.push_back(std::async(std::launch::async, work));
  work();
  for (std::future<void>& h : helpers) h.get();  // rethrows a helper's exception
  std::vector<Finding> all;
  for (std::vector<Finding>& v : found) std::move(v.begin(), v.end(), std::back_inserter(all));
  return all;
}

// A claim one step holds most of (resnet50's 42.9 ms pageable input copy
// in its first step, 5-206 us in the others): per step, what a typical
// step claims (the median over the steps), and the one step's excess once
// (evidence once_ns, once_step; the fix line prints both). At least this
// many steps, so that "typical" means something. A rule may set once_ns and
// once_step itself when its saving is one step's.
constexpr std::size_t kOneOffMinSteps = 3;

void split_one_off(const DiagnoseContext& c, Finding* f) {
  const std::size_t nsteps = c.steps.steps.size();
  // A rule that knows its saving is one step's (dispatch_gap's first call)
  // says so in its evidence: nothing a step.
  if (f->evidence.find("once_ns") != nullptr) {
    if (nsteps > 0) f->impact_per_step_ns = 0;
    return;
  }
  if (f->idle_claim.empty() || nsteps < kOneOffMinSteps || f->impact_ns <= 0 || f->impact_ns > f->idle_ns) return;
  std::vector<Interval> claim;
  for (const TimeRange& r : f->idle_claim) claim.push_back({r.start_ns, r.end_ns});
  claim = merge_intervals(std::move(claim));
  std::vector<std::int64_t> per_step;
  std::int64_t total = 0;
  std::size_t top = 0;
  for (std::size_t i = 0; i < nsteps; ++i) {
    const StepStat& st = c.steps.steps[i];
    per_step.push_back(covered_within(claim, st.start_ns, st.start_ns + st.dur_ns));
    sat_acc(total, per_step.back());
    if (per_step[i] > per_step[top]) top = i;
  }
  // Most of the finding's saving, not only of its claim inside the steps.
  if (total <= 0 || sat_mul(2, per_step[top]) <= std::max(total, f->impact_ns)) return;
  const std::int64_t typical = mean_median(per_step);
  // At most the finding's saving (a one-off gap saves its excess over the
  // usual gap, not the whole gap it claims).
  const std::int64_t once = std::min(per_step[top] - typical, f->impact_ns);
  f->impact_per_step_ns = std::min(f->impact_per_step_ns, typical);
  f->evidence.num("once_ns", once).num("once_step", c.steps.steps[top].step);
}

}  // namespace
}  // namespace internal

Diagnosis internal::diagnose(const DiagnoseContext& c, const DiagnoseOptions& options) {
  std::future<Breakdowns> breakdowns = std::async(std::launch::async, internal::compute_breakdowns, std::cref(c));
  Diagnosis d;
  if (c.untimed_device() > 0) d.time_origin_ns = c.start_ns;
  d.findings = run_rules(c, options);
  // The saving per step: averaged over the recorded steps where the rule did
  // not measure it per step (a one-time cost shows as its share of a step).
  // A saving that is GPU idle time the finding claims is at most what a
  // median step leaves idle: the mean over the steps is pulled up by a wide
  // first step (review 2026-11-26, item 6: "up to 30.6 us a step" where the
  // median step is 28.0 us and its idle 25.2 us). Without idle in the median
  // step (a GPU-bound run) the mean stays: the claim is a one-off's.
  const auto steps = static_cast<std::int64_t>(c.steps.steps.size());
  const std::int64_t median_idle = c.median_step_idle_ns();
  for (Finding& f : d.findings) {
    if (f.impact_per_step_ns == 0 && f.impact_ns > 0) f.impact_per_step_ns = steps > 0 ? f.impact_ns / steps : f.impact_ns;
    if (steps > 0 && median_idle > 0 && f.idle_ns > 0 && f.impact_ns <= f.idle_ns) {
      f.impact_per_step_ns = std::min(f.impact_per_step_ns, median_idle);
    }
    internal::split_one_off(c, &f);
  }
  std::stable_sort(d.findings.begin(), d.findings.end(), by_impact);
  internal::judge(c, &d);
  internal::reconcile(c, &d);
  if (c.has_device()) d.idle = c.idle().account(c);
  d.breakdowns = breakdowns.get();
  // Beside TraceLens' rows, not by its rules: the collectives its names miss
  // and it counts as computation (the kernel-class table's communication).
  if (d.breakdowns.tracelens_gpu_timeline) {
    TracelensGpuTimeline& g = *d.breakdowns.tracelens_gpu_timeline;
    for (const internal::DeviceOp& op : c.device) {
      if (op.cls != internal::DeviceClass::kComm || internal::tracelens_counts_as_comm(c.name(op.event))) continue;
      ++g.comm_as_computation;
      internal::sat_acc(g.comm_as_computation_ns, op.end - op.start);
    }
  }
  internal::add_causes(c, &d);
  return d;
}

}  // namespace tprof
