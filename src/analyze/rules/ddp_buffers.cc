// ddp_buffers: DistributedDataParallel's per-step host work that its
// options turn off. With broadcast_buffers=True (the default) every forward
// starts with _sync_buffers: rank 0's module buffers (BatchNorm running
// statistics) are flattened, broadcast and unflattened into every rank's
// buffers (_broadcast_coalesced, aten::unflatten_dense_tensors,
// c10d::broadcast_) before the forward may run. After the backward, unless
// gradient_as_bucket_view=True, the reducer copies each allreduced bucket
// back into the .grad tensors (reducer::copy_bucket_to_grad). Origin: issue
// 38, Why 2 and 5 (DDP's unflatten_dense_tensors split over two unrelated
// findings; the fix is DDP's options).
//
// Precondition: the trace shows it: Python stacks (with_stack) with DDP's
// `_sync_buffers` (torch/nn/parallel/distributed.py), else `c10d::broadcast_`
// ops inside `DistributedDataParallel.forward`; in at least half of the
// steps (every call without steps), and their time is >= 1% of the window.
// copy_bucket_to_grad is named only where it is >= 1% of the window too.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.01;
// Warning from 5% of the window.
constexpr double kWarningShare = 0.05;

// DDP's buffer sync in its forward: _sync_buffers (torch 1.11 and later),
// _sync_params before it (the same broadcast of the module buffers).
bool is_sync_buffers(std::string_view name) {
  return (name.ends_with("_sync_buffers") || name.ends_with("_sync_params")) && contains_ci(name, "distributed.py");
}

// Sums the outermost of the events `pick` selects (nested calls of the same
// function count once) and the steps they fall in.
struct Calls {
  std::int64_t count = 0, ns = 0;
  std::vector<std::int64_t> steps;
  std::vector<std::uint32_t> events;  // by start
};

}  // namespace

