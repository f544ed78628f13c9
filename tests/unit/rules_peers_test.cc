// The peers' rules (HolisticTraceAnalysis, the TensorBoard plugin, Nsight
// Systems) and the trace-health rules: for each, one small trace that shows
// the pattern and one that does not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/kineto_events.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using testing::corr;
using testing::doc;
using testing::kernel;
using testing::launch;
using testing::step;
using testing::x;

std::vector<Finding> run(const std::string& text, const std::string& id) {
  Result<Trace> t = read_trace_bytes(text);
  EXPECT_TRUE(t);
  if (!t) return {};
  return diagnose(*t, {.only = {id}}).findings;
}

const Evidence::Field& field(const Finding& f, std::string_view key) {
  const Evidence::Field* p = f.evidence.find(key);
  EXPECT_NE(p, nullptr) << key;
  static const Evidence::Field empty;
  return p != nullptr ? *p : empty;
}

TEST(RulesPeers, KernelLaunchStatsShortKernelsAndDelays) {
  std::vector<std::string> ev = {step(1, 0, 3000)};
  // 20 launches of 10 µs each running a 2 µs kernel on an idle stream.
  for (int i = 0; i < 20; ++i) {
    ev.push_back(launch(10 + 40 * i, 10, i + 1));
    ev.push_back(kernel("tiny", 7, 22 + 40 * i, 2, i + 1));
  }
  // Three launches whose kernel starts 300 µs after the call ends, stream
  // idle.
  for (int j = 0; j < 3; ++j) {
    ev.push_back(launch(900 + 400 * j, 5, 100 + j));
    ev.push_back(kernel("late", 7, 1205 + 400 * j, 50, 100 + j));
  }
  // On one stream with no stream wait the delays are the device held from
  // outside (low_gpu_utilization's "check the GPU"): no delay pattern here.
  {
    auto alone = run(doc(ev), "kernel_launch_stats");
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(alone[0].title.find("launch delay"), std::string::npos) << alone[0].title;
    EXPECT_EQ(alone[0].advice.find("delayed kernels"), std::string::npos) << alone[0].advice;
  }
  // A second stream shows work to wait for: HTA's delay outliers.
  ev.insert(ev.begin() + 1, kernel("side", 8, 1, 1, 900));
  auto f = run(doc(ev), "kernel_launch_stats");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "kernel_launch_stats");
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "launches").i, 23);
  EXPECT_EQ(field(f[0], "short_kernels").i, 20);
  EXPECT_EQ(field(f[0], "short_kernels_idle_stream").i, 20);
  EXPECT_EQ(field(f[0], "launch_delay_outliers").i, 3);
  EXPECT_EQ(field(f[0], "worst_launch_delay_ns").i, 300000);
  EXPECT_EQ(field(f[0], "worst_delay_activity").events.at(0).name, "late");
  EXPECT_EQ(field(f[0], "runtime_outliers").i, 0);
  // The impact is the device idle time the launches leave, not their host
  // time: at least the three 300 µs delays.
  EXPECT_GE(f[0].impact_ns, 900000);
  EXPECT_EQ(f[0].impact_ns, field(f[0], "gpu_idle_ns").i);

  // One late launch is an anecdote: the finding keeps the short kernels
  // only.
  ev.resize(ev.size() - 4);
  f = run(doc(ev), "kernel_launch_stats");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "launch_delay_outliers").i, 1);
  EXPECT_EQ(f[0].title.find("launch delay"), std::string::npos) << f[0].title;
  EXPECT_EQ(f[0].advice.find("delayed kernels"), std::string::npos) << f[0].advice;

  // Kernels longer than their 5 µs launches, queued back to back: silent.
  std::vector<std::string> ok = {step(1, 0, 5000)};
  for (int i = 0; i < 20; ++i) {
    ok.push_back(launch(10 + 10 * i, 5, i + 1));
    ok.push_back(kernel("gemm", 7, 20 + 200 * i, 200, i + 1));
  }
  EXPECT_TRUE(run(doc(ok), "kernel_launch_stats").empty());

  // One launch whose kernel starts 64 ms late: an anecdote, not a
  // distribution (hta_backward_thread); too few launches: silent.
  EXPECT_TRUE(run(doc({step(1, 0, 70000), launch(10, 5, 1), kernel("late", 7, 64015, 50, 1)}), "kernel_launch_stats")
                  .empty());
}

