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
#include <string>
#include <vector>

#include "src/analyze/breakdowns.h"
#include "tprof/trace.h"

namespace tprof::python {

// What HolisticTraceAnalysis' analyzers report for one rank under one set
// of its options: the C++ figures (src/analyze/breakdowns.h).
struct HtaRank {
  std::int64_t rank = 0;   // distributedInfo.rank, else 0
  bool has_rank = false;   // distributedInfo.rank was present
  internal::HtaFigures figures;
};

struct PyTrace {
  Trace trace;
  std::string path;  // what it was read from ("<bytes>" for bytes)
  std::mutex mu;
  std::shared_ptr<const HtaRank> hta;  // under HTA's defaults, computed once, under mu

  explicit PyTrace(Trace t, std::string p) : trace(std::move(t)), path(std::move(p)) {}
  PyTrace(const PyTrace&) = delete;
  PyTrace& operator=(const PyTrace&) = delete;
};

// Computes the HTA figures of `t` under `options`; those under HTA's
// defaults are computed once and kept in t.hta. Takes t.mu; call without
// the GIL.
std::shared_ptr<const HtaRank> hta_rank(PyTrace& t, const internal::HtaOptions& options);

}  // namespace tprof::python
