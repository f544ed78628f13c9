// tprof/ranks.h — many ranks of one job: a small summary per rank, a merge
// that is associative and order-independent, and the job view (per-rank
// steps and verdicts; stragglers: the rank that arrives last at the
// collectives, with the wait it inflicts and what it did before arriving;
// ranks whose median step is slow; HolisticTraceAnalysis' comm/comp overlap
// and kernel-type breakdown).
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

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/causal.h"
#include "tprof/diagnose.h"
#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof {

// The summary file's "format" and the version this tprof writes. It reads
// versions 1 (no collectives: no straggler analysis), 2 (no per-step
// steady_ns, device_ns, cpu_ns: tprof compare --jobs has only step time)
// 3 (no collective sequence numbers: matched by order) and 4 (no stretch
// split by the rank's critical path: the path across ranks splits it by
// what ran) too.
inline constexpr std::string_view kRankSummaryFormat = "tprof.rank_summary";
inline constexpr std::int64_t kRankSummaryVersion = 5;

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
  // What tprof compare measures per step (summary version 3; -1 unknown, as
  // in older summaries): the step's cost in the steady state (from the
  // previous step's end to its own, a step ending when its host span and
  // the device work it launched are done), the union of the device work it
  // launched (0 without device activity), its thread's busy time.
  std::int64_t steady_ns = -1;
  std::int64_t device_ns = -1;
  std::int64_t cpu_ns = -1;
};

// HolisticTraceAnalysis' kernel-type time of one label ("COMPUTATION",
// "COMPUTATION overlapping COMMUNICATION", ...), ns.
struct KernelTypeTime {
  std::string kernel_type;
  std::int64_t ns = 0;
};

// Where a rank's collectives are numbered: the kernel's process group (args
// "Process Group Name", current Kineto) or else its stream, and the kernel's
// name cut at "(". A collective's sequence number in the group (when the
// trace has one), else the n-th collective of a group in a step, is the
// same collective on every rank of the group.
struct CollectiveGroup {
  std::string on;      // "pg 3", "stream 84"
  std::string kernel;  // "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
  // Its ranks in the job (args "Group size" of its kernels or their
  // record_param_comms ops, the largest), traced or not; -1 unknown.
  std::int64_t size = -1;
};

// One collective (communication) kernel of one rank, as the straggler
// analysis reads it; ns on the rank's own clock. "Before" is the stretch
// from the end of the rank's previous collective (else the start of its
// step, else of its trace) to this kernel's start, its arrival; the device's
// time in it is split four ways, summing to before_ns:
// computation_ns + communication_ns + input_ns + (the rest: host).
struct RankCollective {
  std::int32_t group = 0;   // index into RankSummary::collective_groups
  std::int64_t step = -1;   // the ProfilerStep its launch (else its start) falls in
  // Its sequence number in its process group (args "Seq" of the kernel or
  // of the record_param_comms op around its launch: current PyTorch),
  // the same on every rank of the group; -1 when the trace has none, for a
  // send or receive (numbered per rank), and in summaries before version 4.
  std::int64_t seq = -1;
  std::int64_t start_ns = 0;  // arrival
  std::int64_t end_ns = 0;
  std::int64_t before_ns = 0;
  std::int64_t computation_ns = 0;    // other kernels, copies, sets running
  std::int64_t communication_ns = 0;  // other collectives running, not under computation
  std::int64_t input_ns = 0;          // device idle, the host in a DataLoader scope
  // The longest of each in the stretch (index into RankSummary::names, -1
  // none) and its time there: a compute kernel, another collective, the
  // host event while the device idled.
  std::int32_t top_kernel = -1;
  std::int64_t top_kernel_ns = 0;
  std::int32_t top_comm = -1;
  std::int64_t top_comm_ns = 0;
  std::int32_t top_host = -1;
  std::int64_t top_host_ns = 0;
  // The stretch along the rank's own critical path into the collective's
  // start (measured_critical_paths, tprof/causal.h): its time by BoundType
  // and unexplained (before the path's first node, and waits the trace does
  // not record: CriticalPath::unrecorded_wait_ns), and the event holding
  // the most of it (index into names, -1 none). has_path is false in a
  // summary before version 5 and where the trace's graph has no node for it.
  bool has_path = false;
  std::array<std::int64_t, static_cast<int>(BoundType::kCount_)> path_ns{};
  std::int64_t path_unexplained_ns = 0;
  std::int32_t path_top = -1;
  std::int64_t path_top_ns = 0;
};

