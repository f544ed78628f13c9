// many_calls: one key called far more often than the others, cheap per call
// but costly in sum. Origin: docs/trace-reading.md, "One event with a very
// large call count: cheap per call, costly in sum; batch or fuse".
// Precondition for a kernel (a device row): a kernel's time is its own work
// (its memory traffic, its math), which fewer launches do not remove unless
// the launches split one job; what they do remove is the GPU idle between
// the instances, while the host launches the next one or the device starts
// it (idle causes launching and kernel_latency). So the cost at stake is
// that idle, not the kernels' time: the rule is silent for a kernel row
// unless the idle between its instances is at least kCostlyShare of the
// kernels' own time, and its saving is that idle. Review 2026-11-26, R6:
// record_vecadd launches the full 1M-element add 200 times (3.6 us each,
// ~74% of the H200's HBM bandwidth), and "the fixed cost of each call adds up
// to 711.3 us" named the traffic; only the 219 us between them (1.1 us a
// launch) can go.
#include <algorithm>
#include <string>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// "Very large call count": an absolute floor so short traces stay quiet, and
// relative to the iterations: 50 calls per ProfilerStep (a once-per-step op
// has 1; the H100 traces have 20 calls in 20 steps for every row). Without
// steps, relative to the others: 50× the median count of the rows (median,
// because a loop's op, its launch call and its kernel share one count).
constexpr std::int64_t kMinCalls = 100;
constexpr std::int64_t kCallsPerBaseline = 50;
// "Cheap per call": under 10 µs, the peers' short-kernel bound (HTA,
// Nsight Systems' "many kernels shorter than ~10 µs").
constexpr std::int64_t kCheapPerCallNs = 10'000;
// "Costly in sum": at least 10% of its column's total: CPU total (the cost
// of making the call, children included) over the Self CPU total, or Self
// CUDA over the Self CUDA total for device rows.
constexpr double kCostlyShare = 0.1;
// A host row's cost is at stake only when the device waits for it: with the
// GPU busy this share of the window (compute_bound's threshold) the calls run
// while queued work executes, and the finding is informational.
constexpr double kHiddenBusyShare = 0.8;
// The GPU idle that fewer launches (a graph, one larger launch) remove:
// the host launching the next instance, the device starting queued work.
// A host row whose median call times its calls is under this share of
// its time spends the rest in calls that do work of their own.
constexpr double kFixedShare = 0.8;
constexpr std::uint32_t kBetweenLaunchesCauses =
    cause_bit(IdleCause::kLaunching) | cause_bit(IdleCause::kKernelLatency);

// The GPU idle between consecutive instances of kernel `key` on each of its
// streams (kBetweenLaunchesCauses), and the gaps it lies in.
struct Between {
  std::int64_t idle_ns = 0;
  std::int64_t gaps = 0;  // pairs of consecutive instances with idle between them
};
Between idle_between(const DiagnoseContext& c, std::string_view key) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> last_end;  // (lane, end of its last instance)
  std::vector<Interval> between;
  for (const DeviceOp& op : c.device) {
    if (c.name(op.event) != key) continue;
    auto it = std::find_if(last_end.begin(), last_end.end(), [&](const auto& p) { return p.first == op.lane; });
    if (it == last_end.end()) {
      last_end.emplace_back(op.lane, op.end);
      continue;
    }
    if (op.start > it->second) between.push_back({it->second, op.start});
    it->second = std::max(it->second, op.end);
  }
  Between b;
  const IdlePartition& idle = c.idle();
  for (const Interval& g : between) {
    const std::int64_t ns = total_length(idle.ranges(kBetweenLaunchesCauses, g.start, g.end));
    if (ns <= 0) continue;
    sat_acc(b.idle_ns, ns);
    ++b.gaps;
  }
  return b;
}

