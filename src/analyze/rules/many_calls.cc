// many_calls: one key called far more often than the others, cheap per call
// but costly in sum. Origin: docs/trace-reading.md, "One event with a very
// large call count: cheap per call, costly in sum; batch or fuse".
#include <algorithm>
#include <string>
#include <vector>

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
  std::int64_t best_cost = 0, best_total = 0;
  for (const StatRow& r : rows) {
    if (is_profiler_step(r.key) || r.is_user_annotation || r.count < kMinCalls) continue;
    if (r.count < kCallsPerBaseline * baseline) continue;
    const std::int64_t cost = r.is_device ? r.self_device_time_total_ns : r.cpu_time_total_ns;
    const std::int64_t total = r.is_device ? dev_total : cpu_total;
    if (total <= 0 || cost / r.count > kCheapPerCallNs) continue;
    if (static_cast<double>(cost) < kCostlyShare * static_cast<double>(total)) continue;
    if (cost > best_cost) {
      best = &r;
      best_cost = cost;
      best_total = total;
    }
  }
  if (best == nullptr) return;

  // Example instances and the steps they ran in: one pass over the events of
  // the row's kind.
  std::vector<EventRef> examples;
  if (best->is_device) {
    for (const DeviceOp& op : c.device) {
      if (c.name(op.event) != best->key) continue;
      if (examples.size() < 3) examples.push_back(c.ref(op.event));
    }
  } else {
    auto scan = [&](const std::vector<std::uint32_t>& list) {
      for (std::uint32_t e : list) {
        if (examples.size() >= 3) return;
        if (c.name(e) == best->key) examples.push_back(c.ref(e));
      }
    };
    scan(c.host_ops);
    scan(c.runtime);
  }

  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const double gpu_busy = w.span_ns > 0 ? static_cast<double>(w.busy_ns) / static_cast<double>(w.span_ns) : 0;
  const bool hidden = !best->is_device && c.has_device() && gpu_busy >= kHiddenBusyShare;
  Finding f;
  f.id = "many_calls";
  f.severity = hidden ? FindingSeverity::kInfo : FindingSeverity::kWarning;
  const double share = 100.0 * static_cast<double>(best_cost) / static_cast<double>(best_total);
  f.title = best->key + " called " + (best->count == 1 ? std::string("once") : std::to_string(best->count) + " times") + " (" + format_ns(best_cost / best->count) +
            " each): " + format_ns(best_cost) + ", " + format_pct(share) + " of " +
            (best->is_device ? "Self CUDA" : "Self CPU") + " total";
  if (hidden) f.title += "; hidden behind a GPU busy " + format_pct(100.0 * gpu_busy);
  f.evidence.text("key", best->key)
      .num("count", best->count)
      .num("median_count", median_count)
      .num("baseline", baseline)
      .text("baseline_kind", nsteps > 0 ? "steps" : "median_count")
      .num("avg_ns", best_cost / best->count)
      .num("cost_ns", best_cost)
      .num("total_ns", best_total)
      .real("share_pct", share);
  if (c.has_device()) f.evidence.real("gpu_busy_pct", 100.0 * gpu_busy);
  if (nsteps > 0) f.evidence.real("calls_per_step", static_cast<double>(best->count) / static_cast<double>(nsteps));
  f.evidence.events("examples", std::move(examples));
  // "its 200 launches in the window", "the cudaLaunchKernel calls (10 a step)".
  const std::string per = nsteps > 0 ? " a step" : " in the window";
  const std::string each = std::to_string(nsteps > 0 ? best->count / static_cast<std::int64_t>(nsteps) : best->count) + per;
  const std::string each_launches =
      count_of(nsteps > 0 ? best->count / static_cast<std::int64_t>(nsteps) : best->count, "launch") + per;
  const std::string_view key = best->key;
  const bool launch = key.find("LaunchKernel") != std::string_view::npos;
  std::string remedy;
  if (launch) {
    remedy = "Replay the step as a " + std::string(c.api()) + " graph (" + c.graph_how() +
             ") or fuse the small ops (" + c.fuse_how() + ") to cut the " +
             best->key + " calls (" + each + ")";
  } else if (best->is_device) {
    remedy = c.is_torch() ? "Fuse the ops that launch " + title_name(best->key) + " (torch.compile) or give each more "
                            "work (batch the loop into one larger tensor op) to cut its " + each_launches
                          : "Give each launch of " + title_name(best->key) + " more work (one launch over the data "
                            "the loop's launches split between them) or fuse it with the kernels around it to cut "
                            "its " + each_launches;
  } else {
    remedy = c.is_torch() ? "Batch the " + best->key + " calls (" + each + ") into fewer, larger ones: one op on a "
                            "stacked tensor instead of a Python loop, torch._foreach_* for per-parameter updates, or "
                            "torch.compile to fuse them"
                          : "Batch the " + best->key + " calls (" + each + ") into fewer, larger ones";
  }
  f.advice = remedy + (hidden ? "; the GPU is busy through them, so this saves host time, not step time" : "") + ". At " +
             format_ns(best_cost / best->count) + " a call, the fixed cost of each call adds up to " +
             format_ns(best_cost) + ".";
  // Behind a busy GPU the calls cost host time only: the step saves nothing.
  f.impact_ns = hidden ? 0 : best_cost;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