// Everything the job view needs from one rank's trace.
struct RankSummary {
  std::int64_t rank = -1;  // distributedInfo.rank; -1 when the trace has none
  std::string source;      // the trace's file name (no directory)
  Verdict verdict = Verdict::kCpuOnly;
  bool has_device = false;
  std::int64_t world_size = -1;  // distributedInfo.world_size; -1 when absent
  std::vector<RankStep> steps;  // by start time
  std::int64_t comm_comp_overlap_ns = 0;  // HTA get_comm_comp_overlap numerator
  std::int64_t comm_ns = 0;               // ... and denominator
  std::vector<KernelTypeTime> kernel_types;  // by label
  // False for a version-1 summary, which has no collectives to read.
  bool has_collectives = true;
  std::vector<CollectiveGroup> collective_groups;
  std::vector<std::string> names;
  std::vector<RankCollective> collectives;  // by start
  // Which process wrote the trace and when: one process's windows (a
  // tensorboard handler writes one file per profiling window) are one rank
  // of the view (docs/scale.md, "One process, several windows").
  std::string worker;     // <worker> of a "<worker>.<digits>.pt.trace.json[.gz]" file name; "" for other names
  std::int64_t pid = -1;  // the host process id (the pid of its CPU threads' events); -1 unknown
  std::int64_t start_ns = 0;  // the trace's first event and last end, ns on the rank's own clock;
  std::int64_t end_ns = 0;    // both 0 when unknown (a summary from before they were kept)
};

// Summaries of several ranks: sorted by (rank, source), which makes merging
// order-independent and associative.
struct JobSummary {
  std::vector<RankSummary> ranks;
};

// Diagnoses `trace` and keeps what the job view needs. `source` is the
// file name stored in the summary. Never fails.
RankSummary summarize_rank(const Trace& trace, std::string source);

// Concatenates the parts' ranks and sorts them by (rank, source). Several
// traces of one rank number are that process's windows when they share its
// pid (or, pid unknown, the tensorboard worker name) and do not overlap in
// time; compute_job_view merges them into one rank. Fails
// (kInvalidArgument), naming both files, when one rank number comes from
// two processes, when two windows overlap, or when one file name appears
// twice; ranks without a number (-1) never clash.
Result<JobSummary> merge_summaries(const std::vector<JobSummary>& parts);

// The worker name of a tensorboard trace file name, as torch's
// tensorboard_trace_handler and tprof's write it
// ("<worker>.<digits>.pt.trace.json", optionally ".gz"); "" for any other name.
std::string tensorboard_worker(std::string_view file_name);

// A rank that waits at collectives for a straggler: its verdict in the view.
struct WaitingFor {
  std::int64_t rank = 0;           // the straggler
  std::string collective;          // the kernel where it waits the most for it
  std::int64_t wait_per_step_ns = 0;
  double wait_pct = 0;             // of the job's median step (1 decimal)
};

struct RankRow {
  std::int64_t rank = 0;  // as shown: distributedInfo.rank, or the file-name order
  std::string source;
  Verdict verdict = Verdict::kCpuOnly;  // the rank's own trace's verdict
  std::optional<WaitingFor> waiting_for;  // set: the view's verdict is "waiting for rank k at <collective>"
  std::int64_t collectives = 0;  // matched collectives it joins (clocks aligned, ends agree)
  std::int64_t last_at = 0;      // ... where it arrives last
  std::int64_t steps = 0;
  std::int64_t median_step_ns = 0;  // 0 without steps
  std::int64_t step_mad_ns = 0;     // median absolute deviation of the rank's steps
  // Medians over the rank's steps of each phase.
  std::int64_t median_computation_ns = 0;
  std::int64_t median_communication_ns = 0;
  std::int64_t median_idle_ns = 0;
  // The process's traces merged into this rank (its profiling windows), in
  // time order: their file names (the first is `source`) and how many of
  // `step_list`'s steps each holds.
  std::vector<std::string> windows;
  std::vector<std::int64_t> window_steps;
  std::vector<RankStep> step_list;  // every step, windows in time order (the page draws them)
};

// A rank whose median step is longer than the job's (docs/scale.md, "Slow
// ranks"): ranks that do not wait for each other. In a synchronous job
// every rank's step is the same length; read the stragglers instead.
struct SlowRank {
  std::int64_t rank = 0;
  std::int64_t median_step_ns = 0;
  std::int64_t excess_ns = 0;  // over the job's median step
  std::int64_t noise_ns = 0;   // the threshold it passed
  double excess_pct = 0;
  std::string phase;            // "computation", "communication" or "idle"
  std::int64_t phase_excess_ns = 0;  // its per-step median of that phase − the ranks' median
};

// What a straggler did before arriving, beyond the others: one of
// "computation", "communication" (waiting in other collectives), "input"
// (DataLoader), "host" (the device idle, the host elsewhere).
struct ArrivalCause {
  std::string what;
  std::int64_t excess_per_step_ns = 0;  // its time − the other ranks' median, per step
  std::string top;                      // its longest such event ("" none recorded)
};

