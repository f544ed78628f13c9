// Turns the records of one window into the tprof::Trace model — the same
// model the reader produces, so that tables and files of a capture are
// exactly those of `tprof` on the exported trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/clock.h"
#include "src/capture/recorder.h"
#include "tprof/trace.h"

namespace tprof::internal {

struct CaptureInfo {
  std::int64_t pid = 0;
  std::string process_name;
  std::int64_t window_start_ns = 0;  // epoch ns, for the metadata events
  bool cuda_requested = false;       // Activity::kCuda was asked for
  bool cuda_available = false;
};

Trace build_trace(const std::vector<ThreadRecords>& threads, const TickConversion& clock, const CaptureInfo& info);

}  // namespace tprof::internal
