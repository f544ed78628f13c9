// fp32_math: fp32 GEMMs and convolutions running without tensor cores on a
// GPU that has them. torch runs float matmuls in full fp32 by default, on
// the CUDA cores (cuBLAS `sgemm`, cuDNN `scudnn`), at a fraction of the
// tensor cores' rate (A100: 19.5 TFLOP/s fp32 vs 156 TF32 and 312 bf16);
// TF32 or autocast puts the same math on the tensor cores. Which kernels
// run fp32 math and by which evidence: src/analyze/efficiency.h,
// fp32_math(). Origin: the TensorBoard plugin's tensor-core check
// (tb_plugin "Kernel using Tensor Cores" / "GPU kernels eligible for
// Tensor Cores"), issue 24 item 4.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"
#include "src/base/ascii.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// Under this GPU busy share the host sets the pace (memory_bound_elementwise's).
constexpr double kMinBusyShare = 0.5;

// A material share: the fp32 math holds at least 20% of the compute kernels'
// time (device time less copies, memsets and collectives: those do no math
// tensor cores could take) and 5% of all device time, 500 us in all, over
// at least 3 kernel instances.
constexpr double kMinComputeShare = 0.20;
constexpr double kMinDeviceShare = 0.05;
constexpr std::int64_t kMinTimeNs = 500'000;
constexpr std::int64_t kMinCount = 3;
// A warning from 20% of all device time.
constexpr double kWarningDeviceShare = 0.20;
// The saving claimed: half the fp32 kernels' time, a 2x speed-up. The peak
// ratios are 8x (A100 fp32 -> TF32) to 16x (-> bf16), but small or
// memory-bound GEMMs gain far less, and autocast adds casts.
constexpr double kSavedFraction = 0.5;
// Kernels named in the title and the fix.
constexpr std::size_t kMaxNamed = 3;

std::string sm_text(const TensorCores& tc) {
  if (tc.amd) return "gfx9." + std::to_string(tc.minor);
  return "sm" + std::to_string(tc.major) + std::to_string(tc.minor);
}

std::string tflops_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.1f", v);
  return b;
}

// "16", "7.5": a speed-up.
std::string ratio_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 10 ? "%.0f" : "%.1f", v);
  std::string o = b;
  if (o.ends_with(".0")) o.resize(o.size() - 2);
  return o;
}

}  // namespace

