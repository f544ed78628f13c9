// kernel_gap: idle time between consecutive device activities of one step on
// one stream, keyed by the pair (stream, activity before, activity after) so
// the same gap can be compared across steps. A gap seen in most steps is a
// recurring one (the GPU waits on the host every step); a gap far above its
// usual size in one step is a one-off (the profiler's buffer request, a cold
// start). Cheatsheet: "A gap between two kernels inside one step that appears
// only once in 20 steps is another buffer request — the profiler, not the
// code"; the peers' "long GPU gaps" and HTA's host wait / kernel wait.
// Preconditions: a gap is GPU idle time, so only the part of it where no
// other stream of the device runs counts (a NCCL stream waiting while the
// compute stream works is not a gap); "N of M steps" counts steps (a step
// holds a hit when the pair's gap reached kMinGapNs at least once in it),
// and traces with fewer than kMinUnits steps count occurrences instead.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A launch on an idle GPU costs ~5–10 µs (the post's later steps: ~4–6 µs
// between annotation and op; HTA calls shorter waits "kernel wait"). A gap
// at least this long is GPU time lost to something else.
constexpr std::int64_t kMinGapNs = 10'000;
// Recurring: the pair's gap is at least kMinGapNs in this share of the steps
// (or instances, without steps) where the pair occurs, over at least
// kMinUnits of them.
constexpr double kRecurringShare = 0.5;
constexpr std::size_t kMinUnits = 3;
// One-off: at least this many times the pair's median gap, in at most
// kOneOffShare of the steps (at least one): "once in 20 steps".
constexpr double kOneOffFactor = 3.0;
constexpr double kOneOffShare = 0.1;
// Findings and listed events are capped (largest first).
constexpr std::size_t kMaxRecurring = 3;
constexpr std::size_t kMaxListed = 5;

// Warning once the GPU idle time a finding accounts for (its claim on the
// idle partition) reaches this share of the window: a gap pattern worth the
// reader's time, not "a recurring gap of 1 ns".
constexpr double kWarnShare = 0.01;
// A pattern (its gaps, or a one-off's excess) below this share of the window
// is not reported.
constexpr double kMinShare = 0.01;

struct Gap {
  std::int64_t ns = 0;
  std::int32_t step = -1;  // index into steps
  std::size_t before = 0, after = 0;  // indices into c.device
  Interval range;          // [end of the activity before, start of the one after)
};

// The idle ranges of `gaps` (those of kMinGapNs or more) that the finding
// can claim: shared causes only (blocked_* and profiler belong to their own
// rules), minus what earlier findings claimed.
std::vector<Interval> gap_claim(const DiagnoseContext& c, const std::vector<const Gap*>& gaps,
                                const std::vector<Finding>& earlier) {
  std::vector<Interval> ranges;
  for (const Gap* g : gaps) {
    if (g->ns >= kMinGapNs) ranges.push_back(g->range);
  }
  ranges = merge_intervals(std::move(ranges));
  return claimable_idle(c.idle(), kAllCauses & ~kReservedCauses, &ranges, earlier);
}

// The partition's view of the gaps: their idle time by cause, as evidence,
// and the cause holding most of it.
IdleCause add_idle_evidence(const DiagnoseContext& c, const std::vector<const Gap*>& gaps, Finding& f) {
  std::vector<Interval> ranges;
  for (const Gap* g : gaps) {
    if (g->ns >= kMinGapNs) ranges.push_back(g->range);
  }
  const IdlePartition::Totals t = idle_by_cause(c.idle(), merge_intervals(std::move(ranges)));
  std::vector<std::string> parts;
  for (int k = 0; k < kIdleCauseCount; ++k) {
    if (t[static_cast<std::size_t>(k)] > 0) {
      parts.push_back(std::string(idle_cause_id(static_cast<IdleCause>(k))) + " " + format_ns(t[static_cast<std::size_t>(k)]));
    }
  }
  const IdleCause top = dominant_cause(t);
  f.evidence.text("idle_cause", std::string(idle_cause_id(top))).texts("idle_by_cause", parts).num("gpu_idle_ns", f.idle_ns);
  return top;
}

