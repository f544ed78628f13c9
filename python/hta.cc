// HolisticTraceAnalysis' figures of one rank for the Python module: the
// breakdowns tprof computes in C++ (src/analyze/breakdowns.h, checked in
// tests/golden/breakdowns_test.cc and tests/golden/ranks_test.cc), plus the
// per-kernel durations and queue lengths, read from the DiagnoseContext's
// device activity. The Python layer (tprof/hta.py) shapes them into HTA's
// DataFrames; nothing here touches Python.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "python/trace_object.h"
#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"

namespace tprof::python {

namespace {

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// HTA's get_kernel_type (hta/utils/utils.py, patterns of hta/common/types.py
// matched with re.match, where ".*" stops at a newline): COMMUNICATION, then
// MEMORY, then COMPUTATION, else OTHER (""). The same rules as
// hta_kernel_type and hta_is_computation in src/analyze/breakdowns.cc, which
// keeps them private; change both together.
std::string_view hta_kernel_type(std::string_view name) {
  const std::string_view line = name.substr(0, name.find('\n'));
  if (name.starts_with("nccl") || name.starts_with("hip") || name.starts_with("hccl") || contains(line, "ncclKernel")) {
    return "COMMUNICATION";
  }
  if (name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma")) return "MEMORY";
  static constexpr std::array<std::string_view, 7> kPrefixes = {
      "Stream Wait Event", "runFunction", "job_exe", "packet", "pe_exe", "cpum_exe_subgraph",
      "collective_subgraph_execution"};
  for (std::string_view p : kPrefixes) {
    if (name.starts_with(p)) return "";
  }
  static constexpr std::array<std::string_view, 5> kInfixes = {"ncclKernel", "Memcpy", "Memset", "dma", "Sync"};
  for (std::string_view x : kInfixes) {
    if (contains(line, x)) return "";
  }
  if (line.starts_with("cuda") && contains(line.substr(4), "LaunchKernel")) return "";
  return "COMPUTATION";
}

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

// Per (kernel type, name): count, sum, min, max, mean and sample standard
// deviation of the durations (pandas' groupby(...).agg(["sum", "max",
// "min", "mean", "std"])), by Welford's update.
void add_kernels(const internal::DiagnoseContext& c, HtaRank* out) {
  struct Acc {
    std::int64_t n = 0;
    double sum = 0, min = 0, max = 0, mean = 0, m2 = 0;
  };
  std::map<std::pair<std::string_view, std::string_view>, Acc> by;  // (type, name): HTA sorts by both
  std::unordered_map<StrId, std::string_view> type_of;
  for (const internal::DeviceOp& op : c.device) {
    const StrId id = c.trace.events.name[op.event];
    auto [it, fresh] = type_of.try_emplace(id);
    if (fresh) it->second = hta_kernel_type(c.trace.str(id));
    if (it->second.empty()) continue;
    Acc& a = by[{it->second, c.trace.str(id)}];
    const double d = static_cast<double>(op.end - op.start);
    a.sum += d;
    a.min = a.n == 0 ? d : std::min(a.min, d);
    a.max = a.n == 0 ? d : std::max(a.max, d);
    ++a.n;
    const double delta = d - a.mean;
    a.mean += delta / static_cast<double>(a.n);
    a.m2 += delta * (d - a.mean);
  }
  for (const auto& [key, a] : by) {
    HtaRank::Kernel k;
    k.kernel_type = std::string(key.first);
    k.name = std::string(key.second);
    k.count = a.n;
    k.sum_ns = a.sum;
    k.min_ns = a.min;
    k.max_ns = a.max;
    k.mean_ns = a.mean;
    k.std_ns = a.n > 1 ? std::sqrt(a.m2 / static_cast<double>(a.n - 1)) : 0;
    out->kernels.push_back(std::move(k));
  }
}

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

const HtaRank& hta_rank(PyTrace& t) {
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.hta) return *t.hta;
  const internal::DiagnoseContext c(t.trace);
  HtaRank r;
  const internal::HtaKernelTypes types = internal::compute_hta_kernel_types(c);
  r.rank = types.rank;
  r.has_rank = types.has_rank;
  r.comm_comp_overlap_ns = types.comm_comp_overlap_ns;
  r.comm_ns = types.comm_ns;
  r.kernel_types = types.kernel_types;
  const Breakdowns b = internal::compute_breakdowns(c);
  if (!b.hta_temporal.empty()) {
    const HtaTemporal& h = b.hta_temporal.front();
    r.has_rows = true;
    r.rank = h.rank;
    r.kernel_time_ns = h.kernel_time_ns;
    r.idle_time_ns = h.idle_time_ns;
    r.compute_time_ns = h.compute_time_ns;
    r.non_compute_time_ns = h.non_compute_time_ns;
  }
  for (const HtaIdle& i : b.hta_idle) r.idle.push_back({i.stream, i.host_wait_ns, i.kernel_wait_ns, i.other_ns});
  add_kernels(c, &r);
  add_queue(c, &r);
  t.hta = std::move(r);
  return *t.hta;
}

}  // namespace tprof::python
