// Integer ids (correlation ids, External ids) to the first event carrying
// each, for the millions of lookups that link launches to device activity.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tprof/trace.h"

namespace tprof::internal {

// A dense table when the ids are compact (profilers number them from 0 or
// 1), else sorted pairs with binary search. Cheaper to build and to query
// than a hash map at these sizes.
class IdIndex {
 public:
  IdIndex() = default;
  // (id, value) pairs; negative ids are ignored. For an id given more than
  // once the first pair wins.
  explicit IdIndex(std::vector<std::pair<std::int64_t, std::uint32_t>> pairs);

  // The value stored for id, or kNoIndex.
  std::uint32_t find(std::int64_t id) const {
    if (!dense_.empty() || sorted_.empty()) {
      const std::uint64_t i = static_cast<std::uint64_t>(id - base_);
      return id >= base_ && i < dense_.size() ? dense_[i] : kNoIndex;
    }
    return find_sorted(id);
  }

 private:
  std::uint32_t find_sorted(std::int64_t id) const;
  std::int64_t base_ = 0;
  std::vector<std::uint32_t> dense_;
  std::vector<std::pair<std::int64_t, std::uint32_t>> sorted_;
};

}  // namespace tprof::internal
