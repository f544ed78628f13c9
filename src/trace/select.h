// A time window of a trace as a trace of its own: what `tprof record
// --nvtx-range` keeps of a whole run.
#pragma once

#include <cstdint>
#include <vector>

#include "tprof/trace.h"

namespace tprof::internal {

// Returns the events of `t` that overlap [start_ns, end_ns] (an instant or
// flow inside it, a span that reaches into it), with every metadata event,
// process, top-level key and diagnostic, and the lanes those events use
// (in order of first use, as a reader of the written window makes them). Strings keep their ids;
// args are copied into the new trace's own store.
Trace select_window(const Trace& t, std::int64_t start_ns, std::int64_t end_ns);

// Returns the events e of `t` with keep[e] != 0, in order, with the same
// side records as select_window (every process, top-level key and
// diagnostic; the lanes the kept events use, in order of first use; the
// memory records of kept events). keep.size() must be t.events.size(). With
// every event kept, event e of the copy is event e of `t`: a copy of a
// trace that a caller may change (Python's overlay of a critical path).
Trace select_events(const Trace& t, const std::vector<std::uint8_t>& keep);

}  // namespace tprof::internal