// The rank that arrives last at the collectives (docs/scale.md, "Stragglers").
struct Straggler {
  std::int64_t rank = 0;
  std::int64_t collectives = 0;  // matched collectives it joins
  std::int64_t last_at = 0;      // ... where it arrives last
  std::int64_t ranks = 0;        // ranks per collective (median)
  // The size of the group it is judged in ("Group size"), traced or not;
  // -1 unknown. Above `ranks`, an untraced rank may arrive later still.
  std::int64_t group_size = -1;
  std::string collective;        // the kernel where it makes the others wait the most
  std::string on;                // its group ("pg 0", "stream 84")
  std::int64_t steps = 0;        // steps its collectives fall in (0: the trace has none)
  std::int64_t wait_ns = 0;      // the others' median wait, summed over its late collectives
  std::int64_t wait_per_step_ns = 0;  // wait_ns / steps (wait_ns without steps)
  double wait_pct = 0;           // of the job's median step (of the collectives' span without steps), 1 decimal
  std::int64_t lead_ns = 0;      // median, after the next-latest rank
  std::int64_t after_arrival_ns = 0;  // median time its late collectives still take once it arrives
  // Its late collectives whose stretches start together on every rank
  // (within 1 ms, aligned): the ones `before` compares.
  std::int64_t compared = 0;
  std::vector<ArrivalCause> before;   // excess over the others, largest first (named ones only)
  // Its late collectives that are the first of a recorded window on it (no
  // earlier collective in its trace, so the stretch starts at its step) and
  // whose stretch starts later than the others' by half its lateness there
  // or more: it is late before the window begins, where its trace cannot
  // say why. Their count, and the median of how much later its stretch
  // starts than the other ranks' median.
  std::int64_t late_at_window_start = 0;
  std::int64_t window_start_late_ns = 0;
  // Its late collectives whose stretch starts at the end of its previous
  // collective, later than the others' by half its lateness there or more:
  // that collective ended late on it, and the lateness is inherited, not
  // made in the stretch.
  std::int64_t late_from_previous = 0;
  // Where a rank joins several groups (tensor- and data-parallel process
  // groups), collectives, last_at, ranks, chance and lateness_z are those
  // of the group it is judged in (one where it is named, else any; of
  // those, where being last that often is least likely by chance);
  // last_on names it ("pg tp4"), "" for one group.
  std::string last_on;
  double chance = 1;             // the odds of being last that often by chance (binomial tail)
  double lateness_z = 0;         // its lateness (Hodges-Lehmann) over its standard error under the others' arrival jitter
  // A rank late because it waits in another collective for a named
  // straggler of a group they share (its group's collective): that rank;
  // such a follower is not named. -1 otherwise.
  std::int64_t follows = -1;
  double share_needed = 0;       // the share of its collectives it must be last at (docs/scale.md)
  bool named = false;            // passed the thresholds (else: the latest rank, shown to say why not)
  std::string advice;
};

