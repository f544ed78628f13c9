// heavy_kernel_launch: an occupancy query (cudaOccupancyMaxActiveBlocks-
// PerMultiprocessor and kin) right before a kernel launch: the library
// (cuBLAS, cuDNN) asked how many blocks fit per SM to pick a variant, so the
// launch is a heavyweight, adaptively launched kernel (GEMM, convolution).
// Origin: docs/trace-reading.md, "cudaOccupancyMaxActiveBlocksPerMultiprocessor
// before a cudaLaunchKernel: a heavyweight, adaptively launched kernel".
// The fix's lower precision is one the device's tensor cores take
// (tensor_cores(): an sm70/sm75 GPU has fp16 only, no bf16 or TF32), in the
// program's API (DiagnoseContext::is_torch).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// "Right before": the next launch on the same thread, with no other launch
// in between, from the same op (External id) or, when either has none,
// within 100 µs of the query's end (cuBLAS queries and launches back to back).
constexpr std::int64_t kMaxQueryToLaunchNs = 100'000;
constexpr std::size_t kMaxKernelNames = 5;
// A cause only where the GPU is the bottleneck (busy at least half of the
// window: on an idle GPU shorter kernels save no wall time) and these
// kernels hold a tenth of its time or more.
constexpr double kMinBusyShare = 0.5;
constexpr double kMinKernelShare = 0.1;

// A GPU generation from a kernel name's architecture prefix, for traces
// without deviceProperties: cuBLAS/cuDNN name their sm70/sm75 kernels
// volta_*/turing_*, whose tensor cores take fp16 only.
bool fp16_only_by_name(std::string_view n) { return n.starts_with("volta_") || n.starts_with("turing_"); }

bool is_occupancy_query(std::string_view n) { return n.find("Occupancy") != std::string_view::npos; }

// cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex),
// cudaLaunchCooperativeKernel, hipLaunchKernel, hipModuleLaunchKernel, ...
bool is_launch(std::string_view n) {
  return n.find("LaunchKernel") != std::string_view::npos || n.find("LaunchCooperativeKernel") != std::string_view::npos;
}

}  // namespace

