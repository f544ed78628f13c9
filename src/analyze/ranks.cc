// Many ranks: a summary per rank, the merge, the job view. The view reads
// only summaries, so `tprof diagnose DIR` (summaries made in memory) and
// `tprof merge` (summaries read from files) give the same result.
#include "tprof/ranks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"
#include "src/analyze/ranks_collectives.h"
#include "src/analyze/verdict.h"
#include "src/base/saturate.h"
#include "src/trace/json_value.h"

namespace tprof {

namespace {

std::int64_t clamp0(std::int64_t v) { return std::max<std::int64_t>(0, v); }

double round_to(double v, double scale) { return std::round(v * scale) / scale; }


// The host process's id: the pid most of the CPU threads' events carry
// (Kineto writes device activity under the device's number as pid; a CPU
// lane's pid is the process's). -1 when it is a string or there is none.
std::int64_t host_pid(const Trace& t) {
  std::vector<std::int64_t> per_lane(t.lanes.size(), 0);
  for (const std::uint32_t lane : t.events.lane) {
    if (lane < per_lane.size()) ++per_lane[lane];
  }
  std::map<std::int64_t, std::int64_t> per_pid;
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const Lane& lane = t.lanes[l];
    if (lane.kind == LaneKind::kCpu && !lane.pid.is_str && per_lane[l] > 0) per_pid[lane.pid.num] += per_lane[l];
  }
  std::int64_t best = -1, most = 0;
  for (const auto& [pid, n] : per_pid) {
    if (n > most) best = pid, most = n;
  }
  return best;
}

// Windows of one process (docs/scale.md): the same pid, or, a pid unknown,
// the same tensorboard worker name.
bool same_process(const RankSummary& a, const RankSummary& b) {
  if (a.pid >= 0 && b.pid >= 0) return a.pid == b.pid;
  return !a.worker.empty() && a.worker == b.worker;
}

// "pid 4000 and pid 4001", "worker a and worker b": what tells two processes apart.
std::string processes_text(const RankSummary& a, const RankSummary& b) {
  if (a.pid >= 0 && b.pid >= 0) {
    return "two processes (pid " + std::to_string(a.pid) + " and pid " + std::to_string(b.pid) + ")";
  }
  if (!a.worker.empty() && !b.worker.empty()) return "two processes (worker " + a.worker + " and worker " + b.worker + ")";
  return "neither a pid nor a tensorboard worker name shows them to be one process's windows";
}

bool has_span(const RankSummary& r) { return r.start_ns != 0 || r.end_ns != 0; }

// The traces of one rank (or of one unnumbered process), in time order:
// the same pid (or worker) and no two overlapping, else an error naming both.
Status check_windows(std::vector<const RankSummary*> w) {
  std::stable_sort(w.begin(), w.end(), [](const RankSummary* a, const RankSummary* b) {
    return std::tie(a->start_ns, a->source) < std::tie(b->start_ns, b->source);
  });
  const std::string who = w[0]->rank >= 0 ? "rank " + std::to_string(w[0]->rank) : w[0]->worker;
  for (std::size_t i = 1; i < w.size(); ++i) {
    const RankSummary& a = *w[i - 1];
    const RankSummary& b = *w[i];
    if (a.source == b.source) {
      return Error(ErrorCode::kInvalidArgument, who + " appears twice (" + a.source + " and " + b.source +
                                                    "): the same file name twice");
    }
    if (!same_process(*w[0], b)) {
      return Error(ErrorCode::kInvalidArgument,
                   who + " appears twice (" + w[0]->source + " and " + b.source + "): " +
                       processes_text(*w[0], b) + "; one trace per rank, or the windows of one process");
    }
    // One process profiles one window at a time: overlapping windows are
    // two processes (or one trace copied).
    if (has_span(a) && has_span(b) && b.start_ns < a.end_ns) {
      return Error(ErrorCode::kInvalidArgument, who + " appears twice (" + a.source + " and " + b.source +
                                                    "): the two traces overlap in time, so they are not windows "
                                                    "of one process; one trace per rank");
    }
  }
  return Status();
}

// The group a summary's windows share: its rank number; without one, its
// tensorboard worker and pid; else the file alone.
std::string group_key(const RankSummary& r) {
  if (r.rank >= 0) return "r" + std::to_string(r.rank);
  if (!r.worker.empty()) return "w" + std::to_string(r.pid) + "/" + r.worker;
  return "f" + r.source;
}

// One rank from its process's windows (in time order): steps and
// collectives concatenated (their group and name indices remapped), the
// HTA sums added, the verdict of the window holding the most step time
// (else the longest window; ties: the earliest).
RankSummary combine_windows(const std::vector<const RankSummary*>& w) {
  RankSummary out = *w[0];
  out.steps.clear();
  out.collectives.clear();
  out.collective_groups.clear();
  out.names.clear();
  out.kernel_types.clear();
  out.comm_comp_overlap_ns = 0;
  out.comm_ns = 0;
  std::map<std::pair<std::string, std::string>, std::int32_t> groups;
  std::map<std::string, std::int32_t> names;
  std::map<std::string, std::int64_t> types;
  auto name_id = [&](const RankSummary& r, std::int32_t i) -> std::int32_t {
    if (i < 0 || static_cast<std::size_t>(i) >= r.names.size()) return -1;
    auto [it, added] = names.emplace(r.names[static_cast<std::size_t>(i)], static_cast<std::int32_t>(out.names.size()));
    if (added) out.names.push_back(it->first);
    return it->second;
  };
  std::int64_t best_weight = -1;
  for (const RankSummary* r : w) {
    std::int64_t weight = 0;
    for (const RankStep& s : r->steps) internal::sat_acc(weight, s.dur_ns);
    if (r->steps.empty()) weight = clamp0(internal::sat_sub(r->end_ns, r->start_ns));
    if (weight > best_weight) {
      best_weight = weight;
      out.verdict = r->verdict;
    }
    out.has_device = out.has_device || r->has_device;
    out.world_size = std::max(out.world_size, r->world_size);
    out.has_collectives = out.has_collectives && r->has_collectives;
    out.steps.insert(out.steps.end(), r->steps.begin(), r->steps.end());
    internal::sat_acc(out.comm_comp_overlap_ns, r->comm_comp_overlap_ns);
    internal::sat_acc(out.comm_ns, r->comm_ns);
    for (const KernelTypeTime& k : r->kernel_types) internal::sat_acc(types[k.kernel_type], k.ns);
    for (RankCollective c : r->collectives) {
      const CollectiveGroup& g = r->collective_groups[static_cast<std::size_t>(c.group)];
      auto [it, added] = groups.emplace(std::pair{g.on, g.kernel}, static_cast<std::int32_t>(out.collective_groups.size()));
      if (added) out.collective_groups.push_back(g);
      c.group = it->second;
      c.top_kernel = name_id(*r, c.top_kernel);
      c.top_comm = name_id(*r, c.top_comm);
      c.top_host = name_id(*r, c.top_host);
      out.collectives.push_back(c);
    }
    out.end_ns = std::max(out.end_ns, r->end_ns);
  }
  if (!out.has_collectives) out.collectives.clear();
  for (const auto& [label, ns] : types) out.kernel_types.push_back({label, ns});
  std::stable_sort(out.collectives.begin(), out.collectives.end(),
                   [](const RankCollective& a, const RankCollective& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace

std::string tensorboard_worker(std::string_view name) {
  for (const std::string_view tail : {std::string_view(".pt.trace.json"), std::string_view(".pt.trace.json.gz")}) {
    if (!name.ends_with(tail)) continue;
    const std::string_view head = name.substr(0, name.size() - tail.size());  // <worker>.<digits>
    const std::size_t dot = head.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == head.size()) return "";
    const std::string_view digits = head.substr(dot + 1);
    if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) return "";
    return std::string(head.substr(0, dot));
  }
  return "";
}

RankSummary summarize_rank(const Trace& trace, std::string source) {
  const internal::DiagnoseContext c(trace, /*with_averages=*/true);
  const Diagnosis d = internal::diagnose(c);
  const internal::HtaKernelTypes k = internal::compute_hta_kernel_types(c);

  RankSummary r;
  r.rank = k.has_rank ? k.rank : -1;
  r.source = std::move(source);
  r.verdict = d.verdict;
  r.has_device = c.has_device();
  r.world_size = internal::world_size(trace);
  const std::vector<std::int64_t> steady = internal::steady_costs(d.steps);
  for (std::size_t i = 0; i < d.steps.size(); ++i) {
    const StepVerdict& s = d.steps[i];
    RankStep st;
    st.step = s.step;
    st.steady_ns = steady[i];
    st.device_ns = r.has_device ? clamp0(s.gpu_work_ns) : 0;
    st.cpu_ns = clamp0(s.cpu_busy_ns);
    st.dur_ns = clamp0(s.cpu_span_ns);
    if (r.has_device) {
      const std::int64_t busy = std::min(clamp0(s.gpu_busy_ns), st.dur_ns);
      st.communication_ns = std::min(clamp0(s.exposed_comm_ns), busy);
      st.computation_ns = busy - st.communication_ns;
    } else {
      st.computation_ns = std::min(clamp0(s.cpu_busy_ns), st.dur_ns);
    }
    st.idle_ns = st.dur_ns - st.computation_ns - st.communication_ns;
    r.steps.push_back(st);
  }
  r.comm_comp_overlap_ns = k.comm_comp_overlap_ns;
  r.comm_ns = k.comm_ns;
  for (const auto& [label, ns] : k.kernel_types) r.kernel_types.push_back({label, ns});
  internal::summarize_collectives(c, &r);
  r.worker = tensorboard_worker(r.source);
  r.pid = host_pid(trace);
  r.start_ns = trace.start_ns();
  r.end_ns = trace.end_ns();
  return r;
}

Result<JobSummary> merge_summaries(const std::vector<JobSummary>& parts) {
  JobSummary out;
  for (const JobSummary& p : parts) out.ranks.insert(out.ranks.end(), p.ranks.begin(), p.ranks.end());
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankSummary& a, const RankSummary& b) {
    return std::tie(a.rank, a.source) < std::tie(b.rank, b.source);
  });
  // One file name twice for one rank (the same trace summarized twice, two
  // jobs' traces, or without numbers the same name from two folders) would
  // sort by input order; refuse rather than guess.
  for (std::size_t i = 1; i < out.ranks.size(); ++i) {
    const RankSummary& a = out.ranks[i - 1];
    const RankSummary& b = out.ranks[i];
    if (a.source != b.source || a.rank != b.rank) continue;
    if (a.rank < 0) {
      return Error(ErrorCode::kInvalidArgument, a.source + " appears twice without a rank number (distributedInfo.rank)");
    }
    return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(a.rank) + " appears twice from " + a.source +
                                                  " (the same trace summarized twice, or the traces of two jobs)");
  }
  std::map<std::string, std::vector<const RankSummary*>> groups;
  for (const RankSummary& r : out.ranks) groups[group_key(r)].push_back(&r);
  for (const auto& [key, w] : groups) {
    if (w.size() > 1) TPROF_TRY(check_windows(w));
  }
  return out;
}

