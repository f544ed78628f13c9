// tprof/info.h — what a trace holds: format, producer, events by kind, lanes,
// processes, time span and every diagnostic. The basis of `tprof info` and of
// the golden tests over real traces.
#pragma once

#include <string>

#include "tprof/trace.h"

namespace tprof {

std::string_view event_kind_name(EventKind kind);
std::string_view lane_kind_name(LaneKind kind);
std::string_view producer_name(Producer producer);

// Human-readable summary.
std::string format_info_text(const Trace& trace);
// JSON summary (stable keys; counts, lanes, diagnostics with byte offsets).
std::string format_info_json(const Trace& trace);
// The one line the CLI prints to stderr for a trace read with diagnostics
// ("tprof: note: PATH: truncated=2 (details: tprof info)\n"); "" when the
// trace has none. The same line from `tprof diagnose DIR` and the Dask job.
std::string format_diagnostics_note(const Trace& trace, const std::string& path);

}  // namespace tprof
