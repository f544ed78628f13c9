// The file naming of torch's tensorboard_trace_handler, for writers other
// than the handler itself (tprof record's cropped traces).
#pragma once

#include <string>

#include "tprof/status.h"

namespace tprof::internal {

// Creates `dir` and returns `dir/<worker>.<epoch ms>.pt.trace.json[.gz]`;
// an empty *worker becomes "<host>_<pid>" (and stays so for later calls).
Result<std::string> tensorboard_trace_path(const std::string& dir, std::string* worker, bool use_gzip);

}  // namespace tprof::internal
