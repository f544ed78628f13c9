// memory_bound_elementwise: an elementwise kernel that holds a material
// share of GPU time. Elementwise kernels do about one operation per element
// loaded, far below any GPU's ridge point: their time is memory traffic,
// and the fix is fewer round trips to memory (fusion), not faster math.
// Origin: docs/trace-reading.md, the blog's 4096 run (the add kernel, 15% of
// GPU time at the HBM ceiling, fusable into the GEMM's epilogue). The fix is
// in the program's API (DiagnoseContext::is_torch): torch.compile for
// PyTorch, a cuBLASLt epilogue or a fused kernel for a C++ program.
// Precondition: the kernel holds kMinShare of device time, kMinTimeNs in
// all over kMinCount instances, and its instances average kMinMeanNs or
// more (a shorter kernel is latency-bound). Where the GPU idles most of the
// window (busy < kMinBusyShare over the steps, or the trace without steps)
// a shorter kernel shortens nothing: the host sets the pace. The finding
// stays, as info with no saving, its fix after the host's (issue 38 review:
// autocast's casts, 21% of GPU time on a ParT forward whose GPU idles 99%,
// were a top cause "up to 1.650 ms"). Multi-tensor (_foreach_) kernels are
// already fused across their tensors: not this rule's.
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A material share: 10% of all device time, 100 us in all, 2 instances.
constexpr double kMinShare = 0.10;
constexpr std::int64_t kMinTimeNs = 100'000;
constexpr std::int64_t kMinCount = 2;
// "Near the ceiling": 70% of the device's HBM bandwidth or more.
constexpr double kNearCeiling = 0.70;
// Below this share of the HBM bandwidth a kernel is not at the memory
// ceiling: its time is not the traffic alone, and it is not called
// memory-bound (issue 38, fifth round: kernels called memory-bound by
// class while they moved a few GB/s).
constexpr double kFarBelowCeiling = 0.25;
// A rate this far above the HBM peak means the byte count is wrong (an
// input the kernel does not read, a broadcast read once from cache): the
// rate is not printed.
constexpr double kImplausibleOfPeak = 1.5;
// A kernel whose instances average under this is latency-bound, not
// memory-bound: a launch's fixed cost (ramp-up, tail, a few µs on every
// GPU here) is most of its time, whatever its bytes (issue 38: 2 µs
// optimizer adds called memory-bound; their fix is fewer launches, the
// per_param_optimizer and launch-overhead findings).
constexpr std::int64_t kMinMeanNs = 5'000;
// A kernel whose instances move under this many bytes each is latency-bound
// too: at any HBM rate here its traffic takes well under a microsecond, and
// its time is a kernel's fixed cost on a few blocks (issue 38's fourteenth
// round: a Mamba-3 decode step's multiplies of 2K-element tensors, 75 KB
// and 5.5 us a call, read as 0.9% of the A100's bandwidth and blamed on
// strided inputs or clocks).
constexpr double kMinBytesPerCall = 1 << 20;
// A launch's fixed cost (a few µs) is part of a call's time only below
// this; a 283.6 us index_put was told its launch was (issue 38's
// eighteenth round).
constexpr std::int64_t kFixedCostNs = 50'000;
// At most this many kernels are named.
constexpr std::size_t kMaxFindings = 3;
// Below this GPU busy share the kernels are off the step's critical path.
constexpr double kMinBusyShare = 0.5;

// Under a MiB: "75.1 KiB".
std::string kib_text(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f KiB", bytes / 1024.0);
  return b;
}

std::string gbps_text(double gbps) {
  char b[32];
  if (gbps >= 1000) {
    std::snprintf(b, sizeof b, "%.2f TB/s", gbps / 1000);
  } else {
    std::snprintf(b, sizeof b, "%.0f GB/s", gbps);
  }
  return b;
}

// Whether an instance of kernel `name` (in the steps, or anywhere without
// steps) has a compute kernel just before or after it on its stream (another
// instance of it counts: a chain of the same op fuses with itself).
bool has_compute_neighbour(const DiagnoseContext& c, std::string_view name, bool has_steps) {
  std::unordered_map<std::uint32_t, std::size_t> last_on_lane;  // lane -> index of its previous activity
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const auto prev = last_on_lane.find(op.lane);
    if (prev != last_on_lane.end()) {
      const DeviceOp& p = c.device[prev->second];
      const bool in = !has_steps || op.step >= 0 || p.step >= 0;
      const bool op_is = c.name(op.event) == name, p_is = c.name(p.event) == name;
      if (in && ((op_is && p.cls == DeviceClass::kCompute) || (p_is && op.cls == DeviceClass::kCompute))) return true;
    }
    last_on_lane[op.lane] = i;
  }
  return false;
}


