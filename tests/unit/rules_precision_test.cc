// Rules on the real traces of tests/data where they fired without their
// pattern being there (issue 11, "Rules that fire where they were not meant
// to"): each test names the trace, what the rule said and why that was
// wrong, and checks the rule's precondition (docs/diagnose.md) on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

std::string data(const std::string& rel) { return std::string(TPROF_TEST_DATA) + "/" + rel; }

const char* const kBertH100 = "public/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz";
const char* const kFalconsH100 = "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz";
const char* const kBertMi300 = "public/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz";
const char* const kAlexnet = "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz";
const char* const kRank0 = "public/hta/trace_filter/sampled_rank-0.json.gz";
const char* const kMi210 = "public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz";
const char* const kSglang = "public/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz";

Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(data(rel));
  EXPECT_TRUE(t) << rel;
  return t ? std::move(*t) : Trace{};
}

std::vector<Finding> run(const Trace& t, const std::string& id) { return diagnose(t, {.only = {id}}).findings; }
std::vector<Finding> run(const std::string& rel, const std::string& id) { return run(load(rel), id); }

const Evidence::Field* find(const Finding& f, std::string_view key) { return f.evidence.find(key); }

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// ---- unmatched_flows ------------------------------------------------------

TEST(RulesPrecision, UnmatchedFlowsQuietOnCompleteKinetoFiles) {
  // Kineto puts an ac2g flow on runtime calls that launch nothing
  // (cudaFuncSetAttribute, cudaDeviceGetAttribute, cudaDeviceSynchronize,
  // hipGetDevicePropertiesR0600): one end, no partner, in complete files.
  for (const char* rel : {kBertH100, kFalconsH100, kBertMi300}) {
    const Trace t = load(rel);
    EXPECT_TRUE(run(t, "unmatched_flows").empty()) << rel;
    EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u) << rel;
  }
}

TEST(RulesPrecision, UnmatchedFlowsQuietWhereNothingIsMissing) {
  // HTA's cuda_event_sync: lone ac2g flows on cudaEventRecord and
  // cudaEventElapsedTime, which launch nothing (was: "2 flow events have no
  // partner"); Kineto's docs example: flows on cuda_sync spans ("Stream Wait
  // Event", "Event Sync"; was a warning at 50%).
  for (const char* rel : {"public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
                          "public/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
                          "public/kineto/docs/traces/after_fix_trace.json"}) {
    EXPECT_TRUE(run(rel, "unmatched_flows").empty()) << rel;
  }
}

TEST(RulesPrecision, UnmatchedFlowsQuietWhereTheWriterMarkedTheLaunchAnEnd) {
  // An older Kineto writes an ac2g end, not a start, on a launch call it
  // cannot name: the DCGAN's 48 cudaLaunchKernelExC calls ("INVALID", cbid
  // 430) and the AlexNet's 3; a ROCm graph launch (hipGraphLaunch) whose
  // kernels all carry its id. Both sides of the link are there (was: "flow
  // end id 3649 (ac2g) has no start", a note on every command).
  for (const char* rel : {"public/warming423_pf/dcgan_train_rtx3080.pt.trace.json.gz",
                          "public/warming423_pf/alexnet_infer_rtx3080.pt.trace.json.gz",
                          "public/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"}) {
    const Trace t = load(rel);
    EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u) << rel;
  }
}

// The blog's 64x64 eager run on H100 with the flow starts of launches in
// the middle of the window renamed: their kernels lose their links inside
// the window. Those launched at the ends lose theirs at the window's edge.
std::string cut_flows(const std::vector<int>& ids) {
  std::ifstream in(data("gpu/h100-torch-2.11/64_bf16_warm_eager.json"));
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (int id : ids) {
    const std::string from = "\"ph\": \"s\", \"id\": " + std::to_string(id) + ",";
    const std::size_t at = doc.find(from);
    EXPECT_NE(at, std::string::npos) << id;
    if (at != std::string::npos) doc.replace(at, from.size(), "\"ph\": \"s\", \"id\": 9" + std::to_string(id) + "000,");
  }
  return doc;
}

TEST(RulesPrecision, UnmatchedFlowsCountsOnlyLinksBrokenInsideTheWindow) {
  Result<Trace> whole = read_trace_bytes(cut_flows({}));
  ASSERT_TRUE(whole);
  EXPECT_TRUE(run(*whole, "unmatched_flows").empty());
  // The first launches' links cut, as a window starting late would: normal.
  Result<Trace> edge = read_trace_bytes(cut_flows({41, 51, 68}));
  ASSERT_TRUE(edge);
  EXPECT_TRUE(run(*edge, "unmatched_flows").empty());
  // Links of launches in the middle: broken inside the window.
  const std::string cut = cut_flows({});
  std::vector<int> middle;
  for (std::size_t at = cut.find("\"ph\": \"s\", \"id\": "); at != std::string::npos;
       at = cut.find("\"ph\": \"s\", \"id\": ", at + 1)) {
    middle.push_back(std::stoi(cut.substr(at + 17)));
  }
  ASSERT_GT(middle.size(), 20u);
  middle = std::vector<int>(middle.begin() + 10, middle.begin() + 20);
  Result<Trace> inside = read_trace_bytes(cut_flows(middle));
  ASSERT_TRUE(inside);
  const std::vector<Finding> f = run(*inside, "unmatched_flows");
  ASSERT_EQ(f.size(), 1u);
  // 10 links cut; the reader leaves out lone ends it expects (validate.cc).
  EXPECT_GE(find(f[0], "unmatched")->i, 8);
  EXPECT_LE(find(f[0], "unmatched")->i, 10);
  EXPECT_EQ(find(f[0], "at_window_edges")->i, 0);
  EXPECT_TRUE(f[0].advice.starts_with("Re-export the trace")) << f[0].advice;
}

// ---- kernel_variance ------------------------------------------------------

TEST(RulesPrecision, KernelVarianceLeavesOutCopiesAndCollectives) {
  // alexnet: "Memcpy HtoD (Pageable -> Device)" 3 µs to 40 ms (the batch and
  // the weights); rank 0: NCCL SendRecv waiting on its peers. Neither is a
  // kernel running slower in identical steps.
  for (const char* rel : {kAlexnet, kRank0}) {
    for (const Finding& f : run(rel, "kernel_variance")) {
      const std::string k = find(f, "kernel") != nullptr ? find(f, "kernel")->s : "";
      EXPECT_FALSE(k.starts_with("Memcpy") || k.starts_with("Memset") || contains(k, "nccl")) << rel << ": " << k;
    }
  }
}

TEST(RulesPrecision, KernelVarianceNeedsIdenticalSteps) {
  // Within one pass one kernel at one grid serves different layers: alexnet
  // (no steps) runs ampere_sgemm_32x32_sliced1x4_tn at grid [128, 4, 1] for
  // two FC layers (822 us at K 9216, 399 us at K 4096), twice; bert on MI300
  // (one step) four Cijk GEMMs of different K; mi210 and SGLang (no steps)
  // batch norm per channel count and one GEMM name per layer; rank 0 (two
  // steps) copies and sorts of different sizes. All were "outliers".
  for (const char* rel : {kAlexnet, kBertMi300, kMi210, kSglang, kRank0}) {
    for (const Finding& f : run(rel, "kernel_variance")) ADD_FAILURE() << rel << ": " << f.title;
  }
}