TEST(RulesPeers, KernelLaunchStatsCountsAGraphLaunchOnce) {
  // 19 launches plus one cudaGraphLaunch that runs 30 kernels: 20 launches,
  // the graph's device time is the sum of its kernels (30 µs > its 20 µs
  // call: not a short kernel), its delay that of its first kernel.
  std::vector<std::string> ev = {step(1, 0, 5000)};
  for (int i = 0; i < 19; ++i) {
    ev.push_back(launch(10 + 40 * i, 10, i + 1));
    ev.push_back(kernel("tiny", 7, 22 + 40 * i, 2, i + 1));
  }
  ev.push_back(x("cuda_runtime", "cudaGraphLaunch", 1, 1, 1000, 20, corr(500)));
  for (int k = 0; k < 30; ++k) ev.push_back(kernel("graph_k", 7, 1025 + 2 * k, 1, 500));
  auto f = run(doc(ev), "kernel_launch_stats");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "launches").i, 20);
  EXPECT_EQ(field(f[0], "graph_launches").i, 1);
  EXPECT_EQ(field(f[0], "short_kernels").i, 19);
  EXPECT_EQ(f[0].advice.rfind("Move more of the step into the graphs it already replays", 0), 0u) << f[0].advice;
  EXPECT_EQ(f[0].advice.find("delayed kernels"), std::string::npos) << f[0].advice;  // none were found
}

TEST(RulesPeers, KernelLaunchStatsCountsALaunchKinetoCouldNotName) {
  // An older Kineto writes "INVALID" for cudaLaunchKernelExC (Triton's and
  // CUTLASS's launches; the DCGAN run in tests/data/public/warming423_pf
  // has 48): joined to its kernel by correlation id, it is a launch. Ten
  // named and ten unnamed launches of 2 us kernels are 20 launches (ten
  // were too few for a distribution, and the rule was silent).
  std::vector<std::string> ev = {step(1, 0, 3000)};
  for (int i = 0; i < 20; ++i) {
    ev.push_back(i % 2 == 0 ? launch(10 + 40 * i, 10, i + 1)
                            : x("cuda_runtime", "INVALID", 1, 1, 10 + 40 * i, 10, corr(i + 1)));
    ev.push_back(kernel("tiny", 7, 22 + 40 * i, 2, i + 1));
  }
  auto f = run(doc(ev), "kernel_launch_stats");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "launches").i, 20);
  EXPECT_EQ(field(f[0], "short_kernels").i, 20);
}

TEST(RulesPeers, LaunchRemedyForACompiledStepDoesNotSayCompileIt) {
  // Issue 38's eleventh round: a vLLM prefill under torch.compile, its
  // GPU idle while the host launched op after op, was told to "fuse small
  // ops (torch.compile)". A step inside Inductor's compiled graph is told
  // what is left: graphs or more work per op.
  auto events = [](const std::string& scope) {
    std::vector<std::string> ev = {step(1, 0, 3000), x("user_annotation", scope, 1, 1, 1, 2990)};
    for (int i = 0; i < 40; ++i) {
      ev.push_back(launch(10 + 70 * i, 10, i + 1));
      ev.push_back(kernel("triton_poi_fused_add_0", 7, 22 + 70 * i, 3, i + 1));
    }
    return doc(ev);
  };
  auto compiled = run(events("## Call CompiledFxGraph fabc123 ##"), "low_gpu_utilization");
  ASSERT_EQ(compiled.size(), 1u);
  EXPECT_NE(compiled[0].advice.find("the step already runs Inductor's compiled graphs"), std::string::npos)
      << compiled[0].advice;
  EXPECT_EQ(compiled[0].advice.find("fuse small ops (torch.compile)"), std::string::npos) << compiled[0].advice;
  // The same step in an eager scope keeps the fusion advice.
  auto eager = run(events("forward"), "low_gpu_utilization");
  ASSERT_EQ(eager.size(), 1u);
  EXPECT_NE(eager[0].advice.find("fuse small ops (torch.compile)"), std::string::npos) << eager[0].advice;
}

TEST(RulesPeers, LowGpuUtilization) {
  auto f = run(doc({step(1, 0, 1000), launch(10, 5, 1), kernel("k", 7, 20, 100, 1)}), "low_gpu_utilization");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "device").i, 0);
  EXPECT_EQ(field(f[0], "kernel_busy_ns").i, 100000);
  EXPECT_EQ(field(f[0], "window_ns").i, 1000000);
  EXPECT_NEAR(field(f[0], "utilization_pct").d, 10.0, 1e-9);
  EXPECT_EQ(field(f[0], "longest_gap_ns").i, 880000);
  EXPECT_EQ(f[0].impact_ns, 900000);
  EXPECT_TRUE(run(doc({step(1, 0, 1000), launch(10, 5, 1), kernel("k", 7, 20, 800, 1)}), "low_gpu_utilization").empty());
}

TEST(RulesPeers, LowGpuUtilizationLeavesACopyBoundStepToTheCopyRules) {
  // Issue 38's eleventh round (tuning half): a benchmark step that copies
  // 21 MB host to device for 834 us and runs two 15 us kernels is busy
  // copying 78% of the step: "each step makes one launch call ... the GPU
  // runs each launch faster than the host makes the next" was wrong. A
  // copy that fills the step is not idle time to launch into.
  const std::string copy = x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 100, 800, corr(1) + R"(, "bytes": 20971520)");
  auto f = run(doc({step(1, 0, 1000), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 90, 820, corr(1)), copy,
                    launch(915, 5, 2), kernel("mul", 7, 925, 15, 2), launch(945, 5, 3), kernel("mul", 7, 955, 15, 3)}),
               "low_gpu_utilization");
  EXPECT_TRUE(f.empty());
  // The same step with a copy of 100 us: the GPU idles, and the finding stays.
  const std::string small = x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 100, 100, corr(1) + R"(, "bytes": 2097152)");
  f = run(doc({step(1, 0, 1000), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 90, 120, corr(1)), small, launch(915, 5, 2),
               kernel("mul", 7, 925, 15, 2), launch(945, 5, 3), kernel("mul", 7, 955, 15, 3)}),
          "low_gpu_utilization");
  EXPECT_EQ(f.size(), 1u);
}

