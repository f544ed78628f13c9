// kernel_variance: the same kernel name taking different times across steps.
// Definitions as tprof kernels (include/tprof/kernels.h): median by nearest
// rank, cv = population stddev / mean, an outlier is slower than 1.5x the
// median or faster than half of it (names with at least 3 instances).
// Cheatsheet: "The same kernel taking different times across identical steps
// (...) Report median and spread, not only the mean; name the outlier steps."
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// The outliers must move at least this much time, absolute and as a share of
// the name's total, so a 1 µs memset taking 1.3 µs once is not reported.
constexpr std::int64_t kMinExcessNs = 5'000;
constexpr double kMinExcessShare = 0.05;
// Warning when the mean misleads: it is at least 10% away from the median
// (the post: mean ~1084 µs against ~580 µs per step).
constexpr double kMeanSkew = 0.10;
// One finding per kernel name, at most this many (largest excess first).
constexpr std::size_t kMaxFindings = 5;
// Outlier instances and steps listed in the evidence (the counts stay exact).
constexpr std::size_t kMaxListed = 10;
constexpr std::size_t kMaxSteps = 100;

}  // namespace

void rule_kernel_variance(const DiagnoseContext& c, std::vector<Finding>* out) {
  // Outliers (> 1.5x or < 0.5x the median, names with at least 3
  // instances) as tprof kernels defines and lists them.
  const KernelsSummary kernels = kernel_stats(c);
  std::vector<Finding> found;
  for (const KernelStat& k : kernels.kernels) {
    if (k.outliers.empty()) continue;
    const double mean = k.mean_ns;
    const std::int64_t median = k.median_ns;
    std::int64_t excess = 0;
    std::vector<std::int64_t> steps;
    std::vector<EventRef> refs;
    std::int64_t slow = 0, fast = 0;
    for (const KernelOutlier& o : k.outliers) {
      ++(o.dur_ns > median ? slow : fast);
      excess += o.dur_ns > median ? o.dur_ns - median : median - o.dur_ns;
      if (steps.size() < kMaxSteps && std::find(steps.begin(), steps.end(), o.step) == steps.end()) steps.push_back(o.step);
      if (refs.size() < kMaxListed) refs.push_back(c.ref(o.event));
    }
    if (excess < kMinExcessNs || static_cast<double>(excess) < kMinExcessShare * static_cast<double>(k.total_ns)) continue;
    const double skew = median > 0 ? std::abs(mean - static_cast<double>(median)) / static_cast<double>(median) : 0;
    char cvbuf[32];
    std::snprintf(cvbuf, sizeof cvbuf, "%.2f", k.cv);
    Finding f;
    f.id = "kernel_variance";
    f.severity = skew >= kMeanSkew ? FindingSeverity::kWarning : FindingSeverity::kInfo;
    f.title = title_name(k.name) + ": mean " + format_ns(static_cast<std::int64_t>(mean)) + " vs median " +
              format_ns(median) + " (cv " + cvbuf + "), " + std::to_string(slow + fast) + " outlier" +
              (slow + fast == 1 ? "" : "s") + " of " + std::to_string(k.count);
    f.evidence.text("kernel", k.name)
        .num("count", k.count)
        .num("mean_ns", static_cast<std::int64_t>(mean))
        .num("median_ns", median)
        .num("min_ns", k.min_ns)
        .num("max_ns", k.max_ns)
        .real("cv", k.cv)
        .num("slow_outliers", slow)
        .num("fast_outliers", fast)
        .num("outlier_excess_ns", excess)
        .ints("outlier_steps", steps)
        .events("outliers", std::move(refs));
    f.advice =
        "Identical steps should run a kernel in the same time; outliers come from clocks, heat, power management, "
        "driver housekeeping or the profiler itself. Judge by the median and the spread, not the mean; record more "
        "steps (and lock clocks with nvidia-smi -lgc when benchmarking) to see whether the outlier steps repeat.";
    f.impact_ns = excess;
    found.push_back(std::move(f));
  }
  std::sort(found.begin(), found.end(), [](const Finding& a, const Finding& b) {
    return a.impact_ns != b.impact_ns ? a.impact_ns > b.impact_ns : a.title < b.title;
  });
  if (found.size() > kMaxFindings) found.resize(kMaxFindings);
  for (Finding& f : found) out->push_back(std::move(f));
}

}  // namespace tprof::internal
