// libcuda.so.1, stand-in: the CUDA driver API (cuda.h signatures) over a
// simulated H100 with one primary context and a virtual timeline per stream.
//
//   cuInit(0), first time:
//     [atexit(teardown)]            STANDIN_DRIVER_ATEXIT=before (default)
//     dlopen($CUDA_INJECTION64_PATH) ── InitializeInjection()   on the calling thread
//     [atexit(teardown)]            STANDIN_DRIVER_ATEXIT=after
//   launch at host time t on stream s ── runs [max(t + 2 us, s.busy_until), + dur)
//     ── reported to CUPTI at once (Work); CUPTI shows it once it has ended
//   synchronize ── sleeps/spins until the work has ended ── Sync to CUPTI
//   an allocation or release inside an API call ── MemoryOp to CUPTI, on
//     the calling thread (cudaMallocAsync: from the device's default pool)
//   teardown (at exit) ── waits for the device ── CUPTI: context_destroying
//     (a RESOURCE callback; CUPTI hands no buffers back there)
//     ── every call from then on: CUDA_ERROR_DEINITIALIZED
//
// The driver's state is a heap object that is never freed (a C library has
// no static destructors), so only its atexit teardown changes it at exit.
// CUPTI attaches through standin_driver_attach_tool (tests/standin/standin_internal.h);
// the runtime reaches most of the same functions through
// standin_driver_internal(), which makes no DRIVER API records. The runtime
// is not silent in the DRIVER domain, though: real cudart 13 calls public,
// traced driver entry points too (measured on an H200 with CUPTI 13.0:
// cuDeviceGetCount first thing in its initialization, about 117 traced
// driver calls in all there, and a cuKernelGetName before every kernel
// launch), so the stand-in runtime calls cuDeviceGetCount and
// cuKernelGetName through the exported functions below.
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tests/standin/standin.h"
#include "tests/standin/standin_internal.h"

// The handle types cuda.h leaves incomplete.
struct CUctx_st {
  int unused = 0;
};
struct CUfunc_st {
  std::string name;
  std::int64_t dur_ns = 0;
  std::uint16_t registers = 32;
  std::int32_t static_smem = 0;
};
struct CUgraph_st;
struct CUgraphNode_st {
  std::uint64_t id = 0;
  standin::Work tmpl;  // what runs, without times or correlation
  std::int64_t dur_ns = 0;
  CUgraph_st* graph = nullptr;
};
struct CUgraph_st {
  std::uint32_t id = 0;
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};
struct CUgraphExec_st {
  std::uint32_t id = 0;
  std::uint32_t graph_id = 0;         // of the graph it was instantiated from
  std::unique_ptr<CUgraph_st> clone;  // its own copy of the nodes
};
struct CUstream_st {
  std::uint32_t id = 0;
  std::uint64_t busy_until = 0;         // guarded by Driver::mu
  std::deque<std::uint64_t> in_flight;  // end times, oldest first
  CUgraph_st* capture = nullptr;        // being captured into
};
struct CUevent_st {
  std::uint32_t id = 0;
  std::uint64_t done_at = 0;
};

