// tprof::Profiler in a C++ program on the CUDA stand-in (tests/standin/):
// the program links tprof and the stand-in runtime, no injection; tprof
// loads the stand-in CUPTI (TPROF_CUPTI_LIBRARY) when a window starts.
// CUDA graphs across windows: a graph captured inside tprof scopes in one
// window and replayed in later ones names the scopes it was captured in
// (by name, from the process's table); a graph captured while no window
// recorded names none. profile_memory: CUDA's allocations as [memory]
// records on the allocating thread.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "src/capture/activity_source.h"
#include "src/cupti/cupti_source.h"
#include "tests/standin/standin.h"
#include "tests/support/trace_queries.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

namespace tprof {
namespace {

using testing::arg_text;

void gemm_stub() {}
void add_stub() {}
void early_stub() {}
constexpr const char kGemm[] = "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT";
constexpr const char kAdd[] = "add_kernel";
constexpr const char kEarly[] = "early_kernel";

// As nvcc's registration code: before main.
struct RegisterKernels {
  RegisterKernels() {
    standin_register_kernel(reinterpret_cast<const void*>(&gemm_stub), kGemm, 2100);
    standin_register_kernel(reinterpret_cast<const void*>(&add_stub), kAdd, 1300);
    standin_register_kernel(reinterpret_cast<const void*>(&early_stub), kEarly, 1000);
  }
} g_register_kernels;

void launch(void (*stub)(), cudaStream_t s) {
  void* no_args[1] = {nullptr};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(stub), dim3(4, 2, 1), dim3(256, 1, 1), no_args, 0, s),
            cudaSuccess);
}

cudaGraphExec_t instantiate(cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  {
    TPROF_RECORD_OP("cuda_graph::instantiate");  // the copies are made here: not where the work was captured
    EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  }
  return exec;
}

// A GEMM inside op::mm inside "graph_gemm", an add directly inside "graph_add".
cudaGraphExec_t capture_in_scopes(cudaStream_t s) {
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  {
    TPROF_RECORD_FUNCTION("graph_gemm");
    TPROF_RECORD_OP("op::mm");
    launch(&gemm_stub, s);
  }
  {
    TPROF_RECORD_FUNCTION("graph_add");
    launch(&add_stub, s);
  }
  return instantiate(s);
}

// One kernel inside "early": captured before any window records.
cudaGraphExec_t capture_early(cudaStream_t s) {
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  {
    TPROF_RECORD_FUNCTION("early");
    launch(&early_stub, s);
  }
  return instantiate(s);
}

ProfilerOptions cuda_options() {
  ProfilerOptions o;
  o.activities = {Activity::kCpu, Activity::kCuda};
  return o;
}

// Per kernel name: the "graph node scope" of each of its events, in order.
std::map<std::string, std::vector<std::string>> graph_scopes(const Trace& t) {
  std::map<std::string, std::vector<std::string>> out;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] == EventKind::kKernel) out[std::string(t.name(e))].push_back(arg_text(t, e, "graph node scope"));
  }
  return out;
}

std::size_t count(const Trace& t, std::string_view cat, std::string_view name) {
  std::size_t n = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) n += t.cat(e) == cat && t.name(e) == name;
  return n;
}

