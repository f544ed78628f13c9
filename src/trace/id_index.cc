#include "src/trace/id_index.h"

#include <algorithm>

namespace tprof::internal {

IdIndex::IdIndex(std::vector<std::pair<std::int64_t, std::uint32_t>> pairs) {
  std::erase_if(pairs, [](const auto& p) { return p.first < 0; });
  if (pairs.empty()) return;
  std::int64_t lo = pairs[0].first, hi = pairs[0].first;
  for (const auto& p : pairs) {
    lo = std::min(lo, p.first);
    hi = std::max(hi, p.first);
  }
  const std::uint64_t range = static_cast<std::uint64_t>(hi - lo) + 1;
  if (range <= 4 * pairs.size() + 1024) {
    base_ = lo;
    dense_.assign(range, kNoIndex);
    for (const auto& [id, v] : pairs) {
      std::uint32_t& slot = dense_[static_cast<std::size_t>(id - lo)];
      if (slot == kNoIndex) slot = v;
    }
    return;
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  pairs.erase(std::unique(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
              pairs.end());
  sorted_ = std::move(pairs);
}

std::uint32_t IdIndex::find_sorted(std::int64_t id) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), id, [](const auto& p, std::int64_t v) { return p.first < v; });
  return it != sorted_.end() && it->first == id ? it->second : kNoIndex;
}

}  // namespace tprof::internal
