#include "src/cupti/activity_switches.h"

#include <algorithm>
#include <cstddef>

#include "src/cupti/kineto_api_calls.h"

namespace tprof::internal {
namespace {

std::string result_words(const ActivitySwitches& cupti, CUptiResult r) {
  const char* s = nullptr;
  if (cupti.result_string != nullptr && cupti.result_string(r, &s) == CUPTI_SUCCESS && s != nullptr) return s;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

bool unsupported(CUptiResult r) {
  return r == CUPTI_ERROR_NOT_SUPPORTED || r == CUPTI_ERROR_NOT_COMPATIBLE || r == CUPTI_ERROR_INVALID_KIND;
}

// Enables one kind. The first kind failing, or any failure but an
// unsupported kind, ends enabling (out->failed_call); an unsupported kind
// later on is left out and reported. False when enabling must stop.
bool enable_kind(const ActivitySwitches& cupti, CUpti_ActivityKind kind, bool first, EnabledActivities* out) {
  const CUptiResult r = cupti.enable(kind);
  if (r == CUPTI_SUCCESS) {
    out->kinds.push_back(kind);
    return true;
  }
  if (!first && unsupported(r)) {
    out->problems.push_back("CUPTI activity kind " + std::to_string(static_cast<int>(kind)) +
                            " not recorded: " + result_words(cupti, r));
    return true;
  }
  out->failed_call = "cuptiActivityEnable";
  out->failed_result = r;
  return false;
}

bool has_kind(const EnabledActivities& on, CUpti_ActivityKind kind) {
  return std::find(on.kinds.begin(), on.kinds.end(), kind) != on.kinds.end();
}

constexpr const char* kDroppedAfterwards =
    ": the CUDA calls torch.profiler leaves out are recorded, then dropped (a slower capture than torch's)";

}  // namespace

void enable_activities(const ActivitySwitches& cupti, const CuptiOptions& options, CudaContexts contexts,
                       EnabledActivities* out) {
  const bool torch = options.api_calls == CuptiApiCalls::kTorch;
  // Device work first: the kernel kind failing is where a missing driver
  // or missing permission shows.
  if (!enable_kind(cupti, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true, out)) return;
  for (const CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET}) {
    if (!enable_kind(cupti, k, false, out)) return;
  }

  // Runtime calls: torch keeps all but a few. The kind switches every call
  // on, and overrides per-call switches set before it (cupti_activity.h,
  // cuptiActivityEnableRuntimeApi): the few go off after it.
  if (!enable_kind(cupti, CUPTI_ACTIVITY_KIND_RUNTIME, false, out)) return;
  if (torch && has_kind(*out, CUPTI_ACTIVITY_KIND_RUNTIME)) {
    if (cupti.enable_runtime_api == nullptr) {
      out->problems.push_back(std::string("this libcupti has no cuptiActivityEnableRuntimeApi (CUPTI before 12.5)") +
                              kDroppedAfterwards);
    } else {
      for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) {
        const CUptiResult r = cupti.enable_runtime_api(c.cbid, 0);
        if (r != CUPTI_SUCCESS) {
          // The converter drops what CUPTI still records.
          out->problems.push_back("cuptiActivityEnableRuntimeApi(" + std::to_string(c.cbid) +
                                  ", 0) failed: " + result_words(cupti, r) + kDroppedAfterwards);
          break;
        }
      }
    }
  }

  // Driver calls: torch keeps a few. Switched on one by one they are the
  // only driver records CUPTI writes at all; the DRIVER kind would record
  // every call (a PyTorch step makes several Kineto drops). The switches
  // hold only for contexts created after them: a window opening on a
  // running program takes the kind, as Kineto does, and the converter
  // keeps what torch keeps.
  bool driver_kind = !torch || contexts == CudaContexts::kExist;
  if (!driver_kind) {
    if (cupti.enable_driver_api == nullptr) {
      out->problems.push_back(std::string("this libcupti has no cuptiActivityEnableDriverApi (CUPTI before 12.5)") +
                              kDroppedAfterwards);
      driver_kind = true;
    } else {
      std::size_t on = 0;
      for (const KinetoCbid& c : kKinetoKeptDriverCalls) {
        const CUptiResult r = cupti.enable_driver_api(c.cbid, 1);
        if (r != CUPTI_SUCCESS) {
          // A kept call CUPTI cannot switch on alone would be missing: the
          // whole kind instead, the switches set so far undone first.
          out->problems.push_back("cuptiActivityEnableDriverApi(" + std::to_string(c.cbid) +
                                  ", 1) failed: " + result_words(cupti, r) + kDroppedAfterwards);
          for (std::size_t i = 0; i < on; ++i) cupti.enable_driver_api(kKinetoKeptDriverCalls[i].cbid, 0);
          driver_kind = true;
          break;
        }
        ++on;
      }
      out->driver_calls_by_cbid = !driver_kind;
    }
  }
  if (driver_kind && !enable_kind(cupti, CUPTI_ACTIVITY_KIND_DRIVER, false, out)) return;

  // torch.profiler records synchronizations only when asked
  // (_ExperimentalConfig(enable_cuda_sync_events=True)).
  if (options.sync_events && !enable_kind(cupti, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, false, out)) return;
  // DEVICE and CONTEXT are not timed: enabling them makes CUPTI describe
  // the devices (occupancy, deviceProperties) and contexts (sync devices).
  for (const CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT}) {
    if (!enable_kind(cupti, k, false, out)) return;
  }
  // Device memory, as torch.profiler's profile_memory: only when asked.
  // MEMORY2 (a record per allocation and per release, each with the
  // correlation id of the call that made it: its thread), not MEMORY (one
  // record per allocation holding both times and no correlation id: no
  // call to place a release on); MEMORY_POOL for what cudaMallocAsync's
  // pools reserve. A CUPTI without either leaves it
  // out with a problem, as any later kind.
  if (options.memory) {
    for (const CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL}) {
      if (!enable_kind(cupti, k, false, out)) return;
    }
  }
}

void disable_api_records(const ActivitySwitches& cupti, EnabledActivities* on) {
  for (const CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    const auto it = std::find(on->kinds.begin(), on->kinds.end(), kind);
    if (it == on->kinds.end()) continue;
    cupti.disable(kind);
    on->kinds.erase(it);
  }
  if (on->driver_calls_by_cbid) {
    for (const KinetoCbid& c : kKinetoKeptDriverCalls) cupti.enable_driver_api(c.cbid, 0);
    on->driver_calls_by_cbid = false;
  }
}

void disable_activities(const ActivitySwitches& cupti, EnabledActivities* on) {
  disable_api_records(cupti, on);
  for (const CUpti_ActivityKind kind : on->kinds) cupti.disable(kind);
  on->kinds.clear();
}

}  // namespace tprof::internal