// A trace of `steps.size()` steps; step s launches, per entry of steps[s],
// one kernel "k" of grid {grid, 1, 1} and that duration (µs), in order.
struct Launch {
  int grid;
  double dur;
};
std::string kernel_steps(const std::vector<std::vector<Launch>>& steps) {
  std::string doc = R"({"traceEvents": [)";
  int corr = 1;
  bool first = true;
  auto add = [&](const std::string& ev) {
    if (!first) doc += ',';
    first = false;
    doc += ev;
  };
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const double base = 10000.0 * static_cast<double>(s);
    add(R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + std::to_string(s + 1) +
        R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(base) + R"(, "dur": 9000})");
    double at = base + 10;
    for (const Launch& l : steps[s]) {
      add(R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
          std::to_string(at) + R"(, "dur": 5, "args": {"correlation": )" + std::to_string(corr) + "}}");
      add(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" + std::to_string(at + 10) +
          R"(, "dur": )" + std::to_string(l.dur) + R"(, "args": {"device": 0, "stream": 7, "correlation": )" +
          std::to_string(corr) + R"(, "grid": [)" + std::to_string(l.grid) + R"(, 1, 1], "block": [128, 1, 1]}})");
      at += l.dur + 100;
      ++corr;
    }
  }
  doc += "]}";
  return doc;
}

TEST(RulesPrecision, KernelVarianceComparesTheSameCallAcrossSteps) {
  // Each step runs k twice at one grid, 800 us then 400 us (two layers):
  // steady, no finding. Step 3's second call taking 1200 us is the outlier,
  // named with its step and its place in the step.
  std::vector<std::vector<Launch>> steps(5, {{128, 800}, {128, 400}});
  Result<Trace> steady = read_trace_bytes(kernel_steps(steps));
  ASSERT_TRUE(steady);
  EXPECT_TRUE(run(*steady, "kernel_variance").empty());
  steps[2][1].dur = 1200;
  Result<Trace> slow = read_trace_bytes(kernel_steps(steps));
  ASSERT_TRUE(slow);
  const std::vector<Finding> f = run(*slow, "kernel_variance");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(find(f[0], "call_in_step")->i, 2);
  EXPECT_EQ(find(f[0], "count")->i, 5);
  EXPECT_EQ(find(f[0], "outlier_steps")->ints, std::vector<std::int64_t>{3});
  // Two steps are not enough to call one of them the odd one.
  Result<Trace> two = read_trace_bytes(kernel_steps({{{128, 800}}, {{128, 2400}}}));
  ASSERT_TRUE(two);
  EXPECT_TRUE(run(*two, "kernel_variance").empty());
}

TEST(RulesPrecision, KernelVarianceGroupsByLaunchShape) {
  // One name at two grids per step (one per layer width): two groups; the
  // slow grid-64 instance of step 4 is compared with grid 64 only.
  std::vector<std::vector<Launch>> steps(5, {{64, 100}, {256, 300}});
  steps[3][0].dur = 700;
  Result<Trace> t = read_trace_bytes(kernel_steps(steps));
  ASSERT_TRUE(t);
  const std::vector<Finding> f = run(*t, "kernel_variance");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(find(f[0], "grid")->s, "[64, 1, 1]");
  EXPECT_EQ(find(f[0], "count")->i, 5);
  EXPECT_EQ(find(f[0], "median_ns")->i, 100000);
}

TEST(RulesPrecision, KernelVarianceAdviceFitsTheVendor) {
  // mi300 and mi210 run HIP: nvidia-smi is not there.
  for (const char* rel : {kBertMi300, kMi210}) {
    const std::vector<Finding> f = run(rel, "kernel_variance");
    for (const Finding& x : f) EXPECT_FALSE(contains(x.advice, "nvidia-smi")) << rel;
  }
}

// ---- kernel_gap -----------------------------------------------------------

TEST(RulesPrecision, KernelGapCountsStepsNotGaps) {
  // bert on H100 records one step (ProfilerStep#6); the layer_norm → GEMM gap
  // occurs 4 times in it: "in 4 of 4 steps" was gaps counted as steps.
  const Trace t = load(kBertH100);
  const std::int64_t steps = 1;
  for (const Finding& f : run(t, "kernel_gap")) {
    if (find(f, "pattern")->s != "recurring") continue;
    if (find(f, "unit") != nullptr && find(f, "unit")->s == "steps") {
      EXPECT_LE(find(f, "units")->i, steps) << f.title;
    } else {
      EXPECT_FALSE(contains(f.title, " steps (")) << f.title;
    }
  }
}

