// model_on_cpu: a GPU host whose model ran on the CPU. The trace names a GPU
// (deviceProperties, or CUDA/HIP runtime calls: the program queried the
// device), yet it records no device work and no sign of work issued to one
// (device_activity_missing handles work issued but not recorded), and the
// compute ops ran on the host: an op of a CPU-only library (oneDNN's
// mkldnn_*, MKL, FBGEMM, NNPACK, XNNPACK, the slow_conv fallbacks), or GEMM
// and convolution ops averaging kCpuComputeNs or more on the host (a launch
// to a GPU returns in microseconds, so a GPU op recorded with
// activities=[CPU] lasts its launch, not milliseconds). Origin: issue 38
// review, tuning traces 08 and 22: ParT's forward with
// aten::mkldnn_convolution on an A100 host (4.4 s) and a PINN's 6.5 s
// aten::addmm calls on a V100 host, both read as "cpu-only" with nothing to
// say.
// Precondition: the outermost compute ops hold >= 10% of the window and
// >= 10 ms. Warning; impact: their time, an upper bound (what the GPU would
// take is not in the trace); the fix is conditional: CPU inference may be
// the point.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kCpuComputeNs = 1'000'000;
constexpr double kMinShare = 0.10;
constexpr std::int64_t kMinComputeNs = 10'000'000;

// An op of a library that runs on the CPU only.
bool is_cpu_library_op(std::string_view n) {
  for (std::string_view k : {"mkldnn", "onednn", "_mkl", "fbgemm", "nnpack", "xnnpack", "slow_conv", "thnn_conv"}) {
    if (contains_ci(n, k)) return true;
  }
  return false;
}

// A GEMM or convolution op (the dispatcher's names, any layer).
bool is_compute_op(std::string_view n) {
  if (!n.starts_with("aten::")) return false;
  const std::string_view s = n.substr(6);
  for (std::string_view k : {"addmm", "mm", "bmm", "baddbmm", "addmv", "mv", "matmul", "linear", "einsum"}) {
    if (s == k) return true;
  }
  return s.starts_with("conv") || s.starts_with("_conv") || is_cpu_library_op(n);
}

}  // namespace

void rule_model_on_cpu(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.ranges.empty() || !cpu_only_program(c)) return;
  const Trace& t = c.trace;
  std::string device;
  device_peak(t, &device);
  std::string queried;  // a runtime call that shows a GPU without deviceProperties
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    if (n.starts_with("cuda") || n.starts_with("hip") || n.starts_with("cu")) {
      queried = std::string(n);
      break;
    }
  }
  if (device.empty() && queried.empty()) return;
  // The outermost compute ops per lane (nested ones are inside their time).
  std::int64_t calls = 0, ns = 0, library_calls = 0;
  std::string_view library_op;  // the first CPU-only library op
  std::map<std::string_view, std::int64_t> ns_by_name;
  std::vector<std::int64_t> open_end(t.lanes.size(), INT64_MIN);
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    const std::string_view n = c.name(e);
    if (is_cpu_library_op(n)) {
      if (library_calls++ == 0) library_op = n;
    }
    if (!is_compute_op(n)) continue;
    std::int64_t& end = open_end[t.events.lane[e]];
    if (c.ts(e) < end) continue;
    end = c.end(e);
    ++calls;
    sat_acc(ns, c.dur(e));
    sat_acc(ns_by_name[n], c.dur(e));
  }
  if (calls == 0) return;
  const std::int64_t mean = ns / calls;
  if (library_calls == 0 && mean < kCpuComputeNs) return;
  const std::int64_t window = c.window_ns();
  if (window <= 0 || ns < kMinComputeNs || static_cast<double>(ns) < kMinShare * static_cast<double>(window)) return;
  std::vector<std::pair<std::string_view, std::int64_t>> top(ns_by_name.begin(), ns_by_name.end());
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> ops;
  for (std::size_t i = 0; i < top.size() && i < 3; ++i) ops.push_back(std::string(top[i].first) + " " + format_ns(top[i].second));

  const std::string host =
      device.empty() ? "a host whose program queried a GPU (" + queried + ")" : "a host with a GPU (" + device + ")";
  Finding f;
  f.id = "model_on_cpu";
  f.severity = FindingSeverity::kWarning;
  f.title = "The model ran on the CPU of " + host + ": its GEMM and convolution ops take " + format_ns(ns) + " of " +
            format_ns(window) + " (" + std::to_string(calls) + " calls, " + format_ns(mean) + " each), and no device work is recorded";
  f.evidence.text("device", device.empty() ? queried : device)
      .num("compute_ns", ns)
      .num("compute_calls", calls)
      .num("mean_call_ns", mean)
      .num("cpu_library_ops", library_calls)
      .num("window_ns", window)
      .real("compute_pct", 100.0 * static_cast<double>(ns) / static_cast<double>(window))
      .texts("ops", ops);
  const std::string why =
      library_calls > 0 ? std::string(library_op) + " is a CPU-only library's kernel (" + count_of(library_calls, "call") + ")"
                        : "a GEMM or convolution launched to a GPU returns in microseconds, these average " +
                              format_ns(mean);
  f.advice = "If the model is meant to run on the GPU, move it and its inputs there (model.to(\"cuda\"), inputs "
             ".to(\"cuda\", non_blocking=True) with DataLoader(pin_memory=True)) and profile with "
             "ProfilerActivity.CUDA: the trace holds no kernel, copy or launch, and " +
             why + ". If CPU inference is the point, the GPU plays no part in this profile.";
  // At most what the ops take on the CPU (the GPU's time is not in the trace).
  f.impact_ns = ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