namespace standin {
namespace {

std::uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// Waits until CLOCK_MONOTONIC reaches t: sleeps while far, then spins, as
// a blocking-sync driver would take about as long.
void wait_until(std::uint64_t t) noexcept {
  for (;;) {
    const std::uint64_t now = now_ns();
    if (now >= t) return;
    const std::uint64_t left = t - now;
    if (left > 100000) {
      timespec ts{static_cast<time_t>((left - 50000) / 1000000000u), static_cast<long>((left - 50000) % 1000000000u)};
      nanosleep(&ts, nullptr);
    } else {
      std::this_thread::yield();
    }
  }
}

// Launch latency: work starts no earlier than this after its call.
constexpr std::uint64_t kLaunchLatencyNs = 2000;
// Pushbuffer depth per stream: a launch past it waits, as on a real GPU.
constexpr std::size_t kMaxInFlight = 1024;

enum class State : int { kFresh = 0, kReady = 1, kTornDown = 2 };

// What an allocation is: device memory (cudaMalloc), device memory from
// the default pool (cudaMallocAsync) or pinned host memory (cudaMallocHost).
enum class AllocKind : std::uint8_t { kDevice, kPooled, kHost };
struct Allocation {
  std::size_t bytes = 0;
  AllocKind kind = AllocKind::kDevice;
};

// A pool reserves device memory in 2 MiB pieces (the granularity of CUDA's
// virtual memory mappings on current GPUs); the release threshold stays
// at its default, 0.
constexpr std::uint64_t kPoolGranule = std::uint64_t{2} << 20;

struct Driver {
  std::mutex mu;  // streams, events, functions, graphs, allocations
  std::atomic<State> state{State::kFresh};
  std::once_flag init_once;
  CUresult init_result = CUDA_SUCCESS;
  std::atomic<const ToolHooks*> tool{nullptr};
  std::once_flag context_once;
  std::atomic<bool> have_context{false};
  CUctx_st context;
  CUstream_st legacy;
  std::vector<CUstream_st*> streams;  // created ones
  std::atomic<std::uint32_t> next_stream_id{kFirstStreamId};
  std::atomic<std::uint32_t> next_event_id{1};
  std::atomic<std::uint32_t> next_graph_id{1};
  std::atomic<std::uint32_t> next_exec_id{1};
  std::atomic<std::uint64_t> next_node_id{1};
  std::unordered_map<std::string, std::unique_ptr<CUfunc_st>> functions;
  std::unordered_map<void*, Allocation> allocations;
  // The device's default stream-ordered pool (cudaMallocAsync), created by
  // its first allocation.
  bool pool_created = false;
  std::uint64_t pool_size = 0, pool_used = 0;
};

// Never destroyed: see the file comment.
Driver* const g = [] {
  auto* d = new Driver;
  d->legacy.id = kLegacyStreamId;
  return d;
}();

thread_local ApiCall* tl_call = nullptr;
thread_local bool tl_in_init = false;
// The calling thread's context stack (its top is the current context), as
// the real driver keeps one per thread: a thread that never made a runtime
// call, set or pushed a context has none, and a context synchronize there
// fails with CUDA_ERROR_INVALID_CONTEXT.
constexpr int kMaxContextDepth = 16;
thread_local CUcontext tl_contexts[kMaxContextDepth] = {};
thread_local int tl_context_depth = 0;
CUcontext current_context() noexcept { return tl_context_depth > 0 ? tl_contexts[tl_context_depth - 1] : nullptr; }

const ToolHooks* tool() noexcept { return g->tool.load(std::memory_order_acquire); }

ContextInfo context_info() noexcept {
  ContextInfo c;
  c.context = &g->context;
  c.context_id = kContextId;
  c.device_id = 0;
  c.null_stream_id = kLegacyStreamId;
  return c;
}

const DeviceInfo& device_info() noexcept {
  static const DeviceInfo d = [] {
    DeviceInfo i;
    i.id = 0;
    i.name = "NVIDIA H100 80GB HBM3 (stand-in)";
    i.global_memory_bytes = 85017493504ull;  // what an H100 80GB reports
    i.global_memory_bandwidth_kbps = 3352320000ull;
    i.constant_memory = 65536;
    i.l2_cache = 52428800;
    i.warp_size = 32;
    i.core_clock_khz = 1980000;
    i.memcpy_engines = 3;
    i.sms = 132;
    i.max_ipc = 4;
    i.max_warps_per_sm = 64;
    i.max_blocks_per_sm = 32;
    i.smem_per_sm = 233472;
    i.regs_per_sm = 65536;
    i.regs_per_block = 65536;
    i.smem_per_block = 49152;
    i.max_threads_per_block = 1024;
    i.max_block_dim[0] = 1024;
    i.max_block_dim[1] = 1024;
    i.max_block_dim[2] = 64;
    i.max_grid_dim[0] = 2147483647u;
    i.max_grid_dim[1] = 65535;
    i.max_grid_dim[2] = 65535;
    i.cc_major = 9;
    i.cc_minor = 0;
    for (int k = 0; k < 16; ++k) i.uuid.bytes[k] = static_cast<char>(0x50 + k);
    return i;
  }();
  return d;
}

// The primary context: created by the first call that needs one, on its
// thread (cudart's first real call; a driver-API program's first launch).
// Creates the primary context at the first call that needs one and makes
// it the calling thread's current context when the thread has none: what
// the runtime does on every thread it is called from (the driver-API
// launches of this stand-in are as lenient).
void ensure_context() noexcept {
  std::call_once(g->context_once, [] {
    g->have_context.store(true, std::memory_order_release);
    if (const ToolHooks* t = tool()) t->context_created(context_info(), device_info());
  });
  if (tl_context_depth == 0) tl_contexts[tl_context_depth++] = &g->context;
}



std::uint32_t current_correlation() noexcept { return tl_call != nullptr ? tl_call->correlation_id : 0; }

CUstream_st* stream_of(CUstream s) noexcept {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return &g->legacy;
  return s;
}

CUresult ready() noexcept {
  switch (g->state.load(std::memory_order_acquire)) {
    case State::kReady:
      return CUDA_SUCCESS;
    case State::kTornDown:
      return CUDA_ERROR_DEINITIALIZED;
    default:
      return CUDA_ERROR_NOT_INITIALIZED;
  }
}

// ---- API calls --------------------------------------------------------------------------

// The correlation id is CUPTI's to give (at api_enter), to the calls it
// traces; a call it does not trace has none (0).
void api_begin(ApiCall* call) noexcept {
  call->correlation_id = 0;
  if (g->have_context.load(std::memory_order_acquire)) {
    call->context = &g->context;
    call->context_id = kContextId;
  }
  call->outer = tl_call;
  tl_call = call;
  if (const ToolHooks* t = tool()) t->api_enter(call);
}

void api_end(ApiCall* call) noexcept {
  if (const ToolHooks* t = tool()) t->api_exit(call);
  tl_call = call->outer;
}

// A public driver entry point: one DRIVER API call (correlation id,
// callbacks, record) around its body.
class DriverCall {
 public:
  DriverCall(CUpti_CallbackId cbid, const char* name, const void* params) noexcept {
    call_.domain = CUPTI_CB_DOMAIN_DRIVER_API;
    call_.cbid = cbid;
    call_.name = name;
    call_.params = params;
    call_.return_value = &result_;
    api_begin(&call_);
  }
  DriverCall(const DriverCall&) = delete;
  DriverCall& operator=(const DriverCall&) = delete;
  void set_symbol(const char* s) noexcept { call_.symbol = s; }
  CUresult finish(CUresult r) noexcept {
    result_ = r;
    call_.result = static_cast<std::uint32_t>(r);
    api_end(&call_);
    return r;
  }