void rule_ddp_buffers(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const Trace& t = c.trace;
  const bool has_steps = !c.steps.steps.empty();
  Calls sync, copy;
  std::int64_t broadcasts = 0, unflatten = 0;
  // DDP forward scopes, for the broadcast ops of a trace without stacks.
  std::vector<std::pair<std::int64_t, std::int64_t>> forwards;
  std::int64_t sync_end = -1;
  std::uint32_t sync_lane = kNoIndex;
  auto add = [&](Calls& k, std::uint32_t e) {
    ++k.count;
    sat_acc(k.ns, c.dur(e));
    const std::int64_t s = c.step_number_at(c.ts(e));
    if (s >= 0 && (k.steps.empty() || k.steps.back() != s)) k.steps.push_back(s);
    k.events.push_back(e);
  };
  for (std::uint32_t e : c.host_ops) {
    const std::string_view n = c.name(e);
    const EventKind k = c.kind(e);
    if (k == EventKind::kPythonFunction && is_sync_buffers(n)) {
      if (t.events.lane[e] == sync_lane && c.ts(e) < sync_end) continue;  // nested
      sync_lane = t.events.lane[e];
      sync_end = c.end(e);
      add(sync, e);
    } else if (k == EventKind::kUserAnnotation && n == "DistributedDataParallel.forward") {
      forwards.emplace_back(c.ts(e), c.end(e));
    } else if (k == EventKind::kCpuOp && n == "torch.distributed.ddp.reducer::copy_bucket_to_grad") {
      add(copy, e);
    } else if (k == EventKind::kCpuOp && n == "aten::unflatten_dense_tensors") {
      ++unflatten;
    }
  }
  // Without stacks: the broadcasts inside the forward scopes.
  Calls bcast;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || c.name(e) != "c10d::broadcast_") continue;
    const bool in_forward = std::any_of(forwards.begin(), forwards.end(), [&](const auto& f) {
      return f.first <= c.ts(e) && c.ts(e) < f.second;
    });
    if (!in_forward) continue;
    ++broadcasts;
    add(bcast, e);
  }
  const bool from_stack = sync.count > 0;
  const Calls& buf = from_stack ? sync : bcast;
  if (buf.count == 0) return;
  const std::int64_t window = c.window_ns();
  if (window <= 0) return;
  const auto steps = static_cast<std::int64_t>(c.steps.steps.size());
  // Recurrence: a per-step cost, not a one-off.
  if (has_steps && 2 * static_cast<std::int64_t>(buf.steps.size()) < steps) return;
  if (static_cast<double>(buf.ns) < kMinShare * static_cast<double>(window)) return;
  const bool copy_counts = static_cast<double>(copy.ns) >= kMinShare * static_cast<double>(window);
  const std::int64_t per = has_steps ? steps : buf.count;
  const std::string unit = has_steps ? " a step" : " a forward";
  // What the calls cost the GPU: the device work they launch (the
  // broadcast collective, the copies that unflatten it into the buffers,
  // on the critical stream ahead of the forward) and the GPU idle while
  // they run on the host. Their host time costs the step only where the
  // GPU waits for it (a host that runs ahead of a busy GPU hides it).
  std::int64_t device_ns = 0, device_count = 0, idle_ns = 0;
  for (std::uint32_t e : buf.events) {
    sat_acc(idle_ns, std::max<std::int64_t>(0, c.dur(e) - c.device_busy_ns(-1, c.ts(e), c.end(e))));
  }
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex) continue;
    const std::int64_t ts = c.ts(op.launch);
    auto it = std::upper_bound(buf.events.begin(), buf.events.end(), ts,
                               [&](std::int64_t v, std::uint32_t e) { return v < c.ts(e); });
    if (it == buf.events.begin()) continue;
    --it;
    if (ts >= c.end(*it) || t.events.lane[*it] != t.events.lane[op.launch]) continue;
    sat_acc(device_ns, op.end - op.start);
    ++device_count;
  }

  Finding f;
  f.id = "ddp_buffers";
  f.severity = static_cast<double>(buf.ns) >= kWarningShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                         : FindingSeverity::kInfo;
  f.title = "DDP broadcasts its buffers before every forward: " + format_ns(buf.ns / per) + " of host time and " +
            format_ns(device_ns / per) + " of GPU work (" + std::to_string(device_count / per) + " kernels and copies)" + unit +
            " in " + (from_stack ? "_sync_buffers" : "c10d::broadcast_");
  f.evidence.num("sync_buffers_ns", buf.ns)
      .num("sync_buffers_calls", buf.count)
      .num("gpu_work_ns", device_ns)
      .num("gpu_work_count", device_count)
      .num("gpu_idle_in_calls_ns", idle_ns)
      .real("host_pct", 100.0 * static_cast<double>(buf.ns) / static_cast<double>(window))
      .num("broadcast_ops", broadcasts)
      .num("unflatten_dense_tensors_ops", unflatten)
      .text("evidence", from_stack ? "Python stack: torch/nn/parallel/distributed.py _sync_buffers"
                                   : "c10d::broadcast_ inside DistributedDataParallel.forward");
  if (has_steps) add_steps(f.evidence, buf.steps);
  if (copy.count > 0) f.evidence.num("copy_bucket_to_grad_ns", copy.ns).num("copy_bucket_to_grad_calls", copy.count);
  f.advice = "Construct DDP with broadcast_buffers=False where the ranks' buffers need not be rank 0's at every "
             "forward (BatchNorm running statistics: convert to SyncBatchNorm, or sync them once before "
             "evaluation): the " +
             format_ns(buf.ns / per) + " of flatten, broadcast and unflatten" + unit + " go" +
             (copy_counts ? "; gradient_as_bucket_view=True also removes the reducer's copy_bucket_to_grad (" +
                                count_of(copy.count / per, "call") + ", " + format_ns(copy.ns / per) +
                                " of host time" + unit + ")"
                          : std::string()) +
             ". Each forward otherwise starts with a broadcast from rank 0 and a copy per buffer; the host time "
             "costs the step only where the GPU waits for the host (here it idles " +
             format_ns(idle_ns / per) + unit + " in the calls).";
  f.impact_ns = device_ns + idle_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
