// Turns the records of one window into the tprof::Trace model — the same
// model the reader produces, so that tables and files of a capture are
// exactly those of `tprof` on the exported trace.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/base/clock.h"
#include "src/capture/activity_source.h"
#include "src/capture/graph_nodes.h"
#include "src/capture/recorder.h"
#include "tprof/trace.h"

namespace tprof::internal {

struct CaptureInfo {
  std::int64_t pid = 0;
  std::string process_name;
  std::int64_t window_start_ns = 0;  // epoch ns, for the metadata events
  bool cuda_requested = false;       // Activity::kCuda was asked for
  bool cuda_available = false;       // this build has a device source (CUPTI)
  // Device activity that started before this CLOCK_MONOTONIC time (a
  // warmup's) is not part of the window.
  std::int64_t window_start_monotonic_ns = 0;
  // CPU scopes that began before this tick (open when the window started,
  // e.g. at the previous window's stop()) are not part of the window: torch
  // records an op only when the profiler saw it begin.
  std::uint64_t window_start_ticks = 0;
  // Scopes without an end, or ending after this tick, were still open when
  // the window stopped: not part of it (torch keeps only finished ops).
  std::uint64_t window_end_ticks = ~std::uint64_t{0};
  // Profiler::add_metadata(_json): top-level keys, values as JSON.
  std::vector<std::pair<std::string, std::string>> metadata;
  // The scopes CUDA graph nodes were created in, across windows (the
  // process's graph_node_scopes()): read for work replayed from nodes this
  // window did not see created, extended with the nodes it did. Null: this
  // window's nodes only.
  GraphNodeScopes* graph_nodes = nullptr;
  // The window's runtime names (retire_dynamic_names); null: the live table.
  const RetiredNames* names = nullptr;
  // Why events were lost besides full buffers (a spill file that could not
  // be written or read): dropped_events diagnostics, one each; the events
  // are lost_events, counted in droppedEvents (and not said to be from a
  // full buffer).
  std::vector<std::string> capture_problems;
  std::uint64_t lost_events = 0;
  // Why events of this process cannot be in the window at all (another
  // copy of the recorder is loaded: src/capture/recorders.h): written
  // with the device source's problems (activityUnavailable) and diagnosed
  // as kActivityUnavailable, in this trace and when the file is read.
  std::vector<std::string> unrecordable;
};

// Builds the window's trace from the threads' records and the device
// source's batch (empty without one): CPU scopes on thread lanes, API calls
// linked to the innermost scope open around them (External id), device
// work on (device, stream) lanes linked to its launch by correlation id and
// an ac2g flow, gpu_user_annotation spans, Kineto's metadata, and the
// assembly step the reader ends with (src/trace/assemble.h). Work replayed
// from a CUDA graph also names the scope its node was created in ("graph
// node scope") and gets a gpu_user_annotation span per replay for the
// user annotation open then (docs/torch-trace-formats.md).
Trace build_trace(const std::vector<ThreadRecords>& threads, const DeviceBatch& device, const TickConversion& clock,
                  const CaptureInfo& info);

}  // namespace tprof::internal
