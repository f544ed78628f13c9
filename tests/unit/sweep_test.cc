// tprof sweep's measures (include/tprof/sweep.h) on traces whose answer is
// known: work and overhead per step on the CPU and on a device, and the
// crossover rule; and sweep's analysis of the real H100 traces tprof
// captured of the same example (tests/data/gpu/h100-tprof), as if sweep had
// captured them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tprof/diagnose.h"

#include "tests/support/kineto_events.h"
#include "tprof/read.h"
#include "tprof/sweep.h"

namespace tprof {
namespace {

using testing::doc;
using testing::kernel;
using testing::launch;
using testing::step;
using testing::x;

Trace read(const std::string& text) {
  Result<Trace> t = read_trace_bytes(text);
  EXPECT_TRUE(t);
  return t ? std::move(*t) : Trace{};
}

TEST(Sweep, CpuWorkIsTheTimeInLeafOps) {
  // Three steps of 100 µs: matmul_add (90 µs) holds op::mm (40 µs, holding
  // blas::sgemm 30 µs) and op::add (20 µs). Leaves: sgemm + add = 50 µs.
  std::vector<std::string> ev;
  for (int s = 0; s < 3; ++s) {
    const double b = 200.0 * s;
    ev.push_back(step(s + 1, b, 100));
    ev.push_back(x("user_annotation", "matmul_add", 1, 1, b + 5, 90));
    ev.push_back(x("cpu_op", "op::mm", 1, 1, b + 10, 40));
    ev.push_back(x("cpu_op", "blas::sgemm", 1, 1, b + 15, 30));
    ev.push_back(x("cpu_op", "op::add", 1, 1, b + 60, 20));
  }
  const SweepPoint p = sweep_point(read(doc(ev)), 64);
  EXPECT_EQ(p.size, 64);
  EXPECT_EQ(p.steps, 3);
  EXPECT_FALSE(p.device);
  EXPECT_EQ(p.step_ns, 100000);
  EXPECT_EQ(p.work_ns, 50000);
  EXPECT_EQ(p.overhead_ns, 50000);
  EXPECT_DOUBLE_EQ(p.work_pct, 50.0);
  EXPECT_EQ(p.verdict, "cpu-only");
}

TEST(Sweep, DeviceWorkIsTheDevicesBusyTime) {
  // Two steps of 100 µs, each launching a 30 µs kernel: 30% working.
  std::vector<std::string> ev;
  for (int s = 0; s < 2; ++s) {
    const double b = 200.0 * s;
    ev.push_back(step(s + 1, b, 100));
    ev.push_back(launch(b + 10, 5, s + 1));
    ev.push_back(kernel("gemm", 7, b + 20, 30, s + 1));
  }
  const SweepPoint p = sweep_point(read(doc(ev)), 4096);
  EXPECT_TRUE(p.device);
  EXPECT_EQ(p.step_ns, 100000);
  EXPECT_EQ(p.host_ns, 100000);
  EXPECT_EQ(p.work_ns, 30000);
  EXPECT_EQ(p.overhead_ns, 70000);
  EXPECT_DOUBLE_EQ(p.work_pct, 30.0);
}

TEST(Sweep, AGpuBoundStepLastsUntilTheDeviceFinishesWhatItLaunched) {
  // Steps of 20 µs that do not synchronize, each launching a 200 µs kernel
  // on one stream: the kernels queue up behind each other and run long after
  // their steps end. The step is the device's 200 µs, not the host's 20; the
  // work is what each step launched, wherever it ran.
  std::vector<std::string> ev;
  for (int s = 0; s < 5; ++s) {
    const double b = 20.0 * s;
    ev.push_back(step(s + 1, b, 20));
    ev.push_back(launch(b + 5, 5, s + 1));
    ev.push_back(kernel("gemm", 7, 15 + 200.0 * s, 200, s + 1));
  }
  const Trace t = read(doc(ev));
  const SweepPoint p = sweep_point(t, 4096);
  EXPECT_TRUE(p.device);
  EXPECT_EQ(p.steps, 5);
  EXPECT_EQ(p.host_ns, 20000);
  EXPECT_EQ(p.step_ns, 200000);  // step 1: 0 → 215 µs; then 200 µs from completion to completion
  EXPECT_EQ(p.work_ns, 200000);
  EXPECT_EQ(p.overhead_ns, 0);
  EXPECT_DOUBLE_EQ(p.work_pct, 100.0);
  // The verdict is diagnose's on the same trace.
  EXPECT_EQ(p.verdict, verdict_name(diagnose(t).verdict));
  EXPECT_EQ(p.verdict, "compute-bound");
}

SweepPoint point(std::int64_t size, double pct) {
  SweepPoint p;
  p.size = size;
  p.work_pct = pct;
  return p;
}

TEST(Sweep, TheCrossoverIsWhereEveryLargerSizeWorksHalfItsStep) {
  EXPECT_EQ(finish_sweep({point(256, 80), point(16, 10), point(64, 30), point(128, 60)}).crossover_size, 128);
  // A dip back under half: the crossover is after it.
  EXPECT_EQ(finish_sweep({point(16, 60), point(64, 40), point(256, 70)}).crossover_size, 256);
  EXPECT_FALSE(finish_sweep({point(16, 10), point(64, 49.9)}).crossover_size.has_value());
  const Sweep all = finish_sweep({point(64, 90), point(16, 55)});
  EXPECT_EQ(all.crossover_size, 16);
  EXPECT_EQ(all.points.front().size, 16);  // sorted by size
  const std::string text = format_sweep_text(all);
  EXPECT_NE(text.find("already at the smallest size"), std::string::npos) << text;
  const std::string html = format_sweep_html(all, "<sweep>");
  EXPECT_NE(html.find("data-points=\"2\""), std::string::npos);
  EXPECT_NE(html.find("&lt;sweep&gt;"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);  // nothing fetched
  EXPECT_NE(format_sweep_json(all).find("\"crossover_size\": 16"), std::string::npos);
}

// The real traces: examples/matmul_add --device cuda --warmup on an H100
// (64 and 4096, bf16, 20 steps), what sweep reads at each size. Expected
// numbers come from the JSON alone, outside tprof (Python, exact decimal
// µs): per ProfilerStep, the union of the kernels, copies and memsets whose
// launch call (same correlation) starts in it, an activity without one in
// the trace going to the step holding its start; the step from its start
// (or the previous step's completion) to the later of its end and its
// device work's end; upper medians. On the H100 the first sweep printed
// Device 0.0 us, Work 0% and 'compute-bound' at 4096 and found no crossover.
const std::string kH100 = std::string(TPROF_TEST_DATA) + "/gpu/h100-tprof/";

Trace load(const std::string& name) {
  Result<Trace> t = read_trace(kH100 + name);
  EXPECT_TRUE(t) << name;
  return t ? std::move(*t) : Trace{};
}

TEST(SweepOnH100Traces, SixtyFourIsOverheadBound) {
  const SweepPoint p = sweep_point(load("64_bf16_warm_eager.json"), 64);
  EXPECT_TRUE(p.device);
  EXPECT_EQ(p.steps, 20);
  EXPECT_EQ(p.verdict, "overhead-bound");
  EXPECT_EQ(p.work_ns, 3296);      // a 2.1 us GEMM and a 1.2 us add
  EXPECT_EQ(p.host_ns, 26943);
  EXPECT_EQ(p.step_ns, 26912);     // the device finishes within the host's step
  EXPECT_EQ(p.overhead_ns, 23648);
  EXPECT_NEAR(p.work_pct, 12.24, 0.01);
}

TEST(SweepOnH100Traces, FourThousandNinetySixIsComputeBoundAndTheStepIsTheDevicesTime) {
  const SweepPoint p = sweep_point(load("4096_bf16_warm_eager.json"), 4096);
  EXPECT_TRUE(p.device);
  EXPECT_EQ(p.verdict, "compute-bound");
  EXPECT_EQ(p.work_ns, 227396);    // the 169 us GEMM, the 57.5 us add, a memset (not the add launched before the recording)
  EXPECT_EQ(p.host_ns, 22758);     // what the host spends enqueueing it
  EXPECT_EQ(p.step_ns, 231716);
  EXPECT_EQ(p.overhead_ns, 4192);
  EXPECT_NEAR(p.work_pct, 98.23, 0.01);
}

TEST(SweepOnH100Traces, FusedAndCompiledFormsToo) {
  // The same measures on the other two forms (sweep runs eager; these keep
  // the per-step attribution honest where a step holds a copy or one GEMM).
  const SweepPoint compile = sweep_point(load("4096_bf16_warm_compile.json"), 4096);
  EXPECT_EQ(compile.work_ns, 194435);  // DtoD copy + GEMM + memset: hidden_memcpy's step_ns
  EXPECT_EQ(compile.step_ns, 200036);
  EXPECT_EQ(compile.verdict, "compute-bound");
  const SweepPoint fused = sweep_point(load("64_bf16_warm_fused.json"), 64);
  EXPECT_EQ(fused.work_ns, 2400);
  EXPECT_EQ(fused.step_ns, 16961);
  EXPECT_EQ(fused.verdict, "overhead-bound");
}

TEST(SweepOnH100Traces, TheCrossoverIsWhereTheNumbersPutIt) {
  const Sweep s = finish_sweep({sweep_point(load("4096_bf16_warm_eager.json"), 4096),
                                sweep_point(load("64_bf16_warm_eager.json"), 64)});
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.crossover_size, 4096);
  const std::string text = format_sweep_text(s);
  EXPECT_NE(text.find("Host (us)"), std::string::npos) << text;
  EXPECT_NE(text.find("Device (us)"), std::string::npos) << text;
  EXPECT_NE(text.find("   231.7"), std::string::npos) << text;  // the 4096 step, not the host's 22.8
  EXPECT_NE(text.find("crossover: from size 4096 on"), std::string::npos) << text;
  EXPECT_EQ(text.find("already at the smallest size"), std::string::npos) << text;
  EXPECT_NE(format_sweep_json(s).find("\"host_ns\": 22758"), std::string::npos);
  // With only the small size there is none, and the line says why in numbers.
  const std::string none = format_sweep_text(finish_sweep({sweep_point(load("64_bf16_warm_eager.json"), 64)}));
  EXPECT_NE(none.find("crossover: none up to size 64: the largest size works 12.2% of its step"), std::string::npos)
      << none;
}

}  // namespace
}  // namespace tprof
