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

}  // namespace tprof::internal
