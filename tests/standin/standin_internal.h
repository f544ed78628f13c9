// The private interfaces between the stand-in driver (libcuda.so.1), the
// stand-in CUPTI (libcupti.so.13) and the stand-in runtime (libcudart.so.13).
//
//   runtime ── standin_driver_internal() ──▶ driver        (no DRIVER records:
//                                                           cudart's internal path)
//   runtime ── cuDeviceGetCount, cuKernelGetName ──▶ driver (public entry points:
//                                                           DRIVER records, as
//                                                           real cudart makes them)
//   CUPTI ── standin_driver_attach_tool(hooks) ──▶ driver   (as real CUPTI finds the
//         ◀── hooks: API enter/exit, device work, syncs,    loaded driver and hooks
//             resources, context creation/destruction        into it)
//
// Real CUDA does the same through private export tables (cuGetExportTable);
// these are the stand-ins' own and carry only what the stand-ins model.
// Every hook runs on the thread that made the call (device work is
// reported at submission, with the times it will run at on the simulated
// device). Times are CLOCK_MONOTONIC ns: the simulated device's clock.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>

namespace standin {

// One public API call in progress. The driver allocates it on the
// caller's stack; CUPTI reads it at enter and exit.
struct ApiCall {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;  // RUNTIME_API or DRIVER_API
  CUpti_CallbackId cbid = 0;
  const char* name = nullptr;
  const void* params = nullptr;  // the generated_*_meta.h struct, or null for (void)
  void* return_value = nullptr;  // points at the call's result (CUresult / cudaError_t)
  const char* symbol = nullptr;  // kernel name of a launch
  CUcontext context = nullptr;
  std::uint32_t context_id = 0;
  std::uint32_t correlation_id = 0;    // CUPTI's: set at api_enter for a call it traces
  std::uint32_t result = 0;            // numeric result, for the API record
  std::uint64_t correlation_data = 0;  // the subscriber's per-call slot
  std::uint64_t tool_start = 0;        // CUPTI's: the record's start
  bool tool_entered = false;           // CUPTI's: enter was seen
  ApiCall* outer = nullptr;            // the enclosing call on this thread
};

enum class WorkKind : std::uint32_t { kKernel, kMemcpy, kMemset };

// Device work, as submitted (its times already decided by the stream's
// timeline).
struct Work {
  WorkKind kind = WorkKind::kKernel;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t device_id = 0, context_id = 0, stream_id = 0, correlation_id = 0;
  // Kernels.
  const char* name = nullptr;  // stable for the life of the process
  std::int32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::int32_t static_smem = 0, dynamic_smem = 0;
  std::uint16_t registers = 0;
  std::uint64_t graph_node_id = 0;
  std::uint32_t graph_id = 0;
  // Copies and memsets.
  std::uint64_t bytes = 0;
  std::uint8_t copy_kind = 0, src_kind = 0, dst_kind = 0;
  std::uint32_t value = 0;
  std::uint16_t memory_kind = 0;
};

// A finished host-side synchronization.
struct Sync {
  CUpti_ActivitySynchronizationType type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t correlation_id = 0, context_id = 0;
  std::uint32_t stream_id = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  std::uint32_t event_id = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
};

// What the DEVICE record says.
struct DeviceInfo {
  std::uint32_t id = 0;
  const char* name = "";
  std::uint64_t global_memory_bytes = 0, global_memory_bandwidth_kbps = 0;
  std::uint32_t constant_memory = 0, l2_cache = 0, warp_size = 0, core_clock_khz = 0;
  std::uint32_t memcpy_engines = 0, sms = 0, max_ipc = 0, max_warps_per_sm = 0, max_blocks_per_sm = 0;
  std::uint32_t smem_per_sm = 0, regs_per_sm = 0, regs_per_block = 0, smem_per_block = 0;
  std::uint32_t max_threads_per_block = 0, max_block_dim[3] = {0, 0, 0}, max_grid_dim[3] = {0, 0, 0};
  std::uint32_t cc_major = 0, cc_minor = 0;
  CUuuid uuid{};
};

// A device memory operation, reported inside the API call that made it
// (on its thread): an allocation or release (cudaMalloc, cudaFree,
// cudaMallocAsync, cudaFreeAsync, cudaMallocHost, cudaFreeHost), or the
// creation of a stream-ordered memory pool.
enum class MemoryOpKind : std::uint32_t { kAllocation, kRelease, kPoolCreated };
struct MemoryOp {
  MemoryOpKind kind = MemoryOpKind::kAllocation;
  CUpti_ActivityMemoryKind memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  std::uint64_t address = 0, bytes = 0;
  std::uint32_t device_id = 0, context_id = 0, correlation_id = 0;
  std::uint32_t stream_id = CUPTI_INVALID_STREAM_ID;  // stream-ordered (async) operations only
  bool is_async = false;
  // The pool an async operation used, after it: base address (0: none),
  // release threshold, reserved and used bytes.
  std::uint64_t pool_address = 0, pool_release_threshold = 0, pool_size = 0, pool_used = 0;
};

struct ContextInfo {
  CUcontext context = nullptr;
  std::uint32_t context_id = 0, device_id = 0, null_stream_id = 0;
};

// Called by the driver; set by CUPTI. Any may run on any application
// thread, concurrently.
struct ToolHooks {
  void (*api_enter)(ApiCall* call) noexcept;
  void (*api_exit)(ApiCall* call) noexcept;
  void (*work)(const Work& work) noexcept;
  void (*sync)(const Sync& sync) noexcept;
  // RESOURCE domain: `descriptor` is what CUpti_ResourceData::resourceDescriptor
  // carries for that cbid (CUpti_GraphData* for graph callbacks).
  void (*resource)(CUpti_CallbackIdResource cbid, CUcontext context, CUstream stream, void* descriptor) noexcept;
  void (*context_created)(const ContextInfo& context, const DeviceInfo& device) noexcept;
  // The driver's teardown, before the context goes (the RESOURCE callback;
  // CUPTI hands nothing back there: real CUPTI 13.0 did not).
  void (*context_destroying)(const ContextInfo& context) noexcept;
  void (*memory)(const MemoryOp& op) noexcept;
};

// Called by CUPTI; set by the driver.
struct DriverForTool {
  std::uint32_t (*graph_id)(CUgraph graph) noexcept;  // 0 for null
  std::uint64_t (*graph_node_id)(CUgraphNode node) noexcept;
  std::uint32_t (*graph_exec_id)(CUgraphExec exec) noexcept;
  // Whether the primary context exists (per-call DRIVER switches turned on
  // after it record nothing).
  bool (*have_context)() noexcept;
};

// Exported by the driver (extern "C"): CUPTI attaches at its first call
// and detaches in its teardown. attach returns null when the driver is
// already torn down.
using AttachToolFn = const DriverForTool* (*)(const ToolHooks* hooks);
using DetachToolFn = void (*)(const ToolHooks* hooks);
inline constexpr const char kAttachToolSymbol[] = "standin_driver_attach_tool";
inline constexpr const char kDetachToolSymbol[] = "standin_driver_detach_tool";

// The driver's functions as cudart reaches them: no DRIVER API records
// (the runtime's few traced driver calls go through the public entry
// points, which it finds with dlsym). Device work takes its correlation id from the innermost API call open on
// the calling thread (the runtime's own).
struct DriverInternal {
  CUresult (*init)() noexcept;  // cuInit(0), injection included
  bool (*deinitialized)() noexcept;
  void (*api_begin)(ApiCall* call) noexcept;  // call.domain/cbid/name/params set
  void (*api_end)(ApiCall* call) noexcept;    // call.result/return_value set
  CUresult (*launch)(CUfunction f, const std::int32_t grid[3], const std::int32_t block[3], std::uint32_t smem,
                     CUstream stream) noexcept;
  CUresult (*copy)(void* dst, const void* src, std::size_t bytes, int copy_kind, CUstream stream,
                   bool synchronous) noexcept;  // copy_kind: cudaMemcpyKind
  CUresult (*fill)(void* dst, int value, std::size_t bytes, CUstream stream, bool synchronous) noexcept;
  CUresult (*alloc)(void** p, std::size_t bytes) noexcept;
  CUresult (*release)(void* p) noexcept;  // any device allocation, pooled ones included (cudaFree)
  // From the device's default pool, in stream order (cudaMallocAsync, cudaFreeAsync).
  CUresult (*alloc_async)(void** p, std::size_t bytes, CUstream stream) noexcept;
  CUresult (*release_async)(void* p, CUstream stream) noexcept;
  // Pinned host memory (cudaMallocHost, cudaFreeHost).
  CUresult (*alloc_host)(void** p, std::size_t bytes) noexcept;
  CUresult (*release_host)(void* p) noexcept;
  CUresult (*context_synchronize)() noexcept;
  CUresult (*stream_create)(CUstream* stream) noexcept;
  CUresult (*stream_destroy)(CUstream stream) noexcept;
  CUresult (*stream_synchronize)(CUstream stream) noexcept;
  CUresult (*event_create)(CUevent* event) noexcept;
  CUresult (*event_record)(CUevent event, CUstream stream) noexcept;
  CUresult (*event_synchronize)(CUevent event) noexcept;
  CUresult (*event_destroy)(CUevent event) noexcept;
  CUresult (*begin_capture)(CUstream stream) noexcept;
  CUresult (*end_capture)(CUstream stream, CUgraph* graph) noexcept;
  CUresult (*graph_instantiate)(CUgraphExec* exec, CUgraph graph) noexcept;
  CUresult (*graph_launch)(CUgraphExec exec, CUstream stream) noexcept;
  CUresult (*graph_destroy)(CUgraph graph) noexcept;
  CUresult (*graph_exec_destroy)(CUgraphExec exec) noexcept;
  // A kernel of the simulated device: name (copied), run time on device.
  CUfunction (*function)(const char* name, std::int64_t dur_ns) noexcept;
  const char* (*error_name)(CUresult r) noexcept;
};
using DriverInternalFn = const DriverInternal* (*)();
inline constexpr const char kDriverInternalSymbol[] = "standin_driver_internal";

// The simulated device's one context, stream and device numbering.
inline constexpr std::uint32_t kContextId = 1;
inline constexpr std::uint32_t kLegacyStreamId = 7;  // what real CUPTI reports for the legacy stream
inline constexpr std::uint32_t kFirstStreamId = 13;

}  // namespace standin
