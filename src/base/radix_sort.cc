#include "src/base/radix_sort.h"

#include <algorithm>
#include <memory>

namespace tprof::internal {

void radix_sort(std::vector<std::uint64_t>* keys, std::vector<std::uint32_t>* values) {
  const std::size_t n = keys->size();
  if (n < 2) return;
  std::uint64_t varying = 0;
  const std::uint64_t first = (*keys)[0];
  for (std::uint64_t k : *keys) varying |= k ^ first;
  if (varying == 0) return;
  std::vector<std::uint64_t> k2(n);
  std::vector<std::uint32_t> v2(n);
  auto counts = std::make_unique<std::uint32_t[]>(1u << 16);
  for (int shift = 0; shift < 64; shift += 16) {
    if (((varying >> shift) & 0xffff) == 0) continue;
    std::fill(counts.get(), counts.get() + (1u << 16), 0u);
    for (std::uint64_t k : *keys) ++counts[(k >> shift) & 0xffff];
    std::uint32_t sum = 0;
    for (std::uint32_t d = 0; d < (1u << 16); ++d) {
      const std::uint32_t c = counts[d];
      counts[d] = sum;
      sum += c;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t pos = counts[((*keys)[i] >> shift) & 0xffff]++;
      k2[pos] = (*keys)[i];
      v2[pos] = (*values)[i];
    }
    keys->swap(k2);
    values->swap(v2);
  }
}

void sort_by_time(const std::vector<std::int64_t>& ts_ns, std::vector<std::uint32_t>* events) {
  std::vector<std::uint32_t>& v = *events;
  if (std::is_sorted(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) { return ts_ns[a] < ts_ns[b]; })) {
    return;  // stable: equal times keep their index order
  }
  std::int64_t lo = ts_ns[v[0]];
  for (std::uint32_t e : v) lo = std::min(lo, ts_ns[e]);
  std::vector<std::uint64_t> keys(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) keys[i] = static_cast<std::uint64_t>(ts_ns[v[i]] - lo);
  radix_sort(&keys, events);
}

}  // namespace tprof::internal
