// tprof/kernels.h — per device-activity name: how often, how long, how
// steady, and in which steps the outliers ran.
//
//   tprof::KernelsSummary k = tprof::compute_kernels(trace);
//   std::cout << tprof::format_kernels_text(k);
//
// Definitions (docs/diagnose.md, "kernels"): durations of kernels, memcpy
// and memset by name; the median (of an even count, the mean of the two
// middle durations) and p90 by the nearest-rank method on the sorted
// durations; cv = population standard deviation / mean; an outlier
// is an instance slower than 1.5x the median or faster than half of it
// (names with at least 3 instances); its step is the ProfilerStep its
// launch call ran in (else the one it ran in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprof/trace.h"

namespace tprof {

struct KernelOutlier {
  std::uint32_t event = kNoIndex;  // the activity in the trace
  std::int64_t step = -1;
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
};

struct KernelStat {
  std::string name;
  std::string category;  // "kernel", "memcpy", "memset"
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  double mean_ns = 0;
  std::int64_t median_ns = 0;
  std::int64_t p90_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double cv = 0;
  std::vector<KernelOutlier> outliers;  // by start time
};

// A CUPTI range-profiler range name (cat "cuda_profiler_range": one per
// kernel with auto ranges): how many ranges, and each hardware counter
// summed over them. Its times are the profiling span split evenly, not
// measured, so ranges have no durations here.
struct RangeCounter {
  std::string name;  // "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
  double sum = 0;
};
struct RangeStat {
  std::string name;
  std::int64_t count = 0;
  std::vector<RangeCounter> counters;  // in the trace's order
};

struct KernelsSummary {
  std::vector<KernelStat> kernels;  // by total time, descending
  std::int64_t total_ns = 0;        // sum over all
  std::vector<RangeStat> ranges;    // by count, descending, then first seen
};

KernelsSummary compute_kernels(const Trace& trace);

std::string format_kernels_text(const KernelsSummary& k);
// {"total_ns", "kernels": [...]}: ns integers, cv to 4 decimals.
std::string format_kernels_json(const KernelsSummary& k);

}  // namespace tprof
