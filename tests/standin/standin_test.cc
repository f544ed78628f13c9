// The CUDA stand-in (tests/standin) behaves as real CUDA does where tprof
// depends on it: a minimal CUPTI subscriber, loaded with dlopen as tprof
// loads libcupti, checks threads, buffers, flushes, per-call switches,
// graphs, the driver's exit order and CUPTI at and after its teardown.
// Where real CUDA was measured (an H200, CUDA 13.0, driver 580), a test
// states what it did (tests/standin/README.md, "Checked against real CUDA").
//
// Every scenario runs in a fresh process (a "threadsafe" death test
// re-executes this binary): the stand-ins keep process-wide state, and
// process exit is what several scenarios are about. A scenario reports a
// failed REQUIRE on stderr and exits 90; one that passes exits 0.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <generated_nvtx_meta.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

#define REQUIRE(cond)                                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "REQUIRE failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::fflush(stderr);                                                              \
      _exit(90);                                                                        \
    }                                                                                   \
  } while (0)

std::uint32_t os_tid() { return static_cast<std::uint32_t>(syscall(SYS_gettid)); }

std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// ---- the libraries, loaded as a process meets them -------------------------------------

struct Libs {
  void* driver = nullptr;
  void* runtime = nullptr;
  void* cupti = nullptr;
};
Libs g_libs;

void* must_load(const char* path, int flags) {
  void* h = dlopen(path, flags);
  if (h == nullptr) std::fprintf(stderr, "dlopen: %s\n", dlerror());
  REQUIRE(h != nullptr);
  return h;
}

// The stand-ins, or (on a machine with a GPU) real CUDA:
// STANDIN_TEST_DRIVER=libcuda.so.1 STANDIN_TEST_RUNTIME=.../libcudart.so.13
// STANDIN_TEST_CUPTI=.../libcupti.so.13 run every scenario that needs no
// stand-in kernel against real CUDA; each failure is a place where the
// stand-in and CUDA differ.
const char* lib(const char* env, const char* standin) {
  const char* v = std::getenv(env);
  return v != nullptr && *v != '\0' ? v : standin;
}
const char* driver_lib() { return lib("STANDIN_TEST_DRIVER", STANDIN_DRIVER); }
const char* runtime_lib() { return lib("STANDIN_TEST_RUNTIME", STANDIN_RUNTIME); }
const char* cupti_lib() { return lib("STANDIN_TEST_CUPTI", STANDIN_CUPTI); }
bool real_cuda() { return std::getenv("STANDIN_TEST_DRIVER") != nullptr; }

// The driver and runtime as a program has them (global), CUPTI as tprof
// loads it (local).
void load_all() {
  g_libs.driver = must_load(driver_lib(), RTLD_NOW | RTLD_GLOBAL);
  g_libs.runtime = must_load(runtime_lib(), RTLD_NOW | RTLD_GLOBAL);
  g_libs.cupti = must_load(cupti_lib(), RTLD_NOW | RTLD_LOCAL);
}

template <class F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == nullptr) std::fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
  REQUIRE(p != nullptr);
  return reinterpret_cast<F>(p);
}
#define CUPTI(name) sym<decltype(&name)>(g_libs.cupti, #name)
#define RT(name) sym<decltype(&name)>(g_libs.runtime, #name)
#define DRV(name) sym<decltype(&name)>(g_libs.driver, #name)

#define CUPTI_OK(call) REQUIRE((call) == CUPTI_SUCCESS)
#define RT_OK(call) REQUIRE((call) == cudaSuccess)

// ---- a minimal subscriber ---------------------------------------------------------------

struct Callback {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  std::uint32_t tid;
  int site = -1;  // API domains: CUPTI_API_ENTER / EXIT
  std::uint32_t correlation = 0;
  std::string name;
  std::string text;                // NVTX: the message
  long long returned = 0;          // NVTX: the return value
  const void* handle = nullptr;    // RESOURCE graphs: node, NVTX: domain
  const void* original = nullptr;  // RESOURCE graphs: originalNode
  std::string last_api;            // RESOURCE: the API call open on this thread
};

struct Completion {
  std::uint32_t tid;
  std::size_t valid;
  std::size_t records;
};

struct Seen {
  std::mutex mu;
  std::vector<Callback> callbacks;
  std::vector<Completion> completions;
  std::vector<std::vector<std::uint8_t>> records;  // copies, in delivery order
};
Seen g_seen;

thread_local std::string tl_open_api;

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  Callback c{domain, cbid, os_tid()};
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    c.site = d->callbackSite;
    c.correlation = d->correlationId;
    c.name = d->functionName;
    if (d->callbackSite == CUPTI_API_ENTER) tl_open_api = d->functionName;
  } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
    const auto* d = static_cast<const CUpti_NvtxData*>(data);
    c.name = d->functionName;
    switch (cbid) {
      case CUPTI_CBID_NVTX_nvtxRangePushA:
        c.text = static_cast<const nvtxRangePushA_params*>(d->functionParams)->message;
        c.returned = *static_cast<const int*>(d->functionReturnValue);
        break;
      case CUPTI_CBID_NVTX_nvtxRangePop:
        c.returned = *static_cast<const int*>(d->functionReturnValue);
        break;
      case CUPTI_CBID_NVTX_nvtxRangeStartA:
        c.text = static_cast<const nvtxRangeStartA_params*>(d->functionParams)->message;
        c.returned = static_cast<long long>(*static_cast<const nvtxRangeId_t*>(d->functionReturnValue));
        break;
      case CUPTI_CBID_NVTX_nvtxRangeEnd:
        c.returned = static_cast<long long>(static_cast<const nvtxRangeEnd_params*>(d->functionParams)->id);
        break;
      case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
        const auto* p = static_cast<const nvtxDomainRangePushEx_params*>(d->functionParams);
        c.handle = p->domain;
        c.text = p->core.eventAttrib->message.ascii;
        c.returned = *static_cast<const int*>(d->functionReturnValue);
        break;
      }
      default:
        break;
    }
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* d = static_cast<const CUpti_ResourceData*>(data);
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
      const auto* g = static_cast<const CUpti_GraphData*>(d->resourceDescriptor);
      c.handle = g->node;
      c.original = g->originalNode;
    }
    c.last_api = tl_open_api;
  }
  std::lock_guard<std::mutex> lock(g_seen.mu);
  g_seen.callbacks.push_back(c);
}