JobView compute_job_view(const JobSummary& job) {
  JobView v;
  // One process's windows are one rank (docs/scale.md): grouped, each
  // group in time order and merged into one summary.
  struct ProcessWindows {
    const RankSummary* summary = nullptr;
    std::vector<const RankSummary*> windows;  // in time order
  };
  std::vector<ProcessWindows> processes;
  {
    std::map<std::string, std::size_t> index;
    for (const RankSummary& r : job.ranks) {
      auto [it, added] = index.emplace(group_key(r), processes.size());
      if (added) processes.emplace_back();
      processes[it->second].windows.push_back(&r);
    }
  }
  std::vector<RankSummary> combined;
  combined.reserve(processes.size());  // `summary` points into it
  for (ProcessWindows& p : processes) {
    std::stable_sort(p.windows.begin(), p.windows.end(), [](const RankSummary* a, const RankSummary* b) {
      return std::tie(a->start_ns, a->source) < std::tie(b->start_ns, b->source);
    });
    if (p.windows.size() == 1) {
      p.summary = p.windows[0];
    } else {
      combined.push_back(combine_windows(p.windows));
      p.summary = &combined.back();
    }
  }
  // Ranks as numbered in the traces, unless one has no number: then every
  // rank is its place in the order of file names (of its first window).
  v.ranks_from_file_names =
      std::any_of(processes.begin(), processes.end(), [](const ProcessWindows& p) { return p.summary->rank < 0; });
  if (v.ranks_from_file_names) {
    std::stable_sort(processes.begin(), processes.end(),
                     [](const ProcessWindows& a, const ProcessWindows& b) { return a.summary->source < b.summary->source; });
  }
  std::vector<const RankSummary*> order;
  for (const ProcessWindows& p : processes) order.push_back(p.summary);

  std::vector<std::int64_t> medians, comp, comm, idle, shown;
  std::map<std::string, std::int64_t> kernel_types;
  std::int64_t kernel_total = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const RankSummary& s = *order[i];
    RankRow row;
    row.rank = v.ranks_from_file_names ? static_cast<std::int64_t>(i) : s.rank;
    row.source = s.source;
    row.verdict = s.verdict;
    for (const RankSummary* w : processes[i].windows) {
      row.windows.push_back(w->source);
      row.window_steps.push_back(static_cast<std::int64_t>(w->steps.size()));
    }
    row.step_list = s.steps;
    shown.push_back(row.rank);
    v.world_size = std::max(v.world_size, s.world_size);
    row.steps = static_cast<std::int64_t>(s.steps.size());
    std::vector<std::int64_t> durs, c, m, d;
    for (const RankStep& st : s.steps) {
      durs.push_back(st.dur_ns);
      c.push_back(st.computation_ns);
      m.push_back(st.communication_ns);
      d.push_back(st.idle_ns);
    }
    row.median_step_ns = internal::mean_median(durs);
    row.step_mad_ns = internal::mad(durs);
    row.median_computation_ns = internal::mean_median(std::move(c));
    row.median_communication_ns = internal::mean_median(std::move(m));
    row.median_idle_ns = internal::mean_median(std::move(d));
    if (row.steps > 0) {
      medians.push_back(row.median_step_ns);
      comp.push_back(row.median_computation_ns);
      comm.push_back(row.median_communication_ns);
      idle.push_back(row.median_idle_ns);
    }
    CommCompOverlap o;
    o.rank = row.rank;
    if (s.comm_ns > 0) {
      o.overlap_pct = round_to(100.0 * static_cast<double>(s.comm_comp_overlap_ns) / static_cast<double>(s.comm_ns), 100);
    }
    v.comm_comp_overlap.push_back(o);
    for (const KernelTypeTime& k : s.kernel_types) {
      // From summary files: any int64, so the sums saturate.
      internal::sat_acc(kernel_types[k.kernel_type], k.ns);
      internal::sat_acc(kernel_total, k.ns);
    }
    v.ranks.push_back(std::move(row));
  }
  std::stable_sort(v.comm_comp_overlap.begin(), v.comm_comp_overlap.end(),
                   [](const CommCompOverlap& a, const CommCompOverlap& b) { return a.rank < b.rank; });

  v.ranks_with_steps = static_cast<std::int64_t>(medians.size());
  v.median_step_ns = internal::mean_median(medians);
  v.ranks_mad_ns = internal::mad(medians);

  internal::CollectiveView cv = internal::analyze_collectives(order, shown, v.median_step_ns);
  for (std::size_t i = 0; i < v.ranks.size(); ++i) {
    v.ranks[i].waiting_for = std::move(cv.waiting_for[i]);
    v.ranks[i].collectives = cv.collectives[i];
    v.ranks[i].last_at = cv.last_at[i];
  }
  v.alignment = std::move(cv.alignment);
  v.stragglers = std::move(cv.stragglers);
  v.latest = std::move(cv.latest);
  v.network = std::move(cv.network);
  v.critical_path = std::move(cv.path);
  std::stable_sort(v.ranks.begin(), v.ranks.end(), [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });

  const std::array<std::int64_t, 3> reference = {internal::mean_median(comp), internal::mean_median(comm),
                                                 internal::mean_median(idle)};
  static constexpr std::array<const char*, 3> kPhases = {"computation", "communication", "idle"};
  // A slow rank's median step exceeds the job's by more than the noise:
  // 3 MADs of the ranks' medians (how far ranks spread), 3 MADs of its own
  // steps (how far it jitters) and 2% of the job's median step, whichever
  // is largest. Two ranks alone never make one: the MAD of two medians is
  // half their gap.
  for (const RankRow& row : v.ranks) {
    if (row.steps == 0 || v.ranks_with_steps < 2) continue;
    const std::int64_t excess = row.median_step_ns - v.median_step_ns;
    const std::int64_t noise =
        std::max({internal::sat_mul(3, v.ranks_mad_ns), internal::sat_mul(3, row.step_mad_ns), v.median_step_ns / 50});
    if (excess <= noise) continue;
    SlowRank s;
    s.rank = row.rank;
    s.median_step_ns = row.median_step_ns;
    s.excess_ns = excess;
    s.noise_ns = noise;
    s.excess_pct = v.median_step_ns > 0 ? round_to(100.0 * static_cast<double>(excess) / static_cast<double>(v.median_step_ns), 10) : 0;
    const std::array<std::int64_t, 3> mine = {row.median_computation_ns, row.median_communication_ns, row.median_idle_ns};
    std::size_t best = 0;
    for (std::size_t p = 1; p < mine.size(); ++p) {
      if (mine[p] - reference[p] > mine[best] - reference[best]) best = p;
    }
    s.phase = kPhases[best];
    s.phase_excess_ns = mine[best] - reference[best];
    v.slow_ranks.push_back(std::move(s));
  }
  std::stable_sort(v.slow_ranks.begin(), v.slow_ranks.end(),
                   [](const SlowRank& a, const SlowRank& b) { return a.excess_ns > b.excess_ns; });

  for (const auto& [label, ns] : kernel_types) {
    KernelTypeRow k;
    k.kernel_type = label;
    k.ns = ns;
    k.pct = kernel_total > 0 ? round_to(100.0 * static_cast<double>(ns) / static_cast<double>(kernel_total), 10) : 0;
    v.kernel_types.push_back(std::move(k));
  }
  std::stable_sort(v.kernel_types.begin(), v.kernel_types.end(),
                   [](const KernelTypeRow& a, const KernelTypeRow& b) { return a.ns > b.ns; });
  return v;
}

}  // namespace tprof
