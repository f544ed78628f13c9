// libcudart.so.13, stand-in: the CUDA runtime API subset programs here use
// (cuda_runtime_api.h signatures), over the stand-in driver.
//
//   first call ── dlopen("libcuda.so.1") ── driver init (cuInit: the
//       injection runs here) ── cuDeviceGetCount (public: a DRIVER API call,
//       before the first runtime call's own enter callback) ──
//       atexit(teardown): registered AFTER cuInit, so it runs BEFORE every
//       exit handler the injection registered
//   each call ── one RUNTIME API call (its own correlation id, callbacks,
//       record on this thread) ── the driver's internal path (no DRIVER records)
//   kernel launch ── cuKernelGetName (public: a DRIVER API call that ends
//       before the launch's RUNTIME call starts, with the lower correlation id)
//       ── the launch's RUNTIME call
//
// Measured with real cudart 13 and CUPTI 13.0 on an H200: the first runtime
// call of a process is preceded, on its thread, by a cuDeviceGetCount
// (correlation 1, the runtime call 2), and with the DRIVER kind on the
// initialization makes about 117 traced driver calls (this stand-in makes
// that one); every cudaLaunchKernel is preceded by a cuKernelGetName
// (tprof's H100 fixture 4096_bf16_warm_eager.json: cuKernelGetName
// correlation 16, then cudaLaunchKernel 17).
//   teardown (at exit) ── the device finishes, the allocations are freed,
//       the streams destroyed, through the driver ── every later call:
//       cudaErrorCudartUnloading
//
// Kernels are named by standin_register_kernel (tests/standin/standin.h),
// as nvcc's __cudaRegisterFunction names them in a real program; that needs
// no driver and happens before main.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tests/standin/standin.h"
#include "tests/standin/standin_internal.h"

namespace standin {
namespace {

struct Kernel {
  std::string name;
  std::int64_t dur_ns = 0;
  CUfunction function = nullptr;  // once the driver is there
};

struct Runtime {
  std::once_flag init_once;
  cudaError_t init_error = cudaSuccess;
  const DriverInternal* driver = nullptr;
  // The public (traced) driver entry points the runtime calls.
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;
  std::atomic<bool> unloading{false};
  std::mutex mu;
  std::unordered_map<const void*, Kernel> kernels;
  std::unordered_set<void*> allocations;       // device memory, pooled too
  std::unordered_set<void*> host_allocations;  // pinned host memory
  std::vector<cudaStream_t> streams;
};

// Never destroyed: its own atexit teardown is what changes it at exit.
Runtime* const rt = new Runtime;

thread_local cudaError_t tl_last_error = cudaSuccess;

// The driver's result, as cudart reports it (the numbers match for what
// the stand-in driver returns).
cudaError_t to_runtime(CUresult r) noexcept {
  switch (r) {
    case CUDA_SUCCESS:
      return cudaSuccess;
    case CUDA_ERROR_DEINITIALIZED:
      return cudaErrorCudartUnloading;
    case CUDA_ERROR_NOT_INITIALIZED:
      return cudaErrorInitializationError;
    default:
      return static_cast<cudaError_t>(r);
  }
}

void teardown() {
  rt->unloading.store(true, std::memory_order_release);
  const DriverInternal* d = rt->driver;
  d->context_synchronize();
  std::vector<void*> allocations, host_allocations;
  std::vector<cudaStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(rt->mu);
    allocations.assign(rt->allocations.begin(), rt->allocations.end());
    host_allocations.assign(rt->host_allocations.begin(), rt->host_allocations.end());
    rt->allocations.clear();
    rt->host_allocations.clear();
    streams.swap(rt->streams);
  }
  for (void* p : allocations) d->release(p);
  for (void* p : host_allocations) d->release_host(p);
  for (cudaStream_t s : streams) d->stream_destroy(s);
}

cudaError_t init() noexcept {
  std::call_once(rt->init_once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    auto internal = h != nullptr ? reinterpret_cast<DriverInternalFn>(dlsym(h, kDriverInternalSymbol)) : nullptr;
    if (internal == nullptr) {
      rt->init_error = cudaErrorInsufficientDriver;
      return;
    }
    rt->driver = internal();
    rt->device_get_count = reinterpret_cast<decltype(rt->device_get_count)>(dlsym(h, "cuDeviceGetCount"));
    rt->kernel_get_name = reinterpret_cast<decltype(rt->kernel_get_name)>(dlsym(h, "cuKernelGetName"));
    if (const CUresult r = rt->driver->init(); r != CUDA_SUCCESS) {
      rt->init_error = to_runtime(r);
      return;
    }
    // The first traced call of the process: a tool subscribed to the
    // DRIVER domain sees it before the runtime call that caused it.
    int count = 0;
    if (rt->device_get_count != nullptr) static_cast<void>(rt->device_get_count(&count));
    std::atexit(teardown);
  });
  return rt->init_error;
}

const DriverInternal& driver() noexcept { return *rt->driver; }