 private:
  ApiCall call_;
  CUresult result_ = CUDA_SUCCESS;
};

// ---- the simulated device --------------------------------------------------------------

// Puts work on the stream's timeline and reports it; a capturing stream
// records a graph node instead.
void submit(Work w, std::int64_t dur_ns, CUstream_st* s, CUgraphNode_st** captured) noexcept {
  w.context_id = kContextId;
  w.device_id = 0;
  w.correlation_id = current_correlation();
  std::unique_lock<std::mutex> lock(g->mu);
  if (s->capture != nullptr) {
    auto node = std::make_unique<CUgraphNode_st>();
    node->id = g->next_node_id.fetch_add(1, std::memory_order_relaxed);
    node->tmpl = w;
    node->dur_ns = dur_ns;
    node->graph = s->capture;
    CUgraphNode_st* raw = node.get();
    s->capture->nodes.push_back(std::move(node));
    if (captured != nullptr) *captured = raw;
    return;
  }
  std::uint64_t now = now_ns();
  while (!s->in_flight.empty() && s->in_flight.front() <= now) s->in_flight.pop_front();
  while (s->in_flight.size() >= kMaxInFlight) {
    const std::uint64_t oldest = s->in_flight.front();
    lock.unlock();
    wait_until(oldest);
    lock.lock();
    now = now_ns();
    while (!s->in_flight.empty() && s->in_flight.front() <= now) s->in_flight.pop_front();
  }
  w.start_ns = std::max(now + kLaunchLatencyNs, s->busy_until);
  w.end_ns = w.start_ns + static_cast<std::uint64_t>(std::max<std::int64_t>(dur_ns, 0));
  s->busy_until = w.end_ns;
  s->in_flight.push_back(w.end_ns);
  w.stream_id = s->id;
  lock.unlock();
  if (const ToolHooks* t = tool()) t->work(w);
}

CUgraphNodeType node_type(const CUgraphNode_st& node) noexcept {
  switch (node.tmpl.kind) {
    case WorkKind::kKernel:
      return CU_GRAPH_NODE_TYPE_KERNEL;
    case WorkKind::kMemset:
      return CU_GRAPH_NODE_TYPE_MEMSET;
    case WorkKind::kMemcpy:
      return CU_GRAPH_NODE_TYPE_MEMCPY;
  }
  return CU_GRAPH_NODE_TYPE_EMPTY;
}

void report_node_created(CUgraphNode_st* node, CUstream s) noexcept {
  if (node == nullptr) return;
  if (const ToolHooks* t = tool()) {
    CUpti_GraphData d{};
    d.graph = node->graph;
    d.node = node;
    d.nodeType = node_type(*node);
    t->resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &g->context, s, &d);
  }
}

CUresult launch_impl(CUfunction f, const std::int32_t grid[3], const std::int32_t block[3], std::uint32_t smem,
                     CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ensure_context();
  Work w;
  w.kind = WorkKind::kKernel;
  w.name = f->name.c_str();
  for (int i = 0; i < 3; ++i) {
    w.grid[i] = grid[i];
    w.block[i] = block[i];
  }
  w.static_smem = f->static_smem;
  w.dynamic_smem = static_cast<std::int32_t>(smem);
  w.registers = f->registers;
  CUgraphNode_st* node = nullptr;
  submit(w, f->dur_ns, stream_of(stream), &node);
  report_node_created(node, stream);
  return CUDA_SUCCESS;
}

bool is_device_pointer(const void* p) noexcept {
  std::lock_guard<std::mutex> lock(g->mu);
  for (const auto& [base, a] : g->allocations) {
    const auto* b = static_cast<const char*>(base);
    if (a.kind != AllocKind::kHost && static_cast<const char*>(p) >= b && static_cast<const char*>(p) < b + a.bytes) {
      return true;
    }
  }
  return false;
}

std::uint64_t stream_busy_until(CUstream_st* s) noexcept {
  std::lock_guard<std::mutex> lock(g->mu);
  return s->busy_until;
}

std::uint64_t device_busy_until() noexcept {
  std::lock_guard<std::mutex> lock(g->mu);
  std::uint64_t t = g->legacy.busy_until;
  for (const CUstream_st* s : g->streams) t = std::max(t, s->busy_until);
  return t;
}

// cudaMemcpyKind numbering (0 HtoH, 1 HtoD, 2 DtoH, 3 DtoD, 4 default).
CUresult copy_impl(void* dst, const void* src, std::size_t bytes, int kind, CUstream stream,
                   bool synchronous) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  ensure_context();
  if (bytes != 0 && (dst == nullptr || src == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (kind == 4) {
    const bool d = is_device_pointer(dst), s = is_device_pointer(src);
    kind = s ? (d ? 3 : 2) : (d ? 1 : 0);
  }
  if (bytes != 0) std::memmove(dst, src, bytes);
  Work w;
  w.kind = WorkKind::kMemcpy;
  w.bytes = bytes;
  switch (kind) {
    case 1:
      w.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
      break;
    case 2:
      w.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
      break;
    case 3:
      w.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
      break;
    default:
      w.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
      break;
  }
  w.src_kind = (kind == 2 || kind == 3) ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  w.dst_kind = (kind == 1 || kind == 3) ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  // PCIe-ish 20 GB/s for host copies, 1.5 TB/s on the device; bytes per ns.
  const std::int64_t rate = kind == 3 ? 1500 : 20;
  const std::int64_t dur = 1500 + static_cast<std::int64_t>(bytes) / rate;
  CUstream_st* s = stream_of(stream);
  CUgraphNode_st* node = nullptr;
  submit(w, dur, s, &node);
  report_node_created(node, stream);
  if (synchronous && node == nullptr) wait_until(stream_busy_until(s));
  return CUDA_SUCCESS;
}

CUresult fill_impl(void* dst, int value, std::size_t bytes, CUstream stream, bool synchronous) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  ensure_context();
  if (bytes != 0 && dst == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes != 0) std::memset(dst, value, bytes);
  Work w;
  w.kind = WorkKind::kMemset;
  w.bytes = bytes;
  w.value = static_cast<std::uint32_t>(value);
  w.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  CUstream_st* s = stream_of(stream);
  CUgraphNode_st* node = nullptr;
  submit(w, 800 + static_cast<std::int64_t>(bytes) / 2000, s, &node);
  report_node_created(node, stream);
  if (synchronous && node == nullptr) wait_until(stream_busy_until(s));
  return CUDA_SUCCESS;
}

// Tells CUPTI of a memory operation of the API call open on this thread.
// The runtime's exit teardown frees what is left through the same paths
// with no call open: that says nothing (the real runtime destroys its
// context there instead of freeing each allocation; what CUPTI reports
// then is not measured).
void report_memory(MemoryOp op) noexcept {
  const ToolHooks* t = tool();
  if (t == nullptr || tl_call == nullptr) return;
  op.device_id = 0;
  op.context_id = kContextId;
  op.correlation_id = current_correlation();
  t->memory(op);
}

// The default pool as an operation sees it, after the operation. g->mu held.
void describe_pool(MemoryOp* op) noexcept {
  op->pool_address = reinterpret_cast<std::uintptr_t>(&g->pool_size);
  op->pool_release_threshold = 0;
  op->pool_size = g->pool_size;
  op->pool_used = g->pool_used;
}

// Host memory stands in for device memory: copies really copy.
void* host_backing(std::size_t bytes) noexcept {
  return std::aligned_alloc(256, std::max<std::size_t>((bytes + 255) & ~std::size_t{255}, 256));
}

// cudaMalloc (kDevice) and cudaMallocHost (kHost, CUPTI's pinned memory):
// a backed block, recorded, reported as CUPTI's allocation record.
CUresult alloc_backed(void** p, std::size_t bytes, AllocKind kind) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ensure_context();
  void* m = host_backing(bytes);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->allocations.emplace(m, Allocation{bytes, kind});
  }
  *p = m;
  MemoryOp op;
  if (kind == AllocKind::kHost) op.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  op.address = reinterpret_cast<std::uintptr_t>(m);
  op.bytes = bytes;
  report_memory(op);
  return CUDA_SUCCESS;
}

