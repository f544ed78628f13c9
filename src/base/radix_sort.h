// Stable LSD radix sort of 64-bit keys carrying 32-bit values: millions of
// events ordered by time in a few passes, where a comparison sort would
// dominate the whole analysis.
#pragma once

#include <cstdint>
#include <vector>

namespace tprof::internal {

// Sorts `keys` ascending, permuting `values` alongside; stable. Digits in
// which all keys agree are skipped, so keys spanning a small range cost few
// passes.
void radix_sort(std::vector<std::uint64_t>* keys, std::vector<std::uint32_t>* values);

// Orders event indices by ts_ns[e], equal times by index, given `events` in
// ascending index order (as a pass over the trace collects them).
void sort_by_time(const std::vector<std::int64_t>& ts_ns, std::vector<std::uint32_t>* events);

}  // namespace tprof::internal
