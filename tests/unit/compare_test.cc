// tprof::compare_traces on the PyTorch 2.11 H100 runs and torch 1.13's
// legacy traces, and the CI gate on small synthetic traces.
#include "tprof/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/support/kineto_events.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

using testing::doc;
using testing::kernel;
using testing::launch;
using testing::step;
using testing::x;

Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t.has_value()) << rel;
  return std::move(t).value();
}

Trace parse(const std::string& json) {
  Result<Trace> t = read_trace_bytes(json);
  EXPECT_TRUE(t.has_value());
  return std::move(t).value();
}

const OpDelta* find_op(const Comparison& c, const std::string& name) {
  for (const OpDelta& o : c.ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// A trace of steps with the given durations (µs), 10 µs apart, each with one
// aten::mm of half the step.
std::string steps_trace(const std::vector<double>& durs_us, int first_step = 1) {
  std::vector<std::string> ev;
  double ts = 1000;
  for (std::size_t i = 0; i < durs_us.size(); ++i) {
    ev.push_back(step(first_step + static_cast<int>(i), ts, durs_us[i]));
    ev.push_back(x("cpu_op", "aten::mm", 1, 1, ts + 1, durs_us[i] / 2));
    ts += durs_us[i] + 10;
  }
  return doc(ev);
}

// Issue 40, item 2: cold and warm runs of the same 64x64 program differ
// only in the machine's state: every host op moved x0.49-0.63 and none was
// added or removed, which is named as an environment change; eager against
// compiled (ops added and removed) is a code change and is not.
TEST(CompareTest, EveryOpMovingAlikeIsAnEnvironmentChange) {
  const Comparison c = compare_traces(load("gpu/h100-torch-2.11/64_bf16_warm_eager.json"),
                                      load("gpu/h100-torch-2.11/64_bf16_cold_eager.json"));
  EXPECT_TRUE(c.environment_change.starts_with("every host op that matters (6) moved by x0.49-0.63"))
      << c.environment_change;
  EXPECT_NE(format_comparison_text(c).find("environment:  every host op"), std::string::npos);
  EXPECT_TRUE(compare_traces(load("gpu/h100-torch-2.11/64_bf16_warm_eager.json"),
                             load("gpu/h100-torch-2.11/64_bf16_warm_compile.json"))
                  .environment_change.empty());
  const Trace a = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  EXPECT_TRUE(compare_traces(a, a).environment_change.empty());  // nothing moved
}

TEST(CompareTest, EagerToCompileShowsFusedOpsAndTheCopy) {
  const Trace a = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  const Trace b = load("gpu/h100-torch-2.11/64_bf16_warm_compile.json");
  const Comparison c = compare_traces(a, b);
  EXPECT_EQ(c.alignment, StepAlignment::kStepNumber);
  EXPECT_EQ(c.a.dur_ns.size(), 20u);
  EXPECT_EQ(c.b.dur_ns.size(), 20u);
  EXPECT_EQ(c.a.step.front(), 1);
  EXPECT_EQ(c.b.step.back(), 20);

  const OpDelta* mm = find_op(c, "aten::mm");
  const OpDelta* add = find_op(c, "aten::add");
  const OpDelta* addmm = find_op(c, "aten::addmm");
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(add, nullptr);
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(mm->change, ChangeKind::kVanished);
  EXPECT_EQ(add->change, ChangeKind::kVanished);
  EXPECT_EQ(addmm->change, ChangeKind::kNew);
  EXPECT_DOUBLE_EQ(mm->calls_a, 1.0);
  EXPECT_EQ(mm->calls_b, 0.0);
  EXPECT_GT(addmm->self_cpu_b_ns, 0);
  EXPECT_EQ(addmm->self_cpu_a_ns, 0);

  bool dtod_new = false;
  for (const KernelDelta& k : c.kernels) {
    if (k.name.starts_with("Memcpy DtoD")) {
      dtod_new = k.change == ChangeKind::kNew && k.category == "memcpy" && k.count_b == 1.0 && k.time_b_ns > 0;
    }
  }
  EXPECT_TRUE(dtod_new);
  // The eager add kernel vanishes with the fusion.
  bool add_kernel_gone = false;
  for (const KernelDelta& k : c.kernels) {
    if (k.name.find("CUDAFunctor_add") != std::string::npos) add_kernel_gone = k.change == ChangeKind::kVanished;
  }
  EXPECT_TRUE(add_kernel_gone);
  EXPECT_EQ(c.delta_ns, c.b.median_step_ns - c.a.median_step_ns);
  EXPECT_EQ(c.noise_ns, c.a.mad_ns + c.b.mad_ns);
}

void expect_no_change(const Comparison& c) {
  EXPECT_EQ(c.delta_ns, 0);
  EXPECT_EQ(c.delta_pct, 0.0);
  EXPECT_FALSE(c.verdict_changed);
  EXPECT_EQ(c.a.dur_ns, c.b.dur_ns);
  for (const OpDelta& o : c.ops) {
    EXPECT_EQ(o.change, ChangeKind::kCommon) << o.name;
    EXPECT_EQ(o.self_cpu_delta_ns(), 0) << o.name;
    EXPECT_EQ(o.cpu_total_delta_ns(), 0) << o.name;
    EXPECT_EQ(o.calls_a, o.calls_b) << o.name;
  }
  for (const KernelDelta& k : c.kernels) {
    EXPECT_EQ(k.change, ChangeKind::kCommon) << k.name;
    EXPECT_EQ(k.time_delta_ns(), 0) << k.name;
    EXPECT_EQ(k.count_a, k.count_b) << k.name;
  }
  // (torch 1.13's traces have 3 steps: fewer than the gate's default minimum.)
  const GateResult g = check_gate(c, {.min_steps = 1});
  EXPECT_TRUE(g.passed);
  EXPECT_FALSE(g.over_threshold);
  for (const MetricComparison& m : c.metrics) {
    EXPECT_EQ(m.mean_a_ns, m.mean_b_ns) << compare_metric_name(m.metric);
    EXPECT_FALSE(m.beyond_noise()) << compare_metric_name(m.metric);
  }
}

TEST(CompareTest, ATraceAgainstItselfShowsNoChange) {
  const Trace a = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  const Trace b = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  const Comparison c = compare_traces(a, b);
  EXPECT_FALSE(c.ops.empty());
  EXPECT_FALSE(c.kernels.empty());
  expect_no_change(c);
  // The same Trace object on both sides, too.
  expect_no_change(compare_traces(a, a));
}

TEST(CompareTest, LegacyTorch113TracesCompare) {
  const Trace a = load("torch-1.13/blog/64_fp32_cold_eager.json");
  const Trace b = load("torch-1.13/blog/64_fp32_warm_eager.json");
  const Comparison c = compare_traces(a, b);
  EXPECT_TRUE(c.a.has_steps);
  EXPECT_TRUE(c.b.has_steps);
  EXPECT_NE(c.alignment, StepAlignment::kWholeTrace);
  EXPECT_GT(c.a.median_step_ns, 0);
  EXPECT_GT(c.b.median_step_ns, 0);
  const OpDelta* mm = find_op(c, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->change, ChangeKind::kCommon);
  EXPECT_TRUE(c.kernels.empty());
  expect_no_change(compare_traces(a, a));
}

TEST(CompareTest, ClearlySlowerStepsFailTheGate) {
  const Trace a = parse(steps_trace({100, 102, 98, 101, 99}));
  const Trace b = parse(steps_trace({150, 152, 148, 151, 149}));
  const Comparison c = compare_traces(a, b);
  EXPECT_EQ(c.alignment, StepAlignment::kStepNumber);
  EXPECT_EQ(c.a.median_step_ns, 100000);
  EXPECT_EQ(c.b.median_step_ns, 150000);
  EXPECT_EQ(c.a.mad_ns, 1000);
  EXPECT_EQ(c.b.mad_ns, 1000);
  EXPECT_EQ(c.noise_ns, 2000);
  EXPECT_DOUBLE_EQ(c.delta_pct, 50.0);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_FALSE(g.passed);
  EXPECT_TRUE(g.over_threshold);
  EXPECT_TRUE(g.over_noise);
  EXPECT_TRUE(check_slower(c, 60.0).passed);  // within the limit
  const OpDelta* mm = find_op(c, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->self_cpu_a_ns, 50000);
  EXPECT_EQ(mm->self_cpu_b_ns, 75000);
  // B faster than A: never fails.
  EXPECT_TRUE(check_slower(compare_traces(b, a), 0.0).passed);
}

TEST(CompareTest, ADifferenceInsideTheNoisePassesTheGate) {
  // B's steps are A's, reordered, 5 µs slower on two and faster on one:
  // unpaired the spread hides it, and paired the changes disagree.
  const Trace a = parse(steps_trace({100, 120, 80, 110, 90}));
  const Trace b = parse(steps_trace({85, 115, 125, 95, 105}));
  const Comparison c = compare_traces(a, b);
  EXPECT_EQ(c.delta_ns, 5000);
  const GateResult g = check_slower(c, 0.0);
  EXPECT_TRUE(g.passed) << format_gate_line(g);
  EXPECT_TRUE(g.over_threshold);
  EXPECT_FALSE(g.over_noise);
  EXPECT_LT(g.m.low_ns, 0);
  EXPECT_GT(g.m.high_ns, 0);
}

TEST(CompareTest, StepsAlignByOrderWhenNumbersDifferAndWholeTracesWithoutSteps) {
  const Trace a = parse(steps_trace({100, 100, 100}, 1));
  const Trace b = parse(steps_trace({100, 100, 100, 100}, 7));
  const Comparison c = compare_traces(a, b);
  EXPECT_EQ(c.alignment, StepAlignment::kOrder);
  EXPECT_EQ(c.a.dur_ns.size(), 3u);
  EXPECT_EQ(c.b.step, (std::vector<std::int64_t>{7, 8, 9}));
  EXPECT_EQ(c.b.total_steps, 4u);

  // One side's numbers inside the other's: by number.
  const Trace longer = parse(steps_trace({100, 100, 100, 100, 100}, 1));
  EXPECT_EQ(compare_traces(a, longer).alignment, StepAlignment::kStepNumber);

  const Trace no_steps = parse(doc({x("cpu_op", "aten::mm", 1, 1, 10, 50), x("cpu_op", "aten::add", 1, 1, 70, 30)}));
  const Comparison w = compare_traces(no_steps, a);
  EXPECT_EQ(w.alignment, StepAlignment::kWholeTrace);
  EXPECT_EQ(w.a.median_step_ns, 90000);  // first start to last end
  EXPECT_EQ(w.a.step, (std::vector<std::int64_t>{-1}));
  const OpDelta* add = find_op(w, "aten::add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->change, ChangeKind::kVanished);
}

TEST(CompareTest, ReportsNameTheChanges) {
  const Trace a = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  const Trace b = load("gpu/h100-torch-2.11/64_bf16_warm_compile.json");
  const Comparison c = compare_traces(a, b);
  const CompareFormat f{.label_a = "eager.json", .label_b = "compile.json", .top = 5};
  const std::string text = format_comparison_text(c, f);
  EXPECT_NE(text.find("vanished ops"), std::string::npos);
  EXPECT_NE(text.find("aten::addmm"), std::string::npos);
  const std::string md = format_comparison_md(c, f);
  EXPECT_NE(md.find("| median step |"), std::string::npos);
  const GateResult g = check_slower(c, 5.0);
  const std::string json = format_comparison_json(c, f, &g);
  EXPECT_NE(json.find("\"vanished_ops\""), std::string::npos);
  EXPECT_NE(json.find("\"gate\""), std::string::npos);
  EXPECT_EQ(format_gate_line(g).rfind("compare gate: ", 0), 0u);
}

TEST(CompareTest, AnEmptyBaselineFailsAnySlowdownWithoutAPercentage) {
  const Trace empty = parse(doc({}));
  const Trace b = parse(steps_trace({100, 100}));
  const Comparison c = compare_traces(empty, b);
  EXPECT_EQ(c.alignment, StepAlignment::kWholeTrace);
  EXPECT_EQ(c.a.median_step_ns, 0);
  // Whole traces are one step each: the gate refuses unless told to decide on one.
  EXPECT_EQ(check_slower(c, 1000.0).outcome, GateOutcome::kRefused);
  const GateResult g = check_gate(c, {.max_slower_pct = 1000.0, .min_steps = 1});
  EXPECT_EQ(g.outcome, GateOutcome::kFail);
  EXPECT_NE(format_gate_line(g).find("n/a %"), std::string::npos);
  EXPECT_NE(format_gate_line(g).find("noise unknown"), std::string::npos);
  EXPECT_TRUE(check_gate(compare_traces(empty, empty), {.min_steps = 1}).passed);
}

// ---- The gate on planted changes (docs/compare.md, "The gate") ----

// The trace with every instant t (event starts and ends) moved to f(t);
// with host_only, only the events on CPU lanes (the device's stay).
Trace remapped(const std::string& rel, const std::function<std::int64_t(std::int64_t)>& f, bool host_only = false) {
  Trace t = load(rel);
  EventColumns& ev = t.events;
  for (std::size_t e = 0; e < ev.size(); ++e) {
    if (host_only && (ev.lane[e] >= t.lanes.size() || t.lanes[ev.lane[e]].kind != LaneKind::kCpu)) continue;
    const std::int64_t start = f(ev.ts_ns[e]);
    const std::int64_t end = f(ev.ts_ns[e] + ev.dur_ns[e]);
    ev.ts_ns[e] = start;
    ev.dur_ns[e] = end - start;
  }
  return t;
}

// Time stretched by `factor` from `from` on (and by 1 before it).
std::function<std::int64_t(std::int64_t)> stretch(std::int64_t from, double factor) {
  return [=](std::int64_t t) {
    return t <= from ? t : from + static_cast<std::int64_t>(static_cast<double>(t - from) * factor);
  };
}

// Time stretched by `factor` inside [from, to) only (shifted after it).
std::function<std::int64_t(std::int64_t)> stretch_phase(std::int64_t from, std::int64_t to, double factor) {
  return [=](std::int64_t t) {
    if (t <= from) return t;
    const std::int64_t in = std::min(t, to) - from;
    return from + static_cast<std::int64_t>(static_cast<double>(in) * factor) + std::max<std::int64_t>(0, t - to);
  };
}

constexpr const char* kEager64 = "gpu/h100-torch-2.11/64_bf16_warm_eager.json";
constexpr const char* kEager4096 = "gpu/h100-torch-2.11/4096_bf16_warm_eager.json";
constexpr const char* kCompile4096 = "gpu/h100-torch-2.11/4096_bf16_warm_compile.json";

TEST(CompareGateTest, SelfComparePasses) {
  for (const char* rel : {kEager64, kEager4096}) {
    const Trace a = load(rel);
    const GateResult g = check_slower(compare_traces(a, a), 0.0);
    EXPECT_EQ(g.outcome, GateOutcome::kPass) << rel << ": " << format_gate_line(g);
    EXPECT_EQ(g.m.low_ns, 0);
    EXPECT_EQ(g.m.high_ns, 0);
  }
}

TEST(CompareGateTest, UniformSlowdownsFail) {
  // Overhead-bound (step time) and GPU-bound (device time) runs, ×1.1 and ×1.5.
  for (const char* rel : {kEager64, kEager4096}) {
    const Trace a = load(rel);
    for (const double factor : {1.1, 1.5}) {
      const Trace b = remapped(rel, stretch(a.start_ns(), factor));
      const Comparison c = compare_traces(a, b);
      const GateResult g = check_slower(c, 5.0);
      EXPECT_EQ(g.outcome, GateOutcome::kFail) << rel << " x" << factor << ": " << format_gate_line(g);
      EXPECT_NEAR(g.m.delta_pct, 100.0 * (factor - 1.0), 0.5) << rel;
      EXPECT_GT(g.m.low_pct, 0.0) << rel;
      EXPECT_EQ(g.metric, CompareMetric::kSteady) << rel;
      // Faster the other way round: never fails.
      EXPECT_EQ(check_slower(compare_traces(b, a), 0.0).outcome, GateOutcome::kPass) << rel;
    }
  }
}

TEST(CompareGateTest, OneSlowPhaseFails) {
  // Steps 8 to 12 of 20 run 1.6× slower; the other 15 are unchanged, so
  // their median step does not move, but the run takes 15% longer.
  const Trace a = load(kEager64);
  const std::vector<StepStat> steps = compute_steps(a).steps;
  ASSERT_EQ(steps.size(), 20u);
  const std::int64_t from = steps[7].start_ns, to = steps[11].start_ns + steps[11].dur_ns;
  const Trace b = remapped(kEager64, stretch_phase(from, to, 1.6));
  const Comparison c = compare_traces(a, b);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.outcome, GateOutcome::kFail) << format_gate_line(g);
  EXPECT_GT(g.m.delta_pct, 5.0);
}

TEST(CompareGateTest, HostOnlySlowdownOfAGpuBoundRunIsNotADeviceRegression) {
  // The host launches 1.5× slower, the device's work is untouched: the run
  // stays GPU-bound, its steady state and its device time per step do not
  // change.
  const Trace a = load(kEager4096);
  const Trace b = remapped(kEager4096, stretch(a.start_ns(), 1.5), /*host_only=*/true);
  const Comparison c = compare_traces(a, b);
  ASSERT_TRUE(c.b.gpu_bound) << verdict_name(c.b.verdict);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.metric, CompareMetric::kSteady);
  EXPECT_EQ(g.outcome, GateOutcome::kPass) << format_gate_line(g);
  EXPECT_LT(std::abs(g.m.delta_pct), 5.0) << format_gate_line(g);
  EXPECT_EQ(check_gate(c, {.max_slower_pct = 5.0, .metric = CompareMetric::kDevice}).m.delta_pct, 0.0);
  // The host's step time did slow down, and gating on it says so.
  const GateResult step = check_gate(c, {.max_slower_pct = 5.0, .metric = CompareMetric::kStep});
  EXPECT_EQ(step.outcome, GateOutcome::kFail) << format_gate_line(step);
}

// Issue 40, item 1: the steady state gates through a change of bound.
// Every kernel named `prefix` runs `factor` times longer; later work on its
// stream starts no earlier than it ends (the queue as the device runs it).
Trace slowed_kernels(const std::string& rel, std::string_view prefix, double factor) {
  Trace t = load(rel);
  EventColumns& ev = t.events;
  std::map<std::uint32_t, std::vector<std::size_t>> by_lane;
  for (std::size_t e = 0; e < ev.size(); ++e) {
    if (ev.lane[e] < t.lanes.size() && t.lanes[ev.lane[e]].kind != LaneKind::kCpu) by_lane[ev.lane[e]].push_back(e);
  }
  for (auto& [lane, list] : by_lane) {
    std::sort(list.begin(), list.end(), [&](std::size_t x, std::size_t y) { return ev.ts_ns[x] < ev.ts_ns[y]; });
    std::int64_t free_at = INT64_MIN;
    for (std::size_t e : list) {
      if (t.name(static_cast<std::uint32_t>(e)).starts_with(prefix)) {
        ev.dur_ns[e] = static_cast<std::int64_t>(static_cast<double>(ev.dur_ns[e]) * factor);
      }
      ev.ts_ns[e] = std::max(ev.ts_ns[e], free_at);
      free_at = ev.ts_ns[e] + ev.dur_ns[e];
    }
  }
  return t;
}

TEST(CompareGateTest, AKernelThatTurnsTheRunGpuBoundFails) {
  // The 64x64 run is overhead-bound; its GEMM 60x slower makes it GPU-bound
  // while the host's steps do not move: step time passes, the steady state
  // fails with the run's real slowdown.
  const Trace a = load(kEager64);
  const Trace b = slowed_kernels(kEager64, "nvjet", 60.0);
  const Comparison c = compare_traces(a, b);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.metric, CompareMetric::kSteady);
  EXPECT_EQ(g.outcome, GateOutcome::kFail) << format_gate_line(g);
  EXPECT_GT(g.m.delta_pct, 20.0) << format_gate_line(g);
  EXPECT_EQ(check_gate(c, {.max_slower_pct = 5.0, .metric = CompareMetric::kStep}).outcome, GateOutcome::kPass);
  std::printf("GEMM x60 on the overhead-bound run: steady state %+.1f%%\n", g.m.delta_pct);
}