CUresult alloc_impl(void** p, std::size_t bytes) noexcept { return alloc_backed(p, bytes, AllocKind::kDevice); }

CUresult release_impl(void* p) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_SUCCESS;
  MemoryOp op;
  op.kind = MemoryOpKind::kRelease;
  op.address = reinterpret_cast<std::uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    const auto it = g->allocations.find(p);
    if (it == g->allocations.end() || it->second.kind == AllocKind::kHost) return CUDA_ERROR_INVALID_VALUE;
    op.bytes = it->second.bytes;
    if (it->second.kind == AllocKind::kPooled) {
      // cudaFree of pool memory: back to its pool, which keeps it.
      g->pool_used -= it->second.bytes;
      describe_pool(&op);
    }
    g->allocations.erase(it);
  }
  // cudaFree synchronizes the device first.
  wait_until(device_busy_until());
  report_memory(op);
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult alloc_async_impl(void** p, std::size_t bytes, CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ensure_context();
  CUstream_st* s = stream_of(stream);
  // Graph memory nodes (an allocation under capture) are not modelled.
  if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  void* m = host_backing(bytes);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  MemoryOp created, op;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (!g->pool_created) {
      g->pool_created = first = true;
      created.kind = MemoryOpKind::kPoolCreated;
      describe_pool(&created);
      created.address = created.pool_address;
    }
    g->allocations.emplace(m, Allocation{bytes, AllocKind::kPooled});
    g->pool_used += bytes;
    // The pool grows by whole granules when what it holds is not enough;
    // it never shrinks here (the release threshold's trim at a
    // synchronization is not modelled).
    const std::uint64_t needed = (g->pool_used + kPoolGranule - 1) / kPoolGranule * kPoolGranule;
    g->pool_size = std::max(g->pool_size, needed);
    op.address = reinterpret_cast<std::uintptr_t>(m);
    op.bytes = bytes;
    op.is_async = true;
    op.stream_id = s->id;
    describe_pool(&op);
  }
  *p = m;
  if (first) report_memory(created);
  report_memory(op);
  return CUDA_SUCCESS;
}

