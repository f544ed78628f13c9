// dispatch_gap: the time between entering a record_function scope (a user
// annotation) and its first child op: Python and dispatcher work before
// anything is recorded. Reports the first occurrence (cold start) against
// the rest, and gaps that recur on every call. Origin: docs/trace-reading.md,
// "a ~228 µs gap in the first step between entering
// record_function("matmul_add") and aten::matmul, versus ~4–6 µs in later steps".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

// A first occurrence plus at least two more to compare it with.
constexpr std::size_t kMinOccurrences = 3;
// First-occurrence gap: at least twice the median of the later ones and 10
// µs more (the post: 228 µs vs 4–6 µs; the H100 traces: 22–47 µs vs 4–17 µs).
constexpr double kFirstRatio = 2.0;
constexpr std::int64_t kFirstExcessNs = 10'000;
// ... and a material share of the window (the steps; the trace without
// them): a one-off 10.9 us in a 442.5 ms whole-run recording (tprof
// record's record_plain_64, the first "step" range after the program's own
// warm-up and synchronize) changes nothing (review 2026-11-26, R10). And
// the first call's child is called there for the first time: where it ran
// before (that recording's 20 "step" ranges, its steps since issue 40, are
// 2% of their window 10.9 us slower the first time, after the warm-up
// calls), the first call is not the program's first.
// Half a percent of it: a 7.2 ms first-call gap in a 3.7 s CPU pipeline
// rank (0.19%) was a top cause (issue 38's thirteenth round).
constexpr double kFirstWindowShare = 0.005;
// Recurring gap: a median of at least 20 µs (4× the post's steady 4–6 µs)
// that is also at least 10% of the annotation's median duration.
constexpr std::int64_t kRecurringGapNs = 20'000;
constexpr double kRecurringShare = 0.1;
// ... and the gaps together at least 1% of the window (as kernel_gap's
// patterns): 336 us over three 27-129 ms steps is no cause (issue 38's
// eighth round, a VAE's zero_grad).
constexpr double kRecurringWindowShare = 0.01;

struct Sample {
  std::uint32_t ann = kNoIndex;
  std::uint32_t child = kNoIndex;
  std::int64_t gap_ns = 0;
};

// Scopes torch opens around its own work are not the user's Python: a
// collective's (nccl:all_reduce, gloo:..., record_param_comms) spends the
// time before its launch in the process group, a DataLoader's waits for
// input (dataloader_bound's subject), and zero_grad's is its loop setting
// each .grad to None, which records nothing (issue 38's eighth round: "move
// the Python work out of the scope" of torch's own loop).
bool is_library_scope(std::string_view n) {
  for (std::string_view p :
       {"nccl:", "gloo:", "ucc:", "mpi:", "c10d::", "record_param_comms", "Optimizer.zero_grad#"}) {
    if (n.substr(0, p.size()) == p) return true;
  }
  return is_dataloader_scope(n);
}

// An input step the program annotated ("process frames", "extract
// frames": is_input_annotation) runs its decoding and preprocessing before
// its first op, work that records no op (PIL, numpy, a decoder), not
// dispatch (issue 38's fourteenth round: a video classifier's 48 ms a clip
// of frame preprocessing was told to compile the region); the verdict and
// low_gpu_utilization speak for it.
bool is_scope(const DiagnoseContext& c, std::uint32_t e) {
  return c.kind(e) == EventKind::kUserAnnotation && !is_profiler_step(c.name(e)) && !is_library_scope(c.name(e)) &&
         !is_input_annotation(c.name(e));
}

}  // namespace