TEST(CompareGateTest, AHostSlowdownOfAGpuBoundRunIsSizedByTheSteadyState) {
  // The host 3x slower on the GPU-bound 4096 run: its step time triples,
  // but the step costs only what the slower host adds beyond the device's
  // queue. The steady state's mean is the recorded steps' span over their
  // count, so the gate's figure is the run's own end-to-end change.
  const Trace a = load(kEager4096);
  const Trace b = remapped(kEager4096, stretch(a.start_ns(), 3.0), /*host_only=*/true);
  const Comparison c = compare_traces(a, b);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.metric, CompareMetric::kSteady);
  const MetricComparison* step = c.metric(CompareMetric::kStep);
  ASSERT_NE(step, nullptr);
  EXPECT_GT(step->delta_pct, 150.0);  // the host step alone: about +200%
  EXPECT_LT(g.m.delta_pct, 0.5 * step->delta_pct) << format_gate_line(g);
  auto span = [](const CompareSide& s) {
    std::int64_t sum = 0;
    for (std::int64_t v : s.steady_ns) sum += v;
    return sum;
  };
  EXPECT_NEAR(g.m.delta_pct, 100.0 * (static_cast<double>(span(c.b)) / static_cast<double>(span(c.a)) - 1.0), 0.5);
  std::printf("host x3 on the GPU-bound run: step time %+.1f%%, steady state %+.1f%%\n", step->delta_pct, g.m.delta_pct);
}

