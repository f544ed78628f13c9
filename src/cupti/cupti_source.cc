#include "src/cupti/cupti_source.h"

#include <cupti.h>
#include <dlfcn.h>
#include <generated_nvtx_meta.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "src/cupti/activity_switches.h"
#include "src/cupti/cupti_convert.h"

namespace tprof::internal {
namespace {

// Kineto's trace id: 128 random bits as 32 upper-case hex digits.
std::string random_trace_id() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string id;
  for (int i = 0; i < 4; ++i) {
    std::uint32_t w = rd();
    for (int k = 0; k < 8; ++k, w >>= 4) id += kHex[w & 0xF];
  }
  return id;
}

// The version a CUDA library already in the process reports (cuDriverGetVersion,
// cudaRuntimeGetVersion), found among the process's global symbols, else in
// one of `libraries` if it is loaded (never loading it: a program that links no
// runtime, or links it statically, has none to report); 0 when unknown.
int cuda_version(std::initializer_list<const char*> libraries, const char* symbol) {
  using Fn = int (*)(int*);
  void* f = dlsym(RTLD_DEFAULT, symbol);
  void* handle = nullptr;
  // A library loaded RTLD_LOCAL (PyTorch's cudart, under Python) is not in
  // the global scope: ask it by its soname.
  for (auto it = libraries.begin(); f == nullptr && it != libraries.end(); ++it) {
    handle = dlopen(*it, RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) f = dlsym(handle, symbol);
    if (f == nullptr && handle != nullptr) {
      dlclose(handle);
      handle = nullptr;
    }
  }
  int v = 0;
  if (f == nullptr || reinterpret_cast<Fn>(f)(&v) != 0) v = 0;
  if (handle != nullptr) dlclose(handle);
  return v;
}

// ---- libcupti, loaded at run time ---------------------------------------------------
//
// Linking libcupti (or libcuda) would make every tprof binary fail to start
// on a machine without the CUDA toolkit or driver; through dlopen such a
// machine gets a CPU-only trace and a diagnostic instead.

struct CuptiApi {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_num_dropped_records = nullptr;
  // Optional (CUPTI 12.5+): the per-call switches of the runtime and driver
  // kinds. Without them the calls torch leaves out are dropped afterwards.
  decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_api = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;
  // Optional: CUDA graph nodes (RESOURCE callbacks). Without them replayed
  // work keeps its graph ids but is attributed to no capture-time scope.
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetGraphNodeId) get_graph_node_id = nullptr;
};

template <class F>
bool resolve(void* handle, const char* name, F* out, std::string* missing) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    if (!missing->empty()) missing->append(", ");
    missing->append(name);
    return false;
  }
  *out = reinterpret_cast<F>(sym);
  return true;
}

// Filled once and never unloaded: CUPTI keeps threads and callbacks that
// point into the library for the life of the process.
CuptiApi g_api_storage;
std::atomic<const CuptiApi*> g_api{nullptr};
std::mutex g_load_mutex;

