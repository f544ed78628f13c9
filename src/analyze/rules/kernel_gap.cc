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
#include <tuple>
#include <vector>

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

struct Gap {
  std::int64_t ns = 0;
  std::int32_t step = -1;  // index into steps
  std::size_t before = 0, after = 0;  // indices into c.device
};

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
      if (gap > 0) {
        pairs[{op.lane, t.events.name[c.device[p].event], t.events.name[op.event]}].push_back({gap, op.step, p, i});
      }
    }
    if (p == SIZE_MAX || op.end >= prev_end[op.lane]) {
      prev[op.lane] = i;
      prev_end[op.lane] = op.end;
    }
  }

  struct Recurring {
    const Key* key;
    std::int64_t median, total;
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
    for (const Gap& g : gaps) {
      all_steps.push_back(g.step);
      if (g.ns >= kMinGapNs) {
        ++hits;
        sat_acc(total, g.ns);
        hit_steps.push_back(g.step);
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
      recurring.push_back({&key, med, total, hits, units, &gaps});
    }
    const double max_one_offs = std::max(1.0, kOneOffShare * static_cast<double>(gaps.size()));
    if (!outliers.empty() && static_cast<double>(outliers.size()) <= max_one_offs) {
      for (const Gap* g : outliers) one_offs.push_back({*g, med});
    }
  }

  const char* unit = by_step ? "steps" : "occurrences";
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
    Finding f;
    f.id = "kernel_gap";
    f.severity = FindingSeverity::kWarning;
    f.title = "Recurring GPU gap of " + format_ns(r.median) + " (median) between " + title_name(t.str(before)) +
              " and " + title_name(t.str(after)) + " in " + std::to_string(r.hits) + " of " + std::to_string(r.units) +
              " " + unit + (r.units != r.gaps->size() ? ", " + std::to_string(r.gaps->size()) + " gaps" : "") + " (" +
            c.lane_label(lane) + ")";
    f.evidence.text("pattern", "recurring")
        .text("lane", c.lane_label(lane))
        .text("before", std::string(t.str(before)))
        .text("after", std::string(t.str(after)))
        .num("median_gap_ns", r.median)
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
    if (comm) {
      f.advice =
          "The device is idle around a collective: it waits for its peers (a slower rank, the network) or for the "
          "host to launch it. Compare the ranks' traces at this point before changing the code.";
    } else {
      f.advice = std::string(
                     "The GPU sits idle between these two activities: the next one was not launched yet (host "
                     "wait), because the CPU spends longer preparing and launching than the GPU spends running. Cut "
                     "per-op CPU work: fuse ops (torch.compile), batch small ops") +
                 (graphs ? ", or move more of the step into the graph it already replays." : ", or replay the step as a " +
                                                                                                 std::string(c.api()) + " graph.");
    }
    f.impact_ns = r.total;
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
  const Gap& top = one_offs.front().first;
  Finding f;
  f.id = "kernel_gap";
  f.severity = FindingSeverity::kInfo;
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
  f.advice =
      "A gap that appears in one step only is rarely the code: the profiler allocating a buffer (Activity Buffer "
      "Request), a cold start in the first step, or host-side housekeeping. Confirm by recording more steps; if it "
      "does not come back, ignore it when judging the step time.";
  f.impact_ns = excess;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
