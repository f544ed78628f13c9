// hotspot: one key_averages row holds most of the Self CUDA total (device
// rows: kernels, memcpy, memset), or of the Self CPU total on traces without
// device activity. Origin: docs/trace-reading.md, "One event dominates CUDA
// total: the hotspot; start there".
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/host_stack.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/legacy_spans.h"
#include "src/analyze/rules/cpu_thread_stall.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/analyze/verdict.h"
#include "src/base/ascii.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

// A CPU matrix op this slow is set-up, not math: at most kColdCalls calls
// at under 1 GFLOP/s (kColdFlopsPerNs), where any BLAS runs a tiny product
// at hundreds of MFLOP/s warm and GFLOP/s on anything larger.
constexpr std::int64_t kColdCalls = 3;
constexpr double kColdFlopsPerNs = 1.0;  // 1 GFLOP/s

// Host calls whose few longest hold much of their time (kSpreadTop of at
// least kMinSpreadCalls hold kSpreadShare, the longest kSpreadFactor x the
// median): the spread is named before the op's advice.
constexpr std::size_t kMinSpreadCalls = 20;
constexpr std::size_t kSpreadTop = 5;
constexpr double kSpreadShare = 0.3;
// Or the slow later calls' time over their shapes' medians holding this
// share of the calls' time.
constexpr double kNoiseShare = 0.2;
constexpr double kSpreadFactor = 5.0;
// The host's noise (slow later calls over their shapes' medians) is a
// warning from this share of the window.
constexpr double kNoiseWarnShare = 0.10;
// A grid of at most 1/kUnderfilledFactor blocks per SM leaves most SMs idle.
constexpr std::int64_t kUnderfilledFactor = 4;

