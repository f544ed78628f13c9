// HolisticTraceAnalysis' figures of one rank for the Python module: the
// breakdowns tprof computes in C++ (src/analyze/breakdowns.h, checked in
// tests/golden/breakdowns_test.cc and tests/golden/ranks_test.cc) under
// the options a TraceAnalysis call gives, plus the queue lengths, read from
// the DiagnoseContext's device activity. The Python layer (tprof/hta.py)
// shapes them into HTA's DataFrames; nothing here touches Python.
#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "python/trace_object.h"
#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"

namespace tprof::python {

namespace {

// The runtime calls HTA's queue length counts as enqueuing work
// (TraceSymbolTable.get_runtime_launch_events_mask).
bool hta_launch_call(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
      "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
      "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream"};
  return kNames.count(name) != 0;
}

std::int64_t lane_id(const TraceId& id) { return id.is_str ? -1 : id.num; }

// HTA's queue length (TraceCounters._get_queue_length_time_series_for_rank):
// per stream, +1 when a launch call that has its activity in the trace
// starts, -1 when that activity starts; the running sum after each. Ties
// in time put the launch first (HTA's sort leaves them in no set order).
void add_queue(const internal::DiagnoseContext& c, HtaRank* out) {
  struct Edge {
    std::int64_t ts;
    int delta;
    std::uint32_t lane;
  };
  std::map<std::int64_t, std::vector<Edge>> by_stream;
  for (const internal::DeviceOp& op : c.device) {
    if (op.launch == kNoIndex || !hta_launch_call(c.name(op.launch))) continue;
    std::vector<Edge>& edges = by_stream[op.stream];
    edges.push_back({c.ts(op.launch), +1, op.lane});
    edges.push_back({op.start, -1, op.lane});
  }
  for (auto& [stream, edges] : by_stream) {
    std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.delta > b.delta;
    });
    std::int64_t q = 0;
    for (const Edge& e : edges) {
      q += e.delta;
      const Lane& lane = c.trace.lanes[e.lane];
      out->queue.push_back({e.ts, lane_id(lane.pid), lane_id(lane.tid), stream, q});
    }
  }
}

}  // namespace

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
  add_queue(c, r.get());
  if (defaults) t.hta = r;
  return r;
}

}  // namespace tprof::python
