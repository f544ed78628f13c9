// The diagnose rules: one function per file in this directory, each adding
// zero or more findings with its id. docs/diagnose.md has every rule's
// definition, thresholds and origin; registry.cc lists them in order.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/saturate.h"  // rules sum the trace's times: sat_acc, never +=
#include "tprof/diagnose.h"

namespace tprof::internal {

// A rule reads the context and appends its findings to *out. Only the
// rules that claim GPU idle time, or discount what earlier ones claimed
// (claims_idle), read *out: they take the idle time no earlier claiming
// rule took (claimable_idle, src/analyze/idle.h), so they run one after
// another in registry order; every other rule sees nothing but the context
// and may run on any thread alongside them (diagnose.cc). A rule that is
// not marked never sets idle_claim (DiagnoseThreads.ManyThreadsGiveTheFindingsOfOne
// checks it on every real trace in tests/data).
using RuleFn = void (*)(const DiagnoseContext& c, std::vector<Finding>* out);
struct RuleInfo {
  std::string_view id;
  RuleFn fn;
  bool claims_idle = false;
};

// Every rule, in registry order: the order findings of equal impact keep.
std::span<const RuleInfo> all_rules();

// Pageable copies of at least this size are what pinning speeds up
// (pageable_memcpy counts them; host_blocked leaves their blocking to it):
// under 64 KiB a copy is latency-bound, a few µs either way.
inline constexpr std::int64_t kPageableMinBytes = 64 * 1024;

// The blog's cheatsheet (docs/trace-reading.md).
void rule_overhead_bound(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_compute_bound(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_hotspot(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_many_calls(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cost_in_children(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cold_start(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_dispatch_gap(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_heavy_kernel_launch(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_sync_at_window_end(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_hidden_memcpy(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_profiler_buffer_request(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_device_time_sliced(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_kernel_gap(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_kernel_variance(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_op_variance(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_unfused_elementwise(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_compiled_code_unrecorded(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_gpu_offset(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_bmm_dispatch(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_addmm_fusion(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_compile_overhead(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_recompilation(const DiagnoseContext& c, std::vector<Finding>* out);

// Efficiency (src/analyze/efficiency.h).
void rule_memory_bound_elementwise(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_fp32_math(const DiagnoseContext& c, std::vector<Finding>* out);

// An expert's cheap checks (issue 38): each names the setting that removes
// a pattern the trace shows.
void rule_eager_attention(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_layout_conversion(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_per_param_optimizer(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_per_param_grad_clip(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_collectives(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_between_ops(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_max_pool_layout(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_host_free_stall(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_ddp_buffers(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_train_mode_in_inference(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_device_readback_loop(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_model_on_cpu(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_legacy_device_spans(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_first_call_setup(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_host_built_tensor(const DiagnoseContext& c, std::vector<Finding>* out);

// What the peers report (HolisticTraceAnalysis, the TensorBoard plugin,
// Nsight Systems).
void rule_kernel_launch_stats(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_low_gpu_utilization(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_dataloader_bound(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_comm_exposed(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_memory_pressure(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_memory_spike(const DiagnoseContext& c, std::vector<Finding>* out);
// totalGlobalMem by device id from the trace's "deviceProperties" (empty without it).
std::map<std::int64_t, std::int64_t> device_memory_capacity(const Trace& t);
void rule_sync_api(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_pageable_memcpy(const DiagnoseContext& c, std::vector<Finding>* out);
// Host calls that block their thread, by effect (src/analyze/idle.h).
void rule_host_blocked(const DiagnoseContext& c, std::vector<Finding>* out);

// Trace health.
void rule_truncated_trace(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_cpu_thread_stall(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_untimed_device(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_dropped_events(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_overlapping_kernels(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_unmatched_flows(const DiagnoseContext& c, std::vector<Finding>* out);
void rule_clock_skew(const DiagnoseContext& c, std::vector<Finding>* out);

}  // namespace tprof::internal