TEST(CompareGateTest, EagerToCompileAt4096IsFasterOnTheDevice) {
  // Host step spans: compile +77% (the host runs ahead of a deep queue);
  // device time per step: 199.7 µs → 193.0 µs.
  const Comparison c = compare_traces(load(kEager4096), load(kCompile4096));
  EXPECT_GT(c.delta_pct, 50.0);
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.metric, CompareMetric::kSteady);
  EXPECT_EQ(g.outcome, GateOutcome::kPass) << format_gate_line(g);
  // The device's own time per step, by --metric device.
  const GateResult d = check_gate(c, {.max_slower_pct = 5.0, .metric = CompareMetric::kDevice});
  EXPECT_EQ(d.outcome, GateOutcome::kPass) << format_gate_line(d);
  EXPECT_EQ(d.m.mean_a_ns / 100, 1997);
  EXPECT_EQ(d.m.mean_b_ns / 100, 1930);
  EXPECT_LT(d.m.high_pct, 0.0);  // faster beyond the noise
}

TEST(CompareGateTest, JitterWithinTheNoisePasses) {
  // Every step of B is A's stretched by ±3% (alternating signs, seeded): no
  // change on average, and the interval says so.
  const Trace a = load(kEager64);
  const std::vector<StepStat> steps = compute_steps(a).steps;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.0, 0.03);
  std::vector<std::pair<std::int64_t, double>> slopes;  // from each step's start
  for (std::size_t i = 0; i < steps.size(); ++i) slopes.push_back({steps[i].start_ns, 1.0 + (i % 2 ? -1 : 1) * jitter(rng)});
  const auto f = [&](std::int64_t t) {
    double out = static_cast<double>(std::min(t, slopes.front().first));
    for (std::size_t i = 0; i < slopes.size(); ++i) {
      const std::int64_t lo = slopes[i].first;
      // The last step's slope runs to the end of the trace.
      const std::int64_t hi = i + 1 < slopes.size() ? slopes[i + 1].first : std::max(t, lo);
      if (t > lo) out += static_cast<double>(std::min(t, hi) - lo) * slopes[i].second;
    }
    return static_cast<std::int64_t>(out);
  };
  const Trace b = remapped(kEager64, f);
  const Comparison c = compare_traces(a, b);
  const GateResult g = check_slower(c, 0.0);
  EXPECT_EQ(g.outcome, GateOutcome::kPass) << format_gate_line(g);
  EXPECT_FALSE(g.over_noise);
}