void rule_heavy_kernel_launch(const DiagnoseContext& c, std::vector<Finding>* out) {
  const EventColumns& ev = c.trace.events;
  std::vector<std::uint32_t> last_query(c.trace.lanes.size(), kNoIndex);
  std::unordered_set<std::uint32_t> heavy;
  std::int64_t queries = 0, query_ns = 0, launches = 0;
  std::uint32_t first_query = kNoIndex, first_launch = kNoIndex;
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    std::uint32_t& q = last_query[ev.lane[e]];
    if (is_occupancy_query(n)) {
      q = e;
      ++queries;
      sat_acc(query_ns, c.dur(e));
      continue;
    }
    if (!is_launch(n)) continue;
    ++launches;
    if (q != kNoIndex) {
      const std::int64_t qe = ev.external_id[q], le = ev.external_id[e];
      const bool same_op = qe >= 0 && le >= 0 ? qe == le : c.ts(e) - c.end(q) <= kMaxQueryToLaunchNs;
      if (same_op) {
        heavy.insert(e);
        if (first_query == kNoIndex) {
          first_query = q;
          first_launch = e;
        }
      }
    }
    q = kNoIndex;
  }
  if (heavy.empty()) return;

  // The kernels those launches started (correlation id), by name.
  struct KernelStat {
    std::int64_t count = 0;
    std::int64_t ns = 0;
  };
  std::unordered_map<std::string_view, KernelStat> kernels;
  std::int64_t kernel_ns = 0, kernel_count = 0;
  std::uint32_t first_kernel = kNoIndex;  // the one the first heavy launch started
  std::vector<std::int64_t> steps;
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex || heavy.count(op.launch) == 0) continue;
    KernelStat& k = kernels[c.name(op.event)];
    ++k.count;
    sat_acc(k.ns, op.end - op.start);
    sat_acc(kernel_ns, op.end - op.start);
    ++kernel_count;
    if (op.launch == first_launch && first_kernel == kNoIndex) first_kernel = op.event;
    if (op.step >= 0) steps.push_back(c.step_number(op.step));
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<std::pair<std::string_view, KernelStat>> by_time(kernels.begin(), kernels.end());
  std::sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) {
    return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
  });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < by_time.size() && i < kMaxKernelNames; ++i) {
    names.push_back(std::string(by_time[i].first) + " x" + std::to_string(by_time[i].second.count) + " (" +
                    format_ns(by_time[i].second.ns) + ")");
  }

  const std::int64_t n_heavy = static_cast<std::int64_t>(heavy.size());
  Finding f;
  f.id = "heavy_kernel_launch";
  f.severity = FindingSeverity::kInfo;
  f.title = std::to_string(n_heavy) + " of " + std::to_string(launches) +
            " launches follow an occupancy query: heavyweight, adaptively launched kernels" +
            (by_time.empty() ? std::string() : " (" + std::string(by_time[0].first) + ")");
  f.evidence.num("heavy_launches", n_heavy)
      .num("launches", launches)
      .num("occupancy_queries", queries)
      .num("occupancy_query_ns", query_ns)
      .num("kernel_count", kernel_count)
      .num("kernel_ns", kernel_ns)
      .texts("kernels", std::move(names))
      .event("first_query", c.ref(first_query))
      .event("first_launch", c.ref(first_launch));
  if (first_kernel != kNoIndex) f.evidence.event("first_kernel", c.ref(first_kernel));
  if (!steps.empty()) add_steps(f.evidence, std::move(steps));
  // What to tune: the heaviest of these kernels; a communication kernel
  // (never expected here) gets no GEMM advice.
  std::string top_name;
  bool top_comm = false;
  for (const DeviceOp& op : c.device) {
    if (!by_time.empty() && c.name(op.event) == by_time[0].first) {
      top_comm = op.cls == DeviceClass::kComm;
      break;
    }
  }
  if (!by_time.empty()) {
    top_name = std::string(by_time[0].first) + " (x" + std::to_string(by_time[0].second.count) + ", " +
               format_ns(by_time[0].second.ns) + ")";
  }
  // A cause only where it is actionable: the GPU busy (kMinBusyShare),
  // these kernels a tenth of its time (kMinKernelShare), and the heaviest
  // one running fp32 math (fp32_math: by its name or its op's Input type)
  // on a GPU whose tensor cores take a lower precision. A half-precision
  // or unknown-dtype kernel, or a GPU that waits on the host, leaves the
  // launch pattern an observation with nothing to change: no finding.
  if (top_comm || top_name.empty()) return;
  const Efficiency& eff = c.efficiency();
  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  if (w.span_ns <= 0 || static_cast<double>(w.busy_ns) < kMinBusyShare * static_cast<double>(w.span_ns)) return;
  if (eff.total_ns <= 0 || static_cast<double>(kernel_ns) < kMinKernelShare * static_cast<double>(eff.total_ns)) return;
  const auto top = std::find_if(eff.kernels.begin(), eff.kernels.end(),
                                [&](const KernelEfficiency& k) { return k.name == by_time[0].first; });
  if (top == eff.kernels.end() || fp32_math(*top) == Fp32Math::kNo) return;
  // The lower precision this GPU's tensor cores take (an sm70 V100 has
  // fp16 only: no bf16, no TF32), in the program's API.
  const TensorCores tc = tensor_cores(c.trace);
  if (tc.known && !tc.fp16 && !tc.bf16 && !tc.tf32) return;  // no tensor cores: nothing lower to use
  const bool fp16_only = tc.known ? (!tc.bf16 && tc.fp16) : fp16_only_by_name(by_time[0].first);
  const bool torch = c.is_torch();
  const std::string lower =
      fp16_only ? (torch ? "fp16 (torch.autocast with GradScaler; this GPU has no bf16 or TF32)"
                         : "fp16 inputs (this GPU has no bf16 or TF32)")
      : tc.known && tc.bf16 && !tc.tf32 ? (torch ? "bf16 (torch.autocast)" : "bf16 inputs")
      : torch                           ? "bf16 (torch.autocast) or TF32 (torch.backends.cuda.matmul.allow_tf32 = True)"
                                        : "bf16 inputs or TF32 math";
  f.evidence.real("gpu_busy_pct", 100.0 * static_cast<double>(w.busy_ns) / static_cast<double>(w.span_ns))
      .real("kernel_share_pct", 100.0 * static_cast<double>(kernel_ns) / static_cast<double>(eff.total_ns));
  f.advice = "Run these kernels on the tensor cores, starting with " + top_name + ", which does fp32 math without them: use " +
             lower + ". They hold " + format_pct(100.0 * static_cast<double>(kernel_ns) / static_cast<double>(eff.total_ns)) +
             " of the GPU time on a busy GPU; the " + std::to_string(queries) + " occupancy queries themselves cost only " +
             format_ns(query_ns) + " of host time (cuBLAS/cuDNN pick a kernel variant with them).";
  // A description of where GPU time goes (the efficiency findings say whether
  // it can be faster), not a saving. The queries themselves cost next to
  // nothing and its fix is fp32_math's: no card of its own after the first
  // (issue 38's twenty-third round: the blog's 1024 fp32 matmul_add on an
  // A100, its second card, 6.4 us of queries, repeating the first's fix).
  f.impact_ns = 0;
  f.evidence.num("nothing_to_act_on", 1);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