// The GPU idle (any cause) while the host made the calls of host row
// `key`: the most the step can save by making them cheaper; the rest of
// their time ran while queued work kept the GPU busy.
std::int64_t idle_during_calls(const DiagnoseContext& c, std::string_view key) {
  std::vector<Interval> calls;
  for (const std::vector<std::uint32_t>* list : {&c.host_ops, &c.runtime}) {
    for (std::uint32_t e : *list) {
      if (c.name(e) == key && c.dur(e) > 0) calls.push_back({c.ts(e), c.end(e)});
    }
  }
  std::int64_t ns = 0;
  for (const Interval& g : merge_intervals(std::move(calls))) {
    sat_acc(ns, total_length(c.idle().ranges(kAllCauses, g.start, g.end)));
  }
  return ns;
}

}  // namespace

void rule_many_calls(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::vector<StatRow>& rows = c.averages();
  std::vector<std::int64_t> counts;
  for (const StatRow& r : rows) {
    if (!is_profiler_step(r.key) && !r.is_user_annotation) counts.push_back(r.count);
  }
  if (counts.size() < 2) return;
  const std::size_t mid = counts.size() / 2;
  std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(mid), counts.end());
  const std::int64_t median_count = counts[mid];
  const std::size_t nsteps = c.steps.steps.size();
  const std::int64_t baseline =
      nsteps > 0 ? static_cast<std::int64_t>(nsteps) : std::max<std::int64_t>(1, median_count);
  const std::int64_t cpu_total = c.self_cpu_total_ns();
  const std::int64_t dev_total = c.self_device_total_ns();

  const StatRow* best = nullptr;
  std::int64_t best_cost = 0, best_total = 0, best_rank = 0;
  Between best_between;
  for (const StatRow& r : rows) {
    if (is_profiler_step(r.key) || r.is_user_annotation || r.count < kMinCalls) continue;
    if (r.count < kCallsPerBaseline * baseline) continue;
    // The profiler's own event pair around every op (profiler_event_timing).
    if (r.key.find("EventRecord") != std::string::npos || r.key.find("EventCreate") != std::string::npos ||
        r.key.find("EventDestroy") != std::string::npos || r.key.find("EventElapsedTime") != std::string::npos) {
      if (c.profiler_event_timing()) continue;
    }
    const std::int64_t cost = r.is_device ? r.self_device_time_total_ns : r.cpu_time_total_ns;
    const std::int64_t total = r.is_device ? dev_total : cpu_total;
    if (total <= 0 || cost / r.count > kCheapPerCallNs) continue;
    if (static_cast<double>(cost) < kCostlyShare * static_cast<double>(total)) continue;
    // A kernel's time is its work: what fewer launches save is the idle
    // between them, and it must be worth a finding.
    Between between;
    if (r.is_device) {
      between = idle_between(c, r.key);
      if (static_cast<double>(between.idle_ns) < kCostlyShare * static_cast<double>(cost)) continue;
    }
    const std::int64_t rank = r.is_device ? between.idle_ns : cost;
    if (rank > best_rank) {
      best = &r;
      best_cost = cost;
      best_total = total;
      best_rank = rank;
      best_between = between;
    }
  }
  if (best == nullptr) return;

  // Example instances and the steps they ran in: one pass over the events of
  // the row's kind.
  std::vector<EventRef> examples;
  std::vector<std::int64_t> call_ns;  // a host row's calls' durations
  std::int64_t init_calls = 0, init_ns = 0;
  if (best->is_device) {
    for (const DeviceOp& op : c.device) {
      if (c.name(op.event) != best->key) continue;
      if (examples.size() < 3) examples.push_back(c.ref(op.event));
    }
  } else {
    // Calls the idle partition files as initialisation (a kernel's first
    // launch loading its module, a library's first handle) are set-up, not
    // a per-call cost: left out of the row's cost (issue 38's twelfth round:
    // one 5.109 ms lazy-loading cudaLaunchKernel made 681 launches "9.8 us
    // each", 27.4% of Self CPU; the other 680 took 2.3 us).
    auto scan = [&](const std::vector<std::uint32_t>& list) {
      for (std::uint32_t e : list) {
        if (c.name(e) != best->key) continue;
        const BlockingCall* b = c.has_device() ? c.idle().blocking_call(e) : nullptr;
        if (b != nullptr && b->kind == IdleCause::kBlockedInit) {
          ++init_calls;
          sat_acc(init_ns, c.dur(e));
          continue;
        }
        if (examples.size() < 3) examples.push_back(c.ref(e));
        call_ns.push_back(c.dur(e));
      }
    };
    scan(c.host_ops);
    scan(c.runtime);
  }
  const std::int64_t count = best->count - init_calls;
  if (init_calls > 0) {
    best_cost = std::max<std::int64_t>(0, best_cost - init_ns);
    if (count < kMinCalls || static_cast<double>(best_cost) < kCostlyShare * static_cast<double>(best_total)) return;
  }
  // A host row's fixed cost is its typical call's: the median call times
  // the calls. Calls far above it do work of their own, which batching
  // does not remove (issue 38's eighth round: six of 162 aten::matmul calls
  // on a 1000x15 matrix held half their 883 us).
  std::int64_t fixed_cost = best_cost;
  const std::int64_t median_call = call_ns.empty() ? 0 : mean_median(call_ns);
  if (!best->is_device && median_call > 0) {
    fixed_cost = std::min(best_cost, sat_mul(median_call, count));
  }
  const bool uneven = static_cast<double>(fixed_cost) < kFixedShare * static_cast<double>(best_cost);

  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const double gpu_busy = w.span_ns > 0 ? static_cast<double>(w.busy_ns) / static_cast<double>(w.span_ns) : 0;
  // A host row behind a busy GPU: busy through most of the window, or
  // through the calls themselves (a loop of cheap calls while a long kernel
  // runs: the GPU idles under less than kCostlyShare of them).
  const bool host_row_with_gpu = !best->is_device && c.has_device();
  const std::int64_t idle_during = host_row_with_gpu ? idle_during_calls(c, best->key) : 0;
  const bool busy_through_calls =
      host_row_with_gpu && static_cast<double>(idle_during) < kCostlyShare * static_cast<double>(best_cost);
  const bool hidden = host_row_with_gpu && (gpu_busy >= kHiddenBusyShare || busy_through_calls);
  Finding f;
  f.id = "many_calls";
  f.severity = hidden ? FindingSeverity::kInfo : FindingSeverity::kWarning;
  const double share = 100.0 * static_cast<double>(best_cost) / static_cast<double>(best_total);
  f.title = best->key + " called " + (count == 1 ? std::string("once") : std::to_string(count) + " times") + " (" + format_ns(best_cost / count) +
            " each): " + format_ns(best_cost) + ", " + format_pct(share) + " of " +
            (best->is_device ? "Self CUDA" : "Self CPU") + " total" +
            (uneven ? "; at the median call's " + format_ns(median_call) + ", " + format_ns(fixed_cost) + " is the calls' fixed cost"
                    : std::string());
  if (init_calls > 0) {
    f.title += " (besides " + count_of(init_calls, "initialisation call") + ", " + format_ns(init_ns) + ")";
  }
  if (hidden && gpu_busy >= kHiddenBusyShare) {
    f.title += "; hidden behind a GPU busy " + format_pct(100.0 * gpu_busy);
  } else if (hidden) {
    f.title += "; the GPU stays busy through " +
               format_pct(100.0 - 100.0 * static_cast<double>(idle_during) / static_cast<double>(best_cost)) +
               " of them";
  }
  const std::int64_t between_avg = best_between.gaps > 0 ? best_between.idle_ns / best_between.gaps : 0;
  if (best->is_device) {
    f.title += "; the GPU idles " + format_ns(best_between.idle_ns) + " between them (" + format_ns(between_avg) +
               " a launch)";
  }
  f.evidence.text("key", best->key)
      .num("count", count)
      .num("median_count", median_count)
      .num("baseline", baseline)
      .text("baseline_kind", nsteps > 0 ? "steps" : "median_count")
      .num("avg_ns", best_cost / count)
      .num("cost_ns", best_cost)
      .num("total_ns", best_total)
      .real("share_pct", share);
  if (init_calls > 0) f.evidence.num("init_calls", init_calls).num("init_ns", init_ns);
  if (!best->is_device && median_call > 0) f.evidence.num("median_call_ns", median_call).num("fixed_cost_ns", fixed_cost);
  if (c.has_device()) f.evidence.real("gpu_busy_pct", 100.0 * gpu_busy);
  if (host_row_with_gpu) f.evidence.num("gpu_idle_during_calls_ns", idle_during);
  if (best->is_device) f.evidence.num("idle_between_ns", best_between.idle_ns).num("gaps", best_between.gaps);
  if (nsteps > 0) f.evidence.real("calls_per_step", static_cast<double>(count) / static_cast<double>(nsteps));
  f.evidence.events("examples", std::move(examples));
  // "its 200 launches in the window", "the cudaLaunchKernel calls (10 a step)".
  const std::string per = nsteps > 0 ? " a step" : " in the window";
  const std::string each = std::to_string(nsteps > 0 ? count / static_cast<std::int64_t>(nsteps) : count) + per;
  const std::string each_launches =
      count_of(nsteps > 0 ? count / static_cast<std::int64_t>(nsteps) : count, "launch") + per;
  const std::string_view key = best->key;
  const bool launch = key.find("LaunchKernel") != std::string_view::npos;
  std::string remedy;
  // A step that waits for the GPU mid-way cannot be a graph yet.
  const std::string blocker = launch ? c.graph_blocker() : std::string();
  if (launch) {
    remedy = blocker.empty() ? "Replay the step as a " + std::string(c.api()) + " graph (" + c.graph_how() +
                                   ") or fuse the small ops (" + c.fuse_how() + ") to cut the " + best->key +
                                   " calls (" + each + ")"
                             : "Fuse the small ops (" + c.fuse_how() + ") to cut the " + best->key + " calls (" + each +
                                   ")";
  } else if (best->is_device) {
    // The idle between the launches is the saving; the kernels' time is
    // their work and stays.
    remedy = "Replay the launches of " + title_name(best->key) + " (" + each_launches + ") as a " +
             std::string(c.api()) + " graph (" + c.graph_how() + ")" +
             (c.is_torch() ? " or fuse the ops that launch it (" + c.compile_how() + ")" : std::string()) +
             ": between them the GPU idles " + format_ns(best_between.idle_ns) + " (" + format_ns(between_avg) +
             " a launch), the most fewer launches save; the " + format_ns(best_cost) +
             " the kernels run is their own work and stays";
  } else {
    // torch._foreach_* is for an optimizer's per-parameter updates: named
    // only where the trace runs one (issue 38's eighth round: a
    // Gaussian-process solver's matmuls were told to use it).
    bool optimizer = false;
    for (const StatRow& r : rows) optimizer = optimizer || r.key.rfind("Optimizer.", 0) == 0;
    remedy = c.is_torch() ? "Batch the " + best->key + " calls (" + each + ") into fewer, larger ones where they are "
                            "independent: one op on a stacked tensor instead of a Python loop" +
                                std::string(optimizer ? ", torch._foreach_* for per-parameter updates" : "") +
                                "; where each needs the last one's result (an iterative loop), compile the loop (" +
                                c.compile_how() + ") or replace it with one larger op (a direct solve instead of "
                                "iterations)"
                          : "Batch the " + best->key + " calls (" + each + ") into fewer, larger ones";
  }
  if (best->is_device) {
    f.advice = remedy + ". Each launch runs " + format_ns(best_cost / count) +
               " of work (its memory traffic and math), not a fixed cost: fewer, larger launches shorten it only "
               "where each launch is too small to fill the GPU.";
  } else {
    f.advice = remedy + (hidden ? "; the GPU is busy through them, so this saves host time, not step time" : "") +
               (uneven ? ". At the median call's " + format_ns(median_call) + ", the fixed cost of each call adds up to " +
                             format_ns(fixed_cost) + "; the other " + format_ns(best_cost - fixed_cost) +
                             " is the longer calls' own work, which stays."
                       : ". At " + format_ns(best_cost / count) + " a call, the fixed cost of each call adds up to " +
                             format_ns(best_cost) + ".") +
               (blocker.empty() ? "" : " " + blocker);
  }
  // Behind a busy GPU host calls cost host time only: the step saves
  // nothing, and at most the GPU idle under them otherwise (without device
  // activity, their time). A kernel's launches cost the idle between them.
  f.impact_ns = best->is_device ? best_between.idle_ns
                : hidden        ? 0
                : c.has_device() ? std::min(fixed_cost, idle_during)
                                 : fixed_cost;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
