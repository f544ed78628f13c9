// HolisticTraceAnalysis' figures of one rank for the Python module: the
// breakdowns, queue lengths and memory bandwidth tprof computes in C++
// (src/analyze/breakdowns.h, checked in tests/golden/breakdowns_test.cc
// and tests/golden/ranks_test.cc) under the options a TraceAnalysis call
// gives. The Python layer (tprof/hta.py) shapes them into HTA's
// DataFrames; nothing here touches Python.

#include "python/trace_object.h"
#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"

namespace tprof::python {

std::shared_ptr<const HtaRank> hta_rank(PyTrace& t, const internal::HtaOptions& options) {
  std::lock_guard<std::mutex> lock(t.mu);
  const bool defaults = options == internal::HtaOptions{};
  if (defaults && t.hta) return t.hta;
  const internal::DiagnoseContext c(t.trace);
  auto r = std::make_shared<HtaRank>();
  r->figures = internal::compute_hta(c, options);
  r->rank = r->figures.kernel_types.rank;
  r->has_rank = r->figures.kernel_types.has_rank;
  // The temporal breakdown's rank is distributedInfo.rank read as HTA
  // files the trace (a negative one included).
  if (r->figures.temporal) r->rank = r->figures.temporal->rank;
  if (defaults) t.hta = r;
  return r;
}

}  // namespace tprof::python