TEST(RulesPeers, LowGpuUtilizationLeavesDataLoaderWaitsToDataLoaderBound) {
  // The GPU idles 900 µs of the 1 ms step, 600 µs of it while the host
  // waits in the DataLoader: that is dataloader_bound's, claimed once.
  const std::string dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
  auto f = run(doc({step(1, 0, 1000), x("user_annotation", dl, 1, 1, 0, 600), launch(700, 5, 1),
                    kernel("k", 7, 710, 100, 1)}),
               "low_gpu_utilization");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_LE(f[0].impact_ns, 300000);
  EXPECT_GT(f[0].impact_ns, 0);
  EXPECT_EQ(f[0].advice.find("Record only the timed iterations"), std::string::npos) << f[0].advice;
}

TEST(RulesPeers, DataLoaderBound) {
  const std::string dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
  auto f = run(doc({step(1, 0, 100), x("user_annotation", dl, 1, 1, 0, 20), step(2, 100, 100),
                    x("user_annotation", dl, 1, 1, 100, 20)}),
               "dataloader_bound");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "dataloader_ns").i, 40000);
  EXPECT_EQ(field(f[0], "step_total_ns").i, 200000);
  EXPECT_NEAR(field(f[0], "dataloader_pct").d, 20.0, 1e-9);
  EXPECT_EQ(field(f[0], "steps").ints, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(field(f[0], "longest_dataloader").events.at(0).name, dl);
  EXPECT_TRUE(run(doc({step(1, 0, 100), x("user_annotation", dl, 1, 1, 0, 3)}), "dataloader_bound").empty());
}

TEST(RulesPeers, CommExposed) {
  auto f = run(doc({step(1, 0, 100), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 10, 30, 1),
                    kernel("gemm", 7, 30, 20, 2)}),
               "comm_exposed");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "exposed_comm_ns").i, 20000);
  EXPECT_EQ(field(f[0], "comm_ns").i, 30000);
  EXPECT_NEAR(field(f[0], "exposed_comm_pct").d, 20.0, 1e-9);
  EXPECT_EQ(field(f[0], "worst_comm").events.at(0).name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(f[0].impact_ns, 20000);
  // The same all-reduce hidden under compute.
  EXPECT_TRUE(run(doc({step(1, 0, 100), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 10, 30, 1),
                       kernel("gemm", 7, 0, 100, 2)}),
                  "comm_exposed")
                  .empty());
  EXPECT_TRUE(f[0].title.find("of the step time") != std::string::npos) << f[0].title;
  // Without steps the share is the trace's, and the title says so (issue
  // 38's thirteenth round: "of the step time" on a vLLM trace with none).
  auto whole = run(doc({kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 10, 30, 1), kernel("gemm", 7, 40, 60, 2)}),
                   "comm_exposed");
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_TRUE(whole[0].title.find("of the trace is communication") != std::string::npos) << whole[0].title;
}

// The exposed time by collective: the kernel's "Collective name", else the
// ops around its launch (c10d::alltoall_base_ over a SendRecv kernel, which
// alone says nothing: NCCL's all-to-all is sends and receives), else the
// kernel's name. All-to-all holding the most gets its own advice.
TEST(RulesPeers, CommExposedByCollective) {
  const std::vector<std::string> ev = {
      step(1, 0, 200),
      x("cpu_op", "c10d::alltoall_base_", 1, 1, 1, 10),
      launch(2, 5, 1),
      kernel("ncclDevKernel_SendRecv", 20, 10, 60, 1),
      x("kernel", "ncclDevKernel_Generic", 0, 20, 80, 20, corr(2) + R"(, "Collective name": "_allgather_base")"),
      kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 110, 10, 3),
      kernel("ncclDevKernel_SendRecv", 20, 130, 5, 4),
      kernel("gemm", 7, 150, 40, 5)};
  auto f = run(doc(ev), "comm_exposed");
  ASSERT_EQ(f.size(), 1u);
  const Evidence::Field& kinds = field(f[0], "exposed_by_collective");
  const std::vector<std::string> want = {"all_to_all 60.0 us (63.2%)", "all_gather 20.0 us (21.1%)",
                                         "all_reduce 10.0 us (10.5%)", "other 5.0 us (5.3%)"};
  EXPECT_EQ(kinds.texts, want);
  EXPECT_NE(f[0].advice.find("Otherwise: all-to-all holds 63.2% of it (60.0 us)"), std::string::npos) << f[0].advice;
  EXPECT_NE(f[0].advice.find("The rest (all_gather 20.0 us (21.1%)"), std::string::npos) << f[0].advice;
}