TEST(RulesPrecision, KernelGapNamesWhereMostOfThePatternIsLaunched) {
  // Review round 5, S1: resnet50's Fill -> Fill gaps on stream 7 are 960
  // zero_grad fills (160 a step, 37 us apart) and one backward seed a step
  // (aten::ones_like > aten::fill_), whose gap (110 us) is the largest. The
  // advice named the seed; it names zero_grad and its remedy.
  const Trace t = load("public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz");
  const std::vector<Finding> found = run(t, "kernel_gap");
  const Finding* fill = nullptr;
  for (const Finding& f : found) {
    if (find(f, "pattern")->s == "recurring" && contains(find(f, "before")->s, "FillFunctor") &&
        contains(find(f, "after")->s, "FillFunctor")) {
      fill = &f;
    }
  }
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(find(*fill, "max_gap_ns")->i, 110'000);
  ASSERT_NE(find(*fill, "launched_by"), nullptr);
  EXPECT_TRUE(contains(find(*fill, "launched_by")->s, "zero_grad")) << find(*fill, "launched_by")->s;
  ASSERT_NE(find(*fill, "gaps_launched_there"), nullptr);
  EXPECT_GE(find(*fill, "gaps_launched_there")->i, 900);
  EXPECT_TRUE(fill->advice.starts_with("Call optimizer.zero_grad(set_to_none=True)")) << fill->advice;
  EXPECT_FALSE(contains(fill->advice, "ones_like")) << fill->advice;
}

// Review round 6: on resnet50 (compute-bound, no launch-overhead cause)
// kernel_launch_stats' short launches left 56.7 ms of GPU idle, about 35 ms
// of it in the gaps kernel_gap's zero_grad finding claims: two causes
// counted it twice. The short launches' idle now leaves out what findings
// of other causes claim, and keeps what the members of its own cause claim
// (overhead_bound's anchor on the blog's 64x64 runs; the verdict-formed
// cause of the compiled ones). Review round 7: on PARAM's linear trace
// (host-bound by its start-up, overhead-bound after it) the short launches
// and low_gpu_utilization blamed the same launching idle as two causes; the
// measurements after the start-up now form the launch-overhead cause.
TEST(RulesPrecision, KernelLaunchStatsCountsNoIdleAnotherCauseClaims) {
  struct Case {
    const char* trace;
    bool shares_idle_with_another_cause;
    std::int64_t counted_ns;  // 0: not checked
  };
  const char* const flowsim = "public/flowsim/test_trace_excerpt.trace.json.gz";
  const char* const linear = "public/param/et_replay/tests/inputs/linear_kineto.json.gz";
  // The V100 ResNet50 sample, which this test read first (56.651 ms, 35.1 ms
  // of it kernel_gap's zero_grad gaps), is silent since issue 38's
  // fourteenth round: 19% of its short kernels on an idle stream, the rest
  // behind a 5.2 ms queue (RulesTune38's deep-queue case).
  for (const Case& k : {Case{flowsim, true, 0}, Case{linear, true, 0},
                        Case{"gpu/h100-torch-2.11/64_bf16_warm_eager.json", false, 0},
                        Case{"gpu/h100-tprof/64_bf16_warm_compile.json", false, 0}}) {
    SCOPED_TRACE(k.trace);
    const Trace t = load(k.trace);
    const Diagnosis d = diagnose(t);
    // Alone, it counts every idle stretch before a short kernel.
    const std::vector<Finding> alone = run(t, "kernel_launch_stats");
    ASSERT_EQ(alone.size(), 1u);
    const std::int64_t all_idle = find(alone[0], "gpu_idle_ns")->i;
    std::size_t at = d.findings.size();
    for (std::size_t i = 0; i < d.findings.size(); ++i) {
      if (d.findings[i].id == "kernel_launch_stats") at = i;
    }
    ASSERT_LT(at, d.findings.size());
    const std::int64_t counted = find(d.findings[at], "gpu_idle_ns")->i;
    // What the findings outside its cause claim.
    std::int64_t other_claims = 0;
    for (const Cause& c : d.causes) {
      if (std::find(c.findings.begin(), c.findings.end(), at) != c.findings.end()) continue;
      for (std::size_t i : c.findings) other_claims += d.findings[i].idle_ns;
    }
    if (k.shares_idle_with_another_cause) {
      EXPECT_LT(counted, all_idle);
      EXPECT_LE(all_idle - counted, other_claims);
      ASSERT_NE(find(d.findings[at], "short_kernels_claimed_elsewhere"), nullptr);
      EXPECT_GT(find(d.findings[at], "short_kernels_claimed_elsewhere")->i, 0);
    } else {
      EXPECT_EQ(counted, all_idle);
      EXPECT_EQ(find(d.findings[at], "short_kernels_claimed_elsewhere"), nullptr);
    }
    if (k.counted_ns > 0) {
      EXPECT_EQ(counted, k.counted_ns);
    }
    // Where launch overhead is measured, the short launches and
    // low_gpu_utilization are one cause.
    for (const Cause& c : d.causes) {
      if (std::find(c.findings.begin(), c.findings.end(), at) == c.findings.end()) continue;
      const bool with_utilization = std::any_of(c.findings.begin(), c.findings.end(), [&](std::size_t i) {
        return d.findings[i].id == "low_gpu_utilization";
      });
      EXPECT_EQ(c.id == "launch_overhead", k.trace != flowsim) << c.id;
      if (k.trace == linear) {
        EXPECT_TRUE(with_utilization);
      }
    }
  }
}

TEST(RulesPrecision, CpuGpuOffsetsLargestWaitIsInTheQueueNotInACopyCall) {
  // Review round 5, N4: resnet50's queue is backed up (info), and its
  // "up to" was step 16's 19.3 MB pageable input copy, which starts 42.9 ms
  // into its own 45.7 ms cudaMemcpyAsync: the call's time (host_blocked's),
  // not a wait in the queue. The largest wait among work that starts after
  // its launch call returned is an add kernel behind the queue.
  const std::vector<Finding> found =
      run("public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz",
          "cpu_gpu_offset");
  ASSERT_EQ(found.size(), 1u);
  const Finding& f = found[0];
  EXPECT_TRUE(contains(f.title, "GPU queue backed up")) << f.title;
  EXPECT_TRUE(contains(f.title, "after its launch call starts (median)")) << f.title;
  EXPECT_EQ(find(f, "max_offset_ns")->i, 31'059'000);
  EXPECT_FALSE(contains(find(f, "max_offset_kernel")->events.at(0).name, "Memcpy"));
}

TEST(RulesPrecision, KernelGapNotOnCommStreamWhileComputeRuns) {
  // rank 0: the NCCL stream idles between SendRecv kernels while the compute
  // stream runs; that is not the GPU waiting on the host.
  for (const Finding& f : run(kRank0, "kernel_gap")) {
    const std::string before = find(f, "before") != nullptr ? find(f, "before")->s : "";
    const std::string after = find(f, "after") != nullptr ? find(f, "after")->s : "";
    if (contains(before, "nccl") || contains(after, "nccl")) {
      EXPECT_FALSE(contains(f.advice, "host wait")) << f.title;
    }
  }
}

// ---- kernel_launch_stats, overhead_bound: graphs ----------------------------

TEST(RulesPrecision, GraphLaunchCountsOnce) {
  // SGLang decode: one hipGraphLaunch (463 ms) runs 544 kernels; it was
  // counted as 544 launch calls over 50 µs, then as the top card with
  // short-kernel advice for one 463 ms delay. Counted once, the trace has 14
  // launches: too few for launch statistics (the verdict reads the delay).
  const Trace t = load(kSglang);
  EXPECT_TRUE(run(t, "kernel_launch_stats").empty());
  for (const Finding& o : run(t, "overhead_bound")) {
    EXPECT_FALSE(contains(o.advice, "replay the launches with CUDA graphs")) << o.advice;
    EXPECT_TRUE(contains(o.advice, "hipGraphLaunch")) << o.advice;
  }
  // hta_backward_thread: a single launch, 64 ms late.
  EXPECT_TRUE(run("kineto-public/hta_backward_thread_2022-10.json", "kernel_launch_stats").empty());
}

// ---- kernel_launch_stats: what the launches cost the device -----------------

TEST(RulesPrecision, KernelLaunchStatsCountsTheIdleTheLaunchesLeave) {
  // 64²: every kernel waits on its launch; the impact is the device idle
  // time between them (launching), not the host time of the calls.
  const std::vector<Finding> small = run("gpu/h100-torch-2.11/64_bf16_cold_eager.json", "kernel_launch_stats");
  ASSERT_EQ(small.size(), 1u);
  const Evidence::Field* idle = small[0].evidence.find("gpu_idle_ns");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(small[0].impact_ns, idle->i);
  EXPECT_GT(small[0].impact_ns, 0);
  // 4096² fused: 20 of 40 activities are 1 µs memsets, but queued behind
  // 177 µs GEMMs on a queue 1.6 ms deep: they cost nothing; the GPU sets
  // the pace.
  EXPECT_TRUE(run("gpu/h100-tprof/4096_bf16_warm_fused.json", "kernel_launch_stats").empty());
  // The resnet50 excerpt: one launch delay over 100 µs in 56 launches is an
  // anecdote, not a pattern.
  EXPECT_TRUE(run("public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz",
                  "kernel_launch_stats")
                  .empty());
}

// ---- low_gpu_utilization: set-up is not per-step host work -----------------

TEST(RulesPrecision, LowGpuUtilizationCallsSetUpSetUp) {
  // HTA's event_sync: 2.2 ms in aten::ones > aten::empty (the first
  // allocation) before any kernel; alexnet: no steps, no DataLoader, the
  // host work is the benchmark's set-up. Neither is input loading.
  for (const char* rel : {"public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
                          "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"}) {
    const std::vector<Finding> f = run(rel, "low_gpu_utilization");
    ASSERT_EQ(f.size(), 1u) << rel;
    EXPECT_EQ(f[0].advice.rfind("Record only the timed iterations", 0), 0u) << f[0].advice;
    EXPECT_FALSE(contains(f[0].advice, "DataLoader workers")) << f[0].advice;
    EXPECT_NE(f[0].evidence.find("setup_host_work_ns"), nullptr) << rel;
  }
  EXPECT_TRUE(contains(run("public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", "low_gpu_utilization")
                           .at(0)
                           .advice,
                       "aten::ones > aten::empty"));
  // The blog's 64² eager steps: the host launches op after op inside the
  // steps, no set-up advice.
  for (const Finding& f : run("gpu/h100-torch-2.11/64_bf16_cold_eager.json", "low_gpu_utilization")) {
    EXPECT_FALSE(contains(f.advice, "Record only the timed iterations")) << f.advice;
  }
}

// ---- overhead_bound: the host must be shown dispatching ----------------------

TEST(RulesPrecision, OverheadBoundNeedsTheHostDispatching) {
  // Self CPU >> Self CUDA and an idle GPU, but the host is not launching:
  // CUDA context creation (cudaDeviceGetStreamPriorityRange, 19.6 s and
  // 29.9 s under the first op), aten::empty for 2.2 ms of a 3.2 ms step, a
  // 463 ms blocking hipMemcpyWithStream, a 13.3 s step with 1.5 ms recorded,
  // an excerpt keeping 2.5 ms of a 122 ms step.
  for (const char* rel : {"public/hta/execution_trace/benchmark_simple_add_trace.json.gz", kAlexnet,
                          "public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", kSglang,
                          "public/hta/triton_example/triton_example.json.gz",
                          "public/kineto/tb_plugin/samples/resnet50_num_workers_4/"
                          "worker0.1623213129365.excerpt.pt.trace.json.gz",
                          "kineto-public/hta_backward_thread_2022-10.json"}) {
    for (const Finding& f : run(rel, "overhead_bound")) ADD_FAILURE() << rel << ": " << f.title;
  }
  // The blog's 64x64 runs: the host dispatches through most of each step.
  for (const char* n : {"64_bf16_cold_eager", "64_bf16_warm_compile"}) {
    const std::vector<Finding> f = run("gpu/h100-torch-2.11/" + std::string(n) + ".json", "overhead_bound");
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_GT(find(f[0], "host_dispatch_pct")->d, 50.0) << n;
  }
}

// ---- addmm_fusion ---------------------------------------------------------

TEST(RulesPrecision, AddmmFusionNeedsDeviceActivity) {
  // CPU-only: "aten::addmm x6 instead of aten::mm + aten::add" with no GEMM
  // kernel or DtoD copy to show; nn.Linear's addmm is not the user's fusion.
  for (const char* rel : {"torch-1.13/mlp/cycle0.kineto.json", "kineto-public/hta_rank_non_gpu_2022-08.json.gz"}) {
    EXPECT_TRUE(run(rel, "addmm_fusion").empty()) << rel;
  }
}

// ---- sync_api -------------------------------------------------------------

TEST(RulesPrecision, SyncApiNamesTheTracesApi) {
  // mi300: hipDeviceSynchronize, not "CUDA calls".
  const std::vector<Finding> f = run(kBertMi300, "sync_api");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(contains(f[0].title, "HIP")) << f[0].title;
  EXPECT_FALSE(contains(f[0].title, "CUDA")) << f[0].title;
  ASSERT_NE(find(f[0], "gpu_busy_pct"), nullptr);
}

// ---- bmm_dispatch ---------------------------------------------------------

TEST(RulesPrecision, BmmDispatchNeedsDeviceActivity) {
  // CPU-only traces: "0.0 runtime calls per bmm vs 0.0 per mm".
  for (const char* rel : {"kineto-public/hta_rank_non_gpu_2022-08.json.gz", "torch-1.13/blog/bmm8x64_fp32_cold_eager.kineto.json"}) {
    EXPECT_TRUE(run(rel, "bmm_dispatch").empty()) << rel;
  }
}

TEST(RulesPrecision, BmmDispatchNeedsMoreCallsThanMm) {
  // rank 0: 40 bmm at 1.0 runtime calls each, as many as its mm, 90 vs 48 µs
  // of CPU: the rule's mechanism (more runtime calls, more heuristics) is not
  // in the trace; the gap is the ops' shapes and callers.
  EXPECT_TRUE(run(kRank0, "bmm_dispatch").empty());
}

// ---- pageable_memcpy, hidden_memcpy: copies of a few bytes -------------------

TEST(RulesPrecision, ScalarCopiesAreNotPinningOrBiasCopies) {
  // event_sync: one 1-byte DtoH (.item()); rank 0: 1 to 5120-byte copies.
  // Their cost is the sync, not the staging through a pinned buffer.
  for (const char* rel : {"public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", kRank0}) {
    EXPECT_TRUE(run(rel, "pageable_memcpy").empty()) << rel;
  }
  // alexnet: 150 MB and 67 MB weight copies from pageable memory: fires, and
  // says how many small ones it left out.
  const std::vector<Finding> a = run(kAlexnet, "pageable_memcpy");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(find(a[0], "copies")->i, 8);
  EXPECT_EQ(find(a[0], "small_copies_left_out")->i, 8);
  // rank 0: a 4-byte DtoD copy under aten::resize_ before a GEMM is no bias seed.
  EXPECT_TRUE(run(kRank0, "hidden_memcpy").empty());
}

// ---- sync_api without steps ----------------------------------------------------

TEST(RulesPrecision, SyncApiReadsTracesWithoutSteps) {
  // SGLang decode has no ProfilerStep: its 463 ms blocking hipMemcpyWithStream,
  // with decode work launched after it, was never reported.
  const std::vector<Finding> f = run(kSglang, "sync_api");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(find(f[0], "window")->s, "trace");
  EXPECT_GT(find(f[0], "sync_ns")->i, 460'000'000);
  EXPECT_TRUE(contains(f[0].title, "HIP")) << f[0].title;
  // The kernels it waits for sit queued behind a hipStreamWaitEvent on the
  // idle GPU: the sync is the symptom; info, with the dependency's advice.
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_GT(find(f[0], "gpu_idle_queued_ns")->i, 460'000'000);
  EXPECT_TRUE(contains(f[0].advice, "itself waits on the idle GPU")) << f[0].advice;
  EXPECT_EQ(f[0].advice.rfind("Fix what holds the work hipMemcpyWithStream", 0), 0u) << f[0].advice;
}

// ---- cost_in_children: scopes only ---------------------------------------

TEST(RulesPrecision, CostInChildrenNamesScopesNotWrappers) {
  // SGLang: aten::copy_ → hipMemcpyWithStream (a framework op over the
  // runtime call sync_api names) and execute_… → a chain of Python calls
  // that each wrap one call: nothing the user can change. Silent.
  EXPECT_TRUE(run(kSglang, "cost_in_children").empty());
  // torch 1.13: matmul_add → aten::matmul → aten::mm, a scope around one op.
  EXPECT_TRUE(run("torch-1.13/blog/64_bf16_warm_eager.kineto.json", "cost_in_children").empty());
  // torch 2.11 compiled: matmul_add splits into the compiled region and
  // Dynamo's cache lookup (94% / 6%): it fires, with the drill path into
  // the compiled code.
  const std::vector<Finding> f = run("gpu/h100-torch-2.11/64_bf16_warm_compile.json", "cost_in_children");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(find(f[0], "key")->s, "matmul_add");
  ASSERT_GE(find(f[0], "drill_path")->texts.size(), 2u);
  EXPECT_EQ(find(f[0], "drill_path")->texts[1], "Torch-Compiled Region: 0/0");
}

// ---- severity from the time at stake -----------------------------------------

TEST(RulesPrecision, SeverityWeighsTheWindow) {
  // triton_example: a 1.4 ms wrapper in a 13.3 s step.
  const std::vector<Finding> c = run("public/hta/triton_example/triton_example.json.gz", "compile_overhead");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].severity, FindingSeverity::kInfo) << c[0].title;
  EXPECT_LT(find(c[0], "window_share_pct")->d, 1.0);
  // mi210: 339 hipExtModuleLaunchKernel calls while the GPU is busy 86%.
  const std::vector<Finding> m = run(kMi210, "many_calls");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].severity, FindingSeverity::kInfo) << m[0].title;
  EXPECT_TRUE(contains(m[0].title, "hidden behind a GPU busy")) << m[0].title;
  // The blog's 64² compile: the wrapper (~49 us a step, ~27% of it) is less
  // than the compiled code it wraps (~84 us): info, with its saving.
  const std::vector<Finding> w = run("gpu/h100-torch-2.11/64_bf16_cold_compile.json", "compile_overhead");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].severity, FindingSeverity::kInfo);
  EXPECT_GT(w[0].impact_ns, 0);
  // Its compiled code launches aten::addmm's GEMM and a copy, no kernel of
  // Inductor's own: keep it eager (issue 38's twenty-third round).
  EXPECT_TRUE(w[0].advice.starts_with("Keep this function eager")) << w[0].advice;
}

