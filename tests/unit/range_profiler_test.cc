// A CUPTI range-profiler trace (HTA's cupti_profiler test trace: AlexNet on
// an A100, every kernel a "cuda_profiler_range" with nine SASS instruction
// counters) is device activity: not cpu-only, its counters in tprof kernels.
#include <gtest/gtest.h>

#include <string>

#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/read.h"

namespace tprof {
namespace {

constexpr const char* kTrace = "/public/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz";

TEST(RangeProfiler, RangesAreDeviceActivityNotCpuOnly) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + kTrace);
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  EXPECT_EQ(d.verdict, Verdict::kUnclear);
  EXPECT_NE(d.summary.find("range-profiler trace: 77 device ranges"), std::string::npos) << d.summary;
}

TEST(RangeProfiler, CountersInKernels) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + kTrace);
  ASSERT_TRUE(t.has_value());
  const KernelsSummary k = compute_kernels(*t);
  EXPECT_TRUE(k.kernels.empty());  // no measured kernels
  std::int64_t ranges = 0;
  const RangeStat* sgemm = nullptr;
  for (const RangeStat& r : k.ranges) {
    ranges += r.count;
    if (r.name == "ampere_sgemm_32x32_sliced1x4_tn") sgemm = &r;
  }
  EXPECT_EQ(ranges, 77);
  ASSERT_NE(sgemm, nullptr);
  EXPECT_EQ(sgemm->count, 6);
  ASSERT_EQ(sgemm->counters.size(), 9u);
  // The six ranges' ffma counts, summed (checked with a JSON reader).
  double ffma = -1;
  for (const RangeCounter& c : sgemm->counters) {
    if (c.name == "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum") ffma = c.sum;
  }
  EXPECT_EQ(ffma, 15067250688.0);
  const std::string text = format_kernels_text(k);
  EXPECT_NE(text.find("Range profiler (CUPTI, cuda_profiler_range): 77 ranges"), std::string::npos) << text;
  EXPECT_NE(text.find("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum 15067250688"), std::string::npos);
  EXPECT_NE(format_kernels_json(k).find("\"ranges\""), std::string::npos);
}

}  // namespace
}  // namespace tprof
