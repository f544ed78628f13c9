// Parses trace events (elements of "traceEvents", or of torch's legacy array)
// into an EventBatch: the columns of one chunk of the file, with chunk-local
// string and lane ids. Batches are parsed independently (in parallel) and
// merged in file order by the reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/trace/json_cursor.h"
#include "tprof/trace.h"

namespace tprof::internal {

// A lane key as read, with chunk-local string ids.
struct LocalLaneKey {
  TraceId pid;
  TraceId tid;
  friend bool operator==(const LocalLaneKey&, const LocalLaneKey&) = default;
};

// "process_name" / "thread_name" / "..._labels" / "..._sort_index" payloads.
struct MetaRecord {
  std::uint32_t event = 0;  // batch-local index of the M event
  StrId text = kEmptyStr;   // args.name / args.labels (local id)
  std::int64_t number = 0;  // args.sort_index
  bool has_number = false;
};

// Device and stream found in a device activity's args.
struct DeviceHint {
  std::uint32_t lane = 0;  // batch-local lane
  std::int32_t device = -1;
  std::int64_t stream = -1;
};

// E events, kept aside until the reader pairs them with B events.
struct EndMarker {
  std::uint64_t src_offset = 0;
  std::uint32_t lane = 0;  // batch-local lane
  std::int64_t ts_ns = 0;
};

struct EventBatch {
  EventColumns events;  // name/cat: local ids; lane: local lane index
  StringPool strings;
  std::vector<LocalLaneKey> lanes;
  std::vector<std::uint32_t> lane_slots;  // open-addressing index over `lanes`
  std::vector<MemoryRecord> memory;       // event: local index
  std::vector<MetaRecord> meta;
  std::vector<DeviceHint> device_hints;
  std::vector<EndMarker> ends;
  Diagnostics diagnostics;                // event: local index
  // Repaired args (EventSink::repair_args): an args_ref with the owned bit
  // is an offset in here until the reader stores it in the trace.
  std::string args_store;
  bool saw_kineto_2022_args = false;      // "Profiler Event Index" / "Trace name"
  bool saw_begin = false;                 // B events present (need pairing)

  std::uint32_t lane_index(const LocalLaneKey& key);
};

// How a chunk parse ended.
struct ChunkEnd {
  const char* pos = nullptr;     // where parsing stopped (an element start, or after ']')
  bool array_closed = false;     // the array's ']' was consumed
  bool failed = false;           // cursor failure (see cursor.failure())
  // On failure: where the element being read began (the failure is inside
  // it), or the failure itself when it was between elements.
  const char* element = nullptr;
  // The failure is where a ',' or ']' was expected after a complete element
  // (at `pos`): reading on from there must begin with that check.
  bool after_element = false;
};

struct ParseContext {
  // torch's legacy array has no "cat": its events are ops and annotations,
  // read as category "cpu_op" so that a written-back trace means the same.
  bool legacy_array = false;
  bool token_walker = true;  // ReadOptions::token_walker
  // ReadOptions::strict: an "args" object that is not strict JSON fails
  // the read (else it is stored repaired, or dropped, with a diagnostic).
  bool strict = false;
};

// Parses array elements starting at the cursor (positioned at an element's
// first byte, or at the ']' of an empty array; with `after_element`, just
// after a complete element, where a ',' or ']' must come) until an element
// would start at or after `stop_at`, or the array closes, or input fails.
ChunkEnd parse_event_elements(JsonCursor* c, const char* stop_at, const ParseContext& ctx,
                              EventBatch* batch, bool after_element = false);

// Classifies a category string (both the 2021 and the current Kineto names).
EventKind kind_from_category(std::string_view cat);

}  // namespace tprof::internal
