// Verdicts (src/analyze/verdict.cc, docs/diagnose.md "Verdicts"): each
// category on a small trace built for it, `unclear` when no measured share
// is large enough (issue 11: "When no rule supports a verdict, the trace
// still gets one"), and the verdicts of the real traces the issue names.
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

Diagnosis judge(const std::string& text) {
  Result<Trace> t = read_trace_bytes(text);
  EXPECT_TRUE(t);
  return t ? diagnose(*t) : Diagnosis{};
}

Diagnosis judge_file(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t) << rel;
  return t ? diagnose(*t) : Diagnosis{};
}

std::int64_t num(const Diagnosis& d, std::string_view key) {
  const Evidence::Field* f = d.verdict_evidence.find(key);
  return f != nullptr ? f->i : -1;
}

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

TEST(Verdict, OverheadBoundWhenTheHostLaunchesBetweenShortKernels) {
  // Ten 2 µs kernels, one launched every 10 µs: the device waits on launches.
  std::vector<std::string> ev = {step(1, 0, 100)};
  for (int i = 0; i < 10; ++i) {
    ev.push_back(launch(2 + 10 * i, 4, i + 1));
    ev.push_back(kernel("tiny", 7, 8 + 10 * i, 2, i + 1));
  }
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kOverheadBound) << d.summary;
  EXPECT_GT(num(d, "idle_launch_ns"), 70'000);
  EXPECT_EQ(num(d, "idle_host_ns"), 0);
  EXPECT_TRUE(contains(d.summary, "while the host launches work")) << d.summary;
}