// A forward-only recording (CPU ops, none backward): the all-reduces are
// tensor-parallel activations on the critical path, not gradients DDP could
// overlap with backward (issue 38's third round: DDP advice on a TP=2 LLaMA
// forward). One backward op brings the training advice back.
TEST(RulesPeers, CommExposedInAForwardOnlyPassGetsInferenceAdvice) {
  std::vector<std::string> ev = {step(1, 0, 100), x("cpu_op", "aten::linear", 1, 1, 1, 8),
                                 kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 10, 30, 1),
                                 kernel("gemm", 7, 30, 20, 2)};
  auto f = run(doc(ev), "comm_exposed");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "pass").s, "forward only (no backward op)");
  EXPECT_NE(f[0].advice.find("tensor-parallel"), std::string::npos) << f[0].advice;
  EXPECT_EQ(f[0].advice.find("bucket_cap_mb"), std::string::npos) << f[0].advice;
  EXPECT_EQ(f[0].advice.find("no_sync"), std::string::npos) << f[0].advice;
  ev.push_back(x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 1, 2, 60, 8));
  f = run(doc(ev), "comm_exposed");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "pass").s, "training or unknown");
  EXPECT_NE(f[0].advice.find("bucket_cap_mb"), std::string::npos) << f[0].advice;
}

std::string memory(double ts, long long allocated, long long reserved) {
  return R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": )" +
         std::to_string(ts) + R"(, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 100, "Total Allocated": )" +
         std::to_string(allocated) + R"(, "Total Reserved": )" + std::to_string(reserved) + "}}";
}

TEST(RulesPeers, MemoryPressure) {
  const std::string props = R"("deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000000}])";
  auto f = run(doc({step(1, 0, 100), memory(10, 500000, 600000), memory(20, 950000, 960000), memory(30, 100, 960000)}, props),
               "memory_pressure");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "total_memory_bytes").i, 1000000);
  EXPECT_EQ(field(f[0], "peak_allocated_bytes").i, 950000);
  EXPECT_NEAR(field(f[0], "peak_allocated_pct").d, 95.0, 1e-9);
  EXPECT_EQ(field(f[0], "peak").events.at(0).ts_ns, 20000);
  EXPECT_EQ(field(f[0], "peak").events.at(0).step, 1);
  EXPECT_TRUE(run(doc({memory(10, 500000, 600000)}, props), "memory_pressure").empty());
  // Without deviceProperties the capacity is unknown: silent.
  EXPECT_TRUE(run(doc({memory(20, 950000, 960000)}), "memory_pressure").empty());
}

// The advice names what held the peak: the op that allocated what is live
// then (tprof memory's live set), and how much came from before the window.
TEST(RulesPeers, MemoryPressureNamesWhatHeldThePeak) {
  const std::string props = R"("deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000000}])";
  auto rec = [](double ts, long long addr, long long bytes, long long allocated) {
    return R"({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
           R"(, "args": {"Device Type": 1, "Device Id": 0, "Addr": )" + std::to_string(addr) + R"(, "Bytes": )" +
           std::to_string(bytes) + R"(, "Total Allocated": )" + std::to_string(allocated) +
           R"(, "Total Reserved": 980000}})";
  };
  auto f = run(doc({step(1, 0, 100), x("cpu_op", "aten::bmm", 1, 1, 9, 3), rec(10, 7, 400000, 800000),
                    x("cpu_op", "aten::softmax", 1, 1, 19, 3), rec(20, 8, 150000, 950000), rec(40, 8, -150000, 800000)},
                   props),
               "memory_pressure");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_NE(f[0].advice.find("held most by aten::bmm"), std::string::npos) << f[0].advice;
  EXPECT_NE(f[0].advice.find("and aten::softmax"), std::string::npos) << f[0].advice;
  EXPECT_NE(f[0].advice.find("was allocated before the window"), std::string::npos) << f[0].advice;
}

// Allocator churn through the driver API (cuMemAlloc_v2 / cuMemFree_v2, as
// a program calling the driver records them) counts as the runtime's does.
TEST(RulesPeers, MemoryPressureCountsTheDriversAllocationsToo) {
  const std::string props = R"("deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000000}])";
  auto f = run(doc({step(1, 0, 100), memory(10, 500000, 600000), x("cuda_driver", "cuMemAlloc_v2", 1, 1, 12, 5),
                    memory(20, 950000, 960000), x("cuda_driver", "cuMemFree_v2", 1, 1, 32, 4),
                    x("cuda_runtime", "cudaFree", 1, 1, 40, 3), memory(50, 100, 960000)},
                   props),
               "memory_pressure");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "malloc_calls").i, 1);
  EXPECT_EQ(field(f[0], "free_calls").i, 2);
  EXPECT_EQ(field(f[0], "malloc_free_ns").i, 12000);
}

