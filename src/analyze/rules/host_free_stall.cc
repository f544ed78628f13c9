// host_free_stall: frees of large CPU tensors each followed by a stretch in
// which the freeing thread records nothing, with the Python stack and the
// allocator's records on (profile_memory): the time goes to handing the
// memory back to the operating system. glibc's malloc serves blocks of
// 32 MiB or more (its mmap threshold's ceiling) with mmap and unmaps them on
// free, page by page; the next allocation of that size maps and faults its
// pages in again. Origin: issue 38's twenty-second round (scoring half,
// after its figure): nanoBragg's warm CPU run of a 4096x4096 detector, 25
// frees of 64-192 MiB each followed by ~4 ms per 64 MiB with no event,
// 185 ms of 585 (32%), every review's first fix and no finding's.
//
// Precondition: the freeing thread records Python frames (with_stack: else a
// stretch with no event is the program's Python as often as anything); CPU
// [memory] records of frees of kLargeFreeBytes or more,
// in the steps (the whole trace without steps); after each, the thread's
// next recorded boundary (an event's start or end, a Python frame's
// included) comes kMinStallNs or more later, and the innermost event open
// at the free is a Python frame of the program's or none (an op's or a
// builtin's own time is its work); kMinFrees such frees or more,
// their stretches kMinShare of the window or more.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kLargeFreeBytes = 16 << 20;
constexpr std::int64_t kMinStallNs = 1'000'000;
constexpr std::int64_t kMinFrees = 3;
constexpr double kMinShare = 0.05;
constexpr double kWarnShare = 0.10;

std::string mib(std::int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f MiB", static_cast<double>(bytes) / static_cast<double>(1 << 20));
  return b;
}

}  // namespace

void rule_host_free_stall(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  std::unordered_map<std::uint32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> frees;  // lane -> (ts, bytes)
  for (const MemoryRecord& r : t.memory) {
    if (r.device_type != 0 || r.bytes > -kLargeFreeBytes || r.event == kNoIndex) continue;
    const std::int64_t ts = c.ts(r.event);
    if (!c.steps.steps.empty() && c.step_index_at(ts) < 0) continue;
    // (A hostile record's INT64_MIN has no negation: the largest size.)
    frees[t.events.lane[r.event]].push_back({ts, r.bytes == INT64_MIN ? INT64_MAX : -r.bytes});
  }
  if (frees.empty()) return;
  // Each freeing thread's recorded boundaries, sorted, and whether it
  // records Python frames.
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> bounds;
  for (const auto& [lane, v] : frees) bounds[lane];
  std::unordered_set<std::uint32_t> stack_lanes;
  auto add = [&](std::uint32_t e) {
    auto it = bounds.find(t.events.lane[e]);
    if (it == bounds.end()) return;
    it->second.push_back(c.ts(e));
    it->second.push_back(c.end(e));
    if (c.kind(e) == EventKind::kPythonFunction) stack_lanes.insert(t.events.lane[e]);
  };
  for (std::uint32_t e : c.host_ops) add(e);
  for (std::uint32_t e : c.runtime) add(e);
  // Without the Python stack a stretch with no event is the program's
  // Python as often as anything (ParT's CPU forward, no with_stack: 101
  // large frees with 423 ms after them, unattributable).
  std::erase_if(frees, [&](const auto& lane_frees) { return stack_lanes.count(lane_frees.first) == 0; });
  if (frees.empty()) return;
  // Whether the innermost event open at `ts` on the lane computes: an op,
  // a runtime call or a builtin (a compiled kernel's "<built-in function
  // kernel>") whose own time after the free is its work, not the free's.
  // Only a Python frame of the program's (or nothing open) leaves the free
  // the stretch.
  auto computing = [&](std::uint32_t lane, std::int64_t ts) {
    constexpr int kMaxWalk = 4096;
    const std::uint32_t e = c.innermost_enclosing(lane, ts, sat_add(ts, 1), kMaxWalk, [](std::uint32_t) { return true; });
    if (e == kNoIndex) return false;
    if (c.kind(e) == EventKind::kPythonFunction) return c.name(e).starts_with("<built-in");
    // A scope (an annotation, a compiled region) runs the frames inside it.
    return c.kind(e) != EventKind::kUserAnnotation && !is_compiled_scope(c.name(e));
  };
  // Several frees in one stretch (a function's locals as it returns) share
  // it: the stretches are counted once, from the first free in each.
  std::int64_t stalls = 0, stall_ns = 0, freed = 0, smallest = INT64_MAX, largest = 0, longest = 0;
  std::int64_t longest_ts = 0;
  std::uint32_t longest_lane = kNoIndex;
  for (auto& [lane, v] : frees) {
    std::vector<std::int64_t>& b = bounds[lane];
    std::sort(b.begin(), b.end());
    std::vector<Interval> stretches;  // this thread's, merged below
    for (const auto& [ts, bytes] : v) {
      const auto next = std::upper_bound(b.begin(), b.end(), ts);
      if (next == b.end()) continue;
      const std::int64_t gap = sat_sub(*next, ts);
      if (gap < kMinStallNs || computing(lane, ts)) continue;
      ++stalls;
      stretches.push_back({ts, *next});
      sat_acc(freed, bytes);
      smallest = std::min(smallest, bytes);
      largest = std::max(largest, bytes);
    }
    stretches = merge_intervals(std::move(stretches));
    for (const Interval& s : stretches) sat_acc(stall_ns, sat_sub(s.end, s.start));  // each thread's time, summed
    for (const Interval& s : stretches) {
      if (sat_sub(s.end, s.start) > longest) longest = sat_sub(s.end, s.start), longest_ts = s.start, longest_lane = lane;
    }
  }
  const std::int64_t window = c.window_ns();
  if (stalls < kMinFrees || window <= 0 || static_cast<double>(stall_ns) < kMinShare * static_cast<double>(window)) return;
  const double share = static_cast<double>(stall_ns) / static_cast<double>(window);
  const double per_64mib = static_cast<double>(stall_ns) / (static_cast<double>(freed) / static_cast<double>(64 << 20));
  Finding f;
  f.id = "host_free_stall";
  f.severity = share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = std::to_string(stalls) + " frees of large CPU tensors (" +
            (smallest == largest ? mib(largest) : mib(smallest) + " to " + mib(largest)) + ", " + mib(freed) +
            " in all) are followed by stretches with nothing recorded on their thread: " + format_ns(stall_ns) +
            " (" + format_pct(100.0 * share) + (c.steps.steps.empty() ? " of the trace" : " of the steps") +
            "), about " + format_ns(static_cast<std::int64_t>(per_64mib)) + " per 64 MiB freed";
  f.evidence.num("frees", stalls)
      .num("freed_bytes", freed)
      .num("stall_ns", stall_ns)
      .num("longest_stall_ns", longest)
      .num("longest_stall_at_ns", sat_sub(longest_ts, c.start_ns))
      .text("thread", c.lane_label(longest_lane))
      .num("large_free_bytes", kLargeFreeBytes)
      .num("min_stall_ns", kMinStallNs);
  f.advice = "Stop handing large buffers back to the operating system: most likely the allocator returns each one "
             "(glibc's malloc maps blocks of 32 MiB or more with mmap and unmaps them on free, page by page, and the "
             "next allocation of that size faults its pages in again). Reuse the buffers (out= arguments, in-place "
             "ops, fewer full-size intermediates: torch.compile keeps a fused chain's out of memory), process the "
             "data in tiles, or preload a caching allocator (LD_PRELOAD=libjemalloc.so.2 or libtcmalloc.so.4).";
  f.impact_ns = stall_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
