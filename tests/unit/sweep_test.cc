// tprof sweep's measures (include/tprof/sweep.h) on traces whose answer is
// known: work and overhead per step on the CPU and on a device, and the
// crossover rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_EQ(p.work_ns, 30000);
  EXPECT_EQ(p.overhead_ns, 70000);
  EXPECT_DOUBLE_EQ(p.work_pct, 30.0);
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

}  // namespace
}  // namespace tprof
