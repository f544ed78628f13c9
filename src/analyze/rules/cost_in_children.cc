// cost_in_children: a row whose CPU total is many times its Self CPU: its
// time lives in the ops it calls. Names the biggest such row (not every
// wrapper of the chain), its top children, and the drill-down path to where
// the time is finally self time. Origin: docs/trace-reading.md, "CPU total ≫
// Self CPU for a row: the cost lives in its children; drill down".
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// "≫": CPU total at least 5× Self CPU, i.e. ≥ 80% of the row's time in its
// children (aten::matmul over aten::mm on the H100 traces: 17×; the user
// annotation around the whole step: about 4×).
constexpr double kTotalToSelf = 5.0;
// Only rows that matter: CPU total ≥ 10% of the Self CPU total.
constexpr double kMinShareOfCpu = 0.1;
// Drill into a child while it holds at least half of its parent's time.
constexpr double kDrillShare = 0.5;
constexpr int kMaxDrillDepth = 8;
constexpr std::size_t kTopChildren = 3;
// A GPU busy this share of the steps (compute_bound's threshold) hides the
// host's time: where the host spends it changes nothing, so the rule is
// silent.
constexpr double kGpuBoundShare = 0.8;

struct ChildStat {
  std::int64_t ns = 0;
  std::int64_t count = 0;
};

std::uint64_t pair_key(StrId parent, StrId child) { return (static_cast<std::uint64_t>(parent) << 32) | child; }

}  // namespace

