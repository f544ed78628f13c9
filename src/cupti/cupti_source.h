// The live CUPTI activity source: records kernels, copies, memsets, the
// CUDA runtime and driver calls torch.profiler records (or all of them),
// CUPTI's own overhead and, when asked, synchronizations and device memory
// allocations while a profiling window is open.
//
//   CuptiOptions options;
//   options.nvtx = &ranges;                 // NVTX ranges too, reported there
//   options.graph_nodes = &nodes;           // CUDA graph nodes as they are made
//   std::unique_ptr<ActivitySource> src = make_cupti_source(options);
//   if (Status s = src->start(); !s) note(s.error().message());  // CPU only
//   ...
//   DeviceBatch batch;
//   src->stop(&batch);                      // harmless after a failed start()
//
// libcupti is loaded with dlopen at the first start(), from (in order) the
// TPROF_CUPTI_LIBRARY environment variable, the path found when tprof was
// configured, "libcupti.so.13" and "libcupti.so". It is never unloaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "src/capture/activity_source.h"

namespace tprof::internal {

// Where NVTX ranges go: capture passes the recorder's push_range & co.
// (src/capture/recorder.h). Function pointers, so that this library needs
// only the interface header of capture, not capture itself (which links
// this one). Each is called on the thread that made the NVTX call.
struct NvtxRanges {
  void (*push)(std::string_view name) noexcept;
  void (*pop)() noexcept;
  void (*start)(std::uint64_t id, std::string_view name) noexcept;
  void (*end)(std::uint64_t id) noexcept;
};

// Where CUDA graph nodes go as the program makes them: capture passes the
// recorder's graph_node_created / graph_node_cloned (src/capture/recorder.h),
// function pointers for the same reason as NvtxRanges. `created` runs on
// the thread that made the node (a launch under stream capture, a
// cudaGraphAdd*Node, or inside cudaGraphInstantiate for the executable
// graph's copy), `cloned` right after it for a copy, naming the node it was
// copied from. Ids are CUPTI's (cuptiGetGraphNodeId), the ids replayed
// work carries in graphNodeId.
struct GraphNodes {
  void (*created)(std::uint64_t node) noexcept;
  void (*cloned)(std::uint64_t node, std::uint64_t original) noexcept;
};

// Which CUDA runtime and driver calls a window records.
enum class CuptiApiCalls : std::uint8_t {
  // Those torch.profiler records (Kineto's lists, src/cupti/kineto_api_calls.h):
  // every runtime call but cudaGetDevice, cudaSetDevice, cudaGetLastError
  // and cudaEvent{Create,CreateWithFlags,Destroy}; of the driver, only
  // cuLaunchKernel(Ex) and the cuMem* virtual memory calls. The others are
  // switched off in CUPTI itself, so they cost no records.
  kTorch = 0,
  // Every runtime and driver call the program makes.
  kAll = 1,
};

struct CuptiOptions {
  CuptiApiCalls api_calls = CuptiApiCalls::kTorch;
  // Also record synchronizations (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: cat
  // "cuda_sync", the host waiting on a stream, an event or the context),
  // as torch's _ExperimentalConfig(enable_cuda_sync_events=True). Off by
  // default, as in torch.
  bool sync_events = false;
  // Also record device memory: each allocation and release
  // (CUPTI_ACTIVITY_KIND_MEMORY2) and the reservations of cudaMallocAsync's
  // pools (CUPTI_ACTIVITY_KIND_MEMORY_POOL), handed over in
  // DeviceBatch::memory (ProfilerOptions::profile_memory, tprof record
  // --memory). Off by default: torch.profiler records memory only when asked.
  bool memory = false;
  // Also report NVTX push/pop and start/end ranges here (null: not at all).
  // NVTX calls reach CUPTI only when NVTX_INJECTION64_PATH names libcupti
  // (tprof record sets it). Must outlive the source.
  const NvtxRanges* nvtx = nullptr;
  // Also report CUDA graph nodes created and cloned while the source is
  // started (CUPTI's RESOURCE callbacks GRAPHNODE_CREATED and
  // GRAPHNODE_CLONED; null: not at all). Must outlive the source.
  const GraphNodes* graph_nodes = nullptr;
  // Size of each activity buffer handed to CUPTI (rounded up to 8 bytes).
  std::size_t buffer_bytes = std::size_t{4} << 20;
  // Buffers CUPTI may hold at once; beyond that it drops records and counts
  // them (reported in DeviceBatch::dropped and as a problem).
  std::size_t max_buffers = 32;
  // Hand every completed buffer back unread: CUPTI set up exactly as above,
  // nothing converted, stop() returns no device activity. What CUPTI itself
  // costs with tprof's settings: bench/cuda_capture_bench's floor.
  bool discard_records = false;
};

// Creates the source. One source may be started per process at a time (CUPTI
// has one set of activity callbacks); start() on a second one fails with
// kUnsupported while the first runs. Control-thread calls only.
std::unique_ptr<ActivitySource> make_cupti_source(const CuptiOptions& options);

// make_cupti_source as capture reaches it: the entry point of CUDA capture
// (issue 42, item 3). capture does not link this library; it references
// this symbol weakly (src/capture/profiler.cc), and only tprof::cuda
// (pkg-config tprof-cuda) defines it in a program: from libtprof_cupti.a,
// pulled out by --undefined=tprof_make_cuda_source, or exported by
// libtprof_cuda.so (libtprof_cuda.map). A program that links tprof::capture
// alone keeps a null weak reference and none of this library's code. A C
// name without "cupti" in it, so that the reference left in such a program
// is not mistaken for CUPTI code (tests/consumer, tests/link). Returns a
// new source, owned by the caller.
extern "C" __attribute__((visibility("default"))) ActivitySource* tprof_make_cuda_source(const CuptiOptions& options);

// Loads libcupti now (as the first start() would), without subscribing.
// tprof record calls it before registering its exit handler: a library
// loaded later has its static destructors run before that handler at exit
// (glibc runs exit functions in reverse order of registration), and CUPTI
// used after its own teardown crashes. Errors as start()'s.
Status preload_cupti();

// What the NVTX callback does with one CUPTI_CB_DOMAIN_NVTX callback:
// `cbid` is its CUpti_CallbackId, `data` its CUpti_NvtxData. Every push is
// answered with a push (named "nvtx range" when the text is not at hand) so
// that pops pair up. Exposed for tests (no NVTX or GPU needed).
void report_nvtx(const NvtxRanges& ranges, std::uint32_t cbid, const void* data) noexcept;

// What the RESOURCE callback does with one CUPTI_CB_DOMAIN_RESOURCE
// callback: `cbid` is its CUpti_CallbackIdResource, `data` its
// CUpti_ResourceData; `node_id` gives a CUgraphNode's id (CUPTI's
// cuptiGetGraphNodeId; 0 when it fails, and the node is then not
// reported). Only GRAPHNODE_CREATED and GRAPHNODE_CLONED are reported.
// Exposed for tests (no CUDA or GPU needed).
void report_graph_node(const GraphNodes& nodes, std::uint32_t cbid, const void* data,
                       std::uint64_t (*node_id)(const void* node) noexcept) noexcept;

}  // namespace tprof::internal