CUresult release_async_impl(void* p, CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = stream_of(stream);
  MemoryOp op;
  op.kind = MemoryOpKind::kRelease;
  op.address = reinterpret_cast<std::uintptr_t>(p);
  op.is_async = true;
  op.stream_id = s->id;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    const auto it = g->allocations.find(p);
    if (it == g->allocations.end() || it->second.kind != AllocKind::kPooled) return CUDA_ERROR_INVALID_VALUE;
    op.bytes = it->second.bytes;
    g->pool_used -= it->second.bytes;
    g->allocations.erase(it);
    describe_pool(&op);
  }
  // In stream order on a real device; here copies and memsets have already
  // happened at submission, so the memory can go now.
  report_memory(op);
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult alloc_host_impl(void** p, std::size_t bytes) noexcept { return alloc_backed(p, bytes, AllocKind::kHost); }

CUresult release_host_impl(void* p) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_SUCCESS;
  MemoryOp op;
  op.kind = MemoryOpKind::kRelease;
  op.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  op.address = reinterpret_cast<std::uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    const auto it = g->allocations.find(p);
    if (it == g->allocations.end() || it->second.kind != AllocKind::kHost) return CUDA_ERROR_INVALID_VALUE;
    op.bytes = it->second.bytes;
    g->allocations.erase(it);
  }
  // cudaFreeHost synchronizes the device first, as cudaFree does.
  wait_until(device_busy_until());
  report_memory(op);
  std::free(p);
  return CUDA_SUCCESS;
}

void report_sync(CUpti_ActivitySynchronizationType type, std::uint64_t start, CUstream stream, std::uint32_t stream_id,
                 std::uint32_t event_id) noexcept {
  const ToolHooks* t = tool();
  if (t == nullptr || tl_call == nullptr) return;  // only API calls report their synchronization
  Sync s;
  s.type = type;
  s.start_ns = start;
  s.end_ns = now_ns();
  s.correlation_id = current_correlation();
  s.context_id = kContextId;
  s.context = &g->context;
  s.stream = stream;
  s.stream_id = stream_id;
  s.event_id = event_id;
  t->sync(s);
}

CUresult context_synchronize_impl() noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  ensure_context();
  const std::uint64_t start = now_ns();
  wait_until(device_busy_until());
  report_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, start, nullptr,
              CUPTI_SYNCHRONIZATION_INVALID_VALUE, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  return CUDA_SUCCESS;
}

CUresult stream_synchronize_impl(CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  ensure_context();
  CUstream_st* s = stream_of(stream);
  const std::uint64_t start = now_ns();
  wait_until(stream_busy_until(s));
  report_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, start, stream, s->id,
              CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  return CUDA_SUCCESS;
}

CUresult stream_create_impl(CUstream* out) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ensure_context();
  auto* s = new CUstream_st;
  s->id = g->next_stream_id.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->streams.push_back(s);
  }
  *out = s;
  if (const ToolHooks* t = tool()) t->resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, &g->context, s, nullptr);
  return CUDA_SUCCESS;
}

CUresult stream_destroy_impl(CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (stream_of(stream) == &g->legacy) return CUDA_ERROR_INVALID_HANDLE;
  if (const ToolHooks* t = tool())
    t->resource(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, &g->context, stream, nullptr);
  // Its queued work still runs; the handle goes now.
  std::lock_guard<std::mutex> lock(g->mu);
  auto it = std::find(g->streams.begin(), g->streams.end(), stream);
  if (it == g->streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  g->streams.erase(it);
  delete stream;
  return CUDA_SUCCESS;
}

CUresult event_create_impl(CUevent* out) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ensure_context();
  auto* e = new CUevent_st;
  e->id = g->next_event_id.fetch_add(1, std::memory_order_relaxed);
  *out = e;
  return CUDA_SUCCESS;
}

CUresult event_record_impl(CUevent e, CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const std::uint64_t t = stream_busy_until(stream_of(stream));
  std::lock_guard<std::mutex> lock(g->mu);
  e->done_at = std::max(t, now_ns());
  return CUDA_SUCCESS;
}

CUresult event_synchronize_impl(CUevent e) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::uint64_t done_at;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    done_at = e->done_at;
  }
  const std::uint64_t start = now_ns();
  wait_until(done_at);
  report_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, start, nullptr,
              CUPTI_SYNCHRONIZATION_INVALID_VALUE, e->id);
  return CUDA_SUCCESS;
}

CUresult event_destroy_impl(CUevent e) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete e;
  return CUDA_SUCCESS;
}

// ---- graphs ---------------------------------------------------------------------------

CUresult begin_capture_impl(CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  CUstream_st* s = stream_of(stream);
  if (s == &g->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // as the real driver
  ensure_context();
  auto* graph = new CUgraph_st;
  graph->id = g->next_graph_id.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (s->capture != nullptr) {
      delete graph;
      return CUDA_ERROR_ILLEGAL_STATE;
    }
    s->capture = graph;
  }
  if (const ToolHooks* t = tool()) {
    CUpti_GraphData d{};
    d.graph = graph;
    t->resource(CUPTI_CBID_RESOURCE_GRAPH_CREATED, &g->context, stream, &d);
  }
  return CUDA_SUCCESS;
}

CUresult end_capture_impl(CUstream stream, CUgraph* out) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = stream_of(stream);
  std::lock_guard<std::mutex> lock(g->mu);
  if (s->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *out = s->capture;
  s->capture = nullptr;
  return CUDA_SUCCESS;
}

