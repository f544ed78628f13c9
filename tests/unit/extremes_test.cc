// Extreme but legal values (issue 13): sums at the edge of int64 saturate
// instead of overflowing (undefined behaviour, caught by the sanitizer build
// of these tests), and the figures users read stay right where they can.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/profiler.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Ten overlapping kernels of 4.6e15 µs (4.6e18 ns each: their sum does not
// fit int64) in one step, and a recorder that says it dropped INT64_MAX events.
std::string huge_trace() {
  std::string ev;
  for (int i = 0; i < 10; ++i) {
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
          std::to_string(i) + R"(, "dur": 1, "args": {"correlation": )" + std::to_string(i + 1) + "}},\n";
    ev += R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" + std::to_string(i + 2) +
          R"(, "dur": 4611686018427387, "args": {"correlation": )" + std::to_string(i + 1) + "}},\n";
  }
  ev += R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 4611686018427387})";
  return R"({"traceEvents": [)" + ev + R"(], "tprof": {"droppedEvents": 9223372036854775807}})";
}

TEST(Extremes, KernelMeansStayRightWhenTotalsSaturate) {
  Result<Trace> t = read_trace_bytes(huge_trace());
  ASSERT_TRUE(t);
  const KernelsSummary k = compute_kernels(*t);
  ASSERT_EQ(k.kernels.size(), 1u);
  const KernelStat& s = k.kernels[0];
  EXPECT_EQ(s.count, 10);
  EXPECT_EQ(s.total_ns, kMax);  // 4.6e19 ns: saturated, not wrapped
  EXPECT_EQ(s.median_ns, 4611686018427387000);
  EXPECT_DOUBLE_EQ(s.mean_ns, 4611686018427387000.0);  // was 9.2e17: the saturated total / 10
  EXPECT_EQ(s.max_ns, 4611686018427387000);
}

TEST(Extremes, EveryViewOfAHugeTraceIsDefined) {
  Result<Trace> t = read_trace_bytes(huge_trace());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->meta.dropped_events, static_cast<std::uint64_t>(kMax));
  const Diagnosis d = diagnose(*t);
  const Finding* dropped = nullptr;
  for (const Finding& f : d.findings) {
    if (f.id == "dropped_events") dropped = &f;
    EXPECT_GE(f.impact_ns, 0) << f.id;
  }
  ASSERT_NE(dropped, nullptr);
  EXPECT_NE(dropped->title.find("100.0% of all"), std::string::npos) << dropped->title;
  const StepsSummary steps = compute_steps(*t);
  ASSERT_EQ(steps.steps.size(), 1u);
  EXPECT_EQ(steps.steps[0].dur_ns, 4611686018427387000);
  const EventList events = EventList::build(*t, {});
  for (const StatRow& r : events.key_averages()) {
    EXPECT_GE(r.self_device_time_total_ns, 0) << r.key;
    EXPECT_GE(r.cpu_time_total_ns, 0) << r.key;
  }
}

TEST(Extremes, FreeingTheMostNegativeSizeIsDefined) {
  Profiler prof({.profile_memory = true});
  ASSERT_TRUE(prof.start());
  char buffer[8];
  record_alloc(buffer, kMax);
  record_free(buffer, std::numeric_limits<std::int64_t>::min());  // -INT64_MIN does not exist
  record_alloc(buffer, kMax);
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  ASSERT_EQ(t.memory.size(), 3u);
  EXPECT_EQ(t.memory[1].bytes, kMax);            // -INT64_MIN, clamped
  EXPECT_EQ(t.memory[2].total_allocated, kMax);  // saturated, never wrapped
}

}  // namespace
}  // namespace tprof
