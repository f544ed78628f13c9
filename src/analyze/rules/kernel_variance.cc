// kernel_variance: the same kernel name taking different times across steps.
// Definitions as tprof kernels (include/tprof/kernels.h): median by nearest
// rank, cv = population stddev / mean, an outlier is slower than 1.5x the
// median or faster than half of it (names with at least 3 instances).
// Cheatsheet: "The same kernel taking different times across identical steps
// (...) Report median and spread, not only the mean; name the outlier steps."
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Outlier bounds and minimum instances: tprof kernels' definitions.
constexpr double kSlowFactor = 1.5;
constexpr double kFastFactor = 0.5;
constexpr std::size_t kMinInstances = 3;
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
  const Trace& t = c.trace;
  std::unordered_map<StrId, std::vector<std::size_t>> by_name;
  for (std::size_t i = 0; i < c.device.size(); ++i) by_name[t.events.name[c.device[i].event]].push_back(i);

  std::vector<Finding> found;
  std::vector<std::int64_t> d;
  for (const auto& [name, idx] : by_name) {
    if (idx.size() < kMinInstances) continue;
    d.clear();
    for (std::size_t i : idx) d.push_back(c.device[i].end - c.device[i].start);
    std::sort(d.begin(), d.end());
    std::int64_t total = 0;
    for (std::int64_t v : d) total += v;
    const double mean = static_cast<double>(total) / static_cast<double>(d.size());
    const std::int64_t median = nearest_rank(d, 0.5);
    double var = 0;
    for (std::int64_t v : d) var += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
    const double cv = mean > 0 ? std::sqrt(var / static_cast<double>(d.size())) / mean : 0;
    const double hi = kSlowFactor * static_cast<double>(median), lo = kFastFactor * static_cast<double>(median);
    std::int64_t excess = 0;
    std::vector<std::int64_t> steps;
    std::vector<EventRef> refs;
    std::int64_t slow = 0, fast = 0;
    for (std::size_t i : idx) {
      const DeviceOp& op = c.device[i];
      const std::int64_t v = op.end - op.start;
      if (static_cast<double>(v) > hi) {
        ++slow;
      } else if (static_cast<double>(v) < lo) {
        ++fast;
      } else {
        continue;
      }
      excess += v > median ? v - median : median - v;
      const std::int64_t s = c.step_number(op.step);
      if (steps.size() < kMaxSteps && std::find(steps.begin(), steps.end(), s) == steps.end()) steps.push_back(s);
      if (refs.size() < kMaxListed) refs.push_back(c.ref(op.event));
    }
    if (slow + fast == 0 || excess < kMinExcessNs || static_cast<double>(excess) < kMinExcessShare * static_cast<double>(total)) {
      continue;
    }
    const double skew = median > 0 ? std::abs(mean - static_cast<double>(median)) / static_cast<double>(median) : 0;
    char cvbuf[32];
    std::snprintf(cvbuf, sizeof cvbuf, "%.2f", cv);
    Finding f;
    f.id = "kernel_variance";
    f.severity = skew >= kMeanSkew ? FindingSeverity::kWarning : FindingSeverity::kInfo;
    f.title = title_name(t.str(name)) + ": mean " + format_ns(static_cast<std::int64_t>(mean)) + " vs median " +
              format_ns(median) + " (cv " + cvbuf + "), " + std::to_string(slow + fast) + " outlier" +
              (slow + fast == 1 ? "" : "s") + " of " + std::to_string(d.size());
    f.evidence.text("kernel", std::string(t.str(name)))
        .num("count", static_cast<std::int64_t>(d.size()))
        .num("mean_ns", static_cast<std::int64_t>(mean))
        .num("median_ns", median)
        .num("min_ns", d.front())
        .num("max_ns", d.back())
        .real("cv", cv)
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