// The executable graph holds a clone of every node. The RESOURCE callbacks
// follow what NVIDIA's cuda_graphs_trace sample relies on: each clone is
// CREATED (inside cudaGraphInstantiate) and then CLONED from its original.
CUresult graph_instantiate_impl(CUgraphExec* out, CUgraph graph) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (out == nullptr || graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new CUgraphExec_st;
  exec->id = g->next_exec_id.fetch_add(1, std::memory_order_relaxed);
  exec->graph_id = graph->id;
  exec->clone = std::make_unique<CUgraph_st>();
  exec->clone->id = g->next_graph_id.fetch_add(1, std::memory_order_relaxed);
  const ToolHooks* t = tool();
  if (t != nullptr) {
    CUpti_GraphData d{};
    d.graph = graph;
    t->resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, &g->context, nullptr, &d);
    d.graph = exec->clone.get();
    d.originalGraph = graph;
    t->resource(CUPTI_CBID_RESOURCE_GRAPH_CLONED, &g->context, nullptr, &d);
  }
  for (const auto& node : graph->nodes) {
    auto clone = std::make_unique<CUgraphNode_st>(*node);
    clone->id = g->next_node_id.fetch_add(1, std::memory_order_relaxed);
    clone->graph = exec->clone.get();
    CUgraphNode_st* raw = clone.get();
    exec->clone->nodes.push_back(std::move(clone));
    if (t != nullptr) {
      CUpti_GraphData d{};
      d.graph = exec->clone.get();
      d.node = raw;
      d.nodeType = node_type(*raw);
      t->resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &g->context, nullptr, &d);
      d.originalGraph = graph;
      d.originalNode = node.get();
      t->resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &g->context, nullptr, &d);
    }
  }
  *out = exec;
  if (t != nullptr) {
    CUpti_GraphData d{};
    d.graph = graph;
    d.graphExec = exec;
    t->resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &g->context, nullptr, &d);
  }
  return CUDA_SUCCESS;
}

// Each replayed node runs on the launch's stream, in capture order, with
// the launch call's correlation id; its record names the executable
// graph's node (the clone: what cuptiGetGraphNodeId gives for the node
// of a GRAPHNODE_CLONED callback) and the graph it was instantiated from.
CUresult graph_launch_impl(CUgraphExec exec, CUstream stream) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (exec == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ensure_context();
  CUstream_st* s = stream_of(stream);
  for (const auto& node : exec->clone->nodes) {
    Work w = node->tmpl;
    w.graph_node_id = node->id;
    w.graph_id = exec->graph_id;
    submit(w, node->dur_ns, s, nullptr);
  }
  return CUDA_SUCCESS;
}

CUresult graph_destroy_impl(CUgraph graph) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (const ToolHooks* t = tool()) {
    CUpti_GraphData d{};
    d.graph = graph;
    t->resource(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, &g->context, nullptr, &d);
  }
  delete graph;
  return CUDA_SUCCESS;
}

CUresult graph_exec_destroy_impl(CUgraphExec exec) noexcept {
  if (CUresult r = ready(); r != CUDA_SUCCESS) return r;
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (const ToolHooks* t = tool()) {
    CUpti_GraphData d{};
    d.graphExec = exec;
    t->resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &g->context, nullptr, &d);
  }
  delete exec;
  return CUDA_SUCCESS;
}

CUfunction function_impl(const char* name, std::int64_t dur_ns) noexcept {
  if (name == nullptr || g->state.load(std::memory_order_acquire) == State::kTornDown) return nullptr;
  std::lock_guard<std::mutex> lock(g->mu);
  auto& f = g->functions[name];
  if (!f) {
    f = std::make_unique<CUfunc_st>();
    f->name = name;
    // cuBLAS's nvjet kernels: what an H100 trace shows for them.
    if (f->name.rfind("nvjet", 0) == 0) {
      f->registers = 168;
      f->static_smem = 164308;
    }
  }
  f->dur_ns = dur_ns;
  return f.get();
}

const char* error_name_impl(CUresult r) noexcept {
  switch (r) {
    case CUDA_SUCCESS:
      return "no error";
    case CUDA_ERROR_INVALID_VALUE:
      return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "initialization error";
    case CUDA_ERROR_DEINITIALIZED:
      return "driver shutting down";
    case CUDA_ERROR_INVALID_DEVICE:
      return "invalid device ordinal";
    case CUDA_ERROR_INVALID_HANDLE:
      return "invalid resource handle";
    case CUDA_ERROR_ILLEGAL_STATE:
      return "the operation is not permitted in the current state";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return "operation not permitted when stream is capturing";
    default:
      return "unknown error";
  }
}

// ---- cuInit and the teardown ----------------------------------------------------------

// The primary context goes at exit: the device finishes its work, CUPTI
// hears of it (CONTEXT_DESTROY_STARTING; it hands back no buffers: on an
// H200 with CUPTI 13.0 a process that exited without a flush got none),
// and the driver refuses every call from then on.
void teardown() {
  if (g->state.load(std::memory_order_acquire) != State::kReady) return;
  wait_until(device_busy_until());
  if (g->have_context.load(std::memory_order_acquire)) {
    if (const ToolHooks* t = tool()) t->context_destroying(context_info());
  }
  g->state.store(State::kTornDown, std::memory_order_release);
}

