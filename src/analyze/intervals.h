// The interval engine: unions and overlaps of [start, end) time intervals in
// ns. Every busy/idle figure in tprof (steps, diagnose, breakdowns) is a
// union length computed here, so overlapping activities are never counted twice.
#pragma once

#include <cstdint>
#include <vector>

namespace tprof::internal {

struct Interval {
  std::int64_t start = 0;
  std::int64_t end = 0;  // exclusive; end >= start
};

// Sorts and merges overlapping or touching intervals (empty ones dropped).
std::vector<Interval> merge_intervals(std::vector<Interval> v);

// Total length of the union of `v`.
std::int64_t union_length(std::vector<Interval> v);

// Length of the part of merged intervals `merged` inside [lo, hi).
std::int64_t covered_within(const std::vector<Interval>& merged, std::int64_t lo, std::int64_t hi);

// Merged intervals with prefix sums of their lengths: the covered part of
// any [lo, hi) in O(log n), however many intervals it spans (queries over
// long spans, e.g. a sync covering most of the trace, were linear each).
class CoverageIndex {
 public:
  CoverageIndex() = default;
  explicit CoverageIndex(std::vector<Interval> merged);
  std::int64_t covered(std::int64_t lo, std::int64_t hi) const;
  const std::vector<Interval>& intervals() const { return merged_; }

 private:
  std::vector<Interval> merged_;
  std::vector<std::int64_t> prefix_;  // prefix_[i]: total length of merged_[0, i)
};

// Parts of merged `a` not covered by merged `b` (both sorted, merged).
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);

// Parts of merged `a` covered by merged `b`: a ∩ b (both sorted, merged).
std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b);

// Sum of lengths of merged intervals.
std::int64_t total_length(const std::vector<Interval>& merged);

}  // namespace tprof::internal