// ---- hidden_memcpy, cold_start on the blog's runs ---------------------------

std::string h100(const std::string& name) { return "gpu/h100-torch-2.11/" + name + ".json"; }

TEST(RulesPrecision, HiddenMemcpySeverityFromTheStep) {
  // 64²: 1 µs of copy in a ~160 µs step on an idle GPU: info. 4096²: 19 µs
  // in a GPU-bound ~190 µs step of device work: a warning.
  for (const char* n : {"64_bf16_cold_compile", "64_bf16_warm_compile"}) {
    const std::vector<Finding> f = run(h100(n), "hidden_memcpy");
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_EQ(f[0].severity, FindingSeverity::kInfo) << n;
    ASSERT_NE(find(f[0], "step_share_pct"), nullptr);
    EXPECT_LT(find(f[0], "step_share_pct")->d, 1.0) << n;
  }
  for (const char* n : {"4096_bf16_cold_compile", "4096_bf16_warm_compile"}) {
    const std::vector<Finding> f = run(h100(n), "hidden_memcpy");
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_EQ(f[0].severity, FindingSeverity::kWarning) << n;
    EXPECT_GT(find(f[0], "step_share_pct")->d, 5.0) << n;
  }
}

TEST(RulesPrecision, HiddenMemcpySavesHostTimeWhereTheGpuWaits) {
  // Review 2026-11-26, R7: at 64² the GPU idles through each step's
  // cudaMemcpyAsync (11.2 / 13.9 us median on the H100 runs, 8.2 / 8.7 us on
  // the H200's) while the copy itself takes ~1 us on the GPU: "up to 1.0 us a
  // step" understated the fix ~10x. The saving is the call's host time, part
  // of the launching idle; at 4096² the GPU runs the copy on the critical
  // path and its device time stays the saving.
  for (const auto& [rel, per_step_us] :
       {std::pair<std::string, std::int64_t>{h100("64_bf16_cold_compile"), 112},
        {h100("64_bf16_warm_compile"), 139},
        {"gpu/h200-tprof/64_bf16_cold_compile.json", 82},
        {"gpu/h200-tprof/64_bf16_warm_compile.json", 87}}) {
    const std::vector<Finding> f = run(rel, "hidden_memcpy");
    ASSERT_EQ(f.size(), 1u) << rel;
    EXPECT_EQ((f[0].impact_per_step_ns + 50) / 100, per_step_us) << rel;  // as printed
    ASSERT_NE(find(f[0], "launch_call"), nullptr) << rel;
    EXPECT_EQ(find(f[0], "launch_call")->s, "cudaMemcpyAsync") << rel;
    ASSERT_NE(find(f[0], "saving_inside_idle"), nullptr) << rel;
    EXPECT_EQ(find(f[0], "saving_inside_idle")->s, "launching") << rel;
    EXPECT_GT(f[0].impact_ns, 5 * find(f[0], "total_ns")->i) << rel;
  }
  for (const char* n : {"4096_bf16_cold_compile", "4096_bf16_warm_compile"}) {
    const std::vector<Finding> f = run(h100(n), "hidden_memcpy");
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_EQ(find(f[0], "saving_inside_idle"), nullptr) << n;
    EXPECT_EQ(f[0].impact_ns, find(f[0], "total_ns")->i) << n;
  }
}