Result<const CuptiApi*> load_cupti() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (const CuptiApi* api = g_api.load(std::memory_order_acquire)) return api;

  // A library named in the environment is the only candidate: falling back
  // to another CUPTI would hide the user's mistake.
  std::vector<std::string> candidates;
  const char* env = std::getenv("TPROF_CUPTI_LIBRARY");
  if (env != nullptr && env[0] != '\0') {
    candidates.emplace_back(env);
  } else {
    if (TPROF_CUPTI_DEFAULT_LIBRARY[0] != '\0') candidates.emplace_back(TPROF_CUPTI_DEFAULT_LIBRARY);
    candidates.emplace_back("libcupti.so.13");
    candidates.emplace_back("libcupti.so");
  }
  void* handle = nullptr;
  std::string why;
  for (const std::string& path : candidates) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* err = dlerror();
    if (!why.empty()) why.append("; ");
    why.append(err != nullptr ? err : path.c_str());
  }
  if (handle == nullptr) {
    return Error(ErrorCode::kUnsupported, "CUDA activity unavailable: libcupti could not be loaded (" + why + ")");
  }

  CuptiApi api;
  std::string missing;
  resolve(handle, "cuptiGetVersion", &api.get_version, &missing);
  resolve(handle, "cuptiGetResultString", &api.get_result_string, &missing);
  resolve(handle, "cuptiSubscribe", &api.subscribe, &missing);
  resolve(handle, "cuptiUnsubscribe", &api.unsubscribe, &missing);
  resolve(handle, "cuptiEnableDomain", &api.enable_domain, &missing);
  resolve(handle, "cuptiSetThreadIdType", &api.set_thread_id_type, &missing);
  resolve(handle, "cuptiActivityRegisterTimestampCallback", &api.register_timestamp_callback, &missing);
  resolve(handle, "cuptiActivityRegisterCallbacks", &api.register_callbacks, &missing);
  resolve(handle, "cuptiActivityEnable", &api.enable, &missing);
  resolve(handle, "cuptiActivityDisable", &api.disable, &missing);
  resolve(handle, "cuptiActivityFlushAll", &api.flush_all, &missing);
  resolve(handle, "cuptiActivityGetNextRecord", &api.get_next_record, &missing);
  resolve(handle, "cuptiActivityGetNumDroppedRecords", &api.get_num_dropped_records, &missing);
  api.enable_runtime_api =
      reinterpret_cast<decltype(api.enable_runtime_api)>(dlsym(handle, "cuptiActivityEnableRuntimeApi"));
  api.enable_driver_api =
      reinterpret_cast<decltype(api.enable_driver_api)>(dlsym(handle, "cuptiActivityEnableDriverApi"));
  api.enable_callback = reinterpret_cast<decltype(api.enable_callback)>(dlsym(handle, "cuptiEnableCallback"));
  api.get_graph_node_id = reinterpret_cast<decltype(api.get_graph_node_id)>(dlsym(handle, "cuptiGetGraphNodeId"));
  if (!missing.empty()) {
    // Nothing of it was used: unloading is safe here.
    dlclose(handle);
    return Error(ErrorCode::kUnsupported,
                 "CUDA activity unavailable: the loaded libcupti lacks " + missing + " (CUPTI older than 12.x?)");
  }
  g_api_storage = api;
  g_api.store(&g_api_storage, std::memory_order_release);
  return &g_api_storage;
}

// ---- what start() and stop() say when CUPTI refuses ---------------------------------

std::string result_text(const CuptiApi& api, CUptiResult r) {
  const char* s = nullptr;
  if (api.get_result_string(r, &s) != CUPTI_SUCCESS || s == nullptr) return "CUPTI error " + std::to_string(r);
  return s;
}

// CUPTI answers a missing driver with CUPTI_ERROR_UNKNOWN from its first
// call; the reason a person needs is that libcuda.so.1 is not there. Empty
// when the driver loads.
std::string missing_driver() {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    return {};
  }
  const char* err = dlerror();
  return "no CUDA driver: libcuda.so.1 could not be loaded (" + std::string(err != nullptr ? err : "") + ")";
}

Error cupti_error(const CuptiApi& api, const char* call, CUptiResult r) {
  std::string why;
  if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED) why = missing_driver();
  if (!why.empty()) return Error(ErrorCode::kUnsupported, "CUDA activity unavailable: " + why);
  switch (r) {
    case CUPTI_ERROR_NOT_INITIALIZED:
      why = "the CUDA driver could not be initialized (no libcuda.so.1 or no usable GPU)";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      why = "insufficient privileges for GPU profiling (NVreg_RestrictProfilingToAdminUsers)";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      why = "another profiler already holds CUPTI";
      break;
    default:
      why = std::string(call) + " failed";
      break;
  }
  return Error(ErrorCode::kUnsupported,
               "CUDA activity unavailable: " + why + " (" + call + ": " + result_text(api, r) + ")");
}

// The kinds and per-call switches a window sets (src/cupti/activity_switches.h).
ActivitySwitches switches_of(const CuptiApi& api) {
  ActivitySwitches s;
  s.enable = api.enable;
  s.disable = api.disable;
  s.enable_runtime_api = api.enable_runtime_api;
  s.enable_driver_api = api.enable_driver_api;
  s.result_string = api.get_result_string;
  return s;
}

