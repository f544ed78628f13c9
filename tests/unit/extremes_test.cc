// Extreme but legal values (issue 13): sums at the edge of int64 saturate
// instead of overflowing (undefined behaviour, caught by the sanitizer build
// of these tests), and the figures users read stay right where they can.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "tprof/compare.h"
#include "tprof/diagnose.h"
#include "tprof/html_report.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/profiler.h"
#include "tprof/ranks.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Ten overlapping kernels of 4.6e15 µs (4.6e18 ns each: their sum does not
// fit int64) in one step, and a recorder that says it dropped INT64_MAX events.
// They start before 0 so that they end inside the reader's ±2^62 ns.
std::string huge_trace() {
  std::string ev;
  for (int i = 0; i < 10; ++i) {
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
          std::to_string(i - 22) + R"(, "dur": 1, "args": {"correlation": )" + std::to_string(i + 1) + "}},\n";
    ev += R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" + std::to_string(i - 20) +
          R"(, "dur": 4611686018427387, "args": {"correlation": )" + std::to_string(i + 1) + "}},\n";
  }
  ev += R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": -30, )"
        R"("dur": 4611686018427387})";
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

// Issue 23, H: sums over several values that each saturated, spans from the
// earliest to the latest instant the reader keeps, and what is printed from
// them. Each failed on 6c32929: a wrong number in a release build (below),
// undefined behaviour under UBSan (make test runs this file, and every
// command on tests/fuzz/corpus_extreme through the program, under it).

// The earliest and the latest instant the reader keeps, as µs text: -2^62 + 1
// and 2^62 - 1 ns (src/trace/event_sink.cc).
constexpr const char* kEarliest = "-4611686018427387.903";
constexpr const char* kLongest = "4611686018427387.903";  // as a dur: from kEarliest to 0

std::string x_event(const std::string& cat, const std::string& name, int tid, const std::string& ts,
                    const std::string& dur, const std::string& args = "") {
  return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 1, "tid": )" +
         std::to_string(tid) + R"(, "ts": )" + ts + R"(, "dur": )" + dur +
         (args.empty() ? "" : R"(, "args": {)" + args + "}") + "}";
}

std::string trace_of(const std::vector<std::string>& events) {
  std::string out = R"({"traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) out += (i > 0 ? ",\n" : "") + events[i];
  return out + "]}";
}

// Two kernel names, three kernels each of 2^62 - 1 ns: each name's total
// saturates (tests/fuzz/corpus_extreme/kernel_totals.json). Launched by
// 1 µs calls, so the host side stays small.
std::string two_saturated_kernels() {
  std::vector<std::string> ev;
  int corr = 0;
  for (const char* name : {"kA", "kB"}) {
    for (int i = 0; i < 3; ++i) {
      const std::string c = std::to_string(++corr);
      ev.push_back(x_event("cuda_runtime", "cudaLaunchKernel", 1, kEarliest, "1", R"("correlation": )" + c));
      ev.push_back(x_event("kernel", name, 7, kEarliest, kLongest,
                           R"("correlation": )" + c + R"(, "device": 0, "stream": 7)"));
    }
  }
  return trace_of(ev);
}

TEST(Extremes, TheKernelsTotalSaturatesOverNames) {
  Result<Trace> t = read_trace_bytes(two_saturated_kernels());
  ASSERT_TRUE(t);
  const KernelsSummary k = compute_kernels(*t);
  ASSERT_EQ(k.kernels.size(), 2u);
  EXPECT_EQ(k.kernels[0].total_ns, kMax);
  EXPECT_EQ(k.kernels[1].total_ns, kMax);
  EXPECT_EQ(k.total_ns, kMax);  // was -2 (kernels.cc: kMax + kMax)
  EXPECT_EQ(format_kernels_json(k).find("\"total_ns\": -"), std::string::npos);
}

TEST(Extremes, TheSelfCudaTotalSaturatesOverRows) {
  Result<Trace> t = read_trace_bytes(two_saturated_kernels());
  ASSERT_TRUE(t);
  const Diagnosis d = diagnose(*t);
  // Two device rows, each saturated: the verdict's total was "-2 ns"
  // (diagnose_context.cc, DiagnoseContext::set_averages).
  EXPECT_NE(d.summary.find("Self CUDA total 9223372036.855 s"), std::string::npos) << d.summary;
  EXPECT_EQ(d.summary.find("-2 ns"), std::string::npos) << d.summary;
}