TEST(RulesPrecision, ColdStartNoWarningWithoutOneTimeWork) {
  // Warm and cold runs record the same first step: the schedule's warmup
  // step (not recorded) took the program's one-time work in both, and step 1
  // runs the same calls as later steps, only slower. Not a warning; the
  // finding stays (info) so the wide step is still explained.
  for (const char* n : {"64_bf16_warm_eager", "64_bf16_warm_compile", "4096_bf16_warm_eager", "4096_bf16_warm_compile",
                        "64_bf16_cold_eager", "64_bf16_cold_compile", "4096_bf16_cold_eager", "4096_bf16_cold_compile"}) {
    const std::vector<Finding> f = run(h100(n), "cold_start");
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_EQ(f[0].severity, FindingSeverity::kInfo) << n;
    EXPECT_EQ(find(f[0], "one_time_calls"), nullptr) << n;  // listed only when there are some
    // The trace starts at ProfilerStep#1: step #0 ran (the schedule's
    // warm-up), so another warm-up step would not change step 1, the
    // profiler's first active step, and a warm run is no "cold start"
    // (review 2026-11-26, item 1: the fix said to add one).
    EXPECT_EQ(find(f[0], "steps_before_recording")->i, 1) << n;
    EXPECT_TRUE(f[0].title.starts_with("Slow first step: step 1 took")) << f[0].title;
    // The 4096 runs are GPU-bound, the host ahead of a queue: judged by
    // their device work, with the first step's delay before its first
    // launch (issue 38's twenty-third round); the 64 runs by the median.
    const bool ahead = std::string_view(n).starts_with("4096");
    EXPECT_TRUE(f[0].advice.starts_with(ahead ? "Judge this run by its device work" : "Judge this run by the median step"))
        << f[0].advice;
    if (ahead) EXPECT_TRUE(contains(f[0].advice, " before its first launch delays the GPU")) << f[0].advice;
    EXPECT_TRUE(contains(f[0].advice, "the profiler's first active step: the run already had step #0 before it"))
        << f[0].advice;
    EXPECT_FALSE(contains(f[0].advice, "add a warm-up step")) << f[0].advice;
  }
}

TEST(RulesPrecision, ColdStartWarnsOnOneTimeWork) {
  // The same shape with a cudaMalloc and a module load in the first step
  // only: the one-time work is in the recording, a warning. Steps from #0:
  // nothing ran before the recording.
  auto x = [](const std::string& cat, const std::string& name, double ts, double dur) {
    return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 1, "tid": 1, "ts": )" +
           std::to_string(ts) + R"(, "dur": )" + std::to_string(dur) + "}";
  };
  std::string doc = R"({"traceEvents": [)";
  for (int i = 0; i < 4; ++i) {
    const double ts = 1000.0 * i, dur = i == 0 ? 900 : 200;
    if (i > 0) doc += ',';
    doc += x("user_annotation", "ProfilerStep#" + std::to_string(i), ts, dur);
    doc += ',';
    doc += x("cuda_runtime", "cudaLaunchKernel", ts + 10, 5);
    if (i == 0) {
      doc += ',';
      doc += x("cuda_runtime", "cudaMalloc", ts + 20, 500);
      doc += ',';
      doc += x("cuda_driver", "cuModuleLoadData", ts + 600, 100);
    }
  }
  doc += "]}";
  Result<Trace> t = read_trace_bytes(doc);
  ASSERT_TRUE(t);
  const std::vector<Finding> f = run(*t, "cold_start");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  ASSERT_NE(find(f[0], "one_time_calls"), nullptr);
  EXPECT_EQ(find(f[0], "one_time_calls")->texts, (std::vector<std::string>{"cuModuleLoadData", "cudaMalloc"}));
  // The fix: the remedy first, with the step's loss and the costliest call.
  EXPECT_TRUE(f[0].advice.starts_with("Run at least one warm-up iteration before the profiled steps")) << f[0].advice;
  EXPECT_TRUE(contains(f[0].advice, "cudaMalloc 500.0 us")) << f[0].advice;
}

// ---- fix lines (issue 24, item 6) -----------------------------------------

TEST(RulesPrecision, HotspotGivesACollectiveNoGemmAdvice) {
  // HTA's rank 0: an NCCL SendRecv kernel holds most of the GPU time; it was
  // told to check "shapes and dtype (tensor-core friendly sizes, bf16)".
  const std::vector<Finding> f = run(kRank0, "hotspot");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(contains(f[0].title, "ncclKernel")) << f[0].title;
  EXPECT_TRUE(f[0].advice.starts_with("Before tuning ncclKernel")) << f[0].advice;
  EXPECT_TRUE(contains(f[0].advice, "straggler")) << f[0].advice;
  EXPECT_FALSE(contains(f[0].advice, "TFLOP/s")) << f[0].advice;
  EXPECT_FALSE(contains(f[0].advice, "bf16 or")) << f[0].advice;
}