TEST(RulesPeers, MemoryPressureReadsAPoolSetAsideUpFront) {
  // vLLM's capture trace: 178.5 of a 179 GiB peak was allocated before the
  // recording (the KV cache sized to gpu_memory_utilization): by design.
  const std::string props = R"("deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000000}])";
  auto f = run(doc({step(1, 0, 100), memory(10, 900000, 960000), memory(20, 950000, 960000)}, props), "memory_pressure");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(field(f[0], "allocated_before_window_bytes").i, 899900);
  EXPECT_NE(f[0].advice.find("by design"), std::string::npos) << f[0].advice;
  EXPECT_EQ(f[0].advice.find("checkpointing"), std::string::npos) << f[0].advice;
}

TEST(RulesPeers, SyncApiDuringGraphCaptureIsStartUp) {
  // vLLM's capture trace: a device synchronize between capture warm-up
  // runs (cudaStreamBeginCapture recorded) is one-time start-up.
  std::vector<std::string> ev = {launch(1, 2, 1), kernel("k", 7, 5, 5, 1),
                                 x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 10, 40), launch(60, 2, 2),
                                 kernel("k", 7, 65, 5, 2), x("cuda_runtime", "cudaStreamBeginCapture", 1, 1, 70, 2),
                                 x("cuda_runtime", "cudaStreamEndCapture", 1, 1, 80, 2)};
  auto f = run(doc(ev), "sync_api");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(field(f[0], "graph_captures").i, 1);
  EXPECT_EQ(f[0].advice.rfind("Profile the graph replay", 0), 0u) << f[0].advice;
  EXPECT_NE(f[0].title.find("graph capture (one-time start-up)"), std::string::npos) << f[0].title;
  // Without the capture: the usual per-step advice.
  ev.resize(ev.size() - 2);
  auto g = run(doc(ev), "sync_api");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].advice.find("graph replay"), std::string::npos) << g[0].advice;
  EXPECT_EQ(g[0].evidence.find("graph_captures"), nullptr);
}

TEST(RulesPeers, SyncApiLeavesOutWaitsOnThreadsThatLaunchNoKernel) {
  // Issue 38's eleventh round: vLLM's output thread reads each step's
  // results back (a copy and an event sync), its job to wait, while the
  // thread that launches the kernels ran on: 83.6 ms "blocking the host"
  // (45.3% of the steps), 0.77 ms of it on the launching thread.
  std::vector<std::string> ev = {step(1, 0, 1000)};
  for (int i = 0; i < 10; ++i) {
    ev.push_back(launch(10 + 90 * i, 5, i + 1));
    ev.push_back(kernel("k", 7, 20 + 90 * i, 30, i + 1));
  }
  ev.push_back(x("cuda_runtime", "cudaMemcpyAsync", 1, 2, 100, 3, corr(50)));
  ev.push_back(x("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 0, 14, 110, 1, corr(50)));
  ev.push_back(x("cuda_runtime", "cudaEventSynchronize", 1, 2, 104, 600));
  EXPECT_TRUE(run(doc(ev), "sync_api").empty());
  // The same wait on the launching thread is the rule's.
  ev.back() = x("cuda_runtime", "cudaEventSynchronize", 1, 1, 104, 600);
  EXPECT_EQ(run(doc(ev), "sync_api").size(), 1u);
}

TEST(RulesPeers, SyncApi) {
  auto f = run(doc({step(3, 0, 100), x("cuda_runtime", "cudaStreamSynchronize", 1, 1, 50, 40),
                    x("cuda_runtime", "cudaMemcpy", 1, 1, 92, 4), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 97, 1),
                    x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 150, 10)}),
               "sync_api");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "calls").i, 2);
  EXPECT_EQ(field(f[0], "sync_ns").i, 44000);
  EXPECT_NEAR(field(f[0], "sync_pct").d, 44.0, 1e-9);
  EXPECT_EQ(field(f[0], "longest").events.at(0).name, "cudaStreamSynchronize");
  EXPECT_EQ(field(f[0], "steps").ints, (std::vector<std::int64_t>{3}));
  // Without steps: a sync with device work launched after it stalls the
  // pipeline; the trace's last drain does not.
  auto nosteps = run(doc({launch(1, 2, 1), kernel("k", 7, 5, 5, 1), x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 10, 40),
                          launch(60, 2, 2), kernel("k", 7, 65, 5, 2),
                          x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 70, 30)}),
                     "sync_api");
  ASSERT_EQ(nosteps.size(), 1u);
  EXPECT_EQ(field(nosteps[0], "calls").i, 1);
  EXPECT_EQ(field(nosteps[0], "sync_ns").i, 40000);
  EXPECT_EQ(field(nosteps[0], "window").s, "trace");
  EXPECT_EQ(nosteps[0].severity, FindingSeverity::kWarning);  // 40 of 99 µs, GPU idle
  EXPECT_NE(nosteps[0].title.find("1 synchronizing CUDA call before later device work blocks"), std::string::npos)
      << nosteps[0].title;
  // A synchronize after the last step is not this rule's.
  EXPECT_TRUE(run(doc({step(3, 0, 100), x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 150, 10)}), "sync_api").empty());
  // The same wait while a kernel keeps the GPU busy: the host waited for
  // queued work, the GPU did not: info, and the title says so.
  auto busy = run(doc({step(3, 0, 100), launch(1, 2, 9), kernel("long", 7, 5, 95, 9),
                       x("cuda_runtime", "cudaStreamSynchronize", 1, 1, 50, 40)}),
                  "sync_api");
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].severity, FindingSeverity::kInfo);
  EXPECT_NEAR(field(busy[0], "gpu_busy_pct").d, 100.0, 1e-9);
  EXPECT_EQ(busy[0].impact_ns, 0);
  EXPECT_NE(busy[0].title.find("the host waited, the GPU did not"), std::string::npos) << busy[0].title;
}