// The kernel whose output a copy kernel `name` reads, where that is a
// library kernel tprof does not recognise (KernelClass::kOther): the
// activity just before most of its instances on their stream. Empty where
// there is none, or it is one of PyTorch's, a GEMM's or a compiler's:
// those have an epilogue or a fusion to take the copy. A library's opaque
// kernel has neither (issue 38's nineteenth round: bitsandbytes'
// kDequantizeBlockwise<__half> output cast to bf16 for the matmul, 26.1%
// of the GPU time, told to fuse into "the kernel that produces its input").
std::string_view library_source(const DiagnoseContext& c, const Efficiency& eff, std::string_view name, bool has_steps) {
  std::unordered_map<std::uint32_t, std::size_t> last_on_lane;
  std::unordered_map<std::string_view, std::int64_t> before;
  std::int64_t instances = 0;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const auto found = last_on_lane.find(op.lane);
    const std::size_t prev = found == last_on_lane.end() ? c.device.size() : found->second;
    last_on_lane[op.lane] = i;
    if ((has_steps && op.step < 0) || c.name(op.event) != name) continue;
    ++instances;
    if (prev < c.device.size() && c.device[prev].cls == DeviceClass::kCompute) ++before[c.name(c.device[prev].event)];
  }
  std::string_view top;
  std::int64_t top_n = 0;
  for (const auto& [n, count] : before) {
    if (count > top_n || (count == top_n && n < top)) top = n, top_n = count;
  }
  if (top.empty() || 2 * top_n < instances) return {};
  for (const KernelEfficiency& k : eff.kernels) {
    if (k.name == top) return k.cls == KernelClass::kOther ? top : std::string_view();
  }
  return {};
}
}  // namespace

