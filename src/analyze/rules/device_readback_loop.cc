// device_readback_loop: an op whose output size the host must read back
// from the device (aten::nonzero, masked_select, unique: torch.where(cond),
// boolean indexing) called over and over in a trace that recorded no
// device activity. On a GPU each call waits for the queued work to finish
// before the host can size the output, a synchronization per call that
// sync_api would measure from runtime calls this trace lacks. Origin:
// issue 38's eighteenth round (a LiDAR pre-training step recorded without
// its device side: 360 torch.where(cond) calls in a Python loop, 20 ms of
// aten::nonzero in a 67 ms region, and the output named only the missing
// device records).
//
// Precondition: no device activity, yet GPU work issued
// (gpu_work_issued); one such op called kMinCalls times or more, its calls
// holding kMinShare of the window or more; the calls run on device
// tensors: half of them or more allocate on a CUDA or HIP device inside
// them ([memory] records, Device Type 1 or 6), as a device op's output is.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMinCalls = 50;
constexpr double kMinShare = 0.05;

// The ops whose output size depends on the data: the host reads it back.
bool sizes_from_data(std::string_view n) {
  return n == "aten::nonzero" || n == "aten::masked_select" || n == "aten::_unique2" || n == "aten::unique_dim" ||
         n == "aten::unique_consecutive";
}

}  // namespace

void rule_device_readback_loop(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (c.has_device() || !gpu_work_issued(c).any()) return;
  const Trace& t = c.trace;
  const EventColumns& ev = t.events;
  // Each such op's calls by lane, sorted by start (host_ops is).
  struct Op {
    std::string_view name;
    std::vector<std::uint32_t> calls;
    std::int64_t ns = 0;
    std::int64_t on_device = 0;  // calls that allocate on a device
  };
  std::vector<Op> ops;
  for (const std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || !sizes_from_data(c.name(e))) continue;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.name == c.name(e); });
    if (it == ops.end()) {
      ops.push_back({c.name(e), {}, 0, 0});
      it = ops.end() - 1;
    }
    it->calls.push_back(e);
    sat_acc(it->ns, c.dur(e));
  }
  if (ops.empty()) return;
  // The op with the most time, if it is called often enough for long
  // enough: only then are the memory records read.
  const std::int64_t window = c.window_ns();
  const auto best = std::max_element(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.ns < b.ns; });
  const auto calls = static_cast<std::int64_t>(best->calls.size());
  if (window <= 0 || calls < kMinCalls || static_cast<double>(best->ns) < kMinShare * static_cast<double>(window)) return;
  // Device allocations, by lane and time: the calls that make one.
  std::vector<std::pair<std::uint32_t, std::int64_t>> allocs;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.kind[e] != EventKind::kMemory) continue;
    const std::int64_t type = c.int_arg(e, "Device Type");
    if ((type == 1 || type == 6) && c.int_arg(e, "Bytes") > 0) allocs.emplace_back(ev.lane[e], ev.ts_ns[e]);
  }
  std::sort(allocs.begin(), allocs.end());
  for (const std::uint32_t e : best->calls) {
    const auto it = std::lower_bound(allocs.begin(), allocs.end(), std::make_pair(ev.lane[e], c.ts(e)));
    best->on_device += it != allocs.end() && it->first == ev.lane[e] && it->second <= c.end(e);
  }
  if (sat_mul(2, best->on_device) < calls) return;
  // The op the program called: the outermost op around most calls
  // (aten::where around aten::nonzero_numpy around aten::nonzero).
  std::vector<std::pair<std::string_view, std::int64_t>> callers;
  std::uint32_t longest = best->calls.front();
  for (const std::uint32_t e : best->calls) {
    if (c.dur(e) > c.dur(longest)) longest = e;
    std::uint32_t outer = e;
    for (int up = 0; up < 4; ++up) {
      const std::uint32_t p = c.enclosing_op(outer, /*skip_views=*/false);
      if (p == kNoIndex) break;
      outer = p;
    }
    auto it = std::find_if(callers.begin(), callers.end(), [&](const auto& x) { return x.first == c.name(outer); });
    if (it == callers.end()) {
      callers.emplace_back(c.name(outer), 1);
    } else {
      ++it->second;
    }
  }
  const auto caller = std::max_element(callers.begin(), callers.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
  const std::string name(best->name);
  const std::string via = caller->first == best->name ? std::string() : " (in " + std::string(caller->first) + ")";
  const double share = static_cast<double>(best->ns) / static_cast<double>(window);
  Finding f;
  f.id = "device_readback_loop";
  f.severity = FindingSeverity::kWarning;
  f.title = name + via + " runs " + std::to_string(calls) + " times on device tensors (" + format_ns(best->ns) + ", " +
            format_pct(100.0 * share) + " of the " + (c.steps.steps.empty() ? "trace" : "steps") +
            "): each call reads its output's size back from the GPU, a synchronization per call";
  f.evidence.num("calls", calls)
      .num("op_ns", best->ns)
      .real("share_pct", 100.0 * share)
      .num("calls_allocating_on_device", best->on_device)
      .text("caller", std::string(caller->first))
      .event("longest", c.ref(longest));
  f.advice = "Take " + name + via + " out of the loop: one call over the stacked inputs, boolean masks (torch.where(cond, "
             "a, b) sizes nothing), or torch.nonzero_static where the count is bounded. Each of the " +
             std::to_string(calls) + " calls waits for the GPU to finish its queued work before the host can go on; "
             "the trace recorded no device activity, so how long each waited is not in it.";
  f.impact_ns = best->ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