TEST(RulesPeers, PageableMemcpy) {
  auto f = run(doc({step(1, 0, 100), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 10, 30, corr(1)),
                    x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 20, 15, corr(1) + R"(, "bytes": 1048576)"),
                    x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 50, 10, corr(2)),
                    x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, 7, 55, 2, corr(2) + R"(, "bytes": 4)")}),
               "pageable_memcpy");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "copies").i, 1);
  EXPECT_EQ(field(f[0], "htod").i, 1);
  EXPECT_EQ(field(f[0], "bytes").i, 1048576);
  EXPECT_EQ(field(f[0], "small_copies_left_out").i, 1);  // the 4-byte read
  EXPECT_EQ(field(f[0], "copy_ns").i, 15000);
  EXPECT_EQ(field(f[0], "launch_ns").i, 30000);
  EXPECT_EQ(field(f[0], "longest_launch").events.at(0).name, "cudaMemcpyAsync");
  EXPECT_TRUE(run(doc({step(1, 0, 100), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 10, 5, corr(1)),
                       x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 7, 20, 15, corr(1))}),
                  "pageable_memcpy")
                  .empty());
  // A scalar read (.item(): 4 bytes into pageable memory): its cost is the
  // sync, not the staging; pinning would not shorten it.
  EXPECT_TRUE(run(doc({step(1, 0, 100), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 10, 30, corr(1)),
                       x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, 7, 20, 2, corr(1) + R"(, "bytes": 4)")}),
                  "pageable_memcpy")
                  .empty());
  // 1 MiB in 90 us (11.7 GB/s) in a 100 ms step: 2.6 us to gain, under a
  // thousandth of the window, and the copy under 1% of it (issue 38's
  // thirteenth round: an MLP's batches, 1.3 us a step to gain).
  const std::string small_gain = doc(
      {step(1, 0, 100'000), x("cuda_runtime", "cudaLaunchKernel", 1, 1, 10, 5, corr(1)), kernel("k", 7, 20, 40'000, 1),
       x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 45'000, 100, corr(2)),
       x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 45'010, 90, corr(2) + R"(, "bytes": 1048576)"),
       x("cuda_runtime", "cudaLaunchKernel", 1, 1, 45'200, 5, corr(3)), kernel("k", 7, 45'300, 54'000, 3)});
  EXPECT_TRUE(run(small_gain, "pageable_memcpy").empty());
}

TEST(RulesPeers, TruncatedTrace) {
  const std::string full = doc({step(1, 0, 100), launch(10, 5, 1), kernel("k", 7, 20, 10, 1), step(2, 100, 100)});
  EXPECT_TRUE(run(full, "truncated_trace").empty());
  const std::string cut = full.substr(0, full.find("ProfilerStep#2") + 5);
  auto f = run(cut, "truncated_trace");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "events_loaded").i, 3);
  EXPECT_GT(field(f[0], "byte_offset").i, 0);
  EXPECT_EQ(field(f[0], "last_event").events.at(0).name, "ProfilerStep#1");
}

TEST(RulesPeers, DroppedEvents) {
  auto f = run(doc({step(1, 0, 100)}, R"("tprof": {"droppedEvents": 5})"), "dropped_events");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "dropped_events").i, 5);
  EXPECT_EQ(field(f[0], "events_kept").i, 1);
  EXPECT_TRUE(run(doc({step(1, 0, 100)}), "dropped_events").empty());

  // Losses that cost detail, not time (issue 26): kept scopes without their
  // shapes, scopes open when the window ended. Info, titled by what was lost.
  auto shapes = run(doc({step(1, 0, 100)}, R"("tprof": {"droppedEvents": 0, "droppedShapes": 7})"), "dropped_events");
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(shapes[0].title, "7 kept scopes lost their input shapes");
  EXPECT_EQ(field(shapes[0], "shapes_missing").i, 7);
  auto open = run(doc({step(1, 0, 100)}, R"("tprof": {"droppedEvents": 0, "unfinishedScopes": 2})"), "dropped_events");
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(open[0].title, "2 scopes were still open when the window ended");
  EXPECT_EQ(field(open[0], "unfinished_scopes").i, 2);
  EXPECT_NE(open[0].advice.find("left out of the trace"), std::string::npos) << open[0].advice;
}

