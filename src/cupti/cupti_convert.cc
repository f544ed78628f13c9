#include "src/cupti/cupti_convert.h"

#include <cuda_occupancy.h>
#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "src/base/json_writer.h"
#include "src/cupti/cupti_cbid_names.h"
#include "src/cupti/kineto_api_calls.h"
#include "src/trace/kineto_keys.h"

namespace tprof::internal {
namespace {

// Records are read by copying them into the struct their kind names: a
// CUPTI buffer holds records of several types back to back, so reading one
// through another type's pointer (or through CUpti_Activity, then through
// the real type) would break aliasing rules and, for hand-built records,
// alignment assumptions.
template <class T>
T read_record(const CUpti_Activity* record) {
  T r;
  std::memcpy(&r, record, sizeof r);
  return r;
}

std::int64_t to_ns(std::uint64_t t) {
  // CUPTI timestamps are unsigned; the live source makes them
  // CLOCK_MONOTONIC ns, far below 2^63.
  return static_cast<std::int64_t>(std::min<std::uint64_t>(t, std::numeric_limits<std::int64_t>::max()));
}

// The text between the braces of a compact object "{...}" ("" for "{}").
std::string_view members_of(std::string_view object) {
  return object.size() < 2 ? std::string_view() : object.substr(1, object.size() - 2);
}

// Kineto's arg keys (CuptiActivity.h), spelled in src/trace/kineto_keys.h.
using kineto::kBandwidth;
using kineto::kContext;
using kineto::kCorrelation;
using kineto::kDevice;
using kineto::kStream;
constexpr const JsonKey& kBytes = kineto::kWorkBytes;

// Kineto's graph ids of work replayed from a CUDA graph (after the
// bandwidth of a copy, after the occupancy of a kernel). Kineto writes them
// for every activity, zeros included; tprof only for graph work, so that
// other activities keep the args every torch before 2026 wrote.
void write_graph_ids(JsonWriter& w, std::uint32_t graph_id, std::uint64_t graph_node_id) {
  if (graph_id == 0 && graph_node_id == 0) return;
  w.key(kineto::kGraphId);
  w.value_uint(graph_id);
  w.key(kineto::kGraphNodeId);
  w.value_uint(graph_node_id);
}

// Kineto leaves the bandwidth out of zero-length copies; bytes per ns is GB/s.
void write_bandwidth(JsonWriter& w, std::uint64_t bytes, std::int64_t dur_ns) {
  if (dur_ns <= 0) return;
  w.key(kBandwidth);
  w.value_double(static_cast<double>(bytes) / static_cast<double>(dur_ns));
}

// Kineto's float kernel metrics: "inf" (a string: JSON has no infinity)
// when the device, hence its SM count, is unknown.
void write_float_metric(JsonWriter& w, float v) {
  if (std::isfinite(v)) {
    w.value_fixed6(static_cast<double>(v));
  } else {
    w.value_string("inf");
  }
}

}  // namespace

// ---- names --------------------------------------------------------------------

std::string_view memcpy_kind_name(std::uint32_t copy_kind) noexcept {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "<unknown>";  // Kineto's word, CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN included
  }
}

std::string_view memory_kind_name(std::uint32_t memory_kind) noexcept {
  switch (memory_kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN: return "Unknown";
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "Managed Static";
    default: return "Unrecognized";
  }
}

namespace {

// "Memcpy DtoD (Device -> Device)": Kineto's name of a copy.
std::string memcpy_name(std::uint32_t copy_kind, std::uint32_t src_kind, std::uint32_t dst_kind) {
  return "Memcpy " + std::string(memcpy_kind_name(copy_kind)) + " (" + std::string(memory_kind_name(src_kind)) +
         " -> " + std::string(memory_kind_name(dst_kind)) + ")";
}

}  // namespace

std::string_view sync_kind_name(std::uint32_t sync_type) noexcept {
  switch (sync_type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "Event Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "Stream Wait Event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "Stream Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "Context Sync";
    default: return "Unknown Sync";
  }
}