TEST(RulesPrecision, HotspotGemmAdviceFollowsItsDtype) {
  // The blog's 4096 bf16 run: an nvjet half-precision GEMM is not told to
  // autocast; HTA's event_sync trace's ampere_sgemm (fp32, SIMT) is.
  const std::vector<Finding> half = run("gpu/h100-tprof/4096_bf16_warm_eager.json", "hotspot");
  ASSERT_EQ(half.size(), 1u);
  EXPECT_TRUE(half[0].advice.starts_with("Start with nvjet_")) << half[0].advice;
  EXPECT_TRUE(contains(half[0].advice, "already runs in half precision")) << half[0].advice;
  EXPECT_FALSE(contains(half[0].advice, "autocast")) << half[0].advice;
  const std::vector<Finding> fp32 = run("public/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz", "hotspot");
  ASSERT_EQ(fp32.size(), 1u);
  EXPECT_TRUE(contains(fp32[0].advice, "fp32 without tensor cores (sgemm)")) << fp32[0].advice;
}

TEST(RulesPrecision, HotspotOnAnIdleGpuPointsAtWhatItWaitsOn) {
  // tprof's 64×64 fused run: the GPU is idle most of the steps and Self CPU
  // is 8× Self CUDA (below overhead_bound's 10×): a 2.4 µs GEMM is not
  // where the time goes. The 4096² run of the same code is compute-bound:
  // its GEMM is.
  const std::vector<Finding> idle = run("gpu/h100-tprof/64_bf16_warm_fused.json", "hotspot");
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_TRUE(idle[0].advice.starts_with("Fix what the GPU waits on first")) << idle[0].advice;
  const std::vector<Finding> busy = run("gpu/h100-tprof/4096_bf16_warm_fused.json", "hotspot");
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_TRUE(busy[0].advice.starts_with("Start with nvjet_")) << busy[0].advice;
}

TEST(RulesPrecision, HotspotOnACpuCollectiveIsAboutThePeers) {
  // HTA's CPU-only rank 34: gloo:all_reduce holds 91% of Self CPU, 213 ms a
  // call, waiting for the other ranks; it was told to "call it less often".
  const std::vector<Finding> f = run("public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "hotspot");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(contains(f[0].advice, "waiting on the other ranks")) << f[0].advice;
  EXPECT_TRUE(contains(f[0].advice, "straggler")) << f[0].advice;
  EXPECT_FALSE(contains(f[0].advice, "call it less often")) << f[0].advice;
}

TEST(RulesPrecision, HotspotSilentWhenItsTimeIsNegligible) {
  // HTA's simple_add: 16 µs of GPU time in a 19.8 s trace.
  EXPECT_TRUE(run("public/hta/execution_trace/benchmark_simple_add_trace.json.gz", "hotspot").empty());
}

TEST(RulesPrecision, HotspotOnTheCpuTellsSlowCallsFromFrequentOnes) {
  // torch 1.13's threads trace: 7 CPU aten::mm calls of 11.5 ms each are
  // slow in themselves; "call it less often or on larger inputs" misleads.
  const std::vector<Finding> slow = run("torch-1.13/threads/threads.kineto.json", "hotspot");
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_TRUE(slow[0].advice.starts_with("Make each call of aten::mm cheaper (7 calls at")) << slow[0].advice;
  EXPECT_TRUE(contains(slow[0].advice, "torch.get_num_threads()")) << slow[0].advice;
}

TEST(RulesPrecision, DispatchGapCostsTheDeviceIdleInItsGaps) {
  // PARAM's linear replay: 40 optimizer steps each spend 587 us before their
  // first foreach op while the device idles: warning, its impact the GPU
  // idle inside the gaps (HTA's MTIA trace once summed 616 ms of gaps over
  // threads in a 460 ms trace while the device ran 92% busy).
  const std::vector<Finding> f = run("public/param/et_replay/tests/inputs/linear_kineto.json.gz", "dispatch_gap");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(f[0].impact_ns, find(f[0], "gpu_idle_in_gaps_ns")->i);
  EXPECT_LE(f[0].impact_ns, find(f[0], "total_gap_ns")->i);
  // HTA's sampled ranks: the fp8 scopes' recurring gaps (201 and 184 us in
  // two steps of about 600 ms) are under 1% of the window: no cause (issue
  // 38's eighth round). TraceLens' MI300X ResNet: zero_grad's gap is torch's
  // own loop setting grads to None.
  EXPECT_TRUE(run(kRank0, "dispatch_gap").empty());
  EXPECT_TRUE(run("public/hta/trace_filter/sampled_rank-1.json.gz", "dispatch_gap").empty());
  EXPECT_TRUE(run("public/tracelens/mi300/resnet_act_checkpoint.json.gz", "dispatch_gap").empty());
}

TEST(RulesPrecision, DispatchGapLeavesCollectiveScopesAlone) {
  // HTA's ranks: "nccl:all_to_all" spends 130-150 us before its launch in the
  // process group, not in user Python; it was told to "move work out of the
  // scope". The blog's matmul_add still gets its first-call finding.
  for (const char* rel : {kRank0, "public/hta/trace_filter/sampled_rank-1.json.gz"}) {
    for (const Finding& x : run(rel, "dispatch_gap")) EXPECT_FALSE(contains(x.title, "nccl:")) << rel << x.title;
  }
  const std::vector<Finding> f = run(h100("64_bf16_cold_eager"), "dispatch_gap");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].advice.starts_with("Call \"matmul_add\" once before profiling")) << f[0].advice;
}

TEST(RulesPrecision, CommExposedNamesTheStragglerCheckFirst) {
  const std::vector<Finding> f = run(kRank0, "comm_exposed");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].advice.starts_with("First run tprof diagnose on all ranks' traces together")) << f[0].advice;
  EXPECT_TRUE(contains(f[0].advice, "per step")) << f[0].advice;
  EXPECT_TRUE(run(kBertH100, "comm_exposed").empty());  // no communication
}

// ---- cpu_gpu_offset ------------------------------------------------------

TEST(RulesPrecision, AQueueIsBackedUpOnlyBehindABusyDevice) {
  // "GPU queue backed up ... the GPU is the bottleneck (compute-bound)" on
  // traces whose device idles while the work waits: the backward thread's
  // one GEMM starts 64 ms after its launch on an idle GPU, rank 0's NCCL
  // kernels wait on peers (next to a communication-bound verdict).
  for (const char* rel : {"kineto-public/hta_backward_thread_2022-10.json", kRank0, kAlexnet}) {
    for (const Finding& f : run(rel, "cpu_gpu_offset")) {
      EXPECT_NE(find(f, "pattern")->s, "queue_backed_up") << rel << ": " << f.title;
    }
  }
  // SGLang decode: 537 of 542 waits behind a busy GPU, but their union is
  // mostly a 463 ms wait on an idle device (a dependency, not a queue).
  for (const Finding& f : run(kSglang, "cpu_gpu_offset")) {
    EXPECT_NE(find(f, "pattern")->s, "queue_backed_up") << f.title;
  }
  // A GPU busy 94.5% with work queued 5.7 ms deep still is one.
  const std::vector<Finding> busy = run("public/tracelens/torch_compile_triton/trace.json.gz", "cpu_gpu_offset");
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(find(busy[0], "pattern")->s, "queue_backed_up");
}

// ---- compile_overhead -----------------------------------------------------