TEST(StandinProfiler, GraphReplaysNameTheirCaptureScopesInEveryWindow) {
  setenv("TPROF_CUPTI_LIBRARY", STANDIN_CUPTI, 1);
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const cudaGraphExec_t early = capture_early(s);  // no window: tprof sees nothing of it

  // Window 1: the capture, and a replay inside "replay".
  cudaGraphExec_t graph = nullptr;
  {
    Profiler p(cuda_options());
    ASSERT_TRUE(p.start().ok());
    graph = capture_in_scopes(s);
    {
      TPROF_RECORD_FUNCTION("replay");
      ASSERT_EQ(cudaGraphLaunch(graph, s), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_TRUE(p.stop().ok());
    const Trace& t = p.trace();
    EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kActivityUnavailable), 0u);
    const auto scopes = graph_scopes(t);
    EXPECT_EQ(scopes.at(kGemm), std::vector<std::string>{"op::mm"});
    EXPECT_EQ(scopes.at(kAdd), std::vector<std::string>{"graph_add"});
    EXPECT_EQ(count(t, "gpu_user_annotation", "graph_gemm"), 1u);
    EXPECT_EQ(count(t, "gpu_user_annotation", "graph_add"), 1u);
  }

  // Window 2: two replays of it and one of the early graph, inside an op.
  {
    Profiler p(cuda_options());
    ASSERT_TRUE(p.start().ok());
    {
      TPROF_RECORD_OP("graphed_forward");
      ASSERT_EQ(cudaGraphLaunch(graph, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(graph, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(early, s), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_TRUE(p.stop().ok());
    const Trace& t = p.trace();
    const auto scopes = graph_scopes(t);
    EXPECT_EQ(scopes.at(kGemm), (std::vector<std::string>{"op::mm", "op::mm"}));
    EXPECT_EQ(scopes.at(kAdd), (std::vector<std::string>{"graph_add", "graph_add"}));
    EXPECT_EQ(scopes.at(kEarly), std::vector<std::string>{"<none>"});
    // A span per replay for each capture annotation, linked to no event of
    // this window; the kernels' External id is graphed_forward's.
    EXPECT_EQ(count(t, "gpu_user_annotation", "graph_gemm"), 2u);
    EXPECT_EQ(count(t, "gpu_user_annotation", "graph_add"), 2u);
    EXPECT_EQ(count(t, "gpu_user_annotation", "early"), 0u);
    std::int64_t graphed = -1;
    for (std::uint32_t e = 0; e < t.events.size(); ++e) {
      if (t.name(e) == "graphed_forward") graphed = t.events.external_id[e];
    }
    for (std::uint32_t e = 0; e < t.events.size(); ++e) {
      if (t.events.kind[e] == EventKind::kKernel) {
        EXPECT_EQ(t.events.external_id[e], graphed) << t.name(e);
      }
      if (t.cat(e) == "gpu_user_annotation") {
        EXPECT_EQ(t.events.external_id[e], -1) << t.name(e);
      }
    }
    EXPECT_EQ(count(t, "cpu_op", "op::mm"), 0u);
  }
  ASSERT_EQ(cudaGraphExecDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(early), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// matmul_add on an H200: the context and cuBLAS made before the window, a
// GEMM launched through the driver (cuLaunchKernelEx) and the add through
// the runtime in each step. CUPTI's per-call driver switches, set once the
// context exists, record nothing (the GEMMs were linked to no launch and no
// step), and CUPTI writes no DEVICE record then ("deviceProperties": [],
// "blocks per SM": "inf"). The window takes the DRIVER kind and asks the
// driver for the devices; the converter keeps only the calls torch keeps.
TEST(StandinProfiler, AWindowOpenedOnARunningProgramHasItsDriverLaunchesAndItsDevice) {
  setenv("TPROF_CUPTI_LIBRARY", STANDIN_CUPTI, 1);
  void* no_args[1] = {nullptr};
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);  // the context, before any window
  auto get = reinterpret_cast<CUfunction (*)(const char*, std::int64_t)>(
      dlsym(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "standin_get_function"));
  auto launch_ex = reinterpret_cast<CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**)>(
      dlsym(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "cuLaunchKernelEx"));
  ASSERT_NE(get, nullptr);
  ASSERT_NE(launch_ex, nullptr);
  const CUfunction gemm = get("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 170000);
  CUlaunchConfig config{};
  config.gridDimX = 2;
  config.gridDimY = 66;
  config.gridDimZ = 1;
  config.blockDimX = 384;
  config.blockDimY = config.blockDimZ = 1;
  ASSERT_EQ(launch_ex(&config, gemm, no_args, nullptr), CUDA_SUCCESS);  // warm-up, outside
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  Profiler prof(cuda_options());
  ASSERT_TRUE(prof.start().ok());
  for (int i = 0; i < 3; ++i) {
    TPROF_RECORD_FUNCTION("matmul_add");
    ASSERT_EQ(launch_ex(&config, gemm, no_args, nullptr), CUDA_SUCCESS);
    launch(&add_stub, nullptr);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(prof.stop().ok());
  const Trace& t = prof.trace();
  EXPECT_EQ(count(t, "cuda_driver", "cuLaunchKernelEx"), 3u);
  EXPECT_EQ(count(t, "cuda_runtime", "cudaLaunchKernel"), 3u);
  // What torch leaves out stays out: the runtime's cuKernelGetName before
  // each launch, tprof's own device queries.
  EXPECT_EQ(count(t, "cuda_driver", "cuKernelGetName"), 0u);
  EXPECT_EQ(count(t, "cuda_driver", "cuDeviceGetAttribute"), 0u);
  // Every kernel has its launch: correlation and External id (matmul_add's).
  std::map<std::int64_t, std::uint32_t> launches;
  std::int64_t scope_ids = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    const EventKind k = t.events.kind[e];
    if (k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) launches[t.events.correlation[e]] = e;
  }
  std::size_t kernels = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] != EventKind::kKernel) continue;
    ++kernels;
    EXPECT_EQ(launches.count(t.events.correlation[e]), 1u) << t.name(e);
    scope_ids += t.events.external_id[e] >= 0 ? 1 : 0;
    EXPECT_NE(arg_text(t, e, "blocks per SM"), "inf") << t.name(e);
  }
  EXPECT_EQ(kernels, 6u);
  EXPECT_EQ(scope_ids, 6);
  const std::string_view props = t.meta.top_level_json("deviceProperties");
  EXPECT_NE(props.find("\"name\": \"NVIDIA H100 80GB HBM3 (stand-in)\""), std::string_view::npos) << props;
  EXPECT_NE(props.find("\"sharedMemPerBlockOptin\": 232448"), std::string_view::npos) << props;
  // torch's top-level keys (issue 40 item 7), from the stand-ins' versions.
  EXPECT_EQ(t.meta.top_level_json("cuda_driver_version"), std::to_string(CUDA_VERSION));
  EXPECT_EQ(t.meta.top_level_json("cuda_runtime_version"), std::to_string(CUDART_VERSION));
  EXPECT_EQ(t.meta.top_level_json("trace_id").size(), 34u);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// profile_memory with CUDA activity covers CUDA's allocations as torch's
// covers its caching allocator's: each cudaMalloc / cudaFree in the window
// is a [memory] record on the thread that called it, inside that call,
// which is linked to the op around it; the program's own CPU hooks share
// the window. Without profile_memory there is none.
TEST(StandinProfiler, ProfileMemoryRecordsCudasAllocationsOnTheirThreads) {
  setenv("TPROF_CUPTI_LIBRARY", STANDIN_CUPTI, 1);
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  for (const bool memory : {false, true}) {
    ProfilerOptions options = cuda_options();
    options.profile_memory = memory;
    Profiler prof(options);
    ASSERT_TRUE(prof.start().ok());
    void* a = nullptr;
    {
      TPROF_RECORD_OP("op::alloc");
      ASSERT_EQ(cudaMalloc(&a, 1 << 20), cudaSuccess);
    }
    char block[64];
    record_alloc(block, sizeof block);
    std::thread([] {
      TPROF_RECORD_OP("op::worker");
      void* w = nullptr;
      EXPECT_EQ(cudaMalloc(&w, 2 << 20), cudaSuccess);
      EXPECT_EQ(cudaFree(w), cudaSuccess);
    }).join();
    {
      TPROF_RECORD_OP("op::free");
      ASSERT_EQ(cudaFree(a), cudaSuccess);
    }
    record_free(block, sizeof block);
    ASSERT_TRUE(prof.stop().ok());
    const Trace& t = prof.trace();
    if (!memory) {
      EXPECT_TRUE(t.memory.empty());
      continue;
    }
    // (op, bytes, device type) of each record, in time order.
    std::vector<std::tuple<std::int64_t, std::string, std::int64_t, int>> seen;
    std::set<std::int64_t> tids;
    for (const MemoryRecord& m : t.memory) {
      const std::uint32_t e = m.event;
      std::string op = "-";
      if (m.device_type == 1) {
        // The runtime call it lies in, on its lane; the op that call is linked to.
        for (std::uint32_t c = 0; c < t.events.size(); ++c) {
          if (t.events.kind[c] != EventKind::kCudaRuntime || t.events.lane[c] != t.events.lane[e] ||
              t.events.ts_ns[c] > t.events.ts_ns[e] || t.events.ts_ns[c] + t.events.dur_ns[c] < t.events.ts_ns[e]) {
            continue;
          }
          EXPECT_EQ(t.name(c), m.bytes > 0 ? "cudaMalloc" : "cudaFree");
          for (std::uint32_t o = 0; o < t.events.size(); ++o) {
            if (t.events.kind[o] == EventKind::kCpuOp && t.events.external_id[o] == t.events.external_id[c]) {
              op = std::string(t.name(o));
            }
          }
        }
        tids.insert(t.lanes[t.events.lane[e]].tid.num);
      }
      seen.emplace_back(t.events.ts_ns[e], op, m.bytes, m.device_type);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<std::tuple<std::string, std::int64_t, int>> got;
    for (const auto& [ts, op, bytes, type] : seen) got.emplace_back(op, bytes, type);
    const std::vector<std::tuple<std::string, std::int64_t, int>> expected = {
        {"op::alloc", 1 << 20, 1}, {"-", 64, 0},  {"op::worker", 2 << 20, 1},
        {"op::worker", -(2 << 20), 1}, {"op::free", -(1 << 20), 1}, {"-", -64, 0},
    };
    EXPECT_EQ(got, expected);
    EXPECT_EQ(tids.size(), 2u);  // the main thread and the worker
    // The running total over both threads, in time order: 1 MiB, 3 MiB, 1 MiB, 0.
    std::vector<std::int64_t> totals;
    for (const MemoryRecord& m : t.memory) {
      if (m.device_type == 1) totals.push_back(m.total_allocated);
    }
    std::sort(totals.begin(), totals.end());
    EXPECT_EQ(totals, (std::vector<std::int64_t>{0, 1 << 20, 1 << 20, 3 << 20}));
  }
}

// cuda_capture_bench's floor: tprof's CUPTI source set up as a window sets
// it up, its buffers handed back unread. The same launches give the plain
// source its kernel and the discarding one no activity at all.
TEST(StandinCuptiSource, ADiscardingSourceKeepsNoActivity) {
  setenv("TPROF_CUPTI_LIBRARY", STANDIN_CUPTI, 1);
  for (const bool discard : {false, true}) {
    SCOPED_TRACE(discard ? "discard_records" : "plain");
    internal::CuptiOptions options;
    options.discard_records = discard;
    std::unique_ptr<internal::ActivitySource> source(tprof_make_cuda_source(options));
    ASSERT_TRUE(source->start().ok());
    launch(gemm_stub, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    internal::DeviceBatch batch;
    source->stop(&batch);
    const auto kernels = std::count_if(batch.events.begin(), batch.events.end(), [&](const internal::DeviceEvent& e) {
      return e.kind == internal::DeviceEventKind::kKernel && batch.name(e) == kGemm;
    });
    EXPECT_EQ(kernels, discard ? 0 : 1);
    if (discard) EXPECT_TRUE(batch.events.empty());
    EXPECT_EQ(batch.dropped, 0u);
  }
}

}  // namespace
}  // namespace tprof
