// Many ranks (tprof/ranks.h): merge is order-independent and associative,
// a summary survives its file, `tprof merge` of `tprof summarize` outputs
// is byte for byte `tprof diagnose DIR`, the rank that arrives last at the
// collectives is named a straggler with what it did before arriving (the
// synthetic jobs of tests/data/ranks/, whatever the ranks' clocks), a rank
// twice slower in compute is a slow rank, one process's windows are one rank
// (two processes claiming a rank are an error), tprof report DIR's page
// carries the bars and escapes names, and bad inputs exit 2.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
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
using testing::corr;
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
  // Two different summaries of one rank and file name (the summary
  // fuzzer's find: they sorted by input order, so merging depended on the
  // order of the parts): an error either way round.
  JobSummary b = a;
  b.ranks[0].steps[0].dur_ns += 1;
  b.ranks[0].steps[0].idle_ns += 1;
  for (const auto& parts : {std::vector<JobSummary>{a, b}, std::vector<JobSummary>{b, a}}) {
    m = merge_summaries(parts);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().message(),
              "rank 1 appears twice from rank-1.json (the same trace summarized twice, or the traces of two jobs)");
  }
}

TEST(RanksTest, TwiceSlowerComputeIsASlowRankInComputation) {
  std::vector<JobSummary> parts;
  for (int r = 0; r < 4; ++r) parts.push_back({{synthetic_rank(r, 10000, 6000)}});
  parts.push_back({{synthetic_rank(4, 16000, 12000)}});  // the same idle, twice the compute
  Result<JobSummary> job = merge_summaries(parts);
  ASSERT_TRUE(job);
  const JobView v = compute_job_view(*job);
  ASSERT_EQ(v.ranks.size(), 5u);
  EXPECT_EQ(v.median_step_ns, 10'000'000);
  ASSERT_EQ(v.slow_ranks.size(), 1u);
  EXPECT_EQ(v.slow_ranks[0].rank, 4);
  EXPECT_EQ(v.slow_ranks[0].phase, "computation");
  EXPECT_EQ(v.slow_ranks[0].excess_ns, 6'000'000);
  EXPECT_NEAR(v.slow_ranks[0].phase_excess_ns, 6'000'000, 10'000);
  EXPECT_DOUBLE_EQ(v.slow_ranks[0].excess_pct, 60.0);
  // No collective kernels: nothing to judge stragglers by, and it says so.
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_FALSE(v.latest);
  EXPECT_EQ(v.alignment.note, "fewer than 2 ranks have collective kernels");
}

TEST(RanksTest, EqualRanksHaveNoSlowRank) {
  std::vector<JobSummary> parts;
  for (int r = 0; r < 8; ++r) parts.push_back({{synthetic_rank(r, 10000 + 10 * r, 6000)}});
  Result<JobSummary> job = merge_summaries(parts);
  ASSERT_TRUE(job);
  EXPECT_TRUE(compute_job_view(*job).slow_ranks.empty());
}

// Every rank of a job in tests/data/ranks/ (make_jobs.py), summarized.
std::vector<JobSummary> job_parts(const std::string& name) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(TPROF_TEST_DATA) + "/ranks/" + name)) {
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<JobSummary> parts;
  for (const std::string& f : files) parts.push_back({{summarize_file(f)}});
  return parts;
}

JobView job_view(const std::vector<JobSummary>& parts) {
  Result<JobSummary> job = merge_summaries(parts);
  EXPECT_TRUE(job);
  return job ? compute_job_view(*job) : JobView{};
}

// The planted late rank is named, with the cause planted before its
// arrival, and every other rank's verdict is waiting for it.
void expect_straggler(const JobView& v, std::int64_t rank, const std::string& cause, const std::string& top,
                      const std::string& collective, double min_pct) {
  ASSERT_EQ(v.stragglers.size(), 1u);
  const Straggler& s = v.stragglers[0];
  EXPECT_TRUE(s.named);
  EXPECT_EQ(s.rank, rank);
  EXPECT_EQ(s.last_at, 8);
  EXPECT_EQ(s.collectives, 8);
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(s.compared, 8);
  EXPECT_EQ(s.collective, collective);
  EXPECT_GE(s.wait_pct, min_pct);
  ASSERT_FALSE(s.before.empty());
  EXPECT_EQ(s.before[0].what, cause);
  EXPECT_EQ(s.before[0].top, top);
  // Only the planted cause is named: jitter of a few µs is none.
  EXPECT_EQ(s.before.size(), 1u);
  EXPECT_NE(s.advice.find("overlapping their communication with compute will not help"), std::string::npos);
  EXPECT_FALSE(v.latest);
  EXPECT_EQ(v.alignment.ranks_aligned, static_cast<std::int64_t>(v.ranks.size()));
  EXPECT_EQ(v.alignment.unmatched, 0);
  for (const RankRow& r : v.ranks) {
    if (r.rank == rank) {
      EXPECT_FALSE(r.waiting_for) << r.rank;
      EXPECT_EQ(r.last_at, 8);
      continue;
    }
    ASSERT_TRUE(r.waiting_for) << r.rank;
    EXPECT_EQ(r.waiting_for->rank, rank);
    EXPECT_EQ(r.waiting_for->collective, collective);
    EXPECT_EQ(r.last_at, 0) << r.rank;
  }
}

constexpr const char* kGemm = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn";
constexpr const char* kLoader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