// How the ranks' collectives were matched and their clocks aligned.
struct CollectiveAlignment {
  std::int64_t ranks_with_collectives = 0;
  std::int64_t ranks_aligned = 0;     // clock offset found against the others
  std::int64_t groups = 0;            // (process group or stream, kernel) pairs seen on 2+ ranks
  std::int64_t matched = 0;           // collectives seen on 2+ aligned ranks whose ends agree (by number, else by end)
  std::int64_t matched_by_seq = 0;    // ... of them numbered by their sequence number ("Seq") in their process group
  std::int64_t unmatched = 0;         // collective kernels of aligned ranks whose end agrees with no other rank's
  std::int64_t max_offset_ns = 0;     // the largest clock offset (signed) against the first rank
  std::int64_t max_offset_rank = -1;
  std::int64_t end_spread_ns = 0;     // median |aligned end − the collective's end| of matched ones
  std::string note;                   // why there is nothing to match, "" otherwise
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

// A process group whose collectives run longer once their last rank has
// arrived than the other groups of the same collective and size: the
// transfer itself is slow (a link or NIC of one of its ranks), not an
// arrival (docs/scale.md, "Slow transfers").
struct SlowTransfer {
  std::string group;                  // "pg tp1"
  std::string collective;             // the kernel's name up to "("
  std::vector<std::int64_t> members;  // its traced ranks, ascending
  std::int64_t collectives = 0;       // its matched collectives
  std::int64_t transfer_ns = 0;       // median: the common end − the last arrival
  std::int64_t peers = 0;             // the other groups of that collective and size
  std::int64_t peers_ns = 0;          // the median of their medians
  std::int64_t excess_per_step_ns = 0;  // (transfer − peers) over its collectives, per step
};

struct SlowNetwork {
  std::vector<SlowTransfer> groups;     // largest excess first
  // The ranks in the most slow groups, when that is two or more (each slow
  // group alone says only "one of its ranks"): the links to test.
  std::vector<std::int64_t> suspects;
  // Ranks that passed the straggler thresholds with no cause of their own,
  // late because a collective of a slow group ended late on them: not named.
  std::vector<std::int64_t> followers;
  std::string advice;
};

// One part of the critical path across ranks: a rank's stretches before
// the collectives it arrives last at, along its own critical path (by
// bound type: "cpu_bound", "gpu_compute_bound", "gpu_communication_bound",
// "kernel_launch_overhead", "kernel_kernel_overhead", "data_loading", and
// "unexplained": before the path's first node or a wait the trace does not
// record) where every stretch on the
// path has one, else by what its device did then (as Straggler::before:
// "computation", "communication", "input", "host"); or the transfers once
// the last rank arrived (rank -1, "transfer").
struct PathPart {
  std::int64_t rank = -1;
  std::string what;
  std::int64_t per_step_ns = 0;  // mean per step walked
};

// The event holding the most of a rank's stretches on the path (along its
// own critical path): a kernel, a host op, a DataLoader scope.
struct PathTop {
  std::int64_t rank = -1;
  std::string name;
  std::int64_t per_step_ns = 0;  // mean per step walked
};

// The job's critical path across ranks, collective to collective
// (docs/scale.md, "Critical path across ranks"): per step, from its
// last-ending matched collective back through the rank that arrives last
// at each, to the step's start.
struct CrossRankPath {
  std::int64_t steps = 0;        // steps walked (a job without steps: 1); 0 none
  std::int64_t per_step_ns = 0;  // its length, mean per step
  double step_pct = 0;           // of those steps (each the median over ranks), 1 decimal; 0 without steps
  double hops_per_step = 0;      // collectives on it per step
  // True when the ranks' stretches are split along their own critical
  // paths (every stretch walked has one: summaries of version 5), false
  // when by what ran.
  bool along_rank_paths = false;
  std::vector<PathPart> parts;   // largest first
  std::vector<PathTop> tops;     // one per rank on the path with one, largest first
  // The ranks' stretches by what their device did, whichever the split
  // (the parts themselves without version-5 summaries): what ran while
  // an unexplained part waited.
  std::vector<PathPart> activity;  // largest first
};

struct JobView {
  bool ranks_from_file_names = false;  // some trace had no distributedInfo.rank
  std::vector<RankRow> ranks;          // by rank
  std::int64_t ranks_with_steps = 0;
  std::int64_t median_step_ns = 0;     // median of the ranks' median steps
  std::int64_t ranks_mad_ns = 0;       // MAD of the ranks' median steps
  std::int64_t world_size = -1;        // the largest distributedInfo.world_size; -1 none
  CollectiveAlignment alignment;
  std::vector<Straggler> stragglers;   // named ones, most wait first
  std::optional<Straggler> latest;     // none named: the rank last most often, to say why not
  std::vector<SlowRank> slow_ranks;    // slowest first
  SlowNetwork network;                 // slow transfers (empty: none)
  CrossRankPath critical_path;         // none (steps 0) when no collective matched
  std::vector<CommCompOverlap> comm_comp_overlap;  // by rank
  std::vector<KernelTypeRow> kernel_types;         // by time, largest first
};

// The job view of merged summaries (docs/scale.md, "Stragglers").
JobView compute_job_view(const JobSummary& job);

// The view as text (default), JSON or Markdown; the JSON is a stable
// contract: {"ranks", "job", "collectives", "stragglers", "latest",
// "slow_transfers", "critical_path", "slow_ranks", "breakdowns"}, ns integers.
std::string format_job_text(const JobView& v);
std::string format_job_json(const JobView& v);
std::string format_job_md(const JobView& v);
// One self-contained HTML page (tprof report DIR, src/report/html_job.cc):
// per-rank step bars, the straggler and the wait, comm/compute overlap,
// verdicts and slow ranks as inline SVG, the text view at the bottom.
std::string format_job_html(const JobView& v);

// The summary file: {"format": "tprof.rank_summary", "version": 3, "ranks": [...]}.
std::string format_rank_summary_json(const JobSummary& job);
// Reads a summary file's text (version 1, 2 or 3); kFormat with what is wrong
// for anything that is not a summary this tprof writes (another format, a
// missing or mistyped field), kUnsupported for another version.
Result<JobSummary> parse_rank_summary_json(std::string_view text);

}  // namespace tprof