std::string gap_advice(IdleCause cause, bool comm, bool graphs, std::string_view api, const std::string& before,
                       const std::string& after) {
  if (comm || cause == IdleCause::kPeers) {
    return "Find the rank that reaches this collective last (tprof diagnose on the job's trace directory names it) "
           "and fix what it does before it; this rank's GPU waits for its peers (or for the host to launch the "
           "collective), which no change on this rank removes.";
  }
  switch (cause) {
    case IdleCause::kStreamWait:
      return "Start earlier, or split, the work " + after +
             " waits for on another stream (the event behind a cudaStreamWaitEvent), so the wait overlaps compute. "
             "The kernel was launched in time and waited on the device, not on the host.";
    case IdleCause::kBlockedSync:
    case IdleCause::kBlockedCopy:
    case IdleCause::kBlockedAlloc:
    case IdleCause::kBlockedInit:
    case IdleCause::kBlockedLaunchQueue:
    case IdleCause::kBlockedOther:
      return "Remove the blocking call the host sits in between " + before + " and " + after +
             " (sync_api and host_blocked name it and where it runs). The next kernel is launched only when it "
             "returns.";
    case IdleCause::kHostWork:
      return "Move the host work between " + before + " and " + after +
             " out of the step or overlap it with device work (DataLoader workers, prefetching, a side thread). The "
             "host runs 1 ms or more without launching anything.";
    case IdleCause::kUnrecorded:
      return "Record the host side that feeds this GPU (other threads, the Python stack, the producing process): "
             "nothing is recorded on the host while the GPU waits, so the cause lies outside this trace.";
    default:
      break;
  }
  return (graphs ? std::string("Move the ops between ") + before + " and " + after +
                       " into the graph the step already replays, or fuse them (torch.compile)"
                 : "Replay the step as a " + std::string(api) +
                       " graph (torch.compile(mode=\"reduce-overhead\")) or fuse the ops between " + before +
                       " and " + after + " (torch.compile)") +
         ". The host launches op after op slower than the GPU runs them, so " + after + " starts late.";
}

}  // namespace

