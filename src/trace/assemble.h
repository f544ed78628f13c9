// The last step of making a Trace, shared by the reader (a file) and the
// capture builder (a recording), so that both give the same model for the
// same events:
//
//   events on each lane ── lane kind (CPU thread, GPU stream, other),
//                          device and stream of GPU lanes
//   M events ("process_name", "thread_name", ... sort indices) ── Process / Lane fields
//   check_trace ── overlapping kernels, unmatched flows (diagnostics)
#pragma once

#include <span>

#include "src/trace/event_parser.h"
#include "tprof/trace.h"

namespace tprof::internal {

// Finishes `trace`: lanes, metadata, checks. `meta` holds the payloads of
// its M events and `hints` the device/stream args of device activities,
// both with trace-wide event and lane indices.
void assemble_trace(Trace* trace, std::span<const MetaRecord> meta, std::span<const DeviceHint> hints);

}  // namespace tprof::internal