TEST(RulesPeers, OverlappingKernels) {
  auto f = run(doc({step(1, 0, 100), kernel("a", 7, 0, 50, 1), kernel("b", 7, 30, 30, 2), kernel("c", 8, 30, 30, 3)}),
               "overlapping_kernels");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "overlaps").i, 1);
  EXPECT_EQ(field(f[0], "first").events.at(0).name, "a");
  EXPECT_EQ(field(f[0], "second").events.at(0).name, "b");
  EXPECT_EQ(field(f[0], "second").events.at(0).lane, "gpu 0 stream 7");
  EXPECT_EQ(field(f[0], "overlap_ns").i, 20000);
  EXPECT_TRUE(run(doc({kernel("a", 7, 0, 30, 1), kernel("b", 7, 30, 30, 2)}), "overlapping_kernels").empty());
}

TEST(RulesPeers, OverlappingKernelsSilentWhenNotMaterialOrPdl) {
  // 2 µs of overlap in a 100 ms window: no figure changes (< 0.1%).
  EXPECT_TRUE(run(doc({step(1, 0, 100000), kernel("a", 7, 0, 50, 1), kernel("b", 7, 48, 30, 2)}),
                  "overlapping_kernels")
                  .empty());
  // 2 µs tail overlaps in a 200 µs window: material on a GPU of unknown
  // architecture, programmatic dependent launch on sm90+ (H100, B200).
  const std::string tail = doc({step(1, 0, 200), kernel("a", 7, 0, 50, 1), kernel("b", 7, 48, 50, 2),
                                kernel("c", 7, 96, 50, 3)});
  auto f = run(tail, "overlapping_kernels");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "overlap_total_ns").i, 4000);
  EXPECT_EQ(field(f[0], "overlap_max_ns").i, 2000);
  const std::string sm90 =
      R"({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}], )" +
      tail.substr(tail.find('{') + 1);
  EXPECT_TRUE(run(sm90, "overlapping_kernels").empty());
  // Every overlap under 1 µs: timestamps rounded at kernel boundaries, on
  // any GPU (an RTX 3090's compiled MAE step: 291 of at most 384 ns, 23.7 us
  // in a 12.6 ms trace, was its first cause; issue 38's fourteenth round).
  EXPECT_TRUE(run(doc({step(1, 0, 200), kernel("a", 7, 0, 50, 1), kernel("b", 7, 49.4, 50, 2),
                       kernel("c", 7, 98.8, 50, 3), kernel("d", 7, 148.2, 50, 4)}),
                  "overlapping_kernels")
                  .empty());  // 3 overlaps of 600 ns: 1.8 us, 0.9% of the window
}

TEST(RulesPeers, APageableCopyAfterTheDataLoaderIsTheInputBatch) {
  // The batch the loader returned, copied before the first kernel: without
  // the loader it would read as set-up (weights moved once); after it, it
  // is copied every iteration, and pinning is the fix (issue 38's fifth
  // round: a 19 MB batch was told to leave the recording).
  const std::string next = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
  const std::vector<std::string> copy_then_kernel = {
      x("cpu_op", "aten::to", 1, 1, 1'010, 90), x("cuda_runtime", "cudaMemcpyAsync", 1, 1, 1'020, 70, corr(1)),
      x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 1'030, 50, corr(1) + R"(, "bytes": 19267584)"),
      launch(1'110, 5, 2), kernel("conv", 7, 1'120, 100, 2)};
  std::vector<std::string> with_loader = {x("user_annotation", next, 1, 1, 0, 1'000)};
  with_loader.insert(with_loader.end(), copy_then_kernel.begin(), copy_then_kernel.end());
  auto f = run(doc(with_loader), "pageable_memcpy");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "pattern").s, "input_batch");
  EXPECT_TRUE(f[0].advice.starts_with("Pin the host buffers: DataLoader(pin_memory=True)")) << f[0].advice;
  auto g = run(doc(copy_then_kernel), "pageable_memcpy");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(field(g[0], "pattern").s, "setup");
}