void rule_kernel_gap(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const bool has_steps = !c.steps.steps.empty();
  const bool by_step = c.steps.steps.size() >= kMinUnits;
  // One pass in start order: the previous activity on each stream.
  std::vector<std::size_t> prev(t.lanes.size(), SIZE_MAX);
  std::vector<std::int64_t> prev_end(t.lanes.size(), INT64_MIN);
  using Key = std::tuple<std::uint32_t, StrId, StrId>;
  std::map<Key, std::vector<Gap>> pairs;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const std::size_t p = prev[op.lane];
    // Only gaps inside one step (both launched by it), or anywhere without steps.
    if (p != SIZE_MAX && (!has_steps || (op.step >= 0 && c.device[p].step == op.step))) {
      const std::int64_t gap =
          op.start - prev_end[op.lane] - c.device_busy_ns(op.device, prev_end[op.lane], op.start);
      // Gaps between two collectives are the collectives' schedule: the
      // stream waits for the next one to be launched or for the peers (the
      // partition's peers cause), not a gap between kernels.
      const bool both_comm = op.cls == DeviceClass::kComm && c.device[p].cls == DeviceClass::kComm;
      if (gap > 0 && !both_comm) {
        pairs[{op.lane, t.events.name[c.device[p].event], t.events.name[op.event]}].push_back(
            {gap, op.step, p, i, {prev_end[op.lane], op.start}});
      }
    }
    if (p == SIZE_MAX || op.end >= prev_end[op.lane]) {
      prev[op.lane] = i;
      prev_end[op.lane] = op.end;
    }
  }

  struct Recurring {
    const Key* key;
    std::int64_t median, total, long_median;
    std::size_t hits, units;
    const std::vector<Gap>* gaps;
  };
  std::vector<Recurring> recurring;
  std::vector<std::pair<Gap, std::int64_t>> one_offs;  // gap, the pair's median
  for (const auto& [key, gaps] : pairs) {
    if (gaps.size() < kMinUnits) continue;
    std::vector<std::int64_t> ns;
    for (const Gap& g : gaps) ns.push_back(g.ns);
    const std::int64_t med = lower_median(ns);
    std::size_t hits = 0;
    std::int64_t total = 0;
    std::vector<const Gap*> outliers;
    std::vector<std::int32_t> hit_steps, all_steps;
    std::vector<std::int64_t> long_gaps;
    for (const Gap& g : gaps) {
      all_steps.push_back(g.step);
      if (g.ns >= kMinGapNs) {
        ++hits;
        sat_acc(total, g.ns);
        hit_steps.push_back(g.step);
        long_gaps.push_back(g.ns);
      }
      if (g.ns >= kMinGapNs && static_cast<double>(g.ns) >= kOneOffFactor * static_cast<double>(med)) outliers.push_back(&g);
    }
    std::size_t units = gaps.size();
    if (by_step) {
      auto distinct = [](std::vector<std::int32_t>& v) {
        std::sort(v.begin(), v.end());
        return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
      };
      hits = distinct(hit_steps);
      units = distinct(all_steps);
    }
    if (units >= kMinUnits && static_cast<double>(hits) >= kRecurringShare * static_cast<double>(units)) {
      recurring.push_back({&key, med, total, lower_median(std::move(long_gaps)), hits, units, &gaps});
    }
    const double max_one_offs = std::max(1.0, kOneOffShare * static_cast<double>(gaps.size()));
    if (!outliers.empty() && static_cast<double>(outliers.size()) <= max_one_offs) {
      for (const Gap* g : outliers) one_offs.push_back({*g, med});
    }
  }

  const char* unit = by_step ? "steps" : "occurrences";
  const std::int64_t window = c.window_ns();
  // Precondition (impact): the pattern's gaps add up to kMinShare of the
  // window; a recurring 30 µs gap in a 10 ms step is not worth a line.
  std::erase_if(recurring, [&](const Recurring& r) {
    return static_cast<double>(r.total) < kMinShare * static_cast<double>(window);
  });
  std::sort(recurring.begin(), recurring.end(), [](const Recurring& a, const Recurring& b) { return a.total > b.total; });
  const bool graphs = c.graph_launches() > 0;
  if (recurring.size() > kMaxRecurring) recurring.resize(kMaxRecurring);
  for (const Recurring& r : recurring) {
    const auto& [lane, before, after] = *r.key;
    std::vector<EventRef> refs;
    std::vector<std::int64_t> sizes;
    const Gap* largest = &r.gaps->front();
    for (const Gap& g : *r.gaps) {
      if (g.ns > largest->ns) largest = &g;
      if (sizes.size() < 100) sizes.push_back(g.ns);
    }
    std::vector<const Gap*> listed;
    for (const Gap& g : *r.gaps) listed.push_back(&g);
    Finding f;
    f.id = "kernel_gap";
    set_idle_claim(f, gap_claim(c, listed, *out));
    f.severity = static_cast<double>(f.idle_ns) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                            : FindingSeverity::kInfo;
    // The title quotes the gaps the finding is about (those of kMinGapNs or
    // more): a pair that is back to back but for one long gap a step is not
    // "a recurring gap of 1 ns".
    f.title = "Recurring GPU gap of " + format_ns(r.long_median) + " (median) between " + title_name(t.str(before)) +
              " and " + title_name(t.str(after)) + " in " + std::to_string(r.hits) + " of " + std::to_string(r.units) +
              " " + unit + (r.units != r.gaps->size() ? ", " + std::to_string(r.gaps->size()) + " gaps" : "") + " (" +
            c.lane_label(lane) + ")";
    f.evidence.text("pattern", "recurring")
        .text("lane", c.lane_label(lane))
        .text("before", std::string(t.str(before)))
        .text("after", std::string(t.str(after)))
        .num("median_gap_ns", r.median)
        .num("median_long_gap_ns", r.long_median)
        .num("max_gap_ns", largest->ns)
        .num("total_gap_ns", r.total)
        .num("occurrences", static_cast<std::int64_t>(r.hits))
        .num("units", static_cast<std::int64_t>(r.units))
        .text("unit", unit)
        .num("gaps", static_cast<std::int64_t>(r.gaps->size()))
        .ints("gaps_ns", sizes)
        .event("kernel_before", c.ref(c.device[largest->before].event))
        .event("kernel_after", c.ref(c.device[largest->after].event));
    if (c.device[largest->after].launch != kNoIndex) f.evidence.event("launch_after", c.ref(c.device[largest->after].launch));
    const bool comm = is_comm_kernel(t.str(before)) || is_comm_kernel(t.str(after));
    f.advice = gap_advice(add_idle_evidence(c, listed, f), comm, graphs, c.api(), title_name(t.str(before)),
                          title_name(t.str(after)));
    f.impact_ns = f.idle_ns;
    out->push_back(std::move(f));
  }

  if (one_offs.empty()) return;
  std::sort(one_offs.begin(), one_offs.end(), [](const auto& a, const auto& b) { return a.first.ns > b.first.ns; });
  std::int64_t excess = 0;
  std::vector<std::int64_t> steps, sizes;
  std::vector<EventRef> befores, afters;
  for (const auto& [g, med] : one_offs) {
    sat_acc(excess, g.ns - med);
    const std::int64_t s = c.step_number(g.step);
    if (std::find(steps.begin(), steps.end(), s) == steps.end() && steps.size() < 100) steps.push_back(s);
    if (befores.size() < kMaxListed) {
      sizes.push_back(g.ns);
      befores.push_back(c.ref(c.device[g.before].event));
      afters.push_back(c.ref(c.device[g.after].event));
    }
  }
  // Precondition (impact): their excess over the usual gaps is kMinShare
  // of the window.
  if (static_cast<double>(excess) < kMinShare * static_cast<double>(window)) return;
  const Gap& top = one_offs.front().first;
  std::vector<const Gap*> listed;
  for (const auto& [g, med] : one_offs) listed.push_back(&g);
  Finding f;
  f.id = "kernel_gap";
  f.severity = FindingSeverity::kInfo;
  set_idle_claim(f, gap_claim(c, listed, *out));
  f.title = "One-off GPU gap of " + format_ns(top.ns) + (has_steps ? " in step " + std::to_string(c.step_number(top.step)) : "") +
            " between " + title_name(c.name(c.device[top.before].event)) + " and " +
            title_name(c.name(c.device[top.after].event)) + " (usually " + format_ns(one_offs.front().second) + ")" +
            (one_offs.size() > 1 ? ", " + std::to_string(one_offs.size() - 1) + " more" : "");
  f.evidence.text("pattern", "one-off")
      .num("gap_ns", top.ns)
      .num("usual_gap_ns", one_offs.front().second)
      .num("count", static_cast<std::int64_t>(one_offs.size()))
      .num("excess_ns", excess)
      .ints("steps", steps)
      .ints("gaps_ns", sizes)
      .events("kernels_before", std::move(befores))
      .events("kernels_after", std::move(afters));
  add_idle_evidence(c, listed, f);
  f.advice =
      "Record more steps and leave this gap out of the step time if it does not come back. A gap in one step only "
      "is rarely the code: the profiler allocating a buffer (Activity Buffer Request), a cold start in the first "
      "step, or host-side housekeeping.";
  // What it accounts for, at most its excess over the usual gaps.
  f.impact_ns = std::min(excess, f.idle_ns);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
