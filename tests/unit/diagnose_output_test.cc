// tprof diagnose's output: root causes (findings grouped by what they
// describe), event references a person can find (ms since the trace's start
// and the file's own ts), the 30-second default view on the blog's H100
// runs, and CPU-only traces without GPU words.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/analyze/causes.h"
#include "src/report/event_text.h"
#include "src/report/py_format.h"
#include "tests/support/kineto_events.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

Finding finding(std::string id, FindingSeverity sev, std::int64_t impact, Evidence ev = {}) {
  Finding f;
  f.id = std::move(id);
  f.severity = sev;
  f.title = f.id + " title";
  f.impact_ns = impact;
  f.evidence = std::move(ev);
  f.advice = "Do this. Then that.";
  return f;
}

std::vector<std::string> ids_of(const std::vector<Finding>& fs, const Cause& c) {
  std::vector<std::string> out;
  for (std::size_t i : c.findings) out.push_back(fs[i].id);
  return out;
}

const Cause* cause(const std::vector<Cause>& cs, std::string_view id) {
  for (const Cause& c : cs) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

constexpr auto kWarn = FindingSeverity::kWarning;
constexpr auto kInfo = FindingSeverity::kInfo;

// Ordered as diagnose() orders findings: severity, then impact.
std::vector<Finding> blog_like_findings() {
  std::vector<Finding> fs;
  EventRef gap_after{"void at::native::vectorized_elementwise_kernel<8, X, Y>(int, X, Y)", "gpu 0 stream 7", 5'000, 1'000, 1};
  fs.push_back(finding("low_gpu_utilization", kWarn, 1'400'000));
  fs.push_back(finding("overhead_bound", kWarn, 1'200'000,
                       Evidence().real("gpu_idle_pct", 95.2).text("window", "steps")));
  fs.back().title = "Overhead-bound: Self CPU 1.340 ms vs Self CUDA 63.7 us (21x), GPU idle 95.2% of the steps";
  fs.push_back(finding("kernel_gap", kWarn, 290'000,
                       Evidence().text("pattern", "recurring").text("before", "nvjet").text("after", gap_after.name)
                           .event("kernel_after", gap_after)));
  fs.push_back(finding("kernel_gap", kWarn, 100'000,
                       Evidence().text("pattern", "recurring").text("before", "ncclDevKernel_AllReduce").text("after", "gemm")));
  fs.push_back(finding("kernel_launch_stats", kWarn, 90'000, Evidence().real("short_pct", 100.0)));
  fs.push_back(finding("cold_start", kInfo, 226'000, Evidence().num("first_step", 1)));
  fs.back().title = "Cold start: step 1 took 279.7 us, 5.3x the median; the same calls as later steps, only slower";
  fs.push_back(finding("kernel_gap", kInfo, 43'000, Evidence().text("pattern", "one-off").ints("steps", {1})));
  fs.push_back(finding("kernel_gap", kInfo, 40'000, Evidence().text("pattern", "one-off").ints("steps", {7})));
  fs.push_back(finding("hotspot", kInfo, 42'000, Evidence().text("column", "self_cuda")));
  fs.push_back(finding("dispatch_gap", kInfo, 19'000, Evidence().text("pattern", "first_call").ints("steps", {1})));
  return fs;
}

TEST(Causes, GroupsSymptomsOfOneCauseAroundTheirAnchor) {
  const std::vector<Finding> fs = blog_like_findings();
  const std::vector<Cause> cs = internal::group_causes(fs, 1);
  // Every finding in exactly one cause.
  std::vector<int> seen(fs.size(), 0);
  for (const Cause& c : cs) {
    for (std::size_t i : c.findings) ++seen[i];
  }
  for (int n : seen) EXPECT_EQ(n, 1);

  const Cause* lo = cause(cs, "launch_overhead");
  ASSERT_NE(lo, nullptr);
  EXPECT_EQ(ids_of(fs, *lo),
            (std::vector<std::string>{"low_gpu_utilization", "overhead_bound", "kernel_gap", "kernel_launch_stats"}));
  EXPECT_EQ(lo->findings[2], 2u);  // the compute gap, not the one next to a collective
  EXPECT_EQ(lo->severity, kWarn);
  EXPECT_EQ(lo->impact_ns, 1'400'000);  // the largest symptom, never the sum
  EXPECT_EQ(fs[lo->anchor].id, "overhead_bound");
  EXPECT_NE(lo->title.find("Launch overhead"), std::string::npos);
  EXPECT_NE(lo->title.find("(21x)"), std::string::npos);
  ASSERT_TRUE(lo->look_at.has_value());
  EXPECT_EQ(lo->look_at->ts_ns, 5'000);  // the kernel after the recurring gap

  const Cause* cold = cause(cs, "cold_start");
  ASSERT_NE(cold, nullptr);
  EXPECT_EQ(ids_of(fs, *cold), (std::vector<std::string>{"cold_start", "kernel_gap", "dispatch_gap"}));
  EXPECT_EQ(cold->findings[1], 6u);  // the one-off gap of step 1, not the one of step 7
  EXPECT_EQ(cold->title, "Cold start: step 1 took 279.7 us, 5.3x the median");

  // No compute_bound: the hotspot stands alone; so do the collective's gap
  // and the step-7 one-off.
  EXPECT_EQ(cause(cs, "compute_bound"), nullptr);
  ASSERT_NE(cause(cs, "hotspot"), nullptr);
  int lone_gaps = 0;
  for (const Cause& c : cs) lone_gaps += c.id == "kernel_gap";
  EXPECT_EQ(lone_gaps, 2);

  // The causes with a fix first, then the cold start (a warm-up before the
  // recording: a run of many steps pays it once); each by the time it
  // could save, then severity.
  ASSERT_EQ(cs.back().id, "cold_start");
  for (std::size_t i = 1; i < cs.size(); ++i) {
    if (cs[i].id == "cold_start") continue;
    EXPECT_TRUE(cs[i - 1].impact_ns > cs[i].impact_ns ||
                (cs[i - 1].impact_ns == cs[i].impact_ns && cs[i - 1].severity >= cs[i].severity));
  }
}

TEST(Causes, SymptomsWithoutTheirAnchorStayFindingsOfTheirOwn) {
  std::vector<Finding> fs;
  fs.push_back(finding("low_gpu_utilization", kWarn, 100));
  fs.push_back(finding("kernel_gap", kWarn, 50, Evidence().text("pattern", "recurring")));
  fs.push_back(finding("dispatch_gap", kInfo, 10, Evidence().text("pattern", "first_call").ints("steps", {1})));
  const std::vector<Cause> cs = internal::group_causes(fs, 1);
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[0].id, "low_gpu_utilization");
  EXPECT_EQ(cs[0].title, "low_gpu_utilization title");
  EXPECT_EQ(cs[1].id, "kernel_gap");
  EXPECT_EQ(cs[2].id, "dispatch_gap");
}

TEST(Causes, AnOverheadBoundVerdictGathersTheSymptomsWithoutTheirAnchor) {
  // Falconsai on H100: measured overhead-bound (83% of the step launching),
  // but Self CPU / Self CUDA is 6.4x, under overhead_bound's 10x: its
  // symptoms were four cards with one fix repeated.
  std::vector<Finding> fs;
  fs.push_back(finding("low_gpu_utilization", kWarn, 100));
  fs.push_back(finding("kernel_gap", kWarn, 50, Evidence().text("pattern", "recurring")));
  fs.push_back(finding("kernel_gap", kWarn, 40, Evidence().text("pattern", "recurring")));
  const std::vector<Cause> cs = internal::group_causes(fs, 1, /*launch_overhead_measured=*/true);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].id, "launch_overhead");
  EXPECT_EQ(cs[0].title, "Launch overhead: the GPU waits for the CPU; low_gpu_utilization title");
  EXPECT_EQ(ids_of(fs, cs[0]), (std::vector<std::string>{"low_gpu_utilization", "kernel_gap", "kernel_gap"}));
}

// Issue 38's fourteenth round: a Mamba-3 decode step's "cudaLaunchKernel
// called 350 times ... up to 393 us a step" repeated the launch-overhead
// cause's fix with a smaller saving beside it. The launch calls counted are
// the cause's; another op called many times is not.
TEST(Causes, TheLaunchCallsCountedJoinTheLaunchOverheadCause) {
  std::vector<Finding> fs;
  fs.push_back(finding("overhead_bound", kWarn, 1000));
  fs.push_back(finding("many_calls", kWarn, 390, Evidence().text("key", "cudaLaunchKernel")));
  fs.push_back(finding("many_calls", kWarn, 200, Evidence().text("key", "aten::to")));
  const std::vector<Cause> cs = internal::group_causes(fs, 1);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].id, "launch_overhead");
  EXPECT_EQ(ids_of(fs, cs[0]), (std::vector<std::string>{"overhead_bound", "many_calls"}));
  EXPECT_EQ(cs[1].id, "many_calls");
}

// The same round: one cold pass of a custom LayerNorm backward, told to
// profile warmed-up iterations (the launch-overhead cause, a warning that
// saves nothing), was the first card above its one-block kernel. Notes on
// the recording come after the fixes.
TEST(Causes, NotesOnTheRecordingComeAfterTheFixes) {
  std::vector<Finding> fs;
  fs.push_back(finding("overhead_bound", kWarn, 0, Evidence().text("one_pass", "yes")));
  fs.push_back(finding("hotspot", kInfo, 0, Evidence().text("column", "self_cuda")));
  fs.push_back(finding("kernel_variance", kInfo, 50, Evidence().num("nothing_to_act_on", 1)));
  const std::vector<Cause> cs = internal::group_causes(fs, 1);
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[0].id, "hotspot");
  EXPECT_EQ(cs[1].id, "kernel_variance");
  EXPECT_EQ(cs[2].id, "launch_overhead");
}

TEST(Causes, ComputeAndHiddenCopyGroups) {
  std::vector<Finding> fs;
  fs.push_back(finding("hidden_memcpy", kWarn, 380));
  // Where the GPU time goes saves nothing by itself: no impact.
  fs.push_back(finding("compute_bound", kInfo, 0));
  fs.push_back(finding("hotspot", kInfo, 0, Evidence().text("column", "self_cuda")));
  fs.push_back(finding("addmm_fusion", kInfo, 380, Evidence().num("dtod_count", 20)));
  fs.push_back(finding("cpu_gpu_offset", kInfo, 0, Evidence().text("pattern", "queue_backed_up")));
  const std::vector<Cause> cs = internal::group_causes(fs, 1);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].id, "hidden_memcpy");  // the time it could save first
  EXPECT_EQ(ids_of(fs, cs[0]), (std::vector<std::string>{"hidden_memcpy", "addmm_fusion"}));
  EXPECT_EQ(cs[1].id, "compute_bound");
  EXPECT_EQ(ids_of(fs, cs[1]), (std::vector<std::string>{"compute_bound", "hotspot", "cpu_gpu_offset"}));
}

TEST(EventText, RelativeMsAndTheFilesOwnTs) {
  // baseTimeNanoseconds 1790857026000000000 and a first event at ts
  // 4524450004919.216 µs (the blog's 64x64 run).
  const std::int64_t base = 1'790'857'026'000'000'000;
  const std::int64_t first = base + 4'524'450'004'919'216;
  const internal::EventClock clock(first - 227'000, base);
  const std::int64_t kernel = base + 4'524'450'005'117'409;
  EXPECT_EQ(clock.raw_ts_text(kernel), "4524450005117.409");  // exact: no double on the way
  EXPECT_EQ(clock.rel_ms_text(kernel), "0.425 ms");
  EXPECT_EQ(clock.at_text(first), "at 0.227 ms (ts 4524450004919.216)");
  EventRef e{"void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
             "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
             "gpu 0 stream 7", kernel, 2'300, 1};
  const internal::KernelNames names(std::vector<std::string_view>{e.name});
  EXPECT_EQ(clock.event_text(e, &names),
            "vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>> @ gpu 0 stream 7, at 0.425 ms (ts "
            "4524450005117.409), 2.3 us, step 1");
  EXPECT_EQ(clock.event_text(e, nullptr).substr(0, 5), "void ");
}

TEST(EventText, WithoutBaseTimeTheTsIsTheEpochMicrosecond) {
  const internal::EventClock clock(1'795'319'515'516'000'000, 0);
  EXPECT_EQ(clock.at_text(1'795'319'515'517'203'669), "at 1.204 ms (ts 1795319515517203.669)");
  EXPECT_EQ(clock.rel_ms_text(1'795'319'515'516'000'499), "0.000 ms");
  EXPECT_EQ(clock.rel_ms_text(1'795'319'515'516'000'500), "0.001 ms");
}

TEST(EventText, ClockOfATraceFromTheFile) {
  const std::string json = R"({"baseTimeNanoseconds": 1000000000000, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 100.5, "dur": 10},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5117.5, "dur": 2.3}]})";
  Result<Trace> t = read_trace_bytes(json);
  ASSERT_TRUE(t.has_value());
  const internal::EventClock clock(*t);
  EXPECT_EQ(clock.at_text(t->events.ts_ns[1]), "at 5.017 ms (ts 5117.500)");
  EXPECT_EQ(clock.raw_ns(t->events.ts_ns[0]), 100'500);
}

TEST(EventText, TimestampKeys) {
  EXPECT_TRUE(internal::is_timestamp_key("window_start_ns"));
  EXPECT_TRUE(internal::is_timestamp_key("ts_ns"));
  EXPECT_FALSE(internal::is_timestamp_key("step_offsets_ns"));
  EXPECT_FALSE(internal::is_timestamp_key("first_step_ns"));
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p < s.size()) {
    const std::size_t n = s.find('\n', p);
    out.push_back(s.substr(p, n - p));
    p = n == std::string::npos ? s.size() : n + 1;
  }
  return out;
}

class BlogDefault : public ::testing::TestWithParam<const char*> {};

TEST_P(BlogDefault, FitsThirtySecondsAndNamesTheCause) {
  const std::string name = GetParam();
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/" + name + ".json");
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  const std::string text = format_diagnosis_text(*t, d);
  const std::vector<std::string> lines = lines_of(text);
  EXPECT_LE(lines.size(), 30u) << text;  // at most 30: lines wrap, never cut (issue 38, item 8)
  for (const std::string& l : lines) EXPECT_LE(internal::py_len(l), 160u) << l;
  const bool small = name.starts_with("64_");
  EXPECT_NE(text.find(small ? "Verdict: overhead-bound" : "Verdict: compute-bound"), std::string::npos) << text;
  // The first cause: launch overhead at 64; at 4096 the compute-bound
  // verdict's cause, or (compiled) the addmm bias copy the replay prices.
  if (small) EXPECT_NE(text.find("Launch overhead"), std::string::npos) << text;
  EXPECT_NE(text.find("worst step 1 ("), std::string::npos) << text;  // the cold step
  if (name.find("compile") != std::string::npos) {
    // As a cause card, or by id on the "Also:" line.
    EXPECT_TRUE(text.find("Hidden Memcpy DtoD before the GEMM") != std::string::npos ||
                text.find("hidden_memcpy") != std::string::npos)
        << text;
  }
  EXPECT_NE(text.find("GPU timeline (TraceLens)"), std::string::npos);
  EXPECT_NE(text.find(" (ts "), std::string::npos);  // events carry the file's ts
  EXPECT_EQ(text.find("1795"), std::string::npos) << "no epoch times: the file's ts are relative to its base";

  const std::string verbose = format_diagnosis_text(*t, d, {.verbose = true});
  EXPECT_GT(lines_of(verbose).size(), 40u);
  EXPECT_NE(verbose.find("Findings ("), std::string::npos);
  EXPECT_EQ(verbose.find("1795"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(H100, BlogDefault,
                         ::testing::Values("64_bf16_cold_eager", "64_bf16_warm_eager", "64_bf16_cold_compile",
                                           "64_bf16_warm_compile", "4096_bf16_cold_eager", "4096_bf16_warm_eager",
                                           "4096_bf16_cold_compile", "4096_bf16_warm_compile"));

class CpuOnly : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuOnly, ThreadsInsteadOfGpuColumns) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + GetParam());
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  EXPECT_EQ(d.verdict, Verdict::kCpuOnly);
  ASSERT_FALSE(d.threads.empty());
  for (std::size_t i = 1; i < d.threads.size(); ++i) EXPECT_GE(d.threads[i - 1].busy_ns, d.threads[i].busy_ns);
  for (const ThreadBusy& b : d.threads) {
    EXPECT_LE(b.busy_ns, b.window_ns);
    EXPECT_TRUE(b.lane.starts_with("cpu pid "));
  }
  for (bool verbose : {false, true}) {
    const std::string text = format_diagnosis_text(*t, d, {.verbose = verbose});
    EXPECT_NE(text.find("Threads (busy time over"), std::string::npos) << text;
    EXPECT_EQ(text.find("GPU"), std::string::npos) << text;
    EXPECT_EQ(text.find("CUDA"), std::string::npos) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Traces, CpuOnly,
                         ::testing::Values("torch-1.13/mlp/cycle0.kineto.json", "torch-1.13/threads/threads.kineto.json",
                                           "public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"));


// ---- review 2026-11-26 (round 3): lines an expert rejected ----------------

std::string default_text(const std::string& rel, bool verbose = false) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t.has_value()) << rel;
  if (!t) return "";
  // Every cause card the review judged, whatever fits in 30 lines (the
  // budget itself: BlogDefault and Consistency.NoContradictionOnAnyRealTrace).
  return format_diagnosis_text(*t, diagnose(*t), {.verbose = verbose, .max_lines = 200});
}

TEST(DiagnoseText, HtasIdleLineSaysItsStreamsAreSummed) {
  // HTA's idle breakdown is per stream; summed over streams that run at
  // once it can pass the trace's span (issue 38's sixth round: 66.8 ms of
  // host wait in a 46.4 ms trace), so the line says it is a sum.
  const std::string multi =
      default_text("public/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz", true);
  EXPECT_NE(multi.find("GPU idle causes (HTA), rank 0, summed over 3 streams: host wait"), std::string::npos) << multi;
  const std::string one = default_text("gpu/h200-tprof/record_vecadd.json", true);
  EXPECT_NE(one.find("GPU idle causes (HTA), rank 0, 1 stream: host wait"), std::string::npos) << one;
  EXPECT_NE(one.find("(HTA's idle time breakdown: each stream's gaps between its kernels, by HTA's rules, not the GPU "
                     "idle time above)"),
            std::string::npos)
      << one;
  // Not on the default page, where it read as a second GPU idle figure
  // that disagrees with the first (issue 38's eleventh round).
  EXPECT_EQ(default_text("gpu/h200-tprof/record_vecadd.json").find("GPU idle causes (HTA)"), std::string::npos);
}

// One logical line: from its first physical line up to the next line that
// is not a continuation (deeper indented than the first).
std::string logical_line(const std::string& text, const std::string& start) {
  const std::vector<std::string> lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with(start)) continue;
    const std::size_t indent = lines[i].find_first_not_of(' ');
    std::string out = lines[i].substr(indent);
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      const std::size_t k = lines[j].find_first_not_of(' ');
      if (k == std::string::npos || k <= indent || lines[j].compare(k, 4, "fix ") == 0 ||
          lines[j].compare(k, 9, "evidence:") == 0 || lines[j].compare(k, 8, "look at:") == 0 ||
          lines[j].compare(k, 9, "findings:") == 0 || lines[j].compare(k, 4, "fix:") == 0 ||
          lines[j].compare(k, 3, "1. ") == 0) {
        break;
      }
      out += " " + lines[j].substr(k);
    }
    return out;
  }
  return "";
}

// The verdict's summary: its lines (indented like the first) joined.
std::string summary_of(const std::string& text) {
  std::string out;
  const std::vector<std::string> lines = lines_of(text);
  for (std::size_t i = 1; i < lines.size() && !lines[i].empty() && !lines[i].starts_with("  supported by:"); ++i) {
    out += (out.empty() ? "" : " ") + lines[i].substr(2);
  }
  return out;
}

TEST(ReviewRound3, NoLineIsCut) {
  // R1: verdict summaries, fixes, evidence and titles were cut with "…"
  // after two lines, losing their conclusion: record_plain_64's "the trace
  // does not show what filled most of the time", record_vecadd's "after
  // which the GPU is busy 2.7%", alexnet's allocator remedy ("drop the cache
  // clearing"), the H200 4096 compiled runs' addmm_fusion count.
  for (const char* rel : {"gpu/h200-tprof/record_plain_64.json", "gpu/h200-tprof/record_vecadd.json",
                          "gpu/h200-tprof/4096_bf16_cold_compile.json", "gpu/h200-tprof/4096_bf16_cold_eager.json",
                          "gpu/h200-tprof/64_bf16_cold_fused.json", "gpu/h100-torch-2.11/4096_bf16_cold_compile.json",
                          "gpu/h100-torch-2.11/64_bf16_warm_compile.json",
                          "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"}) {
    for (bool verbose : {false, true}) {
      const std::string text = default_text(rel, verbose);
      for (const std::string& l : lines_of(text)) {
        EXPECT_FALSE(l.ends_with("…")) << rel << ": " << l;
        if (!verbose) {
          EXPECT_LE(internal::py_len(l), 160u) << rel << ": " << l;
        }
      }
    }
  }
  // Its 20 NVTX "step" ranges are its steps (issue 40): judged over them,
  // not over the whole run's start-up and exit.
  const std::string plain = default_text("gpu/h200-tprof/record_plain_64.json");
  EXPECT_NE(summary_of(plain).find("20 of 20 steps overhead-bound"), std::string::npos) << plain;
  const std::string vecadd = default_text("gpu/h200-tprof/record_vecadd.json");
  EXPECT_NE(summary_of(vecadd).find("after which the GPU is busy"), std::string::npos) << vecadd;
  const std::string alexnet =
      default_text("public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz");
  EXPECT_NE(alexnet.find("torch.cuda.empty_cache()"), std::string::npos) << alexnet;
  // The fix is the first sentence, whole: "op::addmm copies the addend ..."
  // starts the explanation and is not printed.
  const std::string compiled = default_text("gpu/h200-tprof/4096_bf16_cold_compile.json");
  EXPECT_EQ(compiled.find("op::addmm copies"), std::string::npos) << compiled;
  EXPECT_NE(compiled.find("fix (17.7 us a step in the replay with \"remove:cudaMemcpyAsync\"): Give the addend"),
            std::string::npos)
      << compiled;
}

TEST(ReviewRound3, CountsReadAsEnglish) {
  // R5: "1 copies use pageable host memory", "its 200 in the window
  // launches", "(1 of 1, 1 findings)".
  const std::string vecadd = default_text("gpu/h200-tprof/record_vecadd.json");
  EXPECT_NE(vecadd.find("1 copy uses pageable host memory"), std::string::npos) << vecadd;
  EXPECT_EQ(vecadd.find("1 copies"), std::string::npos) << vecadd;
  EXPECT_EQ(vecadd.find("in the window launches"), std::string::npos) << vecadd;
  EXPECT_NE(logical_line(vecadd, "     fix (up to 219.2 us)").find("(200 launches in the window)"), std::string::npos)
      << vecadd;
  for (const char* rel : {"torch-1.13/blog/64_bf16_cold_eager.json", "public/dlrm_legacy/dlrm_s_pytorch_cpu_2020.json.gz"}) {
    const std::string text = default_text(rel);
    EXPECT_NE(text.find("Top causes (1 of 1, 1 finding)"), std::string::npos) << text;
  }
}

TEST(ReviewRound3, AJudgeByTheMedianNoteSavesNothing) {
  // R2: "fix (up to 6.2 us a step): Judge this run by the median step ...
  // so another warm-up step would not remove it" on the H200 64 warm eager
  // run: a saving for a fix that saves nothing.
  for (const char* rel : {"gpu/h200-tprof/64_bf16_warm_eager.json", "gpu/h200-tprof/4096_bf16_warm_fused.json",
                          "gpu/h100-torch-2.11/64_bf16_warm_eager.json"}) {
    const std::string text = default_text(rel);
    for (const std::string& l : lines_of(text)) {
      if (l.find("Judge this run by the median step") != std::string::npos) {
        EXPECT_EQ(l.find("fix (up to"), std::string::npos) << rel << ": " << l;
      }
    }
  }
}

TEST(ReviewRound3, EvidencePrintsNoLabelTwice) {
  // R4: "evidence: first_step 1, first_step 141.9 us, ..." (the step's
  // number and its duration) and "sync 55.9 us, host_blocked 55.9 us, sync
  // 1.4%" (a time and its share).
  const std::string cold = default_text("gpu/h200-tprof/64_bf16_cold_compile.json");
  EXPECT_EQ(cold.find("first_step 1, first_step"), std::string::npos) << cold;
  EXPECT_NE(cold.find("evidence: first_step #1: 141.9 us, median_other_steps 27.5 us, excess 114.4 us"),
            std::string::npos)
      << cold;
  const std::string mi300 = default_text("public/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz");
  EXPECT_NE(mi300.find("evidence: calls 2, sync 55.9 us (1.4% of step time), host_blocked 55.9 us"), std::string::npos)
      << mi300;
}

TEST(ReviewRound3, AGrowingQueueHasNoMedianOffset) {
  // R3: "first kernel after its launch: median 1.598 ms" on the H200 4096 warm eager run,
  // whose first kernel of each step waits 18.4 us in step 1 and 3.209 ms in
  // step 20: the median of a ramp is its middle step's.
  const std::string warm = default_text("gpu/h200-tprof/4096_bf16_warm_eager.json");
  EXPECT_EQ(warm.find("first kernel after its launch: median"), std::string::npos) << warm;
  EXPECT_NE(warm.find("first kernel after its launch: grows 18.4 us to 3.209 ms (about 167.9 us a step: the host runs ahead)"),
            std::string::npos)
      << warm;
  // Without ProfilerSteps: 20 NVTX "step" ranges, the trace's steps,
  // whose first kernel waits 8 us, then ..., 3154 us.
  const std::string nvtx = default_text("gpu/h200-tprof/record_plain_4096_nvtx.json");
  EXPECT_NE(nvtx.find("Steps: 20 calls of \"step\" (#0-#19)"), std::string::npos) << nvtx;
  EXPECT_EQ(nvtx.find("first kernel after its launch: median"), std::string::npos) << nvtx;
  EXPECT_NE(nvtx.find("first kernel after its launch: grows 8.4 us to 3.154 ms (about 165.6 us a step: the host runs ahead)"),
            std::string::npos)
      << nvtx;
  // Where it does not grow the median stays (the H100 64 runs' few us).
  const std::string small = default_text("gpu/h100-torch-2.11/64_bf16_cold_eager.json");
  EXPECT_NE(small.find("first kernel after its launch: median"), std::string::npos) << small;
}

TEST(ReviewRound3, AHostSavingInsideLaunchOverheadIsNotAGpuResidue) {
  // R7: in the overhead-bound 64² compiled runs the fixes of hidden_memcpy
  // and compile_overhead printed the GPU idle left over after the launch
  // overhead took its claim ("up to 780 ns a step" for a copy whose
  // cudaMemcpyAsync costs 8.2 us a step, "up to 457 ns" for a 60.5 us
  // wrapper). They print the host time the fix saves and the cause whose
  // idle holds it; since issue 37 hidden_memcpy's is the replay's saving
  // (remove:cudaMemcpyAsync), which gives the same host time.
  struct Case {
    const char* rel;
    std::vector<std::string> fixes;
    std::vector<std::string> gone;
  };
  const Case cases[] = {
      {"gpu/h200-tprof/64_bf16_cold_compile.json",
       {"fix (8.2 us a step in the replay with \"remove:cudaMemcpyAsync\"): Give the addend to the GEMM"},
       {"fix (up to 780 ns a step)"}},
      {"gpu/h200-tprof/64_bf16_warm_compile.json",
       {"fix (8.7 us a step in the replay with \"remove:cudaMemcpyAsync\"): Give the addend to the GEMM"},
       {"fix (up to 780 ns a step)"}},
      {"gpu/h100-torch-2.11/64_bf16_cold_compile.json",
       {"fix (11.2 us a step in the replay with \"remove:cudaMemcpyAsync\"): Let torch.compile(mode=\"max-autotune\")",
        "fix (49.3 us of host time a step, inside cause 1's 58.4 us): Keep this function eager"},
       {"fix (up to 1.0 us a step)", "fix (up to 394 ns a step)"}},
      {"gpu/h100-torch-2.11/64_bf16_warm_compile.json",
       {"fix (13.9 us a step in the replay with \"remove:cudaMemcpyAsync\"): Let torch.compile(mode=\"max-autotune\")",
        "fix (60.5 us of host time a step, inside cause 1's 75.1 us): Keep this function eager"},
       {"fix (up to 1.0 us a step)", "fix (up to 457 ns a step)"}},
      {"gpu/h200-tprof/record_plain_64_compile_nvtx.json",
       {"fix (8.0 us a step in the replay with \"remove:cudaMemcpyAsync\"): Let torch.compile(mode=\"max-autotune\")"},
       {"fix (up to 16.8 us)", "fix (up to 839 ns a step)"}},
  };
  for (const Case& c : cases) {
    const std::string text = default_text(c.rel);
    std::vector<std::string> fix_lines;  // every cause's fix, its wrapped lines joined
    for (const std::string& l : lines_of(text)) {
      if (l.starts_with("     fix")) fix_lines.push_back(logical_line(text, l));
    }
    for (const std::string& fix : c.fixes) {
      EXPECT_TRUE(std::any_of(fix_lines.begin(), fix_lines.end(), [&](const std::string& l) { return l.starts_with(fix); }))
          << c.rel << ": " << fix << "\n" << text;
    }
    for (const std::string& g : c.gone) EXPECT_EQ(text.find(g), std::string::npos) << c.rel << ": " << g;
    EXPECT_NE(text.find("cudaMemcpyAsync calls ("), std::string::npos) << c.rel;
  }
  // GPU-bound (4096²): the copy runs on the GPU's critical path; the
  // replay without it saves its 15.8 us of device time and the stream gap
  // before it.
  const std::string big = default_text("gpu/h200-tprof/4096_bf16_cold_compile.json");
  EXPECT_NE(big.find("fix (17.7 us a step in the replay with \"remove:cudaMemcpyAsync\"): Give the addend"),
            std::string::npos)
      << big;
  EXPECT_EQ(big.find("of host time"), std::string::npos) << big;
}

TEST(ReviewRound3, ManyLaunchesOfAFullKernelSaveOnlyTheIdleBetweenThem) {
  // R6: record_vecadd launches the full 1M-element add 200 times, 3.6 us
  // each at ~74% of the H200's HBM bandwidth. "At 3.6 us a call, the fixed
  // cost of each call adds up to 711.3 us" and "up to 711.3 us" named the
  // kernels' memory traffic; only the 219 us between them (1.1 us a launch)
  // can go.
  const std::string vecadd = default_text("gpu/h200-tprof/record_vecadd.json");
  EXPECT_EQ(vecadd.find("up to 711.3 us"), std::string::npos) << vecadd;
  EXPECT_EQ(vecadd.find("split between them"), std::string::npos) << vecadd;
  EXPECT_NE(logical_line(vecadd, "  3. [warning] add called 200 times")
                .find("; the GPU idles 219.2 us between them (1.1 us a launch)"),
            std::string::npos)
      << vecadd;
  const std::string fix = logical_line(vecadd, "     fix (up to 219.2 us): Replay the launches of add");
  EXPECT_NE(fix.find("between them the GPU idles 219.2 us (1.1 us a launch), the most fewer launches save; the 711.3 us "
                     "the kernels run is their own work and stays."),
            std::string::npos)
      << vecadd;
}

TEST(ReviewRound7, AOneOffSavesItsStepOnceNotAShareOfEveryStep) {
  // Review round 7: host_blocked on the tb_plugin resnet50 sample said "fix
  // (up to 7.186 ms a step)": 43.1 ms over 6 steps, 42.9 ms of it one 19 MB
  // pageable input copy in step 16. A claim one step holds most of is a
  // typical step's share plus the rest once; a one-off gap saves its excess
  // once, in its step.
  const std::string resnet =
      "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz";
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + resnet);
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  const auto blocked =
      std::find_if(d.findings.begin(), d.findings.end(), [](const Finding& f) { return f.id == "host_blocked"; });
  ASSERT_NE(blocked, d.findings.end());
  ASSERT_NE(blocked->evidence.find("once_ns"), nullptr);
  EXPECT_EQ(blocked->evidence.find("once_step")->i, 16);
  EXPECT_GT(blocked->evidence.find("once_ns")->i, 42'000'000);
  EXPECT_LT(blocked->impact_per_step_ns, 100'000);
  EXPECT_NE(default_text(resnet).find("a step, plus 42.884 ms once, in step 16)"), std::string::npos);
  // A one-off gap: its excess once (15.5 us), nothing a step.
  const std::string gap = default_text("gpu/h200-tprof/4096_bf16_warm_eager.json");
  EXPECT_NE(gap.find("fix (up to 15.5 us once, in step 1): Record more steps"), std::string::npos) << gap;
  // Round 8: a first call's dispatch gap, which claims no idle, is its
  // step's too; the cold-start cause it joins saves nothing a step.
  Result<Trace> compiled =
      read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/4096_bf16_warm_compile.json");
  ASSERT_TRUE(compiled.has_value());
  const Diagnosis dc = diagnose(*compiled);
  int first_calls = 0;
  for (const Finding& f : dc.findings) {
    const Evidence::Field* pattern = f.evidence.find("pattern");
    if (f.id != "dispatch_gap" || pattern == nullptr || pattern->s != "first_call") continue;
    ++first_calls;
    ASSERT_NE(f.evidence.find("once_ns"), nullptr);
    EXPECT_EQ(f.evidence.find("once_ns")->i, f.impact_ns);
    EXPECT_EQ(f.evidence.find("once_step")->i, 1);
    EXPECT_EQ(f.impact_per_step_ns, 0);
  }
  EXPECT_EQ(first_calls, 1);
  for (const Cause& c : dc.causes) {
    if (c.id == "cold_start") {
      EXPECT_EQ(c.impact_per_step_ns, 0);
    }
  }
  // A claim spread over the steps is not a one-off.
  Result<Trace> blog = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  ASSERT_TRUE(blog.has_value());
  for (const Finding& f : diagnose(*blog).findings) {
    if (f.id == "overhead_bound" || f.id == "low_gpu_utilization") {
      EXPECT_EQ(f.evidence.find("once_ns"), nullptr) << f.id;
    }
  }
}

// Two kernels whose names share their first 60 characters (the rules' cut
// for titles): the text names each as itself. A GH200 trace's gap "between
// ...MulFunctor... and ...CUDAFunctor_add..." read "between Mul and Mul"
// (issue 38 review, third round).
TEST(ShortTitles, KernelsSharingTheirCutKeepTheirOwnNames) {
  using namespace testing;
  const std::string mul =
      "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, float, "
      "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::BUnaryFunctor<float, "
      "float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)";
  const std::string add =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> "
      ">(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)";
  ASSERT_EQ(mul.substr(0, 60), add.substr(0, 60));
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    const double t0 = 1000.0 * i;
    ev.push_back(step(i + 1, t0, 1000));
    ev.push_back(launch(t0 + 10, 5, 2 * i));
    ev.push_back(kernel(mul, 7, t0 + 20, 10, 2 * i));
    ev.push_back(launch(t0 + 600, 5, 2 * i + 1));
    ev.push_back(kernel(add, 7, t0 + 610, 10, 2 * i + 1));
  }
  Result<Trace> t = read_trace_bytes(doc(ev), "t.json");
  ASSERT_TRUE(t.has_value());
  const std::string text = format_diagnosis_text(*t, diagnose(*t), {.verbose = true, .max_lines = 400});
  EXPECT_NE(text.find("between vectorized_elementwise_kernel<4, BUnaryFunctor<MulFunctor<float>>> and "
                      "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>"),
            std::string::npos)
      << text;
}

// A kernel whose name is empty (its "name" key lost) beside a named one:
// the empty name's title cut is "", which short_title must not look for (it
// is found at every position: the diagnose fuzzer's replay hung on it).
TEST(ShortTitles, AnEmptyKernelNameEndsTheText) {
  using namespace testing;
  std::vector<std::string> ev;
  for (int i = 0; i < 3; ++i) {
    const double t0 = 1000.0 * i;
    ev.push_back(step(i + 1, t0, 1000));
    ev.push_back(launch(t0 + 10, 5, 2 * i));
    ev.push_back(kernel("", 7, t0 + 20, 10, 2 * i));
    ev.push_back(launch(t0 + 600, 5, 2 * i + 1));
    ev.push_back(kernel("add_kernel", 7, t0 + 610, 10, 2 * i + 1));
  }
  Result<Trace> t = read_trace_bytes(doc(ev), "t.json");
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  bool quotes_empty = false;
  for (const Finding& f : d.findings) {
    for (const Evidence::Field& e : f.evidence.fields()) {
      for (const EventRef& r : e.events) quotes_empty = quotes_empty || (r.name.empty() && !f.title.empty());
    }
  }
  EXPECT_TRUE(quotes_empty) << "no finding quotes the unnamed kernel: the test no longer reaches short_title's case";
  const std::string text = format_diagnosis_text(*t, d, {.verbose = true, .max_lines = 400});
  EXPECT_NE(text.find("add_kernel"), std::string::npos) << text;
}

}  // namespace
}  // namespace tprof
