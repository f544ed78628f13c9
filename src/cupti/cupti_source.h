// The live CUPTI activity source: records kernels, copies, memsets, CUDA
// runtime/driver calls, synchronizations and CUPTI's own overhead while a
// profiling window is open.
//
//   CuptiOptions options;
//   options.nvtx = true;                    // tprof record: NVTX ranges too
//   std::unique_ptr<ActivitySource> src = make_cupti_source(options);
//   if (Status s = src->start(); !s) note(s.error().message());  // CPU only
//   ...
//   DeviceBatch batch;
//   src->stop(&batch);                      // harmless after a failed start()
//
// libcupti is loaded with dlopen at the first start(), from (in order) the
// TPROF_CUPTI_LIBRARY environment variable, the path found when tprof was
// configured, "libcupti.so.13" and "libcupti.so". It is never unloaded.
#pragma once

#include <cstddef>
#include <memory>

#include "src/capture/activity_source.h"

namespace tprof::internal {

struct CuptiOptions {
  // Also report NVTX push/pop and start/end ranges to the recorder
  // (push_range & co. in src/capture/recorder.h). NVTX calls reach CUPTI
  // only when NVTX_INJECTION64_PATH names libcupti (tprof record sets it).
  bool nvtx = false;
  // Size of each activity buffer handed to CUPTI (rounded up to 8 bytes).
  std::size_t buffer_bytes = std::size_t{4} << 20;
  // Buffers CUPTI may hold at once; beyond that it drops records and counts
  // them (reported in DeviceBatch::dropped and as a problem).
  std::size_t max_buffers = 32;
};

// Creates the source. One source may be started per process at a time (CUPTI
// has one set of activity callbacks); start() on a second one fails with
// kUnsupported while the first runs. Control-thread calls only.
std::unique_ptr<ActivitySource> make_cupti_source(const CuptiOptions& options);

}  // namespace tprof::internal