std::string_view overhead_kind_name(std::uint32_t overhead_kind) noexcept {
  switch (overhead_kind) {
    case CUPTI_ACTIVITY_OVERHEAD_UNKNOWN: return "Unknown";
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "Driver Compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "Buffer Flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "Instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "Resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "Runtime Triggered Module Loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "Lazy Function Loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "Command Buffer Full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "Activity Buffer Request";
    default: return "Unrecognized";
  }
}

namespace {
std::string_view find_cbid(const CbidName* table, std::size_t size, std::uint32_t cbid) noexcept {
  const CbidName* end = table + size;
  const CbidName* it =
      std::lower_bound(table, end, cbid, [](const CbidName& e, std::uint32_t c) { return e.cbid < c; });
  return it != end && it->cbid == cbid ? std::string_view(it->name) : std::string_view("INVALID");
}
}  // namespace

std::string_view runtime_cbid_name(std::uint32_t cbid) noexcept {
  return find_cbid(kRuntimeCbidNames, kRuntimeCbidNamesSize, cbid);
}

std::string_view driver_cbid_name(std::uint32_t cbid) noexcept {
  return find_cbid(kDriverCbidNames, kDriverCbidNamesSize, cbid);
}

std::string demangle_kernel_name(const char* name) {
  if (name == nullptr) return {};
  // Only Itanium-mangled names: __cxa_demangle would also "demangle" plain
  // identifiers that happen to look like builtin type codes.
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    std::free(out);
    return name;
  }
  std::string result(out);
  std::free(out);
  return result;
}

int estimated_occupancy_percent(const CuptiDevice& device, std::uint16_t registers, std::int32_t static_smem,
                                std::int32_t dynamic_smem, std::int64_t block_threads, float blocks_per_sm) {
  if (device.max_threads_per_sm == 0 || block_threads <= 0 || block_threads > INT_MAX) return 0;
  cudaOccDeviceProp prop;
  prop.computeMajor = static_cast<int>(device.compute_major);
  prop.computeMinor = static_cast<int>(device.compute_minor);
  prop.maxThreadsPerBlock = static_cast<int>(device.max_threads_per_block);
  prop.maxThreadsPerMultiprocessor = static_cast<int>(device.max_threads_per_sm);
  prop.regsPerBlock = static_cast<int>(device.regs_per_block);
  prop.regsPerMultiprocessor = static_cast<int>(device.regs_per_sm);
  prop.warpSize = static_cast<int>(device.warp_size);
  prop.sharedMemPerBlock = device.smem_per_block;
  prop.sharedMemPerMultiprocessor = device.smem_per_sm;
  prop.numSms = static_cast<int>(device.num_sms);
  prop.sharedMemPerBlockOptin = device.smem_per_block_optin;
  prop.reservedSharedMemPerBlock = device.smem_reserved_per_block;

  // The function as Kineto describes it: what CUPTI knows of the launch,
  // with the default (not opt-in) shared memory limit.
  cudaOccFuncAttributes attributes;
  attributes.maxThreadsPerBlock = INT_MAX;
  attributes.numRegs = registers;
  attributes.sharedSizeBytes = static_cast<std::size_t>(std::max(static_smem, 0));
  attributes.partitionedGCConfig = PARTITIONED_GC_OFF;
  attributes.shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT;
  attributes.maxDynamicSharedSizeBytes = 0;
  const cudaOccDeviceState state;
  cudaOccResult result;
  const cudaOccError status =
      cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attributes, &state, static_cast<int>(block_threads),
                                              static_cast<std::size_t>(std::max(dynamic_smem, 0)));
  if (status != CUDA_OCC_SUCCESS) return 0;
  // In float, as Kineto computes it, so that the rounding agrees.
  const float active = std::min(static_cast<float>(result.activeBlocksPerMultiprocessor), blocks_per_sm);
  const float occupancy =
      active * static_cast<float>(block_threads) / static_cast<float>(device.max_threads_per_sm);
  return static_cast<int>(std::lround(static_cast<double>(occupancy) * 100.0));
}

// ---- the converter ------------------------------------------------------------------