// ---- callbacks ------------------------------------------------------------------------
//
// CUPTI has one set of activity callbacks per process, plain C functions:
// they reach the one live source through g_live. g_feed_mutex orders a
// buffer's records against stop() (which clears g_live and finishes the
// converter): a buffer completed after that is freed unread.

class CuptiSource;
std::mutex g_feed_mutex;
CuptiSource* g_live = nullptr;  // guarded by g_feed_mutex
// Buffer policy of the live source, read by buffer_requested without a lock.
std::atomic<std::size_t> g_buffer_bytes{0};  // 0: no live source
std::atomic<std::size_t> g_max_buffers{0};
std::atomic<std::size_t> g_outstanding{0};      // handed to CUPTI, not yet completed
std::atomic<std::uint64_t> g_refused_requests{0};

std::uint64_t CUPTIAPI monotonic_ns() noexcept {
  // The recorder calibrates its ticks against CLOCK_MONOTONIC: device
  // timestamps on that clock need no conversion.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) noexcept {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // fill the buffer
  const std::size_t bytes = g_buffer_bytes.load(std::memory_order_acquire);
  if (bytes == 0) return;
  // Bounded: past max_buffers CUPTI gets no buffer and drops (and counts)
  // records rather than tprof growing without limit.
  const std::size_t max = g_max_buffers.load(std::memory_order_relaxed);
  std::size_t n = g_outstanding.load(std::memory_order_relaxed);
  do {
    if (n >= max) {
      g_refused_requests.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  } while (!g_outstanding.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  // CUPTI requires 8-byte alignment; bytes is a multiple of 8.
  void* p = std::aligned_alloc(8, bytes);
  if (p == nullptr) {
    g_outstanding.fetch_sub(1, std::memory_order_relaxed);
    g_refused_requests.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  *buffer = static_cast<std::uint8_t*>(p);
  *size = bytes;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t size,
                               std::size_t valid_bytes) noexcept;

// NVTX text as a range name: ASCII as is; wide strings keep their ASCII
// characters ('?' for others), which is what trace names need.
constexpr std::string_view kUnnamedRange = "nvtx range";

std::string_view wide_to_ascii(const wchar_t* s, char* buf, std::size_t cap) noexcept {
  if (s == nullptr) return kUnnamedRange;
  std::size_t n = 0;
  for (; s[n] != L'\0' && n < cap; ++n) {
    const auto c = static_cast<std::uint32_t>(s[n]);
    buf[n] = c < 0x80 ? static_cast<char>(c) : '?';
  }
  return std::string_view(buf, n);
}

std::string_view attribute_message(const nvtxEventAttributes_t* a, char* buf, std::size_t cap) noexcept {
  if (a == nullptr) return kUnnamedRange;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii != nullptr ? a->message.ascii : kUnnamedRange;
    case NVTX_MESSAGE_TYPE_UNICODE: return wide_to_ascii(a->message.unicode, buf, cap);
    // A registered string handle: its text went by in an
    // nvtxDomainRegisterString call tprof does not track.
    default: return kUnnamedRange;
  }
}

void on_nvtx(const NvtxRanges& ranges, CUpti_CallbackId cbid, const CUpti_NvtxData* data) noexcept {
  const void* params = data->functionParams;
  // CUPTI calls back once per NVTX call, with its arguments and result.
  // Pops need no arguments: every other call handled here does.
  if (params == nullptr && cbid != CUPTI_CBID_NVTX_nvtxRangePop && cbid != CUPTI_CBID_NVTX_nvtxDomainRangePop) return;
  char buf[256];
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* m = static_cast<const nvtxRangePushA_params*>(params)->message;
      ranges.push(m != nullptr ? std::string_view(m) : kUnnamedRange);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      ranges.push(wide_to_ascii(static_cast<const nvtxRangePushW_params*>(params)->message, buf, sizeof buf));
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      ranges.push(attribute_message(static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib, buf, sizeof buf));
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
      ranges.push(attribute_message(static_cast<const nvtxDomainRangePushEx_params*>(params)->core.eventAttrib, buf,
                                    sizeof buf));
      break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      ranges.pop();
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
    case CUPTI_CBID_NVTX_nvtxRangeStartW:
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
      // The id the call returned is what nvtxRangeEnd will pass.
      if (data->functionReturnValue == nullptr) return;
      nvtxRangeId_t id;
      std::memcpy(&id, data->functionReturnValue, sizeof id);
      std::string_view name;
      if (cbid == CUPTI_CBID_NVTX_nvtxRangeStartA) {
        const char* m = static_cast<const nvtxRangeStartA_params*>(params)->message;
        name = m != nullptr ? std::string_view(m) : kUnnamedRange;
      } else if (cbid == CUPTI_CBID_NVTX_nvtxRangeStartW) {
        name = wide_to_ascii(static_cast<const nvtxRangeStartW_params*>(params)->message, buf, sizeof buf);
      } else if (cbid == CUPTI_CBID_NVTX_nvtxRangeStartEx) {
        name = attribute_message(static_cast<const nvtxRangeStartEx_params*>(params)->eventAttrib, buf, sizeof buf);
      } else {
        name = attribute_message(static_cast<const nvtxDomainRangeStartEx_params*>(params)->core.eventAttrib, buf,
                                 sizeof buf);
      }
      ranges.start(id, name);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
      ranges.end(static_cast<const nvtxRangeEnd_params*>(params)->id);
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
      ranges.end(static_cast<const nvtxDomainRangeEnd_params*>(params)->core.id);
      break;
    default:
      break;
  }
}

void on_graph_node(const GraphNodes& nodes, CUpti_CallbackId cbid, const CUpti_ResourceData* data,
                   std::uint64_t (*node_id)(const void* node) noexcept) noexcept {
  if (cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  const auto* graph = static_cast<const CUpti_GraphData*>(data->resourceDescriptor);
  if (graph == nullptr) return;
  const std::uint64_t node = node_id(graph->node);
  if (node == 0) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    nodes.created(node);
    return;
  }
  const std::uint64_t original = node_id(graph->originalNode);
  if (original != 0) nodes.cloned(node, original);
}

// CUPTI's id of a graph node; 0 when it has none to give.
std::uint64_t cupti_node_id(const void* node) noexcept {
  const CuptiApi* api = g_api.load(std::memory_order_acquire);
  std::uint64_t id = 0;
  if (node == nullptr || api == nullptr || api->get_graph_node_id == nullptr ||
      api->get_graph_node_id(static_cast<CUgraphNode>(const_cast<void*>(node)), &id) != CUPTI_SUCCESS) {
    return 0;
  }
  return id;
}

// What the callbacks report to: CuptiOptions' hooks, each null when not asked for.
struct CallbackHooks {
  const NvtxRanges* nvtx = nullptr;
  const GraphNodes* graph_nodes = nullptr;
};

// userdata: the source's CallbackHooks. A domain is enabled only when its
// hook is set.
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* cbdata) noexcept {
  if (cbdata == nullptr || userdata == nullptr) return;
  const auto& hooks = *static_cast<const CallbackHooks*>(userdata);
  if (domain == CUPTI_CB_DOMAIN_NVTX && hooks.nvtx != nullptr) {
    on_nvtx(*hooks.nvtx, cbid, static_cast<const CUpti_NvtxData*>(cbdata));
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && hooks.graph_nodes != nullptr) {
    on_graph_node(*hooks.graph_nodes, cbid, static_cast<const CUpti_ResourceData*>(cbdata), cupti_node_id);
  }
}

