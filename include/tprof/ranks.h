// tprof/ranks.h — many ranks of one job: a small summary per rank, a merge
// that is associative and order-independent, and the job view (per-rank
// steps and verdicts, stragglers and the phase that makes them slow,
// HolisticTraceAnalysis' comm/comp overlap and kernel-type breakdown).
//
//   tprof::RankSummary r = tprof::summarize_rank(trace, "rank-3.json.gz");   // where the trace lives
//   std::string file = tprof::format_rank_summary_json(tprof::JobSummary{{r}});
//   ...
//   tprof::Result<tprof::JobSummary> job = tprof::merge_summaries({a, b, c});  // anywhere, later
//   tprof::JobView v = tprof::compute_job_view(*job);
//   std::cout << tprof::format_job_text(v);
//
// `tprof diagnose DIR` and `tprof merge` both end in compute_job_view over
// merged summaries, so their outputs are the same bytes. Definitions:
// docs/scale.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/diagnose.h"
#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof {

// The summary file's "format" and the one "version" this tprof reads.
inline constexpr std::string_view kRankSummaryFormat = "tprof.rank_summary";
inline constexpr std::int64_t kRankSummaryVersion = 1;

// One ProfilerStep's time split into phases (ns; the three sum to dur_ns).
// With device activity: computation = device busy in the step − exposed
// communication, communication = communication kernels not overlapped by
// compute, idle = the rest of the step. CPU-only: computation = host busy
// on the step's thread, idle = the rest.
struct RankStep {
  std::int64_t step = -1;
  std::int64_t dur_ns = 0;
  std::int64_t computation_ns = 0;
  std::int64_t communication_ns = 0;
  std::int64_t idle_ns = 0;
};

// HolisticTraceAnalysis' kernel-type time of one label ("COMPUTATION",
// "COMPUTATION overlapping COMMUNICATION", ...), ns.
struct KernelTypeTime {
  std::string kernel_type;
  std::int64_t ns = 0;
};

// Everything the job view needs from one rank's trace.
struct RankSummary {
  std::int64_t rank = -1;  // distributedInfo.rank; -1 when the trace has none
  std::string source;      // the trace's file name (no directory)
  Verdict verdict = Verdict::kCpuOnly;
  bool has_device = false;
  std::vector<RankStep> steps;  // by start time
  std::int64_t comm_comp_overlap_ns = 0;  // HTA get_comm_comp_overlap numerator
  std::int64_t comm_ns = 0;               // ... and denominator
  std::vector<KernelTypeTime> kernel_types;  // by label
};

// Summaries of several ranks: sorted by (rank, source), which makes merging
// order-independent and associative.
struct JobSummary {
  std::vector<RankSummary> ranks;
};

// Diagnoses `trace` and keeps what the job view needs. `source` is the
// file name stored in the summary. Never fails.
RankSummary summarize_rank(const Trace& trace, std::string source);

// Concatenates the parts' ranks and sorts them by (rank, source). Fails
// (kInvalidArgument) when one rank number appears twice, naming both
// sources; ranks without a number (-1) never clash.
Result<JobSummary> merge_summaries(const std::vector<JobSummary>& parts);

struct RankRow {
  std::int64_t rank = 0;  // as shown: distributedInfo.rank, or the file-name order
  std::string source;
  Verdict verdict = Verdict::kCpuOnly;
  std::int64_t steps = 0;
  std::int64_t median_step_ns = 0;  // 0 without steps
  std::int64_t step_mad_ns = 0;     // median absolute deviation of the rank's steps
  // Medians over the rank's steps of each phase.
  std::int64_t median_computation_ns = 0;
  std::int64_t median_communication_ns = 0;
  std::int64_t median_idle_ns = 0;
};

struct Straggler {
  std::int64_t rank = 0;
  std::int64_t median_step_ns = 0;
  std::int64_t excess_ns = 0;  // over the job's median step
  std::int64_t noise_ns = 0;   // the threshold it passed
  double excess_pct = 0;
  std::string phase;            // "computation", "communication" or "idle"
  std::int64_t phase_excess_ns = 0;  // its per-step median of that phase − the ranks' median
};

struct CommCompOverlap {
  std::int64_t rank = 0;
  std::optional<double> overlap_pct;  // HTA's comp_comm_overlap_pctg (2 decimals); none without communication
};

struct KernelTypeRow {
  std::string kernel_type;
  std::int64_t ns = 0;  // summed over ranks
  double pct = 0;       // of all rows, 1 decimal (HTA's rounding)
};

struct JobView {
  bool ranks_from_file_names = false;  // some trace had no distributedInfo.rank
  std::vector<RankRow> ranks;          // by rank
  std::int64_t ranks_with_steps = 0;
  std::int64_t median_step_ns = 0;     // median of the ranks' median steps
  std::int64_t ranks_mad_ns = 0;       // MAD of the ranks' median steps
  std::vector<Straggler> stragglers;   // slowest first
  std::vector<CommCompOverlap> comm_comp_overlap;  // by rank
  std::vector<KernelTypeRow> kernel_types;         // by time, largest first
};

// The job view of merged summaries (docs/scale.md, "Stragglers").
JobView compute_job_view(const JobSummary& job);

// The view as text (default), JSON or Markdown; the JSON is a stable
// contract: {"ranks", "job", "stragglers", "breakdowns"}, ns integers.
std::string format_job_text(const JobView& v);
std::string format_job_json(const JobView& v);
std::string format_job_md(const JobView& v);

// The summary file: {"format": "tprof.rank_summary", "version": 1, "ranks": [...]}.
std::string format_rank_summary_json(const JobSummary& job);
// Reads a summary file's text; kFormat with what is wrong for anything that
// is not a summary this tprof writes (another format, another version, a
// missing or mistyped field).
Result<JobSummary> parse_rank_summary_json(std::string_view text);

}  // namespace tprof
