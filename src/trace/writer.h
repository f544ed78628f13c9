// The trace writer's body, for writers that open the output themselves
// (tensorboard_trace_handler: a new file under a name nothing holds).
#pragma once

#include "src/base/file.h"
#include "tprof/write.h"

namespace tprof::internal {

// Writes `trace` as write_trace() does into `file`, gzip-compressed when
// `compress`, and leaves committing (or abandoning) it to the caller. Returns
// the first write error.
Status write_trace_to(const Trace& trace, AtomicFileWriter* file, bool compress, int gzip_level);

}  // namespace tprof::internal