TEST(RulesPrecision, CompileOverheadCountsItsRegionsAndIdleOnce) {
  // The blog's 64² warm compile: 2 launches per step inside the regions; on
  // the whole diagnosis overhead_bound's launch overhead already claims the
  // GPU idle in the wrapper's time (216 us of a ~221 us step): the wrapper
  // claims no idle again, and its saving is its host time, 60.5 us a step
  // inside that launch overhead, not the 457 ns of idle left unclaimed
  // (review 2026-11-26, R7).
  const Diagnosis d = diagnose(load("gpu/h100-torch-2.11/64_bf16_warm_compile.json"));
  const Finding* co = nullptr;
  for (const Finding& x : d.findings) {
    if (x.id == "compile_overhead") co = &x;
  }
  ASSERT_NE(co, nullptr);
  EXPECT_EQ(find(*co, "region_launches")->i, 40);
  EXPECT_GT(find(*co, "wrapper_idle_claimed_elsewhere_ns")->i, 0);
  EXPECT_LT(co->idle_ns, find(*co, "wrapper_idle_ns")->i / 10) << co->idle_ns;
  EXPECT_EQ(co->impact_per_step_ns, find(*co, "wrapper_per_step_ns")->i);
  EXPECT_EQ((co->impact_per_step_ns + 50) / 100, 605);  // 60.5 us
  ASSERT_NE(find(*co, "saving_inside_idle"), nullptr);
  EXPECT_EQ(find(*co, "saving_inside_idle")->s, "launching");
  EXPECT_TRUE(contains(co->advice, "not added to it again")) << co->advice;
  // With compile_overhead alone nothing else claims the idle.
  const std::vector<Finding> alone = run("gpu/h100-torch-2.11/64_bf16_warm_compile.json", "compile_overhead");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_GT(alone[0].impact_ns, 1'000'000);
}

TEST(RulesPrecision, CompileOverheadIsInfoWhenTheGpuWorkItLaunchedHidesTheWrapper) {
  // tracelens torch_compile_triton: no steps, one compiled region whose
  // wrapper costs 0.54 ms of CPU while it launches ~12 ms of Triton and GEMM
  // work on a GPU busy 94.5%: the wrapper is hidden, yet the rule warned
  // (it counted device work per step, and without steps counted none).
  const std::vector<Finding> f = run("public/tracelens/torch_compile_triton/trace.json.gz", "compile_overhead");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_GT(find(f[0], "gpu_per_step_ns")->i, find(f[0], "wrapper_per_step_ns")->i);
}

TEST(RulesPrecision, LowGpuUtilizationOnAnExcerptCannotJudge) {
  // The tb_plugin resnet50 sample keeps 2.5 ms of events from the 122 ms
  // ProfilerStep#17 (tests/data/PROVENANCE.md): "[warning] GPU 0 runs kernels
  // 2.9% ... fix (up to 118.399 ms a step): Record what the host does" read
  // the cut as the program's idle time (review 2026-11-26, item 17).
  const std::vector<Finding> f = run(
      "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz",
      "low_gpu_utilization");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(f[0].impact_ns, 0);
  EXPECT_EQ(f[0].title,
            "GPU 0: the step holds device work for 3.535 ms of 121.940 ms and no events for the rest: utilization can't "
            "be judged");
  EXPECT_TRUE(f[0].advice.starts_with("Judge utilization on a recording that holds the whole step")) << f[0].advice;
  EXPECT_LT(find(f[0], "recorded_span_ns")->i, 12'194'000);
  // A run recorded whole keeps its warning (the blog's 64x64 eager run), and
  // so does a step whose events open it and stop (HTA's triton_example:
  // 1.5 ms of events, then 13.3 s of Triton compiling with the GPU idle).
  for (const std::string& rel :
       {h100("64_bf16_cold_eager"), std::string("public/hta/triton_example/triton_example.json.gz")}) {
    const std::vector<Finding> g = run(rel, "low_gpu_utilization");
    ASSERT_EQ(g.size(), 1u) << rel;
    EXPECT_EQ(g[0].severity, FindingSeverity::kWarning) << rel;
    EXPECT_GT(g[0].impact_ns, 0) << rel;
  }
}

TEST(RulesPrecision, PageableCopiesBeforeAnyKernelAreSetUp) {
  // HTA's alexnet: the 8 pageable copies (244 MB, 55.5 ms) are the weights
  // moved to the device once, in "[param|cuda]"'s aten::to, before the
  // first kernel. "DataLoader(pin_memory=True) ... overlaps compute" named a
  // DataLoader the trace has not and compute there is none to overlap
  // (review 2026-11-26, item 18).
  const std::vector<Finding> f = run(kAlexnet, "pageable_memcpy");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(find(f[0], "pattern")->s, "setup");
  EXPECT_TRUE(f[0].advice.starts_with("Leave this set-up out of the recording: the 8 copies (244 MB, 55.491 ms on the "
                                      "device) all run before the first kernel, the longest in aten::to > aten::copy_ in "
                                      "\"[param|cuda]\""))
      << f[0].advice;
  EXPECT_FALSE(contains(f[0].advice, "DataLoader")) << f[0].advice;
  // A copy between kernels keeps its warning (vecadd's readback: rules_peers' PageableMemcpy too).
  const std::vector<Finding> g = run("gpu/h200-tprof/record_vecadd.json", "pageable_memcpy");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(find(g[0], "pattern"), nullptr);
}

TEST(RulesPrecision, PageableCopyInALaterStepIsCopiedEveryIteration) {
  // H100 TimeSformer inference: its one pageable copy (38.5 MB, the video
  // clip) runs before the first kernel, but inside ProfilerStep#6, a loop
  // that ran six times before it: copied every iteration, not set-up
  // (issue 38's eleventh round, a benchmark's input copied in its step #3
  // was told to leave the recording). Pinned, it runs at PCIe Gen5's rate,
  // not Gen3's: the rate comes from the device (compute capability 9.0).
  const std::vector<Finding> f =
      run("public/tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz", "pageable_memcpy");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_EQ(find(f[0], "pattern")->s, "every_iteration");
  EXPECT_TRUE(f[0].advice.starts_with("Pin the host buffers")) << f[0].advice;
  EXPECT_TRUE(contains(f[0].advice, "(these move 11.13 GB/s; pinned ones reach about 50 GB/s on this GPU's PCIe Gen5)"))
      << f[0].advice;
  EXPECT_NEAR(find(f[0], "pinned_gbps_assumed")->d, 50.0, 1e-9);
  // 3.461 ms less the 38.5 MB at 50 GB/s.
  EXPECT_EQ(f[0].impact_ns, 2'690'655);
}

TEST(RulesPrecision, AllocatorFixSpeaksOfTheMeasuredIterationsNotTheWarmup) {
  // HTA's alexnet: the longest allocator call is a 6.0 s cudaFree in the
  // warm-up forward; the fix said to "pre-allocate the memory cudaFree ...
  // asks for" (a free asks for nothing; the warm-up runs once). What
  // recurs: in the measured forward 5 cudaMalloc calls (32.8 ms) after
  // "[param|clear_cache]"'s cudaFree emptied the cache (review 2026-11-26,
  // item 19).
  const std::vector<Finding> all = run(kAlexnet, "host_blocked");
  const auto f = std::find_if(all.begin(), all.end(), [](const Finding& x) { return find(x, "kind")->s == "blocked_alloc"; });
  ASSERT_NE(f, all.end());
  EXPECT_TRUE(f->advice.starts_with("Keep the allocator's memory through the measured iterations: after the warm-up, 5 "
                                    "allocator calls take 32.814 ms"))
      << f->advice;
  EXPECT_TRUE(contains(f->advice, "after cudaFree in \"[param|clear_cache]\" (1.249 ms) emptied the cache")) << f->advice;
  // The warm-up's longest is a cudaMalloc: the 6.0 s cudaFree in the first
  // cudnn_convolution is that op's set-up, initialisation (issue 38).
  EXPECT_TRUE(contains(f->advice, "longest cudaMalloc 764.486 ms) are one-time")) << f->advice;
  EXPECT_FALSE(contains(f->advice, "asks for")) << f->advice;
  // The saving is the measured iterations', not the warm-up's 8.5 s.
  EXPECT_LT(f->impact_ns, 40'000'000);
  EXPECT_GT(f->impact_ns, 20'000'000);
}