// One runtime API call: initializes the runtime at the first, then opens
// the call (correlation id, enter callback) and closes it in finish().
class RuntimeCall {
 public:
  RuntimeCall(CUpti_CallbackId cbid, const char* name, const void* params, const char* symbol = nullptr) noexcept {
    if (rt->unloading.load(std::memory_order_acquire)) {
      status_ = cudaErrorCudartUnloading;
      return;
    }
    status_ = init();
    if (status_ != cudaSuccess) return;
    call_.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    call_.cbid = cbid;
    call_.name = name;
    call_.params = params;
    call_.return_value = &result_;
    call_.symbol = symbol;
    driver().api_begin(&call_);
    open_ = true;
  }
  RuntimeCall(const RuntimeCall&) = delete;
  RuntimeCall& operator=(const RuntimeCall&) = delete;
  ~RuntimeCall() {
    if (open_) finish(result_);
  }

  // Not open: the error the call returns without running.
  bool open() const noexcept { return open_; }
  cudaError_t refused() noexcept {
    tl_last_error = status_;
    return status_;
  }

  cudaError_t finish(cudaError_t e) noexcept {
    if (!open_) return e;
    if (e != cudaSuccess) tl_last_error = e;
    result_ = e;
    call_.result = static_cast<std::uint32_t>(e);
    driver().api_end(&call_);
    open_ = false;
    return e;
  }
  cudaError_t finish(CUresult r) noexcept { return finish(to_runtime(r)); }

 private:
  ApiCall call_;
  cudaError_t result_ = cudaSuccess;
  cudaError_t status_ = cudaSuccess;
  bool open_ = false;
};

CUfunction function_of(const void* host_fn, const char** name) noexcept {
  std::lock_guard<std::mutex> lock(rt->mu);
  auto it = rt->kernels.find(host_fn);
  if (it == rt->kernels.end()) return nullptr;
  *name = it->second.name.c_str();
  if (it->second.function == nullptr && rt->driver != nullptr) {
    it->second.function = rt->driver->function(it->second.name.c_str(), it->second.dur_ns);
  }
  return it->second.function;
}

// What cudart does before a kernel launch's own RUNTIME call opens: it
// asks the driver for the kernel's name, through the public (traced)
// cuKernelGetName. Nothing for a host function it does not know, or once
// it is unloading.
void before_launch(const void* host_fn) noexcept {
  if (rt->unloading.load(std::memory_order_acquire) || init() != cudaSuccess) return;
  const char* registered = nullptr;
  CUfunction f = function_of(host_fn, &registered);
  if (f == nullptr || rt->kernel_get_name == nullptr) return;
  const char* name = nullptr;
  static_cast<void>(rt->kernel_get_name(&name, reinterpret_cast<CUkernel>(f)));
}

const char* kernel_name(const void* host_fn) noexcept {
  std::lock_guard<std::mutex> lock(rt->mu);
  auto it = rt->kernels.find(host_fn);
  return it == rt->kernels.end() ? nullptr : it->second.name.c_str();
}

}  // namespace
}  // namespace standin

using standin::driver;
using standin::rt;
using standin::RuntimeCall;

extern "C" {

int standin_register_kernel(const void* host_fn, const char* mangled_name, std::int64_t dur_ns) {
  if (host_fn == nullptr || mangled_name == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(rt->mu);
  standin::Kernel& k = rt->kernels[host_fn];
  k.name = mangled_name;
  k.dur_ns = dur_ns;
  k.function = nullptr;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int* driverVersion) {
  cudaDriverGetVersion_v3020_params p{driverVersion};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020, "cudaDriverGetVersion", &p);
  if (!call.open()) return call.refused();
  if (driverVersion == nullptr) return call.finish(cudaErrorInvalidValue);
  *driverVersion = CUDA_VERSION;
  return call.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* runtimeVersion) {
  cudaRuntimeGetVersion_v3020_params p{runtimeVersion};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020, "cudaRuntimeGetVersion", &p);
  if (!call.open()) return call.refused();
  if (runtimeVersion == nullptr) return call.finish(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return call.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  cudaGetDeviceCount_v3020_params p{count};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020, "cudaGetDeviceCount", &p);
  if (!call.open()) return call.refused();
  if (count == nullptr) return call.finish(cudaErrorInvalidValue);
  *count = 1;
  return call.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  cudaGetDevice_v3020_params p{device};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice", &p);
  if (!call.open()) return call.refused();
  if (device == nullptr) return call.finish(cudaErrorInvalidValue);
  *device = 0;
  return call.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  cudaSetDevice_v3020_params p{device};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, "cudaSetDevice", &p);
  if (!call.open()) return call.refused();
  return call.finish(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, "cudaGetLastError", nullptr);
  if (!call.open()) return call.refused();
  const cudaError_t e = standin::tl_last_error;
  standin::tl_last_error = cudaSuccess;
  call.finish(cudaSuccess);
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020, "cudaPeekAtLastError", nullptr);
  if (!call.open()) return call.refused();
  const cudaError_t e = standin::tl_last_error;
  call.finish(cudaSuccess);
  return e;
}

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorCudartUnloading:
      return "driver shutting down";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    default:
      return "unknown error";
  }
}

cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  cudaMalloc_v3020_params p{devPtr, size};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().alloc(devPtr, size);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->allocations.insert(*devPtr);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  cudaFree_v3020_params p{devPtr};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree", &p);
  if (!call.open()) return call.refused();
  {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->allocations.erase(devPtr);
  }
  return call.finish(driver().release(devPtr));
}

cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  cudaMallocAsync_v11020_params p{devPtr, size, hStream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, "cudaMallocAsync", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().alloc_async(devPtr, size, hStream);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->allocations.insert(*devPtr);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  cudaFreeAsync_v11020_params p{devPtr, hStream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, "cudaFreeAsync", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().release_async(devPtr, hStream);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->allocations.erase(devPtr);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
  cudaMallocHost_v3020_params p{ptr, size};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, "cudaMallocHost", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().alloc_host(ptr, size);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->host_allocations.insert(*ptr);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  cudaFreeHost_v3020_params p{ptr};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, "cudaFreeHost", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().release_host(ptr);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->host_allocations.erase(ptr);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  cudaMemcpy_v3020_params p{dst, src, count, kind};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().copy(dst, src, count, kind, nullptr, true));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  cudaMemcpyAsync_v3020_params p{dst, src, count, kind, stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().copy(dst, src, count, kind, stream, false));
}

cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  cudaMemset_v3020_params p{devPtr, value, count};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().fill(devPtr, value, count, nullptr, true));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  cudaMemsetAsync_v3020_params p{devPtr, value, count, stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().fill(devPtr, value, count, stream, false));
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                       cudaStream_t stream) {
  standin::before_launch(func);
  cudaLaunchKernel_v7000_params p{func, gridDim, blockDim, args, sharedMem, stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", &p,
                   standin::kernel_name(func));
  if (!call.open()) return call.refused();
  const char* name = nullptr;
  CUfunction f = standin::function_of(func, &name);
  if (f == nullptr) return call.finish(cudaErrorInvalidDeviceFunction);
  const std::int32_t grid[3] = {static_cast<std::int32_t>(gridDim.x), static_cast<std::int32_t>(gridDim.y),
                                static_cast<std::int32_t>(gridDim.z)};
  const std::int32_t block[3] = {static_cast<std::int32_t>(blockDim.x), static_cast<std::int32_t>(blockDim.y),
                                 static_cast<std::int32_t>(blockDim.z)};
  return call.finish(driver().launch(f, grid, block, static_cast<std::uint32_t>(sharedMem), stream));
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize", nullptr);
  if (!call.open()) return call.refused();
  return call.finish(driver().context_synchronize());
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  cudaStreamSynchronize_v3020_params p{stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().stream_synchronize(stream));
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  cudaStreamCreate_v3020_params p{pStream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020, "cudaStreamCreate", &p);
  if (!call.open()) return call.refused();
  const CUresult r = driver().stream_create(pStream);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->streams.push_back(*pStream);
  }
  return call.finish(r);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  cudaStreamDestroy_v5050_params p{stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, "cudaStreamDestroy", &p);
  if (!call.open()) return call.refused();
  {
    std::lock_guard<std::mutex> lock(rt->mu);
    rt->streams.erase(std::remove(rt->streams.begin(), rt->streams.end(), stream), rt->streams.end());
  }
  return call.finish(driver().stream_destroy(stream));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  cudaEventCreate_v3020_params p{event};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020, "cudaEventCreate", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().event_create(event));
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaEventRecord_v3020_params p{event, stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cudaEventRecord", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().event_record(event, stream));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  cudaEventSynchronize_v3020_params p{event};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, "cudaEventSynchronize", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().event_synchronize(event));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  cudaEventDestroy_v3020_params p{event};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, "cudaEventDestroy", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().event_destroy(event));
}

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  cudaStreamBeginCapture_v10000_params p{stream, mode};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, "cudaStreamBeginCapture", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().begin_capture(stream));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  cudaStreamEndCapture_v10000_params p{stream, pGraph};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, "cudaStreamEndCapture", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().end_capture(stream, pGraph));
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  cudaGraphInstantiate_v12000_params p{pGraphExec, graph, flags};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, "cudaGraphInstantiate", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().graph_instantiate(pGraphExec, graph));
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  cudaGraphLaunch_v10000_params p{graphExec, stream};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().graph_launch(graphExec, stream));
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  cudaGraphDestroy_v10000_params p{graph};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000, "cudaGraphDestroy", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().graph_destroy(graph));
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  cudaGraphExecDestroy_v10000_params p{graphExec};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000, "cudaGraphExecDestroy", &p);
  if (!call.open()) return call.refused();
  return call.finish(driver().graph_exec_destroy(graphExec));
}

}  // extern "C"
