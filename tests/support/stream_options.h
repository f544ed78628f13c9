// ReadOptions that split even a small trace into many merged batches, on
// several threads: a streaming read (src/trace/event_stream.h) then sees
// many merges, and a model limit is passed in the middle of a file.
#pragma once

#include <cstdint>

#include "tprof/read.h"

namespace tprof::testing {

inline ReadOptions many_small_batches(std::uint64_t max_model_bytes = 0) {
  ReadOptions o;
  o.threads = 3;
  o.min_parallel_bytes = 4096;
  o.chunk_bytes = 4096;
  o.max_model_bytes = max_model_bytes;
  return o;
}

}  // namespace tprof::testing
