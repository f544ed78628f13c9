// tprof::compare_traces on the PyTorch 2.11 H100 runs and torch 1.13's
// legacy traces, and the CI gate on small synthetic traces.
#include "tprof/compare.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/kineto_events.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using testing::doc;
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
  const GateResult g = check_slower(c, 0.0);
  EXPECT_TRUE(g.passed);
  EXPECT_FALSE(g.over_threshold);
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
  const Trace a = parse(steps_trace({100, 120, 80, 110, 90}));
  const Trace b = parse(steps_trace({105, 125, 85, 115, 95}));
  const Comparison c = compare_traces(a, b);
  EXPECT_EQ(c.delta_ns, 5000);
  EXPECT_EQ(c.noise_ns, 20000);
  const GateResult g = check_slower(c, 0.0);
  EXPECT_TRUE(g.passed);
  EXPECT_TRUE(g.over_threshold);
  EXPECT_FALSE(g.over_noise);
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
  const GateResult g = check_slower(c, 1000.0);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(format_gate_line(g).find("n/a %"), std::string::npos);
  EXPECT_TRUE(check_slower(compare_traces(empty, empty), 0.0).passed);
}

}  // namespace
}  // namespace tprof
