// The peers' breakdowns, each computed with that peer's own definition
// (docs/diagnose.md, "Breakdowns"): TraceLens' GPU timeline,
// HolisticTraceAnalysis' temporal and idle-time breakdowns, the TensorBoard
// plugin's per-step overview.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

Breakdowns compute_breakdowns(const DiagnoseContext& c);

// HolisticTraceAnalysis' kernel-type view of one rank, over the rows its
// breakdowns read (the same rows, clock and filter as hta_temporal):
// get_comm_comp_overlap's numerator and denominator, and
// _get_gpu_kernel_type_time with include_memory_kernels=True.
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

}  // namespace tprof::internal
