// Kineto's JSON vocabulary, spelled once: the fields of a trace event, the
// categories ("cat") and metadata names of the events libkineto writes,
// and the keys of their "args" and of "deviceProperties". The writers (the
// trace writer, the capture's trace builder, the CUPTI converter) write
// with these constants; both event parsers (the token walker and the
// lenient cursor parser) classify what they read with event_field() and
// arg_column(), so the two cannot drift apart.
//
//   w.key(kineto::kExternalId);                          // writing
//   switch (kineto::arg_column(key)) {                       // reading
//     case kineto::ArgColumn::kExternal: ...
//   }
//
// Origins: libkineto's output_json.cpp (event layout, metadata events),
// ActivityType.h (category names), CuptiActivity.h (device activity args)
// and torch's profiler_kineto.cpp (op and [memory] args). Older names that
// only the reader accepts (2021's "Kernel", "external id", ...) are here
// too, marked as such.
#pragma once

#include <cstdint>
#include <string_view>

#include "src/base/json_writer.h"
#include "tprof/trace.h"

namespace tprof::internal::kineto {

// ---- the fields of an event ------------------------------------------------------

inline constexpr JsonKey kPh("ph"), kCat("cat"), kName("name"), kPid("pid"), kTid("tid"), kTs("ts"), kDur("dur"),
    kArgs("args"), kId("id"), kBp("bp"), kS("s");
inline constexpr JsonKey kTraceEvents("traceEvents");

enum class EventField : std::uint8_t {
  kOther,
  kScope,       // "s"
  kPhase,       // "ph"
  kTimestamp,   // "ts"
  kFlowId,      // "id"
  kBindPoint,   // "bp"
  kProcessId,   // "pid"
  kThreadId,    // "tid"
  kCategory,    // "cat"
  kDuration,    // "dur"
  kEventName,   // "name"
  kArgsObject,  // "args"
};

// The field an event's key names (kOther for any other key). By length
// first: the parsers call this for every key of every event.
constexpr EventField event_field(std::string_view k) noexcept {
  switch (k.size()) {
    case 1:
      return k == kS.text() ? EventField::kScope : EventField::kOther;
    case 2:
      return k == kPh.text()   ? EventField::kPhase
             : k == kTs.text() ? EventField::kTimestamp
             : k == kId.text() ? EventField::kFlowId
             : k == kBp.text() ? EventField::kBindPoint
                               : EventField::kOther;
    case 3:
      return k == kPid.text()   ? EventField::kProcessId
             : k == kTid.text() ? EventField::kThreadId
             : k == kCat.text() ? EventField::kCategory
             : k == kDur.text() ? EventField::kDuration
                                : EventField::kOther;
    case 4:
      return k == kName.text()   ? EventField::kEventName
             : k == kArgs.text() ? EventField::kArgsObject
                                 : EventField::kOther;
    default:
      return EventField::kOther;
  }
}

// ---- categories -------------------------------------------------------------------

inline constexpr std::string_view kCatCpuOp = "cpu_op";
inline constexpr std::string_view kCatUserAnnotation = "user_annotation";
inline constexpr std::string_view kCatPythonFunction = "python_function";
inline constexpr std::string_view kCatCpuInstantEvent = "cpu_instant_event";  // "[memory]"
inline constexpr std::string_view kCatCudaRuntime = "cuda_runtime";
inline constexpr std::string_view kCatCudaDriver = "cuda_driver";
inline constexpr std::string_view kCatKernel = "kernel";
inline constexpr std::string_view kCatGpuMemcpy = "gpu_memcpy";
inline constexpr std::string_view kCatGpuMemset = "gpu_memset";
inline constexpr std::string_view kCatGpuUserAnnotation = "gpu_user_annotation";
inline constexpr std::string_view kCatCudaSync = "cuda_sync";
inline constexpr std::string_view kCatOverhead = "overhead";
inline constexpr std::string_view kCatTrace = "Trace";  // the profiler's own span
inline constexpr std::string_view kCatAc2g = "ac2g";    // launch -> device work flows (also their name)
// Meta's MTIA accelerator: its host API calls and its device activity.
inline constexpr std::string_view kCatMtiaRuntime = "mtia_runtime";
inline constexpr std::string_view kCatMtiaCcpEvents = "mtia_ccp_events";
// Cambricon's MLU (torch_mlu's Kineto): its runtime calls (cnInvokeKernel,
// cnrtMemcpyAsync, cnrtQueueSync) and copies; its kernels are "kernel".
inline constexpr std::string_view kCatMluRuntime = "mlu_runtime";
inline constexpr std::string_view kCatMluMemcpy = "mlu_memcpy";
inline constexpr std::string_view kCatMluMemset = "mlu_memset";
// CUPTI's range profiler (Kineto's CuptiRangeProfiler, CUDA <= 12.6, removed
// from Kineto in 2026 with the category kept): one event per kernel (auto
// range) or user range, its hardware counters in args, its ts/dur the
// profiling span split evenly among the ranges, not measured.
inline constexpr std::string_view kCatCudaProfilerRange = "cuda_profiler_range";

// What each category is. 2021 traces (torch ~1.9) used other names for the
// same events; the reader accepts both.
struct CategoryKind {
  std::string_view cat;
  EventKind kind;
};
inline constexpr CategoryKind kCategories[] = {
    {kCatCpuOp, EventKind::kCpuOp},
    {"Operator", EventKind::kCpuOp},  // 2021
    {kCatUserAnnotation, EventKind::kUserAnnotation},
    {kCatPythonFunction, EventKind::kPythonFunction},
    {kCatCudaRuntime, EventKind::kCudaRuntime},
    {"Runtime", EventKind::kCudaRuntime},  // 2021
    {kCatMtiaRuntime, EventKind::kCudaRuntime},
    {kCatMluRuntime, EventKind::kCudaRuntime},
    {kCatCudaDriver, EventKind::kCudaDriver},
    {kCatKernel, EventKind::kKernel},
    {"Kernel", EventKind::kKernel},  // 2021
    {kCatMtiaCcpEvents, EventKind::kKernel},
    {kCatGpuMemcpy, EventKind::kGpuMemcpy},
    {"Memcpy", EventKind::kGpuMemcpy},  // 2021
    {kCatMluMemcpy, EventKind::kGpuMemcpy},
    {kCatGpuMemset, EventKind::kGpuMemset},
    {"Memset", EventKind::kGpuMemset},  // 2021
    {kCatMluMemset, EventKind::kGpuMemset},
    {kCatGpuUserAnnotation, EventKind::kGpuUserAnnotation},
    {kCatCudaSync, EventKind::kCudaSync},
    {kCatTrace, EventKind::kTraceSpan},
    {kCatOverhead, EventKind::kOverhead},
    {kCatCudaProfilerRange, EventKind::kProfilerRange},
};

// ---- metadata events (ph "M") --------------------------------------------------

inline constexpr std::string_view kProcessName = "process_name";
inline constexpr std::string_view kProcessLabels = "process_labels";
inline constexpr std::string_view kProcessSortIndex = "process_sort_index";
inline constexpr std::string_view kThreadName = "thread_name";
inline constexpr std::string_view kThreadSortIndex = "thread_sort_index";
// Their args.
inline constexpr JsonKey kMetaName("name"), kLabels("labels"), kSortIndex("sort_index");

// ---- args -------------------------------------------------------------------------

// Host ops (cpu_op, user_annotation) and the device work linked to them.
inline constexpr JsonKey kExternalId("External id");
inline constexpr JsonKey kExternalIdLowercase("external id");  // 2021, read only
inline constexpr JsonKey kInputDims("Input Dims");
// Only in traces of torch <= 2.0 (truncated µs semantics).
inline constexpr JsonKey kProfilerEventIndex("Profiler Event Index"), kTraceName("Trace name");

// "[memory]" instants (cat cpu_instant_event), and torch's out-of-memory mark.
inline constexpr std::string_view kMemoryName = "[memory]", kOutOfMemoryName = "[OutOfMemory]";
inline constexpr JsonKey kDeviceType("Device Type"), kDeviceId("Device Id"), kAddr("Addr"), kBytes("Bytes"),
    kTotalAllocated("Total Allocated"), kTotalReserved("Total Reserved");

// Device activity, runtime and driver calls, synchronizations (CUPTI).
inline constexpr JsonKey kDevice("device"), kContext("context"), kStream("stream"), kCorrelation("correlation");
inline constexpr JsonKey kWorkBytes("bytes"), kBandwidth("memory bandwidth (GB/s)");
inline constexpr JsonKey kQueued("queued"), kRegisters("registers per thread"), kSharedMemory("shared memory"),
    kBlocksPerSm("blocks per SM"), kWarpsPerSm("warps per SM"), kGrid("grid"), kBlock("block"),
    kOccupancy("est. achieved occupancy %");
inline constexpr JsonKey kFromDevice("fromDevice"), kInDevice("inDevice"), kToDevice("toDevice"),
    kFromContext("fromContext"), kInContext("inContext"), kToContext("toContext");  // peer copies
// Work replayed from a CUDA graph (kernels, copies, memsets): Kineto
// writes them since 2026 (kineto#1276, CUDA 12+), for every activity, 0
// when not from a graph; tprof only when nonzero.
inline constexpr JsonKey kGraphId("graph id"), kGraphNodeId("graph node id");
// tprof's own, in Kineto's style: the scope (op, user annotation or NVTX
// range) open on the thread that created the graph node a replayed
// activity ran (docs/torch-trace-formats.md).
inline constexpr JsonKey kGraphNodeScope("graph node scope");
inline constexpr JsonKey kCbid("cbid");
inline constexpr JsonKey kSyncKind("cuda_sync_kind"), kWaitOnStream("wait_on_stream"),
    kWaitOnEventRecord("wait_on_cuda_event_record_corr_id"), kWaitOnEventId("wait_on_cuda_event_id");

// The args the parsers decode into columns while parsing (everything else
// is kept by reference and decoded on demand).
enum class ArgColumn : std::uint8_t {
  kNone,
  kMetaText,          // "name", "labels" (M events)
  kMetaNumber,        // "sort_index" (M events)
  kExternal,          // "External id", either spelling
  kCorrelationId,     // "correlation"
  kDeviceIndex,       // "device"
  kStreamId,          // "stream"
  kMemoryDeviceType,  // "Device Type"
  kMemoryDeviceId,    // "Device Id"
  kMemoryAddr,        // "Addr"
  kMemoryBytes,       // "Bytes"
  kMemoryAllocated,   // "Total Allocated"
  kMemoryReserved,    // "Total Reserved"
  kKineto2022,        // "Trace name", "Profiler Event Index": a torch <= 2.0 trace
};

// The column an args key fills (kOther: none). By length first: the
// parsers call this for every key of every event's args.
constexpr ArgColumn arg_column(std::string_view k) noexcept {
  switch (k.size()) {
    case 4:
      return k == kMetaName.text() ? ArgColumn::kMetaText
             : k == kAddr.text()   ? ArgColumn::kMemoryAddr
                                   : ArgColumn::kNone;
    case 5:
      return k == kBytes.text() ? ArgColumn::kMemoryBytes : ArgColumn::kNone;
    case 6:
      return k == kDevice.text()   ? ArgColumn::kDeviceIndex
             : k == kStream.text() ? ArgColumn::kStreamId
             : k == kLabels.text() ? ArgColumn::kMetaText
                                   : ArgColumn::kNone;
    case 9:
      return k == kDeviceId.text() ? ArgColumn::kMemoryDeviceId : ArgColumn::kNone;
    case 10:
      return k == kSortIndex.text()   ? ArgColumn::kMetaNumber
             : k == kTraceName.text() ? ArgColumn::kKineto2022
                                      : ArgColumn::kNone;
    case 11:
      return k == kExternalId.text() || k == kExternalIdLowercase.text() ? ArgColumn::kExternal
             : k == kCorrelation.text()                                  ? ArgColumn::kCorrelationId
             : k == kDeviceType.text()                                   ? ArgColumn::kMemoryDeviceType
                                                                         : ArgColumn::kNone;
    case 14:
      return k == kTotalReserved.text() ? ArgColumn::kMemoryReserved : ArgColumn::kNone;
    case 15:
      return k == kTotalAllocated.text() ? ArgColumn::kMemoryAllocated : ArgColumn::kNone;
    case 20:
      return k == kProfilerEventIndex.text() ? ArgColumn::kKineto2022 : ArgColumn::kNone;
    default:
      return ArgColumn::kNone;
  }
}
// Each key decoded while parsing is classified under its own length.
static_assert(
    arg_column(kMetaName.text()) == ArgColumn::kMetaText && arg_column(kLabels.text()) == ArgColumn::kMetaText &&
    arg_column(kSortIndex.text()) == ArgColumn::kMetaNumber && arg_column(kExternalId.text()) == ArgColumn::kExternal &&
    arg_column(kExternalIdLowercase.text()) == ArgColumn::kExternal &&
    arg_column(kCorrelation.text()) == ArgColumn::kCorrelationId &&
    arg_column(kDevice.text()) == ArgColumn::kDeviceIndex && arg_column(kStream.text()) == ArgColumn::kStreamId &&
    arg_column(kDeviceType.text()) == ArgColumn::kMemoryDeviceType &&
    arg_column(kDeviceId.text()) == ArgColumn::kMemoryDeviceId && arg_column(kAddr.text()) == ArgColumn::kMemoryAddr &&
    arg_column(kBytes.text()) == ArgColumn::kMemoryBytes &&
    arg_column(kTotalAllocated.text()) == ArgColumn::kMemoryAllocated &&
    arg_column(kTotalReserved.text()) == ArgColumn::kMemoryReserved &&
    arg_column(kTraceName.text()) == ArgColumn::kKineto2022 &&
    arg_column(kProfilerEventIndex.text()) == ArgColumn::kKineto2022);
static_assert(event_field(kS.text()) == EventField::kScope && event_field(kPh.text()) == EventField::kPhase &&
              event_field(kTs.text()) == EventField::kTimestamp && event_field(kId.text()) == EventField::kFlowId &&
              event_field(kBp.text()) == EventField::kBindPoint && event_field(kPid.text()) == EventField::kProcessId &&
              event_field(kTid.text()) == EventField::kThreadId && event_field(kCat.text()) == EventField::kCategory &&
              event_field(kDur.text()) == EventField::kDuration &&
              event_field(kName.text()) == EventField::kEventName &&
              event_field(kArgs.text()) == EventField::kArgsObject);

// ---- "deviceProperties" (one object per GPU, Kineto's key order) ----------------

inline constexpr JsonKey kPropId("id"), kPropName("name"), kPropTotalGlobalMem("totalGlobalMem"),
    kPropComputeMajor("computeMajor"), kPropComputeMinor("computeMinor"), kPropMaxThreadsPerBlock("maxThreadsPerBlock"),
    kPropMaxThreadsPerMultiprocessor("maxThreadsPerMultiprocessor"), kPropRegsPerBlock("regsPerBlock"),
    kPropWarpSize("warpSize"), kPropSharedMemPerBlock("sharedMemPerBlock"), kPropNumSms("numSms"),
    kPropRegsPerMultiprocessor("regsPerMultiprocessor"), kPropSharedMemPerBlockOptin("sharedMemPerBlockOptin"),
    kPropSharedMemPerMultiprocessor("sharedMemPerMultiprocessor");

}  // namespace tprof::internal::kineto
