// The Trace a Python `tprof.Trace` holds, shared by the module's files.
//
// One PyTrace per loaded trace, owned by pybind11 through a shared_ptr: the
// NumPy views of its columns hold the Python object, so the columns live as
// long as any view does. Analyses run with the GIL released and take `mu`,
// because a Trace's lazy args reads (Trace::args_json) page its source in
// and out and are not safe from two threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tprof/trace.h"

namespace tprof::python {

// What HolisticTraceAnalysis' analyzers report for one rank, from the C++
// analyses (src/analyze/breakdowns.h) plus two small views of the
// DiagnoseContext's device activity (per-kernel durations, queue lengths).
struct HtaRank {
  std::int64_t rank = 0;   // distributedInfo.rank, else 0
  bool has_rank = false;   // distributedInfo.rank was present
  bool has_rows = false;   // some event has a stream (HTA raises without)
  // get_temporal_breakdown (ns).
  std::int64_t kernel_time_ns = 0, idle_time_ns = 0, compute_time_ns = 0, non_compute_time_ns = 0;
  // get_idle_time_breakdown: one entry per stream, in order of first appearance.
  struct Idle {
    std::int64_t stream = -1;
    std::int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
  };
  std::vector<Idle> idle;
  // get_comm_comp_overlap's numerator and denominator.
  std::int64_t comm_comp_overlap_ns = 0, comm_ns = 0;
  // get_gpu_kernel_breakdown's kernel-type table (include_memory_kernels=True).
  std::vector<std::pair<std::string, std::int64_t>> kernel_types;
  // get_gpu_kernel_breakdown's per-kernel rows, before its top-N grouping:
  // one per (HTA kernel type, name), durations in ns.
  struct Kernel {
    std::string name;
    std::string kernel_type;  // COMPUTATION, COMMUNICATION or MEMORY
    std::int64_t count = 0;
    double sum_ns = 0, max_ns = 0, min_ns = 0, mean_ns = 0;
    double std_ns = 0;  // sample standard deviation (pandas' std), 0 for one instance
  };
  std::vector<Kernel> kernels;
  // get_queue_length_time_series: per stream (streams ascending), in time
  // order, the queue length after each launch (+1) and activity start (-1).
  struct QueuePoint {
    std::int64_t ts_ns = 0;
    std::int64_t pid = -1, tid = -1;  // the device lane's
    std::int64_t stream = -1;
    std::int64_t queue_length = 0;
  };
  std::vector<QueuePoint> queue;
};

struct PyTrace {
  Trace trace;
  std::string path;  // what it was read from ("<bytes>" for bytes)
  std::mutex mu;
  std::optional<HtaRank> hta;  // computed once, under mu

  explicit PyTrace(Trace t, std::string p) : trace(std::move(t)), path(std::move(p)) {}
  PyTrace(const PyTrace&) = delete;
  PyTrace& operator=(const PyTrace&) = delete;
};

// Computes (once) and returns the HTA figures of `t`. Takes t.mu; call
// without the GIL.
const HtaRank& hta_rank(PyTrace& t);

}  // namespace tprof::python
