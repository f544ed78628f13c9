// Many ranks (tprof/ranks.h): merge is order-independent and associative,
// a summary survives its file, `tprof merge` of `tprof summarize` outputs
// is byte for byte `tprof diagnose DIR`, a rank twice slower in compute is
// named a straggler in "computation", and bad inputs exit 2.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/kineto_events.h"
#include "tests/support/run_cli.h"
#include "tprof/read.h"
#include "tprof/ranks.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using testing::doc;
using testing::kernel;
using testing::launch;
using testing::step;

const std::string kDir = std::string(TPROF_TEST_DATA) + "/public/hta/trace_filter";

RankSummary summarize_file(const std::string& path) {
  Result<Trace> t = read_trace(path);
  EXPECT_TRUE(t) << path;
  return summarize_rank(*t, fs::path(path).filename().string());
}

// A rank of four steps of `step_us`, each with one compute kernel of `kernel_us`.
RankSummary synthetic_rank(int rank, double step_us, double kernel_us) {
  std::vector<std::string> ev;
  for (int n = 0; n < 4; ++n) {
    const double t0 = 1000 + n * step_us;
    ev.push_back(step(n, t0, step_us));
    ev.push_back(launch(t0 + 10, 5, 100 + n));
    ev.push_back(kernel("gemm_kernel", 7, t0 + 50 + rank, kernel_us, 100 + n));
  }
  Result<Trace> t = read_trace_bytes(doc(ev, R"("distributedInfo": {"rank": )" + std::to_string(rank) + "}"));
  EXPECT_TRUE(t);
  return summarize_rank(*t, "rank-" + std::to_string(rank) + ".json");
}

std::string view_json(const std::vector<JobSummary>& parts) {
  Result<JobSummary> job = merge_summaries(parts);
  EXPECT_TRUE(job);
  return job ? format_job_json(compute_job_view(*job)) : std::string();
}

TEST(RanksTest, SummaryFileRoundTrips) {
  const JobSummary a{{summarize_file(kDir + "/sampled_rank-0.json.gz")}};
  EXPECT_EQ(a.ranks[0].rank, 0);
  EXPECT_FALSE(a.ranks[0].steps.empty());
  EXPECT_GT(a.ranks[0].comm_ns, 0);
  const std::string text = format_rank_summary_json(a);
  Result<JobSummary> back = parse_rank_summary_json(text);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(format_rank_summary_json(*back), text);
}

TEST(RanksTest, MergeIsOrderIndependentAndAssociative) {
  const JobSummary a{{summarize_file(kDir + "/sampled_rank-0.json.gz")}};
  const JobSummary b{{summarize_file(kDir + "/sampled_rank-1.json.gz")}};
  const JobSummary c{{synthetic_rank(2, 10000, 6000)}};
  EXPECT_EQ(view_json({a, b}), view_json({b, a}));
  const std::string abc = view_json({a, b, c});
  EXPECT_EQ(view_json({c, a, b}), abc);
  // merge(merge(A, B), C) == merge(A, merge(B, C)) == merge(A, B, C), through the files.
  auto through_file = [](const std::vector<JobSummary>& parts) {
    Result<JobSummary> m = merge_summaries(parts);
    EXPECT_TRUE(m);
    Result<JobSummary> back = parse_rank_summary_json(format_rank_summary_json(*m));
    EXPECT_TRUE(back);
    return *back;
  };
  EXPECT_EQ(view_json({through_file({a, b}), c}), abc);
  EXPECT_EQ(view_json({a, through_file({b, c})}), abc);
}

TEST(RanksTest, DuplicateRankIsAnError) {
  const JobSummary a{{synthetic_rank(1, 10000, 6000)}};
  Result<JobSummary> m = merge_summaries({a, a});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("rank 1 appears twice"), std::string::npos);
}