void CuptiRecordConverter::add(const CUpti_Activity* record) {
  if (record == nullptr) return;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, record, sizeof kind);
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: add_kernel(record); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: add_memcpy(record); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: add_memcpy_peer(record); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: add_memset(record); break;
    case CUPTI_ACTIVITY_KIND_RUNTIME: add_api(record, DeviceEventKind::kRuntime); break;
    case CUPTI_ACTIVITY_KIND_DRIVER: add_api(record, DeviceEventKind::kDriver); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: add_sync(record); break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: add_overhead(record); break;
    case CUPTI_ACTIVITY_KIND_DEVICE: add_device(record); break;
    case CUPTI_ACTIVITY_KIND_CONTEXT: add_context(record); break;
    case CUPTI_ACTIVITY_KIND_MEMORY2: add_memory(record); break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: add_memory_pool(record); break;
    default: ++ignored_; break;
  }
}

void CuptiRecordConverter::clamp(std::int64_t start_ns, std::int64_t* end_ns) {
  if (*end_ns < start_ns) {
    *end_ns = start_ns;
    ++clamped_;
  }
}

void CuptiRecordConverter::push(DeviceEvent e, std::pair<std::uint32_t, std::uint32_t> name,
                                std::string_view args_object) {
  e.name_offset = name.first;
  e.name_len = name.second;
  const auto args = batch_.add_text(members_of(args_object));
  e.args_offset = args.first;
  e.args_len = args.second;
  batch_.events.push_back(e);
}

std::uint32_t CuptiRecordConverter::intern_kernel_name(const char* mangled) {
  const std::string_view key = mangled == nullptr ? std::string_view() : std::string_view(mangled);
  const auto it = kernel_name_ids_.find(key);
  if (it != kernel_name_ids_.end()) return it->second;
  // The name is copied: CUPTI owns the original and the buffer holding the
  // record goes back to CUPTI before finish().
  const auto id = static_cast<std::uint32_t>(kernel_names_.size());
  const std::string& stored = kernel_names_.emplace_back(key);
  kernel_name_ids_.emplace(std::string_view(stored), id);
  return id;
}

void CuptiRecordConverter::add_kernel(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityKernel10>(record);
  PendingKernel k{};
  k.start_ns = to_ns(r.start);
  k.end_ns = to_ns(r.end);
  clamp(k.start_ns, &k.end_ns);
  // CUPTI_TIMESTAMP_UNKNOWN (0) unless launch latency timestamps are on.
  k.queued = r.queued;
  k.device = r.deviceId;
  k.context = r.contextId;
  k.stream = r.streamId;
  k.correlation = r.correlationId;
  learn_context(r.contextId, r.deviceId);
  k.grid[0] = r.gridX;
  k.grid[1] = r.gridY;
  k.grid[2] = r.gridZ;
  k.block[0] = r.blockX;
  k.block[1] = r.blockY;
  k.block[2] = r.blockZ;
  k.static_smem = r.staticSharedMemory;
  k.dynamic_smem = r.dynamicSharedMemory;
  k.registers = r.registersPerThread;
  k.name_id = intern_kernel_name(r.name);
  k.graph_node = r.graphNodeId;
  k.graph = r.graphId;
  kernels_.push_back(k);
}

