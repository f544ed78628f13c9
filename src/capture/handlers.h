// The file naming of torch's tensorboard_trace_handler, for writers other
// than the handler itself (tprof record's cropped traces).
#pragma once

#include <cstdint>
#include <string>

#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof::internal {

// Creates `dir` (mkdir -p) and writes `trace` there as
// `<worker>.<epoch ns>.pt.trace.json[.gz]` (current torch's name, from
// time.time_ns()); an empty *worker becomes "<host>_<pid>" (and stays so
// for later calls). Never replaces a file: when the name is taken (two
// windows in one nanosecond, two processes with one worker name, anything
// someone put there), the next nanosecond's name is used, up to 1000 on;
// the file appears whole under its name, created without replacing
// (RENAME_NOREPLACE). `epoch_ns` < 0: now. Returns the path written.
Result<std::string> write_tensorboard_trace(const Trace& trace, const std::string& dir, std::string* worker,
                                            bool use_gzip, std::int64_t epoch_ns = -1);

}  // namespace tprof::internal