void rule_fp32_math(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const TensorCores tc = tensor_cores(c.trace);
  // No deviceProperties: the GPU is unknown, so is whether it has tensor
  // cores; a GPU without them (before sm70) has nothing to move the math to.
  if (!tc.known || !tc.fp16) return;
  const Efficiency& eff = c.efficiency();
  const std::int64_t compute_ns = eff.total_ns - eff.class_ns[static_cast<std::size_t>(KernelClass::kComm)] -
                                  eff.class_ns[static_cast<std::size_t>(KernelClass::kCopy)];
  if (compute_ns <= 0) return;
  std::vector<const KernelEfficiency*> fp32;
  std::int64_t time_ns = 0, count = 0;
  bool by_name = false, by_op = false, any_conv = false, any_matmul = false;
  for (const KernelEfficiency& k : eff.kernels) {
    const Fp32Math m = fp32_math(k);
    if (m == Fp32Math::kNo) continue;
    fp32.push_back(&k);
    sat_acc(time_ns, k.time_ns);
    count += k.count;
    (m == Fp32Math::kByName ? by_name : by_op) = true;
    (is_conv_kernel(k) ? any_conv : any_matmul) = true;
  }
  const double of_compute = static_cast<double>(time_ns) / static_cast<double>(compute_ns);
  const double of_device = eff.total_ns > 0 ? static_cast<double>(time_ns) / static_cast<double>(eff.total_ns) : 0;
  if (time_ns < kMinTimeNs || count < kMinCount || of_compute < kMinComputeShare || of_device < kMinDeviceShare) {
    return;
  }
  // eff.kernels is by time, descending: so is fp32.
  std::string names, ops;
  std::vector<std::string> kernel_list, op_list;
  for (const KernelEfficiency* k : fp32) {
    if (kernel_list.size() < kMaxNamed) {
      kernel_list.push_back(k->name);
      names += (names.empty() ? "" : ", ") + title_name(k->name);
    }
    // The op only where it is a GEMM or convolution op: an External id
    // shared with another op must not name aten::clamp_min.
    const std::string op = ascii_lower(k->op);
    const bool math_op = op.find("mm") != std::string::npos || op.find("linear") != std::string::npos ||
                         op.find("conv") != std::string::npos;
    if (math_op && op_list.size() < kMaxNamed &&
        std::find(op_list.begin(), op_list.end(), k->op) == op_list.end()) {
      op_list.push_back(k->op);
      ops += (ops.empty() ? "" : ", ") + k->op;
    }
  }
  const std::string device = tc.device + " (" + sm_text(tc) + ")";
  // Of the compute kernels' time (copies, memsets and layout conversions
  // left out, as the precondition measures it), and of all GPU time.
  const std::string shares = format_pct(100.0 * of_compute) + " of compute kernel time (" + format_ns(time_ns) + ", " +
                             format_pct(100.0 * of_device) + " of GPU time)";

  Finding f;
  f.id = "fp32_math";
  f.severity = of_device >= kWarningDeviceShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "fp32 " + std::string(any_conv && any_matmul ? "GEMMs and convolutions" : any_conv ? "convolutions" : "GEMMs") +
            " without tensor cores on the " + device + ": " + shares + " in " + names;
  f.evidence.text("device", tc.device)
      .num("compute_major", tc.major)
      .num("compute_minor", tc.minor)
      .text("tensor_cores", tc.tf32 ? "fp16, bf16, tf32" : tc.bf16 ? "fp16, bf16" : "fp16")
      .num("fp32_math_ns", time_ns)
      .num("fp32_math_count", count)
      .real("kernel_time_pct", 100.0 * of_compute)
      .real("gpu_time_pct", 100.0 * of_device)
      .num("compute_kernel_ns", compute_ns)
      .texts("kernels", kernel_list)
      .text("evidence", by_name && by_op ? "kernel names (sgemm/scudnn) and the ops' Input type (float)"
                        : by_name        ? "kernel names (sgemm/scudnn: fp32 on the CUDA cores)"
                                         : "the ops' Input type (float) and GEMM kernels without a tensor-core mark");
  if (!op_list.empty()) f.evidence.texts("ops", op_list);
  const std::string touch =
      "; it would touch " + shares + (ops.empty() ? ", " + title_name(fp32.front()->name) + " first" : ": " + ops);
  // The peaks of docs/peaks.md: what each fix can gain at most, the ratio
  // of the tensor-core peak to the fp32 one (the device's, in the fix).
  const double fp32_peak = eff.peak != nullptr ? eff.peak->fp32_tflops : 0;
  const double bf16_peak = eff.peak != nullptr && tc.bf16 ? eff.peak->bf16_tflops : 0;
  const double tf32_peak = eff.peak != nullptr && tc.tf32 && !tc.amd ? eff.peak->tf32_tflops : 0;
  // GeForce and workstation Ampere/Ada (sm86, sm89: RTX 30xx/40xx, A5000,
  // A40) run dense TF32 at about their fp32 peak or below (RTX 3090: 35.6
  // fp32, 17.8 TF32 dense), unlike the A100's 8x: TF32 is no cheap fix there
  // (issue 38, fifth round: an RTX 3060 and a 3090 Ti). The L4, sm89 with
  // datacenter rates, is in the peak table and keeps its 2x. GeForce and
  // workstation Blackwell (sm120/sm121: RTX 50xx, RTX PRO) likewise (RTX
  // 5090: 104.8 fp32 and 104.8 TF32 dense; issue 38, sixth round: an RTX
  // 5060 Laptop GPU was given the TF32 cheap fix).
  const bool consumer = eff.peak == nullptr && ((tc.major == 8 && tc.minor >= 6) || tc.major == 12);
  const bool tf32_gains = tc.tf32 && !consumer;
  // " (bf16: up to 16x the fp32 peak on the A100 40GB, 312 vs 19.5
  // TFLOP/s)" for the first fix, " (TF32: up to 8x, 156 TFLOP/s)" after it.
  auto gain = [&](double tensor_peak, std::string_view dtype, bool first) {
    if (fp32_peak <= 0 || tensor_peak <= 0) return std::string();
    const std::string x = ratio_text(tensor_peak / fp32_peak) + "x";
    if (!first) return " (" + std::string(dtype) + ": up to " + x + ", " + tflops_text(tensor_peak) + " TFLOP/s)";
    return " (" + std::string(dtype) + ": up to " + x + " the fp32 peak on the " + std::string(eff.peak->name) + ", " +
           tflops_text(tensor_peak) + " vs " + tflops_text(fp32_peak) + " TFLOP/s)";
  };
  if (fp32_peak > 0 && (bf16_peak > 0 || tf32_peak > 0)) {
    f.evidence.real("fp32_peak_tflops", fp32_peak).real("tensor_peak_tflops", bf16_peak > 0 ? bf16_peak : tf32_peak);
    if (tf32_peak > 0) f.evidence.real("tf32_peak_tflops", tf32_peak);
  }
  std::string fix;
  if (!c.is_torch()) {
    // A C++ program: the libraries' own precision settings, not torch's.
    fix = tc.bf16 ? std::string("Put the fp32 math on the ") + (tc.amd ? "matrix" : "tensor") +
                        " cores: bf16 inputs with fp32 accumulation" + gain(bf16_peak, "bf16", true) +
                        (tf32_peak > 0 && tf32_gains ? "; or, the cheap fix for the GEMMs alone, TF32 math (cuBLAS's "
                                         "CUBLAS_COMPUTE_32F_FAST_TF32)" +
                                             gain(tf32_peak, "TF32", bf16_peak <= 0)
                                       : "")
                  : "Put the fp32 math on the tensor cores: fp16 inputs with fp32 accumulation (this GPU's tensor "
                    "cores take fp16 only: no bf16, no TF32)";
    fix += touch + ".";
  } else if (tc.bf16 && !tc.amd) {
    // The main fix is autocast (bf16: the math and the memory traffic
    // halve); TF32 is the one-line fix for the matmuls, at half bf16's peak
    // and with fp32 traffic (issue 38, Why 5).
    fix = "Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward" +
          gain(bf16_peak, "bf16", true);
    if (any_matmul && !tf32_gains) {
      fix += " (TF32 gains little on this GPU: GeForce and workstation Ampere, Ada and Blackwell run dense TF32 at "
             "about their fp32 peak)";
    } else if (any_matmul && tc.tf32) {
      fix += "; or, the cheap fix for the matmuls alone, torch.backends.cuda.matmul.allow_tf32 = True "
             "(torch.set_float32_matmul_precision(\"high\"))" +
             gain(tf32_peak, "TF32", bf16_peak <= 0);
    }
    fix += touch + ".";
  } else if (tc.bf16) {
    fix = "Put the fp32 math on the matrix cores: torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward" +
          gain(bf16_peak, "bf16", true) + touch + ".";
  } else {
    // sm70/sm75: the table's 16-bit tensor peak is fp16's.
    // GradScaler only where the run trains (an inference run was told to
    // scale its gradients: a T4 ViT forward, issue 38's fourteenth round).
    fix = std::string("Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", dtype=torch.float16) around the "
                      "forward") +
          // torch.amp.GradScaler("cuda") is PyTorch 2.3's spelling; the
          // older one works on every version with autocast (issue 38's
          // fifteenth round: T4 traces of 2023, before 2.3).
          (c.forward_only() ? ""
                            : ", with torch.cuda.amp.GradScaler() for training (torch.amp.GradScaler(\"cuda\") from "
                              "PyTorch 2.3)") +
          gain(eff.peak != nullptr ? eff.peak->bf16_tflops : 0, "fp16", true) + touch +
          "; this GPU's tensor cores take fp16 only (no bf16, no TF32).";
  }
  std::string why = " These kernels run fp32 on the " + std::string(tc.amd ? "vector units" : "CUDA cores");
  if (fp32_peak > 0 && bf16_peak <= 0 && tf32_peak <= 0) {
    why += ", at most " + tflops_text(fp32_peak) + " TFLOP/s on the " + std::string(eff.peak->name);
  }
  why += "; lower-precision inputs with fp32 accumulation are the standard trade for training and inference";
  why += fp32_peak > 0 && eff.peak->bf16_tflops > 0 ? ", and the peak ratio is the most a GEMM gains (small or "
                                                      "memory-bound ones gain less)."
                                                    : ".";
  if (any_conv && tc.tf32 && c.is_torch()) {
    why += " cuDNN allows TF32 for convolutions by default (torch.backends.cudnn.allow_tf32), so fp32 conv kernels "
           "here mean it was turned off or cuDNN chose them: torch.backends.cudnn.benchmark = True lets it time the "
           "tensor-core ones.";
  }
  f.advice = fix + why;
  f.impact_ns = static_cast<std::int64_t>(kSavedFraction * static_cast<double>(time_ns));
  f.evidence.text("saving_basis", "at a 2x speed-up, the least tensor cores give large GEMMs and convolutions");
  // Faster kernels save nothing while the host sets the pace (issue 38's
  // sixth round: "up to 3.655 ms" on an overhead-bound pass, the GPU idle
  // 66.9%; as memory_bound_elementwise says it).
  // Only where the idle time is the host's pacing (launching, host work):
  // start-up or an excerpt's unrecorded time says nothing of the loop.
  // A one-time initialisation (a first launch loading its module) is
  // start-up too: it is left out of both sides, and the rest of the window
  // still judged (issue 38's fourteenth round: a T4 ViT inference step, 27
  // of its 88 ms a cold argmax launch, the GPU busy 40% of the rest, was
  // promised "up to 11.579 ms a step" from faster GEMMs).
  const DiagnoseContext::BusyWindow busy = c.gpu_busy_window();
  const IdlePartition::Totals& idle = c.idle().totals();
  const std::int64_t init = idle[static_cast<std::size_t>(IdleCause::kBlockedInit)];
  const std::int64_t span = std::max<std::int64_t>(0, sat_sub(busy.span_ns, init));
  const double busy_share = span > 0 ? static_cast<double>(busy.busy_ns) / static_cast<double>(span) : 1.0;
  const std::int64_t paced = sat_add(idle[static_cast<std::size_t>(IdleCause::kLaunching)],
                                     idle[static_cast<std::size_t>(IdleCause::kHostWork)]);
  if (busy_share < kMinBusyShare && sat_add(paced, paced) >= sat_sub(c.idle().idle_ns(), init)) {
    f.severity = FindingSeverity::kInfo;
    f.impact_ns = 0;
    f.evidence.real("gpu_busy_pct", 100.0 * busy_share);
    f.advice = not_a_saving_while_idle(busy_share, busy.over_steps, "faster kernels leave the GPU idle longer") + f.advice;
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