void CuptiRecordConverter::emit_kernel(const PendingKernel& k, std::pair<std::uint32_t, std::uint32_t> name) {
  const auto it = devices_.find(k.device);
  const CuptiDevice* device = it == devices_.end() ? nullptr : &it->second;
  // Kineto's formulas, in float: blocks over SMs, and warps as that times
  // the block's threads over 32 (not rounded up to whole warps).
  const std::int64_t blocks = static_cast<std::int64_t>(k.grid[0]) * k.grid[1] * k.grid[2];
  const std::int64_t block_threads = static_cast<std::int64_t>(k.block[0]) * k.block[1] * k.block[2];
  const float blocks_per_sm = device != nullptr && device->num_sms != 0
                                  ? static_cast<float>(blocks) / static_cast<float>(device->num_sms)
                                  : std::numeric_limits<float>::infinity();
  const float warps_per_sm = blocks_per_sm * static_cast<float>(block_threads) / 32.0f;
  const int occupancy =
      device == nullptr ? 0
                        : estimated_occupancy_percent(*device, k.registers, k.static_smem, k.dynamic_smem,
                                                      block_threads, blocks_per_sm);

  using kineto::kBlock;
  using kineto::kBlocksPerSm;
  using kineto::kGrid;
  using kineto::kOccupancy;
  using kineto::kQueued;
  using kineto::kRegisters;
  using kineto::kSharedMemory;
  using kineto::kWarpsPerSm;
  scratch_.clear();
  {
    JsonWriter w(&scratch_);
    w.begin_object();
    w.key(kQueued);
    w.value_uint(k.queued);
    w.key(kDevice);
    w.value_uint(k.device);
    w.key(kContext);
    w.value_uint(k.context);
    w.key(kStream);
    w.value_uint(k.stream);
    w.key(kCorrelation);
    w.value_uint(k.correlation);
    w.key(kRegisters);
    w.value_uint(k.registers);
    w.key(kSharedMemory);
    w.value_int(static_cast<std::int64_t>(k.static_smem) + k.dynamic_smem);
    w.key(kBlocksPerSm);
    write_float_metric(w, blocks_per_sm);
    w.key(kWarpsPerSm);
    write_float_metric(w, warps_per_sm);
    w.key(kGrid);
    w.begin_array();
    for (const std::int32_t v : k.grid) w.value_int(v);
    w.end_array();
    w.key(kBlock);
    w.begin_array();
    for (const std::int32_t v : k.block) w.value_int(v);
    w.end_array();
    w.key(kOccupancy);
    w.value_int(occupancy);
    write_graph_ids(w, k.graph, k.graph_node);
    w.end_object();
  }
  DeviceEvent e;
  e.kind = DeviceEventKind::kKernel;
  e.start_ns = k.start_ns;
  e.end_ns = k.end_ns;
  e.device = static_cast<std::int32_t>(k.device);
  e.stream = k.stream;
  e.correlation = k.correlation;
  e.graph_node = k.graph_node;
  push(e, name, scratch_);
}

template <class R>
DeviceEvent CuptiRecordConverter::work_event(DeviceEventKind kind, const R& r) {
  DeviceEvent e;
  e.kind = kind;
  e.start_ns = to_ns(r.start);
  e.end_ns = to_ns(r.end);
  clamp(e.start_ns, &e.end_ns);
  e.device = static_cast<std::int32_t>(r.deviceId);
  e.stream = r.streamId;
  e.correlation = r.correlationId;
  e.graph_node = r.graphNodeId;
  learn_context(r.contextId, r.deviceId);
  return e;
}

template <class R>
void CuptiRecordConverter::write_transfer_args(const R& r, std::int64_t dur_ns) {
  scratch_.clear();
  JsonWriter w(&scratch_);
  w.begin_object();
  w.key(kDevice);
  w.value_uint(r.deviceId);
  w.key(kContext);
  w.value_uint(r.contextId);
  w.key(kStream);
  w.value_uint(r.streamId);
  w.key(kCorrelation);
  w.value_uint(r.correlationId);
  w.key(kBytes);
  w.value_uint(r.bytes);
  write_bandwidth(w, r.bytes, dur_ns);
  write_graph_ids(w, r.graphId, r.graphNodeId);
  w.end_object();
}

void CuptiRecordConverter::add_memcpy(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityMemcpy6>(record);
  const DeviceEvent e = work_event(DeviceEventKind::kMemcpy, r);
  const std::string name = memcpy_name(r.copyKind, r.srcKind, r.dstKind);
  write_transfer_args(r, e.end_ns - e.start_ns);
  push(e, batch_.add_text(name), scratch_);
}