TEST(RulesPeers, DataLoaderBoundWithWorkersAlreadyInUse) {
  // PARAM's resnet: the iterator is already _MultiProcessingDataLoaderIter,
  // so "use num_workers" is no advice; a wait that is mostly the first
  // __next__ is the workers starting (100 ms or more, and no later wait
  // half as long: DiagnoseContext::first_next_is_startup).
  const std::string mp = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
  auto f = run(doc({step(1, 0, 1'000'000), x("user_annotation", mp, 1, 1, 0, 600'000), step(2, 1'000'000, 1'000'000),
                    x("user_annotation", mp, 1, 1, 1'000'000, 10'000)}),
               "dataloader_bound");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(field(f[0], "iterator").s, "multi_process");
  EXPECT_EQ(field(f[0], "first_call_ns").i, 600'000'000);
  // The action first (the default view prints the first sentence).
  EXPECT_TRUE(f[0].advice.starts_with("Start recording after the first batch")) << f[0].advice;
  EXPECT_NE(f[0].advice.find("multi-process DataLoader's first __next__"), std::string::npos) << f[0].advice;
  EXPECT_NE(f[0].advice.find("persistent_workers=True"), std::string::npos) << f[0].advice;
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);  // start-up happens once: never critical
  EXPECT_EQ(f[0].advice.find("num_workers=4"), std::string::npos) << f[0].advice;
  // Later waits dominate: the workers do not keep up.
  auto g = run(doc({step(1, 0, 100), x("user_annotation", mp, 1, 1, 0, 10), step(2, 100, 100),
                    x("user_annotation", mp, 1, 1, 100, 40), step(3, 200, 100), x("user_annotation", mp, 1, 1, 200, 40)}),
               "dataloader_bound");
  ASSERT_EQ(g.size(), 1u);
  // The action first (the default view prints the first sentence); no GPU
  // advice on a trace without device work (issue 38's eighth round).
  EXPECT_TRUE(g[0].advice.starts_with("Make the workers keep up: add workers (up to the CPU cores)")) << g[0].advice;
  EXPECT_NE(g[0].advice.find("the workers not keeping up"), std::string::npos) << g[0].advice;
  EXPECT_EQ(g[0].advice.find("GPU"), std::string::npos) << g[0].advice;
  EXPECT_EQ(g[0].advice.find("pin_memory"), std::string::npos) << g[0].advice;
}

std::string flow(char ph, int id, double ts, int pid, int tid) {
  return std::string(R"({"ph": ")") + ph + R"(", "id": )" + std::to_string(id) +
         R"(, "pid": )" + std::to_string(pid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" +
         std::to_string(ts) + R"(, "cat": "ac2g", "name": "ac2g")" + (ph == 'f' ? R"(, "bp": "e"})" : "}");
}

TEST(RulesPeers, UnmatchedFlows) {
  // The kernel at 45 lost its link to its launch, between two linked launches.
  auto f = run(doc({launch(10, 5, 1), kernel("k", 7, 20, 10, 1), flow('s', 1, 10, 1, 1), flow('f', 1, 20, 0, 7),
                    launch(40, 5, 2), kernel("k", 7, 45, 10, 2), flow('f', 2, 45, 0, 7), launch(60, 5, 3), kernel("k", 7, 70, 10, 3),
                    flow('s', 3, 60, 1, 1), flow('f', 3, 70, 0, 7)}),
               "unmatched_flows");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "unmatched").i, 1);
  EXPECT_EQ(field(f[0], "flow_events").i, 5);
  EXPECT_EQ(field(f[0], "first").events.at(0).ts_ns, 45000);
  EXPECT_EQ(field(f[0], "categories").texts, (std::vector<std::string>{"ac2g"}));
  EXPECT_TRUE(run(doc({launch(10, 5, 1), kernel("k", 7, 20, 10, 1), flow('s', 1, 10, 1, 1), flow('f', 1, 20, 0, 7)}),
                  "unmatched_flows")
                  .empty());
  // The last launch's kernel ran after the recording stopped: cut at the
  // window's edge, normal.
  EXPECT_TRUE(run(doc({launch(10, 5, 1), kernel("k", 7, 20, 10, 1), flow('s', 1, 10, 1, 1), flow('f', 1, 20, 0, 7),
                       launch(40, 5, 2), flow('s', 2, 40, 1, 1)}),
                  "unmatched_flows")
                  .empty());
}

TEST(RulesPeers, ClockSkew) {
  auto f = run(doc({step(1, 0, 100), launch(10, 5, 1), kernel("early", 7, 5, 3, 1), launch(20, 5, 2),
                    kernel("fine", 7, 30, 3, 2)}),
               "clock_skew");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(field(f[0], "launches_checked").i, 2);
  EXPECT_EQ(field(f[0], "starts_before_launch").i, 1);
  EXPECT_EQ(field(f[0], "worst_offset_ns").i, -5000);
  EXPECT_EQ(field(f[0], "worst_activity").events.at(0).name, "early");
  // A device lane that starts before any host event, in a trace where no
  // activity is linked to its launch: the clocks cannot be checked pair by
  // pair, and device work before the host's first event says they disagree.
  auto g = run(doc({kernel("first", 7, 0, 3, 9), step(1, 50, 100), launch(60, 5, 1), kernel("k", 7, 70, 3, 5)}),
               "clock_skew");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(field(g[0], "device_lead_ns").i, 50000);
  EXPECT_EQ(field(g[0], "first_device_activity").events.at(0).name, "first");
  // With a linked pair in order, an unlinked activity before the host's
  // first event is work queued before the window (the H200's warm 4096 run:
  // the profiler's warmup step left its add kernel running): silent.
  EXPECT_TRUE(run(doc({kernel("first", 7, 0, 3, 9), step(1, 50, 100), launch(60, 5, 1), kernel("k", 7, 70, 3, 1)}),
                  "clock_skew")
                  .empty());
  // Within a microsecond of rounding: silent.
  EXPECT_TRUE(run(doc({step(1, 0, 100), launch(10, 5, 1), kernel("k", 7, 9.5, 3, 1)}), "clock_skew").empty());
}

}  // namespace
}  // namespace tprof
