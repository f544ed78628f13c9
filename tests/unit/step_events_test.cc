// find_step_events (include/tprof/step_events.h): which events are a trace's
// steps when it has no ProfilerStep#N (issue 40 item 4), on small traces
// built to hold one condition each.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/kineto_events.h"
#include "tprof/read.h"
#include "tprof/step_events.h"

namespace tprof {
namespace {

using testing::doc;
using testing::kernel;
using testing::launch;
using testing::x;

std::string ann(const std::string& name, double ts, double dur) { return x("user_annotation", name, 1, 1, ts, dur); }

Trace parse(const std::vector<std::string>& events, const std::string& step_range = "") {
  ReadOptions options;
  options.step_range = step_range;
  Result<Trace> t = read_trace_bytes(doc(events), "steps.json", options);
  EXPECT_TRUE(t.has_value());
  return t ? std::move(*t) : Trace{};
}

// n calls of `name`, each 90 us of every 100 us, each launching a kernel.
std::vector<std::string> loop(const std::string& name, int n, int first_id = 1) {
  std::vector<std::string> ev;
  for (int i = 0; i < n; ++i) {
    const double t = 100.0 * i;
    ev.push_back(ann(name, t, 90));
    ev.push_back(launch(t + 10, 5, first_id + i));
    ev.push_back(kernel("k", 7, t + 20, 5, first_id + i));
  }
  return ev;
}

TEST(StepEvents, ARepeatedRangeHoldingTheLaunchesIsTheSteps) {
  const StepEvents s = find_step_events(parse(loop("step", 4)));
  EXPECT_EQ(s.events.size(), 4u);
  EXPECT_EQ(s.range, "step");
  EXPECT_TRUE(s.detected);
  EXPECT_EQ(s.numbers, (std::vector<std::int64_t>{0, 1, 2, 3}));
}

// A loop that numbers its ranges (record_function(f"iteration_{i}"))
// writes each name once: one range, named by its stem (issue 38's
// seventeenth round: "inductor/iteration_0" to "_2").
TEST(StepEvents, RangesNumberedByTheirIterationAreOneRange) {
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    const double t = 100.0 * i;
    ev.push_back(ann("inductor/iteration_" + std::to_string(i), t, 90));
    ev.push_back(launch(t + 10, 5, i + 1));
    ev.push_back(kernel("k", 7, t + 20, 5, i + 1));
  }
  const StepEvents s = find_step_events(parse(ev));
  EXPECT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.range, "inductor/iteration_<n>");
  EXPECT_TRUE(s.detected);
  // Numbered ranges whose word is no iteration's (a model's layers) are not.
  ev.clear();
  for (int i = 0; i < 3; ++i) {
    const double t = 100.0 * i;
    ev.push_back(ann("layer_" + std::to_string(i), t, 90));
    ev.push_back(launch(t + 10, 5, i + 1));
    ev.push_back(kernel("k", 7, t + 20, 5, i + 1));
  }
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

TEST(StepEvents, TwoCallsAreNoLoop) {
  // Two calls are as often set-up and tear-down, or two forks.
  EXPECT_TRUE(find_step_events(parse(loop("step", 2))).events.empty());
}

TEST(StepEvents, ARangeInsideAnotherRepeatedOneIsNotTheStep) {
  std::vector<std::string> ev = loop("train_step", 3);
  for (int i = 0; i < 3; ++i) ev.push_back(ann("forward", 100.0 * i + 5, 40));
  const StepEvents s = find_step_events(parse(ev));
  EXPECT_EQ(s.range, "train_step");
  EXPECT_EQ(s.events.size(), 3u);
}

// A training loop annotated by phase, "forward", "loss" and "backward"
// side by side on one thread (issue 38's twelfth round: a CPU MLP whose
// "backward" was taken for the step, 650 us of a 5 ms iteration): a phase
// is not the iteration. A step-like name beside other ranges stays one.
TEST(StepEvents, APhaseBesideOtherRepeatedRangesIsNotTheStep) {
  auto phases = [](const std::string& last) {
    std::vector<std::string> ev;
    for (int i = 0; i < 3; ++i) {
      const double t = 1000.0 * i;
      ev.push_back(ann("forward", t, 100));
      ev.push_back(ann("loss", t + 110, 20));
      ev.push_back(ann(last, t + 140, 800));
    }
    return ev;
  };
  EXPECT_TRUE(find_step_events(parse(phases("backward"))).events.empty());
  const StepEvents s = find_step_events(parse(phases("train_step")));
  EXPECT_EQ(s.range, "train_step");
  EXPECT_EQ(s.events.size(), 3u);
}

TEST(StepEvents, ARangeHoldingFewOfTheLaunchesIsNotTheStep) {
  // "setup" repeats 3 times, covers its span, and launches nothing; the
  // trace's 6 launches are elsewhere.
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) ev.push_back(ann("setup", 10.0 * i, 9));
  for (int i = 0; i < 6; ++i) {
    ev.push_back(launch(100.0 + 20 * i, 5, i + 1));
    ev.push_back(kernel("k", 7, 110.0 + 20 * i, 5, i + 1));
  }
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

TEST(StepEvents, TorchsOwnAnnotationsAreNeverSteps) {
  EXPECT_TRUE(find_step_events(parse(loop("## Call CompiledFxGraph abc ##", 4))).events.empty());
  EXPECT_TRUE(find_step_events(parse(loop("Optimizer.step#AdamW.step", 4))).events.empty());
}

TEST(StepEvents, AGraphCaptureTraceHasNoRangeSteps) {
  std::vector<std::string> ev = loop("capture_one", 4);
  ev.push_back(x("cuda_runtime", "cudaStreamBeginCapture", 1, 1, 1, 1));
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

TEST(StepEvents, TwoCandidatesAreListedAndNoneChosen) {
  // Two loops on two threads, each holding half the launches.
  std::vector<std::string> ev = loop("a", 3);
  for (int i = 0; i < 3; ++i) {
    const double t = 100.0 * i;
    ev.push_back(x("user_annotation", "b", 1, 2, t, 90));
    ev.push_back(x("cuda_runtime", "cudaLaunchKernel", 1, 2, t + 10, 5, testing::corr(10 + i)));
    ev.push_back(kernel("k", 8, t + 30, 5, 10 + i));
  }
  const StepEvents s = find_step_events(parse(ev));
  EXPECT_TRUE(s.events.empty());
  EXPECT_EQ(s.candidates, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(repeated_ranges(parse(ev)), (std::vector<std::string>{"a", "b"}));
}

TEST(StepEvents, ANamedRangeCountsARecursiveCallOnce) {
  // --step-range names any host event; a call nested in one of its name is
  // part of it. Named ranges need no repeats or launches.
  std::vector<std::string> ev = {ann("iter", 0, 100), ann("iter", 10, 50), ann("iter", 200, 100)};
  const StepEvents s = find_step_events(parse(ev, "iter"));
  EXPECT_EQ(s.events.size(), 2u);
  EXPECT_FALSE(s.detected);
  EXPECT_EQ(s.range, "iter");
}

std::string py(const std::string& name, double ts, double dur) { return x("python_function", name, 1, 1, ts, dur); }
std::string op(const std::string& name, double ts, double dur) { return x("cpu_op", name, 1, 1, ts, dur); }

// n back-to-back calls of the Python function `name` (with_stack traces),
// each running an op that launches a kernel, and `between` (if any) run
// between each two.
std::vector<std::string> py_loop(const std::string& name, int n, const std::string& between = "") {
  std::vector<std::string> ev;
  for (int i = 0; i < n; ++i) {
    const double t = 100.0 * i;
    ev.push_back(py(name, t, 95));
    ev.push_back(op("aten::mm", t + 5, 20));
    ev.push_back(launch(t + 10, 5, i + 1));
    ev.push_back(kernel("k", 7, t + 20, 5, i + 1));
    if (!between.empty() && i + 1 < n) ev.push_back(op(between, t + 96, 3));
  }
  return ev;
}

TEST(StepEvents, ARepeatedPythonFunctionIsTheStepsWhenNoAnnotationIs) {
  // vLLM's engine loop: _process_engine_step, called back to back.
  const StepEvents s = find_step_events(parse(py_loop("core.py(915): _process_engine_step", 4)));
  EXPECT_EQ(s.events.size(), 4u);
  EXPECT_EQ(s.range, "core.py(915): _process_engine_step");
  EXPECT_TRUE(s.detected);
}

TEST(StepEvents, AnAnnotationComesBeforeAPythonFunction) {
  std::vector<std::string> ev = py_loop("loop.py(3): run_one", 4);
  for (int i = 0; i < 4; ++i) ev.push_back(ann("step", 100.0 * i + 1, 93));
  EXPECT_EQ(find_step_events(parse(ev)).range, "step");
}

TEST(StepEvents, APythonFunctionWithAnOpBetweenItsCallsIsALayer) {
  // AlexNet's conv forwards with a relu between each: layers of one
  // forward, not iterations, however much of the span they cover.
  EXPECT_TRUE(find_step_events(parse(py_loop("conv.py(462): forward", 5, "aten::relu_"))).events.empty());
}

TEST(StepEvents, APythonFunctionCoveringLittleOfTheTraceIsNoLoop) {
  // Ten block forwards back to back, holding most of the launches, then
  // as long again of other work.
  std::vector<std::string> ev = py_loop("model.py(251): forward", 10);
  ev.push_back(py("train.py(9): backward", 1000, 1000));
  for (int i = 0; i < 5; ++i) {
    ev.push_back(launch(1010.0 + 190 * i, 5, 100 + i));
    ev.push_back(kernel("k", 7, 1020.0 + 190 * i, 5, 100 + i));
  }
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

TEST(StepEvents, APythonFunctionWithGapsBetweenItsCallsIsNoLoop) {
  // Calls covering 60% of their span: an annotation's test passes, a
  // Python function's (nine tenths) does not.
  std::vector<std::string> ev;
  for (int i = 0; i < 4; ++i) {
    const double t = 100.0 * i;
    ev.push_back(py("loop.py(3): run_one", t, 60));
    ev.push_back(op("aten::mm", t + 5, 20));
    ev.push_back(launch(t + 10, 5, i + 1));
    ev.push_back(kernel("k", 7, t + 20, 5, i + 1));
  }
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

// Every module call passes through torch's _call_impl: back to back, they
// are a forward's modules, not iterations (issue 38's seventeenth round:
// four unrelated module calls of a nano-vllm decode taken for its steps).
TEST(StepEvents, TorchsOwnPythonFunctionsAreNoSteps) {
  EXPECT_TRUE(find_step_events(parse(py_loop("torch/nn/modules/module.py(1777): _call_impl", 4))).events.empty());
  EXPECT_EQ(find_step_events(parse(py_loop("engine.py(40): step", 4))).events.size(), 4u);
}

TEST(StepEvents, APythonFunctionThatRunsNoOpIsAWait) {
  // A thread's lock waits repeat and cover the run, and run no op.
  std::vector<std::string> ev;
  for (int i = 0; i < 4; ++i) ev.push_back(py("<built-in method acquire of _thread.lock object>", 100.0 * i, 99));
  EXPECT_TRUE(find_step_events(parse(ev)).events.empty());
}

// Real traces with stack and no ProfilerStep: where the engine loop's
// step is found, and where repeated Python functions are not iterations.
Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t) << rel;
  return t ? std::move(*t) : Trace{};
}

TEST(StepEvents, VllmsEngineStepsAreFoundFromTheStack) {
  // Issue 38's twelfth round: 18 engine steps, the first cold; without
  // them every one-time cost was judged against the whole trace.
  const StepEvents s = find_step_events(load("public/vllm_gptoss20b/engine_steps_rtx3090.pt.trace.json.gz"));
  EXPECT_EQ(s.events.size(), 18u);
  EXPECT_TRUE(s.range.ends_with("core.py(915): _process_engine_step")) << s.range;
  EXPECT_TRUE(s.detected);
}

TEST(StepEvents, RepeatedPythonFunctionsThatAreNotIterationsAreNotSteps) {
  for (const char* rel : {"public/warming423_pf/alexnet_infer_rtx3080.pt.trace.json.gz",        // conv forwards
                          "public/switch_transformers/switch_moe_a100_fp32.json.gz",            // block forwards
                          "public/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",  // __torch_function__
                          "public/flowsim/test_trace_excerpt.trace.json.gz"}) {                 // scheduler pieces
    const StepEvents s = find_step_events(load(rel));
    EXPECT_TRUE(s.events.empty()) << rel << ": " << s.range;
    EXPECT_TRUE(s.candidates.empty()) << rel;
  }
}

TEST(StepEvents, ALoneProfilerStepHoldingOnlyTheClosingCallIsNoStep) {
  // Issue 38's thirteenth round: a VAE's only ProfilerStep#1, 14 us at the
  // end of a 10 ms trace, held the profiler's step() and record_function
  // exit (Python frames, with_stack) and none of the iteration.
  std::vector<std::string> ev;
  for (int i = 0; i < 100; ++i) ev.push_back(op("aten::add", 100.0 * i, 90));
  ev.push_back(testing::step(1, 10'000, 14));
  ev.push_back(py("torch/autograd/profiler.py(738): __exit__", 10'001, 12));
  const StepEvents s = find_step_events(parse(ev));
  EXPECT_TRUE(s.events.empty());
  EXPECT_TRUE(s.closing_step_only);
  // The same step around the iteration's work is a step.
  ev.push_back(testing::step(0, 0, 9'995));
  const StepEvents both = find_step_events(parse(ev));
  ASSERT_EQ(both.events.size(), 1u);
  EXPECT_EQ(both.numbers.front(), 0);
  EXPECT_FALSE(both.closing_step_only);
  // A lone step that holds the work stays.
  std::vector<std::string> one;
  for (int i = 0; i < 100; ++i) one.push_back(op("aten::add", 100.0 * i, 90));
  one.push_back(testing::step(1, 0, 10'000));
  EXPECT_EQ(find_step_events(parse(one)).events.size(), 1u);
}

TEST(StepEvents, ProfilerStepsComeFirst) {
  std::vector<std::string> ev = loop("step", 4);
  ev.push_back(testing::step(7, 0, 400));
  const StepEvents s = find_step_events(parse(ev));
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_EQ(s.numbers.front(), 7);
  EXPECT_TRUE(s.range.empty());
}

}  // namespace
}  // namespace tprof