void CuptiRecordConverter::add_memcpy_peer(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityMemcpyPtoP4>(record);
  // The lane is the device that executes the copy.
  const DeviceEvent e = work_event(DeviceEventKind::kMemcpy, r);
  const std::string name = memcpy_name(r.copyKind, r.srcKind, r.dstKind);
  using kineto::kFromContext;
  using kineto::kFromDevice;
  using kineto::kInContext;
  using kineto::kInDevice;
  using kineto::kToContext;
  using kineto::kToDevice;
  scratch_.clear();
  {
    JsonWriter w(&scratch_);
    w.begin_object();
    w.key(kFromDevice);
    w.value_uint(r.srcDeviceId);
    w.key(kInDevice);
    w.value_uint(r.deviceId);
    w.key(kToDevice);
    w.value_uint(r.dstDeviceId);
    w.key(kFromContext);
    w.value_uint(r.srcContextId);
    w.key(kInContext);
    w.value_uint(r.contextId);
    w.key(kToContext);
    w.value_uint(r.dstContextId);
    w.key(kStream);
    w.value_uint(r.streamId);
    w.key(kCorrelation);
    w.value_uint(r.correlationId);
    w.key(kBytes);
    w.value_uint(r.bytes);
    write_bandwidth(w, r.bytes, e.end_ns - e.start_ns);
    write_graph_ids(w, r.graphId, r.graphNodeId);
    w.end_object();
  }
  push(e, batch_.add_text(name), scratch_);
}

void CuptiRecordConverter::add_memset(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityMemset4>(record);
  const DeviceEvent e = work_event(DeviceEventKind::kMemset, r);
  const std::string name = "Memset (" + std::string(memory_kind_name(r.memoryKind)) + ")";
  write_transfer_args(r, e.end_ns - e.start_ns);
  push(e, batch_.add_text(name), scratch_);
}

std::pair<std::uint32_t, std::uint32_t> CuptiRecordConverter::api_name(DeviceEventKind kind, std::uint32_t cbid) {
  const std::uint64_t key = (static_cast<std::uint64_t>(kind) << 32) | cbid;
  const auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const std::string_view name =
      kind == DeviceEventKind::kRuntime ? runtime_cbid_name(cbid) : driver_cbid_name(cbid);
  const auto text = batch_.add_text(name);
  api_names_.emplace(key, text);
  return text;
}

void CuptiRecordConverter::add_api(const CUpti_Activity* record, DeviceEventKind kind) {
  const auto r = read_record<CUpti_ActivityAPI>(record);
  if (torch_api_calls_only_ && !(kind == DeviceEventKind::kRuntime ? kineto_records_runtime_call(r.cbid)
                                                                   : kineto_records_driver_call(r.cbid))) {
    ++filtered_api_;
    // The call made memory, perhaps: its record finds its thread here.
    if (memory_threads_ && r.correlationId != 0) dropped_call_threads_.emplace(r.correlationId, r.threadId);
    return;
  }
  DeviceEvent e;
  e.kind = kind;
  e.start_ns = to_ns(r.start);
  e.end_ns = to_ns(r.end);
  clamp(e.start_ns, &e.end_ns);
  e.device = -1;
  e.stream = -1;
  // The OS tid: the live source sets CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM.
  e.thread = r.threadId;
  e.correlation = r.correlationId;
  using kineto::kCbid;
  scratch_.clear();
  {
    JsonWriter w(&scratch_);
    w.begin_object();
    w.key(kCbid);
    w.value_uint(r.cbid);
    w.key(kCorrelation);
    w.value_uint(r.correlationId);
    w.end_object();
  }
  push(e, api_name(kind, r.cbid), scratch_);
}

void CuptiRecordConverter::add_sync(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivitySynchronization2>(record);
  PendingSync s{};
  s.start_ns = to_ns(r.start);
  s.end_ns = to_ns(r.end);
  clamp(s.start_ns, &s.end_ns);
  s.type = static_cast<std::uint32_t>(r.type);
  s.context = r.contextId;
  s.stream = r.streamId;
  s.event_id = r.cudaEventId;
  s.correlation = r.correlationId;
  syncs_.push_back(s);
}

void CuptiRecordConverter::learn_context(std::uint32_t context, std::uint32_t device) {
  // A CONTEXT record, when there is one, has the last word (add_context).
  context_device_.try_emplace(context, device);
}