// The RESOURCE callbacks that report graph nodes.
constexpr CUpti_CallbackIdResource kGraphNodeCallbacks[] = {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                                                             CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED};

// The driver calls the source makes itself, from the libcuda.so.1 the
// process already loaded (RTLD_NOLOAD: a process that never loaded it ran
// nothing, and tprof does not load it). The exported names of the
// versioned entry points (cuda.h maps the plain names to these with
// macros). Any function may be null; ok() says the handle was found.
class LoadedDriver {
 public:
  LoadedDriver() : handle_(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    if (handle_ == nullptr) return;
    bind(get_count, "cuDeviceGetCount");
    bind(get, "cuDeviceGet");
    bind(get_name, "cuDeviceGetName");
    bind(total_mem, "cuDeviceTotalMem_v2");
    bind(attribute, "cuDeviceGetAttribute");
    bind(get_state, "cuDevicePrimaryCtxGetState");
    bind(retain, "cuDevicePrimaryCtxRetain");
    bind(release, "cuDevicePrimaryCtxRelease_v2");
    bind(get_current, "cuCtxGetCurrent");
    bind(push, "cuCtxPushCurrent_v2");
    bind(pop, "cuCtxPopCurrent_v2");
    bind(sync, "cuCtxSynchronize");
  }
  ~LoadedDriver() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  LoadedDriver(const LoadedDriver&) = delete;
  LoadedDriver& operator=(const LoadedDriver&) = delete;
  bool ok() const { return handle_ != nullptr; }

