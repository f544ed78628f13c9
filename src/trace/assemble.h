// The last step of making a Trace, shared by the reader (a file) and the
// capture builder (a recording), so that both give the same model for the
// same events:
//
//   events on each lane ── lane kind (CPU thread, GPU stream, other),
//                          device and stream of GPU lanes
//   M events ("process_name", "thread_name", ... sort indices) ── Process / Lane fields
//   check_trace ── overlapping kernels, unmatched flows (diagnostics)
#pragma once

#include <cstdint>
#include <span>

#include "src/trace/event_parser.h"
#include "tprof/trace.h"

namespace tprof::internal {

// What event e says of its lane: bit 0 host activity, bit 1 device
// activity (a lane with device activity is a GPU lane, else one with host
// activity a CPU lane, else "other").
std::uint8_t lane_activity(const Trace& t, std::uint32_t e);

// Finishes `trace`: lanes, metadata, checks. `meta` holds the payloads of
// its M events and `hints` the device/stream args of device activities,
// both with trace-wide event and lane indices. `activity`: per lane, the
// lane_activity bits of every event, when the model does not hold them all
// (a streamed read; empty: from the events). `check`: the whole-trace
// checks (check_trace), which need every event.
void assemble_trace(Trace* trace, std::span<const MetaRecord> meta, std::span<const DeviceHint> hints,
                    std::span<const std::uint8_t> activity = {}, bool check = true);

}  // namespace tprof::internal
