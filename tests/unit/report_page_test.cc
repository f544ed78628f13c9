// tprof report's page, issue 25: the one Perfetto link builder (report and
// serve), where each step went (parts that sum to the step, the queue that
// grows on the blog's 4096 eager run, CPU busy on a CPU-only trace), the
// timeline's steps and op nesting, and (issue 37) each step's critical path
// placed on the timeline's lanes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/base/url.h"
#include "src/report/html_views.h"
#include "tprof/diagnose.h"
#include "tprof/html_report.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using internal::perfetto_link;
using internal::PerfettoView;

TEST(PerfettoLink, EncodesTheTraceUrlOnceMoreAndAppendsTheView) {
  // A plain URL: ':' and '/' stay, so the link reads as before.
  EXPECT_EQ(perfetto_link("http://127.0.0.1:9001/a.json"), "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/a.json");
  // A file name that needs escaping: encoded into the path once, and once
  // more into the link (Perfetto UI decodes the url argument once, and a '+'
  // would read as a space, a '&' or '=' would split the argument, a '#'
  // would end the route).
  const std::string name = "sub dir/a&b=c+d#e%f<x>é.json";
  const std::string path = internal::percent_encode(name, /*keep_slash=*/true);
  EXPECT_EQ(path, "sub%20dir/a%26b%3Dc%2Bd%23e%25f%3Cx%3E%C3%A9.json");
  EXPECT_EQ(perfetto_link("http://127.0.0.1:9001/" + path),
            "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/"
            "sub%2520dir/a%2526b%253Dc%252Bd%2523e%2525f%253Cx%253E%25C3%25A9.json");
  EXPECT_EQ(internal::percent_encode("a/b c"), "a%2Fb%20c");
  // A raw URL with the characters Perfetto's route parser splits on.
  EXPECT_EQ(perfetto_link("http://h/x?a=1&b=2+3#f"), "https://ui.perfetto.dev/#!/?url=http://h/x%3Fa%3D1%26b%3D2%2B3%23f");

  PerfettoView v;
  v.vis_start_ns = 1795381510372331449;  // past 2^53: kept exact
  v.vis_end_ns = 1795381510372630267;
  v.ts_ns = 1795381510372431055;
  v.dur_ns = 99606;
  EXPECT_EQ(perfetto_link("http://127.0.0.1:9001/t.json", v),
            "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/t.json&visStart=1795381510372331449"
            "&visEnd=1795381510372630267&ts=1795381510372431055&dur=99606");
  // An empty range is left out (Perfetto would ignore it); ts without dur.
  v.vis_end_ns = v.vis_start_ns;
  v.dur_ns = -1;
  EXPECT_EQ(perfetto_link("http://h/t.json", v), "https://ui.perfetto.dev/#!/?url=http://h/t.json&ts=1795381510372431055");
}

TEST(PerfettoLink, ReportUsesTheSameEncodingAsServe) {
  // The report's header link for a file name that needs escaping is the
  // link serve prints for the same file at the same address.
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  ASSERT_TRUE(t) << t.error().to_string();
  const std::string name = "run #1 a&b+c%.json";
  const std::string html = format_report_html(*t, {.trace_file_name = name});
  const std::string want = perfetto_link("http://127.0.0.1:9001/" + internal::percent_encode(name, true));
  EXPECT_NE(want.find("run%2520%25231%2520a%2526b%252Bc%2525.json"), std::string::npos) << want;
  EXPECT_NE(html.find("<a id=\"perfetto-link\" href=\"" + html_escape(want) + "\""), std::string::npos);
}

class StepBarsTest : public ::testing::Test {
 protected:
  static internal::StepBars bars_of(const std::string& rel, Diagnosis* d_out = nullptr) {
    Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
    EXPECT_TRUE(t) << t.error().to_string();
    if (!t) return {};
    const internal::DiagnoseContext c(*t);
    const Diagnosis d = internal::diagnose(c);
    internal::StepBars b = internal::build_step_bars(c, d, {});
    if (d_out != nullptr) *d_out = d;
    return b;
  }
};

