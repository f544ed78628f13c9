// The collector's side of the recorder: configuring thread buffers and
// taking what they hold at the end of a window.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/internal/recorder.h"

namespace tprof::internal {

// Buffer sizes for threads that attach from now on (and at their next window).
void configure_buffers(std::uint32_t events_per_thread, std::uint32_t payload_words_per_thread);

// What one thread recorded in a window.
struct ThreadRecords {
  std::int64_t tid = 0;  // OS thread id
  std::string name;      // pthread name
  std::vector<Record> records;
  std::vector<std::uint64_t> payload;
  std::uint64_t dropped = 0;        // events lost to a full buffer
  std::uint64_t dropped_shapes = 0; // shapes lost to a full payload arena
};

// Copies every thread's records of window `epoch` (what was published by
// now), and frees the buffers of threads that have exited.
std::vector<ThreadRecords> collect(std::uint32_t epoch);

// Runtime names of kRecordDynamicScope records: (name id, category id).
std::string_view dynamic_name(std::uint32_t id);
std::string_view dynamic_category(std::uint32_t id);

}  // namespace tprof::internal