void CuptiRecordConverter::emit_sync(const PendingSync& s) {
  // Kineto's contextIdtoDeviceId: the device its work records named for
  // the context, else 0.
  const auto it = context_device_.find(s.context);
  const std::int64_t device = it == context_device_.end() ? 0 : static_cast<std::int64_t>(it->second);
  // All bits set means "no stream" (a context sync); Kineto writes -1.
  const std::int64_t stream = s.stream == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? std::int64_t{-1} : std::int64_t{s.stream};
  const std::string_view kind = sync_kind_name(s.type);
  using kineto::kSyncKind;
  using kineto::kWaitOnStream;
  constexpr const JsonKey& kWaitOnRecord = kineto::kWaitOnEventRecord;
  constexpr const JsonKey& kEventId = kineto::kWaitOnEventId;
  scratch_.clear();
  {
    JsonWriter w(&scratch_);
    w.begin_object();
    w.key(kSyncKind);
    w.value_string(kind);
    if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
        s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) {
      // The stream and launch the event was recorded after come from
      // CUPTI_ACTIVITY_KIND_CUDA_EVENT records, which tprof does not
      // enable: -1, as Kineto writes them when it has none.
      w.key(kWaitOnStream);
      w.value_int(-1);
      w.key(kWaitOnRecord);
      w.value_int(-1);
      w.key(kEventId);
      w.value_uint(s.event_id);
    }
    w.key(kStream);
    w.value_int(stream);
    w.key(kCorrelation);
    w.value_uint(s.correlation);
    w.key(kDevice);
    w.value_int(device);
    w.key(kContext);
    w.value_uint(s.context);
    w.end_object();
  }
  DeviceEvent e;
  e.kind = DeviceEventKind::kSync;
  e.start_ns = s.start_ns;
  e.end_ns = s.end_ns;
  e.device = static_cast<std::int32_t>(device);
  e.stream = stream;
  e.correlation = s.correlation;
  push(e, batch_.add_text(kind), scratch_);
}

void CuptiRecordConverter::add_overhead(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityOverhead3>(record);
  DeviceEvent e;
  e.kind = DeviceEventKind::kOverhead;
  e.start_ns = to_ns(r.start);
  e.end_ns = to_ns(r.end);
  clamp(e.start_ns, &e.end_ns);
  switch (r.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_THREAD: e.thread = r.objectId.pt.threadId; break;
    case CUPTI_ACTIVITY_OBJECT_DEVICE:
    case CUPTI_ACTIVITY_OBJECT_CONTEXT:
    case CUPTI_ACTIVITY_OBJECT_STREAM: e.device = static_cast<std::int32_t>(r.objectId.dcs.deviceId); break;
    default: break;
  }
  e.correlation = r.correlationId;
  // Kineto writes no args for overhead events.
  push(e, batch_.add_text(overhead_kind_name(static_cast<std::uint32_t>(r.overheadKind))), {});
}

void CuptiRecordConverter::add_device(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityDevice5>(record);
  CuptiDevice d;
  d.id = r.id;
  d.name = r.name == nullptr ? std::string() : std::string(r.name);
  d.global_memory_bytes = r.globalMemorySize;
  d.compute_major = r.computeCapabilityMajor;
  d.compute_minor = r.computeCapabilityMinor;
  d.max_threads_per_block = r.maxThreadsPerBlock;
  d.max_threads_per_sm = r.maxWarpsPerMultiprocessor * r.numThreadsPerWarp;
  d.regs_per_block = r.maxRegistersPerBlock;
  d.regs_per_sm = r.maxRegistersPerMultiprocessor;
  d.warp_size = r.numThreadsPerWarp;
  d.smem_per_block = r.maxSharedMemoryPerBlock;
  d.smem_per_sm = r.maxSharedMemoryPerMultiprocessor;
  d.num_sms = r.numMultiprocessors;
  // The DEVICE record has neither the opt-in per-block shared memory limit
  // nor the driver's per-block reservation (cudaDeviceProp has both). From
  // compute capability 8.0 on the driver reserves 1 KiB per block and a
  // block may opt in to the rest of the SM (A100: 164 KiB of 165, H100:
  // 227 of 228); before that nothing is reserved and the opt-in limit is
  // the SM's shared memory (V100: 96 KiB, T4: 64 KiB).
  d.smem_reserved_per_block = d.compute_major >= 8 ? 1024 : 0;
  d.smem_per_block_optin = d.smem_per_sm > d.smem_reserved_per_block ? d.smem_per_sm - d.smem_reserved_per_block : 0;
  devices_[d.id] = std::move(d);
}

void CuptiRecordConverter::add_context(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityContext3>(record);
  context_device_[r.contextId] = r.deviceId;
}

