// Device activity behind an interface: what the capture library asks of a
// GPU tracer (CUPTI in src/cupti, a replay of recorded records in tests).
//
//   Profiler ── window starts ──▶ source->start()      (enable; may refuse)
//            ── window ends   ──▶ source->stop(&batch) (flush, disable, hand over)
//            ── build_trace(threads, batch, ...)       (lanes, External ids, flows)
//
// A source delivers events in tprof's terms, not CUPTI's: a kind, times on
// CLOCK_MONOTONIC (the clock the recorder's ticks are calibrated against),
// the lane it belongs to, the correlation id that ties an API call to the
// device work it launched, and its name and args as the trace will show
// them. Linking to CPU scopes (External id), flows, GPU user-annotation
// spans and lane metadata are the trace builder's, so that every source
// gets them the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tprof/status.h"

namespace tprof::internal {

enum class DeviceEventKind : std::uint8_t {
  kKernel = 0,  // cat "kernel", on the (device, stream) lane
  kMemcpy,      // cat "gpu_memcpy"
  kMemset,      // cat "gpu_memset"
  kSync,        // cat "cuda_sync": a host wait seen by the device (stream/event/context sync)
  kRuntime,     // cat "cuda_runtime", on the calling thread's lane
  kDriver,      // cat "cuda_driver", on the calling thread's lane
  kOverhead,    // cat "overhead": the tracer's own work (buffer flush, instrumentation)
};

// One activity. Names and args live in the batch's `text`.
struct DeviceEvent {
  DeviceEventKind kind = DeviceEventKind::kKernel;
  std::int64_t start_ns = 0;  // CLOCK_MONOTONIC ns
  std::int64_t end_ns = 0;    // >= start_ns
  std::int32_t device = -1;   // device activity and sync: the device; API calls: -1
  std::int64_t stream = -1;   // device activity: the stream id; -1 when none (context sync)
  std::int64_t thread = 0;    // API calls and overhead: OS thread id of the caller
  std::uint64_t correlation = 0;  // API call <-> device work; 0 = none
  // Device work replayed from a CUDA graph: the node that ran it, as the
  // tracer names it (CUPTI's graphNodeId: the executable graph's node,
  // which may be a clone of the node the program created). 0 = not from a
  // graph. The builder attributes the work to the scope open where the
  // node was created (GraphNodeScopes, src/capture/graph_nodes.h).
  std::uint64_t graph_node = 0;
  std::uint32_t name_offset = 0, name_len = 0;  // in DeviceBatch::text
  // The members of the args object as Kineto writes them, in its order,
  // without braces and without "External id" (the builder writes that
  // first when the event is linked to a CPU scope), e.g.
  //   "device": 0, "context": 1, "stream": 7, "correlation": 33, "bytes": 8192
  std::uint32_t args_offset = 0, args_len = 0;  // in DeviceBatch::text
};

// A device memory allocation or release (CUPTI's memory activity), or a
// change of a memory pool's reservation, as the trace builder needs it to
// write torch's [memory] instant on the thread that made the call.
struct DeviceMemoryEvent {
  std::int64_t ts_ns = 0;   // CLOCK_MONOTONIC ns
  std::int64_t thread = 0;  // OS thread id of the call that made it; 0 = not known
  // > 0 an allocation, < 0 a release, 0 a pool's reservation changed only
  // (created, trimmed, destroyed): not an event of its own.
  std::int64_t bytes = 0;
  std::uint64_t addr = 0;
  // Where the memory lives, as torch's "Device Type" / "Device Id":
  // c10::DeviceType 1 (CUDA) with the device's index, or 0 (CPU) with -1
  // for pinned host memory.
  std::int16_t device_type = 1;
  std::int16_t device_id = 0;
  // The stream-ordered pool the memory came from (cudaMallocAsync): its
  // base address (0: none) and its reserved bytes after the operation
  // (-1: not known; the memory then counts as reserved by itself).
  std::uint64_t pool = 0;
  std::int64_t pool_bytes = -1;
  std::uint64_t correlation = 0;  // the API call that made it; 0 = none
};

// What a source hands over at the end of a window.
struct DeviceBatch {
  std::vector<DeviceEvent> events;  // any order
  std::vector<DeviceMemoryEvent> memory;  // any order; empty unless memory was asked for
  std::string text;                 // names and args members, referred to by offset
  // One JSON object per device, as Kineto writes "deviceProperties" elements
  // ({"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": ..., ...}).
  std::vector<std::string> device_properties;
  // Extra top-level keys (raw JSON values), e.g. {"cupti_version", "130001"}.
  std::vector<std::pair<std::string, std::string>> top_level;
  std::uint64_t dropped = 0;  // records the tracer lost (e.g. CUPTI's dropped-record count)
  // Why device activity is missing or incomplete (no driver, CUPTI refused,
  // ...): each becomes an `activity_unavailable` diagnostic on the trace.
  std::vector<std::string> problems;

  std::string_view name(const DeviceEvent& e) const { return std::string_view(text).substr(e.name_offset, e.name_len); }
  std::string_view args(const DeviceEvent& e) const { return std::string_view(text).substr(e.args_offset, e.args_len); }
  // Appends `s` to text; returns (offset, length).
  std::pair<std::uint32_t, std::uint32_t> add_text(std::string_view s) {
    const auto off = static_cast<std::uint32_t>(text.size());
    text.append(s);
    return {off, static_cast<std::uint32_t>(s.size())};
  }
};

// A device tracer. Called from the profiler's control thread only; the
// tracer's own callbacks may run on any thread.
class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // Starts recording device activity (idempotent while started). An error
  // says why it cannot (no driver, no CUPTI library, another profiler holds
  // CUPTI, insufficient privileges); the window then records CPU only.
  virtual Status start() = 0;
  // Ends recording: waits for the device to finish queued work, flushes
  // every buffer, disables the tracer (a stopped source costs nothing) and
  // appends what was recorded since start() to *out.
  virtual void stop(DeviceBatch* out) = 0;
};

}  // namespace tprof::internal
