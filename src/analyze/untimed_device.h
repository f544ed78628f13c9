// Device activities a backend stamped without a start time: every kernel of
// an IBM Spyre (PrivateUse1) trace sits at ts 0 while its host events run
// 5,533,068 s later (issue 38's twenty-third round). Read as a timeline
// they make the GPU "idle 100%" of a 92-minute window; their durations are
// right. diagnose reads a copy of the trace in which each one is placed in
// its stream's order after its launch call, and says so.
#pragma once

#include <cstdint>
#include <memory>

#include "tprof/trace.h"

namespace tprof::internal {

struct RetimedTrace {
  std::unique_ptr<const Trace> trace;  // null when nothing was placed
  std::int64_t untimed = 0;            // device activities placed
  std::int64_t lead_ns = 0;            // the host's first event − ts 0
  std::uint32_t first = kNoIndex;      // the earliest-placed activity
};

// Precondition: a kernel, memcpy or memset stamped exactly ts 0 whose
// launch call (same correlation id, on a CPU lane) is recorded and starts
// at least kUntimedLeadNs after ts 0 (a kernel cannot start a second before
// its launch; a clock offset that large is not skew but no stamp at all).
// Each such activity starts at its launch call's start or when the work
// before it on its stream ends, whichever is later; activities with their
// own times keep them. The copy's event e is the trace's event e.
RetimedTrace retime_untimed_device(const Trace& t);

}  // namespace tprof::internal