TEST_F(StepBarsTest, PartsSumToTheStepAndTheQueueGrowsOn4096Eager) {
  Diagnosis d;
  const internal::StepBars b = bars_of("gpu/h100-torch-2.11/4096_bf16_warm_eager.json", &d);
  ASSERT_TRUE(b.device);
  ASSERT_EQ(b.steps.size(), 20u);
  ASSERT_EQ(b.keys.size(), b.labels.size());
  EXPECT_EQ(b.keys[0], "compute");
  for (const std::string& l : b.labels) EXPECT_EQ(l.find("_ns"), std::string::npos) << l;
  std::int64_t prev_lag = 0;
  for (std::size_t i = 0; i < b.steps.size(); ++i) {
    const internal::StepBar& s = b.steps[i];
    ASSERT_EQ(s.parts.size(), b.keys.size());
    std::int64_t sum = 0, busy = 0;
    for (std::size_t k = 0; k < s.parts.size(); ++k) {
      EXPECT_GE(s.parts[k], 0);
      sum += s.parts[k];
      if (k < 3) busy += s.parts[k];
    }
    EXPECT_EQ(sum, s.dur_ns) << "step " << s.step;
    EXPECT_EQ(busy, d.steps[i].gpu_busy_ns) << "step " << s.step;
    EXPECT_EQ(s.parts.back(), 0) << "the idle partition covers the step";
    // The queue: the step's device work ends after the step, later every step.
    EXPECT_EQ(s.lag_ns, s.work_end_ns - (s.start_ns + s.dur_ns));
    EXPECT_GT(s.lag_ns, prev_lag) << "step " << s.step;
    prev_lag = s.lag_ns;
  }
  // From 139 us after step 1 to 2.4 ms after step 20 (the trace's numbers).
  EXPECT_EQ(b.steps.front().lag_ns, 138912);
  EXPECT_EQ(b.steps.back().lag_ns / 1000, 2380);
}