// Three steps and three op names on three threads, each 2^62 - 1 ns over the
// same time (tests/fuzz/corpus_extreme/overlapping_steps.json).
TEST(Extremes, OverlappingStepsAndSelfCpuTotalsSaturate) {
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    ev.push_back(x_event("cpu_op", "aten::op" + std::to_string(i), 10 + i, kEarliest, kLongest));
    ev.push_back(x_event("user_annotation", "ProfilerStep#" + std::to_string(i + 1), 20 + i, kEarliest, kLongest));
  }
  ev.push_back(x_event("cuda_runtime", "cudaLaunchKernel", 10, kEarliest, "1", R"("correlation": 1)"));
  ev.push_back(x_event("kernel", "k", 7, kEarliest, kLongest, R"("correlation": 1, "device": 0, "stream": 7)"));
  Result<Trace> t = read_trace_bytes(trace_of(ev));
  ASSERT_TRUE(t);
  const Diagnosis d = diagnose(*t);
  ASSERT_EQ(d.steps.size(), 3u);
  // The steps' spans add up to 3 × 2^62 (saturated), not to a negative time.
  const Evidence::Field* window = d.verdict_evidence.find("window_ns");
  ASSERT_NE(window, nullptr);
  EXPECT_EQ(window->i, kMax);
  EXPECT_NE(d.summary.find("Self CPU total 9223372036.855 s"), std::string::npos) << d.summary;
}

// The earliest and the latest instant in one trace: the span is 2^63 - 2 ns.
// The report's timeline unit (a millionth of the span, rounded up) was
// span + 999999, past int64 (html_views.cc, write_timeline_json).
TEST(Extremes, TheWidestSpanHasATimelineUnit) {
  const std::string last = "4611686018427387.902";
  Result<Trace> t = read_trace_bytes(trace_of({
      x_event("cpu_op", "aten::first", 1, kEarliest, "1"),
      x_event("cpu_op", "aten::last", 1, last, "0.001"),
      x_event("cuda_runtime", "cudaLaunchKernel", 1, kEarliest, "1", R"("correlation": 1)"),
      x_event("kernel", "k", 7, kEarliest, "1", R"("correlation": 1, "device": 0, "stream": 7)"),
      x_event("cuda_runtime", "cudaLaunchKernel", 1, "4611686018427387.900", "0.001", R"("correlation": 2)"),
      x_event("kernel", "k", 7, "4611686018427387.901", "0.001", R"("correlation": 2, "device": 0, "stream": 7)"),
  }));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->end_ns() - t->start_ns(), kMax - 1);
  const std::string html = format_report_html(*t);
  // ⌈(2^63 - 2) / 10^6⌉; the overflow made it 1.
  EXPECT_NE(html.find("\"unit_ns\": 9223372036855,"), std::string::npos);
}

// An event is kept only if its end is inside ±2^62 ns too, and an "E"
// outside it is skipped: then any two instants are less than 2^63 apart.
TEST(Extremes, EveryInstantTheReaderKeepsIsWithinTwoToThe62) {
  Result<Trace> t = read_trace_bytes(trace_of({
      x_event("cpu_op", "kept", 1, kEarliest, kLongest),              // ends at 0
      x_event("cpu_op", "kept_to_the_top", 1, "0", kLongest),        // ends at 2^62 - 1
      x_event("cpu_op", "past_the_top", 1, "1", kLongest),           // would end at 2^62
      R"({"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 4611686018427387})",
      R"({"ph": "E", "pid": 1, "tid": 2, "ts": -9223372036854775})",  // far below -2^62
  }));
  ASSERT_TRUE(t);
  ASSERT_EQ(t->events.size(), 3u);
  EXPECT_EQ(t->str(t->events.name[2]), "b");
  EXPECT_EQ(t->events.dur_ns[2], 0);  // its E was skipped: a B without E
  EXPECT_EQ(t->diagnostics.count(DiagnosticCode::kOutOfRange), 2u);
  for (std::size_t e = 0; e < t->events.size(); ++e) {
    EXPECT_LT(t->events.ts_ns[e] + t->events.dur_ns[e], std::int64_t{1} << 62) << e;
  }
}

