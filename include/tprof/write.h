// tprof/write.h — write a Trace as Kineto's JSON object format.
//
// Perfetto UI, chrome://tracing, HolisticTraceAnalysis, TensorBoard's plugin
// and tprof itself read the result. Reading it back gives the same model
// (round trip). Files are written atomically: complete or not at all.
//
//   TPROF_TRY(tprof::write_trace(trace, "out.pt.trace.json.gz"));  // gzip from the suffix
#pragma once

#include <string>

#include "tprof/status.h"
#include "tprof/trace.h"
#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

enum class Compression { kAuto, kNone, kGzip };  // kAuto: gzip when the path ends in ".gz"

struct WriteOptions {
  Compression compression = Compression::kAuto;
  int gzip_level = 6;
};

// Writes `trace` to `path`. Returns kIo errors naming the path.
Status write_trace(const Trace& trace, const std::string& path, const WriteOptions& options = {});

// Appends the JSON document for `trace` to `out`.
void write_trace_json(const Trace& trace, std::string* out);

}  // namespace tprof
TPROF_API_END