TEST(RanksStragglerTest, LateComputeIsNamedWithItsKernel) {
  expect_straggler(job_view(job_parts("late_compute")), 11, "computation", kGemm,
                   "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50.0);
}

TEST(RanksStragglerTest, LateHostIsNamedWithTheHostEvent) {
  expect_straggler(job_view(job_parts("late_host")), 6, "host", "log_metrics", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                   50.0);
}

// Old Kineto: no process group on the kernels, matched by stream.
TEST(RanksStragglerTest, LateInputIsNamedWithTheDataLoader) {
  const JobView v = job_view(job_parts("late_input"));
  expect_straggler(v, 2, "input", kLoader, "ncclKernel_AllReduce_RING_LL_Sum_float", 45.0);
  ASSERT_FALSE(v.stragglers.empty());
  EXPECT_EQ(v.stragglers[0].on, "stream 20");
}

TEST(RanksStragglerTest, BalancedJobHasNone) {
  const JobView v = job_view(job_parts("balanced"));
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_EQ(v.alignment.matched, 8);
  EXPECT_EQ(v.alignment.ranks_aligned, 8);
  for (const RankRow& r : v.ranks) EXPECT_FALSE(r.waiting_for) << r.rank;
  if (v.latest) {
    EXPECT_LT(v.latest->wait_pct, 5.0);
  }
}

// Late at 2 steps of 8: no straggler, but the rank the others wait for
// most is rank 4, computing longer, and the waiting ranks say so.
TEST(RanksStragglerTest, LateAtSomeStepsIsNoStragglerButIsNamed) {
  const JobView v = job_view(job_parts("late_some"));
  EXPECT_TRUE(v.stragglers.empty());
  ASSERT_TRUE(v.latest);
  EXPECT_FALSE(v.latest->named);
  EXPECT_EQ(v.latest->rank, 4);
  EXPECT_LT(v.latest->last_at * 2, v.latest->collectives);
  ASSERT_FALSE(v.latest->before.empty());
  EXPECT_EQ(v.latest->before[0].what, "computation");
  // Late at 3 of 8 only: the others do not wait for it at most steps, so
  // no rank's verdict becomes "waiting for rank 4" (the review pass rejected
  // that reading).
  for (const RankRow& r : v.ranks) EXPECT_FALSE(r.waiting_for) << r.rank;
}

// Clocks: the ranks' clocks are seconds apart in the traces already; moving
// the straggler's and another rank's by more (either way) changes nothing.
TEST(RanksStragglerTest, ClockOffsetsDoNotMatter) {
  std::vector<JobSummary> parts = job_parts("late_compute");
  const std::string before = format_job_json(job_view(parts));
  for (auto& [rank, shift] : {std::pair{11, -3'600'000'000'000LL}, std::pair{3, 42'000'000'000LL}}) {
    for (RankCollective& c : parts[static_cast<std::size_t>(rank)].ranks[0].collectives) {
      c.start_ns += shift;
      c.end_ns += shift;
    }
  }
  const JobView v = job_view(parts);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].rank, 11);
  // Everything but the offsets found is the same.
  JobView was = job_view(job_parts("late_compute"));
  was.alignment.max_offset_ns = v.alignment.max_offset_ns;
  was.alignment.max_offset_rank = v.alignment.max_offset_rank;
  EXPECT_EQ(format_job_json(v), format_job_json(was));
  EXPECT_NE(format_job_json(v), before);
}

// Current PyTorch numbers each collective in its process group ("Seq"), the
// same on every rank. lost_kernels: DDP-style buckets 150 µs apart; rank 5's
// trace lacks one bucket's kernel in 5 steps of 8 (CUPTI dropped them).
// Matched by sequence number, every kernel is its own collective: rank 5 is
// in 43 and never last. Numbered by order within the step (the sequence
// numbers taken away, as in older traces), rank 5's later buckets pair with
// the others' earlier ones, whose ends are within the 1 ms ends are matched
// by: rank 5 becomes the rank the others wait for most, its collectives
// ending before it arrives.
TEST(RanksSeqTest, LostKernelsAreMatchedBySequenceNumber) {
  std::vector<JobSummary> parts = job_parts("lost_kernels");
  for (const JobSummary& p : parts) {
    for (const RankCollective& c : p.ranks[0].collectives) EXPECT_GE(c.seq, 41);
  }
  const JobView v = job_view(parts);
  EXPECT_EQ(v.alignment.matched, 48);
  EXPECT_EQ(v.alignment.matched_by_seq, 48);
  EXPECT_EQ(v.alignment.unmatched, 0);
  EXPECT_TRUE(v.stragglers.empty());
  for (const RankRow& r : v.ranks) {
    EXPECT_EQ(r.collectives, r.rank == 5 ? 43 : 48) << r.rank;
    if (r.rank == 5) EXPECT_EQ(r.last_at, 0);
  }
  ASSERT_TRUE(v.latest);
  EXPECT_NE(v.latest->rank, 5);
  EXPECT_GT(v.latest->after_arrival_ns, 0);
  EXPECT_NE(format_job_text(v).find("by process group and sequence number"), std::string::npos);

  // Two kernels of one sequence number on a rank (one collective, two
  // kernels): the second is numbered by order; the collective still has
  // one arrival of that rank.
  {
    std::vector<JobSummary> twice = parts;
    std::vector<RankCollective>& cs = twice[3].ranks[0].collectives;
    RankCollective twin = cs[10];
    twin.start_ns += 1'000;
    twin.end_ns += 1'000;
    cs.insert(cs.begin() + 11, twin);
    const JobView t = job_view(twice);
    EXPECT_EQ(t.alignment.matched_by_seq, 48);
    for (const RankRow& r : t.ranks) {
      if (r.rank == 3) EXPECT_EQ(r.collectives, 48);
    }
  }

  for (JobSummary& p : parts) {
    for (RankCollective& c : p.ranks[0].collectives) c.seq = -1;
  }
  const JobView by_order = job_view(parts);
  EXPECT_EQ(by_order.alignment.matched_by_seq, 0);
  ASSERT_TRUE(by_order.latest);
  EXPECT_EQ(by_order.latest->rank, 5);
  EXPECT_LT(by_order.latest->after_arrival_ns, 0);
}

// A group's size comes from its collectives' "Group size": where some of
// its ranks are untraced, the straggler's line says an untraced one may
// arrive later still (9 of late_compute's 16 ranks); where all are traced,
// nothing (all 16).
TEST(RanksGroupSizeTest, AGroupWithUntracedRanksSaysSo) {
  std::vector<JobSummary> all = job_parts("late_compute");
  for (const JobSummary& p : all) EXPECT_EQ(p.ranks[0].collective_groups.at(0).size, 16);
  const JobView full = job_view(all);
  ASSERT_EQ(full.stragglers.size(), 1u);
  EXPECT_EQ(full.stragglers[0].group_size, 16);
  EXPECT_EQ(full.stragglers[0].ranks, 16);
  EXPECT_EQ(format_job_text(full).find("untraced one may arrive later"), std::string::npos);
  std::vector<JobSummary> some;
  for (const JobSummary& p : all) {
    if (p.ranks[0].rank < 8 || p.ranks[0].rank == 11) some.push_back(p);
  }
  const JobView v = job_view(some);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].rank, 11);
  EXPECT_EQ(v.stragglers[0].group_size, 16);
  EXPECT_EQ(v.stragglers[0].ranks, 9);
  EXPECT_NE(format_job_text(v).find("(9 traced ranks each, of its group's 16: an untraced one may arrive later still)"),
            std::string::npos)
      << format_job_text(v);
}