  CUresult (*get_count)(int*) = nullptr;
  CUresult (*get)(CUdevice*, int) = nullptr;
  CUresult (*get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*total_mem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*get_state)(CUdevice, unsigned*, int*) = nullptr;
  CUresult (*retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*release)(CUdevice) = nullptr;
  CUresult (*get_current)(CUcontext*) = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*pop)(CUcontext*) = nullptr;
  CUresult (*sync)() = nullptr;

 private:
  template <class F>
  void bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle_, name));
  }
  void* handle_;
};

// Whether a CUDA context exists already (enable_activities): the calling
// thread has one current, or a device's primary context is active (what
// the runtime, PyTorch and cuBLAS use). The driver is asked with
// RTLD_NOLOAD; not loaded or not initialized, there is none. A context
// only another thread created with cuCtxCreate is not seen.
CudaContexts cuda_contexts() noexcept {
  const LoadedDriver drv;
  if (!drv.ok()) return CudaContexts::kNoneYet;
  CUcontext current = nullptr;
  if (drv.get_current != nullptr && drv.get_current(&current) == CUDA_SUCCESS && current != nullptr) {
    return CudaContexts::kExist;
  }
  int count = 0;
  if (drv.get_count == nullptr || drv.get == nullptr || drv.get_state == nullptr || drv.get_count(&count) != CUDA_SUCCESS) {
    return CudaContexts::kNoneYet;
  }
  for (int d = 0; d < count; ++d) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (drv.get(&dev, d) == CUDA_SUCCESS && drv.get_state(dev, &flags, &active) == CUDA_SUCCESS && active != 0) {
      return CudaContexts::kExist;
    }
  }
  return CudaContexts::kNoneYet;
}

// The devices as the driver describes them, in CuptiDevice's terms (what
// a DEVICE record would hold, plus the two shared-memory limits it lacks):
// deviceProperties and kernel occupancy for a window that opens once the
// contexts exist, when CUPTI writes no DEVICE record. Empty when the
// driver is not loaded or not initialized.
std::vector<CuptiDevice> driver_devices() noexcept {
  std::vector<CuptiDevice> out;
  const LoadedDriver drv;
  int count = 0;
  if (!drv.ok() || drv.get_count == nullptr || drv.get == nullptr || drv.get_name == nullptr ||
      drv.total_mem == nullptr || drv.attribute == nullptr || drv.get_count(&count) != CUDA_SUCCESS) {
    return out;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (drv.get(&dev, i) != CUDA_SUCCESS) continue;
    bool ok = true;
    const auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      if (drv.attribute(&v, a, dev) != CUDA_SUCCESS || v < 0) ok = false;
      return static_cast<std::uint32_t>(v);
    };
    CuptiDevice d;
    d.id = static_cast<std::uint32_t>(i);
    char name[256] = {};
    if (drv.get_name(name, static_cast<int>(sizeof name) - 1, dev) != CUDA_SUCCESS) ok = false;
    d.name = name;
    std::size_t bytes = 0;
    if (drv.total_mem(&bytes, dev) != CUDA_SUCCESS) ok = false;
    d.global_memory_bytes = bytes;
    d.compute_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    d.compute_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    d.max_threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    d.regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    d.regs_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    d.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    d.smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    d.smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    d.num_sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    d.smem_reserved_per_block = attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    d.smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    if (ok && d.warp_size > 0 && d.num_sms > 0) out.push_back(std::move(d));
  }
  return out;
}

// ---- the source ---------------------------------------------------------------------

