// Which CUDA runtime and driver calls torch.profiler records, in one place:
// Kineto's lists (libkineto/src/CuptiCbidRegistry.cpp, CuptiActivityApi.cpp,
// CuptiActivityProfiler.cpp), by CUPTI's enum names, each with Kineto's
// reason. The live source turns these into CUPTI's per-call switches
// (src/cupti/activity_switches.h); the converter checks records against
// them (CuptiRecordConverter::keep_torch_api_calls_only).
//
//   if (!kineto_records_runtime_call(record.cbid)) drop(record);
//   for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) cuptiActivityEnableRuntimeApi(c.cbid, 0);
#pragma once

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <cstdint>

namespace tprof::internal {

struct KinetoCbid {
  std::uint32_t cbid;
  const char* why;  // where Kineto decides it, and why
};

// Runtime: Kineto enables CUPTI_ACTIVITY_KIND_RUNTIME (every call) and
// drops these: its handler returns early for a blocklisted cbid
// (handleRuntimeActivity -> CuptiCbidRegistry::isBlocklisted), and
// cudaGetDevice is also switched off in CUPTI itself. Every other runtime
// call is in torch's trace.
inline constexpr KinetoCbid kKinetoDroppedRuntimeCalls[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
     "cuptiActivityEnableRuntimeApi(.., 0) in enableCuptiActivities, and blocklisted as noisy"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, "blocklisted as noisy (CuptiCbidRegistry)"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, "blocklisted as noisy (CuptiCbidRegistry)"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020, "blocklisted as noisy (CuptiCbidRegistry)"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020, "blocklisted as noisy (CuptiCbidRegistry)"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, "blocklisted as noisy (CuptiCbidRegistry)"},
};

// Driver: Kineto enables CUPTI_ACTIVITY_KIND_DRIVER (every call; it
// switches cuKernelGetAttribute, cuDevicePrimaryCtxGetState and
// cuCtxGetCurrent off in CUPTI) and keeps only the calls its registry
// knows (handleDriverActivity -> isTrackedDriverCbid ->
// CuptiCbidRegistry::isRegistered): these. No other driver call is in
// torch's trace.
inline constexpr KinetoCbid kKinetoKeptDriverCalls[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "kernel launch (Triton, inductor): flow to its kernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "kernel launch (cuBLASLt's nvjet GEMMs): flow to its kernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemCreate, "virtual memory management (expandable segments)"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemMap, "virtual memory management (expandable segments)"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, "virtual memory management (expandable segments)"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemRelease, "virtual memory management (expandable segments)"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemExportToShareableHandle, "memory shared between processes"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, "memory shared between processes"},
};

// True when torch.profiler's trace holds a call with this cbid.
// Thread-safe, no allocation.
constexpr bool kineto_records_runtime_call(std::uint32_t cbid) noexcept {
  for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) {
    if (c.cbid == cbid) return false;
  }
  return true;
}
constexpr bool kineto_records_driver_call(std::uint32_t cbid) noexcept {
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) {
    if (c.cbid == cbid) return true;
  }
  return false;
}

}  // namespace tprof::internal