// Where the kernel has no "Seq" the record_param_comms op around its launch
// gives it (and its process group); a send's or receive's is dropped (it
// counts that rank's point-to-point operations only); a kernel launched
// before the window takes the process group of its stream's other kernels.
TEST(RanksSeqTest, SeqFromTheOpAroundTheLaunchNotForPointToPoint) {
  using testing::x;
  const std::string nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  const std::string send = "ncclDevKernel_SendRecv";
  const std::vector<std::string> ev = {
      step(3, 0, 1000),
      kernel(nccl, 20, 1, 5, 90),  // launched before the window
      x("cpu_op", "record_param_comms", 1, 1, 10, 20,
        R"("Process Group Name": "tp0", "Collective name": "allreduce", "Seq": 7)"),
      launch(12, 5, 1),
      kernel(nccl, 20, 40, 10, 1),
      x("cpu_op", "record_param_comms", 1, 1, 100, 20,
        R"("Process Group Name": "tp0", "Collective name": "send", "Dst Rank": 1, "Seq": 3)"),
      launch(102, 5, 2),
      kernel(send, 20, 140, 10, 2),
      launch(202, 5, 3),
      x("kernel", nccl, 0, 21, 240, 10, corr(3) + R"(, "Process Group Name": "dp0", "Seq": 12)"),
  };
  Result<Trace> t = read_trace_bytes(doc(ev, R"("distributedInfo": {"rank": 0})"));
  ASSERT_TRUE(t) << t.error().to_string();
  const RankSummary r = summarize_rank(*t, "r.json");
  ASSERT_EQ(r.collectives.size(), 4u);
  std::vector<std::pair<std::string, std::int64_t>> got;
  for (const RankCollective& c : r.collectives) {
    got.emplace_back(r.collective_groups[static_cast<std::size_t>(c.group)].on, c.seq);
  }
  const std::vector<std::pair<std::string, std::int64_t>> want = {
      {"pg tp0", -1}, {"pg tp0", 7}, {"pg tp0", -1}, {"pg dp0", 12}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.collective_groups.at(0).size, -1);  // no "Group size" anywhere
  // The summary keeps them (version 4); a version-3 row has no "seq".
  const std::string text = format_rank_summary_json(JobSummary{{r}});
  Result<JobSummary> back = parse_rank_summary_json(text);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->ranks[0].collectives[3].seq, 12);
  std::string v3 = text;
  v3.replace(v3.find("\"version\": 5"), 12, "\"version\": 3");
  back = parse_rank_summary_json(v3);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message().find("not an array of 14 integers"), std::string::npos) << back.error().message();
  // The seq field (the 15th) of the dp0 collective.
  const std::string low = std::regex_replace(text, std::regex(R"((\[(-?\d+, ){14})12, )"), "$1-2, ");
  ASSERT_NE(low, text);
  back = parse_rank_summary_json(low);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message().find("\"seq\" is below -1"), std::string::npos) << back.error().message();
  std::string bad_size = text;
  bad_size.replace(bad_size.find("\"size\": -1"), 11, "\"size\": -3");
  back = parse_rank_summary_json(bad_size);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message().find("\"size\" is not an integer of -1 or more"), std::string::npos)
      << back.error().message();
}

// The 2-rank HTA pair of a 128-rank job: rank 1 arrives last at 4 of the 5
// collectives whose ends agree (one matched by its end: rank 0 has one
// send/receive more before it), 3 of 3 of them the SendRecv kernels of
// stream 84, the group it is judged in (issue 39: per group), but the wait
// is 2.6% of a step and 3 of 3 between two ranks is 1 in 8 by chance: no
// straggler.
TEST(RanksStragglerTest, HtaPairHasNoStraggler) {
  const JobView v = job_view({{{summarize_file(kDir + "/sampled_rank-0.json.gz")}},
                              {{summarize_file(kDir + "/sampled_rank-1.json.gz")}}});
  EXPECT_EQ(v.world_size, 128);
  EXPECT_EQ(v.alignment.ranks_aligned, 2);
  EXPECT_EQ(v.alignment.matched, 5);
  EXPECT_EQ(v.alignment.unmatched, 10);
  EXPECT_TRUE(v.stragglers.empty());
  ASSERT_TRUE(v.latest);
  EXPECT_EQ(v.latest->rank, 1);
  EXPECT_EQ(v.latest->last_at, 3);
  EXPECT_EQ(v.latest->collectives, 3);
  EXPECT_EQ(v.latest->last_on, "stream 84");
  EXPECT_DOUBLE_EQ(v.latest->chance, 0.125);
  // Rank 0's send/receives to untraced peers sit between the matched ones:
  // only one late collective's stretch starts together on both ranks.
  EXPECT_EQ(v.latest->compared, 1);
  EXPECT_LT(v.latest->wait_pct, 5.0);
  for (const RankRow& r : v.ranks) EXPECT_FALSE(r.waiting_for) << r.rank;
}