TEST_F(StepBarsTest, LaunchBoundStepsHaveNoQueue) {
  const internal::StepBars b = bars_of("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  ASSERT_EQ(b.steps.size(), 20u);
  for (const internal::StepBar& s : b.steps) {
    EXPECT_EQ(s.lag_ns, 0);
    // Mostly waiting on the host to launch.
    EXPECT_GT(s.parts[3 + static_cast<int>(IdleCause::kLaunching)], s.dur_ns / 2) << s.step;
  }
}

TEST_F(StepBarsTest, CpuOnlyStepsShowTheThreadsThatWorked) {
  // The step's thread records nothing but ProfilerStep#551; two other
  // threads do the work. tprof steps' CPU busy (the step's thread) is 0, and
  // the page shows the time any thread was busy next to it.
  const internal::StepBars b = bars_of("public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  ASSERT_FALSE(b.device);
  ASSERT_EQ(b.steps.size(), 1u);
  const internal::StepBar& s = b.steps[0];
  EXPECT_EQ(s.cpu_busy_ns, 0);
  EXPECT_EQ(s.parts[0] + s.parts[1], s.dur_ns);
  EXPECT_GT(s.cpu_any_busy_ns, s.dur_ns / 2);
  EXPECT_LE(s.cpu_any_busy_ns, s.dur_ns);
}

TEST(DiagnoseThreads, ProfilerStepIsNotBusyTime) {
  // diagnose's threads no longer count the ProfilerStep#N wrapper: the
  // steps' thread is not "100% busy" when it only waited.
  Result<Trace> t =
      read_trace(std::string(TPROF_TEST_DATA) + "/public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  ASSERT_TRUE(t);
  const Diagnosis d = diagnose(*t);
  ASSERT_FALSE(d.threads.empty());
  for (const ThreadBusy& th : d.threads) {
    EXPECT_NE(th.lane, "cpu pid 1074 tid 1074") << "busy " << th.busy_ns;
    EXPECT_LT(th.busy_pct, 100.0);
  }
}

TEST(TimelineData, StepsAndBoundedOpNesting) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  ASSERT_TRUE(t);
  const internal::DiagnoseContext c(*t);
  const Diagnosis d = internal::diagnose(c);
  HtmlReportOptions o;
  o.max_lane_nested_events = 50;
  o.max_nest_depth = 2;
  const internal::Timeline tl = internal::build_timeline(c, d, o);
  ASSERT_EQ(tl.steps.size(), 20u);
  for (std::size_t i = 0; i < tl.steps.size(); ++i) {
    EXPECT_EQ(tl.steps[i].start_ns, c.steps.steps[i].start_ns - tl.start_ns);
    EXPECT_EQ(tl.steps[i].dur_ns, c.steps.steps[i].dur_ns);
  }
  std::size_t cpu = 0;
  for (const internal::TimelineLane& l : tl.lanes) {
    if (l.gpu) {
      EXPECT_TRUE(l.nested.empty());
      continue;
    }
    ++cpu;
    ASSERT_FALSE(l.nested.empty());
    EXPECT_LE(l.nested.size(), 50u);
    EXPECT_LE(l.max_depth, 2);
    bool deeper = false;
    for (std::size_t k = 0; k < l.nested.size(); ++k) {
      const internal::NestedEvent& e = l.nested[k];
      EXPECT_FALSE(e.name.starts_with("ProfilerStep#")) << e.name;
      if (k > 0) EXPECT_GE(e.start_ns, l.nested[k - 1].start_ns);
      deeper |= e.depth > 0;
      // A nested event lies inside an event one level up that starts no later.
      if (e.depth > 0) {
        bool inside = false;
        for (const internal::NestedEvent& p : l.nested) {
          inside |= p.depth == e.depth - 1 && p.start_ns <= e.start_ns && e.start_ns + e.dur_ns <= p.start_ns + p.dur_ns;
        }
        EXPECT_TRUE(inside) << e.name;
      }
    }
    EXPECT_TRUE(deeper);
  }
  EXPECT_GT(cpu, 0u);
  EXPECT_EQ(tl.nested_count(), [&] {
    std::size_t n = 0;
    for (const internal::TimelineLane& l : tl.lanes) n += l.nested.size();
    return n;
  }());
}

TEST(CriticalPathView, StretchesLieOnTheirEventsLanesInsideTheirSteps) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-tprof/64_bf16_warm_eager.json");
  ASSERT_TRUE(t);
  const internal::DiagnoseContext c(*t);
  const Diagnosis d = internal::diagnose(c);
  const HtmlReportOptions o;
  const internal::Timeline tl = internal::build_timeline(c, d, o);
  const internal::CriticalPathView v = internal::build_critical_path_view(c, tl, o);
  ASSERT_TRUE(v.available) << v.error;
  ASSERT_EQ(v.steps.size(), 20u);
  EXPECT_EQ(v.steps_marked, 20u);
  EXPECT_EQ(v.off_timeline, 0u);
  EXPECT_EQ(v.segments.size(), v.segments_total);
  std::size_t k = 0;
  for (const internal::PathStep& st : v.steps) {
    std::int64_t shares = st.unexplained_ns, marked = 0;
    for (const std::int64_t ns : st.bound_ns) shares += ns;
    EXPECT_EQ(shares, st.length_ns) << "step " << st.step;
    for (std::size_t j = 0; j < st.segments; ++j, ++k) {
      ASSERT_LT(k, v.segments.size());
      const internal::PathStretch& x = v.segments[k];
      ASSERT_GE(x.lane, 0);
      const internal::TimelineLane& lane = tl.lanes[static_cast<std::size_t>(x.lane)];
      const bool gpu = x.type == EdgeType::kDevice || x.type == EdgeType::kLaunch || x.type == EdgeType::kStream ||
                       x.type == EdgeType::kStreamWait;
      EXPECT_EQ(lane.gpu, gpu) << edge_type_name(x.type) << " on " << lane.label;
      EXPECT_EQ(lane.label.starts_with("gpu "), gpu) << lane.label;
      EXPECT_GT(x.dur_ns, 0);
      EXPECT_GE(x.start_ns, st.start_ns);
      EXPECT_LE(x.start_ns + x.dur_ns, st.start_ns + st.length_ns);
      if (x.type == EdgeType::kDevice) {
        EXPECT_EQ(x.bound, BoundType::kGpuCompute) << x.name;
      }
      if (x.type == EdgeType::kLaunch) {
        EXPECT_EQ(x.bound, BoundType::kKernelLaunchOverhead) << x.name;
      }
      EXPECT_EQ(x.name.empty(), x.type == EdgeType::kHostGap) << edge_type_name(x.type);
      marked += x.dur_ns;
    }
    EXPECT_EQ(marked, st.length_ns - st.unexplained_ns) << "step " << st.step;
  }
  EXPECT_EQ(k, v.segments.size());

  // One lane drawn (the GPU stream the causes point at): the thread's
  // stretches are kept, counted, and placed on no lane.
  HtmlReportOptions one = o;
  one.max_timeline_lanes = 1;
  const internal::Timeline tl1 = internal::build_timeline(c, d, one);
  ASSERT_EQ(tl1.lanes.size(), 1u);
  ASSERT_TRUE(tl1.lanes[0].gpu);
  const internal::CriticalPathView v1 = internal::build_critical_path_view(c, tl1, one);
  ASSERT_EQ(v1.segments.size(), v.segments.size());
  std::size_t off = 0;
  for (std::size_t i = 0; i < v1.segments.size(); ++i) {
    const bool gpu = v.segments[i].lane >= 0 && tl.lanes[static_cast<std::size_t>(v.segments[i].lane)].gpu;
    EXPECT_EQ(v1.segments[i].lane, gpu ? 0 : -1);
    off += gpu ? 0 : 1;
  }
  EXPECT_GT(off, 0u);
  EXPECT_EQ(v1.off_timeline, off);
}

}  // namespace
}  // namespace tprof