CUresult init_once() noexcept {
  const char* order = std::getenv("STANDIN_DRIVER_ATEXIT");
  const bool after = order != nullptr && std::strcmp(order, "after") == 0;
  if (!after) std::atexit(teardown);
  g->state.store(State::kReady, std::memory_order_release);
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path != nullptr && *path != '\0') {
    // As the real driver: load it, call its entry point on this thread;
    // a library that does not load or lacks the entry point is skipped.
    if (void* h = dlopen(path, RTLD_NOW)) {
      using Init = int (*)();
      if (auto init = reinterpret_cast<Init>(dlsym(h, "InitializeInjection"))) init();
    }
  }
  if (after) std::atexit(teardown);
  return CUDA_SUCCESS;
}

CUresult init_impl() noexcept {
  // The injection may call back into the driver while cuInit runs.
  if (tl_in_init) return CUDA_SUCCESS;
  std::call_once(g->init_once, [] {
    tl_in_init = true;
    g->init_result = init_once();
    tl_in_init = false;
  });
  if (g->state.load(std::memory_order_acquire) == State::kTornDown) return CUDA_ERROR_DEINITIALIZED;
  return g->init_result;
}

// ---- what CUPTI and the runtime get ---------------------------------------------------

std::uint32_t graph_id_of(CUgraph graph) noexcept { return graph != nullptr ? graph->id : 0; }
std::uint64_t node_id_of(CUgraphNode node) noexcept { return node != nullptr ? node->id : 0; }
std::uint32_t exec_id_of(CUgraphExec exec) noexcept { return exec != nullptr ? exec->id : 0; }

bool have_context_impl() noexcept { return g->have_context.load(std::memory_order_acquire); }

const DriverForTool kForTool = {graph_id_of, node_id_of, exec_id_of, have_context_impl};

bool deinitialized_impl() noexcept { return g->state.load(std::memory_order_acquire) == State::kTornDown; }

const DriverInternal kInternal = {
    init_impl,
    deinitialized_impl,
    api_begin,
    api_end,
    launch_impl,
    copy_impl,
    fill_impl,
    alloc_impl,
    release_impl,
    alloc_async_impl,
    release_async_impl,
    alloc_host_impl,
    release_host_impl,
    context_synchronize_impl,
    stream_create_impl,
    stream_destroy_impl,
    stream_synchronize_impl,
    event_create_impl,
    event_record_impl,
    event_synchronize_impl,
    event_destroy_impl,
    begin_capture_impl,
    end_capture_impl,
    graph_instantiate_impl,
    graph_launch_impl,
    graph_destroy_impl,
    graph_exec_destroy_impl,
    function_impl,
    error_name_impl,
};

}  // namespace
}  // namespace standin

using standin::DriverCall;