// A version-1 summary (no collectives) still merges; the view says why it
// cannot judge stragglers. A collective pointing outside the tables is an error.
TEST(RanksStragglerTest, SummaryVersionsAndBadCollectives) {
  Result<JobSummary> old = parse_rank_summary_json(
      R"({"format": "tprof.rank_summary", "version": 1, "ranks": [)"
      R"({"rank": 0, "source": "a.json", "verdict": "compute-bound", "has_device": true, "steps": [],)"
      R"( "hta_comm_comp_overlap": {"overlap_ns": 0, "comm_ns": 0}, "hta_kernel_types": []},)"
      R"({"rank": 1, "source": "b.json", "verdict": "compute-bound", "has_device": true, "steps": [],)"
      R"( "hta_comm_comp_overlap": {"overlap_ns": 0, "comm_ns": 0}, "hta_kernel_types": []}]})");
  ASSERT_TRUE(old) << old.error().to_string();
  EXPECT_FALSE(old->ranks[0].has_collectives);
  const JobView v = compute_job_view(*old);
  EXPECT_NE(v.alignment.note.find("summarize the traces again"), std::string::npos) << v.alignment.note;

  const JobSummary late{{summarize_file(std::string(TPROF_TEST_DATA) + "/ranks/late_host/rank-06.json.gz")}};
  std::string text = format_rank_summary_json(late);
  Result<JobSummary> back = parse_rank_summary_json(text);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->ranks[0].collectives.size(), 8u);
  EXPECT_EQ(format_rank_summary_json(*back), text);
  const std::size_t at = text.find("\"collectives\": [");
  ASSERT_NE(at, std::string::npos);
  const std::size_t first = text.find("[0,", at);
  ASSERT_NE(first, std::string::npos);
  text.replace(first, 3, "[7,");
  back = parse_rank_summary_json(text);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message().find("not an index into \"collective_groups\""), std::string::npos)
      << back.error().message();
}

// Version 5 keeps each stretch along the rank's critical path: its parts
// sum to the stretch exactly (a summary where they do not is refused), and
// a version-4 collective (15 fields) has none.
TEST(RanksStragglerTest, SummaryPathFieldsSumToTheStretch) {
  const JobSummary late{{summarize_file(std::string(TPROF_TEST_DATA) + "/ranks/late_host/rank-06.json.gz")}};
  for (const RankCollective& c : late.ranks[0].collectives) {
    ASSERT_TRUE(c.has_path);
    std::int64_t sum = c.path_unexplained_ns;
    for (const std::int64_t ns : c.path_ns) sum += ns;
    EXPECT_EQ(sum, c.before_ns);
    ASSERT_GE(c.path_top, 0);
    EXPECT_EQ(late.ranks[0].names[static_cast<std::size_t>(c.path_top)], "log_metrics");
  }
  const std::string text = format_rank_summary_json(late);
  // The first collective's line: 24 integers; its cpu_bound part (field 15) one more.
  const std::size_t line = text.find("[", text.find("\"collectives\": ["));
  const std::size_t end = text.find("]", line);
  std::vector<std::string> f;
  for (std::size_t a = line + 1; a < end;) {
    const std::size_t b = std::min(text.find(',', a), end);
    f.push_back(text.substr(a, b - a));
    a = b + 1;
  }
  ASSERT_EQ(f.size(), 24u);
  std::string bad = text;
  std::string fields;
  for (std::size_t i = 0; i < f.size(); ++i) fields += (i ? "," : "") + (i == 15 ? std::to_string(std::stoll(f[i]) + 1) : f[i]);
  bad.replace(line + 1, end - line - 1, fields);
  Result<JobSummary> back = parse_rank_summary_json(bad);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message().find("the path's parts do not sum to \"before_ns\""), std::string::npos)
      << back.error().message();
  // Version 4: every collective's first 15 fields, no path; a 24-field
  // line is refused there.
  std::string v4 = std::regex_replace(text, std::regex(R"(\[(-?\d+(, -?\d+){14})(, -?\d+){9}\])"), "[$1]");
  v4.replace(v4.find("\"version\": 5"), 12, "\"version\": 4");
  back = parse_rank_summary_json(v4);
  ASSERT_TRUE(back) << back.error().to_string();
  ASSERT_EQ(back->ranks[0].collectives.size(), 8u);
  for (const RankCollective& c : back->ranks[0].collectives) EXPECT_FALSE(c.has_path);
  v4.replace(v4.find("\"version\": 4"), 12, "\"version\": 5");
  ASSERT_FALSE(parse_rank_summary_json(v4));
  JobSummary stripped = late;
  for (RankCollective& c : stripped.ranks[0].collectives) c.has_path = false;
  const std::string none = format_rank_summary_json(stripped);
  EXPECT_NE(none.find(", 0, 0, 0, 0, 0, 0, -1, -1, 0]"), std::string::npos);
  back = parse_rank_summary_json(none);
  ASSERT_TRUE(back) << back.error().to_string();
  for (const RankCollective& c : back->ranks[0].collectives) EXPECT_FALSE(c.has_path);
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

