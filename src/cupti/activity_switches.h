// Turning a window's CUPTI recording on and off: which activity kinds, and
// which CUDA runtime and driver calls, as CuptiOptions asks. The CUPTI
// functions come in as pointers (the live source passes libcupti's), so
// that tests log every call and check what a window records without a GPU.
//
//   ActivitySwitches cupti{cuptiActivityEnable, cuptiActivityDisable,
//                          cuptiActivityEnableRuntimeApi, cuptiActivityEnableDriverApi};
//   EnabledActivities on;
//   enable_activities(cupti, options, &on);
//   if (on.failed_call != nullptr) ...;     // no tracing: disable_activities(cupti, &on)
//   ...                                     // the window
//   disable_api_records(cupti, &on);        // before tprof's own CUDA calls at the end
//   disable_activities(cupti, &on);
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/cupti/cupti_source.h"

namespace tprof::internal {

struct ActivitySwitches {
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  // CUPTI 12.5 and later; null where the loaded libcupti lacks them.
  CUptiResult (*enable_runtime_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  CUptiResult (*enable_driver_api)(CUpti_CallbackId, std::uint8_t) = nullptr;
  // Optional: words for a result in problems (else its number).
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
};

// What enable_activities turned on: what to turn off again, what the
// converter must still do, and what to report.
struct EnabledActivities {
  std::vector<CUpti_ActivityKind> kinds;  // enabled, in order
  // Kineto's driver calls switched on one by one, without the DRIVER kind.
  bool driver_calls_by_cbid = false;
  // Kinds or per-call switches this CUPTI refused, in words.
  std::vector<std::string> problems;
  // Set when enabling stopped: recording is unusable (the first kind
  // failing is how a missing driver or missing permission shows).
  const char* failed_call = nullptr;
  CUptiResult failed_result = CUPTI_SUCCESS;
};

// Where CUDA stands when a window starts: CUPTI's per-call driver
// switches (cuptiActivityEnableDriverApi without the DRIVER kind) take
// effect only for contexts created after them. Measured on an H200 (CUDA
// 13.0, driver 580): switched on before cudaFree(0), cuLaunchKernelEx is
// recorded; switched on once the context exists, the call returns
// CUPTI_SUCCESS and nothing is ever recorded.
enum class CudaContexts { kNoneYet, kExist };

// Enables, in this order: the kernel, copy and memset kinds; RUNTIME,
// then (kTorch) the per-call switch off for each call Kineto drops (the
// kind turns every call on again, so the switches come after it); for the
// driver, kTorch switches on only the calls Kineto keeps when no context
// exists yet (no DRIVER kind: the cheapest way to the same records), and
// otherwise, like kAll, the DRIVER kind (the converter drops the rest);
// SYNCHRONIZATION when options.sync_events; OVERHEAD, DEVICE and CONTEXT;
// MEMORY2 and MEMORY_POOL when options.memory.
// Without the per-call functions (or when one fails for the driver),
// kTorch enables the whole kinds and leaves the dropping to the converter
// (CuptiRecordConverter::keep_torch_api_calls_only), with a problem saying
// so. An unsupported kind after the first is left
// out with a problem; any other failure stops with out->failed_call set.
// Control thread only.
void enable_activities(const ActivitySwitches& cupti, const CuptiOptions& options, CudaContexts contexts,
                       EnabledActivities* out);

// Turns the runtime and driver call records off (the kinds, and the
// driver's per-call switches), leaving the device activity kinds on.
void disable_api_records(const ActivitySwitches& cupti, EnabledActivities* on);

// Turns off everything still on.
void disable_activities(const ActivitySwitches& cupti, EnabledActivities* on);

}  // namespace tprof::internal
