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
#include "src/base/saturate.h"
#include "src/trace/json_value.h"

namespace tprof {

namespace {

std::int64_t clamp0(std::int64_t v) { return std::max<std::int64_t>(0, v); }

// The median absolute deviation from the median.
std::int64_t mad(const std::vector<std::int64_t>& v) {
  const std::int64_t m = internal::mean_median(v);
  std::vector<std::int64_t> dev;
  dev.reserve(v.size());
  for (const std::int64_t x : v) dev.push_back(x > m ? x - m : m - x);
  return internal::mean_median(std::move(dev));
}

double round_to(double v, double scale) { return std::round(v * scale) / scale; }

// distributedInfo.world_size, or -1.
std::int64_t world_size(const Trace& t) {
  const std::string_view info = t.meta.top_level_json("distributedInfo");
  if (info.empty()) return -1;
  Result<internal::JsonValue> v = internal::JsonValue::parse(info);
  const internal::JsonValue* w = v && v->is_object() ? v->find("world_size") : nullptr;
  std::int64_t out = -1;
  return w != nullptr && w->get_int(&out) && out > 0 ? out : -1;
}

}  // namespace

RankSummary summarize_rank(const Trace& trace, std::string source) {
  const internal::DiagnoseContext c(trace, /*with_averages=*/true);
  const Diagnosis d = internal::diagnose(c);
  const internal::HtaKernelTypes k = internal::compute_hta_kernel_types(c);

  RankSummary r;
  r.rank = k.has_rank ? k.rank : -1;
  r.source = std::move(source);
  r.verdict = d.verdict;
  r.has_device = c.has_device();
  r.world_size = world_size(trace);
  for (const StepVerdict& s : d.steps) {
    RankStep st;
    st.step = s.step;
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
  return r;
}

Result<JobSummary> merge_summaries(const std::vector<JobSummary>& parts) {
  JobSummary out;
  for (const JobSummary& p : parts) out.ranks.insert(out.ranks.end(), p.ranks.begin(), p.ranks.end());
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankSummary& a, const RankSummary& b) {
    return std::tie(a.rank, a.source) < std::tie(b.rank, b.source);
  });
  for (std::size_t i = 1; i < out.ranks.size(); ++i) {
    const RankSummary& a = out.ranks[i - 1];
    const RankSummary& b = out.ranks[i];
    if (a.rank >= 0 && a.rank == b.rank) {
      return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(a.rank) + " appears twice (" + a.source +
                                                    " and " + b.source + "); one summary per rank");
    }
    // Two traces without rank numbers and the same file name (from two
    // folders) would sort by input order; refuse rather than guess.
    if (a.rank < 0 && b.rank < 0 && a.source == b.source) {
      return Error(ErrorCode::kInvalidArgument, a.source + " appears twice without a rank number (distributedInfo.rank)");
    }
  }
  return out;
}

JobView compute_job_view(const JobSummary& job) {
  JobView v;
  // Ranks as numbered in the traces, unless one has no number: then every
  // rank is its place in the order of file names (merge sorted -1 first,
  // by source).
  std::vector<const RankSummary*> order;
  for (const RankSummary& r : job.ranks) order.push_back(&r);
  v.ranks_from_file_names = std::any_of(order.begin(), order.end(), [](const RankSummary* r) { return r->rank < 0; });
  if (v.ranks_from_file_names) {
    std::stable_sort(order.begin(), order.end(),
                     [](const RankSummary* a, const RankSummary* b) { return a->source < b->source; });
  }

  std::vector<std::int64_t> medians, comp, comm, idle, shown;
  std::map<std::string, std::int64_t> kernel_types;
  std::int64_t kernel_total = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const RankSummary& s = *order[i];
    RankRow row;
    row.rank = v.ranks_from_file_names ? static_cast<std::int64_t>(i) : s.rank;
    row.source = s.source;
    row.verdict = s.verdict;
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
    row.step_mad_ns = mad(durs);
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
  v.ranks_mad_ns = mad(medians);

  internal::CollectiveView cv = internal::analyze_collectives(order, shown, v.median_step_ns);
  for (std::size_t i = 0; i < v.ranks.size(); ++i) {
    v.ranks[i].waiting_for = std::move(cv.waiting_for[i]);
    v.ranks[i].collectives = cv.collectives[i];
    v.ranks[i].last_at = cv.last_at[i];
  }
  v.alignment = std::move(cv.alignment);
  v.stragglers = std::move(cv.stragglers);
  v.latest = std::move(cv.latest);
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