namespace {

std::int64_t to_bytes(std::uint64_t b) {
  return static_cast<std::int64_t>(std::min<std::uint64_t>(b, std::numeric_limits<std::int64_t>::max()));
}

// torch's "Device Type" and "Device Id" of memory of CUPTI's `memory_kind`
// on CUPTI's device `device_id`; false for memory that is not counted.
// Device memory (cudaMalloc, cudaMallocAsync, arrays) and managed memory
// (cudaMallocManaged: the program's device memory, wherever its pages are
// at the moment) are the device's (1: CUDA). Pinned host memory
// (cudaMallocHost, cudaHostAlloc) is host RAM, and torch calls a pinned
// tensor a CPU tensor: CPU (0, -1), as torch writes CPU memory. Left out:
// pageable memory (malloc's, never a CUDA allocation) and the static
// memory of loaded modules (__device__ variables: no call made it, none
// frees it, and torch's records never count it).
bool memory_location(std::uint32_t memory_kind, std::uint32_t device_id, std::int16_t* type, std::int16_t* id) {
  switch (memory_kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      // CUPTI_UNIFIED_MEMORY_CPU_DEVICE_ID and other values no device has.
      if (device_id > static_cast<std::uint32_t>(std::numeric_limits<std::int16_t>::max())) return false;
      *type = 1;
      *id = static_cast<std::int16_t>(device_id);
      return true;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      *type = 0;
      *id = -1;
      return true;
    default:
      return false;
  }
}

}  // namespace

void CuptiRecordConverter::add_memory(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityMemory4>(record);
  DeviceMemoryEvent m;
  if (!memory_location(static_cast<std::uint32_t>(r.memoryKind), r.deviceId, &m.device_type, &m.device_id)) {
    ++ignored_;
    return;
  }
  switch (r.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION:
      m.bytes = to_bytes(r.bytes);
      if (m.bytes != 0) live_bytes_[r.address] = r.bytes;
      break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: {
      // A release gives the size it frees; should one give none, the
      // allocation's record (when this batch has it) does.
      std::uint64_t size = r.bytes;
      if (const auto it = live_bytes_.find(r.address); it != live_bytes_.end()) {
        if (size == 0) size = it->second;
        live_bytes_.erase(it);
      }
      m.bytes = -to_bytes(size);
      break;
    }
    default:
      ++ignored_;
      return;
  }
  // Nothing allocated or freed (a release of unknown size): no record to
  // write, the totals could not move.
  if (m.bytes == 0) {
    ++ignored_;
    return;
  }
  m.ts_ns = to_ns(r.timestamp);
  m.addr = r.address;
  m.correlation = r.correlationId;
  // From a pool of this process (cudaMallocAsync): its reservation now. An
  // imported pool's size is another process's (the union holds its pid).
  if (r.memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL && r.memoryPoolConfig.address != 0) {
    m.pool = r.memoryPoolConfig.address;
    m.pool_bytes = to_bytes(std::max(r.memoryPoolConfig.pool.size, r.memoryPoolConfig.utilizedSize));
  }
  memory_.push_back(m);
}

void CuptiRecordConverter::add_memory_pool(const CUpti_Activity* record) {
  const auto r = read_record<CUpti_ActivityMemoryPool3>(record);
  DeviceMemoryEvent m;
  // Only the sizes of this process's pools are given (LOCAL).
  if (r.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL || r.address == 0 ||
      !memory_location(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, r.deviceId, &m.device_type, &m.device_id)) {
    ++ignored_;
    return;
  }
  switch (r.memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
      m.pool_bytes = to_bytes(std::max(r.size, r.utilizedSize));
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
      // cudaMemPoolTrimTo keeps minBytesToKeep, and never what is in use;
      // the builder never lets a trim grow the pool.
      m.pool_bytes = to_bytes(std::max<std::uint64_t>(r.minBytesToKeep, r.utilizedSize));
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
      m.pool_bytes = 0;
      break;
    default:
      ++ignored_;
      return;
  }
  m.ts_ns = to_ns(r.timestamp);
  m.addr = r.address;
  m.pool = r.address;
  m.correlation = r.correlationId;
  memory_.push_back(m);
}

