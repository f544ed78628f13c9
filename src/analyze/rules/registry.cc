// The order rules run in (findings are sorted afterwards).
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

std::span<const RuleInfo> all_rules() {
  static constexpr RuleInfo kRules[] = {
      {"overhead_bound", rule_overhead_bound},
      {"compute_bound", rule_compute_bound},
      {"hotspot", rule_hotspot},
      {"many_calls", rule_many_calls},
      {"cost_in_children", rule_cost_in_children},
      {"cold_start", rule_cold_start},
      {"dispatch_gap", rule_dispatch_gap},
      {"heavy_kernel_launch", rule_heavy_kernel_launch},
      {"sync_at_window_end", rule_sync_at_window_end},
      {"hidden_memcpy", rule_hidden_memcpy},
      {"profiler_buffer_request", rule_profiler_buffer_request},
      {"kernel_gap", rule_kernel_gap},
      {"kernel_variance", rule_kernel_variance},
      {"cpu_gpu_offset", rule_cpu_gpu_offset},
      {"bmm_dispatch", rule_bmm_dispatch},
      {"addmm_fusion", rule_addmm_fusion},
      {"compile_overhead", rule_compile_overhead},
      {"recompilation", rule_recompilation},
      {"memory_bound_elementwise", rule_memory_bound_elementwise},
      {"fp32_math", rule_fp32_math},
      {"kernel_launch_stats", rule_kernel_launch_stats},
      {"low_gpu_utilization", rule_low_gpu_utilization},
      {"dataloader_bound", rule_dataloader_bound},
      {"comm_exposed", rule_comm_exposed},
      {"memory_pressure", rule_memory_pressure},
      {"sync_api", rule_sync_api},
      {"pageable_memcpy", rule_pageable_memcpy},
      {"host_blocked", rule_host_blocked},
      {"truncated_trace", rule_truncated_trace},
      {"dropped_events", rule_dropped_events},
      {"overlapping_kernels", rule_overlapping_kernels},
      {"unmatched_flows", rule_unmatched_flows},
      {"clock_skew", rule_clock_skew},
  };
  return kRules;
}

}  // namespace tprof::internal