void rule_cost_in_children(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::int64_t cpu_total = c.self_cpu_total_ns();
  if (cpu_total <= 0) return;
  if (c.has_device()) {
    const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
    if (w.span_ns > 0 && static_cast<double>(w.busy_ns) >= kGpuBoundShare * static_cast<double>(w.span_ns)) return;
  }
  const StatRow* best = nullptr;
  for (const StatRow& r : c.averages()) {
    if (r.is_device || is_profiler_step(r.key) || r.cpu_time_total_ns <= 0) continue;
    if (static_cast<double>(r.cpu_time_total_ns) < kTotalToSelf * static_cast<double>(r.self_cpu_time_total_ns))
      continue;
    if (static_cast<double>(r.cpu_time_total_ns) < kMinShareOfCpu * static_cast<double>(cpu_total)) continue;
    if (best == nullptr ||
        sat_sub(r.cpu_time_total_ns, r.self_cpu_time_total_ns) >
            sat_sub(best->cpu_time_total_ns, best->self_cpu_time_total_ns)) {
      best = &r;
    }
  }
  if (best == nullptr) return;
  const std::optional<StrId> best_id = c.trace.strings.find(best->key);
  if (!best_id) return;

  // One pass over host ops and runtime calls (both sorted by ts), merged,
  // with a stack per CPU lane: each event's parent is the innermost open
  // event on its lane that contains it. Children are aggregated by
  // (parent name, child name); durations per name give each node's total.
  // A call nested in a call of the same name (aten::copy_ inside
  // aten::copy_) is recursion, not a child: its time is already in the outer
  // call's, so it adds to neither the name's total nor its children, and its
  // own children count as the outer call's. (torch's CPU total adds both.)
  const EventColumns& ev = c.trace.events;
  struct Open {
    std::uint32_t e;
  };
  std::vector<std::vector<Open>> stacks(c.trace.lanes.size());
  std::unordered_map<std::uint64_t, ChildStat> children;
  std::unordered_map<StrId, std::int64_t> name_total;
  std::vector<std::uint32_t> instances;
  std::vector<std::int64_t> steps;
  c.for_each_host_event([&](std::uint32_t e) {
    std::vector<Open>& st = stacks[ev.lane[e]];
    while (!st.empty() && !(c.ts(st.back().e) <= c.ts(e) && c.end(e) <= c.end(st.back().e))) st.pop_back();
    const StrId name = ev.name[e];
    bool recursive = false;
    for (auto it = st.rbegin(); it != st.rend() && !recursive; ++it) recursive = ev.name[it->e] == name;
    if (!recursive) name_total[name] = sat_add(name_total[name], c.dur(e));
    if (!st.empty() && ev.name[st.back().e] != name) {
      ChildStat& cs = children[pair_key(ev.name[st.back().e], name)];
      cs.ns = sat_add(cs.ns, c.dur(e));
      ++cs.count;
    }
    if (name == *best_id && !recursive) {
      instances.push_back(e);
      const std::int64_t s = c.step_number_at(c.ts(e));
      if (s >= 0 && (steps.empty() || steps.back() != s)) steps.push_back(s);
    }
    st.push_back({e});
  });

  // Children of one name, biggest first.
  auto children_of = [&](StrId parent) {
    std::vector<std::pair<StrId, ChildStat>> v;
    for (const auto& [k, cs] : children) {
      if (static_cast<StrId>(k >> 32) == parent) v.emplace_back(static_cast<StrId>(k & 0xffffffffu), cs);
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    return v;
  };
  const auto top = children_of(*best_id);
  if (top.empty()) return;
  const std::int64_t best_total_dur = std::max<std::int64_t>(1, name_total[*best_id]);
  std::vector<std::string> child_texts;
  for (std::size_t k = 0; k < top.size() && k < kTopChildren; ++k) {
    child_texts.push_back(
        std::string(c.trace.str(top[k].first)) + " " + format_ns(top[k].second.ns) + " (" +
        format_pct(100.0 * static_cast<double>(top[k].second.ns) / static_cast<double>(best_total_dur)) + ", " +
        std::to_string(top[k].second.count) + " calls)");
  }
  // The drill-down path: follow the biggest child while it holds most of
  // its parent's time.
  std::vector<std::string> path{best->key};
  std::unordered_set<StrId> seen{*best_id};
  StrId cur = *best_id;
  for (int depth = 0; depth < kMaxDrillDepth; ++depth) {
    const auto kids = children_of(cur);
    if (kids.empty() || seen.count(kids[0].first) != 0) break;
    const double parent_ns = static_cast<double>(std::max<std::int64_t>(1, name_total[cur]));
    if (static_cast<double>(kids[0].second.ns) < kDrillShare * parent_ns) break;
    cur = kids[0].first;
    seen.insert(cur);
    path.emplace_back(c.trace.str(cur));
  }

  // The row's time counted once: its outermost calls. torch's CPU total adds
  // nested calls of the same name again (926 ms of aten::copy_ in a 474 ms
  // trace); the rule weighs and prints the outermost time.
  const std::int64_t total =
      std::min(best->cpu_time_total_ns, name_total[*best_id] > 0 ? name_total[*best_id] : best->cpu_time_total_ns);
  const bool nested = total < best->cpu_time_total_ns;
  const std::int64_t self = best->self_cpu_time_total_ns;
  if (self > 0 && static_cast<double>(total) < kTotalToSelf * static_cast<double>(self)) return;
  const std::int64_t in_children = total - std::max<std::int64_t>(0, self);
  Finding f;
  f.id = "cost_in_children";
  f.severity = FindingSeverity::kInfo;
  // torch's legacy self times can be < 0 (children's times add up past their
  // parent's): then all of the row's time is in its children, and the
  // negative figure is torch's, named as such rather than printed as a time.
  const bool has_self = self > 0;
  const double ratio = has_self ? static_cast<double>(total) / static_cast<double>(self) : 0;
  char r[32];
  std::snprintf(r, sizeof r, "%.1fx", ratio);
  f.title = best->key + ": CPU total " + format_ns(total) + (nested ? " (outermost calls)" : "");
  if (has_self) {
    f.title += " vs Self CPU " + format_ns(self) + " (" + r + ")";
  } else if (self < 0) {
    f.title += ", all in its children (torch's table shows Self CPU " + format_ns(self) + ")";
  } else {
    f.title += ", all in its children";
  }
  f.title += "; the cost is in " + std::string(c.trace.str(top[0].first));
  f.evidence.text("key", best->key)
      .num("cpu_total_ns", total)
      .num("self_cpu_ns", best->self_cpu_time_total_ns)
      .num("children_ns", in_children)
      .num("count", best->count)
      .texts("top_children", std::move(child_texts))
      .num("top_child_ns", top[0].second.ns)
      .texts("drill_path", path);
  if (nested) f.evidence.num("torch_cpu_total_ns", best->cpu_time_total_ns);
  if (has_self) f.evidence.real("total_to_self_ratio", ratio);
  if (!instances.empty()) {
    const std::uint32_t longest = *std::max_element(
        instances.begin(), instances.end(), [&](std::uint32_t a, std::uint32_t b) { return c.dur(a) < c.dur(b); });
    f.evidence.event("longest", c.ref(longest));
  }
  if (!steps.empty()) add_steps(f.evidence, std::move(steps));
  std::string drill;
  for (const std::string& p : path) drill += (drill.empty() ? "" : " → ") + p;
  f.advice = "Look for the time in " + path.back() + (path.size() > 1 ? " (" + drill + ")" : std::string()) +
             ", not in " + best->key + " itself: its child " + std::string(c.trace.str(top[0].first)) + " takes " +
             format_ns(top[0].second.ns) + " of its " + format_ns(total) +
             ". A row's CPU total counts its children, and here the children hold the time.";
  // A drill path, not a saving: no impact.
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
