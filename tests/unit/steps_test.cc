#include <gtest/gtest.h>

#include "src/analyze/intervals.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

using internal::Interval;

TEST(Intervals, UnionCoverageAndSubtraction) {
  auto merged = internal::merge_intervals({{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].start, 0);
  EXPECT_EQ(merged[0].end, 4);
  EXPECT_EQ(merged[1].end, 12);
  EXPECT_EQ(internal::total_length(merged), 11);
  EXPECT_EQ(internal::covered_within(merged, 3, 6), 2);
  EXPECT_EQ(internal::covered_within(merged, 12, 100), 0);
  auto rest = internal::subtract(merged, internal::merge_intervals({{1, 2}, {6, 7}, {11, 30}}));
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(internal::total_length(rest), 11 - 1 - 1 - 1);
}

TEST(Steps, BusyIdleAndFirstKernelOffset) {
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 15},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 15, "dur": 15},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 40, "dur": 20, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "add", "pid": 0, "tid": 7, "ts": 90, "dur": 30, "args": {"correlation": 2}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
  {"ph": "X", "cat": "cpu_op", "name": "other thread", "pid": 1, "tid": 2, "ts": 100, "dur": 50}
]})";
  Result<Trace> t = read_trace_bytes(text);
  ASSERT_TRUE(t);
  StepsSummary s = compute_steps(*t);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_TRUE(s.has_device);
  const StepStat& a = s.steps[0];
  EXPECT_EQ(a.step, 7);
  EXPECT_EQ(a.dur_ns, 100000);
  EXPECT_EQ(a.cpu_busy_ns, 25000);
  EXPECT_EQ(a.gpu_busy_ns, 30000);  // 20 + the first 10 of the kernel that crosses the step end
  EXPECT_DOUBLE_EQ(a.gpu_idle_pct, 70.0);
  EXPECT_EQ(a.launches, 2);
  ASSERT_TRUE(a.first_kernel_offset_ns);
  EXPECT_EQ(*a.first_kernel_offset_ns, 30000);
  EXPECT_EQ(t->name(a.first_kernel_event), "gemm");
  const StepStat& b = s.steps[1];
  EXPECT_EQ(b.step, 8);
  EXPECT_EQ(b.cpu_busy_ns, 0);  // the other thread's op is not this step's thread
  EXPECT_EQ(b.gpu_busy_ns, 20000);
  EXPECT_FALSE(b.first_kernel_offset_ns);

  const std::string json = format_steps_json(*t, s);
  EXPECT_NE(json.find("\"gpu_idle_pct\": 70"), std::string::npos) << json;
  EXPECT_NE(json.find("\"offset_ns\": 30000"), std::string::npos);
  const std::string txt = format_steps_text(*t, s);
  EXPECT_NE(txt.find("30.000us"), std::string::npos) << txt;
}

TEST(Steps, CpuOnlyTracesHaveNoGpuColumnsAndNoStepsIsSaid) {
  Result<Trace> t = read_trace_bytes(R"([{"name": "ProfilerStep#1", "ph": "X", "ts": 0, "dur": 10, "tid": 1, "pid": "CPU functions", "args": {}}])");
  ASSERT_TRUE(t);
  StepsSummary s = compute_steps(*t);
  ASSERT_EQ(s.steps.size(), 1u);
  EXPECT_FALSE(s.has_device);
  EXPECT_EQ(format_steps_json(*t, s).find("gpu_busy_ns"), std::string::npos);
  Result<Trace> none = read_trace_bytes("[]");
  ASSERT_TRUE(none);
  EXPECT_NE(format_steps_text(*none, compute_steps(*none)).find("no ProfilerStep"), std::string::npos);
}

}  // namespace
}  // namespace tprof