TEST(CompareGateTest, ReorderedStepsArePaired) {
  // The same step times in another order: no change; paired by number.
  const std::vector<double> durs = {100, 130, 90, 115, 105, 95, 140, 85, 110, 120};
  std::vector<double> shuffled = durs;
  std::reverse(shuffled.begin(), shuffled.end());
  std::rotate(shuffled.begin(), shuffled.begin() + 3, shuffled.end());
  const Comparison c = compare_traces(parse(steps_trace(durs)), parse(steps_trace(shuffled)));
  const GateResult g = check_slower(c, 0.0);
  EXPECT_TRUE(g.m.paired);
  EXPECT_EQ(g.m.delta_pct, 0.0);
  EXPECT_EQ(g.outcome, GateOutcome::kPass) << format_gate_line(g);
  EXPECT_LT(g.m.low_ns, 0);
  EXPECT_GT(g.m.high_ns, 0);
}

// Fewer steps than --min-steps: an answer where it is plain (issue 40,
// item 3). Within the limit passes (a 1-step trace against itself
// included); every B step slower than every A step by more than the limit
// fails when that order is unlikely by chance (3 against 3: 1 in 20);
// anything else refuses, saying what would decide.
TEST(CompareGateTest, FewStepsDecideWhereTheAnswerIsPlain) {
  const auto gate = [](std::vector<double> a, std::vector<double> b) {
    return check_slower(compare_traces(parse(steps_trace(a)), parse(steps_trace(b))), 5.0);
  };
  const GateResult slower = gate({100, 100, 100}, {200, 200, 200});
  EXPECT_EQ(slower.outcome, GateOutcome::kFail);
  EXPECT_NE(slower.basis.find("every B step is slower than every A step"), std::string::npos) << slower.basis;
  EXPECT_NE(slower.basis.find("p = 0.05"), std::string::npos) << slower.basis;

  const GateResult one = gate({100}, {100});
  EXPECT_EQ(one.outcome, GateOutcome::kPass);
  EXPECT_NE(one.basis.find("nothing to block"), std::string::npos) << one.basis;
  EXPECT_EQ(gate({100, 110, 90}, {102, 101, 99}).outcome, GateOutcome::kPass);

  // Apart, but 2 against 2 is 1 order in 6.
  const GateResult two = gate({100, 100}, {200, 200});
  EXPECT_EQ(two.outcome, GateOutcome::kRefused);
  EXPECT_NE(two.refusal.find("3 or more steps a side"), std::string::npos) << two.refusal;
  // Over the limit on the mean, the steps overlapping.
  const GateResult overlap = gate({100, 150, 100}, {140, 110, 160});
  EXPECT_EQ(overlap.outcome, GateOutcome::kRefused);
  EXPECT_NE(overlap.refusal.find("would decide"), std::string::npos) << overlap.refusal;
  EXPECT_NE(format_gate_line(overlap).find("REFUSED"), std::string::npos);
  // Allowed to gate on 3 steps: the interval decides as with many.
  const Comparison c = compare_traces(parse(steps_trace({100, 150, 100})), parse(steps_trace({140, 110, 160})));
  EXPECT_NE(check_gate(c, {.max_slower_pct = 5.0, .min_steps = 3}).outcome, GateOutcome::kRefused);
}