class CuptiSource final : public ActivitySource {
 public:
  explicit CuptiSource(const CuptiOptions& options) : options_(options) {
    hooks_.nvtx = options_.nvtx;
    hooks_.graph_nodes = options_.graph_nodes;
    // 8-byte multiples (CUPTI's alignment), at least one record's worth.
    options_.buffer_bytes = (std::max<std::size_t>(options_.buffer_bytes, 4096) + 7) & ~std::size_t{7};
    options_.max_buffers = std::max<std::size_t>(options_.max_buffers, 1);
    // What CUPTI's per-call switches should already have left out is
    // dropped here too: where this libcupti lacks them, and should one not
    // take (records are read off the hot path, one table look-up each).
    converter_.keep_torch_api_calls_only(options_.api_calls == CuptiApiCalls::kTorch);
    converter_.expect_memory_records(options_.memory);
  }
  ~CuptiSource() override {
    if (started_) {
      DeviceBatch discarded;
      stop(&discarded);
    }
  }
  CuptiSource(const CuptiSource&) = delete;
  CuptiSource& operator=(const CuptiSource&) = delete;

  Status start() override;
  void stop(DeviceBatch* out) override;

  // Reads one completed buffer (g_feed_mutex held).
  void consume(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t valid_bytes) noexcept {
    if (options_.discard_records) return;
    CUpti_Activity* record = nullptr;
    while (api_->get_next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) converter_.add(record);
    std::size_t dropped = 0;
    if (api_->get_num_dropped_records(context, stream_id, &dropped) == CUPTI_SUCCESS) dropped_ += dropped;
  }

 private:
  // Reverses a partial start(): disables what was enabled, returns the
  // buffers and lets CUPTI go.
  void release();
  // Waits for queued device work; false when the driver has shut down.
  bool wait_for_device() noexcept;
  // The RESOURCE callbacks of graph nodes (options_.graph_nodes); a
  // failure is a problem of the window, not an error.
  void enable_graph_callbacks();
  void disable_graph_callbacks();

  CuptiOptions options_;
  CallbackHooks hooks_;  // the subscriber's userdata
  bool graph_callbacks_ = false;  // the graph node callbacks are on
  const CuptiApi* api_ = nullptr;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  EnabledActivities enabled_;
  std::vector<std::string> problems_;  // kinds and switches left out at start()
  bool live_ = false;                  // g_live points here
  bool started_ = false;
  // Fed under g_feed_mutex by buffer_completed; read by stop().
  CuptiRecordConverter converter_;
  std::uint64_t dropped_ = 0;
};

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t /*size*/,
                               std::size_t valid_bytes) noexcept {
  if (buffer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    if (g_live != nullptr) g_live->consume(context, stream_id, buffer, valid_bytes);
  }
  std::free(buffer);
  g_outstanding.fetch_sub(1, std::memory_order_relaxed);
}

Status CuptiSource::start() {
  if (started_) return {};
  TPROF_TRY_ASSIGN(api_, load_cupti());
  {
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    if (g_live != nullptr) {
      return Error(ErrorCode::kUnsupported,
                   "CUDA activity unavailable: another tprof CUPTI source is already recording in this process");
    }
  }
  problems_.clear();
  // Subscribing first: it is how CUPTI reports a profiler that got there
  // first (Nsight Systems, another Kineto), before anything else changes.
  CUptiResult r = api_->subscribe(&subscriber_, on_callback, &hooks_);
  if (r != CUPTI_SUCCESS) {
    subscriber_ = nullptr;
    return cupti_error(*api_, "cuptiSubscribe", r);
  }
  const auto fail = [&](const char* call, CUptiResult result) {
    release();
    return cupti_error(*api_, call, result);
  };
  if (options_.nvtx) {
    r = api_->enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_NVTX);
    if (r != CUPTI_SUCCESS) return fail("cuptiEnableDomain(NVTX)", r);
  }
  if (options_.graph_nodes) enable_graph_callbacks();
  // OS thread ids, as the recorder's lanes use.
  r = api_->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  if (r != CUPTI_SUCCESS) return fail("cuptiSetThreadIdType", r);
  r = api_->register_timestamp_callback(monotonic_ns);
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityRegisterTimestampCallback", r);

  // Live before the callbacks exist: enabling a kind may request and
  // complete buffers at once.
  g_buffer_bytes.store(0, std::memory_order_relaxed);
  g_max_buffers.store(options_.max_buffers, std::memory_order_relaxed);
  g_refused_requests.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    g_live = this;
    live_ = true;
  }
  g_buffer_bytes.store(options_.buffer_bytes, std::memory_order_release);
  r = api_->register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks", r);

  // The first kind failing means no tracing at all (it is where a missing
  // driver or missing privileges show); a later one that this CUPTI or
  // device does not support is left out and reported.
  // A window on a running program: CUPTI will not describe the devices,
  // the driver does (asked before any API kind is on: not recorded).
  const CudaContexts contexts = cuda_contexts();
  if (contexts == CudaContexts::kExist) {
    std::vector<CuptiDevice> devices = driver_devices();
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    for (const CuptiDevice& d : devices) converter_.add_device_info(d);
  }
  enable_activities(switches_of(*api_), options_, contexts, &enabled_);
  for (std::string& p : enabled_.problems) problems_.push_back(std::move(p));
  enabled_.problems.clear();
  if (enabled_.failed_call != nullptr) return fail(enabled_.failed_call, enabled_.failed_result);
  started_ = true;
  return {};
}