// Without steps, a lead in which nothing is recorded, host or device (the
// profiler's own span opens the trace; the program's first op comes 16 ms
// later) shows nothing of the program: the verdict is judged from the
// first recorded event (issue 38's twelfth round: an A10G Triton
// microbenchmark was "unclear: nothing recorded 89.1%"). A lead the host
// records (an op spanning it) stays in the window.
TEST(Verdict, AnUnrecordedLeadIsLeftOutOfAWindowWithoutSteps) {
  auto trace = [](bool recorded_lead) {
    std::vector<std::string> ev = {x("Trace", "PyTorch Profiler (0)", 1, 1, 0, 18'600)};
    if (recorded_lead) ev.push_back(x("cpu_op", "aten::load", 1, 1, 10, 16'000));
    for (int i = 0; i < 30; ++i) {
      const double t = 16'200 + 80.0 * i;
      ev.push_back(x("cpu_op", "aten::square", 1, 1, t, 70));
      ev.push_back(launch(t + 60, 8, i + 1));
      ev.push_back(kernel("tiny", 7, t + 72, 2, i + 1));
    }
    return doc(ev);
  };
  const Diagnosis d = judge(trace(false));
  EXPECT_EQ(d.verdict, Verdict::kOverheadBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "judged from the first recorded event, 16.200 ms into the trace")) << d.summary;
  const Diagnosis kept = judge(trace(true));
  EXPECT_FALSE(contains(kept.summary, "judged from the first recorded event")) << kept.summary;
}

TEST(Verdict, HostBoundWhenTheHostWorksWithoutLaunching) {
  // 8 ms of host work that launches nothing, then 1 ms of device work.
  const Diagnosis d = judge(doc({step(1, 0, 10'000), x("cpu_op", "preprocess", 1, 1, 10, 8'000),
                                 launch(8'100, 5, 1), kernel("gemm", 7, 8'110, 1'000, 1)}));
  EXPECT_EQ(d.verdict, Verdict::kHostBound) << d.summary;
  EXPECT_GE(num(d, "idle_host_ns"), 8'000'000);
  EXPECT_GE(num(d, "lead_host_ns"), 8'000'000);
  EXPECT_TRUE(contains(d.summary, "without launching device work")) << d.summary;
  EXPECT_EQ(d.steps.at(0).verdict, Verdict::kHostBound);
}

TEST(Verdict, HostPreprocessingThenAComputeBoundPhase) {
  // No steps: 300 ms of preprocessing, then the GPU busy from its first kernel on.
  const Diagnosis d = judge(doc({x("cpu_op", "load_and_preprocess", 1, 1, 0, 300'000), launch(300'000, 5, 1),
                                 kernel("forward", 7, 300'010, 99'990, 1)}));
  EXPECT_EQ(d.verdict, Verdict::kHostBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "before the first device activity")) << d.summary;
  EXPECT_TRUE(contains(d.summary, "(compute-bound)")) << d.summary;
}

TEST(Verdict, DependencyBoundWhenLaunchedWorkWaitsWithTheDeviceIdle) {
  // The kernel is launched at 10 µs and starts at 5 ms: the stream waited on
  // something else (an event of another stream, another rank), not the host.
  const Diagnosis d = judge(doc({step(1, 0, 6'000), launch(10, 5, 1),
                                 x("cuda_runtime", "cudaStreamWaitEvent", 1, 1, 20, 3),
                                 kernel("gemm", 7, 5'000, 900, 1)}));
  EXPECT_EQ(d.verdict, Verdict::kDependencyBound) << d.summary;
  EXPECT_GT(num(d, "idle_queued_ns"), 4'500'000);
  EXPECT_TRUE(contains(d.summary, "not on the host")) << d.summary;
}

TEST(Verdict, LateWorkOnOneStreamWithNoWaitIsNoDependency) {
  // The same late start with no stream wait in the trace and one stream:
  // nothing the trace holds could be waited for (another process on the
  // GPU, its clocks): not dependency-bound, and the remedy says to check
  // the GPU (issue 38's fifth round: an RTX 4090 sparse PDE run).
  const Diagnosis d = judge(doc({step(1, 0, 6'000), launch(10, 5, 1), kernel("gemm", 7, 5'000, 900, 1)}));
  EXPECT_EQ(d.verdict, Verdict::kUnclear) << d.summary;
  EXPECT_TRUE(contains(d.summary, "nothing in the trace holding it back")) << d.summary;
  bool checked = false;
  for (const Finding& f : d.findings) {
    if (f.advice.find("Check the GPU before the program") != std::string::npos) checked = true;
    EXPECT_EQ(f.advice.find("StreamWaitEvent"), std::string::npos) << f.id << ": " << f.advice;
  }
  EXPECT_TRUE(checked);
}

TEST(Verdict, SyncBoundWhenTheHostBlocksInABlockingCopy) {
  // cudaMemcpy (not Async) returns when the copy is done: 6 ms of a 10 ms step.
  const Diagnosis d = judge(doc({step(1, 0, 10'000), launch(10, 5, 1), kernel("gemm", 7, 20, 1'000, 1),
                                 x("cuda_runtime", "cudaMemcpy", 1, 1, 1'100, 6'000, corr(2)),
                                 x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, 7, 7'000, 90, corr(2))}));
  EXPECT_EQ(d.verdict, Verdict::kSyncBound) << d.summary;
  EXPECT_GE(num(d, "sync_ns"), 6'000'000);
}

TEST(Verdict, ComputeBoundNamesADeepQueue) {
  // The host launches far ahead: each kernel starts ~2 ms after its launch.
  std::vector<std::string> ev = {step(1, 0, 10'000)};
  for (int i = 0; i < 10; ++i) {
    ev.push_back(launch(5 + i * 10, 5, i + 1));
    ev.push_back(kernel("gemm", 7, 2'000 + i * 1'000, 1'000, i + 1));
  }
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kComputeBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "deep queue")) << d.summary;
}

// A 10 ms step with the GPU busy 55% and the rest split: 2 ms of host work
// (20%), 1.5 ms of short launch gaps (15%), ~1 ms of launched work waiting
// (10%). Its events shifted by `at`, correlation ids from `id`.
void add_unclear_step(std::vector<std::string>* ev, int n, double at, int* id) {
  ev->push_back(step(n, at, 10'000));
  ev->push_back(launch(at, 5, *id));
  ev->push_back(kernel("big", 7, at + 10, 5'500, (*id)++));
  ev->push_back(x("cpu_op", "host_work", 1, 1, at + 5'510, 2'000));
  for (double t = 7'510; t < 9'000; t += 100, ++*id) {
    ev->push_back(launch(at + t, 5, *id));
    ev->push_back(kernel("tiny", 7, at + t + 6, 1, *id));
  }
  ev->push_back(launch(at + 9'010, 5, *id));
  ev->push_back(kernel("late", 7, at + 10'100, 10, (*id)++));
}

TEST(Verdict, UnclearWhenNoShareIsLargeEnough) {
  // No cause holds 25% and the GPU is busy under two thirds: a default
  // would guess.
  std::vector<std::string> ev;
  int id = 1;
  add_unclear_step(&ev, 1, 0, &id);
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kUnclear) << d.summary;
  EXPECT_TRUE(d.summary.starts_with("unclear:")) << d.summary;
  EXPECT_TRUE(contains(d.summary, "no share is large enough")) << d.summary;
  EXPECT_TRUE(d.support.empty());
}

// A step with the GPU busy 90%: one 900 µs kernel.
void add_busy_step(std::vector<std::string>* ev, int n, double at, int* id) {
  ev->push_back(step(n, at, 1'000));
  ev->push_back(launch(at + 1, 5, *id));
  ev->push_back(kernel("gemm", 7, at + 10, 900, (*id)++));
}

TEST(Verdict, AStrictMajorityOfStepsNamesAnUnclearWindow) {
  // Two unclear 10 ms steps and three 1 ms steps with the GPU busy 90%: the
  // window is busy 59.6% (under two thirds) with no idle cause at a
  // quarter, so it is unclear; 3 of the 5 steps are compute-bound.
  std::vector<std::string> ev;
  int id = 1;
  add_unclear_step(&ev, 1, 0, &id);
  add_unclear_step(&ev, 2, 10'200, &id);
  for (int i = 0; i < 3; ++i) add_busy_step(&ev, 3 + i, 20'400 + 1'000 * i, &id);
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kComputeBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "3 of 5 steps compute-bound (the steps together are unclear")) << d.summary;
}

TEST(Verdict, MostlyBusyWithNoLargeIdleCauseIsDeviceBound) {
  // The GPU busy 70% of a step (under the 80% compute share) and the rest
  // short launch gaps (~15%) and host work (~15%): the device is what the
  // time goes to.
  std::vector<std::string> ev = {step(1, 0, 10'000), launch(0, 5, 1), kernel("big", 7, 10, 7'000, 1),
                                 x("cpu_op", "host_work", 1, 1, 7'010, 1'500)};
  int id = 2;
  for (double t = 8'510; t < 10'000; t += 100, ++id) {
    ev.push_back(launch(t, 5, id));
    ev.push_back(kernel("tiny", 7, t + 6, 1, id));
  }
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kComputeBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "the GPU is busy 70")) << d.summary;
}

TEST(Verdict, AHostWaitingInASyncOnABusyDeviceIsNotSyncBound) {
  // Four steps of a benchmark loop: the kernel runs 750 µs of each 1 ms
  // step and the host waits for it in cudaDeviceSynchronize (75% of the
  // time, the device busy through 99% of it), then prepares the next. The
  // host waits on real work: removing the sync would not speed it up.
  std::vector<std::string> ev;
  for (int i = 0; i < 4; ++i) {
    const double at = 1'000.0 * i;
    ev.push_back(step(i + 1, at, 1'000));
    ev.push_back(launch(at + 5, 5, i + 1));
    ev.push_back(kernel("gemm", 7, at + 12, 750, i + 1));
    ev.push_back(x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, at + 15, 750));
    ev.push_back(x("cpu_op", "prepare", 1, 1, at + 770, 200));
  }
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kComputeBound) << d.summary;
  EXPECT_GE(num(d, "sync_ns"), 2'900'000);  // the host does wait: 75% of the time
  for (const StepVerdict& s : d.steps) EXPECT_NE(s.verdict, Verdict::kSyncBound);
}

TEST(Verdict, TheLoadersWorkerStartUpIsNotInputBound) {
  // One 400 ms first __next__ of a multi-process DataLoader (its workers
  // spawning) in a 1 s trace, then a short inference: a start-up cost, not
  // the input pipeline's pace. Three steady 400 ms waits are.
  const std::string next = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
  const Diagnosis once = judge(doc({x("user_annotation", next, 1, 1, 0, 400'000),
                                    x("cpu_op", "aten::conv2d", 1, 1, 400'010, 100), launch(400'020, 5, 1),
                                    kernel("conv", 7, 400'030, 599'000, 1)}));
  EXPECT_NE(once.verdict, Verdict::kInputBound) << once.summary;
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    const double at = 1'000'000.0 * i;
    ev.push_back(step(i + 1, at, 1'000'000));
    ev.push_back(x("user_annotation", next, 1, 1, at, 400'000));
    ev.push_back(launch(at + 400'010, 5, i + 1));
    ev.push_back(kernel("conv", 7, at + 400'020, 500'000, i + 1));
  }
  const Diagnosis steady = judge(doc(ev));
  EXPECT_EQ(steady.verdict, Verdict::kInputBound) << steady.summary;
}

TEST(Verdict, ADataPipeIteratorIsInputToo) {
  // torchdata's DataPipe iterator ("enumerate(DataPipe)#...") is the input
  // pipeline as a DataLoader's __next__ is (is_dataloader_scope): three
  // steady 400 ms waits in it are input-bound. The verdict used to look for
  // "DataLoader" in the name only.
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    const double at = 1'000'000.0 * i;
    ev.push_back(step(i + 1, at, 1'000'000));
    ev.push_back(x("user_annotation", "enumerate(DataPipe)#ShardingFilterIterDataPipe", 1, 1, at, 400'000));
    ev.push_back(launch(at + 400'010, 5, i + 1));
    ev.push_back(kernel("conv", 7, at + 400'020, 500'000, i + 1));
  }
  const Diagnosis d = judge(doc(ev));
  EXPECT_EQ(d.verdict, Verdict::kInputBound) << d.summary;
}

TEST(Verdict, CpuOnlyWithoutDeviceActivity) {
  const Diagnosis d = judge(doc({step(1, 0, 100), x("cpu_op", "aten::add", 1, 1, 10, 50)}));
  EXPECT_EQ(d.verdict, Verdict::kCpuOnly);
  EXPECT_TRUE(d.support.empty());
}

// ---- the real traces ------------------------------------------------------

TEST(Verdict, BlogTracesKeepTheirVerdictsWithSupport) {
  const std::string dir = "gpu/h100-torch-2.11/";
  for (const char* run : {"64_bf16_cold_eager", "64_bf16_warm_compile"}) {
    const Diagnosis d = judge_file(dir + run + ".json");
    EXPECT_EQ(d.verdict, Verdict::kOverheadBound) << run;
    EXPECT_NE(std::find(d.support.begin(), d.support.end(), "overhead_bound"), d.support.end()) << run;
  }
  for (const char* run : {"4096_bf16_cold_eager", "4096_bf16_warm_compile"}) {
    const Diagnosis d = judge_file(dir + run + ".json");
    EXPECT_EQ(d.verdict, Verdict::kComputeBound) << run;
    EXPECT_NE(std::find(d.support.begin(), d.support.end(), "compute_bound"), d.support.end()) << run;
  }
}

TEST(Verdict, SetupBeforeTheFirstKernelIsHostBound) {
  // HTA's simple_add benchmark: CUDA set-up takes 19.6 s of the 19.8 s trace
  // in recorded calls. "overhead-bound" (the old default) blamed launches.
  const Diagnosis d = judge_file("public/hta/execution_trace/benchmark_simple_add_trace.json.gz");
  EXPECT_EQ(d.verdict, Verdict::kHostBound) << d.summary;
}

TEST(Verdict, SglangDecodeWaitsOnAnotherStreamNotOnTheHost) {
  // Stream 3's kernels, launched in the first 0.3 ms behind a
  // hipStreamWaitEvent, start 463 ms later on an idle device; the host's
  // blocking hipMemcpyWithStream over those 463 ms is the symptom.
  const Diagnosis d = judge_file("public/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz");
  EXPECT_EQ(d.verdict, Verdict::kDependencyBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "blocked")) << d.summary;
}

TEST(Verdict, AStretchWhereNothingIsRecordedIsUnclear) {
  // An excerpt: 2 ms of recorded work in a 20 ms step, the rest empty.
  // "Host-bound" would blame the host for time the trace does not show.
  const Diagnosis d = judge(doc({step(1, 0, 20'000), x("cpu_op", "aten::linear", 1, 1, 10, 1'500), launch(1'600, 5, 1),
                                 kernel("gemm", 7, 1'610, 300, 1)}));
  EXPECT_EQ(d.verdict, Verdict::kUnclear) << d.summary;
  EXPECT_GT(num(d, "idle_unrecorded_ns"), 15'000'000);
  EXPECT_TRUE(contains(d.summary, "does not show what filled")) << d.summary;
}

TEST(Verdict, AFirstLaunchLoadingItsModuleIsInitialisationNotLaunchOverhead) {
  // MI250 toy: the kernel's first hipLaunchKernel takes 6.5 ms (its module
  // loads): the host is blocked in initialisation, not launching op after op.
  const Diagnosis d = judge(doc({step(1, 0, 8'000), launch(10, 6'500, 1), kernel("k", 7, 6'520, 5, 1),
                                 launch(6'600, 5, 2), kernel("k", 7, 6'610, 5, 2)}));
  EXPECT_EQ(d.verdict, Verdict::kHostBound) << d.summary;
  EXPECT_TRUE(contains(d.summary, "blocked in initialisation")) << d.summary;
  EXPECT_EQ(d.steps.at(0).idle_by_cause[static_cast<std::size_t>(IdleCause::kBlockedInit)], 6'500'000);
  EXPECT_EQ(num(d, "idle_host_ns"), 0);
}

TEST(Verdict, ALaterSlowLaunchIsNotInitialisation) {
  // The same kernel launched again slowly loads nothing: blocked, not init.
  const Diagnosis d = judge(doc({step(1, 0, 8'000), launch(10, 5, 1), kernel("k", 7, 20, 5, 1), launch(100, 6'500, 2),
                                 kernel("k", 7, 6'610, 5, 2)}));
  EXPECT_EQ(d.steps.at(0).idle_by_cause[static_cast<std::size_t>(IdleCause::kBlockedInit)], 0);
  EXPECT_EQ(d.steps.at(0).idle_by_cause[static_cast<std::size_t>(IdleCause::kBlockedOther)], 6'500'000);
}

}  // namespace
}  // namespace tprof
