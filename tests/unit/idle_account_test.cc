// One accounting of GPU idle time (docs/diagnose.md, "GPU idle time"), on
// every real trace: tests/data (this binary, label unit), or the public
// fixtures in ../shared/fixtures (built again with TPROF_IDLE_FIXTURES as
// idle_fixtures_test, label extended; it skips, saying so, without them).
// On each trace: the causes sum to the idle time, the spans are disjoint,
// inside the window and outside every device activity, and cover exactly the
// window minus the device activity; each step's causes sum to its share; no
// two findings claim the same idle time, and every claim lies in the spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

#ifdef TPROF_IDLE_FIXTURES
const std::vector<std::string> kRoots = {std::string(TPROF_SHARED_FIXTURES) + "/public",
                                         std::string(TPROF_SHARED_FIXTURES) + "/kineto-public"};
#else
const std::vector<std::string> kRoots = {std::string(TPROF_TEST_DATA)};
#endif

bool is_trace_name(const std::string& p) {
  const bool json = p.ends_with(".json") || p.ends_with(".json.gz");
  // Not traces: manifests, expected outputs, side-car files (see the
  // fixtures' PROVENANCE.md).
  return json && p.find("/expected") == std::string::npos && !p.ends_with("tables.json") &&
         !p.ends_with("_et.json.gz") && !p.ends_with("execution_details.json");
}