TEST(RulesPrecision, AStreamWaitIsNamedInTheTracesApi) {
  // SGLang's decode runs on ROCm (hip* calls): its stream waits are
  // hipStreamWaitEvent (review 2026-11-26, reservations).
  const Diagnosis d = diagnose(load(kSglang));
  for (const Finding& f : d.findings) EXPECT_FALSE(contains(f.advice, "cudaStreamWaitEvent")) << f.id << ": " << f.advice;
  const auto low = std::find_if(d.findings.begin(), d.findings.end(), [](const Finding& f) { return f.id == "low_gpu_utilization"; });
  ASSERT_NE(low, d.findings.end());
  EXPECT_TRUE(contains(low->advice, "(hipStreamWaitEvent)")) << low->advice;
}

TEST(RulesPrecision, HeavyKernelLaunchNamesALowerPrecisionTheGpuHas) {
  // The tb_plugin resnet50 excerpt runs on a V100 (sm70): its fix said
  // "bf16 (torch.autocast) or TF32" (review 2026-11-26, item 16). Since
  // issue 38's tuning review the rule fires only where the GPU is busy and
  // the occupancy-queried kernels hold a share of it: in this excerpt's
  // window the GPU idles, so the query is no cause and nothing is said.
  const std::vector<Finding> f = run(
      "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz",
      "heavy_kernel_launch");
  EXPECT_TRUE(f.empty()) << f.front().advice;
}


// ---- review 2026-11-26 (round 3) -----------------------------------------

TEST(RulesPrecision, ColdStartJudgedByTheMedianSavesNothing) {
  // R2: the H200 64 warm eager run's step 1 makes the same calls as later
  // steps and step #0 ran before the recording: the fix is to judge by the
  // median, which saves nothing, so the note has no impact (it printed "up
  // to 6.2 us a step"); the excess stays in evidence.
  const std::vector<Finding> fs = run("gpu/h200-tprof/64_bf16_warm_eager.json", "cold_start");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].severity, FindingSeverity::kInfo);
  EXPECT_EQ(fs[0].impact_ns, 0);
  ASSERT_NE(find(fs[0], "excess_ns"), nullptr);
  EXPECT_GT(find(fs[0], "excess_ns")->i, 100'000);
  // With one-time calls left (H200 4096 cold compile) the warm-up fix saves them.
  const std::vector<Finding> cold = run("gpu/h200-tprof/4096_bf16_cold_compile.json", "cold_start");
  ASSERT_EQ(cold.size(), 1u);
  EXPECT_GT(cold[0].impact_ns, 0);
}

TEST(RulesPrecision, MemoryBoundElementwiseCountsTheStepsWork) {
  // R8: the H200 4096 warm eager trace holds one add_kernel 3.7 ms before
  // ProfilerStep#1 (the schedule's warm-up step): the finding said "count
  // 21, time 470.4 us, 12.2% of GPU time"; the steps hold 20 adds, 448.2
  // us, 11.6% (the verdict's elementwise share).
  const std::vector<Finding> fs = run("gpu/h200-tprof/4096_bf16_warm_eager.json", "memory_bound_elementwise");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(find(fs[0], "count")->i, 20);
  EXPECT_NEAR(static_cast<double>(find(fs[0], "time_ns")->i), 448'200.0, 100.0);
  EXPECT_NEAR(find(fs[0], "gpu_time_pct")->d, 11.6, 0.05);
  EXPECT_EQ(fs[0].impact_ns, find(fs[0], "time_ns")->i);
  EXPECT_TRUE(contains(fs[0].title, "11.6% of GPU time")) << fs[0].title;
  // The blog's H100 64 runs: no elementwise kernel holds 10% of the time.
  EXPECT_TRUE(run("gpu/h100-torch-2.11/64_bf16_cold_eager.json", "memory_bound_elementwise").empty());
}

TEST(RulesPrecision, QueueAdviceNamesTheTopKernelsRate) {
  // R9: "…nvjet_… (3.438 ms), whose efficiency the kernel-class findings
  // report" where no kernel-class finding fired (H200 4096 cold compile,
  // cold fused, warm fused): the rate is said inline.
  for (const char* rel : {"gpu/h200-tprof/4096_bf16_cold_compile.json", "gpu/h200-tprof/4096_bf16_cold_fused.json",
                          "gpu/h200-tprof/4096_bf16_warm_fused.json"}) {
    const std::vector<Finding> fs = run(rel, "cpu_gpu_offset");
    ASSERT_EQ(fs.size(), 1u) << rel;
    EXPECT_FALSE(contains(fs[0].advice, "kernel-class findings")) << fs[0].advice;
    EXPECT_TRUE(contains(fs[0].advice, "TFLOP/s, ")) << fs[0].advice;
    EXPECT_TRUE(contains(fs[0].advice, "of the H200's dense fp16/bf16 peak): the GPU sets the pace")) << fs[0].advice;
  }
  const std::vector<Finding> fs = run("gpu/h200-tprof/4096_bf16_cold_compile.json", "cpu_gpu_offset");
  EXPECT_TRUE(contains(fs[0].advice, "(3.438 ms, 800 TFLOP/s, 80.8% of the H200's dense fp16/bf16 peak)")) << fs[0].advice;
}

TEST(RulesPrecision, QueueGrowthOverRepeatedRangesWithoutSteps) {
  // R3: record_plain_4096_nvtx has no ProfilerStep but 20 NVTX "step"
  // ranges, whose first launches wait 5, 8, 172, 169, ... 3314 us: a ramp,
  // reported as its growth per range, not a median. The ranges are the
  // trace's steps (find_step_events: the one repeated range, holding the
  // launches), so the title counts steps.
  const std::vector<Finding> fs = run("gpu/h200-tprof/record_plain_4096_nvtx.json", "cpu_gpu_offset");
  ASSERT_EQ(fs.size(), 1u);
  ASSERT_NE(find(fs[0], "growth_per_step_ns"), nullptr) << fs[0].title;
  EXPECT_GT(find(fs[0], "growth_per_step_ns")->i, 150'000);
  EXPECT_LT(find(fs[0], "growth_per_step_ns")->i, 180'000);
  EXPECT_TRUE(contains(fs[0].title, "the host enqueues 20 steps")) << fs[0].title;
  // The 64² run of the same program queues nothing: no growth there.
  EXPECT_TRUE(run("gpu/h200-tprof/record_plain_64_nvtx.json", "cpu_gpu_offset").empty() ||
              find(run("gpu/h200-tprof/record_plain_64_nvtx.json", "cpu_gpu_offset")[0], "growth_per_step_ns") == nullptr);
}


TEST(RulesPrecision, DispatchGapFirstCallMustBeMaterial) {
  // R10: record_plain_64 (tprof record of plain_matmul_add.py, no steps) ran
  // fn three times and synchronized before its "step" ranges; the first
  // range's 10.9 us extra before cuLaunchKernelEx (0.002% of the 442.5 ms
  // trace) was "Call "step" once before profiling (a warm-up iteration)".
  EXPECT_TRUE(run("gpu/h200-tprof/record_plain_64.json", "dispatch_gap").empty());
}

}  // namespace
}  // namespace tprof
