// tprof compare --jobs: two jobs, every rank of each, from their rank
// summaries (docs/compare.md, "Jobs"). The jobs are make_jobs.py's in
// tests/data/ranks: the same 8-rank all-reduce loop, balanced or with one
// planted straggler.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/run_cli.h"
#include "tprof/compare.h"
#include "tprof/read.h"
#include "tprof/ranks.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

const std::string kRanks = std::string(TPROF_TEST_DATA) + "/ranks/";

// Every trace of a job directory summarized and merged, as diagnose DIR does.
JobSummary job(const std::string& name) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(kRanks + name)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<JobSummary> parts;
  for (const std::string& f : files) {
    Result<Trace> t = read_trace(f);
    EXPECT_TRUE(t) << f;
    if (t) parts.push_back({{summarize_rank(*t, fs::path(f).filename().string())}});
  }
  Result<JobSummary> merged = merge_summaries(parts);
  EXPECT_TRUE(merged) << name;
  return merged ? *merged : JobSummary{};
}

const MetricComparison& metric(const JobComparison& j, CompareMetric m) {
  const MetricComparison* x = j.c.metric(m);
  EXPECT_NE(x, nullptr);
  return *x;
}

TEST(CompareJobsTest, AJobAgainstItselfPassesAtZero) {
  const JobSummary a = job("balanced");
  const JobComparison j = compare_jobs(a, a);
  EXPECT_EQ(j.c.alignment, StepAlignment::kStepNumber);
  EXPECT_EQ(j.c.a.dur_ns.size(), 8u);
  EXPECT_EQ(j.c.bound_metric, CompareMetric::kSteady);
  for (const MetricComparison& m : j.c.metrics) {
    EXPECT_TRUE(m.available) << compare_metric_name(m.metric);
    EXPECT_EQ(m.mean_a_ns, m.mean_b_ns);
    EXPECT_EQ(m.low_ns, 0);
    EXPECT_EQ(m.high_ns, 0);
  }
  EXPECT_TRUE(j.c.setup_differences.empty());
  EXPECT_EQ(check_gate(j.c, {.max_slower_pct = 0}).outcome, GateOutcome::kPass);
  ASSERT_EQ(j.ranks.size(), 8u);
  for (const JobRankDelta& r : j.ranks) EXPECT_EQ(r.delta_ns(), 0) << r.rank;
  EXPECT_TRUE(j.a.stragglers.empty());
}