std::size_t g_buffer_bytes = 64 * 1024;
std::atomic<bool> g_refuse{false};
decltype(&cuptiActivityGetNextRecord) g_next_record = nullptr;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *max_records = 0;
  if (g_refuse.load()) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, g_buffer_bytes));
  *size = g_buffer_bytes;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  std::vector<std::vector<std::uint8_t>> copies;
  CUpti_Activity* r = nullptr;
  while (g_next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    CUpti_ActivityKind kind;
    std::memcpy(&kind, r, sizeof kind);
    std::size_t size = 0;
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        size = sizeof(CUpti_ActivityKernel10);
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
        size = sizeof(CUpti_ActivityAPI);
        break;
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        size = sizeof(CUpti_ActivitySynchronization2);
        break;
      case CUPTI_ACTIVITY_KIND_DEVICE:
        size = sizeof(CUpti_ActivityDevice5);
        break;
      case CUPTI_ACTIVITY_KIND_CONTEXT:
        size = sizeof(CUpti_ActivityContext3);
        break;
      default:
        size = sizeof kind;
        break;
    }
    const auto* p = reinterpret_cast<const std::uint8_t*>(r);
    copies.emplace_back(p, p + size);
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_seen.mu);
  g_seen.completions.push_back(Completion{os_tid(), valid, copies.size()});
  for (auto& c : copies) g_seen.records.push_back(std::move(c));
}

CUpti_SubscriberHandle subscribe() {
  CUpti_SubscriberHandle s = nullptr;
  CUPTI_OK(CUPTI(cuptiSubscribe)(&s, on_callback, nullptr));
  return s;
}