void CuptiSource::enable_graph_callbacks() {
  // Not fatal: without them, work replayed from a graph keeps its ids and
  // its launch, only not the scope it was captured in.
  const char* missing = api_->enable_callback == nullptr     ? "cuptiEnableCallback"
                        : api_->get_graph_node_id == nullptr ? "cuptiGetGraphNodeId"
                                                             : nullptr;
  if (missing != nullptr) {
    problems_.push_back(std::string("this libcupti lacks ") + missing +
                        ": work replayed from CUDA graphs is not attributed to the scope it was captured in");
    return;
  }
  for (const CUpti_CallbackIdResource cbid : kGraphNodeCallbacks) {
    const CUptiResult r = api_->enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid);
    if (r != CUPTI_SUCCESS) {
      problems_.push_back("cuptiEnableCallback(RESOURCE, " + std::to_string(cbid) + ") failed (" +
                          result_text(*api_, r) +
                          "): work replayed from CUDA graphs is not attributed to the scope it was captured in");
      disable_graph_callbacks();
      return;
    }
    graph_callbacks_ = true;
  }
}

void CuptiSource::disable_graph_callbacks() {
  if (!graph_callbacks_) return;
  for (const CUpti_CallbackIdResource cbid : kGraphNodeCallbacks) {
    api_->enable_callback(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid);
  }
  graph_callbacks_ = false;
}

void CuptiSource::release() {
  const bool any = !enabled_.kinds.empty() || enabled_.driver_calls_by_cbid;
  disable_activities(switches_of(*api_), &enabled_);
  if (any) {
    // Hands back every buffer CUPTI holds, partly filled ones included; the
    // completion callback reads them while this source is still live.
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  enabled_ = {};
  g_buffer_bytes.store(0, std::memory_order_release);
  if (live_) {
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    g_live = nullptr;
    live_ = false;
  }
  if (subscriber_ != nullptr) {
    if (options_.nvtx) api_->enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_NVTX);
    disable_graph_callbacks();
    api_->unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
}

bool CuptiSource::wait_for_device() noexcept {
  // Kernels still queued at stop() would otherwise be missing or cut off.
  // The thread ending the window need not hold a CUDA context (tprof
  // record's session thread holds none), so every device whose primary
  // context is active gets it made current here for a context synchronize.
  // The driver is asked with RTLD_NOLOAD (LoadedDriver).
  const LoadedDriver drv;
  if (!drv.ok()) return true;
  bool alive = true;
  int count = 0;
  if (drv.get_count != nullptr) {
    const CUresult r = drv.get_count(&count);
    // At process exit after the driver's own teardown: its contexts are
    // gone, and with them the work still queued.
    if (r == CUDA_ERROR_DEINITIALIZED) alive = false;
    if (r != CUDA_SUCCESS) count = 0;
  }
  if (drv.get == nullptr || drv.get_state == nullptr || drv.retain == nullptr || drv.release == nullptr ||
      drv.push == nullptr || drv.pop == nullptr || drv.sync == nullptr) {
    count = 0;
  }
  for (int d = 0; d < count; ++d) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (drv.get(&dev, d) != CUDA_SUCCESS || drv.get_state(dev, &flags, &active) != CUDA_SUCCESS || active == 0) {
      continue;
    }
    CUcontext ctx = nullptr;
    if (drv.retain(&ctx, dev) != CUDA_SUCCESS) continue;
    if (drv.push(ctx) == CUDA_SUCCESS) {
      drv.sync();
      CUcontext popped = nullptr;
      drv.pop(&popped);
    }
    drv.release(dev);
  }
  return alive;
}