// The job's step is each step's median over ranks; in a synchronous job
// every rank waits for the straggler, so every rank's step grows, and the
// report says which rank made it grow and why.
TEST(CompareJobsTest, AnInputStragglerFailsTheGateAndIsNamedInB) {
  const JobComparison j = compare_jobs(job("balanced"), job("late_input"));
  const MetricComparison& steady = metric(j, CompareMetric::kSteady);
  const MetricComparison& step = metric(j, CompareMetric::kStep);
  // make_jobs.py plants 9 ms of DataLoader on rank 2 in a 7.7 ms step.
  EXPECT_GT(step.delta_pct, 100.0);
  EXPECT_LT(step.delta_pct, 130.0);
  EXPECT_NEAR(steady.delta_pct, step.delta_pct, 1.0);
  EXPECT_TRUE(steady.beyond_noise());
  EXPECT_TRUE(steady.paired);
  const GateResult g = check_gate(j.c, {.max_slower_pct = 5});
  EXPECT_EQ(g.outcome, GateOutcome::kFail) << format_gate_line(g);
  EXPECT_TRUE(j.a.stragglers.empty());
  ASSERT_EQ(j.b.stragglers.size(), 1u);
  EXPECT_EQ(j.b.stragglers[0].rank, 2);
  ASSERT_FALSE(j.b.stragglers[0].before.empty());
  EXPECT_EQ(j.b.stragglers[0].before[0].what, "input");
  // The others wait in the all-reduce: communication is what grew.
  ASSERT_EQ(j.phases.size(), 3u);
  EXPECT_EQ(j.phases[1].phase, "communication");
  EXPECT_GT(j.phases[1].mean_b_ns - j.phases[1].mean_a_ns, 8'000'000);
  EXPECT_LT(std::abs(j.phases[0].mean_b_ns - j.phases[0].mean_a_ns), 100'000);

  const std::string text = format_job_comparison_text(j, {.label_a = "balanced", .label_b = "late_input"}, &g);
  EXPECT_EQ(text.rfind("gate: FAIL: ", 0), 0u) << text;
  EXPECT_NE(text.find("stragglers:   new in B: rank 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("before arriving, input +9.0"), std::string::npos) << text;
  // The critical path across ranks runs through rank 2, mostly its input.
  EXPECT_NE(text.find("B 16.6"), std::string::npos) << text;
  EXPECT_NE(text.find("% of the steps), rank 2 holds 9"), std::string::npos) << text;
  EXPECT_NE(text.find("(most: data_loading 9."), std::string::npos) << text;

  // The fix, the other way round: faster, and the straggler gone.
  const JobComparison back = compare_jobs(job("late_input"), job("balanced"));
  EXPECT_EQ(check_gate(back.c, {.max_slower_pct = 0}).outcome, GateOutcome::kPass);
  EXPECT_NE(format_job_comparison_text(back).find("stragglers:   gone in B: rank 2\n"), std::string::npos);
}

// The steady state per step is in the summary (version 3), right on the
// synthetic ranks' clocks below 0 (compare_test.cc's StepCostIsRightOnAClockBelowZero).
TEST(CompareJobsTest, TheSummaryKeepsEachStepsCompareFigures) {
  const std::string path = kRanks + "balanced/rank-03.json.gz";
  Result<Trace> t = read_trace(path);
  ASSERT_TRUE(t);
  const RankSummary r = summarize_rank(*t, "rank-03.json.gz");
  const Comparison c = compare_traces(*t, *t);
  ASSERT_EQ(r.steps.size(), c.a.steady_ns.size());
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    EXPECT_EQ(r.steps[i].steady_ns, c.a.steady_ns[i]) << "step " << r.steps[i].step;
    EXPECT_EQ(r.steps[i].device_ns, c.a.device_ns[i]);
    EXPECT_EQ(r.steps[i].cpu_ns, c.a.cpu_ns[i]);
  }
  const std::string text = format_rank_summary_json(JobSummary{{r}});
  Result<JobSummary> back = parse_rank_summary_json(text);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->ranks[0].steps[3].steady_ns, r.steps[3].steady_ns);
  EXPECT_EQ(format_rank_summary_json(*back), text);
}

// Summaries from before version 3 have no steady state per step: the job
// comparison falls back to step time, and says why.
TEST(CompareJobsTest, OlderSummariesHaveStepTimeOnly) {
  JobSummary old = job("balanced");
  for (RankSummary& r : old.ranks) {
    for (RankStep& s : r.steps) s.steady_ns = s.device_ns = s.cpu_ns = -1;
    for (RankCollective& c : r.collectives) c.has_path = false;
  }
  // A version-2 file reads so too.
  std::string text = format_rank_summary_json(JobSummary{{old.ranks[0]}});
  text.replace(text.find("\"version\": 5"), 12, "\"version\": 2");
  // Collectives lose their paths (version 5) and sequence numbers (version
  // 4), steps their last three fields (version 3).
  for (std::size_t at; (at = text.find(", 0, 0, 0, 0, 0, 0, -1, -1, 0]")) != std::string::npos;) text.erase(at, 29);
  const std::size_t colls = text.find("\"collectives\": [");
  ASSERT_NE(colls, std::string::npos);
  for (std::size_t at = colls; (at = text.find(", -1]", at)) != std::string::npos && at < text.find("\"collective_fields\"");) {
    text.erase(at, 4);
  }
  for (std::size_t at; (at = text.find(", -1, -1, -1]")) != std::string::npos;) text.erase(at, 12);
  Result<JobSummary> v2 = parse_rank_summary_json(text);
  ASSERT_TRUE(v2) << v2.error().to_string();
  EXPECT_EQ(v2->ranks[0].steps[0].steady_ns, -1);
  EXPECT_EQ(v2->ranks[0].steps[0].dur_ns, old.ranks[0].steps[0].dur_ns);

  const JobComparison j = compare_jobs(old, job("late_input"));
  EXPECT_EQ(j.c.bound_metric, CompareMetric::kStep);
  EXPECT_NE(j.c.bound_reason.find("summarize the traces again"), std::string::npos) << j.c.bound_reason;
  EXPECT_FALSE(metric(j, CompareMetric::kSteady).available);
  EXPECT_TRUE(metric(j, CompareMetric::kStep).available);
  EXPECT_TRUE(j.c.a.steady_ns.empty());
  EXPECT_FALSE(j.c.b.steady_ns.empty());
  EXPECT_EQ(check_gate(j.c, {.max_slower_pct = 5}).outcome, GateOutcome::kFail);
  EXPECT_EQ(check_gate(j.c, {.max_slower_pct = 5, .metric = CompareMetric::kSteady}).outcome, GateOutcome::kRefused);
  EXPECT_EQ(j.rank_metric, CompareMetric::kStep);
}

// Two recorded ranks of an 8-rank job against all eight: not the same
// set-up, so the gate refuses unless told otherwise.
TEST(CompareJobsTest, DifferentRankCountsAreRefused) {
  const JobComparison j = compare_jobs(job("windows"), job("late_before_window"));
  ASSERT_FALSE(j.c.setup_differences.empty());
  EXPECT_EQ(j.c.setup_differences.front(), "ranks: 2 vs 8");
  // Every rank has device work: "devices with work" would say it twice.
  EXPECT_EQ(j.c.setup_differences.size(), 1u);
  EXPECT_EQ(check_gate(j.c, {.max_slower_pct = 5}).outcome, GateOutcome::kRefused);
  EXPECT_NE(check_gate(j.c, {.max_slower_pct = 5, .allow_mismatch = true}).outcome, GateOutcome::kRefused);
  // The windows' step numbers (10, 12, ...) are not late_before_window's.
  EXPECT_EQ(j.c.alignment, StepAlignment::kOrder);
  // Ranks on one side only are listed after the common ones.
  ASSERT_EQ(j.ranks.size(), 8u);
  EXPECT_EQ(j.ranks.back().change, ChangeKind::kNew);
}

// Ranks without ProfilerStep events: each job is one whole "step", the
// median over its ranks of their spans.
TEST(CompareJobsTest, JobsWithoutStepsCompareTheirSpans) {
  const auto rank = [](std::int64_t n, std::int64_t span) {
    RankSummary r;
    r.rank = n;
    r.source = "rank-" + std::to_string(n) + ".json";
    r.verdict = Verdict::kComputeBound;
    r.has_device = true;
    r.start_ns = 1'000;
    r.end_ns = 1'000 + span;
    return r;
  };
  const JobSummary a{{rank(0, 100'000), rank(1, 102'000), rank(2, 98'000)}};
  const JobSummary b{{rank(0, 150'000), rank(1, 151'000), rank(2, 300'000)}};
  const JobComparison j = compare_jobs(a, b);
  EXPECT_EQ(j.c.alignment, StepAlignment::kWholeTrace);
  EXPECT_EQ(j.c.bound_metric, CompareMetric::kStep);
  const MetricComparison& step = metric(j, CompareMetric::kStep);
  EXPECT_EQ(step.mean_a_ns, 100'000);
  EXPECT_EQ(step.mean_b_ns, 151'000);
  EXPECT_FALSE(step.has_interval);
  EXPECT_FALSE(metric(j, CompareMetric::kSteady).available);
  ASSERT_EQ(j.ranks.size(), 3u);
  EXPECT_EQ(j.ranks[0].rank, 2);
  EXPECT_EQ(j.ranks[0].delta_ns(), 202'000);
  EXPECT_NE(format_job_comparison_text(j).find("whole traces compared (neither job's ranks have"), std::string::npos);
}

// The CLI: a summary file is a job as its directory is; without --jobs a
// directory of ranks says how to compare jobs; the JSON parses.
TEST(CompareJobsTest, CliReadsDirectoriesAndSummaryFiles) {
  const fs::path dir = fs::path(::testing::TempDir()) / "compare_jobs_cli";
  fs::create_directories(dir);
  const std::string summary = (dir / "late_input.summary.json").string();
  std::vector<std::string> merge = {"-q", "merge", "--format", "summary", "-o", summary};
  for (const auto& e : fs::directory_iterator(kRanks + "late_input")) {
    const std::string s = (dir / (e.path().filename().string() + ".summary.json")).string();
    ASSERT_EQ(testing::run_cli(TPROF_BIN, {"-q", "summarize", e.path().string(), "-o", s}).exit_code, 0);
    merge.push_back(s);
  }
  ASSERT_EQ(testing::run_cli(TPROF_BIN, merge).exit_code, 0);

  const testing::CliResult from_dir =
      testing::run_cli(TPROF_BIN, {"-q", "compare", "--jobs", kRanks + "balanced", kRanks + "late_input"});
  const testing::CliResult from_file =
      testing::run_cli(TPROF_BIN, {"-q", "compare", "--jobs", kRanks + "balanced", summary});
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  std::string expected = from_dir.out;
  const std::string label = kRanks + "late_input";
  expected.replace(expected.find(label), label.size(), summary);
  EXPECT_EQ(from_file.out, expected);

  const testing::CliResult no_flag =
      testing::run_cli(TPROF_BIN, {"-q", "compare", kRanks + "balanced", kRanks + "late_input"});
  EXPECT_EQ(no_flag.exit_code, 2);
  EXPECT_NE(no_flag.err.find("compare two jobs with --jobs"), std::string::npos) << no_flag.err;
  EXPECT_TRUE(no_flag.out.empty());

  const testing::CliResult trace = testing::run_cli(
      TPROF_BIN, {"-q", "compare", "--jobs", kRanks + "balanced/rank-00.json.gz", kRanks + "late_input"});
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_NE(trace.err.find("--jobs takes a directory of one job's rank traces, or its summary file"),
            std::string::npos)
      << trace.err;
}

// The page (--format html; tprof report A_DIR B_DIR): every rank's A and B
// as the comparison has them, the phases, the gate, what each view says,
// the whole text view; nothing fetched. The CLI's two ways print the same
// bytes; a directory and a trace are refused.
TEST(CompareJobsTest, ThePageHoldsEveryRankAndTheTextView) {
  const JobComparison j = compare_jobs(job("balanced"), job("late_compute"));
  const GateResult g = check_gate(j.c, {.max_slower_pct = 5.0});
  const CompareFormat f{.label_a = "balanced", .label_b = "late_compute"};
  const std::string html = format_job_comparison_html(j, f, &g);
  ASSERT_TRUE(html.starts_with("<!doctype html>"));
  EXPECT_TRUE(html.ends_with("</body></html>\n"));
  EXPECT_EQ(html.find("http"), std::string::npos) << "the page fetches nothing";
  EXPECT_NE(html.find("<p id=\"gate\" data-outcome=\"refused\">"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"ranks\" data-ranks=\"16\""), std::string::npos);
  // One row per rank, with the comparison's means: 8 in both, 8 new in B.
  std::size_t rows = 0, added = 0;
  for (const JobRankDelta& r : j.ranks) {
    const std::string row = "<div class=\"rank-row\" data-rank=\"" + std::to_string(r.rank) + "\" data-change=\"" +
                            (r.change == ChangeKind::kNew ? "new" : "common") + "\" data-a-ns=\"" +
                            std::to_string(r.mean_a_ns) + "\" data-b-ns=\"" + std::to_string(r.mean_b_ns) + "\">";
    EXPECT_NE(html.find(row), std::string::npos) << row;
    ++rows;
    added += r.change == ChangeKind::kNew ? 1 : 0;
  }
  EXPECT_EQ(rows, 16u);
  EXPECT_EQ(added, 8u);
  for (const JobPhaseDelta& p : j.phases) {
    EXPECT_NE(html.find("data-phase=\"" + p.phase + "\" data-a-ns=\"" + std::to_string(p.mean_a_ns) + "\" data-b-ns=\"" +
                        std::to_string(p.mean_b_ns) + "\""),
              std::string::npos)
        << p.phase;
  }
  EXPECT_NE(html.find("data-stragglers-a=\"0\" data-stragglers-b=\"1\""), std::string::npos);
  EXPECT_NE(html.find("new in B: rank 11"), std::string::npos);
  // The text view, every rank listed (its top is lifted on the page).
  std::string text = format_job_comparison_text(j, {.label_a = "balanced", .label_b = "late_compute", .top = 0}, &g);
  for (const auto& [from, to] : {std::pair{"&", "&amp;"}, std::pair{"<", "&lt;"}, std::pair{">", "&gt;"},
                                 std::pair{"\"", "&quot;"}, std::pair{"'", "&#39;"}}) {
    for (std::size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + std::string(to).size())) {
      text.replace(p, std::string(from).size(), to);
    }
  }
  EXPECT_NE(html.find("<pre>" + text + "</pre>"), std::string::npos);

  // A job against itself: every change 0 (the page once cut its class from
  // an empty string there; found by tests/fuzz/summary_fuzzer.cc).
  const std::string same = format_job_comparison_html(compare_jobs(job("balanced"), job("balanced")));
  EXPECT_NE(same.find("<div class=\"same\">A "), std::string::npos);
  EXPECT_NE(same.find("<div class=\"rank-stats same\">A "), std::string::npos);

  const testing::CliResult page = testing::run_cli(
      TPROF_BIN, {"-q", "compare", "--jobs", kRanks + "balanced", kRanks + "late_input", "--format", "html"});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  const fs::path out = fs::path(::testing::TempDir()) / "compare_jobs_page.html";
  const testing::CliResult report = testing::run_cli(
      TPROF_BIN, {"-q", "report", kRanks + "balanced", kRanks + "late_input", "-o", out.string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  std::ifstream in(out);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, page.out);

  const fs::path none = fs::path(::testing::TempDir()) / "compare_jobs_none.html";
  const testing::CliResult mixed = testing::run_cli(
      TPROF_BIN, {"-q", "report", kRanks + "balanced", kRanks + "late_input/rank-00.json.gz", "-o", none.string()});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("two traces or two job directories"), std::string::npos) << mixed.err;
  EXPECT_FALSE(fs::exists(none));
  const testing::CliResult traces = testing::run_cli(
      TPROF_BIN, {"-q", "compare", kRanks + "balanced/rank-00.json.gz", kRanks + "late_input/rank-00.json.gz",
                  "--format", "html"});
  EXPECT_EQ(traces.exit_code, 2);
  EXPECT_NE(traces.err.find("--format html is for two jobs"), std::string::npos) << traces.err;
}

}  // namespace
}  // namespace tprof