void register_buffers() {
  g_next_record = CUPTI(cuptiActivityGetNextRecord);
  CUPTI_OK(CUPTI(cuptiSetThreadIdType)(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  CUPTI_OK(CUPTI(cuptiActivityRegisterCallbacks)(buffer_requested, buffer_completed));
}

template <class T>
std::vector<T> records_of(CUpti_ActivityKind kind) {
  std::vector<T> out;
  std::lock_guard<std::mutex> lock(g_seen.mu);
  for (const auto& bytes : g_seen.records) {
    CUpti_ActivityKind k;
    std::memcpy(&k, bytes.data(), sizeof k);
    if (k != kind) continue;
    T t;
    std::memcpy(&t, bytes.data(), sizeof t);
    out.push_back(t);
  }
  return out;
}

std::size_t api_records(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  std::size_t n = 0;
  for (const auto& r : records_of<CUpti_ActivityAPI>(kind)) n += r.cbid == cbid;
  return n;
}

void clear_seen() {
  std::lock_guard<std::mutex> lock(g_seen.mu);
  g_seen.callbacks.clear();
  g_seen.completions.clear();
  g_seen.records.clear();
}

// Runs a scenario in a fresh process: it must end with exit status 0.
#define RUN_SCENARIO(body)                        \
  GTEST_FLAG_SET(death_test_style, "threadsafe"); \
  EXPECT_EXIT({ body; }, ::testing::ExitedWithCode(0), "")

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The same in the test and in its scenario's process (a pid would not be),
// and its own for each test: ctest runs this binary's tests in parallel.
std::string temp_path(const char* tag) {
  return ::testing::TempDir() + "standin_test_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
         "_" + tag;
}

// ---- scenarios ----------------------------------------------------------------------------

void callbacks_on_the_calling_thread() {
  setenv("NVTX_INJECTION64_PATH", cupti_lib(), 1);
  load_all();
  CUpti_SubscriberHandle s = subscribe();
  CUPTI_OK(CUPTI(cuptiEnableDomain)(1, s, CUPTI_CB_DOMAIN_RUNTIME_API));
  CUPTI_OK(CUPTI(cuptiEnableDomain)(1, s, CUPTI_CB_DOMAIN_NVTX));
  CUPTI_OK(CUPTI(cuptiEnableCallback)(1, s, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount));
  int device = -1;
  RT_OK(RT(cudaGetDevice)(&device));
  int count = 0;
  REQUIRE(DRV(cuDeviceGetCount)(&count) == CUDA_SUCCESS && count == 1);
  CUdevice d = -1;
  REQUIRE(DRV(cuDeviceGet)(&d, 0) == CUDA_SUCCESS);  // its callback is off
  std::uint32_t other = 0;
  std::thread([&] {
    other = os_tid();
    int dev = -1;
    RT_OK(RT(cudaGetDevice)(&dev));
    REQUIRE(nvtxRangePushA("on another thread") == 0);
    REQUIRE(nvtxRangePop() == 0);
  }).join();
  REQUIRE(nvtxRangePushA("outer") == 0);
  REQUIRE(nvtxRangePushA("inner") == 1);
  REQUIRE(nvtxRangePop() == 1);
  REQUIRE(nvtxRangePop() == 0);
  const nvtxRangeId_t id = nvtxRangeStartA("measure");
  nvtxRangeEnd(id);
  nvtxDomainHandle_t dom = nvtxDomainCreateA("standin");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "in a domain";
  REQUIRE(nvtxDomainRangePushEx(dom, &a) == 0);
  REQUIRE(nvtxDomainRangePop(dom) == 0);

  const std::uint32_t me = os_tid();
  std::lock_guard<std::mutex> lock(g_seen.mu);
  const auto& cbs = g_seen.callbacks;
  // Enter and exit each: the runtime's initialization (its cuDeviceGetCount,
  // traced, before the first runtime call's enter: real cudart 13 on an
  // H200), cudaGetDevice here, this test's cuDeviceGetCount, cudaGetDevice
  // on the other thread. Correlation ids as measured there: 1 to 4.
  std::vector<Callback> api;
  for (const Callback& c : cbs) {
    if (c.domain == CUPTI_CB_DOMAIN_RUNTIME_API || c.domain == CUPTI_CB_DOMAIN_DRIVER_API) api.push_back(c);
  }
  if (real_cuda()) {
    for (const Callback& c : cbs) {
      std::fprintf(stderr, "seen: domain %d cbid %u %s site %d corr %u tid %s text '%s' returned %lld\n",
                   static_cast<int>(c.domain), c.cbid, c.name.c_str(), c.site, c.correlation,
                   c.tid == me ? "me" : c.tid == other ? "other" : "third", c.text.c_str(), c.returned);
    }
  }
  REQUIRE(api.size() == 8);
  const struct {
    CUpti_CallbackDomain domain;
    const char* name;
    std::uint32_t correlation;
    std::uint32_t tid;
  } want[4] = {{CUPTI_CB_DOMAIN_DRIVER_API, "cuDeviceGetCount", 1, me},
               {CUPTI_CB_DOMAIN_RUNTIME_API, "cudaGetDevice", 2, me},
               {CUPTI_CB_DOMAIN_DRIVER_API, "cuDeviceGetCount", 3, me},
               {CUPTI_CB_DOMAIN_RUNTIME_API, "cudaGetDevice", 4, other}};
  for (std::size_t i = 0; i < 4; ++i) {
    const Callback& enter = api[2 * i];
    const Callback& leave = api[2 * i + 1];
    REQUIRE(enter.domain == want[i].domain && enter.name == want[i].name && enter.site == CUPTI_API_ENTER);
    REQUIRE(leave.domain == want[i].domain && leave.name == want[i].name && leave.site == CUPTI_API_EXIT);
    REQUIRE(enter.correlation == want[i].correlation && leave.correlation == want[i].correlation);
    REQUIRE(enter.tid == want[i].tid && leave.tid == want[i].tid);
  }
  std::vector<Callback> nvtx;
  for (const Callback& c : cbs) {
    if (c.domain == CUPTI_CB_DOMAIN_NVTX && c.cbid != CUPTI_CBID_NVTX_nvtxDomainCreateA) nvtx.push_back(c);
  }
  REQUIRE(nvtx.size() == 10);
  REQUIRE(nvtx[0].tid == other && nvtx[0].text == "on another thread");
  REQUIRE(nvtx[2].tid == me && nvtx[2].name == "nvtxRangePushA" && nvtx[2].text == "outer" && nvtx[2].returned == 0);
  REQUIRE(nvtx[3].text == "inner" && nvtx[3].returned == 1);
  REQUIRE(nvtx[4].cbid == CUPTI_CBID_NVTX_nvtxRangePop && nvtx[4].returned == 1);
  REQUIRE(nvtx[5].returned == 0);
  REQUIRE(nvtx[6].cbid == CUPTI_CBID_NVTX_nvtxRangeStartA && nvtx[6].text == "measure" &&
          nvtx[6].returned == static_cast<long long>(id));
  REQUIRE(nvtx[7].cbid == CUPTI_CBID_NVTX_nvtxRangeEnd && nvtx[7].returned == static_cast<long long>(id));
  REQUIRE(nvtx[8].cbid == CUPTI_CBID_NVTX_nvtxDomainRangePushEx && nvtx[8].handle == dom &&
          nvtx[8].text == "in a domain" && nvtx[8].returned == 0);
  REQUIRE(nvtx[9].cbid == CUPTI_CBID_NVTX_nvtxDomainRangePop);
  _exit(0);
}

void full_buffers_and_a_forced_flush_on_cuptis_thread() {
  load_all();
  register_buffers();
  g_buffer_bytes = 25 * sizeof(CUpti_ActivityAPI);  // 25 records a buffer
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  int device = 0;
  for (int i = 0; i < 210; ++i) RT_OK(RT(cudaGetDevice)(&device));
  const std::uint32_t me = os_tid();
  // Full buffers come back on CUPTI's thread, without a flush.
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(g_seen.mu);
      if (g_seen.completions.size() >= 8) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(g_seen.mu);
    REQUIRE(g_seen.completions.size() == 8);  // 8 full: 200 records; 10 wait in a partial one
    for (const Completion& c : g_seen.completions) REQUIRE(c.tid != me && c.records == 25);
  }
  REQUIRE(api_records(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == 200);
  // A forced flush hands back the partial buffer on CUPTI's thread, not
  // this one, before it returns (real CUPTI 13.0 on an H200).
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  {
    std::lock_guard<std::mutex> lock(g_seen.mu);
    for (const Completion& c : g_seen.completions) {
      if (real_cuda()) {
        std::fprintf(stderr, "completion: tid %s records %zu\n",
                     c.tid == me                                  ? "me"
                     : c.tid == g_seen.completions.front().tid ? "other (the first's)"
                                                                  : "other (not the first's)",
                     c.records);
      }
    }
    REQUIRE(g_seen.completions.size() == 9);
    REQUIRE(g_seen.completions.back().tid != me && g_seen.completions.back().records == 10);
  }
  const auto api = records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  REQUIRE(api.size() == 210);
  for (const auto& r : api) REQUIRE(r.threadId == me && r.processId == static_cast<std::uint32_t>(getpid()));
  for (std::size_t i = 1; i < api.size(); ++i) REQUIRE(api[i].correlationId > api[i - 1].correlationId);
  _exit(0);
}

void device_work_waits_for_the_device() {
  load_all();
  register_buffers();
  auto reg = sym<int (*)(const void*, const char*, std::int64_t)>(g_libs.runtime, "standin_register_kernel");
  static int long_kernel;
  REQUIRE(reg(&long_kernel, "_Z11long_kernelv", 300000000) == 0);  // 300 ms
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  void* args[1] = {nullptr};
  RT_OK(RT(cudaLaunchKernel)(&long_kernel, dim3(132), dim3(256), args, 0, nullptr));
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  REQUIRE(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty());
  const auto launch = records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  REQUIRE(launch.size() == 1 && launch[0].cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  const auto t0 = std::chrono::steady_clock::now();
  RT_OK(RT(cudaDeviceSynchronize)());
  REQUIRE(std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(250));  // it really waited
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(k.size() == 1);
  REQUIRE(std::string(k[0].name) == "_Z11long_kernelv");
  REQUIRE(k[0].end - k[0].start == 300000000u);
  REQUIRE(k[0].start >= launch[0].start + 2000);
  REQUIRE(k[0].correlationId == launch[0].correlationId);
  REQUIRE(k[0].streamId == 7 && k[0].contextId == 1 && k[0].deviceId == 0 && k[0].gridX == 132);
  const auto sync = records_of<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  const auto api = records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  REQUIRE(sync.size() == 1 && api.size() == 2);
  REQUIRE(sync[0].type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  REQUIRE(sync[0].correlationId == api[1].correlationId && sync[0].end >= k[0].end);
  REQUIRE(sync[0].streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  _exit(0);
}

void per_call_switches(const std::string& log) {
  setenv("STANDIN_CUPTI_LOG", log.c_str(), 1);
  load_all();
  register_buffers();
  auto get_device = RT(cudaGetDevice);
  auto get_count = RT(cudaGetDeviceCount);
  auto drv_count = DRV(cuDeviceGetCount);
  auto flush = CUPTI(cuptiActivityFlushAll);
  int v = 0;
  const auto round = [&](std::size_t want_device, std::size_t want_count, std::size_t want_driver) {
    clear_seen();
    RT_OK(get_device(&v));
    RT_OK(get_count(&v));
    REQUIRE(drv_count(&v) == CUDA_SUCCESS);
    CUPTI_OK(flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    REQUIRE(api_records(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == want_device);
    REQUIRE(api_records(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020) == want_count);
    REQUIRE(api_records(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount) == want_driver);
  };
  // One call on without its kind: that call only.
  CUPTI_OK(CUPTI(cuptiActivityEnableRuntimeApi)(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 1));
  round(1, 0, 0);
  // The kind: all of them.
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_DRIVER));
  round(1, 1, 1);
  // The kind, then one call off: all but that one.
  CUPTI_OK(CUPTI(cuptiActivityEnableRuntimeApi)(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0));
  CUPTI_OK(CUPTI(cuptiActivityEnableDriverApi)(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount, 0));
  round(0, 1, 0);
  // The kind again, after the per-call switch: it overrides it.
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  round(1, 1, 0);
  CUPTI_OK(CUPTI(cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(CUPTI(cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_DRIVER));
  round(0, 0, 0);
  std::exit(0);  // the teardown writes the counts to the log
}

void second_subscriber_refused() {
  load_all();
  subscribe();
  CUpti_SubscriberHandle again = nullptr;
  const CUptiResult second = CUPTI(cuptiSubscribe)(&again, on_callback, nullptr);
  const CUptiResult last = CUPTI(cuptiGetLastError)();
  const CUptiResult last_again = CUPTI(cuptiGetLastError)();
  std::fprintf(stderr, "second subscribe %d, last error %d, then %d\n", static_cast<int>(second),
               static_cast<int>(last), static_cast<int>(last_again));
  REQUIRE(second == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  // Returned, not kept as the last error (real CUPTI 13.0 on an H200).
  REQUIRE(last == CUPTI_SUCCESS);
  REQUIRE(last_again == CUPTI_SUCCESS);
  _exit(0);
}

// CUPTI loaded into a process with no driver loaded, its calls' results
// and whether libcuda.so.1 is loaded before and after cuptiSubscribe.
struct NoDriverRun {
  bool loaded_before = false, loaded_after = false;
  CUptiResult subscribe = CUPTI_SUCCESS, thread_id_type = CUPTI_SUCCESS, register_callbacks = CUPTI_SUCCESS,
              enable = CUPTI_SUCCESS, flush = CUPTI_SUCCESS;
};

NoDriverRun cupti_without_a_loaded_driver() {
  g_libs.cupti = must_load(cupti_lib(), RTLD_NOW | RTLD_LOCAL);
  std::uint32_t version = 0;
  CUPTI_OK(CUPTI(cuptiGetVersion)(&version));
  REQUIRE(version == CUPTI_API_VERSION);
  NoDriverRun r;
  CUpti_SubscriberHandle s = nullptr;
  r.loaded_before = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  r.subscribe = CUPTI(cuptiSubscribe)(&s, on_callback, nullptr);
  r.loaded_after = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  r.thread_id_type = CUPTI(cuptiSetThreadIdType)(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  r.register_callbacks = CUPTI(cuptiActivityRegisterCallbacks)(buffer_requested, buffer_completed);
  r.enable = CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME);
  r.flush = CUPTI(cuptiActivityFlushAll)(0);
  std::fprintf(stderr,
               "no driver: loaded before %d after subscribe %d; subscribe %d thread id type %d register %d "
               "enable %d flush %d\n",
               r.loaded_before, r.loaded_after, static_cast<int>(r.subscribe), static_cast<int>(r.thread_id_type),
               static_cast<int>(r.register_callbacks), static_cast<int>(r.enable), static_cast<int>(r.flush));
  return r;
}

// A driver is installed: CUPTI loads it itself at cuptiSubscribe, and
// every call works (real CUPTI 13.0 on an H200).
void cupti_loads_the_driver() {
  const NoDriverRun r = cupti_without_a_loaded_driver();
  REQUIRE(!r.loaded_before && r.loaded_after);
  CUPTI_OK(r.subscribe);
  CUPTI_OK(r.thread_id_type);
  CUPTI_OK(r.register_callbacks);
  CUPTI_OK(r.enable);
  CUPTI_OK(r.flush);
  _exit(0);
}

// No driver installed (real CUPTI 13.0 on a machine without one; the
// stand-in with STANDIN_CUPTI_NO_DRIVER=1): the calls that need it fail
// with CUPTI_ERROR_UNKNOWN; registering the buffer callbacks works.
void no_driver_installed_fails_like_real_cupti() {
  setenv("STANDIN_CUPTI_NO_DRIVER", "1", 1);
  const NoDriverRun r = cupti_without_a_loaded_driver();
  REQUIRE(!r.loaded_before && !r.loaded_after);
  REQUIRE(r.subscribe == CUPTI_ERROR_UNKNOWN);
  REQUIRE(r.thread_id_type == CUPTI_ERROR_UNKNOWN);
  CUPTI_OK(r.register_callbacks);
  REQUIRE(r.enable == CUPTI_ERROR_UNKNOWN);
  REQUIRE(r.flush == CUPTI_ERROR_UNKNOWN);
  _exit(0);
}

// An exit handler that uses CUPTI, registered before or after libcupti is
// loaded (dlopen registers its static destructors then).
decltype(&cuptiActivityFlushAll) g_flush_at_exit = nullptr;
void flush_at_exit() {
  std::fprintf(stderr, "exit handler: flushing\n");
  const CUptiResult r = g_flush_at_exit(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::fprintf(stderr, "exit handler: flushed %d, %zu buffers\n", static_cast<int>(r), g_seen.completions.size());
}

void exit_handler_and_cupti(bool handler_first, const char* teardown = nullptr) {
  if (teardown != nullptr) setenv("STANDIN_CUPTI_TEARDOWN", teardown, 1);
  if (handler_first) std::atexit(flush_at_exit);
  load_all();
  if (!handler_first) std::atexit(flush_at_exit);
  g_flush_at_exit = CUPTI(cuptiActivityFlushAll);
  subscribe();
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  int device = 0;
  RT_OK(RT(cudaGetDevice)(&device));
  std::exit(0);
}

void driver_atexit_order(const char* order) {
  setenv("CUDA_INJECTION64_PATH", STANDIN_TEST_INJECT, 1);
  if (order != nullptr) setenv("STANDIN_DRIVER_ATEXIT", order, 1);
  load_all();
  void* p = nullptr;
  RT_OK(RT(cudaMalloc)(&p, 16));  // cuInit (the injection registers its handler), the context current here
  std::exit(0);
}

std::uint32_t g_main_tid = 0;

void print_completions() {
  std::lock_guard<std::mutex> lock(g_seen.mu);
  std::fprintf(stderr, "at exit: %zu completions\n", g_seen.completions.size());
  for (const Completion& c : g_seen.completions) {
    std::fprintf(stderr, "completed %zu records on %s\n", c.records,
                 c.tid == g_main_tid ? "the exiting thread" : "another thread");
  }
}

void context_buffers_at_exit() {
  // Registered before anything CUDA: it runs last, after the driver's
  // teardown and CUPTI's. Nothing was flushed: the five records never
  // come back (real CUPTI 13.0 on an H200).
  g_main_tid = os_tid();
  std::atexit(print_completions);
  load_all();
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  int device = 0;
  for (int i = 0; i < 5; ++i) RT_OK(RT(cudaGetDevice)(&device));
  std::exit(0);
}

void graphs() {
  load_all();
  CUpti_SubscriberHandle s = subscribe();
  CUPTI_OK(CUPTI(cuptiEnableDomain)(1, s, CUPTI_CB_DOMAIN_RESOURCE));
  CUPTI_OK(CUPTI(cuptiEnableDomain)(1, s, CUPTI_CB_DOMAIN_RUNTIME_API));
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  auto reg = sym<int (*)(const void*, const char*, std::int64_t)>(g_libs.runtime, "standin_register_kernel");
  static int k1, k2;
  REQUIRE(reg(&k1, "_Z2k1v", 5000) == 0 && reg(&k2, "_Z2k2v", 7000) == 0);
  cudaStream_t stream = nullptr;
  RT_OK(RT(cudaStreamCreate)(&stream));
  RT_OK(RT(cudaStreamBeginCapture)(stream, cudaStreamCaptureModeGlobal));
  void* args[1] = {nullptr};
  RT_OK(RT(cudaLaunchKernel)(&k1, dim3(1), dim3(32), args, 0, stream));
  RT_OK(RT(cudaLaunchKernel)(&k2, dim3(1), dim3(32), args, 0, stream));
  cudaGraph_t graph = nullptr;
  RT_OK(RT(cudaStreamEndCapture)(stream, &graph));
  // Captured work does not run.
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  REQUIRE(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty());
  cudaGraphExec_t exec = nullptr;
  RT_OK(RT(cudaGraphInstantiate)(&exec, graph, 0));
  RT_OK(RT(cudaGraphLaunch)(exec, stream));
  RT_OK(RT(cudaGraphLaunch)(exec, stream));
  RT_OK(RT(cudaStreamSynchronize)(stream));
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));

  auto node_id = CUPTI(cuptiGetGraphNodeId);
  std::vector<std::uint64_t> captured, created_at_instantiate, clones, originals;
  bool graph_created = false;
  {
    std::lock_guard<std::mutex> lock(g_seen.mu);
    for (const Callback& c : g_seen.callbacks) {
      if (c.domain != CUPTI_CB_DOMAIN_RESOURCE) continue;
      if (c.cbid == CUPTI_CBID_RESOURCE_GRAPH_CREATED) graph_created = true;
      std::uint64_t id = 0, original = 0;
      if (c.handle != nullptr) CUPTI_OK(node_id(static_cast<CUgraphNode>(const_cast<void*>(c.handle)), &id));
      if (c.cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
        // Inside the call that made the node: the launch while capturing,
        // cudaGraphInstantiate for its clones.
        if (c.last_api.rfind("cudaLaunchKernel", 0) == 0) captured.push_back(id);
        if (c.last_api.rfind("cudaGraphInstantiate", 0) == 0) created_at_instantiate.push_back(id);
      }
      if (c.cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
        CUPTI_OK(node_id(static_cast<CUgraphNode>(const_cast<void*>(c.original)), &original));
        clones.push_back(id);
        originals.push_back(original);
      }
    }
  }
  REQUIRE(graph_created);
  REQUIRE(captured.size() == 2 && clones.size() == 2 && originals == captured && created_at_instantiate == clones);
  std::uint32_t graph_id = 0;
  CUPTI_OK(CUPTI(cuptiGetGraphId)(graph, &graph_id));
  std::vector<std::uint32_t> launches;
  for (const auto& r : records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    if (r.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) launches.push_back(r.correlationId);
  }
  const auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(launches.size() == 2 && k.size() == 4);
  for (std::size_t i = 0; i < k.size(); ++i) {
    REQUIRE(k[i].graphId == graph_id);
    REQUIRE(k[i].graphNodeId == clones[i % 2]);
    REQUIRE(k[i].correlationId == launches[i / 2]);
  }
  REQUIRE(k[1].start >= k[0].end && k[2].start >= k[1].end);  // one stream: in order
  _exit(0);
}

void device_and_context_records(bool enable_first) {
  load_all();
  register_buffers();
  int device = 0;
  if (!enable_first) {
    void* p = nullptr;
    RT_OK(RT(cudaMalloc)(&p, 16));  // the context exists from here
  }
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_DEVICE));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_CONTEXT));
  RT_OK(RT(cudaGetDevice)(&device));
  void* p = nullptr;
  RT_OK(RT(cudaMalloc)(&p, 16));
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const auto devices = records_of<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
  const auto contexts = records_of<CUpti_ActivityContext3>(CUPTI_ACTIVITY_KIND_CONTEXT);
  std::fprintf(stderr, "enable %s the context: %zu device records, %zu context records\n",
               enable_first ? "before" : "after", devices.size(), contexts.size());
  for (const auto& c : contexts) {
    std::fprintf(stderr, "context record: id %u device %u null stream %u\n", c.contextId, c.deviceId, c.nullStreamId);
  }
  if (!enable_first) {
    REQUIRE(devices.empty() && contexts.empty());
    _exit(0);
  }
  REQUIRE(devices.size() == 1 && contexts.size() == 1);
  REQUIRE(devices[0].numMultiprocessors == 132 && devices[0].computeCapabilityMajor == 9);
  REQUIRE(devices[0].maxWarpsPerMultiprocessor * devices[0].numThreadsPerWarp == 2048);
  std::fprintf(stderr, "device record: %s, %u SMs\n", devices[0].name, devices[0].numMultiprocessors);
  if (real_cuda()) {
    char name[256] = {};
    REQUIRE(DRV(cuDeviceGetName)(name, sizeof name, 0) == CUDA_SUCCESS);
    REQUIRE(std::string(devices[0].name) == name);
  } else {
    REQUIRE(std::string(devices[0].name).find("H100") != std::string::npos);
  }
  REQUIRE(contexts[0].contextId == 1 && contexts[0].deviceId == 0 && contexts[0].nullStreamId == 7);
  _exit(0);
}

// cuptiActivityEnableDriverApi without the DRIVER kind, switched on before
// or after the context exists, or the DRIVER kind after it: how many of
// three cuDeviceGetCount calls made then are recorded.
enum class DriverSwitch { kCallBeforeTheContext, kCallAfterTheContext, kKindAfterTheContext };

void driver_api_switch(DriverSwitch when) {
  load_all();
  register_buffers();
  void* p = nullptr;
  if (when != DriverSwitch::kCallBeforeTheContext) RT_OK(RT(cudaMalloc)(&p, 16));  // the context exists from here
  if (when == DriverSwitch::kKindAfterTheContext) {
    CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_DRIVER));
  } else {
    CUPTI_OK(CUPTI(cuptiActivityEnableDriverApi)(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount, 1));
  }
  if (when == DriverSwitch::kCallBeforeTheContext) RT_OK(RT(cudaMalloc)(&p, 16));
  std::uint64_t t0 = 0;
  CUPTI_OK(CUPTI(cuptiGetTimestamp)(&t0));
  int count = 0;
  for (int i = 0; i < 3; ++i) REQUIRE(DRV(cuDeviceGetCount)(&count) == CUDA_SUCCESS);
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::size_t recorded = 0;
  for (const auto& r : records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER)) {
    recorded += r.cbid == CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount && r.start >= t0;
  }
  std::fprintf(stderr, "driver switch %d: %zu of 3 cuDeviceGetCount recorded\n", static_cast<int>(when), recorded);
  REQUIRE(recorded == (when == DriverSwitch::kCallAfterTheContext ? 0u : 3u));
  _exit(0);
}

