// The peers' breakdowns, each computed with that peer's own definition
// (docs/diagnose.md, "Breakdowns"): TraceLens' GPU timeline,
// HolisticTraceAnalysis' temporal and idle-time breakdowns, the TensorBoard
// plugin's per-step overview.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

Breakdowns compute_breakdowns(const DiagnoseContext& c);

// TraceLens' communication test on a kernel's name (is_communication_string:
// "nccl", "rccl", "cross_device_reduce", any case).
bool tracelens_counts_as_comm(std::string_view name);

// HolisticTraceAnalysis' arguments that change its figures, HTA's defaults
// by default (compute_breakdowns and tprof diagnose use those).
struct HtaOptions {
  // TraceAnalysis(include_last_profiler_step): keep the last ProfilerStep's
  // rows; with two steps or more HTA still drops the rows launched after
  // the steps' end.
  bool include_last_profiler_step = false;
  // get_idle_time_breakdown(consecutive_kernel_delay): a gap that is not
  // host wait and is shorter than this is kernel wait. HTA's 30 is in the
  // file's µs (its docstring says ns).
  std::int64_t consecutive_kernel_delay_ns = 30'000;
  // get_idle_time_breakdown(show_idle_interval_stats): describe() each
  // category's intervals (HtaIdleCategory's statistics).
  bool idle_interval_stats = false;
  // get_gpu_kernel_breakdown(include_memory_kernels): MEMORY as a third
  // kernel type; without it MEMORY rows are in neither table.
  bool include_memory_kernels = true;

  bool operator==(const HtaOptions&) const = default;
};

// One idle category of one stream, as get_idle_time_breakdown groups a
// stream's rows by category: each row but the stream's first has an
// interval (its ts minus the previous row's end, negative when they
// overlap); the first row is filed under "other" with none.
struct HtaIdleCategory {
  std::int64_t rows = 0;    // rows filed here: HTA lists the category when there are any
  std::int64_t sum_ns = 0;  // Σ intervals, as HTA sums them (negative when rows overlap)
  // pandas' describe() of the intervals (with HtaOptions::idle_interval_stats):
  // count, mean, sample std, min, linear quartiles, max; NaN where pandas
  // has NaN (all but count without intervals, std with one).
  std::int64_t count = 0;
  double mean_ns = 0, std_ns = 0, min_ns = 0, p25_ns = 0, p50_ns = 0, p75_ns = 0, max_ns = 0;
};

// HTA's idle categories in the order of its IdleTimeType (and of its output).
enum HtaIdleType : std::size_t { kHtaHostWait = 0, kHtaKernelWait = 1, kHtaOtherWait = 2 };

struct HtaIdleStream {
  std::int64_t stream = -1;
  std::array<HtaIdleCategory, 3> categories;  // by HtaIdleType
};

// get_gpu_kernel_breakdown's per-kernel rows before its top-N grouping:
// HTA's rows of one (kernel type, name), durations as HTA has them (its
// rounding of ns traces, its step filter).
struct HtaKernel {
  std::string_view kernel_type;  // "COMPUTATION", "COMMUNICATION" or "MEMORY"
  StrId name = kEmptyStr;
  std::int64_t count = 0;
  std::int64_t sum_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0;
  double std_ns = 0;  // sample standard deviation (pandas' std), 0 for one row (HTA's fillna)
};

// HolisticTraceAnalysis' kernel-type view of one rank, over the rows its
// breakdowns read (the same rows, clock and filter as hta_temporal):
// get_comm_comp_overlap's numerator and denominator, and
// _get_gpu_kernel_type_time (HtaOptions::include_memory_kernels, HTA's
// default true for compute_hta_kernel_types).
struct HtaKernelTypes {
  std::int64_t rank = 0;                  // distributedInfo.rank, else 0
  bool has_rank = false;                  // distributedInfo.rank was present
  std::int64_t comm_comp_overlap_ns = 0;  // communication ∩ computation (each merged as HTA merges)
  std::int64_t comm_ns = 0;               // Σ of the merged communication intervals
  // "COMPUTATION", "COMMUNICATION", "MEMORY", "COMPUTATION overlapping
  // COMMUNICATION", ... (HTA's labels) with their time; by label, none zero.
  std::vector<std::pair<std::string, std::int64_t>> kernel_types;
};
HtaKernelTypes compute_hta_kernel_types(const DiagnoseContext& c);

// One point of get_queue_length_time_series: the queue length of `stream`
// (HTA's stream: the rows' args "stream") after the change at ts_ns.
struct HtaQueuePoint {
  std::int64_t ts_ns = 0;           // exact ns: the launch call's start (+1) or the activity's (-1)
  std::uint32_t event = kNoIndex;   // the device activity (HTA's pid and tid are its lane's)
  std::int64_t stream = -1;
  std::int64_t queue_length = 0;
};

// One point of get_memory_bw_time_series: the summed "memory bandwidth
// (GB/s)" of the memory rows of one kind running after the change at ts_ns.
struct HtaMemoryBwPoint {
  std::int64_t ts_ns = 0;          // HTA's clock: a row's ts (+) or ts + dur (-), dur 0 counting as 1 µs
  std::uint32_t event = kNoIndex;  // the row (HTA's pid is its lane's)
  std::string_view kind;           // "Memcpy DtoH", "Memset", "Memcpy Unknown", ... (get_memory_kernel_type)
  double memory_bw_gbps = 0;       // the running sum after this point
};

// Everything TraceAnalysis reports for one rank under `options`: the
// temporal breakdown (none when no row has a stream: HTA raises), the idle
// breakdown per stream in order of first appearance, the kernel-type view
// and the per-kernel rows sorted by (type, name), the queue lengths (per
// stream, streams ascending, each in time order), the memory bandwidth
// (per kind, kinds by name, each in time order) and the trace's duration.
struct HtaFigures {
  std::optional<HtaTemporal> temporal;
  std::vector<HtaIdleStream> idle;
  HtaKernelTypes kernel_types;
  std::vector<HtaKernel> kernels;
  std::vector<HtaQueuePoint> queue;
  std::vector<HtaMemoryBwPoint> memory_bw;
  // Trace.get_trace_duration, which get_time_spent_blocked_on_full_queue
  // divides by: the last row's ts minus the first's, over every row of
  // HTA's table (host rows too; ts, not ts + dur) after its step filter, on
  // HTA's clock; 0 without rows.
  std::int64_t trace_duration_ns = 0;
};
HtaFigures compute_hta(const DiagnoseContext& c, const HtaOptions& options);

}  // namespace tprof::internal