// What a user reads: the waiting ranks' verdict names the straggler and
// the collective, and nobody is told to overlap communication.
TEST(RanksStragglerTest, DiagnoseDirTextNamesTheWait) {
  const testing::CliResult r =
      testing::run_cli(TPROF_BIN, {"-q", "diagnose", std::string(TPROF_TEST_DATA) + "/ranks/late_host"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("waiting for rank 6 at ncclDevKernel_AllReduce_Sum_f32_RING_LL rank-00.json.gz"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Stragglers (the rank that arrives last"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  rank 6: last at 8 of 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host +15.000 ms (longest: log_metrics)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("communication-bound"), std::string::npos) << r.out;

  // tprof report DIR: the same view, one page.
  const fs::path page = fs::temp_directory_path() / ("tprof_ranks_report_" + std::to_string(::getpid()) + ".html");
  const testing::CliResult html = testing::run_cli(
      TPROF_BIN, {"-q", "report", std::string(TPROF_TEST_DATA) + "/ranks/late_host", "-o", page.string()});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  std::ifstream in(page);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(page);
  EXPECT_EQ(text.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(text.find("waiting for rank 6 at ncclDevKernel_AllReduce_Sum_f32_RING_LL rank-00.json.gz"), std::string::npos);
  EXPECT_NE(text.find("host +15.000 ms (longest: log_metrics)"), std::string::npos);
  EXPECT_EQ(text.find("communication-bound"), std::string::npos);
}

// --- One process, several windows (docs/scale.md) ---------------------------

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RanksWindowsTest, TensorboardWorkerName) {
  EXPECT_EQ(tensorboard_worker("host_4000.1700000000123.pt.trace.json"), "host_4000");
  EXPECT_EQ(tensorboard_worker("trainer-6_4006.1700000000373.pt.trace.json.gz"), "trainer-6_4006");
  EXPECT_EQ(tensorboard_worker("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"), "rank-34.Jul_15_10_52_41");
  EXPECT_EQ(tensorboard_worker("rank-0.json.gz"), "");
  EXPECT_EQ(tensorboard_worker("host.abc.pt.trace.json"), "");
  EXPECT_EQ(tensorboard_worker(".123.pt.trace.json"), "");
  EXPECT_EQ(tensorboard_worker("host..pt.trace.json"), "");
}

// tests/data/ranks/windows: ranks 0 and 6 of late_host, three windows each
// (make_windows.py). Two ranks, each its six steps in time order, and rank 6
// still the straggler across the windows.
TEST(RanksWindowsTest, OneProcessWindowsAreOneRank) {
  const JobView v = job_view(job_parts("windows"));
  ASSERT_EQ(v.ranks.size(), 2u);
  for (const RankRow& r : v.ranks) {
    EXPECT_EQ(r.windows.size(), 3u) << r.rank;
    EXPECT_EQ(r.window_steps, (std::vector<std::int64_t>{2, 2, 2})) << r.rank;
    EXPECT_EQ(r.steps, 6);
    std::vector<std::int64_t> steps;
    for (const RankStep& s : r.step_list) steps.push_back(s.step);
    EXPECT_EQ(steps, (std::vector<std::int64_t>{10, 11, 13, 14, 16, 17})) << r.rank;
    EXPECT_TRUE(std::is_sorted(r.windows.begin(), r.windows.end()));
  }
  EXPECT_EQ(v.ranks[0].rank, 0);
  EXPECT_EQ(v.ranks[1].rank, 6);
  EXPECT_FALSE(v.ranks_from_file_names);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].rank, 6);
  EXPECT_EQ(v.stragglers[0].last_at, 6);
  // Its host work is inside each step: its windows begin with the others'
  // (the first collective of each window is no "before the window" case).
  EXPECT_EQ(v.stragglers[0].late_at_window_start, 0);
  ASSERT_FALSE(v.stragglers[0].before.empty());
  EXPECT_EQ(v.stragglers[0].before[0].what, "host");
  ASSERT_TRUE(v.ranks[0].waiting_for);
  EXPECT_EQ(v.ranks[0].waiting_for->rank, 6);
  // The windows' order on input does not matter.
  std::vector<JobSummary> parts = job_parts("windows");
  std::reverse(parts.begin(), parts.end());
  EXPECT_EQ(format_job_json(job_view(parts)), format_job_json(v));

  const testing::CliResult r =
      testing::run_cli(TPROF_BIN, {"-q", "diagnose", std::string(TPROF_TEST_DATA) + "/ranks/windows"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("appears twice"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("2 ranks (from 6 traces, one process's windows one rank;", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("rank 0: 3 windows of 2 + 2 + 2 steps, in time order: trainer-0_4000.1700000000123.pt.trace.json.gz, "
                       "trainer-0_4000.1700000000373.pt.trace.json.gz, trainer-0_4000.1700000000623.pt.trace.json.gz"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 6: 3 windows"), std::string::npos) << r.out;
}

// One window per step, and rank 3 spends 10 ms after its previous step's
// collective and before its next window begins: every window starts late
// on it and nothing inside explains it. The view says the delay is before
// the window and asks for a window that starts earlier, where it used to
// call the stretches "not comparable (a collective only some ranks run)".
TEST(RanksWindowsTest, LatenessBeforeTheWindowIsSaidSo) {
  const JobView v = job_view(job_parts("late_before_window"));
  ASSERT_EQ(v.ranks.size(), 8u);
  ASSERT_EQ(v.stragglers.size(), 1u);
  const Straggler& s = v.stragglers[0];
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.last_at, 5);
  EXPECT_EQ(s.compared, 0);
  EXPECT_EQ(s.late_at_window_start, 5);
  EXPECT_NEAR(static_cast<double>(s.window_start_late_ns), 10e6, 0.05e6);
  EXPECT_EQ(s.advice.rfind("rank 3 is already late when its recorded window begins", 0), 0u) << s.advice;
  EXPECT_NE(s.advice.find("Record several steps in a row"), std::string::npos) << s.advice;
  for (const RankRow& r : v.ranks) {
    if (r.rank == 3) continue;
    ASSERT_TRUE(r.waiting_for) << r.rank;
    EXPECT_EQ(r.waiting_for->rank, 3);
  }
}

// Rank 13 arrives on time, but its two groups' collectives (pg tp1, pg dp5)
// run 365 us longer once their last rank arrives than their peers (the
// groups of that collective and size sharing no rank with them). Before,
// the view named 10 stragglers with "nothing" before arriving: the ranks of
// those groups arrive late at their next collective. Now the slow transfers
// are named, rank 13 as the link to test, and the others are not stragglers.
TEST(RanksNetworkTest, SlowLinkIsNamedNotTheRanksItDelays) {
  const JobView v = job_view(job_parts("slow_link"));
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_FALSE(v.latest);
  ASSERT_EQ(v.network.groups.size(), 2u);
  std::set<std::string> groups;
  for (const SlowTransfer& t : v.network.groups) {
    groups.insert(t.group);
    EXPECT_NEAR(static_cast<double>(t.transfer_ns - t.peers_ns), 365e3, 10e3) << t.group;
    EXPECT_EQ(t.collectives, 8);
  }
  EXPECT_EQ(groups, (std::set<std::string>{"pg tp1", "pg dp5"}));
  EXPECT_EQ(v.network.suspects, (std::vector<std::int64_t>{13}));
  EXPECT_EQ(v.network.followers, (std::vector<std::int64_t>{5, 8, 9, 10, 11, 12, 14, 15, 21}));
  EXPECT_EQ(v.network.advice.rfind("Test the links of rank 13", 0), 0u) << v.network.advice;
  for (const RankRow& r : v.ranks) EXPECT_FALSE(r.waiting_for) << r.rank;
}

// Where arrivals, not transfers, are late, or groups have no peers, no
// transfer is slow.
TEST(RanksNetworkTest, NoSlowTransferWhereNoneIs) {
  for (const char* job : {"balanced", "late_compute", "late_host", "late_input", "late_some", "lost_kernels", "windows",
                          "late_before_window"}) {
    const JobView v = job_view(job_parts(job));
    EXPECT_TRUE(v.network.groups.empty()) << job;
    EXPECT_TRUE(v.network.suspects.empty()) << job;
  }
}

// The critical path across ranks goes through the rank each collective
// waits for: the planted straggler, with its planted cause the largest part.
TEST(RanksCriticalPathTest, GoesThroughTheStragglerAndItsCause) {
  for (const auto& [job, rank, cause, top] :
       {std::tuple{"late_input", 2, "data_loading", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
        std::tuple{"late_host", 6, "cpu_bound", "log_metrics"},
        std::tuple{"late_compute", 11, "gpu_compute_bound",
                   "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn"}}) {
    const JobView v = job_view(job_parts(job));
    const CrossRankPath& p = v.critical_path;
    EXPECT_TRUE(p.along_rank_paths) << job;
    ASSERT_EQ(p.tops.size(), 1u) << job;
    EXPECT_EQ(p.tops[0].rank, rank) << job;
    EXPECT_EQ(p.tops[0].name, top) << job;
    EXPECT_EQ(p.steps, 8) << job;
    EXPECT_DOUBLE_EQ(p.hops_per_step, 1.0) << job;
    // Step start to the all-reduce's end: all of the step but its optimizer tail.
    EXPECT_GT(p.step_pct, 95.0) << job;
    EXPECT_LE(p.step_pct, 101.0) << job;
    std::int64_t on_rank = 0, sum = 0;
    for (const PathPart& x : p.parts) {
      sum += x.per_step_ns;
      if (x.rank == rank) on_rank += x.per_step_ns;
      EXPECT_TRUE(x.rank == rank || x.rank == -1) << job << ": rank " << x.rank;
    }
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(p.per_step_ns), 8.0) << job;
    EXPECT_GT(on_rank, p.per_step_ns * 9 / 10) << job;
    ASSERT_FALSE(p.parts.empty());
    EXPECT_EQ(p.parts[0].rank, rank) << job;
    EXPECT_EQ(p.parts[0].what, cause) << job;
  }
}

// Summaries before version 5 have no path inside a rank: the stretches are
// split by what the rank's device did, the cause named as the straggler
// test names it.
TEST(RanksCriticalPathTest, WithoutRankPathsTheSplitIsByWhatRan) {
  for (const auto& [job, rank, cause] : {std::tuple{"late_input", 2, "input"}, std::tuple{"late_host", 6, "host"},
                                         std::tuple{"late_compute", 11, "computation"}}) {
    std::vector<JobSummary> parts = job_parts(job);
    for (JobSummary& j : parts)
      for (RankSummary& r : j.ranks)
        for (RankCollective& c : r.collectives) c.has_path = false;
    const CrossRankPath p = job_view(parts).critical_path;
    EXPECT_FALSE(p.along_rank_paths) << job;
    EXPECT_TRUE(p.tops.empty()) << job;
    ASSERT_FALSE(p.parts.empty()) << job;
    EXPECT_EQ(p.parts[0].rank, rank) << job;
    EXPECT_EQ(p.parts[0].what, cause) << job;
    // The activity split is the parts less the transfers.
    const auto key = [](const PathPart& x) { return std::tuple(x.rank, x.what, x.per_step_ns); };
    std::vector<std::tuple<std::int64_t, std::string, std::int64_t>> by_rank, activity;
    for (const PathPart& x : p.parts)
      if (x.rank >= 0) by_rank.push_back(key(x));
    for (const PathPart& x : p.activity) activity.push_back(key(x));
    EXPECT_EQ(activity, by_rank) << job;
  }
}

// Without a straggler the collectives wait for whichever rank is last by a
// tie: no rank holds most of the path.
TEST(RanksCriticalPathTest, ABalancedJobSharesIt) {
  const JobView v = job_view(job_parts("balanced"));
  std::map<std::int64_t, std::int64_t> by_rank;
  for (const PathPart& x : v.critical_path.parts) by_rank[x.rank] += x.per_step_ns;
  EXPECT_GE(by_rank.size(), 4u);
  for (const auto& [rank, ns] : by_rank) EXPECT_LT(ns, v.critical_path.per_step_ns / 3) << rank;
}

// A slow link puts its transfers on the path, two collectives a step (the
// tensor-parallel group's, then the data-parallel one).
TEST(RanksCriticalPathTest, ASlowLinkPutsTransfersOnIt) {
  const JobView v = job_view(job_parts("slow_link"));
  EXPECT_DOUBLE_EQ(v.critical_path.hops_per_step, 2.0);
  std::int64_t transfers = 0;
  for (const PathPart& x : v.critical_path.parts) transfers += x.rank == -1 ? x.per_step_ns : 0;
  // Two transfers a step, one of them 365 us slower than its peers'.
  EXPECT_GT(transfers, 1'500'000);
  EXPECT_GT(v.critical_path.step_pct, 95.0);
}

// A rank late before its recorded window: the path covers what is
// recorded, and the text says where the rest of the step is.
TEST(RanksCriticalPathTest, LateBeforeTheWindowLeavesTheRestUncovered) {
  const JobView v = job_view(job_parts("late_before_window"));
  EXPECT_LT(v.critical_path.step_pct, 60.0);
  ASSERT_FALSE(v.critical_path.parts.empty());
  EXPECT_EQ(v.critical_path.parts[0].rank, 3);
  const std::string text = format_job_text(v);
  EXPECT_NE(text.find("of those steps is off the path"), std::string::npos) << text;
  EXPECT_NE(text.find("a rank that begins its steps late"), std::string::npos) << text;
  EXPECT_EQ(format_job_text(job_view(job_parts("late_input"))).find("is off the path"), std::string::npos);
}

// A real pair of 128 ranks (HTA's sampled DLRM traces): 10 collective
// kernels match no other rank's. A stretch begins at its rank's previous
// collective, matched or not, so the walk stops there instead of jumping to
// an earlier matched one (which covered 29% of the steps with stretches
// that did not join); the text says so, and that transfers hold the wait
// for the 126 untraced ranks.
TEST(RanksCriticalPathTest, AnUnmatchedCollectiveEndsTheWalk) {
  const JobView v = job_view({{{summarize_file(kDir + "/sampled_rank-0.json.gz")}},
                              {{summarize_file(kDir + "/sampled_rank-1.json.gz")}}});
  EXPECT_EQ(v.critical_path.steps, 2);
  EXPECT_DOUBLE_EQ(v.critical_path.hops_per_step, 1.5);
  EXPECT_LT(v.critical_path.step_pct, 20.0);
  const std::string text = format_job_text(v);
  EXPECT_NE(text.find("where the walk stopped at a collective that is not matched (10 collective kernels"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("with 2 of 128 ranks traced, they hold the wait for untraced ranks too"), std::string::npos);
  // Rank 1's collectives start long after their launches and their
  // stream's previous kernels (the sampled traces keep no stream waits):
  // not launch overhead but unexplained, with what its device ran meanwhile.
  EXPECT_TRUE(v.critical_path.along_rank_paths);
  std::int64_t unexplained = 0, launch = 0;
  for (const PathPart& x : v.critical_path.parts) {
    if (x.rank != 1) continue;
    unexplained += x.what == "unexplained" ? x.per_step_ns : 0;
    launch += x.what == "kernel_launch_overhead" ? x.per_step_ns : 0;
  }
  EXPECT_GT(unexplained, 40'000'000);
  EXPECT_LT(launch, 100'000);
  EXPECT_NE(text.find("meanwhile its device did: computation 41.804 ms"), std::string::npos) << text;
}

// Without rank numbers the tensorboard worker name (and pid) groups windows;
// other names stay one rank per file.
TEST(RanksWindowsTest, UnnumberedWindowsGroupByWorker) {
  auto window = [](const std::string& name, int pid, double t0) {
    std::vector<std::string> ev;
    for (int n = 0; n < 2; ++n) {
      ev.push_back(testing::x("user_annotation", "ProfilerStep#" + std::to_string(n + static_cast<int>(t0)), pid, pid,
                              t0 * 1000 + n * 100, 100));
    }
    Result<Trace> t = read_trace_bytes(doc(ev));
    EXPECT_TRUE(t);
    return JobSummary{{summarize_rank(*t, name)}};
  };
  const JobView v = job_view({window("w.3.pt.trace.json", 7, 30), window("w.1.pt.trace.json", 7, 10),
                              window("w.2.pt.trace.json", 7, 20), window("other.json", 7, 40),
                              window("w.5.pt.trace.json", 8, 50)});
  EXPECT_TRUE(v.ranks_from_file_names);
  ASSERT_EQ(v.ranks.size(), 3u);  // other.json; w (pid 7), three windows; w (pid 8): another process
  EXPECT_EQ(v.ranks[0].windows, (std::vector<std::string>{"other.json"}));
  EXPECT_EQ(v.ranks[1].windows, (std::vector<std::string>{"w.1.pt.trace.json", "w.2.pt.trace.json", "w.3.pt.trace.json"}));
  EXPECT_EQ(v.ranks[1].steps, 6);
  EXPECT_EQ(v.ranks[1].step_list.front().step, 10);
  EXPECT_EQ(v.ranks[1].step_list.back().step, 31);
  EXPECT_EQ(v.ranks[2].windows, (std::vector<std::string>{"w.5.pt.trace.json"}));
}

// Two processes claiming one rank, two windows overlapping, one file twice:
// errors naming both files.
TEST(RanksWindowsTest, TwoProcessesClaimingARankAreAnError) {
  std::vector<JobSummary> dup = job_parts("dup_rank");
  Result<JobSummary> m = merge_summaries(dup);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("rank 0 appears twice"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find("two processes (pid 400"), std::string::npos) << m.error().message();

  // One window copied under another tensorboard name: same pid, same span.
  JobSummary a = job_parts("windows")[0];
  JobSummary b = a;
  b.ranks[0].source = "trainer-0_4000.1700000000999.pt.trace.json.gz";
  m = merge_summaries({a, b});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("overlap in time"), std::string::npos) << m.error().message();

  for (const char* cmd : {"diagnose", "report"}) {
    const fs::path out = fs::temp_directory_path() / ("tprof_dup_rank_" + std::to_string(::getpid()) + ".html");
    std::vector<std::string> args = {"-q", cmd, std::string(TPROF_TEST_DATA) + "/ranks/dup_rank"};
    if (std::string(cmd) == "report") args.insert(args.end(), {"-o", out.string()});
    const testing::CliResult r = testing::run_cli(TPROF_BIN, args);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("rank 0 appears twice (trainer-"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << cmd;
  }
}

// A summary keeps what groups windows; merge of the windows' summaries is
// still diagnose DIR, byte for byte.
TEST(RanksWindowsTest, MergeOfWindowSummariesEqualsDiagnoseDir) {
  const std::string dir = std::string(TPROF_TEST_DATA) + "/ranks/windows";
  const fs::path tmp = fs::temp_directory_path() / ("tprof_windows_test_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::vector<std::string> args = {"-q", "merge", "--format", "json"};
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string out = (tmp / (e.path().filename().string() + ".summary.json")).string();
    const testing::CliResult r = testing::run_cli(TPROF_BIN, {"-q", "summarize", e.path().string(), "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    args.push_back(out);
  }
  Result<JobSummary> one = parse_rank_summary_json(read_file(args.back()));
  ASSERT_TRUE(one) << one.error().to_string();
  EXPECT_FALSE(one->ranks[0].worker.empty());
  EXPECT_GE(one->ranks[0].pid, 4000);
  EXPECT_LT(one->ranks[0].start_ns, one->ranks[0].end_ns);
  const testing::CliResult merged = testing::run_cli(TPROF_BIN, args);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  const testing::CliResult direct = testing::run_cli(TPROF_BIN, {"-q", "diagnose", "--format", "json", dir});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(merged.out, direct.out);
  fs::remove_all(tmp);
}

// --- tprof report DIR ------------------------------------------------------

// The page: one row of bars per rank, every bar's parts summing to its step,
// the straggler's section, names escaped.
TEST(RanksReportTest, PageHasBarsAndEscapesNames) {
  std::vector<JobSummary> parts = job_parts("late_host");
  parts[0].ranks[0].source = "<img src=x onerror=alert(1)>.json";
  const std::string page = format_job_html(job_view(parts));
  EXPECT_EQ(page.find("<img src=x"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt;.json"), std::string::npos);
  EXPECT_NE(page.find("<section id=\"ranks\" data-ranks=\"8\""), std::string::npos);
  EXPECT_NE(page.find("<section id=\"straggler\" data-named=\"1\" data-rank=\"6\""), std::string::npos);
  std::size_t bars = 0;
  for (std::size_t at = page.find("<g class=\"step\""); at != std::string::npos; at = page.find("<g class=\"step\"", at + 1)) {
    const std::string tag = page.substr(at, page.find('>', at) - at);
    auto attr = [&tag](const std::string& name) {
      const std::size_t p = tag.find(name + "=\"") + name.size() + 2;
      return std::stoll(tag.substr(p, tag.find('"', p) - p));
    };
    EXPECT_EQ(attr("data-computation-ns") + attr("data-communication-ns") + attr("data-idle-ns"), attr("data-dur-ns")) << tag;
    ++bars;
  }
  EXPECT_EQ(bars, 64u);  // 8 ranks x 8 steps
  EXPECT_NE(page.find("<details id=\"text-view\">"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);  // nothing fetched
  EXPECT_EQ(page.find("https://"), std::string::npos);
}

// report DIR writes its file atomically: a failed run leaves the old file as
// it was, and no temporary file behind; a bad directory exits 2.
TEST(RanksReportTest, ReportDirCliIsAtomicAndRefusesBadDirs) {
  const fs::path tmp = fs::temp_directory_path() / ("tprof_report_dir_test_" + std::to_string(::getpid()));
  fs::create_directories(tmp / "out");
  const fs::path page = tmp / "out" / "job.html";
  std::ofstream(page) << "old page";
  const fs::path empty = tmp / "empty";
  fs::create_directories(empty);
  const fs::path broken = tmp / "broken";
  fs::create_directories(broken);
  std::ofstream((broken / "rank-0.json").string()) << "not json at all";
  for (const fs::path& bad : {empty, broken, tmp / "missing"}) {
    const testing::CliResult r = testing::run_cli(TPROF_BIN, {"-q", "report", bad.string(), "-o", page.string()});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_FALSE(r.err.empty()) << bad;
    EXPECT_EQ(read_file(page), "old page") << bad;
  }
  const testing::CliResult ok =
      testing::run_cli(TPROF_BIN, {"-q", "report", std::string(TPROF_TEST_DATA) + "/ranks/windows", "-o", page.string()});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const std::string text = read_file(page);
  EXPECT_EQ(text.rfind("<!doctype html>", 0), 0u);
  EXPECT_TRUE(text.ends_with("</html>\n"));
  EXPECT_NE(text.find("data-windows=\"3\""), std::string::npos);
  EXPECT_NE(text.find("class=\"window-edge\""), std::string::npos);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp / "out")) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);  // no temporary file left
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace tprof