// A kernel a library wrote (PyTorch's, cuBLAS/cuDNN/CUTLASS/NCCL's, Triton's
// generated ones, ROCm's, the attention and MoE libraries'), by its name:
// its launch shape is the library's choice for the problem, not the
// program's.
bool library_kernel(std::string_view name) {
  for (std::string_view p : {"at::", "c10::", "cutlass", "cublas", "cudnn", "cudnn_", "nvjet", "xmma", "triton",
                             "nccl", "rccl", "flash", "fmha", "Cijk_", "rocblas", "miopen", "ck::", "aiter", "vllm",
                             "sglang", "flashinfer", "marlin", "machete", "sm80_", "sm90_", "sm100_", "ampere_",
                             "volta_", "turing_", "maxwell_", "kepler_", "hopper_", "cub::", "thrust::", "fft",
                             "gemv", "gemmk", "cask_", "implicit_convolve", "winograd", "apex", "transformer_engine",
                             "te::", "deepspeed", "xformers", "mscclpp", "Memcpy", "Memset"}) {
    if (name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

// The blocks of a launch shape ("grid [1, 1, 1] block [256, 1, 1]"), or 0.
std::int64_t grid_blocks(std::string_view shape) {
  const std::size_t g = shape.find("grid [");
  if (g == std::string_view::npos) return 0;
  std::int64_t blocks = 1, n = 0;
  bool digit = false;
  for (std::size_t i = g + 6; i < shape.size() && shape[i] != ']'; ++i) {
    if (shape[i] >= '0' && shape[i] <= '9') {
      n = std::min<std::int64_t>(n * 10 + (shape[i] - '0'), 1'000'000'000);
      digit = true;
    } else if (shape[i] == ',') {
      blocks = sat_mul(blocks, n);
      n = 0;
    }
  }
  return digit ? sat_mul(blocks, n) : 0;
}

// "Dominates": at least half of the total (the H100 GEMMs hold 66% at 64×64
// and 85% at 4096²; torch's table is sorted by this column for a reason).
constexpr double kDominantShare = 0.5;
// ... and at least 10 µs in all: a 20 ns kernel that is the trace's only one
// is not a place to start.
constexpr std::int64_t kMinSelfNs = 10'000;
// When Self CPU is this many times Self CUDA (overhead_bound's threshold)
// the GPU mostly waits: the kernel hotspot is real but not where time goes.
constexpr double kOverheadRatio = 10.0;
// ... and at least 0.1% of the window: 16 µs of GPU time in a 19.8 s trace
// (0.0001%) is no place to start. (The blog's 64×64 GEMMs hold 0.1–1% of windows that
// include compilation: still where the GPU time goes.)
constexpr double kMinWindowShare = 0.001;
// A GPU idle this share of the steps waits on the host: its kernels are
// not where the time goes. (Without steps the idle may be unrecorded time
// between a micro-benchmark's calls: only the Self CPU ratio counts.)
constexpr double kIdleShare = 0.5;
// A user annotation's first call this many times its later calls' median
// holds a one-time cost.
constexpr double kFirstCallFactor = 10.0;
// Instances named as evidence (the longest ones).
constexpr std::size_t kMaxRefs = 3;
// A single synchronize returning this close to the trace's end (or 1% of
// the window, if more) is the recording's closing one.
constexpr std::int64_t kClosingSyncNs = 1'000'000;
// A CPU op whose calls take this long each is slow in itself (a GEMM or
// convolution on the CPU), not a small op called too often.
constexpr std::int64_t kSlowCpuCallNs = 1'000'000;

// What a CPU op's calls show of its math (issue 38's tenth round: vLLM's
// oneDNN and sgl-kernel matrix products on bf16 inputs were told to "check
// the dtype and the BLAS in use", which their names and Input type answer).
struct CpuMath {
  bool matrix = false;   // a matrix product by its name (mm, linear, gemm)
  std::string dtype;     // the first input's dtype where every call records the same one, else ""
  std::string library;   // "oneDNN", "MKL", "the BLAS (MKL or oneDNN)", "sgl-kernel's own kernel", ""
  // Over the calls whose Input Dims give a matrix product's shapes.
  double flops = 0;
  std::int64_t sized_ns = 0, sized = 0;
};

// A matrix product's FLOPs from its Input Dims, 0 where the shapes are not
// one: mm [M,K]x[K,N] (or a weight [N,K]), addmm's last two, bmm's
// batches, a linear's input [..., K] against its weight [N, K].
double matrix_flops(std::string_view op, const std::vector<std::vector<std::int64_t>>& d) {
  auto prod = [](const std::vector<std::int64_t>& v) {
    double p = 1;
    for (std::int64_t x : v) p *= static_cast<double>(x);
    return p;
  };
  std::size_t a = 0;
  if (op.find("addmm") != std::string_view::npos || op.find("baddbmm") != std::string_view::npos) a = 1;
  if (d.size() < a + 2) return 0;
  const std::vector<std::int64_t>& x = d[a];
  const std::vector<std::int64_t>& w = d[a + 1];
  if (x.empty() || w.size() < 2) return 0;
  const std::int64_t k = x.back();
  if (k <= 0) return 0;
  if (x.size() == 3 && w.size() == 3 && w[0] == x[0] && w[1] == k) return 2.0 * prod(x) * static_cast<double>(w[2]);  // bmm
  if (w.size() != 2) return 0;
  if (op.find("linear") == std::string_view::npos && w[0] == k) return 2.0 * prod(x) * static_cast<double>(w[1]);  // [K, N]
  if (w[1] == k) return 2.0 * prod(x) * static_cast<double>(w[0]);  // a weight [N, K]
  return 0;
}

CpuMath cpu_math(const DiagnoseContext& c, std::string_view key, const std::vector<std::uint32_t>& instances) {
  CpuMath m;
  const std::string lower = ascii_lower(key);
  const std::string_view n = lower;
  const std::size_t colons = n.find("::");
  const std::string_view ns = colons == std::string_view::npos ? std::string_view() : n.substr(0, colons);
  const std::string_view op = colons == std::string_view::npos ? n : n.substr(colons + 2);
  m.matrix = is_matrix_product_op(key);
  if (n.find("onednn") != std::string_view::npos || n.find("mkldnn") != std::string_view::npos) {
    m.library = "oneDNN";
  } else if (n.find("mkl") != std::string_view::npos) {
    m.library = "MKL";
  } else if (ns == "aten") {
    m.library = m.matrix ? "the BLAS (MKL or oneDNN)" : "";
  } else if (!ns.empty()) {
    m.library = std::string(key.substr(0, colons)) + "'s own kernel";
  }
  // The dtype: every call's first typed input; the rate: the calls whose
  // shapes are a matrix product's (a bounded number of calls read).
  std::size_t seen = 0, read = 0;
  bool same = true;
  for (std::uint32_t e : instances) {
    if (read++ >= 4096) break;
    const std::string_view raw = c.trace.args_json(e);
    if (raw.find("\"Input type\"") == std::string_view::npos && raw.find("\"Input Dims\"") == std::string_view::npos) continue;
    const Result<JsonValue> args = JsonValue::parse(raw);
    if (!args) continue;
    if (m.matrix) {
      const double fl = matrix_flops(op, input_shapes(args->find("Input Dims")));
      if (fl > 0) {
        m.flops += fl;
        sat_acc(m.sized_ns, c.dur(e));
        ++m.sized;
      }
    }
    const JsonValue* types = args->find("Input type");
    if (types == nullptr || !types->is_array() || !same) continue;
    std::string d;
    for (const JsonValue& v : types->items()) {
      if (v.is_string() && !(d = dtype_of_type(v.text())).empty()) break;
    }
    if (d.empty()) continue;
    same = seen == 0 || d == m.dtype;
    m.dtype = d;
    ++seen;
  }
  if (!same) m.dtype.clear();
  return m;
}

// The longest of `events`, as evidence.
std::vector<EventRef> longest_refs(const DiagnoseContext& c, std::vector<std::uint32_t> events) {
  const std::size_t n = std::min(kMaxRefs, events.size());
  std::partial_sort(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(n), events.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return c.dur(a) > c.dur(b); });
  std::vector<EventRef> refs;
  for (std::size_t i = 0; i < n; ++i) refs.push_back(c.ref(events[i]));
  return refs;
}

// Kernels whose names say they are already fused or low-precision: Triton's
// MoE GEMM (matmul_ogs with a SwiGLU epilogue, mxfp4 weights), Inductor's
// fused kernels, fp8/fp4 GEMMs. Fusion and a smaller dtype are done.
bool is_fused_or_low_precision(std::string_view n) {
  for (std::string_view k : {"fused", "_ogs", "swiglu", "mxfp4", "fp8", "fp4", "e4m3", "e5m2", "int4", "w4a16", "w8a8"}) {
    if (contains_ci(n, k)) return true;
  }
  return false;
}

// CPU collectives (torch's process-group scopes): their time is mostly
// waiting for the other ranks.
bool is_cpu_collective(std::string_view n) {
  for (std::string_view k : {"gloo:", "nccl:", "ucc:", "mpi:", "c10d::", "record_param_comms"}) {
    if (n.starts_with(k)) return true;
  }
  return false;
}

// Host ops scanned for the ops inside an annotation hotspot's instances.
constexpr std::int64_t kMaxInnerScan = 1'000'000;

// The kernel's row in "Efficiency" (class from the kernel-class table),
// nullptr when it has none.
const KernelEfficiency* kernel_of(const DiagnoseContext& c, std::string_view kernel) {
  const Efficiency& e = c.efficiency();
  const auto k = std::find_if(e.kernels.begin(), e.kernels.end(), [&](const KernelEfficiency& x) { return x.name == kernel; });
  return k == e.kernels.end() ? nullptr : &*k;
}

// The kernel's achieved rate against the device's peak where "Efficiency"
// measured it ("at 800 TFLOP/s, 80.9% of the H200's dense fp16/bf16 peak";
// a GEMM below the ridge point in TB/s against HBM), else what is missing
// to measure it: the fix says it instead of pointing at views that show
// neither (tprof kernels has no rate column).
std::string rate_note(const DiagnoseContext& c, std::string_view kernel) {
  const Efficiency& e = c.efficiency();
  const KernelEfficiency* k = kernel_of(c, kernel);
  if (k == nullptr) return "";
  char rate[64];
  const std::string measured =
      k->sized_time_ns >= k->time_ns
          ? std::string()
          : " (measured on the " + format_pct(100.0 * static_cast<double>(k->sized_time_ns) / static_cast<double>(k->time_ns)) +
                " of its time whose shapes are known)";
  if (k->cls == KernelClass::kGemm && k->bandwidth_bound()) {
    std::snprintf(rate, sizeof rate, "%.2f TB/s", k->bw_gbps() / 1e3);
    const std::string ridge = std::to_string(static_cast<long long>(e.ridge_flops_per_byte(k->dtype)));
    return std::string("it is bandwidth-bound (arithmetic intensity ") +
           std::to_string(static_cast<long long>(k->bw_flops / k->bw_bytes)) + " FLOP/byte, below " +
           (e.peak != nullptr ? "the " + std::string(e.peak->name) + "'s ridge point of " + ridge + ") and moves " +
                                    rate + ", " + format_pct(100.0 * k->bw_gbps() / e.peak->hbm_gbps) +
                                    " of its HBM bandwidth"
                              : "the lowest ridge point in the peak table, " + ridge + ") and moves " + rate) +
           measured;
  }
  if (k->cls == KernelClass::kGemm && k->tflops() > 0) {
    std::snprintf(rate, sizeof rate, "%.0f TFLOP/s", k->tflops());
    const double peak = e.gemm_peak_tflops(k->dtype);
    // Above the peak: its op's shapes are not its own (a wrong External id).
    if (peak > 0 && k->tflops() > 1.05 * peak) return "";
    return std::string("it runs at ") + rate +
           (peak > 0 ? ", " + format_pct(100.0 * k->tflops() / peak) + " of the " + std::string(e.peak->name) +
                           "'s dense " + k->dtype + " peak"
                     : std::string(" (no peak to compare with: ") +
                           (e.peak == nullptr ? "the device is not in the peak table" : "its dtype is not recorded") + ")") +
           measured;
  }
  if (k->cls == KernelClass::kElementwise && k->gbps() > 0) {
    std::snprintf(rate, sizeof rate, "%.2f TB/s", k->gbps() / 1e3);
    return std::string("it moves ") + rate +
           (e.peak != nullptr ? ", " + format_pct(100.0 * k->gbps() / e.peak->hbm_gbps) + " of the " +
                                    std::string(e.peak->name) + "'s HBM bandwidth"
                              : std::string()) +
           measured;
  }
  if (k->cls != KernelClass::kGemm) return "";
  return records_shapes(c) ? "its TFLOP/s is unmeasured: the shapes of the ops its launches are linked to are not a GEMM's"
                           : "its TFLOP/s needs its op's input shapes (record shapes) to measure against the peak";
}

// A random-number op run on the host (the generators' aten names).
bool is_host_rng(std::string_view n) {
  for (std::string_view k : {"aten::normal_", "aten::uniform_", "aten::randn", "aten::rand", "aten::randint",
                             "aten::random_", "aten::bernoulli_", "aten::randperm", "aten::normal"}) {
    if (n == k) return true;
  }
  return false;
}

// Whether the program copies to a device: a host-to-device copy activity, or
// a runtime copy call where the device side was not recorded.
bool copies_to_device(const DiagnoseContext& c) {
  for (const DeviceOp& op : c.device) {
    if (op.cls == DeviceClass::kMemcpy && copy_kind(c.name(op.event)).direction == CopyDirection::kHtoD) return true;
  }
  if (!c.device.empty()) return false;
  for (std::uint32_t e : c.runtime) {
    if (c.name(e).find("Memcpy") != std::string_view::npos) return true;
  }
  return false;
}


}  // namespace

void rule_hotspot(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::int64_t noise_ns = 0;  // the host's noise in the op's calls (the spread below)
  // Nothing of the program recorded: the host's time is the profiler's and
  // the runtime's (the verdict says so; issue 38's sixth round).
  if (nothing_recorded(c)) return;
  // The legacy profiler's device spans: the host's times include its waits
  // for the device, and legacy_device_spans speaks for both sides (issue
  // 38's fifteenth round: a convolution benchmark's cudnn_convolution, 48
  // of 100 calls blocked 13 ms on a full queue, given CPU advice).
  if (!c.has_device() && c.legacy_spans().any()) return;
  const std::vector<StatRow>& rows = c.averages();
  const bool device = c.has_device();
  const std::int64_t total = device ? c.self_device_total_ns() : c.self_cpu_total_ns();
  if (total <= 0) return;
  const StatRow* best = nullptr;
  std::int64_t best_self = 0;
  for (const StatRow& r : rows) {
    std::int64_t self = 0;
    if (device) {
      if (!r.is_device || r.is_user_annotation) continue;
      // Copies and memsets are no kernel to fuse or make cheaper: the copy
      // rules (pageable_memcpy, hidden_memcpy) and the copy-bound verdict
      // speak for them (issue 38's fourth round: "fuse Memcpy DtoH").
      if (r.key.starts_with("Memcpy") || r.key.starts_with("Memset")) continue;
      self = r.self_device_time_total_ns;
    } else {
      // A DataLoader scope's self time is the loop waiting for its batches
      // (dataloader_bound's subject), not Python dispatch (issue 38's eighth
      // round: 8.2 s of a multi-process iterator's waits).
      if (r.is_device || is_profiler_step(r.key) || is_dataloader_scope(r.key)) continue;
      self = r.self_cpu_time_total_ns;
    }
    if (self > best_self) {
      best_self = self;
      best = &r;
    }
  }
  if (best == nullptr) return;
  const double share = static_cast<double>(best_self) / static_cast<double>(total);
  if (share < kDominantShare || best_self < kMinSelfNs) return;
  if (static_cast<double>(best_self) < kMinWindowShare * static_cast<double>(c.window_ns())) return;

  // The instances: device activities (and the CPU ops that launched them,
  // joined by the launch call's External id) or host events of that name.
  std::vector<std::uint32_t> instances;
  std::vector<std::int64_t> steps;
  bool comm = false;
  std::string comm_kind;  // the collective the first communication instance runs (collective_kind)
  std::unordered_map<std::string_view, std::int64_t> launched_by;
  if (device) {
    std::unordered_set<std::int64_t> ext_ids;
    for (const DeviceOp& op : c.device) {
      if (c.name(op.event) != best->key) continue;
      instances.push_back(op.event);
      if (op.cls == DeviceClass::kComm && !comm) comm_kind = collective_kind(c, op);
      comm = comm || op.cls == DeviceClass::kComm;
      if (op.step >= 0) steps.push_back(c.step_number(op.step));
      const std::uint32_t src = op.launch != kNoIndex ? op.launch : op.event;
      const std::int64_t ext = c.trace.events.external_id[src];
      if (ext >= 0) ext_ids.insert(ext);
    }
    // The launching op: the innermost op around each launch call on its
    // thread; where none encloses it, the ops sharing its External id.
    // View ops are skipped either way (they launch nothing).
    for (const DeviceOp& op : c.device) {
      if (c.name(op.event) != best->key || op.launch == kNoIndex) continue;
      const std::uint32_t by_call = c.enclosing_op(op.launch, /*skip_views=*/true);
      if (by_call != kNoIndex) ++launched_by[c.name(by_call)];
    }
    if (launched_by.empty() && !ext_ids.empty()) {
      for (std::uint32_t e : c.host_ops) {
        if (c.kind(e) == EventKind::kCpuOp && ext_ids.count(c.trace.events.external_id[e]) != 0 &&
            !is_view_op(c.name(e))) {
          ++launched_by[c.name(e)];
        }
      }
    }
  } else {
    // Host ops, or the runtime calls of that name (a cudaFree row).
    for (const std::vector<std::uint32_t>* events : {&c.host_ops, &c.runtime}) {
      for (std::uint32_t e : *events) {
        if (c.name(e) != best->key) continue;
        instances.push_back(e);
        const std::int64_t s = c.step_number_at(c.ts(e));
        if (s >= 0) steps.push_back(s);
      }
      if (!instances.empty()) break;
    }
    // A scope whose own time is mostly the DataLoader's (its workers
    // starting inside it, with no op to show): dataloader_bound's subject,
    // not Python and dispatch (issue 38's fifteenth round: a training_epoch
    // scope's 11.909 s of self time, 11.9 s of it the workers spawning).
    if (!instances.empty() && c.kind(instances.front()) == EventKind::kUserAnnotation) {
      std::int64_t loading = 0;
      for (std::uint32_t e : instances) sat_acc(loading, covered_within(c.dataloader_scopes(), c.ts(e), c.end(e)));
      if (sat_mul(2, loading) >= best_self) return;
    }
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());

  Finding f;
  f.id = "hotspot";
  f.severity = FindingSeverity::kInfo;
  const std::string col = device ? "Self CUDA" : "Self CPU";
  f.title = "Hotspot: " + title_name(best->key) + " holds " + format_pct(100.0 * share) + " of " + col + " total (" +
            format_ns(best_self) + " of " + format_ns(total) + ", " + count_of(best->count, "call") + ")";
  f.evidence.text("key", best->key)
      .text("column", device ? "self_cuda" : "self_cpu")
      .num("self_ns", best_self)
      .num(device ? "self_cuda_total_ns" : "self_cpu_total_ns", total)
      .real("share_pct", 100.0 * share)
      .num("count", best->count)
      .num("avg_ns", best->count > 0 ? best_self / best->count : 0);
  if (!launched_by.empty()) {
    auto it = std::max_element(launched_by.begin(), launched_by.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    f.evidence.text("launched_by", std::string(it->first));
  }
  f.evidence.events("longest", longest_refs(c, instances));
  if (!steps.empty()) add_steps(f.evidence, std::move(steps));
  // Torch's totals, or the steps' host and device time where the steps are
  // a host range (a whole program's trace: DiagnoseContext::host_vs_device).
  const DiagnoseContext::HostVsDevice& hd = c.host_vs_device();
  const std::int64_t cpu_total = hd.cpu_ns, dev_total = hd.device_ns;
  // The GPU waits: Self CPU ≥ 10× Self CUDA, or the device idle ≥ 50% of
  // the steps with Self CPU ≥ Self CUDA (87% idle with a 2.4 µs GEMM, 8×:
  // the launches are the story; a compute-bound trace whose steps hold
  // idle gaps keeps Self CPU below Self CUDA).
  // Without steps the window is the whole trace, whose idle may be set-up
  // or a tail: there, the idle must be mostly the host's (launching op
  // after op, host work, its blocking calls), as the overhead-bound
  // verdict reads it (issue 38's eleventh round: a vLLM fp8 prefill, the
  // GPU idle 67% of the trace, 69% of that launching, was told that any
  // gain in its MoE kernel "shows in the step").
  bool idle_gpu = false;
  if (device) {
    const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
    const bool host_idle = w.over_steps || (c.steps.steps.empty() && c.idle().idle_ns() > 0 &&
                                            sat_mul(2, host_left_idle(c.idle().totals())) >= c.idle().idle_ns());
    idle_gpu = host_idle && w.span_ns > 0 &&
               static_cast<double>(w.busy_ns) < (1.0 - kIdleShare) * static_cast<double>(w.span_ns);
    if (w.span_ns > 0) f.evidence.real("gpu_idle_pct", 100.0 * (1.0 - static_cast<double>(w.busy_ns) / static_cast<double>(w.span_ns)));
  }
  const bool gpu_waits =
      device && ((idle_gpu && cpu_total >= dev_total) ||
                 static_cast<double>(cpu_total) >= kOverheadRatio * static_cast<double>(dev_total));
  if (device) f.evidence.num(hd.within_steps ? "self_cpu_in_steps_ns" : "self_cpu_total_ns", cpu_total);
  // The kernel's class (the kernel-class table, through "Efficiency"): the
  // advice is the class's; a kernel no row recognises gets none of a class.
  const KernelEfficiency* kernel = device ? kernel_of(c, best->key) : nullptr;
  const KernelClass cls = comm ? KernelClass::kComm : kernel != nullptr ? kernel->cls : KernelClass::kOther;
  const bool gemm = device && cls == KernelClass::kGemm;
  if (device && kernel != nullptr) {
    f.evidence.text("kernel_class", std::string(kernel_class_name(cls)));
    if (!kernel->family.empty()) f.evidence.text("kernel_family", std::string(kernel->family));
  }
  if (comm) f.evidence.text("kind", "communication");
  const std::string name = title_name(best->key);
  const std::string avg = format_ns(best->count > 0 ? best_self / best->count : 0);
  const std::string by = launched_by.empty() ? std::string()
                                             : " (launched by " + std::string(std::max_element(launched_by.begin(), launched_by.end(),
                                                                                  [](const auto& a, const auto& b) { return a.second < b.second; })
                                                                     ->first) + ")";
  // One call holding most of the time is no per-call cost (issue 38's
  // eighteenth round: one 33.05 ms all-reduce of nine, the others 23-44 us,
  // "9 calls at 3.699 ms each").
  std::uint32_t longest_call = kNoIndex;
  std::vector<std::int64_t> others;
  for (const std::uint32_t e : instances) {
    if (longest_call == kNoIndex || c.dur(e) > c.dur(longest_call)) longest_call = e;
  }
  for (const std::uint32_t e : instances) {
    if (e != longest_call) others.push_back(c.dur(e));
  }
  const bool one_off = best->count >= 3 && longest_call != kNoIndex && !others.empty() &&
                       static_cast<double>(c.dur(longest_call)) >= 0.8 * static_cast<double>(best_self);
  if (!device && is_cpu_collective(best->key) && one_off) {
    f.evidence.text("kind", "communication").event("longest_call", c.ref(longest_call));
    f.advice = name + ": one of its " + count_of(best->count, "call") + " takes " + format_ns(c.dur(longest_call)) +
               ", the others a median of " + format_ns(mean_median(std::move(others))) +
               ": a one-off wait (a rank arriving late, or a one-time set-up), not each call's cost. Run tprof "
               "diagnose on all ranks' traces together to see which rank the others waited for.";
  } else if (!device && is_cpu_collective(best->key)) {
    f.evidence.text("kind", "communication");
    f.advice = name + ": " + count_of(best->count, "call") + " at " + avg +
               " each, mostly waiting on the other ranks. Run tprof diagnose on all ranks' traces together to find "
               "the straggler the others wait for; if none is late, send less or less often (gradient bucketing, "
               "bf16 gradients), or overlap it with compute.";
  } else if (!device && !instances.empty() &&
             (c.kind(instances.front()) == EventKind::kCudaRuntime || c.kind(instances.front()) == EventKind::kCudaDriver) &&
             (is_device_free(best->key) || is_device_malloc(best->key) || is_sync_call(best->key))) {
    // A CUDA/HIP call that waits or allocates, not math: the op template
    // (threads, dtype, BLAS) does not apply (issue 38's fifth round: an A40
    // trace's 2 cudaFree calls, 61% of its CPU time, got it).
    const std::string who = "(" + count_of(best->count, "call") + " at " + avg + " each)";
    const std::string pool = ": keep buffers across iterations (a pool) instead of ";
    if (is_device_free(best->key)) {
      f.advice = name + " gives device memory back to the driver, waiting for the device first " + who +
                 (c.is_torch() ? ": torch's caching allocator frees only when told to, so drop torch.cuda.empty_cache() "
                                 "from the loop, or find the memory limit or fraction it keeps reaching or the cache "
                                 "turned off (PYTORCH_NO_CUDA_MEMORY_CACHING=1)"
                               : pool + "freeing and allocating them again") +
                 ". Each free also stalls the host until the queued work is done.";
    } else if (is_device_malloc(best->key)) {
      f.advice = name + " takes memory from the driver " + who +
                 (c.is_torch() ? ": torch's caching allocator grows its pool, which in a steady loop stops after the "
                                 "first iterations; if it does not, the cache is being emptied (torch.cuda.empty_cache()) "
                                 "or fragmented (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True). Reuse buffers of the "
                                 "same size."
                               : pool + "allocating them in the loop.");
    } else if (const std::uint32_t last = instances.back();
               best->count == 1 && sat_sub(c.end_ns, c.end(last)) <= std::max(kClosingSyncNs, (c.end_ns - c.start_ns) / 100)) {
      // One call that returns as the recording ends: the closing
      // synchronize (torch.profiler's own at its stop, or the script's),
      // waiting for what was queued before it; no loop to move it out of
      // (issue 38's sixth round).
      f.advice = name + " is one call at the end of the recording (it returns " + format_ns(sat_sub(c.end_ns, c.end(last))) +
                 " before the trace ends): the closing synchronize (torch.profiler's own at its stop, or the script's), "
                 "waiting for the device work queued before it" +
                 (!c.device.empty() ? std::string()
                  : c.dur(last) >= kContextCreateNs  // a shorter closing synchronize created no context
                      ? std::string(" (this trace holds none: where the process had run no CUDA work, it was creating the "
                                    "context)")
                      : std::string(" (this trace holds none)")) +
                 ", not a stall in the loop: its time is that work's.";
    } else {
      // What in Python issues each kind of wait: a device-wide synchronize
      // is an explicit one; .item() and copies to the host wait on their
      // stream (cudaMemcpy + cudaStreamSynchronize), events on an event.
      const std::string_view k = best->key;
      const std::string what =
          k.find("DeviceSynchronize") != std::string_view::npos || k.find("CtxSynchronize") != std::string_view::npos
              ? "an explicit torch.cuda.synchronize() (a timer's or a logger's): keep one where a result is needed, not "
                "one every iteration"
          : k.find("EventSynchronize") != std::string_view::npos
              ? "an event's wait (torch.cuda.Event.synchronize(), elapsed_time()): read timings once at the end"
              : "what needs the result on the host (.item(), .cpu(), .tolist(), printing a tensor, a data-dependent shape): "
                "move it out of the loop or after the work it waits for";
      f.advice = waits_for_unrecorded_device(c)
                     // The device's records are missing and the waits hold most
                     // of the time: they are its work's time.
                     ? name + " is the host waiting for the device work launched before it; the trace holds no "
                              "device activity, so its time is that work's: make the work faster (time its kernels "
                              "with CUDA events or Nsight), not the wait."
                     : name + " is the host waiting for the device " + who + ": " + what + ".";
    }
  } else if (!device && !instances.empty() && c.kind(instances.front()) == EventKind::kUserAnnotation) {
    // A record_function scope: its self time is what runs between the ops
    // inside it (Python and the dispatcher), not math of its own, so the
    // fix is fewer ops, not faster ones.
    // The ops inside its instances, from each instance's start in the
    // host ops (sorted by ts); the scan is capped so nested instances of a
    // recursive scope stay linear (each would hold all the deeper ones).
    std::int64_t inner = 0, scanned = 0;
    std::vector<std::string_view> routing;
    for (std::uint32_t a : instances) {
      auto from = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), c.ts(a),
                                   [&](std::uint32_t e, std::int64_t t) { return c.ts(e) < t; });
      for (auto it = from; it != c.host_ops.end() && c.ts(*it) <= c.end(a) && scanned < kMaxInnerScan; ++it, ++scanned) {
        const std::uint32_t e = *it;
        if (e == a || c.kind(e) != EventKind::kCpuOp || c.trace.events.lane[e] != c.trace.events.lane[a] ||
            c.end(e) > c.end(a)) {
          continue;
        }
        ++inner;
        const std::string_view n = c.name(e);
        for (std::string_view r : {"aten::nonzero", "aten::where", "aten::index_add_", "aten::index_add",
                                   "aten::masked_select", "aten::argwhere", "aten::unique", "aten::index_put_"}) {
          if (n == r && std::find(routing.begin(), routing.end(), r) == routing.end()) routing.push_back(r);
        }
      }
    }
    std::string names;
    for (std::string_view r : routing) names += (names.empty() ? "" : ", ") + std::string(r);
    f.evidence.num("inner_ops", inner);
    // A first call far longer than the others holds a one-time cost (lazy
    // set-up inside it), not the dispatch between its ops (issue 38's
    // twelfth round: a CPU MLP's "backward", 41.7 ms then 0.7 ms twice,
    // 38.2 ms of it one stall before its first op, was told to batch and
    // compile).
    std::int64_t first_ns = 0, later_ns = 0;
    if (instances.size() >= 2) {
      std::vector<std::uint32_t> by_start = instances;
      std::sort(by_start.begin(), by_start.end(), [&](std::uint32_t a, std::uint32_t b) { return c.ts(a) < c.ts(b); });
      std::vector<std::int64_t> later;
      for (std::size_t i = 1; i < by_start.size(); ++i) later.push_back(c.dur(by_start[i]));
      first_ns = c.dur(by_start.front());
      later_ns = mean_median(later);
    }
    const double later = static_cast<double>(std::max<std::int64_t>(1, later_ns));
    if (first_ns > 0 && static_cast<double>(first_ns) >= kFirstCallFactor * later) {
      f.evidence.num("first_call_ns", first_ns).num("later_call_median_ns", later_ns);
      f.advice = name + "'s first call takes " + format_ns(first_ns) + " against " + format_ns(later_ns) +
                 " for the later ones (median): a one-time cost inside it (lazy set-up, a first call's allocations "
                 "or compilation), not the dispatch between its ops; warm up before recording (run an iteration "
                 "untimed) and judge the later calls.";
    } else {
      f.advice = name + " is a user annotation (record_function): its " + format_ns(best_self) +
                 " of self time is Python and op dispatch between the " + std::to_string(inner) +
                 " ops inside it, not math. Make fewer, larger ops (batch the per-item work" +
                 (names.empty() ? std::string()
                                : "; avoid data-dependent routing with " + names + ", which syncs and splits the work") +
                 ")" + (c.is_torch() ? ", or compile the region (" + c.compile_how() + ") to remove the per-op overhead." : ".");
    }
  } else if (!device && is_host_rng(best->key) && copies_to_device(c)) {
    // Random numbers drawn on the CPU in a program that copies to a GPU:
    // drawn there, they cost neither the host's generator nor the copy
    // (issue 38 review: torch.randn on the CPU, 3.6 s, then 0.86 s of
    // pageable copies of its output to an RTX 4060).
    f.advice = "Draw the random tensor on the GPU: torch.randn(..., device=\"cuda\") (rand, randint, normal_ and "
               "uniform_ alike) instead of " + name + " on the CPU (" + count_of(best->count, "call") + " at " + avg +
               " each) and a copy to the device afterwards: the GPU's generator is far faster and the host-to-device "
               "copy goes. It holds most of the CPU time, so the saving shows in the step.";
  } else if (!device && c.is_torch() && best->key.find("conv") != std::string::npos) {
    // Convolutions on the CPU (oneDNN's mkldnn_convolution, or the
    // _slow_conv2d fallback): layout, batch-norm folding and threads, not
    // "the BLAS" (issue 38's fourth round: a CPU ResNet's 69% in
    // mkldnn_convolution got a BLAS checklist).
    const bool slow = best->key.find("slow_conv") != std::string::npos;
    // A Mac's host name in the trace's name (tensorboard_trace_handler
    // writes HOST_PID.…pt.trace.json: "Davids-MacBook-Pro.local_498…"):
    // PyTorch on Apple Silicon has no oneDNN, _slow_conv2d is its CPU path,
    // and the GPU is MPS (issue 38's fourteenth round: a MacBook's ResNet-18
    // was told to check torch.backends.mkldnn.is_available()).
    const std::string_view name_of_trace = trace_name(c.trace);
    const bool mac = name_of_trace.find("MacBook") != std::string_view::npos ||
                     name_of_trace.find("Mac-mini") != std::string_view::npos ||
                     name_of_trace.find("iMac") != std::string_view::npos ||
                     name_of_trace.find("Mac-Studio") != std::string_view::npos ||
                     name_of_trace.find(".local_") != std::string_view::npos;
    const std::string freeze = std::string("torch.jit.freeze(torch.jit.trace(model, example_input))") +
                               (c.torch_before_compile() ? "" : ", or torch.compile");
    // Batch norm to fold only where the model runs one (issue 38's
    // twenty-fourth round: pytorch/examples' MNIST CNN, which has none, was
    // told to fold it).
    bool batch_norm = false;
    for (std::uint32_t e : c.host_ops) {
      if (c.kind(e) == EventKind::kCpuOp && c.name(e).find("batch_norm") != std::string_view::npos) {
        batch_norm = true;
        break;
      }
    }
    const std::string fold_bn =
        batch_norm ? "fold batch norm into the convolutions (model.eval(), then " + freeze + ")" : std::string();
    if (slow && mac) {
      f.evidence.text("host", "mac");
      f.advice = "Run the model on the Mac's GPU: model and input .to(\"mps\") (macOS 12.3 or later; " + count_of(best->count, "call") +
                 " of " + name + " at " + avg +
                 " each): " + name + " is PyTorch's own CPU convolution, its normal path on a Mac (the trace's host "
                 "name says one), where PyTorch has no oneDNN to turn on. On the CPU, for inference, fold batch norm "
                 "into the convolutions (model.eval(), then " + freeze + ") and check the threads (torch.get_num_threads() against the performance cores). It "
                 "holds most of the CPU time, so any saving shows in the step.";
    } else if (slow) {
      // The fallback first: on x86 a float convolution of a batch above one
      // runs through oneDNN (aten::mkldnn_convolution) unless the build
      // lacks it or the program turned it off; channels_last and folding do
      // not make the fallback itself cheaper (issue 38's twenty-first
      // round: a Linux node's ResNet-34, batch 5, float, 73.5% in
      // _slow_conv2d_forward, was told channels_last first and asked for
      // the dtype its Input type gave).
      const std::string dtype = cpu_math(c, best->key, instances).dtype;
      f.evidence.text("backend", "fallback");
      if (!dtype.empty()) f.evidence.text("dtype", dtype);
      // Where the trace says Windows, or names a host that is not a Mac's
      // (tensorboard_trace_handler names the file HOST_PID.…: a Linux
      // node's "dockz27-a5425.compute.dtu.dk"), the fix is oneDNN; without
      // a host name it may be an Apple-silicon Mac, whose PyTorch has no
      // oneDNN, and the fix names both (issue 38's twenty-first round: two
      // MacBook Airs' ResNets, no host name in their traces, were told to
      // check oneDNN and use channels_last, "oneDNN's native layout").
      const bool other_host = !trace_host_name(c.trace).empty();
      const bool not_mac = !windows_sign(c).empty() || other_host;
      const std::string floats = dtype.empty() ? std::string("float32")
                                 : dtype == "fp32" ? std::string("these float32")
                                                   : "float32 (these are " + dtype + ")";
      const std::string x86 = "on an x86 CPU PyTorch runs " + floats +
                              " convolutions through oneDNN (aten::mkldnn_convolution) unless the build has no oneDNN or "
                              "the program turned it off: check torch.backends.mkldnn.is_available() and "
                              "torch.backends.mkldnn.enabled";
      f.advice = not_mac
                     ? "Put the convolutions on oneDNN (" + count_of(best->count, "call") + " of " + name + " at " + avg +
                           " each): " + name + " is PyTorch's own fallback convolution, and " + x86 +
                           (other_host ? " (on an ARM CPU without oneDNN it is the normal path)" : "") + "."
                     : "Find which CPU this ran on (" + count_of(best->count, "call") + " of " + name + " at " + avg +
                           " each): " + name + " is PyTorch's own fallback convolution. On an Apple-silicon Mac, "
                           "whose PyTorch has no oneDNN, it is the normal CPU path, and the lever is the Mac's GPU "
                           "(model and input .to(\"mps\"), macOS 12.3 or later); " + x86 +
                           " (on other ARM CPUs without oneDNN it is the normal path too).";
      f.advice += (batch_norm ? " Then, for inference, " + fold_bn +
                                    " (that removes the batch norm's time, not the convolutions'), and check the threads"
                              : std::string(" Then check the threads")) +
                  " (torch.get_num_threads() no more than the cores free to the process). It holds most of the CPU "
                  "time, so any saving shows in the step.";
    } else {
      f.advice = "Make each convolution cheaper (" + count_of(best->count, "call") + " of " + name + " at " + avg +
                 " each): run the model and its input in channels_last (model.to(memory_format=torch.channels_last), "
                 "oneDNN's native layout)" + (batch_norm ? ", and for inference " + fold_bn : std::string()) +
                 "; check the threads (torch.get_num_threads() no more than the cores free to the process)" +
                 ". A first call also creates oneDNN's primitives: time a warmed-up call. It holds most of the CPU "
                 "time, so any saving shows in the step.";
    }
  } else if (!device && best->count > 0 && best_self / best->count >= kSlowCpuCallNs) {
    // Few long calls: the op's own speed, not how often it runs. What its
    // name and its Input type already say is said, not asked.
    const CpuMath m = cpu_math(c, best->key, instances);
    if (!m.dtype.empty()) f.evidence.text("dtype", m.dtype);
    std::string rate;
    if (m.sized > 0 && m.sized_ns > 0) {
      const double tflops = m.flops / static_cast<double>(m.sized_ns) / 1e3;
      f.evidence.real("tflops", tflops).num("sized_calls", m.sized);
      char b[64];
      if (tflops >= 1) {
        std::snprintf(b, sizeof b, "%.2f TFLOP/s", tflops);
      } else if (tflops >= 1e-3) {
        std::snprintf(b, sizeof b, "%.1f GFLOP/s", tflops * 1e3);
      } else {
        std::snprintf(b, sizeof b, "%.3g MFLOP/s", tflops * 1e6);
      }
      rate = std::string(" at ") + b + (m.sized < best->count ? " over the " + std::to_string(m.sized) + " calls with shapes" : "");
    }
    const bool reduced = m.dtype == "bf16" || m.dtype == "fp16" || m.dtype == "fp8";
    const std::string threads = c.is_torch() ? "torch.get_num_threads()" : "OMP_NUM_THREADS / the BLAS's threads";
    const std::string where = c.steps.steps.empty() ? "the run" : "the step";
    // A few calls far apart are named one by one: a mean hides them (issue
    // 38's tenth round, the review of its new lines: "2 calls at 7.779 s
    // each" were 14.395 s and 1.163 s, two different layers).
    std::string calls = count_of(best->count, "call") + " at " + avg + " each";
    if (instances.size() >= 2 && instances.size() <= 3 && instances.size() == static_cast<std::size_t>(best->count)) {
      std::vector<std::int64_t> d;
      for (std::uint32_t e : instances) d.push_back(c.dur(e));
      const auto [lo, hi] = std::minmax_element(d.begin(), d.end());
      if (*hi >= sat_mul(2, std::max<std::int64_t>(1, *lo))) {
        calls = count_of(best->count, "call") + ": ";
        for (std::size_t i = 0; i < d.size(); ++i)
          calls += (i == 0 ? "" : i + 1 == d.size() ? " and " : ", ") + format_ns(d[i]);
      }
    }
    // A few calls at under 1 GFLOP/s: no BLAS is that slow at its math;
    // it is a first call's set-up (the library initialising, its threads
    // starting, kernels JIT-compiled). Issue 38's fourteenth round: a
    // Linear(10, 5)'s one aten::addmm, 12.8 ms on an Aurora node, was
    // given thread pinning and bf16 advice "at 0.0 GFLOP/s".
    const bool cold = m.matrix && m.sized > 0 && m.sized_ns > 0 && best->count <= kColdCalls &&
                      m.flops / static_cast<double>(m.sized_ns) < kColdFlopsPerNs;
    if (cold) {
      f.evidence.text("first_call_setup", "yes");
      char flops[48];
      std::snprintf(flops, sizeof flops, "%.3g", m.flops);
      f.advice = "Record warmed-up calls before judging " + name + " (" + calls + ", " + flops + " FLOPs" +
                 (m.sized < best->count ? " in the calls with shapes" : "") + "): no math library is that slow at the arithmetic, so the time is a first call's set-up (the BLAS "
                 "or oneDNN initialising, its threads starting, kernels compiled at first use). Run the step once "
                 "untimed" +
                 std::string(c.is_torch() ? " (or give torch.profiler's schedule wait and warmup steps)" : "") +
                 " and profile the calls after it.";
    } else if (m.matrix) {
      f.advice = "Make each call of " + name + " cheaper (" + calls + "): it is matrix math" + (m.dtype.empty() ? "" : " on " + m.dtype + " inputs") +
                 (m.library.empty() ? "" : " in " + m.library) + rate +
                 ", so what the trace cannot show is the threads: " + threads +
                 " against the physical cores, pinned to them (OMP_NUM_THREADS and numactl or taskset" +
                 (runs_vllm(c) ? "; vLLM: VLLM_CPU_OMP_THREADS_BIND" : "") + ")" +
                 (m.library == "oneDNN" ? ", and ONEDNN_VERBOSE=1 shows which kernels run (AMX, AVX-512)" : "") + "; " +
                 (reduced ? "beyond that, only less work a call makes it cheaper: int8 weights and activations (W8A8) "
                            "where the CPU has AMX-INT8"
                  : m.dtype == "fp32"
                      ? "its inputs are fp32: where the model tolerates bf16 and the CPU has AMX or AVX-512 BF16, "
                        "torch.autocast(\"cpu\", dtype=torch.bfloat16) runs it faster (several times with AMX on "
                        "large products; about twice on a matrix-vector product, which reads half the bytes)"
                      : "check the dtype (bf16 on a CPU with AMX or AVX-512 BF16)") +
                 ". It holds most of the CPU time, so any saving shows in " + where + ".";
    } else {
      f.advice = "Make each call of " + name + " cheaper (" + calls + "): for math ops check the intra-op threads (" + threads + " against the cores)" +
                 (m.dtype.empty() ? " and the dtype" : " (its inputs are " + m.dtype + ")") +
                 (m.library.empty() ? "" : "; it runs in " + m.library) +
                 ". It holds most of the CPU time, so any saving shows in " + where + ".";
    }
  } else if (!device) {
    f.advice = "Start with the callers of " + name + ": " + count_of(best->count, "call") + " at " + avg +
               " each; call it less often or on larger inputs. It holds most of the CPU time, so any saving shows in "
               "the step.";
  } else if (comm) {
    // What to send less of follows the collective (issue 38, seventh
    // round: DDP's bucket_cap_mb for TorchRec's all-to-all).
    const std::string less =
        comm_kind == "all_to_all"
            ? "balance what each rank sends (embedding sharding, an MoE router's load balancing), pipeline it with "
              "other work (TorchRec's TrainPipelineSparseDist) or send fewer bytes (quantized communication, "
              "half-precision payloads)"
        : comm_kind == "all_reduce" || comm_kind == "reduce_scatter"
            ? "overlap it with compute or send less (DDP bucket_cap_mb, bf16 gradients)"
            : "overlap it with compute or send less (fewer or smaller messages, half-precision payloads)";
    f.advice = "Before tuning " + name + ", run tprof diagnose on all ranks' traces together: a rank that waits for a "
               "straggler spends that wait inside this collective. If no rank is late, " + less +
               ". Communication kernels are as fast as the link and the slowest rank allow, not a matter of shapes or "
               "dtypes.";
    if (comm_kind != "other") f.evidence.text("collective", comm_kind);
  } else if (gpu_waits) {
    f.advice = "Fix what the GPU waits on first (the verdict's cause), then " + name +
               ": the host spends " + format_ns(cpu_total) + " of Self CPU against " + format_ns(dev_total) +
               " of GPU time" + (hd.within_steps ? " in the steps" : "") +
               ", so speeding it up would only leave the GPU idle longer.";
  } else if ((gemm || cls == KernelClass::kAttention) && is_fused_or_low_precision(best->key)) {
    const std::string rate = rate_note(c, best->key);
    f.advice = "Start with " + name + by + ": " + count_of(best->count, "call") + " at " + avg +
               "; its name says it is already fused or low-precision, so " +
               (rate.empty() ? std::string("compare its achieved TFLOP/s (or GB/s) with the GPU's peak")
                             : "weigh its rate against the peak (" + rate + ")") +
               " and tune its tile configuration (for a MoE GEMM, check the experts' "
               "load balance). It holds " + format_pct(100.0 * share) + " of the GPU time, so any gain shows in the step.";
  } else if (gemm) {
    // The dtype where the kernel name gives it: cuBLAS's sgemm is fp32 on the
    // SIMT units; nvjet's "_h_", hgemm, f16 and bf16 are half precision.
    const std::string_view k = best->key;
    // Else the dtype "Efficiency" gives it (its op's Input type, or a
    // tensor-core mark in its name such as s16816/h1688).
    const bool fp32 = k.find("sgemm") != std::string_view::npos ||
                      (kernel != nullptr && fp32_math(*kernel) != Fp32Math::kNo);
    const bool half = !fp32 && (k.find("_h_") != std::string_view::npos || k.find("hgemm") != std::string_view::npos ||
                                k.find("f16") != std::string_view::npos || k.find("fp16") != std::string_view::npos ||
                                k.find("bf16") != std::string_view::npos ||
                                (kernel != nullptr && (kernel->dtype == "fp16" || kernel->dtype == "bf16" ||
                                                       kernel->dtype == "fp16/bf16")));
    const std::string dtype =
        fp32   ? (c.is_torch() ? "it runs in fp32 without tensor cores (sgemm): autocast to bf16 (torch.autocast) or "
                                 "allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True)"
                               : "it runs in fp32 without tensor cores (sgemm): give it bf16 inputs or TF32 math "
                                 "(cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32)")
        : half ? "it already runs in half precision: keep its dimensions multiples of 8 and give it "
                 "larger or fewer matrices"
               : (c.is_torch() ? "if it runs in fp32, autocast to bf16 or allow TF32, and keep its dimensions "
                                 "multiples of 8"
                               : "if it runs in fp32, give it bf16 inputs or TF32 math, and keep its dimensions "
                                 "multiples of 8");
    const std::string rate = rate_note(c, best->key);
    if (kernel != nullptr && kernel->bandwidth_bound()) {
      // Below the ridge point the tensor cores wait on memory: shapes and
      // dtype of the math do not matter, the bytes read do.
      f.advice = "Start with " + name + by + ": " + rate + ". A GEMM this skinny (few rows per weight read, as in "
                 "decoding) is limited by reading its weights, not by math: batch more rows per weight read (larger "
                 "batches, more requests per step) or read fewer bytes (fp8/int4 weights). It holds " +
                 format_pct(100.0 * share) + " of the GPU time, so any gain shows in the step.";
    } else {
      f.advice = "Start with " + name + by + ": " + (rate.empty() ? std::string("compare its achieved TFLOP/s with the GPU's peak") : rate) +
                 "; " + dtype + ". It holds " + format_pct(100.0 * share) + " of the GPU time, so any gain shows in the step.";
    }
  } else if (cls == KernelClass::kOther || cls == KernelClass::kSortScan || cls == KernelClass::kAttention ||
             cls == KernelClass::kConv) {
    // No advice of a class it was not recognised as: where the time goes,
    // and how to see what limits it.
    f.advice = "Start with " + name + by + ": " + count_of(best->count, "call") + " at " + avg + "; " +
               (cls == KernelClass::kOther
                    ? std::string("its kind is not in tprof's kernel-class table, so ")
                    : "a " + std::string(kernel_class_name(cls)) + " kernel, which tprof does not measure against a peak, so ") +
               "profile it with " + (c.is_hip() ? "rocprof (Omniperf)" : "Nsight Compute") +
               " to see whether memory or math limits it. It holds " + format_pct(100.0 * share) +
               " of the GPU time, so any gain shows in the step.";
  } else {
    f.advice = "Start with " + name + by + ": " + count_of(best->count, "call") + " at " + avg +
               "; fuse it with the ops around it (" + c.fuse_how() + ") or check whether its input sizes and dtype can shrink. "
               "It holds " + format_pct(100.0 * share) + " of the GPU time, so any gain shows in the step.";
  }
  // On the host, calls whose time a few outliers hold: the mean is no
  // call's cost, and the outliers are the host's state, not the op (issue
  // 38's fourth round: a CPU ResNet's convolutions, median 10.3 ms, 5 of 200
  // calls at 53-386 ms holding 38% of their time, iterations 232-960 ms).
  if (!device && instances.size() >= kMinSpreadCalls) {
    std::vector<std::int64_t> d;
    std::int64_t sum = 0;
    for (std::uint32_t e : instances) {
      d.push_back(c.dur(e));
      sat_acc(sum, c.dur(e));
    }
    std::sort(d.begin(), d.end());
    const std::int64_t median = mean_median(d);
    std::int64_t top = 0;
    for (std::size_t i = 0; i < kSpreadTop; ++i) sat_acc(top, d[d.size() - 1 - i]);
    const double top_share = sum > 0 ? static_cast<double>(top) / static_cast<double>(sum) : 0;
    // Where the calls record their shapes, a call is slow against the
    // later calls on its own shapes: a first 7x7 convolution or each
    // shape's first call (its set-up) is other work, not the host's
    // noise (issue 38's tenth round, the review of its new lines: a CPU
    // ResNet's longest convolutions were the stem and each shape's first).
    // Read only where the longest call is kSpreadFactor x the median (each
    // call's args are parsed).
    const bool spread = static_cast<double>(d.back()) >= kSpreadFactor * static_cast<double>(median);
    std::map<std::string, std::vector<std::uint32_t>> by_shape;
    bool shapes = false;
    for (std::size_t i = 0; spread && i < instances.size(); ++i) {
      std::string dims = input_dims_text(c.trace, instances[i]);
      shapes = shapes || !dims.empty();
      by_shape[std::move(dims)].push_back(instances[i]);  // in start order
    }
    std::int64_t noisy = 0;         // later calls at kSpreadFactor x their shape's median or more
    std::int64_t noisy_excess = 0;  // their time over that median
    double later_ratio = 0;         // the largest later call over its shape's median
    for (auto& [dims, calls] : by_shape) {
      if (calls.size() < 3) continue;
      std::vector<std::int64_t> later;
      for (std::size_t i = 1; i < calls.size(); ++i) later.push_back(c.dur(calls[i]));
      const std::int64_t m = mean_median(later);
      for (std::size_t i = 1; i < calls.size(); ++i) {
        if (m > 0) later_ratio = std::max(later_ratio, static_cast<double>(c.dur(calls[i])) / static_cast<double>(m));
        if (static_cast<double>(c.dur(calls[i])) >= kSpreadFactor * static_cast<double>(m)) {
          ++noisy;
          sat_acc(noisy_excess, sat_sub(c.dur(calls[i]), m));
        }
      }
    }
    // Many slow later calls spread the host's noise too thin for the five
    // longest to show it (issue 38's twenty-first round: a container's
    // ResNet-18, 13 later convolutions 5x or more past their shape's
    // median, 4.06 s over it, the five longest 27.6% of the calls' time:
    // "53.577 ms each" where a call takes 22.8 ms, read as their cost).
    const bool spread_noise = shapes && noisy >= static_cast<std::int64_t>(kSpreadTop) &&
                              static_cast<double>(noisy_excess) >= kNoiseShare * static_cast<double>(sum);
    if (spread && (top_share >= kSpreadShare || spread_noise)) {
      f.evidence.num("median_call_ns", median).real("longest_5_pct", 100.0 * top_share).num("max_call_ns", d.back());
      f.title += "; median " + format_ns(median) + " a call, the 5 longest hold " + format_pct(100.0 * top_share);
      const std::string vary = "The calls vary: median " + format_ns(median) + ", the longest " + format_ns(d.back()) +
                               ", and the 5 longest hold " + format_pct(100.0 * top_share) + " of their time";
      // The op's first call holding half its time or more is its one-time
      // set-up (a GPU library's handles and algorithm search, the CUDA
      // context, the first allocation), not the host's noise (issue 38's
      // fifteenth round: a Jetson's first cudnn_convolution, 2.336 s of
      // 2.356 s, told to check its threads).
      const std::uint32_t first_call = *std::min_element(
          instances.begin(), instances.end(), [&](std::uint32_t a, std::uint32_t b) { return c.ts(a) < c.ts(b); });
      if (sat_mul(2, c.dur(first_call)) >= sum && c.dur(first_call) == d.back()) {
        f.evidence.num("first_call_ns", c.dur(first_call)).event("first_call", c.ref(first_call));
        f.advice = "Warm up before recording (run the model once first, or give the schedule wait and warmup steps): "
                   "the first of the " + std::to_string(instances.size()) + " calls takes " +
                   format_ns(c.dur(first_call)) + " of their " + format_ns(sum) + ", against a median of " +
                   format_ns(median) + ": one-time set-up (" +
                   (is_gpu_library_op(name) ? std::string("the GPU library's handles and algorithm search, the CUDA "
                                                          "context")
                                            : std::string("the library initialising, the first allocation")) +
                   "), not what each call costs.";
      } else if (shapes && noisy < static_cast<std::int64_t>(kSpreadTop)) {
        // The op's own fix first; the spread is how to read its time (issue
        // 38's twenty-first round: a one-pass ResNet-34's card printed only
        // "time warmed-up calls", and "the later calls agree" where two ran
        // 1.5x their shape's median).
        f.evidence.num("slow_later_same_shape_calls", noisy).real("later_call_max_ratio", later_ratio);
        char within[32];
        std::snprintf(within, sizeof within, "%.1fx", later_ratio);
        f.advice += " " + vary + ": the longest are other shapes or each shape's first call (its set-up), and " +
                    (later_ratio > 0 ? "a later call on the same shape takes at most " + std::string(within) +
                                           " that shape's median"
                                     : std::string("no shape runs more than once after its first call")) +
                    "; time warmed-up calls and compare per shape.";
      } else {
        if (shapes) f.evidence.num("slow_later_same_shape_calls", noisy);
        // What the host's noise cost: the slow later calls' time over their
        // shapes' medians, the impact (issue 38's fourteenth round: a CPU
        // ResNet-18's one 7.84 s convolution, where its shape takes 14-22
        // ms, ranked below a 184 ms batch-norm fix as an info line).
        if (shapes && noisy_excess > 0) {
          f.evidence.num("host_noise_excess_ns", noisy_excess);
          noise_ns = noisy_excess;
        }
        // Without shapes the calls may be different work (a model's
        // different layers), not the host's noise (issue 38's twenty-fourth
        // round: a GAN's 20 convolutions a step, its transposed ones' backward
        // 1.5 s each in every step, called "the same op on the same work").
        const std::string threads = c.is_torch() ? "torch.set_num_threads" : "OMP_NUM_THREADS";
        const std::string host_causes = "other processes on its cores, more threads than the cores free to it (" +
                                        threads + "), frequency or memory contention, or a first call's set-up";
        const std::string no_shapes =
            c.trace.meta.producer == Producer::kTorchLegacy
                ? "this export keeps no shapes (the legacy profiler's, from a build without Kineto, drops them "
                  "whatever record_shapes says)"
                : "the trace records no shapes (record_shapes=True would)";
        f.advice = shapes ? vary + ", " + std::to_string(noisy) + " of them later calls on shapes that ran faster" +
                                (noisy_excess > 0 ? " (" + format_ns(noisy_excess) + " over their shapes' medians)"
                                                  : std::string()) +
                                ": the same op on the same work slower by that much is the host, not the op: " +
                                host_causes + "; time warmed-up calls on a quiet host. Then: " + f.advice
                          : vary + ": different inputs (a model's different layers) or the host (" + host_causes +
                                "); " + no_shapes + ", so compare the same call across steps. Then: " + f.advice;
      }
    }
  }
  // A kernel whose grid leaves most of the GPU's SMs idle while it runs:
  // said first, whatever else the fix says (issue 38's fourteenth round: a
  // custom LayerNorm backward, 91% of GPU time in one 256-thread block on
  // a 108-SM A100, was told only that the host sets the pace).
  // The program's own kernel only (no library's name in it): a library's
  // grid follows the problem's size (a 64x64 GEMM's 8 blocks), which its
  // own findings speak to.
  if (device && !comm && !instances.empty() && c.kind(instances.front()) == EventKind::kKernel &&
      !library_kernel(best->key)) {
    const std::int64_t sms = tensor_cores(c.trace).num_sms;
    const std::int64_t blocks = grid_blocks(c.launch_shape(instances.front()));
    if (sms > 0 && blocks > 0 && sat_mul(blocks, kUnderfilledFactor) <= sms) {
      f.evidence.num("grid_blocks", blocks).num("sms", sms);
      f.advice = "Give " + name + " at least one block per SM: its grid is " + count_of(blocks, "block") +
                 " on a GPU of " + std::to_string(sms) + " SMs, so while it runs at most " + std::to_string(blocks) +
                 " of them work (spread the rows or elements over blocks, or a grid-stride loop). " + f.advice;
    }
  }
  // A host op whose time is mostly waits for an unrecorded device (a copy
  // that moved its bytes slower than any copy runs, an .item()): that work's
  // time, not the op's (issue 38's twenty-third round: aten::copy_ 94.9% of
  // a WSL 2 training step, one 516 KB copy taking 1.055 s, told to check
  // the intra-op threads).
  if (!device && !instances.empty() && c.kind(instances.front()) == EventKind::kCpuOp) {
    const std::vector<std::uint32_t> waits = unrecorded_device_waits(c);
    std::int64_t waited = 0, sum_ns = 0;
    std::uint32_t longest = kNoIndex;
    for (std::uint32_t e : instances) {
      sat_acc(sum_ns, c.dur(e));
      if (!std::binary_search(waits.begin(), waits.end(), e, [&](std::uint32_t a, std::uint32_t b) {
            return c.ts(a) != c.ts(b) ? c.ts(a) < c.ts(b) : a < b;
          })) {
        continue;
      }
      sat_acc(waited, c.dur(e));
      if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
    }
    if (longest != kNoIndex && sat_mul(2, waited) >= sum_ns) {
      f.evidence.num("device_wait_ns", waited).event("longest_device_wait", c.ref(longest));
      f.advice = name + "'s time is the host waiting for the device: " + format_ns(waited) + " of its " +
                 format_ns(sum_ns) + " in calls that waited (the longest " + format_ns(c.dur(longest)) +
                 (c.name(longest) == "aten::copy_" ? ", slower than any copy moves its bytes" : "") +
                 ") for work queued before them, which the trace does not "
                 "record. That work is what to make faster; record the device side to see it (device_activity_missing).";
      noise_ns = 0;
    }
  }
  // Where the program's ops stall for whole ticks and most of this op's
  // calls, however long, last a whole number of them too, part of its time
  // is the stalls': they come first (issue 38's twenty-fifth round: a DLA's
  // 1x1 convolutions, exactly 8 ticks in every batch, judged as
  // convolution work and told to use channels_last).
  if (!device) {
    if (const ThreadStalls st = thread_stalls(c); st.found()) {
      if (const CallsOnTicks on = calls_on_ticks(c, best->key, st.tick_ns); on.most()) {
        f.evidence.num("calls_on_ticks", on.on_ticks);
        f.advice = "Fix the thread stalls first (cpu_thread_stall) and profile again: " +
                   std::to_string(on.on_ticks) + " of its " + std::to_string(on.calls) +
                   " calls of 1.5 ms or more last a whole number of scheduler ticks (" + format_ns(st.tick_ns) +
                   ") as the stalled ops do, so part of its time is theirs, not its work's. Then: " + f.advice;
      }
    }
  }
  // Where the time goes, not what a change would save: no impact (the
  // verdict and the efficiency findings say whether it can be faster),
  // except the host's noise, which a quiet host takes back.
  f.impact_ns = noise_ns;
  if (static_cast<double>(noise_ns) >= kNoiseWarnShare * static_cast<double>(c.window_ns())) {
    f.severity = FindingSeverity::kWarning;
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
