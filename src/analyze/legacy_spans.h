// The legacy autograd profiler's device spans (torch.autograd.profiler with
// use_cuda=True, before Kineto): each op's span between the CUDA events it
// recorded on the stream at its entry and exit, read as GPU user
// annotations on the "CUDA functions" lane (src/trace/event_sink.cc), with
// no kernel. A span holds the op's kernels and any wait between them, so it
// says when the device got to the op's work and when that work was done,
// not how busy the device was. The verdict and legacy_device_spans read it.
#pragma once

#include <cstdint>
#include <string>

#include "src/analyze/diagnose_context.h"

namespace tprof::internal {

struct LegacySpans {
  std::int64_t spans = 0;             // device spans
  std::int64_t linked = 0;            // of them, linked to their op's call by a cpu_to_cuda flow
  std::int64_t median_offset_ns = 0;  // device span start − its call's start, over the linked ones
  std::int64_t late = 0;              // linked spans starting kLateNs or more after their call
  std::int64_t host_end_ns = 0;       // the last host op's end (absolute)
  std::int64_t device_end_ns = 0;     // the last device span's end
  std::int64_t covered_ns = 0;        // the union of the spans
  std::uint32_t busiest = kNoIndex;   // an event of the op holding the most own device-span time,
                                      // not a collective's (is_host_collective)
  std::int64_t busiest_ns = 0;
  std::int64_t busiest_calls = 0;
  bool any() const { return spans > 0; }
  // The device runs behind the host: most linked spans start late, or the
  // device's work ends a quarter of the span or more after the host's.
  bool device_behind(std::int64_t span_ns) const;
};

// Empty where the trace records device activity or no legacy span.
// DiagnoseContext::legacy_spans() computes it once; read that.
LegacySpans compute_legacy_spans(const DiagnoseContext& c);

// A span this long after its call waits behind earlier work.
inline constexpr std::int64_t kLegacyLateNs = 100'000;

}  // namespace tprof::internal