TEST(Extremes, AStepAfterTheLargestNumberStaysAtIt) {
  Result<Trace> t = read_trace_bytes(trace_of({
      x_event("user_annotation", "ProfilerStep#9223372036854775807", 1, "0", "10"),
      x_event("user_annotation", "ProfilerStep#abc", 1, "20", "10"),
  }));
  ASSERT_TRUE(t);
  const StepsSummary s = compute_steps(*t);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[1].step, kMax);  // numbered after the one before: kMax + 1 does not exist
  EXPECT_FALSE(s.steps[1].numbered);
  // diagnose's text names the steps' range (it tested step + 1 == next).
  const std::string text = format_diagnosis_text(*t, diagnose(*t));
  EXPECT_NE(text.find("Steps: 2 (#9223372036854775807 to #9223372036854775807)"), std::string::npos) << text;
}

// Children that overlap each other inside their parent (torch keeps them
// all as its children): the parent's self time saturates at INT64_MIN, and
// compare's deltas against it saturate too
// (tests/fuzz/corpus_extreme/negative_self.json).
TEST(Extremes, CompareDeltasOfSaturatedSelfTimesAreDefined) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  std::vector<std::string> ev = {x_event("user_annotation", "ProfilerStep#1", 1, kEarliest, kLongest),
                                 x_event("cpu_op", "aten::parent", 1, kEarliest, kLongest)};
  // ns as the µs text a trace holds: "-1.002" for -1002.
  auto us = [](std::int64_t ns) {
    const long long mag = ns < 0 ? -ns : ns;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "", mag / 1000, mag % 1000);
    return std::string(buf);
  };
  for (int i = 0; i < 4; ++i) {
    // [earliest + (i + 1) µs, 0 - (3 - i) µs): each ends after the one before.
    const std::int64_t start_ns = -(std::int64_t{1} << 62) + 1 + 1000 * (i + 1), end_ns = -1000 * (3 - i);
    ev.push_back(x_event("cpu_op", "aten::child" + std::to_string(i), 1, us(start_ns), us(end_ns - start_ns)));
  }
  Result<Trace> b = read_trace_bytes(trace_of(ev));
  ASSERT_TRUE(b);
  Result<Trace> a = read_trace_bytes(trace_of({x_event("user_annotation", "ProfilerStep#1", 1, "0", "100"),
                                               x_event("cpu_op", "aten::parent", 1, "0", "50")}));
  ASSERT_TRUE(a);
  const Comparison c = compare_traces(*a, *b);
  const OpDelta* parent = nullptr;
  for (const OpDelta& o : c.ops) parent = o.name == "aten::parent" ? &o : parent;
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->self_cpu_b_ns, kMin);
  EXPECT_EQ(parent->self_cpu_delta_ns(), kMin);  // kMin - 50000: saturated, not wrapped
  EXPECT_FALSE(format_comparison_text(c, {}).empty());
}

// Rank summaries are read from files: any int64. Kernel-type times that
// sum past int64 saturate; phases that do not add up to the step (checked
// without adding them) are an error.
TEST(Extremes, RankSummariesAtTheInt64Edge) {
  auto summary = [](const std::string& steps, const std::string& types) {
    return R"({"format": "tprof.rank_summary", "version": 1, "ranks": [{"rank": 0, "source": "a.json",
      "verdict": "compute-bound", "has_device": true, "steps": )" + steps + R"(,
      "hta_comm_comp_overlap": {"overlap_ns": 0, "comm_ns": 0}, "hta_kernel_types": )" + types + "}]}";
  };
  const std::string max = std::to_string(kMax);
  Result<JobSummary> job = parse_rank_summary_json(summary(
      "[[1, " + max + ", " + max + ", 0, 0]]",
      R"([{"kernel_type": "COMPUTATION", "ns": )" + max + R"(}, {"kernel_type": "MEMORY", "ns": )" + max + "}]"));
  ASSERT_TRUE(job) << job.error().to_string();
  const JobView v = compute_job_view(*job);
  ASSERT_EQ(v.kernel_types.size(), 2u);
  EXPECT_DOUBLE_EQ(v.kernel_types[0].pct, 100.0);  // each over the saturated total
  EXPECT_FALSE(format_job_text(v).empty());
  // max + max + 7 == 5 when the sum wraps (2^64 + 5): it must not be accepted.
  Result<JobSummary> wrapped = parse_rank_summary_json(summary("[[1, 5, " + max + ", " + max + ", 7]]", "[]"));
  ASSERT_FALSE(wrapped);
  EXPECT_NE(wrapped.error().message().find("do not sum to the step"), std::string::npos);
}

}  // namespace
}  // namespace tprof