void rule_memory_bound_elementwise(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const Efficiency& eff = c.efficiency();
  if (eff.total_ns <= 0) return;
  // Count and time over the work the steps launched (the whole trace
  // without steps), as the verdict judges: an instance that ran before the
  // first step (the schedule's warm-up step, not recorded) is no part of
  // the steps' time and no fix of them saves it (review 2026-11-26, R8: the
  // H200 4096 warm eager run's 21st add, 3.7 ms before ProfilerStep#1).
  // Its rate stays the kernel's over every sized instance.
  const bool has_steps = !c.steps.steps.empty();
  std::unordered_map<std::string_view, std::pair<std::int64_t, std::int64_t>> in_window;  // name -> count, time
  for (const DeviceOp& op : c.device) {
    if (has_steps && op.step < 0) continue;
    auto& [n, ns] = in_window[c.name(op.event)];
    ++n;
    sat_acc(ns, op.end - op.start);
  }
  const DiagnoseContext::BusyWindow busy = c.gpu_busy_window();
  const double busy_share = busy.busy_share();
  // "Not a saving yet: ..." where the GPU mostly idles; "" otherwise.
  const std::string idle_prefix = busy_share < kMinBusyShare
                                      ? not_a_saving_while_idle(busy_share, busy.over_steps,
                                                                "a shorter kernel leaves the GPU idle longer")
                                      : std::string();
  const auto settle = [&](Finding& f, std::int64_t time_ns) {
    if (idle_prefix.empty()) {
      f.impact_ns = time_ns;
      return;
    }
    f.severity = FindingSeverity::kInfo;
    f.impact_ns = 0;
    f.evidence.real("gpu_busy_pct", 100.0 * busy_share);
    f.advice = idle_prefix + f.advice;
  };
  std::size_t fired = 0;
  for (const KernelEfficiency& k : eff.kernels) {
    if (fired == kMaxFindings) break;
    const auto w = in_window.find(k.name);
    const std::int64_t count = w == in_window.end() ? 0 : w->second.first;
    const std::int64_t time_ns = w == in_window.end() ? 0 : w->second.second;
    if (k.cls != KernelClass::kElementwise || count < kMinCount || time_ns < kMinTimeNs) continue;
    if (time_ns / count < kMinMeanNs) continue;
    const double share = static_cast<double>(time_ns) / static_cast<double>(eff.total_ns);
    if (share < kMinShare) continue;
    const bool fill = write_only_op(k.op);
    // Something to fuse it with: a compute kernel before or after one of
    // its instances on the same stream. One that only ever runs between
    // copies (its input copied in, nothing computed after it) has no
    // kernel to fuse into (issue 38's seventh round: a lecture's
    // torch.square of a tensor copied from the host, at 78% of the L4's
    // bandwidth, told to fuse into "the kernel that produces its input").
    if (!fill && !has_compute_neighbour(c, k.name, has_steps)) continue;
    // A multi-tensor kernel (the _foreach_ ops: an optimizer's update over
    // every parameter in one launch) is already fused across its tensors,
    // and its inputs are the gradients the backward left, not one kernel's
    // output (issue 38's eleventh round: SGD's _foreach_add_ at the RTX
    // 5080's bandwidth was told to fuse into the kernel producing its
    // input); per_param_optimizer speaks for optimizers.
    if (k.name.find("multi_tensor_apply_kernel") != std::string::npos) continue;
    // Small tensors: the kernel's fixed cost, not its bytes. While the GPU
    // mostly idles that is the launch-overhead finding's (fewer, larger
    // launches); on a busy GPU the fusion below removes it.
    const double bytes_per_call = k.sized_count > 0 ? k.bytes / static_cast<double>(k.sized_count) : 0;
    const bool small = k.sized_count > 0 && k.bytes > 0 && bytes_per_call < kMinBytesPerCall;
    // PyTorch's scatter by index (index_put_, its accumulate form too).
    const bool scatter = k.name.find("index_put_kernel") != std::string::npos ||
                         k.op == "aten::index_put_" || k.op == "aten::_index_put_impl_";
    if (small && busy_share < kMinBusyShare) continue;
    // A copy of an unrecognised library kernel's output: the library, not a
    // fusion, removes it.
    const bool copies = k.name.find("direct_copy_kernel") != std::string::npos || k.op == "aten::copy_" ||
                        k.op == "aten::_to_copy";
    const std::string_view source = copies && !fill && !scatter ? library_source(c, eff, k.name, has_steps) : std::string_view();
    const bool cast = k.name.find("WithCast") != std::string::npos;
    ++fired;
    Finding f;
    f.id = "memory_bound_elementwise";
    f.severity = FindingSeverity::kWarning;
    std::string rate;
    const bool sized = k.sized_count > 0 && k.gbps() > 0 &&
                       (eff.peak == nullptr || k.gbps() <= kImplausibleOfPeak * eff.peak->hbm_gbps);
    const bool far_below = sized && eff.peak != nullptr && k.gbps() < kFarBelowCeiling * eff.peak->hbm_gbps;
    if (sized) {
      rate = gbps_text(k.gbps());
      // What the rate covers, where not all of the kernel's time.
      if (k.sized_time_ns < k.time_ns && k.time_ns > 0) {
        rate += " on the " + format_pct(100.0 * static_cast<double>(k.sized_time_ns) / static_cast<double>(k.time_ns)) +
                " of its time whose shapes are known";
      }
      if (eff.peak != nullptr) {
        const double of_peak = k.gbps() / eff.peak->hbm_gbps;
        rate += " (" + format_pct(100.0 * of_peak) + " of the " + std::string(eff.peak->name) + "'s HBM bandwidth, " +
                (of_peak > 1.0             ? "at the ceiling; over 100%: part of the data comes from L2"
                 : of_peak >= kNearCeiling ? "near the ceiling"
                 : far_below               ? "far below the ceiling"
                                           : "below the ceiling") +
                ")";
      } else {
        rate += (eff.device_name.empty() ? " (no deviceProperties in the trace: no peak to compare with)"
                                         : " (" + eff.device_name + " is not in the peak table)");
      }
    }
    f.title = std::string(far_below ? "Elementwise kernel " : "Memory-bound elementwise kernel ") + title_name(k.name) +
              (k.op.empty() ? "" : " (" + k.op + ")") +
              ": " + format_pct(100.0 * share) + " of GPU time" + (sized ? ", moving " + rate : "") +
              (fill                   ? "; it only writes memory"
               : far_below && scatter ? "; a scatter by index"
               : !source.empty()      ? std::string(cast ? "; it converts" : "; it copies") + " the output of " +
                                       title_name(source) + ", a library kernel"
                                      : "; fusable");
    f.evidence.text("kernel", k.name)
        .text("op", k.op)
        .text("dtype", k.dtype)
        .num("count", count)
        .num("time_ns", time_ns)
        .real("gpu_time_pct", 100.0 * share);
    if (sized) {
      f.evidence.real("achieved_gbps", k.gbps()).num("sized_count", k.sized_count);
      f.evidence.num("bytes_per_call", static_cast<std::int64_t>(bytes_per_call));
      if (eff.peak != nullptr) f.evidence.real("peak_gbps", eff.peak->hbm_gbps).real("pct_of_peak", 100.0 * k.gbps() / eff.peak->hbm_gbps);
    }
    if (fill) {
      f.advice = "Avoid writing what is overwritten or discarded: " + k.op +
                 (c.is_torch() ? " fills memory with a constant (gradients: optimizer.zero_grad(set_to_none=True); "
                                 "buffers whose values are written later: torch.empty instead of torch.zeros" +
                                 std::string(c.torch_before_compile() ? ")." : "; or let torch.compile fold the fill into its consumer).")
                               : " fills memory with a constant (skip the fill where the values are written later, or "
                                 "fold it into the kernel that reads them).") +
                 " A fill's time is pure memory traffic.";
      settle(f, time_ns);
      out->push_back(std::move(f));
      continue;
    }
    // Far below the ceiling the traffic does not explain its time: say what
    // does, before the fusion that removes it either way.
    const std::string why_slow =
        small ? "Each call moves " + kib_text(bytes_per_call) +
                    ": its " + format_ns(time_ns / count) +
                    " is a kernel's fixed cost (launch, ramp-up on a few blocks), not memory traffic. "
        : far_below ? "At " + format_pct(100.0 * k.gbps() / eff.peak->hbm_gbps) + " of the HBM bandwidth its time is not the traffic alone: " +
                        (time_ns / count < kFixedCostNs
                             ? "at " + format_ns(time_ns / count) + " a launch, a launch's fixed cost is part of it; "
                             : std::string()) +
                        "strided or broadcast inputs, or a GPU below its clocks (nvidia-smi -q -d "
                        "CLOCK,PERFORMANCE: power and thermal limits), take " +
                        (time_ns / count < kFixedCostNs ? "the rest. " : "it. ")
                  : std::string();
    if (far_below && scatter) {
      f.advice = "Gather with the inverse index where the index is a permutation (an MoE un-permute: x[inv_idx] or "
                 "torch.index_select, which run the vectorised gather kernel), or fuse the un-permute into the kernel "
                 "after it: at " + format_pct(100.0 * k.gbps() / eff.peak->hbm_gbps) +
                 " of the HBM bandwidth its time is not the traffic. PyTorch's index_put kernel writes one element a "
                 "thread, with per-element index arithmetic and no vectorised access.";
      settle(f, time_ns);
      out->push_back(std::move(f));
      continue;
    }
    if (!source.empty()) {
      f.evidence.text("source_kernel", std::string(source));
      f.advice = why_slow + "Have " + title_name(source) + "'s library write what " +
                 (k.op.empty() ? std::string("this copy") : k.op) + " makes of its output (" +
                 (cast ? "the dtype" : "the layout") +
                 " its consumer wants: a library's output dtype is usually a parameter, or the dtype of the tensor it "
                 "was given, such as the weight a quantizer packed), "
                 "or let the consumer read the library's output as it is. It is not PyTorch's, Triton's or a GEMM's "
                 "kernel: no fusion (torch.compile, an epilogue) reaches into it, so the copy stays as long as the "
                 "two formats differ.";
      settle(f, time_ns);
      out->push_back(std::move(f));
      continue;
    }
    f.advice = why_slow + "Fuse " + (k.op.empty() ? std::string("this elementwise op") : k.op) +
               " into the kernel that produces its input " +
               (c.is_torch() ? "(" + std::string(c.torch_before_compile() ? "TorchScript's fuser, torch.jit.script; torch.compile needs PyTorch 2.0"
                                                                      : "torch.compile fuses elementwise chains and GEMM epilogues") +
                                 "; or an addmm/epilogue variant of the op before it)."
                             : std::string("(after a GEMM, ") + (c.is_hip() ? "hipBLASLt" : "cuBLASLt") +
                                   "'s epilogue: D = A·B + C with C as its own input, or a bias epilogue; else one "
                                   "fused kernel for the chain).") +
               (small || far_below ? std::string(" Fusing removes its launch and its round trip to memory.")
                          : std::string(" An elementwise kernel does about one operation per element it loads, so its "
                                        "time is memory traffic: only fewer round trips to memory make it faster."));
    settle(f, time_ns);
    out->push_back(std::move(f));
  }
}

}  // namespace tprof::internal
