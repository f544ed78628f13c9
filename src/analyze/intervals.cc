#include "src/analyze/intervals.h"

#include <algorithm>
#include <utility>

namespace tprof::internal {

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  auto by_start = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  // Activities mostly arrive in time order already (one stream, one lane):
  // checking is one pass, sorting is many.
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  std::size_t out = 0;  // merged in place: v[0, out) is the union so far
  for (const Interval& i : v) {
    if (i.end <= i.start) continue;
    if (out > 0 && i.start <= v[out - 1].end) {
      v[out - 1].end = std::max(v[out - 1].end, i.end);
    } else {
      v[out++] = i;
    }
  }
  v.resize(out);
  return v;
}

std::int64_t total_length(const std::vector<Interval>& merged) {
  std::int64_t t = 0;
  for (const Interval& i : merged) t += i.end - i.start;
  return t;
}

std::int64_t union_length(std::vector<Interval> v) { return total_length(merge_intervals(std::move(v))); }

std::int64_t covered_within(const std::vector<Interval>& merged, std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return 0;
  auto it = std::lower_bound(merged.begin(), merged.end(), lo,
                             [](const Interval& i, std::int64_t t) { return i.end <= t; });
  std::int64_t t = 0;
  for (; it != merged.end() && it->start < hi; ++it) t += std::min(it->end, hi) - std::max(it->start, lo);
  return t;
}

CoverageIndex::CoverageIndex(std::vector<Interval> merged) : merged_(std::move(merged)) {
  prefix_.reserve(merged_.size() + 1);
  prefix_.push_back(0);
  for (const Interval& i : merged_) prefix_.push_back(prefix_.back() + (i.end - i.start));
}

std::int64_t CoverageIndex::covered(std::int64_t lo, std::int64_t hi) const {
  if (hi <= lo || merged_.empty()) return 0;
  // [a, b): the intervals that end after lo and start before hi.
  const auto a = std::lower_bound(merged_.begin(), merged_.end(), lo,
                                  [](const Interval& i, std::int64_t t) { return i.end <= t; });
  const auto b = std::lower_bound(a, merged_.end(), hi,
                                  [](const Interval& i, std::int64_t t) { return i.start < t; });
  if (a >= b) return 0;
  const auto ia = static_cast<std::size_t>(a - merged_.begin());
  const auto ib = static_cast<std::size_t>(b - merged_.begin());
  std::int64_t t = prefix_[ib] - prefix_[ia];
  t -= std::max<std::int64_t>(0, lo - a->start);           // the first one's part before lo
  t -= std::max<std::int64_t>(0, (b - 1)->end - hi);       // the last one's part after hi
  return t;
}

std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  std::size_t j = 0;
  for (const Interval& x : a) {
    while (j < b.size() && b[j].end <= x.start) ++j;
    for (std::size_t k = j; k < b.size() && b[k].start < x.end; ++k) {
      const std::int64_t s = std::max(x.start, b[k].start), e = std::min(x.end, b[k].end);
      if (e > s) out.push_back({s, e});
    }
  }
  return out;
}

std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  std::size_t j = 0;
  for (Interval cur : a) {
    while (j < b.size() && b[j].end <= cur.start) ++j;
    std::size_t k = j;
    while (k < b.size() && b[k].start < cur.end) {
      if (b[k].start > cur.start) out.push_back({cur.start, b[k].start});
      cur.start = std::max(cur.start, b[k].end);
      if (cur.start >= cur.end) break;
      ++k;
    }
    if (cur.start < cur.end) out.push_back(cur);
  }
  return out;
}

}  // namespace tprof::internal