void refused_buffers_drop_records(const std::string& log) {
  setenv("STANDIN_CUPTI_LOG", log.c_str(), 1);
  load_all();
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  int device = 0;
  g_refuse = true;
  for (int i = 0; i < 7; ++i) RT_OK(RT(cudaGetDevice)(&device));
  std::size_t dropped = 0;
  CUPTI_OK(CUPTI(cuptiActivityGetNumDroppedRecords)(nullptr, 0, &dropped));
  REQUIRE(dropped == 7);
  CUPTI_OK(CUPTI(cuptiActivityGetNumDroppedRecords)(nullptr, 0, &dropped));
  REQUIRE(dropped == 0);  // reset by the call
  g_refuse = false;
  for (int i = 0; i < 3; ++i) RT_OK(RT(cudaGetDevice)(&device));
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  REQUIRE(api_records(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == 3);
  std::exit(0);
}

std::uint64_t CUPTIAPI shifted_clock() { return monotonic_ns() + 1000000000000ull; }

void timestamps_from_the_callback() {
  load_all();
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityRegisterTimestampCallback)(shifted_clock));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  auto reg = sym<int (*)(const void*, const char*, std::int64_t)>(g_libs.runtime, "standin_register_kernel");
  static int k;
  REQUIRE(reg(&k, "k", 1000) == 0);
  const std::uint64_t before = shifted_clock();
  void* args[1] = {nullptr};
  RT_OK(RT(cudaLaunchKernel)(&k, dim3(1), dim3(1), args, 0, nullptr));
  RT_OK(RT(cudaDeviceSynchronize)());
  const std::uint64_t after = shifted_clock();
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const auto api = records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  const auto kernels = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(!api.empty() && kernels.size() == 1);
  REQUIRE(api[0].start >= before && api[0].end <= after);
  // Device times on the same clock (to the precision of the offset taken
  // at registration: two clock reads, apart by at most a preemption).
  REQUIRE(kernels[0].start + 1000000 >= before && kernels[0].end <= after + 1000000);
  _exit(0);
}