TEST(CompareGateTest, DifferentSetUpsRefuseUnlessAllowed) {
  const auto job = [](const std::string& device, int world, double dur) {
    std::vector<std::string> ev;
    for (int i = 0; i < 6; ++i) {
      ev.push_back(step(i + 1, 1000 + i * 200, dur));
      ev.push_back(launch(1001 + i * 200, 5, i + 1));
      ev.push_back(kernel("void gemm_kernel<float>(float*)", 7, 1010 + i * 200, dur / 2, i + 1));
    }
    return doc(ev, R"("deviceProperties": [{"id": 0, "name": ")" + device +
                       R"("}], "distributedInfo": {"rank": 0, "world_size": )" + std::to_string(world) + "}");
  };
  const Trace a = parse(job("NVIDIA A100-SXM4-80GB", 8, 100));
  const Trace b = parse(job("Tesla V100-SXM2-32GB", 2, 150));
  const Comparison c = compare_traces(a, b);
  ASSERT_EQ(c.setup_differences.size(), 2u);
  EXPECT_EQ(c.setup_differences[0], "device: NVIDIA A100-SXM4-80GB vs Tesla V100-SXM2-32GB");
  EXPECT_EQ(c.setup_differences[1], "world size: 8 vs 2");
  const GateResult g = check_slower(c, 5.0);
  EXPECT_EQ(g.outcome, GateOutcome::kRefused);
  EXPECT_NE(g.refusal.find("world size: 8 vs 2"), std::string::npos) << g.refusal;
  // (The steps are as far apart on both sides, so step time, not the steady state, is what moved.)
  EXPECT_EQ(check_gate(c, {.max_slower_pct = 5.0, .metric = CompareMetric::kStep, .allow_mismatch = true}).outcome,
            GateOutcome::kFail);
  EXPECT_TRUE(compare_traces(a, a).setup_differences.empty());
}

}  // namespace
}  // namespace tprof