std::vector<std::string> trace_files() {
  std::vector<std::string> out;
  for (const std::string& root : kRoots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
      if (e.is_regular_file() && is_trace_name(e.path().string())) out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Range {
  std::int64_t start, end;
};

std::vector<Range> merged(std::vector<Range> v) {
  std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
  std::vector<Range> out;
  for (const Range& r : v) {
    if (r.end <= r.start) continue;
    if (!out.empty() && r.start <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::int64_t covered(const std::vector<Range>& m, std::int64_t lo, std::int64_t hi) {
  std::int64_t n = 0;
  for (const Range& r : m) n += std::max<std::int64_t>(0, std::min(hi, r.end) - std::max(lo, r.start));
  return n;
}

class IdleAccountTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IdleAccountTest, CausesSumToTheIdleTimeAndClaimsNeverOverlap) {
  Result<Trace> t = read_trace(GetParam());
  if (!t) GTEST_SKIP() << "not readable as a trace: " << GetParam();
  const Diagnosis d = diagnose(*t);
  const IdleAccount& a = d.idle;

  // The device activity, independently of the partition.
  std::vector<Range> busy;
  bool device = false;
  for (std::uint32_t e = 0; e < t->events.size(); ++e) {
    const EventKind k = t->events.kind[e];
    if (k != EventKind::kKernel && k != EventKind::kGpuMemcpy && k != EventKind::kGpuMemset) continue;
    device = true;
    busy.push_back({t->events.ts_ns[e], t->events.ts_ns[e] + std::max<std::int64_t>(0, t->events.dur_ns[e])});
  }
  if (!device) {
    EXPECT_EQ(a.idle_ns, 0);
    EXPECT_TRUE(a.spans.empty());
    return;
  }
  busy = merged(std::move(busy));
  const std::int64_t window = a.window_end_ns - a.window_start_ns;
  ASSERT_GE(window, 0);
  EXPECT_EQ(a.idle_ns, window - covered(busy, a.window_start_ns, a.window_end_ns));

  EXPECT_EQ(std::accumulate(a.by_cause.begin(), a.by_cause.end(), std::int64_t{0}), a.idle_ns);
  std::int64_t spans = 0, prev_end = a.window_start_ns;
  for (const IdleSpan& s : a.spans) {
    ASSERT_LT(s.start_ns, s.end_ns);
    ASSERT_GE(s.start_ns, prev_end) << "spans overlap or are out of order";
    ASSERT_LE(s.end_ns, a.window_end_ns);
    ASSERT_EQ(covered(busy, s.start_ns, s.end_ns), 0) << "an idle span covers device activity";
    prev_end = s.end_ns;
    spans += s.end_ns - s.start_ns;
  }
  EXPECT_EQ(spans, a.idle_ns);

  for (const StepVerdict& v : d.steps) {
    const std::int64_t sum = std::accumulate(v.idle_by_cause.begin(), v.idle_by_cause.end(), std::int64_t{0});
    EXPECT_LE(sum, v.cpu_span_ns) << "step " << v.step;
    EXPECT_EQ(v.idle_by_cause[static_cast<std::size_t>(IdleCause::kOutsideSteps)], 0) << "step " << v.step;
  }

  // Claims: inside the spans, pairwise disjoint, idle_ns their total.
  std::vector<std::pair<Range, std::size_t>> claims;
  for (std::size_t i = 0; i < d.findings.size(); ++i) {
    const Finding& f = d.findings[i];
    std::int64_t total = 0;
    for (const TimeRange& r : f.idle_claim) {
      ASSERT_LT(r.start_ns, r.end_ns) << f.id;
      total += r.end_ns - r.start_ns;
      claims.push_back({{r.start_ns, r.end_ns}, i});
    }
    EXPECT_EQ(total, f.idle_ns) << f.id;
    EXPECT_LE(f.idle_ns, a.idle_ns) << f.id;
  }
  std::sort(claims.begin(), claims.end(), [](const auto& x, const auto& y) { return x.first.start < y.first.start; });
  std::vector<Range> span_ranges;
  for (const IdleSpan& s : a.spans) span_ranges.push_back({s.start_ns, s.end_ns});
  span_ranges = merged(std::move(span_ranges));
  for (std::size_t k = 0; k < claims.size(); ++k) {
    const Range& r = claims[k].first;
    EXPECT_EQ(covered(span_ranges, r.start, r.end), r.end - r.start)
        << d.findings[claims[k].second].id << " claims time that is not idle";
    if (k > 0) {
      EXPECT_LE(claims[k - 1].first.end, r.start) << d.findings[claims[k - 1].second].id << " and "
                                                  << d.findings[claims[k].second].id << " claim the same idle time";
    }
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param.substr(info.param.find_last_of('/') + 1);
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n + "_" + std::to_string(info.index);
}

#ifndef TPROF_IDLE_FIXTURES
// Work queued behind the kernel before it on its one stream starts 1-5 µs
// after it: the device's kernel-to-kernel latency, not a wait on another
// stream or an event (the blog's 4096 run on the H100: one stream, no event).
TEST(IdleCauses, QueuedKernelsOnOneStreamAreKernelLatencyNotStreamWait) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/4096_bf16_warm_eager.json");
  ASSERT_TRUE(t);
  const Diagnosis d = diagnose(*t);
  const auto at = [&](IdleCause c) { return d.idle.by_cause[static_cast<std::size_t>(c)]; };
  EXPECT_EQ(at(IdleCause::kStreamWait), 0);
  EXPECT_GT(at(IdleCause::kKernelLatency), 0);
  // 19 steps of GEMM -> add -> next GEMM, each gap a few µs.
  EXPECT_LT(at(IdleCause::kKernelLatency), 40 * 10'000);
}

// Kineto's backward-thread trace: kernels on the backward stream wait for
// the forward stream's work, launched long before; that is a stream wait.
TEST(IdleCauses, WorkWaitingOnAnotherStreamIsStreamWait) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/kineto-public/hta_backward_thread_2022-10.json");
  ASSERT_TRUE(t);
  const Diagnosis d = diagnose(*t);
  EXPECT_GT(d.idle.by_cause[static_cast<std::size_t>(IdleCause::kStreamWait)], 1'000'000);
}
#endif

INSTANTIATE_TEST_SUITE_P(EveryTrace, IdleAccountTest, ::testing::ValuesIn(trace_files()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(IdleAccountTest);

}  // namespace
}  // namespace tprof