void CuptiSource::stop(DeviceBatch* out) {
  if (!started_) return;
  // The calls tprof makes from here on (the device wait) are not the
  // program's: the API kinds go off first.
  disable_api_records(switches_of(*api_), &enabled_);
  if (wait_for_device()) {
    // The forced flush in release() happens after the kinds are disabled, so
    // that records produced while disabling are in it too.
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    release();
  } else {
    // The driver is gone (the process is exiting and its teardown ran
    // first). CUPTI hands back nothing when the contexts go (H200, CUDA
    // 13.0: no buffer at exit without a flush), but a forced flush still
    // works after its own teardown: what its buffers hold comes back now.
    // Nothing else is called; work still queued when the driver went is lost.
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    problems_.push_back("the CUDA driver had shut down when the window ended (process exit): device activity "
                        "still queued then is missing");
    enabled_ = {};
    subscriber_ = nullptr;
    graph_callbacks_ = false;
    g_buffer_bytes.store(0, std::memory_order_release);
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    g_live = nullptr;
    live_ = false;
  }
  started_ = false;

  std::uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(g_feed_mutex);
    converter_.finish(out);
    dropped = dropped_;
    dropped_ = 0;
  }
  out->dropped += dropped;
  // torch's keys, in torch's order: trace_id, cuda_driver_version,
  // cuda_runtime_version, cupti_version (issue 40 item 7). Asked after the
  // callbacks are gone, so the calls are not recorded.
  out->top_level.emplace_back("trace_id", "\"" + random_trace_id() + "\"");
  if (const int v = cuda_version({"libcuda.so.1"}, "cuDriverGetVersion"); v > 0) {
    out->top_level.emplace_back("cuda_driver_version", std::to_string(v));
  }
  if (const int v = cuda_version({"libcudart.so.13", "libcudart.so.12"}, "cudaRuntimeGetVersion"); v > 0) {
    out->top_level.emplace_back("cuda_runtime_version", std::to_string(v));
  }
  std::uint32_t version = 0;
  if (api_->get_version(&version) == CUPTI_SUCCESS) out->top_level.emplace_back("cupti_version", std::to_string(version));
  for (std::string& p : problems_) out->problems.push_back(std::move(p));
  problems_.clear();
  // Dropped records are counted in out->dropped: the trace builder reports them.
  const std::uint64_t refused = g_refused_requests.exchange(0, std::memory_order_relaxed);
  if (refused != 0 && dropped == 0) {
    out->problems.push_back("CUPTI asked for more than " + std::to_string(options_.max_buffers) +
                            " activity buffers at once (" + std::to_string(refused) +
                            " requests refused); some CUDA activity may be missing");
  }
}

}  // namespace

Status preload_cupti() {
  TPROF_TRY(load_cupti());
  return {};
}

std::unique_ptr<ActivitySource> make_cupti_source(const CuptiOptions& options) {
  return std::make_unique<CuptiSource>(options);
}

extern "C" ActivitySource* tprof_make_cuda_source(const CuptiOptions& options) {
  return make_cupti_source(options).release();
}

void report_nvtx(const NvtxRanges& ranges, std::uint32_t cbid, const void* data) noexcept {
  if (data != nullptr) on_nvtx(ranges, static_cast<CUpti_CallbackId>(cbid), static_cast<const CUpti_NvtxData*>(data));
}

void report_graph_node(const GraphNodes& nodes, std::uint32_t cbid, const void* data,
                       std::uint64_t (*node_id)(const void* node) noexcept) noexcept {
  if (data != nullptr) {
    on_graph_node(nodes, static_cast<CUpti_CallbackId>(cbid), static_cast<const CUpti_ResourceData*>(data), node_id);
  }
}

}  // namespace tprof::internal