void CuptiRecordConverter::finish(DeviceBatch* out) {
  // Kernels and syncs now that every DEVICE and CONTEXT record is in. Each
  // distinct kernel name is demangled and stored once.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> kernel_text(kernel_names_.size(), {0, 0});
  std::vector<bool> have_text(kernel_names_.size(), false);
  for (const PendingKernel& k : kernels_) {
    if (!have_text[k.name_id]) {
      kernel_text[k.name_id] = batch_.add_text(demangle_kernel_name(kernel_names_[k.name_id].c_str()));
      have_text[k.name_id] = true;
    }
    emit_kernel(k, kernel_text[k.name_id]);
  }
  for (const PendingSync& s : syncs_) emit_sync(s);

  // Memory records carry no thread: the API record of the call that made
  // each (same correlation id) has it. Those calls are in this batch: both
  // records are written during the call. Without one (the call was not
  // recorded) the thread stays unknown (0).
  if (!memory_.empty()) {
    std::unordered_map<std::uint64_t, std::int64_t> threads = std::move(dropped_call_threads_);
    for (const DeviceEvent& e : batch_.events) {
      if ((e.kind == DeviceEventKind::kRuntime || e.kind == DeviceEventKind::kDriver) && e.correlation != 0) {
        threads.emplace(e.correlation, e.thread);
      }
    }
    for (DeviceMemoryEvent& m : memory_) {
      if (m.correlation == 0) continue;
      if (const auto it = threads.find(m.correlation); it != threads.end()) m.thread = it->second;
    }
    out->memory.insert(out->memory.end(), memory_.begin(), memory_.end());
  }

  // Append to *out, moving the offsets past what it already holds.
  const auto base = static_cast<std::uint32_t>(out->text.size());
  out->text.append(batch_.text);
  out->events.reserve(out->events.size() + batch_.events.size());
  for (DeviceEvent e : batch_.events) {
    e.name_offset += base;
    e.args_offset += base;
    out->events.push_back(e);
  }

  // One "deviceProperties" element per device, in Kineto's key order (the
  // keys cudaDeviceProp gives it, filled from the DEVICE record).
  for (const auto& [id, d] : devices_) {
    std::string json;
    JsonWriter w(&json);
    w.begin_object();
    w.key(kineto::kPropId);
    w.value_uint(d.id);
    w.key(kineto::kPropName);
    w.value_string(d.name);
    w.key(kineto::kPropTotalGlobalMem);
    w.value_uint(d.global_memory_bytes);
    w.key(kineto::kPropComputeMajor);
    w.value_uint(d.compute_major);
    w.key(kineto::kPropComputeMinor);
    w.value_uint(d.compute_minor);
    w.key(kineto::kPropMaxThreadsPerBlock);
    w.value_uint(d.max_threads_per_block);
    w.key(kineto::kPropMaxThreadsPerMultiprocessor);
    w.value_uint(d.max_threads_per_sm);
    w.key(kineto::kPropRegsPerBlock);
    w.value_uint(d.regs_per_block);
    w.key(kineto::kPropWarpSize);
    w.value_uint(d.warp_size);
    w.key(kineto::kPropSharedMemPerBlock);
    w.value_uint(d.smem_per_block);
    w.key(kineto::kPropNumSms);
    w.value_uint(d.num_sms);
    w.key(kineto::kPropRegsPerMultiprocessor);
    w.value_uint(d.regs_per_sm);
    w.key(kineto::kPropSharedMemPerBlockOptin);
    w.value_uint(d.smem_per_block_optin);
    w.key(kineto::kPropSharedMemPerMultiprocessor);
    w.value_uint(d.smem_per_sm);
    w.end_object();
    w.flush();
    out->device_properties.push_back(std::move(json));
  }

  batch_ = DeviceBatch();
  kernels_.clear();
  syncs_.clear();
  memory_.clear();
  dropped_call_threads_.clear();
  live_bytes_.clear();
  kernel_names_.clear();
  kernel_name_ids_.clear();
  api_names_.clear();
  ignored_ = 0;
  clamped_ = 0;
  filtered_api_ = 0;
}

}  // namespace tprof::internal