TEST(RanksTest, TwiceSlowerComputeIsAStragglerInComputation) {
  std::vector<JobSummary> parts;
  for (int r = 0; r < 4; ++r) parts.push_back({{synthetic_rank(r, 10000, 6000)}});
  parts.push_back({{synthetic_rank(4, 16000, 12000)}});  // the same idle, twice the compute
  Result<JobSummary> job = merge_summaries(parts);
  ASSERT_TRUE(job);
  const JobView v = compute_job_view(*job);
  ASSERT_EQ(v.ranks.size(), 5u);
  EXPECT_EQ(v.median_step_ns, 10'000'000);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].rank, 4);
  EXPECT_EQ(v.stragglers[0].phase, "computation");
  EXPECT_EQ(v.stragglers[0].excess_ns, 6'000'000);
  EXPECT_NEAR(v.stragglers[0].phase_excess_ns, 6'000'000, 10'000);
  EXPECT_DOUBLE_EQ(v.stragglers[0].excess_pct, 60.0);
}

TEST(RanksTest, EqualRanksHaveNoStraggler) {
  std::vector<JobSummary> parts;
  for (int r = 0; r < 8; ++r) parts.push_back({{synthetic_rank(r, 10000 + 10 * r, 6000)}});
  Result<JobSummary> job = merge_summaries(parts);
  ASSERT_TRUE(job);
  EXPECT_TRUE(compute_job_view(*job).stragglers.empty());
}

TEST(RanksTest, ForeignSummaryIsAClearError) {
  Result<JobSummary> r = parse_rank_summary_json(R"({"traceEvents": []})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("not a tprof rank summary"), std::string::npos);
  r = parse_rank_summary_json(R"({"format": "tprof.rank_summary", "version": 99, "ranks": []})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("version 99"), std::string::npos);
  r = parse_rank_summary_json(R"({"format": "tprof.rank_summary", "version": 1, "ranks": [{"rank": 0}]})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("\"source\""), std::string::npos);
}

// The CLI: merge of summarize outputs == diagnose DIR, in every format.
TEST(RanksTest, MergeOfSummariesEqualsDiagnoseDir) {
  const fs::path tmp = fs::temp_directory_path() / ("tprof_ranks_test_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::vector<std::string> summaries;
  for (const char* name : {"sampled_rank-1.json.gz", "sampled_rank-0.json.gz"}) {
    const std::string out = (tmp / (std::string(name) + ".summary.json")).string();
    const testing::CliResult r = testing::run_cli(TPROF_BIN, {"-q", "summarize", kDir + "/" + name, "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    summaries.push_back(out);
  }
  for (const char* format : {"json", "text", "md"}) {
    const testing::CliResult dir = testing::run_cli(TPROF_BIN, {"-q", "diagnose", kDir, "--format", format});
    ASSERT_EQ(dir.exit_code, 0) << dir.err;
    std::vector<std::string> args = {"-q", "merge", "--format", format};
    args.insert(args.end(), summaries.begin(), summaries.end());
    const testing::CliResult merged = testing::run_cli(TPROF_BIN, args);
    ASSERT_EQ(merged.exit_code, 0) << merged.err;
    EXPECT_EQ(merged.out, dir.out) << format;
  }
  // A foreign file among the summaries, an empty directory: exit 2 with a line saying why.
  const std::string foreign = (tmp / "foreign.json").string();
  std::ofstream(foreign) << R"({"traceEvents": []})";
  const testing::CliResult bad = testing::run_cli(TPROF_BIN, {"merge", summaries[0], foreign});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not a tprof rank summary"), std::string::npos) << bad.err;
  const fs::path empty = tmp / "empty";
  fs::create_directories(empty);
  const testing::CliResult none = testing::run_cli(TPROF_BIN, {"diagnose", empty.string()});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no trace in the directory"), std::string::npos) << none.err;
  const fs::path broken = tmp / "broken";
  fs::create_directories(broken);
  std::ofstream((broken / "rank-0.json").string()) << "{\"traceEvents\": [ {\"ph\": ";
  std::ofstream((broken / "rank-1.json").string()) << "not json at all";
  const testing::CliResult unreadable = testing::run_cli(TPROF_BIN, {"diagnose", broken.string()});
  EXPECT_EQ(unreadable.exit_code, 2);
  EXPECT_NE(unreadable.err.find("rank-1.json"), std::string::npos) << unreadable.err;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace tprof