extern "C" {

const standin::DriverForTool* standin_driver_attach_tool(const standin::ToolHooks* hooks) {
  if (standin::g->state.load(std::memory_order_acquire) == standin::State::kTornDown) return nullptr;
  standin::g->tool.store(hooks, std::memory_order_release);
  return &standin::kForTool;
}

void standin_driver_detach_tool(const standin::ToolHooks* hooks) {
  const standin::ToolHooks* expected = hooks;
  standin::g->tool.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
}

const standin::DriverInternal* standin_driver_internal() { return &standin::kInternal; }

CUfunction standin_get_function(const char* name, std::int64_t dur_ns) { return standin::function_impl(name, dur_ns); }

CUresult CUDAAPI cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // cuInit itself is not traced: CUPTI attaches while it runs.
  return standin::init_impl();
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  // Answers before cuInit too, as the real one does.
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = standin::error_name_impl(error);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDeviceGet_params p{device, ordinal};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDeviceGet, "cuDeviceGet", &p);
  if (device == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (ordinal != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  *device = 0;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDeviceGetCount_params p{count};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount, "cuDeviceGetCount", &p);
  if (count == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  *count = 1;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDeviceGetName_params p{name, len, dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetName, "cuDeviceGetName", &p);
  if (name == nullptr || len <= 0) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  std::strncpy(name, standin::device_info().name, static_cast<std::size_t>(len) - 1);
  name[len - 1] = '\0';
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDeviceTotalMem_v2_params p{bytes, dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2", &p);
  if (bytes == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  *bytes = standin::device_info().global_memory_bytes;
  return api.finish(CUDA_SUCCESS);
}

// The attributes a profiler reads to describe the device (cudaDeviceProp's
// fields); others answer CUDA_ERROR_INVALID_VALUE, as an unknown one does.
CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDeviceGetAttribute_params p{pi, attrib, dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute, "cuDeviceGetAttribute", &p);
  if (pi == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  const standin::DeviceInfo& d = standin::device_info();
  long long v = -1;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = d.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = d.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = d.max_threads_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = d.max_warps_per_sm * d.warp_size; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = d.regs_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = d.regs_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = d.warp_size; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = d.smem_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = d.smem_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = d.sms; break;
    // Hopper: 1 KiB reserved per block, the rest of the SM's 228 KiB opt-in.
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = d.smem_per_sm - 1024; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = d.core_clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = d.l2_cache; break;
    default: break;
  }
  if (v < 0) return api.finish(CUDA_ERROR_INVALID_VALUE);
  *pi = static_cast<int>(v);
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuCtxGetCurrent_params p{pctx};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent", &p);
  if (pctx == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  *pctx = standin::current_context();
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", nullptr);
  // The calling thread's context: none, no synchronize (a thread that
  // never used the runtime, such as a profiler's own).
  if (standin::current_context() == nullptr) return api.finish(CUDA_ERROR_INVALID_CONTEXT);
  return api.finish(standin::context_synchronize_impl());
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuCtxSetCurrent_params p{ctx};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent, "cuCtxSetCurrent", &p);
  if (ctx != nullptr && ctx != &standin::g->context) return api.finish(CUDA_ERROR_INVALID_CONTEXT);
  if (ctx == nullptr) {
    if (standin::tl_context_depth > 0) --standin::tl_context_depth;
  } else if (standin::tl_context_depth == 0) {
    standin::tl_contexts[standin::tl_context_depth++] = ctx;
  } else {
    standin::tl_contexts[standin::tl_context_depth - 1] = ctx;
  }
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuCtxPushCurrent_v2_params p{ctx};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2, "cuCtxPushCurrent_v2", &p);
  if (ctx != &standin::g->context) return api.finish(CUDA_ERROR_INVALID_CONTEXT);
  if (standin::tl_context_depth >= standin::kMaxContextDepth) return api.finish(CUDA_ERROR_INVALID_VALUE);
  standin::tl_contexts[standin::tl_context_depth++] = ctx;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuCtxPopCurrent_v2_params p{pctx};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2, "cuCtxPopCurrent_v2", &p);
  if (standin::tl_context_depth == 0) return api.finish(CUDA_ERROR_INVALID_CONTEXT);
  CUcontext top = standin::tl_contexts[--standin::tl_context_depth];
  if (pctx != nullptr) *pctx = top;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDevicePrimaryCtxGetState_params p{dev, flags, active};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", &p);
  if (flags == nullptr || active == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  *flags = 0;
  *active = standin::g->have_context.load(std::memory_order_acquire) ? 1 : 0;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDevicePrimaryCtxRetain_params p{pctx, dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &p);
  if (pctx == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  // Retaining creates the context when it does not exist yet; it does not
  // make it current (that is cuCtxPushCurrent's or cuCtxSetCurrent's).
  const int depth = standin::tl_context_depth;
  standin::ensure_context();
  standin::tl_context_depth = depth;
  *pctx = &standin::g->context;
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuDevicePrimaryCtxRelease_v2_params p{dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2", &p);
  // The runtime holds its own reference: the context stays.
  return api.finish(dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuStreamSynchronize_params p{hStream};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize", &p);
  return api.finish(standin::stream_synchronize_impl(hStream));
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuLaunchKernel_params p{f,         gridDimX,       gridDimY, gridDimZ,     blockDimX, blockDimY,
                          blockDimZ, sharedMemBytes, hStream,  kernelParams, extra};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &p);
  if (f != nullptr) api.set_symbol(f->name.c_str());
  const std::int32_t grid[3] = {static_cast<std::int32_t>(gridDimX), static_cast<std::int32_t>(gridDimY),
                                static_cast<std::int32_t>(gridDimZ)};
  const std::int32_t block[3] = {static_cast<std::int32_t>(blockDimX), static_cast<std::int32_t>(blockDimY),
                                 static_cast<std::int32_t>(blockDimZ)};
  return api.finish(standin::launch_impl(f, grid, block, sharedMemBytes, hStream));
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuLaunchKernelEx_params p{config, f, kernelParams, extra};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", &p);
  if (config == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (f != nullptr) api.set_symbol(f->name.c_str());
  const std::int32_t grid[3] = {static_cast<std::int32_t>(config->gridDimX),
                                static_cast<std::int32_t>(config->gridDimY),
                                static_cast<std::int32_t>(config->gridDimZ)};
  const std::int32_t block[3] = {static_cast<std::int32_t>(config->blockDimX),
                                 static_cast<std::int32_t>(config->blockDimY),
                                 static_cast<std::int32_t>(config->blockDimZ)};
  return api.finish(standin::launch_impl(f, grid, block, config->sharedMemBytes, config->hStream));
}

// CUkernel and CUfunction are the same objects here, as cuKernelGetFunction
// and the casts CUDA 12 allows between them make them for a kernel of the
// current context.
CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuKernelGetAttribute_params p{pi, attrib, kernel, dev};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, "cuKernelGetAttribute", &p);
  if (pi == nullptr || kernel == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  if (dev != 0) return api.finish(CUDA_ERROR_INVALID_DEVICE);
  const auto* f = reinterpret_cast<const CUfunc_st*>(kernel);
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *pi = f->static_smem;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = f->registers;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = 90;
      break;
    default:
      *pi = 0;
      break;
  }
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuKernelGetName_params p{name, hfunc};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, "cuKernelGetName", &p);
  if (name == nullptr || hfunc == nullptr) return api.finish(CUDA_ERROR_INVALID_VALUE);
  *name = reinterpret_cast<const CUfunc_st*>(hfunc)->name.c_str();
  return api.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuMemcpyHtoD_v2_params p{dstDevice, srcHost, ByteCount};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", &p);
  return api.finish(standin::copy_impl(reinterpret_cast<void*>(dstDevice), srcHost, ByteCount, 1, nullptr, true));
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  if (CUresult r = standin::ready(); r != CUDA_SUCCESS) return r;
  cuMemcpyDtoH_v2_params p{dstHost, srcDevice, ByteCount};
  DriverCall api(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", &p);
  return api.finish(standin::copy_impl(dstHost, reinterpret_cast<const void*>(srcDevice), ByteCount, 2, nullptr, true));
}

}  // extern "C"