// libcupti loaded after cuInit (as an injection loads it): at exit its
// destructor runs before the runtime's and the driver's teardowns, which
// reach CUPTI's hooks while it has something on.
void hooks_after_teardown(const char* mode, const char* how) {
  if (mode != nullptr) setenv("STANDIN_CUPTI_TEARDOWN", mode, 1);
  g_libs.driver = must_load(driver_lib(), RTLD_NOW | RTLD_GLOBAL);
  g_libs.runtime = must_load(runtime_lib(), RTLD_NOW | RTLD_GLOBAL);
  void* p = nullptr;
  RT_OK(RT(cudaMalloc)(&p, 16));  // cuInit, the context
  g_libs.cupti = must_load(cupti_lib(), RTLD_NOW | RTLD_LOCAL);
  CUpti_SubscriberHandle s = subscribe();
  register_buffers();
  CUPTI_OK(CUPTI(cuptiActivityEnable)(CUPTI_ACTIVITY_KIND_RUNTIME));
  int device = 0;
  RT_OK(RT(cudaGetDevice)(&device));
  CUPTI_OK(CUPTI(cuptiActivityFlushAll)(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (std::strcmp(how, "finalize") == 0) CUPTI_OK(CUPTI(cuptiFinalize)());
  if (std::strcmp(how, "off") == 0) {
    CUPTI_OK(CUPTI(cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_RUNTIME));
    CUPTI_OK(CUPTI(cuptiUnsubscribe)(s));
  }
  std::fprintf(stderr, "exiting\n");
  std::exit(0);
}

// ---- tests ----------------------------------------------------------------------------------

TEST(Standin, CallbacksAndNvtxArriveOnTheCallingThread) { RUN_SCENARIO(callbacks_on_the_calling_thread()); }

TEST(Standin, FullBuffersAndAForcedFlushCompleteOnCuptisThread) {
  RUN_SCENARIO(full_buffers_and_a_forced_flush_on_cuptis_thread());
}

TEST(Standin, DeviceWorkIsInAFlushOnlyOnceTheDeviceHasRunIt) {
  if (real_cuda()) GTEST_SKIP() << "needs a stand-in kernel";
  RUN_SCENARIO(device_work_waits_for_the_device());
}

TEST(Standin, PerCallSwitchesFollowCuptisDocumentedOrderAndTheLogCountsWrittenRecords) {
  const std::string log = temp_path("switches.log");
  std::remove(log.c_str());
  RUN_SCENARIO(per_call_switches(log));
  const std::string text = read_file(log);
  std::remove(log.c_str());
  if (real_cuda()) return;  // the log is the stand-in's
  for (const char* line :
       {"\nruntime_api 17 1 pid=", "\nactivity_enable 5 pid=", "\nruntime_api 17 0 pid=", "\ndriver_api 4 0 pid=",
        "\nactivity_disable 5 pid=", "\nflush_all 1 pid=", "\nwritten runtime 17 cudaGetDevice 3 pid=",
        "\nwritten runtime 3 cudaGetDeviceCount 3 pid=", "\nwritten driver 4 cuDeviceGetCount 1 pid=",
        "\nteardown pid="}) {
    EXPECT_NE(text.find(line), std::string::npos) << "no \"" << line << "\" in\n" << text;
  }
}

TEST(Standin, ASecondSubscriberIsRefused) { RUN_SCENARIO(second_subscriber_refused()); }

TEST(Standin, WithNoDriverLoadedCuptiLoadsItAtSubscribe) {
  if (std::getenv("STANDIN_TEST_CUPTI") != nullptr && !real_cuda()) {
    GTEST_SKIP() << "real CUPTI without real CUDA: no driver to load here";
  }
  RUN_SCENARIO(cupti_loads_the_driver());
}

// Passes with the real libcupti on a machine without a driver:
// STANDIN_TEST_CUPTI=/usr/local/cuda/lib64/libcupti.so.13 standin_test --gtest_filter='*WithoutADriver*'
TEST(Standin, WithoutADriverInstalledCuptiFailsAsRealCuptiDoes) {
  if (real_cuda()) GTEST_SKIP() << "a driver is installed";
  RUN_SCENARIO(no_driver_installed_fails_like_real_cupti());
}

TEST(Standin, CuptiUsedAfterItsTeardownStillFlushes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The handler was registered before libcupti was loaded: CUPTI's static
  // destructor runs first, and the handler's flush still works (real CUPTI
  // 13.0 on an H200: CUPTI_SUCCESS, the buffer handed back).
  EXPECT_EXIT(exit_handler_and_cupti(true), ::testing::ExitedWithCode(0), "exit handler: flushed 0, 1 buffers");
  // Registered after: it runs first, and CUPTI is still there.
  EXPECT_EXIT(exit_handler_and_cupti(false), ::testing::ExitedWithCode(0), "exit handler: flushed 0, 1 buffers");
  if (real_cuda()) return;
  // STANDIN_CUPTI_TEARDOWN=dangle (the reading of CUDA 13.0.0 in PAPI
  // #594, not what the H200 did): the state is freed, the flush faults.
  EXPECT_EXIT(exit_handler_and_cupti(true, "dangle"), ::testing::KilledBySignal(SIGSEGV), "exit handler: flushing");
}

TEST(Standin, TheDriversTeardownRunsBeforeOrAfterTheInjectionsExitHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (real_cuda()) {
    // The real order is not documented: this states "before" (the
    // stand-in's default); a failure shows what real CUDA does.
    EXPECT_EXIT(driver_atexit_order(nullptr), ::testing::ExitedWithCode(0), "inject atexit: cuCtxSynchronize 0\n");
    return;
  }
  // Registered before InitializeInjection: it runs after the injection's handler.
  EXPECT_EXIT(driver_atexit_order("before"), ::testing::ExitedWithCode(0), "inject atexit: cuCtxSynchronize 0\n");
  // Registered after: the context is gone when the injection's handler runs.
  EXPECT_EXIT(driver_atexit_order("after"), ::testing::ExitedWithCode(0),
              "inject atexit: cuCtxSynchronize 4\n");  // CUDA_ERROR_DEINITIALIZED
}

TEST(Standin, AtExitRecordsNotFlushedNeverComeBack) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(context_buffers_at_exit(), ::testing::ExitedWithCode(0), "at exit: 0 completions\n");
}

TEST(Standin, DanglingHooksFaultUnlessCuptiWasFinalizedOrHadNothingOn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (real_cuda()) {
    // States the stand-in's default (the teardown unhooks itself); a
    // SIGSEGV here means real CUPTI dangles, as STANDIN_CUPTI_TEARDOWN=dangle.
    EXPECT_EXIT(hooks_after_teardown(nullptr, "on"), ::testing::ExitedWithCode(0), "exiting");
    EXPECT_EXIT(hooks_after_teardown(nullptr, "finalize"), ::testing::ExitedWithCode(0), "exiting");
    return;
  }
  // The driver's teardown tells a freed CUPTI that the context goes.
  EXPECT_EXIT(hooks_after_teardown("dangle", "on"), ::testing::KilledBySignal(SIGSEGV), "exiting");
  EXPECT_EXIT(hooks_after_teardown("dangle", "finalize"), ::testing::ExitedWithCode(0), "exiting");
  EXPECT_EXIT(hooks_after_teardown("dangle", "off"), ::testing::ExitedWithCode(0), "exiting");
  // By default the teardown takes CUPTI's hooks out of the driver.
  EXPECT_EXIT(hooks_after_teardown("detach", "on"), ::testing::ExitedWithCode(0), "exiting");
}

TEST(Standin, GraphReplaysCarryTheClonedNodeTheGraphAndTheLaunchsCorrelation) {
  if (real_cuda()) GTEST_SKIP() << "needs a stand-in kernel";
  RUN_SCENARIO(graphs());
}

TEST(Standin, DeviceAndContextRecordsOnlyForKindsOnWhenTheContextIsCreated) {
  RUN_SCENARIO(device_and_context_records(true));
  RUN_SCENARIO(device_and_context_records(false));
}

TEST(Standin, ADriverCallSwitchedOnAfterTheContextIsNotRecordedButItsKindIs) {
  RUN_SCENARIO(driver_api_switch(DriverSwitch::kCallBeforeTheContext));
  RUN_SCENARIO(driver_api_switch(DriverSwitch::kCallAfterTheContext));
  RUN_SCENARIO(driver_api_switch(DriverSwitch::kKindAfterTheContext));
}

TEST(Standin, RecordsBeyondARefusedBufferAreDroppedCountedAndNeverWritten) {
  const std::string log = temp_path("dropped.log");
  std::remove(log.c_str());
  RUN_SCENARIO(refused_buffers_drop_records(log));
  const std::string text = read_file(log);
  std::remove(log.c_str());
  if (real_cuda()) return;
  EXPECT_NE(text.find("\nwritten runtime 17 cudaGetDevice 3 pid="), std::string::npos) << text;
  EXPECT_NE(text.find(" dropped 7 pid="), std::string::npos) << text;
}

TEST(Standin, TimestampsComeFromTheRegisteredCallback) {
  if (real_cuda()) GTEST_SKIP() << "needs a stand-in kernel";
  RUN_SCENARIO(timestamps_from_the_callback());
}

// standin_app on its own: each way of ending, after its work.
struct AppRun {
  int status = 0;
  std::string out;
};

AppRun run_app(const std::vector<std::string>& args) {
  const std::string out_path = temp_path("app.out");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> all = {STANDIN_APP};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  AppRun r;
  pid_t pid = 0;
  if (posix_spawn(&pid, STANDIN_APP, &actions, nullptr, argv.data(), environ) == 0) {
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
  }
  posix_spawn_file_actions_destroy(&actions);
  r.out = read_file(out_path);
  std::remove(out_path.c_str());
  return r;
}

TEST(StandinApp, EachExitPathEndsAsDocumentedAfterItsWork) {
  if (real_cuda()) GTEST_SKIP() << "the stand-in program";
  const struct {
    const char* mode;
    int code;    // exit status, or
    int signal;  // the signal it dies of
  } cases[] = {{"return", 0, 0},     {"exit", 10, 0},       {"exit-thread", 11, 0},       {"python", 12, 0},
               {"_exit", 13, 0},     {"sigint", 0, SIGINT}, {"sigint-python", 0, SIGINT}, {"sigterm", 0, SIGTERM},
               {"throw", 0, SIGABRT}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    const AppRun r = run_app({"--steps", "5", "--exit", c.mode});
    EXPECT_EQ(r.out, "standin_app done\n");
    if (c.signal != 0) {
      EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == c.signal) << r.status;
    } else {
      EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == c.code) << r.status;
    }
  }
}

TEST(StandinApp, GraphTritonThreadsAndChildrenRun) {
  if (real_cuda()) GTEST_SKIP() << "the stand-in program";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--graph", "--nvtx"}, {"--triton"}, {"--threads", "3"}, {"--nvtx-early", "--nvtx"}}) {
    const AppRun r = run_app(args);
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << args[0];
    EXPECT_EQ(r.out, "standin_app done\n") << args[0];
  }
  const AppRun r = run_app({"--children", "2", "--steps", "3"});
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  EXPECT_EQ(r.out, "standin_app done\nstandin_app done\nstandin_app parent done (2 children)\n");
}

}  // namespace
