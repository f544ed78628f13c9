// Every rule in registry order (findings are sorted afterwards), and which
// of them claim GPU idle time (rules.h).
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

std::span<const RuleInfo> all_rules() {
  constexpr bool kClaims = true;
  static constexpr RuleInfo kRules[] = {
      {"overhead_bound", rule_overhead_bound, kClaims},
      {"compute_bound", rule_compute_bound},
      {"hotspot", rule_hotspot},
      {"many_calls", rule_many_calls},
      {"cost_in_children", rule_cost_in_children},
      {"cold_start", rule_cold_start},
      {"first_call_setup", rule_first_call_setup},
      {"dispatch_gap", rule_dispatch_gap},
      {"heavy_kernel_launch", rule_heavy_kernel_launch},
      {"sync_at_window_end", rule_sync_at_window_end},
      {"hidden_memcpy", rule_hidden_memcpy},
      {"profiler_buffer_request", rule_profiler_buffer_request, kClaims},
      // Before kernel_gap: the host-built tensor names the op in the gaps
      // before its copies, and claims their idle time first.
      {"host_built_tensor", rule_host_built_tensor, kClaims},
      {"device_time_sliced", rule_device_time_sliced, kClaims},
      {"kernel_gap", rule_kernel_gap, kClaims},
      {"kernel_variance", rule_kernel_variance},
      {"cpu_op_variance", rule_cpu_op_variance},
      {"cpu_unfused_elementwise", rule_cpu_unfused_elementwise},
      {"compiled_code_unrecorded", rule_compiled_code_unrecorded},
      {"cpu_gpu_offset", rule_cpu_gpu_offset},
      {"bmm_dispatch", rule_bmm_dispatch},
      {"addmm_fusion", rule_addmm_fusion},
      {"compile_overhead", rule_compile_overhead, kClaims},
      {"recompilation", rule_recompilation},
      {"memory_bound_elementwise", rule_memory_bound_elementwise},
      {"fp32_math", rule_fp32_math},
      {"eager_attention", rule_eager_attention},
      {"layout_conversion", rule_layout_conversion},
      {"per_param_optimizer", rule_per_param_optimizer},
      {"per_param_grad_clip", rule_per_param_grad_clip},
      {"ddp_buffers", rule_ddp_buffers},
      {"train_mode_in_inference", rule_train_mode_in_inference},
      {"kernel_launch_stats", rule_kernel_launch_stats, kClaims},
      {"low_gpu_utilization", rule_low_gpu_utilization, kClaims},
      {"dataloader_bound", rule_dataloader_bound},
      {"comm_exposed", rule_comm_exposed},
      {"memory_pressure", rule_memory_pressure},
      {"memory_spike", rule_memory_spike},
      {"sync_api", rule_sync_api, kClaims},
      {"pageable_memcpy", rule_pageable_memcpy},
      {"host_blocked", rule_host_blocked, kClaims},
      {"truncated_trace", rule_truncated_trace},
      {"device_activity_missing", rule_device_activity_missing},
      {"device_readback_loop", rule_device_readback_loop},
      {"legacy_device_spans", rule_legacy_device_spans},
      {"model_on_cpu", rule_model_on_cpu},
      {"cpu_collectives", rule_cpu_collectives},
      {"cpu_between_ops", rule_cpu_between_ops},
      {"cpu_thread_stall", rule_cpu_thread_stall},
      {"cpu_max_pool_layout", rule_cpu_max_pool_layout},
      {"host_free_stall", rule_host_free_stall},
      {"dropped_events", rule_dropped_events},
      {"overlapping_kernels", rule_overlapping_kernels},
      {"unmatched_flows", rule_unmatched_flows},
      {"clock_skew", rule_clock_skew},
      {"untimed_device", rule_untimed_device},
  };
  return kRules;
}

}  // namespace tprof::internal