void rule_dispatch_gap(const DiagnoseContext& c, std::vector<Finding>* out) {
  // One merged pass over host ops and runtime calls (both sorted by ts). Per
  // lane, the annotations still waiting for their first child: the next event
  // on the lane that starts and ends inside one is its first child; one that
  // starts after its end leaves it without children.
  const EventColumns& ev = c.trace.events;
  std::vector<std::vector<std::uint32_t>> pending(c.trace.lanes.size());
  std::unordered_map<StrId, std::vector<Sample>> by_name;
  // Each name's first start on the host: a first call whose child ran before
  // it (a whole-run recording whose program warmed up before its first
  // range) is no cold start.
  std::vector<std::int64_t> first_seen(c.trace.strings.size(), INT64_MAX);
  c.for_each_host_event([&](std::uint32_t e) {
    first_seen[ev.name[e]] = std::min(first_seen[ev.name[e]], c.ts(e));
    std::vector<std::uint32_t>& p = pending[ev.lane[e]];
    for (std::size_t k = 0; k < p.size();) {
      const std::uint32_t a = p[k];
      if (c.ts(e) >= c.end(a)) {
        p.erase(p.begin() + static_cast<std::ptrdiff_t>(k));
      } else if (c.ts(e) >= c.ts(a) && c.end(e) <= c.end(a)) {
        by_name[ev.name[a]].push_back({a, e, c.ts(e) - c.ts(a)});
        p.erase(p.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
    if (is_scope(c, e)) p.push_back(e);
  });

  struct Pick {
    StrId name = 0;
    bool recurring = false;
    std::int64_t impact = -1;
  };
  std::int64_t window = 0;
  for (const StepStat& st : c.steps.steps) sat_acc(window, st.dur_ns);
  if (c.steps.steps.empty()) window = sat_sub(c.end_ns, c.start_ns);
  // A first call that replays a CUDA graph the trace never captured ran
  // after the program's warm-up, which compiled and captured it: no cold
  // start (issue 38's eighteenth round: a CUDA-graphed ViT's 155 us against
  // 55 us later, "call it once before profiling", in a run already warm).
  const auto replays_earlier_graph = [&c](std::uint32_t ann) {
    if (c.graph_captures() > 0) return false;
    auto it = std::lower_bound(c.runtime.begin(), c.runtime.end(), c.ts(ann),
                               [&c](std::uint32_t r, std::int64_t v) { return c.ts(r) < v; });
    for (; it != c.runtime.end() && c.ts(*it) < c.end(ann); ++it) {
      if (c.end(*it) <= c.end(ann) && is_graph_launch(c.name(*it))) return true;
    }
    return false;
  };
  Pick best;
  for (auto& [name, samples] : by_name) {
    if (samples.size() < kMinOccurrences) continue;
    std::sort(samples.begin(), samples.end(), [&](const Sample& a, const Sample& b) { return c.ts(a.ann) < c.ts(b.ann); });
    std::vector<std::int64_t> later, all, durs;
    for (std::size_t k = 0; k < samples.size(); ++k) {
      all.push_back(samples[k].gap_ns);
      durs.push_back(c.dur(samples[k].ann));
      if (k > 0) later.push_back(samples[k].gap_ns);
    }
    const std::int64_t med_later = upper_median(later);
    const std::int64_t med_all = upper_median(all);
    const std::int64_t first = samples[0].gap_ns;
    const bool first_anomaly = static_cast<double>(first) >= kFirstRatio * static_cast<double>(med_later) &&
                               first - med_later >= kFirstExcessNs &&
                               static_cast<double>(first - med_later) >= kFirstWindowShare * static_cast<double>(window) &&
                               first_seen[ev.name[samples[0].child]] >= c.ts(samples[0].ann) &&
                               !replays_earlier_graph(samples[0].ann);
    std::int64_t sum_all = 0;
    for (std::int64_t g : all) sat_acc(sum_all, g);
    const bool recurring = med_all >= kRecurringGapNs &&
                           static_cast<double>(med_all) >= kRecurringShare * static_cast<double>(upper_median(durs)) &&
                           static_cast<double>(sum_all) >= kRecurringWindowShare * static_cast<double>(window);
    if (!first_anomaly && !recurring) continue;
    const std::int64_t impact = recurring ? sum_all : first - med_later;
    if (impact > best.impact || (impact == best.impact && name < best.name)) best = {name, recurring, impact};
  }
  if (best.impact < 0) return;

  const std::vector<Sample>& samples = by_name[best.name];
  std::vector<std::int64_t> later, all;
  std::int64_t total = 0;
  std::size_t widest = 0;
  std::vector<std::int64_t> gap_steps;
  for (std::size_t k = 0; k < samples.size(); ++k) {
    sat_acc(total, samples[k].gap_ns);
    all.push_back(samples[k].gap_ns);
    if (k > 0) later.push_back(samples[k].gap_ns);
    if (samples[k].gap_ns > samples[widest].gap_ns) widest = k;
  }
  const std::int64_t med_later = upper_median(later);
  const std::int64_t first = samples[0].gap_ns;
  // Steps with a gap worth a look: every one over the recurring floor, and
  // the first occurrence when it stands out.
  const std::int64_t first_step = c.step_number_at(c.ts(samples[0].ann));
  if (!best.recurring && first_step >= 0) gap_steps.push_back(first_step);
  for (const Sample& s : samples) {
    if (!best.recurring) break;
    const std::int64_t st = c.step_number_at(c.ts(s.ann));
    if (s.gap_ns >= kRecurringGapNs && st >= 0 && (gap_steps.empty() || gap_steps.back() != st)) gap_steps.push_back(st);
  }

  const std::string name(c.trace.str(best.name));
  const std::string child(c.name(samples[0].child));
  Finding f;
  f.id = "dispatch_gap";
  f.severity = best.recurring ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  if (best.recurring) {
    f.title = "Dispatch gap in \"" + name + "\": median " + format_ns(upper_median(all)) + " before " + child +
              " on every call (" + std::to_string(samples.size()) + " calls, " + format_ns(total) + " in all)";
  } else {
    f.title = "Dispatch gap in \"" + name + "\": " + format_ns(first) + " before " + child + " on the first call vs " +
              format_ns(med_later) + " later";
  }
  f.evidence.text("annotation", name)
      .text("first_child", child)
      .text("pattern", best.recurring ? "recurring" : "first_call")
      .num("count", static_cast<std::int64_t>(samples.size()))
      .num("first_gap_ns", first)
      .num("median_later_gap_ns", med_later)
      .num("median_gap_ns", upper_median(all))
      .num("max_later_gap_ns", later.empty() ? 0 : *std::max_element(later.begin(), later.end()))
      .num("total_gap_ns", total)
      .event("first_annotation", c.ref(samples[0].ann))
      .event("first_child_event", c.ref(samples[0].child));
  if (widest != 0) f.evidence.event("widest_gap_annotation", c.ref(samples[widest].ann));
  if (!gap_steps.empty()) add_steps(f.evidence, std::move(gap_steps));
  if (best.recurring && name.rfind("Optimizer.step#", 0) == 0) {
    f.advice = std::string(c.torch_before_compile()
                               ? "Use the fused optimizer (fused=True on torch.optim.Adam/AdamW, PyTorch 1.13 and later; "
                                 "foreach=True before it)"
                               : "Use the fused optimizer (fused=True on torch.optim.Adam/AdamW/SGD) or compile the step "
                                 "(torch.compile(optimizer.step))") +
               ": \"" + name + "\" spends a median " + format_ns(upper_median(all)) +
               " before " + child + " on each of " + std::to_string(samples.size()) + " calls, " + format_ns(total) +
               " in all. That time is the optimizer's Python grouping parameters and their state before the first "
               "kernel is launched.";
  } else if (best.recurring) {
    f.advice = c.is_torch()
                   ? "Move the Python work that runs in \"" + name + "\" before " + child +
                         " out of the scope (shape checks, .item(), list building, per-call module lookups), or compile "
                         "the region (" + c.compile_how() + ") so it dispatches as one graph: it costs a median " +
                         format_ns(upper_median(all)) + " on each of " + std::to_string(samples.size()) + " calls, " +
                         format_ns(total) +
                         " in all. Nothing is recorded between entering the scope and its first op, so that time is "
                         "Python and dispatcher work, not GPU work."
                   : "Move the host work that runs in \"" + name + "\" before " + child +
                         " out of the scope (set-up, allocation, argument checks), or replay the region as a " +
                         std::string(c.api()) + " graph (" + c.graph_how() + "): it costs a median " +
                         format_ns(upper_median(all)) + " on each of " + std::to_string(samples.size()) + " calls, " +
                         format_ns(total) + " in all. Nothing is recorded between entering the scope and its first "
                         "call, so that time is the program's own host code, not GPU work.";
  } else {
    f.advice = "Call \"" + name + "\" once before profiling (a warm-up iteration): its first call spends " +
               format_ns(first) + " before " + child + " against " + format_ns(med_later) +
               " on later calls. Only the first call pays for lazy initialisation" +
               (c.has_device() ? ", cuBLAS/cuDNN heuristics" : std::string()) + " and cache fills.";
  }
  // What the gaps cost: on a device trace, the GPU idle inside them (a host
  // gap while the device runs queued work costs no device time; gaps on
  // several threads at once count once); on a CPU-only trace, their union.
  // Never more than the window.
  std::vector<Interval> gaps;
  if (best.recurring) {
    for (const Sample& s : samples) gaps.push_back({c.ts(s.ann), c.ts(s.child)});
  } else {
    gaps.push_back({c.ts(samples[0].ann), c.ts(samples[0].child)});
  }
  gaps = merge_intervals(std::move(gaps));
  const std::int64_t gaps_ns = total_length(gaps);
  std::int64_t cost = gaps_ns;
  if (c.has_device()) {
    const std::vector<Finding> none;
    cost = total_length(claimable_idle(c.idle(), kAllCauses, &gaps, none));
    f.evidence.num("gpu_idle_in_gaps_ns", cost);
  }
  f.impact_ns = std::min({best.impact, cost, c.window_ns()});
  // A first call's gap is its step's, once (diagnose.cc: no share of every
  // step; review 2026-11-26, round 8).
  if (!best.recurring && first_step >= 0 && f.impact_ns > 0) {
    f.evidence.num("once_ns", f.impact_ns).num("once_step", first_step);
  }
  // Recurring gaps the device mostly runs through are a host matter: info.
  if (best.recurring && c.has_device() && sat_mul(2, cost) < gaps_ns) {
    f.severity = FindingSeverity::kInfo;
    f.advice += " The device stays busy through most of these gaps (" + format_ns(cost) + " idle of " +
                format_ns(gaps_ns) + "), so they cost the run little as it stands.";
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
